#!/usr/bin/env bash
# Builds the systemd guest for tests/vm: Debian 12 (minbase) with systemd, a D-Bus user bus, a
# kernel and a 6.5 MB initramfs, and a lingering user "tester" (uid 1000). Writes root.img (ext4,
# made without loop mounts), vmlinuz and initrd into OUT. Needs root and Debian's package
# registry. The guest runs whatever the payload disk (/dev/vdb) holds as root, once, at boot:
# everything test-specific lives on that disk, so the image changes only with this file.
# Usage: build_image.sh OUT
set -euo pipefail
out=$1
[ "$(id -u)" = 0 ] || { echo "build_image: needs root (mmdebstrap, file owners in the image)" >&2; exit 1; }
mirror=${GPUBOX_VM_MIRROR:-http://deb.debian.org/debian}
pkgs=systemd,systemd-sysv,udev,dbus,dbus-user-session,libpam-systemd,procps,linux-image-amd64,initramfs-tools,busybox-static
tmp=$(mktemp -d /tmp/gpubox-vm-image.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The unit that runs the payload and powers off, whatever happens.
cat >"$tmp/gpubox-vmtest.service" <<'UNIT'
[Unit]
Description=gpubox VM test payload
Wants=user@1000.service
After=user@1000.service systemd-user-sessions.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gpubox-vmtest
ExecStopPost=/bin/systemctl poweroff --no-block
StandardOutput=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
cat >"$tmp/gpubox-vmtest" <<'RUNNER'
#!/bin/sh
mkdir -p /mnt/payload
if mount -o ro /dev/vdb /mnt/payload; then
    sh /mnt/payload/boot.sh >/dev/ttyS1 2>&1
else
    echo "Bail out! the guest found no payload disk" >/dev/ttyS1
fi
RUNNER

mmdebstrap --quiet --variant=minbase --include="$pkgs" \
    --customize-hook='echo gpubox-vm >"$1/etc/hostname"' \
    --customize-hook='chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash tester' \
    --customize-hook='mkdir -p "$1/var/lib/systemd/linger" && touch "$1/var/lib/systemd/linger/tester"' \
    --customize-hook="install -m 0644 $tmp/gpubox-vmtest.service \"\$1/etc/systemd/system/\"" \
    --customize-hook="install -m 0755 $tmp/gpubox-vmtest \"\$1/usr/local/sbin/\"" \
    --customize-hook='chroot "$1" systemctl enable gpubox-vmtest.service' \
    --customize-hook='echo MODULES=list >"$1/etc/initramfs-tools/conf.d/gpubox-vm.conf"' \
    --customize-hook='printf "virtio_pci\nvirtio_blk\next4\n" >>"$1/etc/initramfs-tools/modules"' \
    --customize-hook='chroot "$1" update-initramfs -u -k all >/dev/null' \
    bookworm "$tmp/root" "$mirror"

mkdir -p "$out"
cp "$tmp"/root/boot/vmlinuz-* "$out/vmlinuz.new"
cp "$tmp"/root/boot/initrd.img-* "$out/initrd.new"
rm -f "$out/root.img.new"
mke2fs -q -t ext4 -L gpubox-vm -d "$tmp/root" "$out/root.img.new" 2G
for f in vmlinuz initrd root.img; do mv "$out/$f.new" "$out/$f"; done
