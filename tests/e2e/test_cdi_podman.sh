#!/usr/bin/env bash
# A CDI spec gpubox writes, consumed by a real CDI consumer: Debian 12's podman 4.3 (which
# vendors CDI 0.5), rootless as uid 65534, with runc (crun refuses the hybrid cgroup setup), vfs
# storage and no network, on the simulated GPU host in MIG mode. A rootless runtime binds device
# nodes from the host's /dev, so podman runs in a mount namespace whose /dev holds the simulated
# host's nodes, and whose /run/cdi (= /var/run/cdi, where podman 4.3 looks) is the spec's
# directory. Checks: podman run --device nvidia.com/gpu=0 sees exactly GPU 0's nodes and the
# driver's libraries; --device nvidia.com/gpu=1:1:0 exactly that MIG device's.
export E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a mount namespace with the simulated host's /dev)"
for b in podman runc unshare setpriv; do
    command -v "$b" >/dev/null || skip "$b is missing (apt-get install podman runc uidmap)"
done

T=$(mktemp -d /tmp/gpubox-podman.XXXXXX)
chmod 0755 "$T"
# uid 65534's steps start here: ctest's working directory is in the build tree, which may be
# where that user cannot go (a checkout in root's home, mode 0700), and podman chdirs to it.
cd "$T" || exit 1
# podman leaves a pause process holding its user namespace: ours, ended by its pid file.
stop_all() {
    if [ -s "$T/run/libpod/tmp/pause.pid" ]; then kill "$(cat "$T/run/libpod/tmp/pause.pid")" 2>/dev/null; fi
    rm -rf "$T" "$WORK"
}
trap stop_all EXIT
install -m 0755 "$GPUBOX" "$T/gpubox"
"$FAKE_GPU_HOST" "$T/host" --gpus 2 --mig >/dev/null || { echo "Bail out! fake-gpu-host failed"; exit 1; }
"$T/gpubox" rootfs create "$T/rootfs" >/dev/null && tar -C "$T/rootfs" --owner=0 --group=0 -cf "$T/rootfs.tar" . ||
    { echo "Bail out! rootfs"; exit 1; }
mkdir -m 0755 "$T/home" "$T/cdi" "$T/dev" && mkdir -m 0700 "$T/run" && chown 65534:65534 "$T/home" "$T/cdi" "$T/run"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
        HOME="$T/home" XDG_RUNTIME_DIR="$T/run")

out=$("${NOBODY[@]}" "$T/gpubox" cdi generate --driver-root "$T/host" --output "$T/cdi/nvidia.yaml" 2>&1)
rc=$?
expect_eq "gpubox cdi generate as uid 65534: CDI 0.5.0, which podman 4.3 reads" "$rc:$out" \
    "0:gpubox: wrote \"$T/cdi/nvidia.yaml\" (cdiVersion 0.5.0, 8 devices of nvidia.com/gpu)"

# In a mount namespace of its own: /dev with the simulated host's nodes (and what runc binds
# for any container), /run/cdi the spec's directory; then podman as uid 65534 imports the
# rootfs and runs it once per device given.
cat >"$T/ns.sh" <<EOF
set -e
mount -t tmpfs -o mode=0755 gpubox-podman-dev "$T/dev"
for n in null zero full random urandom tty; do cp -a /dev/\$n "$T/dev/"; done
cp -a "$T/host/dev/." "$T/dev/"
mkdir "$T/dev/pts" "$T/dev/shm"
mount --bind "$T/dev" /dev
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777 gpubox-podman-shm /dev/shm
mount -t tmpfs -o mode=0755 gpubox-podman-run /run
mkdir /run/cdi
mount --bind "$T/cdi" /run/cdi
podman() {
    ${NOBODY[*]} podman --storage-driver vfs --runtime runc --cgroup-manager cgroupfs \
        --events-backend file "\$@"
}
podman import "$T/rootfs.tar" localhost/gpubox-cdi >/dev/null
for dev in "\$@"; do
    echo "== \$dev"
    podman run --rm --network none --device "\$dev" localhost/gpubox-cdi sh -c \
        'for f in /dev/nvidia* /dev/nvidia-caps/*; do [ -c "\$f" ] && stat -c "%n %t:%T" "\$f"; done; ls /usr/lib/x86_64-linux-gnu/libcuda.so.1'
done
EOF
out=$(timeout 300 unshare -m --propagation private bash "$T/ns.sh" nvidia.com/gpu=0 nvidia.com/gpu=1:1:0 2>"$T/err")
rc=$?
expect_eq "podman run --device nvidia.com/gpu=0 and =1:1:0 with gpubox's spec: exactly those nodes" "$rc:$out" "0:== nvidia.com/gpu=0
/dev/nvidia-uvm 1fc:0
/dev/nvidia-uvm-tools 1fc:1
/dev/nvidia2 c3:2
/dev/nvidiactl c3:ff
/usr/lib/x86_64-linux-gnu/libcuda.so.1
== nvidia.com/gpu=1:1:0
/dev/nvidia-uvm 1fc:0
/dev/nvidia-uvm-tools 1fc:1
/dev/nvidia0 c3:0
/dev/nvidiactl c3:ff
/dev/nvidia-caps/nvidia-cap12 f1:c
/dev/nvidia-caps/nvidia-cap13 f1:d
/usr/lib/x86_64-linux-gnu/libcuda.so.1"
[ "$rc" = 0 ] || sed 's/^/# /' "$T/err" | grep -v 'oom_score_adj' | tail -20
finish
