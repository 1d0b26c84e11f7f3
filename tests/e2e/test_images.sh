#!/usr/bin/env bash
# gpubox pull / images / rmi and `gpubox run IMAGE`, as an ordinary user, from images built here
# (make_images.py): a docker-archive, an OCI layout, an oci-archive and a plain tar, whose layers
# hold whiteouts, an opaque directory, device nodes, setuid/setgid files, a file capability,
# hard links, symlinks out of the image with entries written through them, and a ../ member.
# The registry transport (docker://) is tested against a real registry in test_registry.sh.
E2E_FAKE_HOSTS=1
. "$(dirname "$0")/lib.sh"
command -v skopeo >/dev/null || skip "skopeo is not installed (apt install skopeo)"
[ -n "${E2E_HOST:-}" ] || skip "the simulated GPU host is built as root (run the suite as root; it drops privileges)"
export HOME=$WORK/home GPUBOX_IMAGES=$WORK/store
mkdir -p "$HOME"
B=$WORK/base
make_rootfs "$B"
require_userns "$B"
install -m 0755 "$GPUPROBE" "$B/usr/bin/gpuprobe"
V=$WORK/victim   # a host directory the hostile links point at: nothing may appear in it
mkdir "$V" && echo "host file" >"$V/file"
I=$WORK/images
mkdir "$I"
python3 "$E2E_DIR/make_images.py" "$B" "$I" "$V" || { echo "Bail out! make_images.py failed"; exit 1; }
store_state() { (cd "$GPUBOX_IMAGES" 2>/dev/null && find . -path ./lock -prune -o -printf '%p %y %m %s\n' | LC_ALL=C sort); }

# --- docker-archive: Entrypoint + Cmd, the hostile layer's counts ---
box pull "docker-archive:$I/entry.docker.tar"
expect_eq "pull docker-archive: exit 0" "$rc" 0
expect_eq "pull docker-archive: stdout is the name alone" "$out" "entry"
expect_match "pull: a summary line with the layers and bytes" \
    "$err" '^gpubox: pulled entry \(sha256:[0-9a-f]{12}\): 3 layers, [0-9]+ bytes read, [0-9]+ bytes unpacked; '
expect_match "pull: dropped 2 device nodes, 2 setuid/setgid bits, 1 file capability" "$err" \
    'dropped 2 device nodes, 2 setuid/setgid bits, 1 file capabilities; skipped [0-9]+ unsafe entries$'
expect_match "pull: '../escape', the links written through and the hard link out are skipped" \
    "$err" 'skipped 4 unsafe entries$'
expect_eq "pull: no progress on a non-terminal (one line)" "$(printf '%s\n' "$err" | wc -l)" 1
expect_eq "the hostile links wrote nothing on the host" "$(ls "$V")" "file"
expect_eq "... and the host file a link named is unchanged" "$(cat "$V/file")" "host file"
expect_eq "no '../escape' anywhere in the store or beside it" \
    "$(find "$WORK" -name escape | wc -l)" 0

box run entry
expect_eq "run IMAGE with no CMD: Entrypoint + Cmd" "$out" "entry default-cmd"
box run entry one two
expect_eq "run IMAGE CMD: Entrypoint + CMD (docker's rule)" "$out" "entry one two"

# --- OCI layout: Env, WorkingDir, whiteouts, opaque dirs, links, drops ---
box pull --name envimg "oci:$I/envimg:v1"
expect_eq "pull oci:DIR:TAG --name: exit 0, the name" "$rc $out" "0 envimg"
box run envimg
expect_match "run: the image's Env reaches the workload" "$out" $'^CUDA_VERSION=12.4.0$'
expect_match "run: LD_LIBRARY_PATH from the image" "$out" '^LD_LIBRARY_PATH=/usr/local/cuda/lib64$'
expect_eq "run: WorkingDir is the default cwd" "$(printf '%s\n' "$out" | head -1)" "/work/dir"
box run --env OVERRIDE=cli --workdir /data envimg
expect_match "run: --env overrides the image's Env" "$out" '^OVERRIDE=cli$'
expect_eq "run: --workdir overrides WorkingDir" "$(printf '%s\n' "$out" | head -1)" "/data"
box run envimg /bin/sh -c 'echo data: $(ls /data); echo opq: $(ls /opq); echo hl: $(cat /hl); readlink /etcpass; readlink /abs; ls /abs/ 2>&1 | head -1; cat /pw; echo ro: $(cat /ro/f /ro/g) $(stat -c %a /ro); stat -c "%a %F" /dev/evil /dev/evilblk /usr/bin/suid /usr/bin/sgid 2>&1; test -e /hlout || echo no hlout'
expect_match "whiteout removed data/gone, kept data/keep" "$out" '^data: keep$'
expect_match "the opaque marker hid the lower layer's opq/, kept its own layer's file" \
    "$out" '^opq: new$'
expect_match "a hard link inside the image is kept" "$out" '^hl: kept$'
expect_match "a symlink to /etc/passwd is kept as it is" "$out" '^/etc/passwd$'
expect_match "a symlink out of the image is kept as it is (resolved inside at run time)" \
    "$out" "^$V\$"
expect_match "an entry replacing a link to a host file is a file in the image" \
    "$out" '^replaced the link, not the host file$'
expect_match "a read-only directory took a later layer's file, and stays read-only" \
    "$out" '^ro: in a read-only dir added to a read-only dir 555$'
expect_match "no device node in the image" \
    "$out" "stat: can't stat '/dev/evil': No such file or directory"
expect_match "no setuid bit" "$out" '^755 regular file$'
expect_no_match "no setgid bit either" "$out" '^[24][0-9]{3} regular file$'
expect_match "a hard link out of the image is not there" "$out" '^no hlout$'
box run envimg /bin/sh -c 'ls -a /opq/sub 2>&1; ls /opq'
expect_eq "the opaque marker hid the lower layer's whole subtree" \
    "$out" "ls: /opq/sub: No such file or directory
new"

# The image's environment reaches the workload only: its LD_PRELOAD names a library that
# leaves a mark in every process that loads it. The same library does leave marks on the host
# (shown first), none from gpubox's own processes (the monitor, init, ldconfig).
cat >"$WORK/evil.c" <<'C'
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
    char p[4096];
    snprintf(p, sizeof p, "%s/preloaded.%d", MARKS, (int)getpid());
    FILE* f = fopen(p, "w");
    if (f) fclose(f);
}
C
mkdir "$WORK/marks"
if cc -shared -fPIC -DMARKS="\"$WORK/marks\"" -o "$WORK/evil.so" "$WORK/evil.c" 2>"$WORK/cc.err"; then
    LD_PRELOAD=$WORK/evil.so /bin/true
    expect_eq "the marking library works on the host" "$(ls "$WORK/marks" | wc -l)" 1
    rm -f "$WORK/marks"/*
    box run --driver-root "$E2E_HOST" --gpu 0 envimg /bin/sh -c 'echo $LD_PRELOAD'
    expect_eq "the workload sees the image's LD_PRELOAD" "$out" "$WORK/evil.so"
    expect_eq "no host-side process of gpubox loaded it" "$(ls "$WORK/marks" | wc -l)" 0
    # pull's helpers (skopeo, gpubox-unpack: both dynamically linked) get a cleared environment.
    LD_PRELOAD=$WORK/evil.so "$GPUBOX" pull --name preload "oci-archive:$I/envimg.oci.tar" >/dev/null 2>&1
    LD_PRELOAD=$WORK/evil.so "$GPUBOX" pull --name preload2 "tar:$I/plain.tar" >/dev/null 2>&1
    expect_eq "the caller's LD_PRELOAD reaches neither skopeo nor gpubox-unpack" "$(ls "$WORK/marks" | wc -l)" 0
    "$GPUBOX" rmi preload preload2 >/dev/null
else
    not_ok "cc builds the marking library" "$(cat "$WORK/cc.err")"
fi

# --- the simulated GPU host: the image's CUDA env and the injected driver together ---
H=$E2E_HOST
box run --driver-root "$H" --gpu 0 envimg /bin/sh -c 'echo "$CUDA_VERSION $LD_LIBRARY_PATH $NVIDIA_DRIVER_CAPABILITIES"; ls /dev | grep nvidia | tr "\n" " "; ls /usr/lib/x86_64-linux-gnu/ | grep -c libcuda; nvidia-smi -L'
expect_eq "--gpu 0: the image's CUDA env, its NVIDIA_DRIVER_CAPABILITIES=utility as the default caps (no libcuda, no UVM), nvidia-smi" \
    "$out" \
    "12.4.0 /usr/local/cuda/lib64 utility
nvidia2 nvidiactl 0
GPU 0: Tesla T4 (UUID: GPU-000000a0-1111-2222-3333-444400000010)"
box run --driver-root "$H" --gpu 0 --gpu-caps compute,utility envimg /bin/sh -c 'echo "$CUDA_VERSION"; gpuprobe'
expect_match "--gpu-caps wins over the image's: the image's env" "$out" '^12.4.0$'
expect_match "... and CUDA works" "$out" '^cuInit=0$'
expect_match "... the host driver's libcuda" "$out" '^cuda_driver_version=12040$'
box run --driver-root "$H" envimg /bin/sh -c 'echo $NVIDIA_VISIBLE_DEVICES; ls /dev | grep -c nvidia'
expect_eq "the image's NVIDIA_VISIBLE_DEVICES=all selects no GPU (only --gpu does)" "$out" "all
0"

# --- a run never changes the stored image ---
box images --json
img=$(printf '%s\n' "$out" | sed -n 's/^ *"rootfs": "\(.*\)",\{0,1\}$/\1/p' | head -1)
check "images --json names the stored rootfs (a layered image's is empty: its mount point)" \
    test -d "$img"
first_layer=$(printf '%s\n' "$out" | grep -o '"/[^"]*/layers/sha256/[0-9a-f]*/tree"' | head -1 | tr -d '"')
check "images --json names its layers, stored once in the store's layers/" test -d "$first_layer/usr/bin"
stored_hash() { tree_hash "$(dirname "$img")"; tree_hash "$GPUBOX_IMAGES/layers"; }
before=$(stored_hash)
box run envimg /bin/sh -c 'for d in / /data /ro /usr/bin /work/dir /etc; do echo x >"$d/new" 2>/dev/null; done; rm -rf /data /usr/bin/suid; chmod 777 /ro 2>/dev/null; echo changed >/pw; true'
expect_eq "a run writing everywhere leaves the stored image and its layers as they were" \
    "$(stored_hash)" "$before"

# --- oci-archive and tar: ---
box pull "oci-archive:$I/envimg.oci.tar"
expect_eq "pull oci-archive: the archive's base name" "$rc $out" "0 envimg"
expect_match "pull of a stored digest again reuses it" \
    "$err" '^gpubox: pull: envimg: sha256:[0-9a-f]{12} is stored already: reused it$'
box pull "tar:$I/plain.tar"
expect_eq "pull tar: the file's base name" "$rc $out" "0 plain"
box run plain /bin/sh -c 'pwd; echo $PATH'
expect_eq "a tar: image runs with gpubox's defaults" "$out" "/
/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
box run plain
expect_eq "a tar: image without CMD: 125" "$rc" 125
expect_eq "... one line saying so" \
    "$err" "gpubox: run: missing CMD (image plain has no Entrypoint or Cmd)"

# --- failures: one line, 125, the store unchanged ---
state=$(store_state)
box pull --name bad "oci:$I/corrupt:v1"
expect_eq "a corrupted blob: 125" "$rc" 125
expect_match "a corrupted blob: one line naming a digest mismatch" \
    "$err" "^gpubox: pull oci:$I/corrupt:v1: digest mismatch"
expect_eq "a corrupted blob: exactly one line" "$(printf '%s\n' "$err" | wc -l)" 1
expect_eq "a corrupted blob: the store is unchanged" "$(store_state)" "$state"
box pull "docker-archive:$I/nonexistent.tar"
expect_match "a missing archive: 125, one line" \
    "$rc $err" "^125 gpubox: pull docker-archive:$I/nonexistent.tar: no such file or directory"
box pull --name ../x "tar:$I/plain.tar"
expect_match "a bad --name: 125" "$rc $err" '^125 gpubox: invalid image name "../x"'
box pull --name a//b "tar:$I/plain.tar"
expect_eq "a name with an empty part: 125" "$rc" 125
box pull "docker://127.0.0.1:1/lab/x:1"
expect_match "a registry that is not there: 125, cannot connect" \
    "$rc $err" '^125 gpubox: pull docker://127.0.0.1:1/lab/x:1: cannot connect to 127.0.0.1:1 '
expect_eq "failures left nothing in the store" "$(store_state)" "$state"
GPUBOX_IMAGES=$WORK/fresh/images box pull "docker://127.0.0.1:1/lab/x:1"
expect_eq "a failed first pull: 125, and no store made" "$rc:$(ls -A "$WORK/fresh" 2>&1)" \
    "125:ls: cannot access '$WORK/fresh': No such file or directory"
GPUBOX_IMAGES=$WORK/fresh/images box pull --name bad "oci:$I/corrupt:v1"
expect_eq "a failed first unpack: 125, and no store made" "$rc:$(ls -A "$WORK/fresh" 2>&1)" \
    "125:ls: cannot access '$WORK/fresh': No such file or directory"
box run nosuchimage true
expect_match "run of an unknown image: 125 with a hint to pull" \
    "$rc $err" '^125 gpubox: run: "nosuchimage" is neither a directory nor a pulled image \(.*gpubox pull'

# --- a directory wins over an image of the same name ---
mkdir "$WORK/cwd" && cd "$WORK/cwd" && cp -a "$B" plain && echo dir >plain/which
box run plain /bin/cat /which
expect_eq "a directory named like an image wins" "$out" "dir"
cd "$WORK"

# --- images and rmi ---
box images
expect_match "images: a header" "$out" '^NAME +DIGEST +SIZE +SHARED +UNIQUE +PULLED$'
expect_match "images: entry, with its digest, size, shared (none: a flat image) and unique" \
    "$out" '^entry +sha256:[0-9a-f]{12} +([0-9]+) (KiB|MiB) +0 KiB +\1 \2 +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}$'
expect_eq "images: three names" \
    "$(printf '%s\n' "$out" | tail -n +2 | awk '{print $1}' | tr '\n' ' ')" "entry envimg plain "
digest=$(printf '%s\n' "$out" | awk '$1 == "envimg" {print $2}')
box pull --name envcopy "oci:$I/envimg:v1"
box rmi envimg
expect_eq "rmi: prints the name" "$rc $out" "0 envimg"
box run envcopy /bin/true
expect_eq "rmi of one name keeps the image another name uses" "$rc" 0
box rmi envcopy nosuch
expect_eq "rmi of an unknown name: 125" "$rc" 125
expect_eq "... one line for it" "$err" 'gpubox: rmi: no image "nosuch" (gpubox images lists them)'
expect_eq "the last name's removal removed the image's files" \
    "$(ls "$GPUBOX_IMAGES/blobs/sha256" | grep -c "^${digest#sha256:}")" 0
box rmi entry plain
expect_eq "rmi: everything" \
    "$(ls "$GPUBOX_IMAGES/blobs/sha256" "$GPUBOX_IMAGES/names" "$GPUBOX_IMAGES/tmp" | grep -vc ':$\|^$')" 0

# --- two pulls of one image at once: both succeed, one tree is stored ---
"$GPUBOX" pull --name c1 "oci-archive:$I/envimg.oci.tar" >"$WORK/c1.out" 2>"$WORK/c1.err" &
p1=$!
"$GPUBOX" pull --name c2 "oci-archive:$I/envimg.oci.tar" >"$WORK/c2.out" 2>"$WORK/c2.err"
rc2=$?
wait "$p1"
expect_eq "concurrent pulls: both exit 0 and print their names" \
    "$? $rc2 $(cat "$WORK/c1.out" "$WORK/c2.out" | tr '\n' ' ')" "0 0 c1 c2 "
expect_eq "concurrent pulls: one stored tree" "$(ls "$GPUBOX_IMAGES/blobs/sha256" | wc -l)" 1
box run c1 /bin/cat /data/keep
expect_eq "concurrent pulls: the image runs" "$out" "kept"
expect_eq "concurrent pulls: no temp left" "$(ls "$GPUBOX_IMAGES/tmp" | wc -l)" 0

# --- rmi of an image a running sandbox uses: refused while it runs, and the sandbox never
# sees the lock that tells (what ls inherits: 0, 1, 2; 3 is its own /proc/self/fd) ---
coproc INUSE { exec "$GPUBOX" run c1 /bin/sh -c 'echo "fds:" $(ls /proc/self/fd) &&
    echo ready && read -r line && echo "got $line"'; }
# Copies of its pid and fds: bash unsets INUSE and INUSE_PID once it has reaped the coprocess,
# which may be before this script reads its last line (it was, once, under load).
inuse_pid=$INUSE_PID
exec {inuse_out}<&"${INUSE[0]}" {inuse_in}>&"${INUSE[1]}"
read -r fds <&"$inuse_out"
read -r ready <&"$inuse_out"
expect_eq "in use: the run started" "$ready" "ready"
expect_eq "in use: the workload's fds are 0-2 alone (no lock fd)" "$fds" "fds: 0 1 2 3"
box rmi c2
expect_eq "in use: rmi of a name whose image another name keeps is allowed" "$rc:$out" "0:c2"
box rmi c1
expect_eq "in use: rmi of the running image: 125, nothing on stdout" "$rc:$out" "125:"
expect_eq "in use: one line says why" "$err" \
    "gpubox: rmi: image c1 is in use by a running sandbox"
expect_eq "in use: still listed" "$("$GPUBOX" images | awk 'NR > 1 {print $1}')" "c1"
echo more >&"$inuse_in"
read -r got <&"$inuse_out"
wait "$inuse_pid"
expect_eq "in use: the run went on and ended well" "$?:$got" "0:got more"
exec {inuse_out}<&- {inuse_in}>&-
box rmi c1
expect_eq "in use: after the run, rmi removes it" "$rc:$out:$(ls "$GPUBOX_IMAGES/blobs/sha256")" \
    "0:c1:"
finish
