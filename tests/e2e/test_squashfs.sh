#!/usr/bin/env bash
# Single-file images (#33): `pull --squashfs` keeps an image as one squashfs file in the store,
# `export IMAGE [--overlay DIR] NAME|FILE.sqsh` makes one (mksquashfs; checked here with the
# real unsquashfs), and `run FILE.sqsh` / `run IMAGE` run it: mounted by squashfuse through FUSE
# in the sandbox's user namespace where /dev/fuse is open to the caller, else (one line with the
# reason and the fix) from a tree unsquashfs unpacked once into the caller's store. squashfuse
# runs outside the sandbox's pid namespace with no environment and is gone with the run. An
# overlay's whiteouts and opaque directories become the exported image's deletions; an overlay
# made over one image is refused over another (--force-overlay takes it). Neither the .sqsh nor
# the store is written by a run (content, mtimes and atimes checked).
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    # As root, before lib.sh drops privileges: /dev/fuse's mode as the unprivileged part asks
    # (it writes "open" or "closed" into a request file, and waits for the same word in the ack
    # file), restored when the test ends, whatever happens.
    if [ ! -c /dev/fuse ] || ! command -v mksquashfs >/dev/null || ! command -v squashfuse >/dev/null; then
        if [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; then echo "Bail out! needs /dev/fuse, squashfs-tools and squashfuse"; exit 1; fi
        echo "1..0 # SKIP needs /dev/fuse, squashfs-tools and squashfuse (.ci/install-deps.sh build)"
        exit 77
    fi
    fuse_mode=$(stat -c %a /dev/fuse)
    rr=$(mktemp -d /tmp/gpubox-e2e-squashfs.XXXXXX) && chmod 0755 "$rr" &&
        install -m 0666 /dev/null "$rr/request" && install -m 0644 /dev/null "$rr/ack" ||
        { echo "Bail out! cannot prepare the squashfs test's FUSE switch"; exit 1; }
    (
        while sleep 0.1; do
            want=$(cat "$rr/request" 2>/dev/null)
            case $want in open) chmod 0666 /dev/fuse ;; closed) chmod 0600 /dev/fuse ;; *) continue ;; esac
            echo "$want" >"$rr/ack"
        done
    ) &
    switch=$!
    trap 'kill $switch 2>/dev/null; wait $switch 2>/dev/null; chmod "$fuse_mode" /dev/fuse; rm -rf "$rr"' EXIT
    export E2E_FUSE_SWITCH=$rr
fi
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_FUSE_SWITCH:-}" ] || skip "/dev/fuse's mode is switched as root (run the suite as root)"
fuse() {
    echo "$1" >"$E2E_FUSE_SWITCH/request"
    wait_until 30 grep -qx "$1" "$E2E_FUSE_SWITCH/ack" || { echo "Bail out! /dev/fuse was not made $1"; exit 1; }
}
T2001=978307200
export GPUBOX_IMAGES=$WORK/store
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
echo "the image's own" >"$R/etc/marker"
mkdir -p "$R/opt/d" && echo old >"$R/opt/d/old"
tar -C "$R" -cf "$WORK/img.tar" .

# times FILE...: mtime and atime of each (the atimes aged to 2001 first by age: a read through
# a writable mount would then move them), read before the content's sums, which read them.
age() { touch -a -d "@$T2001" "$@"; }
times() { stat -c '%Y %X' "$@"; }
sums() { sha256sum "$@" | cut -d' ' -f1; }
# The store as a run may not change it: every entry's content, type, mode, size and mtime but
# the unpacked trees' (squashfs/) and the temp space; the image's file's atime too.
store_hash() {
    (cd "$GPUBOX_IMAGES" && find . -mindepth 1 -path ./squashfs -prune -o -path ./tmp -prune -o -path ./lock -prune -o \
        -printf '%p %y %m %s %T@\n' | LC_ALL=C sort) | sha256sum | cut -d' ' -f1
}
fuse_mounts() { grep -c gpubox-squashfs /proc/self/mountinfo; }

# --- FUSE closed (as on this CI machine): pull, export, and runs from the unpacked tree ---
fuse closed
box pull --squashfs --name sq "tar:$WORK/img.tar"
expect_eq "pull --squashfs tar:FILE: exit 0, prints the name" "$rc:$out" "0:sq"
SQ=$(ls "$GPUBOX_IMAGES"/blobs/sha256/*/rootfs.sqsh 2>/dev/null)
check "  the image is one squashfs file in the store" test -f "$SQ"
check "  unsquashfs reads it" sh -c 'unsquashfs -s "$1" >/dev/null' _ "$SQ"
expect_eq "  its rootfs is an empty directory (no tree)" "$(ls -A "$(dirname "$SQ")/rootfs" | wc -l)" 0
expect_match "  unsquashfs lists the image's files" "$(unsquashfs -l "$SQ")" "squashfs-root/etc/marker"
# A digest stored as a tree stays one: pull --squashfs says so and how to get a squashfs file.
GPUBOX_IMAGES=$WORK/store-tree box pull --name tr "tar:$WORK/img.tar"
GPUBOX_IMAGES=$WORK/store-tree box pull --squashfs --name tr "tar:$WORK/img.tar"
expect_eq "pull --squashfs of a digest stored as a tree: says it stays one, and the way to a file" \
    "$rc:$out:$(sed -E 's/sha256:[0-9a-f]{12}/DIGEST/' <<<"$err")" \
    "0:tr:gpubox: pull: tr: DIGEST is stored already, as a tree: reused it, not made a squashfs file (for one: gpubox export tr FILE.sqsh; or gpubox rmi tr, then pull --squashfs again)"
rm -rf "$WORK/store-tree"
box export sq "$WORK/a.sqsh"
expect_eq "export IMAGE FILE.sqsh: exit 0" "$rc:$out" "0:$WORK/a.sqsh"
check "  unsquashfs reads the file" sh -c 'unsquashfs -s "$1" >/dev/null' _ "$WORK/a.sqsh"
box export sq "$WORK/a.sqsh"
expect_eq "export onto an existing file: exit 125" "$rc" 125
expect_match "  one line" "$err" '^gpubox: export: ".*a.sqsh" exists'
sums_before=$(sums "$SQ" "$WORK/a.sqsh")
age "$SQ" "$WORK/a.sqsh"
times_before=$(times "$SQ" "$WORK/a.sqsh")
store_before=$(store_hash)

box run sq cat /etc/marker
expect_eq "run IMAGE (squashfs), FUSE closed: it runs" "$rc:$out" "0:the image's own"
expect_eq "  one line says it runs unpacked, why, and the fix" "$(echo "$err" | wc -l):$(echo "$err" |
    grep -c 'sq: runs from a tree unpacked once into your store, not mounted: open("/dev/fuse"): Permission denied.*fix: as root, chmod 0666 /dev/fuse')" "1:1"
box run "$WORK/a.sqsh" cat /etc/marker
expect_eq "run FILE.sqsh, FUSE closed: it runs" "$rc:$out" "0:the image's own"
expect_match "  the same line" "$err" 'a.sqsh: runs from a tree unpacked once'
trees=$(ls "$GPUBOX_IMAGES/squashfs" | wc -l)
box run "$WORK/a.sqsh" true
expect_eq "  a second run reuses the tree (none unpacked again), quietly" "$rc:$(ls "$GPUBOX_IMAGES/squashfs" | wc -l):$err" "0:$trees:"
box run -v "$WORK/a.sqsh" true
expect_match "  with -v it says so again" "$err" 'a.sqsh: runs from a tree unpacked once'
box run --writable "$WORK/a.sqsh" true
expect_eq "run --writable FILE.sqsh: exit 125" "$rc" 125

# The unpacked trees: a FILE.sqsh's is a cache that prune removes unless a run holds it; a stored
# image's goes with the image (rmi, at the end), never while the image is there.
file_trees() { ls "$GPUBOX_IMAGES/squashfs" | grep -c '^f[0-9][0-9]*-'; }  # f<dev>-<ino>-<size>-<mtime>: not a digest's f...
image_trees() { ls "$GPUBOX_IMAGES/squashfs" | grep -c '^[0-9a-f]\{64\}$'; }
"$GPUBOX" run "$WORK/a.sqsh" sh -c 'echo up; exec sleep 600' >"$WORK/held.out" 2>"$WORK/held.err" &
held_pid=$!
wait_until 60 grep -qx up "$WORK/held.out" ||
    echo "# the held run did not say up in 60 s: $(stat -c '%d %i %s %z' "$WORK/a.sqsh"); $(ls "$GPUBOX_IMAGES/squashfs" | tr '\n' ' '); $(tr '\n' ' ' <"$WORK/held.err")"
box prune
expect_eq "prune while a FILE.sqsh run holds its unpacked tree: kept" "$rc:$(file_trees)" "0:1"
[ "$(file_trees)" = 1 ] || echo "# trees: $(ls "$GPUBOX_IMAGES/squashfs" | tr '\n' ' '); a.sqsh: $(stat -c '%d %i %s %z' "$WORK/a.sqsh"); prune: $(tr '\n' '|' <<<"$out$err")"
expect_match "  and says so" "$out" 'kept 1 unpacked squashfs tree'
kill -TERM "$held_pid"
wait "$held_pid"
box prune
expect_eq "prune once it ended: the file's tree removed, the stored image's kept" \
    "$rc:$(file_trees):$(image_trees)" "0:0:1"
expect_match "  and counted" "$out" ' 1 unpacked squashfs tree, '
box run "$WORK/a.sqsh" cat /etc/marker
expect_eq "  the next run of the file unpacks it again" "$rc:$out:$(file_trees)" "0:the image's own:1"

# --- FUSE open: mounted by squashfuse, nothing unpacked ---
fuse open
rm -rf "${GPUBOX_IMAGES:?}/squashfs"
box run sq cat /etc/marker
expect_eq "run IMAGE (squashfs), FUSE open: it runs, no line" "$rc:$out:$err" "0:the image's own:"
box run "$WORK/a.sqsh" sh -c 'cat /etc/marker; ls /opt/d'
expect_eq "run FILE.sqsh, FUSE open: it runs" "$rc:$out:$err" $'0:the image\'s own\nold:'
expect_eq "  nothing was unpacked (only the mount point)" "$(ls "$GPUBOX_IMAGES/squashfs")" "mnt"
box run --print-plan sq true
expect_match "  --print-plan (reads ROOTFS before the sandbox exists): the tree, and the line says why" \
    "$rc:$err" '^0:gpubox: warning: sq: runs from a tree .*--print-plan, --preflight enforce and --device read ROOTFS'
box check sq
expect_eq "  check IMAGE reads the image's tree: exit 0" "$rc" 0
rm -rf "${GPUBOX_IMAGES:?}/squashfs"
box run "$WORK/a.sqsh" sh -c 'echo x >/etc/marker && cat /etc/marker'
expect_eq "  the root takes writes (the sandbox's layer over the mount)" "$rc:$out" "0:x"
"$GPUBOX" run "$WORK/a.sqsh" sleep 600 >/dev/null 2>&1 &
run_pid=$!
# (eval: the leftovers are looked for again each time, not once before the wait)
wait_until 60 eval '[ -n "$(leftovers "^squashfuse")" ]'
sqf=$(leftovers '^squashfuse' | head -1)
check "  during the run: one squashfuse" test -n "$sqf"
expect_eq "  with no environment" "$(tr -d '\0' <"/proc/$sqf/environ" 2>&1 | wc -c)" 0
expect_eq "  in gpubox's own pid namespace, not the sandbox's (the workload cannot see it)" \
    "$(readlink "/proc/$sqf/ns/pid")" "$(readlink /proc/self/ns/pid)"
expect_eq "  nor in its mount namespace" "$(readlink "/proc/$sqf/ns/mnt")" "$(readlink /proc/self/ns/mnt)"
box run sq sh -c "kill -9 $sqf"
expect_match "  a sandbox cannot signal it (no such process there)" "$rc:$err" '^[1-9].*(No such process|o such process)'
check "  and it still runs" kill -0 "$sqf"
kill -TERM "$run_pid"
wait "$run_pid"
wait_until 30 eval '[ -z "$(leftovers "^squashfuse")" ]'
expect_eq "  the run ended: no squashfuse left" "$(leftovers '^squashfuse')" ""
expect_eq "  and no FUSE mount" "$(fuse_mounts)" 0
expect_eq "the store: unchanged by the runs" "$(store_hash)" "$store_before"

# --- export with a kept overlay: its whiteouts and opaque directories applied ---
OV=$WORK/ov
box run --overlay "$OV" sq sh -c 'echo new >/etc/new && rm /etc/marker && rm -r /opt/d && mkdir /opt/d && echo y >/opt/d/y'
expect_eq "run --overlay DIR over the squashfs image: exit 0" "$rc" 0
box export --overlay "$OV" sq sq2
expect_eq "export --overlay DIR IMAGE NAME: exit 0" "$rc:$out" "0:sq2"
box export --overlay "$OV" sq "$WORK/b.sqsh"
expect_eq "export --overlay DIR IMAGE FILE.sqsh: exit 0" "$rc" 0
expect_eq "  no whiteout device in the file (unsquashfs -lls)" "$(unsquashfs -lls "$WORK/b.sqsh" | grep -c '^c')" 0
check_cmd='cat /etc/new; ls /etc/marker 2>/dev/null || echo marker deleted; ls /opt/d'
want=$'new\nmarker deleted\ny'
box run sq2 sh -c "$check_cmd"
expect_eq "  the new image: the write, the deletion, the opaque directory" "$rc:$out" "0:$want"
box run "$WORK/b.sqsh" sh -c "$check_cmd"
expect_eq "  the new file: the same" "$rc:$out" "0:$want"
fuse closed
box run "$WORK/b.sqsh" sh -c "$check_cmd"
expect_eq "  the new file unpacked (FUSE closed): the same" "$rc:$out" "0:$want"
fuse open

# --- an overlay made over one image, reused over another ---
box run --overlay "$OV" "$WORK/a.sqsh" true
expect_eq "--overlay DIR made over another image: exit 125" "$rc" 125
expect_match "  one line naming both" "$err" "^gpubox: --overlay \"$OV\" was made over image sha256:[0-9a-f]{64}, not squashfs file \"$WORK/a.sqsh\""
expect_match "  a hint naming the flag" "$err" 'gpubox: hint: .*--force-overlay'
box run --overlay "$OV" "$R" true
expect_eq "  over a ROOTFS: exit 125" "$rc" 125
box run --overlay "$OV" --force-overlay "$WORK/a.sqsh" cat /etc/new
expect_eq "  --force-overlay takes it" "$rc:$out" "0:new"
box export --overlay "$OV" sq "$WORK/c.sqsh"
expect_eq "  export of DIR over the image it was not (now) made over: exit 125" "$rc" 125

# --- nothing written by the runs ---
expect_eq "the .sqsh files: mtime and atime unchanged" "$(times "$SQ" "$WORK/a.sqsh")" "$times_before"
expect_eq "  and their content" "$(sums "$SQ" "$WORK/a.sqsh")" "$sums_before"
expect_eq "no squashfuse left" "$(leftovers '^squashfuse')" ""
expect_eq "no FUSE mount left" "$(fuse_mounts)" 0

fuse closed
box run sq true
sq_hex=$(basename "$(dirname "$SQ")")
check "a stored squashfs image's unpacked tree (FUSE closed)" test -d "$GPUBOX_IMAGES/squashfs/$sq_hex"
box rmi sq
expect_eq "rmi IMAGE: its unpacked tree goes with it" "$rc:$(test -e "$GPUBOX_IMAGES/squashfs/$sq_hex" && echo left)" "0:"
finish
