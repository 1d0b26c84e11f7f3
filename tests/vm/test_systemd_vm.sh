#!/usr/bin/env bash
# gpubox on a real systemd host: boots Debian 12 under QEMU's software emulation (this kind of
# machine's /dev/kvm boots no Debian kernel) and runs tests/vm/guest_test.sh there as a
# lingering unprivileged user, whose only way to a cgroup is a systemd scope. TAP on stdout.
# The guest image is built once per package list and image script, into GPUBOX_VM_CACHE
# (default /var/cache/gpubox-vm; needs Debian's package registry the first time). Each run
# boots that image read-only (writes go to a deleted temporary file) with a second disk holding
# gpubox, its sd-bus helper gpubox-scope (GPUBOX_SCOPE, default beside GPUBOX), the probe and the
# test; the guest writes TAP to its second serial port and powers off.
# Nothing is left behind: no qemu process, no mount, no temporary file.
# Usage: test_systemd_vm.sh [--image-only]: --image-only builds the image if needed and stops
# there (ctest runs that beside the other tests, and only the boot alone: it takes both CPUs).
set -euo pipefail
: "${GPUBOX:?set GPUBOX to the gpubox binary}" "${PROBE:?set PROBE to the probe binary}"
GPUBOX_SCOPE=${GPUBOX_SCOPE:-$(dirname "$GPUBOX")/gpubox-scope}
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_DIR=${E2E_DIR:-$VM_DIR/../e2e}
CACHE=${GPUBOX_VM_CACHE:-/var/cache/gpubox-vm}
BOOT_TIMEOUT=${GPUBOX_VM_TIMEOUT:-600}

skip() {
    if [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; then echo "Bail out! $1"; exit 1; fi
    echo "1..0 # SKIP $1"; exit 77
}
[ "$(id -u)" = 0 ] || skip "the guest image is built as root (mmdebstrap)"
[ -x "$GPUBOX_SCOPE" ] || { echo "Bail out! no gpubox-scope at $GPUBOX_SCOPE (build it, or set GPUBOX_SCOPE)"; exit 1; }
for t in qemu-system-x86_64 mmdebstrap mke2fs; do
    command -v "$t" >/dev/null || skip "$t is missing (bash .ci/install-deps.sh)"
done

# The image, rebuilt when build_image.sh (which holds the package list) changes.
key=$(sha256sum "$VM_DIR/build_image.sh" | cut -c1-16)
img=$CACHE/$key
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ ! -s "$img/root.img" ]; then
    echo "# building the guest image into $img (Debian's package registry)"
    t0=$(date +%s)
    bash "$VM_DIR/build_image.sh" "$img" >"$CACHE/build.log" 2>&1 || {
        tail -20 "$CACHE/build.log" | sed 's/^/# /'; rm -rf "$img"; echo "Bail out! guest image build failed"; exit 1; }
    echo "# image built in $(($(date +%s) - t0)) s"
    for old in "$CACHE"/*/; do [ "${old%/}" = "$img" ] || rm -rf "$old"; done
fi
if [ "${1:-}" = --image-only ]; then
    echo "1..1"
    echo "ok 1 - the guest image is in $img"
    exit 0
fi

tmp=$(mktemp -d /tmp/gpubox-vm.XXXXXX)
qemu_pid=
cleanup() {
    if [ -n "$qemu_pid" ]; then kill -TERM "$qemu_pid" 2>/dev/null; wait "$qemu_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
mkdir "$tmp/payload"
# Stripped (install -s): the guest needs no debug information, which makes gpubox a
# RelWithDebInfo build several times its size. The disk is sized from what it carries.
install -s -m 0755 "$GPUBOX" "$tmp/payload/gpubox"
install -s -m 0755 "$GPUBOX_SCOPE" "$tmp/payload/gpubox-scope"
install -s -m 0755 "$PROBE" "$tmp/payload/probe"
install -m 0644 "$VM_DIR/boot.sh" "$VM_DIR/guest_test.sh" "$E2E_DIR/lib.sh" "$tmp/payload/"
payload_mib=$(( $(du -sm "$tmp/payload" | cut -f1) * 2 + 32 ))
mke2fs -q -t ext4 -d "$tmp/payload" "$tmp/payload.img" "${payload_mib}M" >/dev/null

t0=$(date +%s)
# timeout bounds the boot (and passes our TERM on to qemu); the image lock (fd 9) stays with us.
timeout -s KILL "$BOOT_TIMEOUT" qemu-system-x86_64 -accel tcg,tb-size=256 -cpu max -m 1024 -smp 2 \
    -nic none -display none -no-reboot -kernel "$img/vmlinuz" -initrd "$img/initrd" \
    -append "console=ttyS0 root=/dev/vda rw systemd.unified_cgroup_hierarchy=1 panic=-1 quiet" \
    -drive file="$img/root.img",format=raw,if=virtio,snapshot=on \
    -drive file="$tmp/payload.img",format=raw,if=virtio,readonly=on \
    -serial file:"$tmp/console.log" -serial file:"$tmp/results.txt" 9>&- &
qemu_pid=$!
wait "$qemu_pid" || echo "# qemu ended with status $? (137: killed after ${BOOT_TIMEOUT} s)"
qemu_pid=
exec 9>&-

tr -d '\r' <"$tmp/results.txt"
echo "# boot to poweroff: $(($(date +%s) - t0)) s"
if grep -q '^not ok\|^Bail out!' "$tmp/results.txt" || ! grep -q '^1\.\.[1-9]' "$tmp/results.txt"; then
    echo "# the guest's console, last 30 lines:"
    tr -d '\r' <"$tmp/console.log" | tail -30 | sed 's/^/# /'
    exit 1
fi
