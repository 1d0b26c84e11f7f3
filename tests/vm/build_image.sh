#!/usr/bin/env bash
# Builds the systemd guest for tests/vm: Debian 12 (minbase) with systemd, a D-Bus user bus, a
# kernel and a 7 MB initramfs, and a lingering user "tester" (uid 1000). Writes root.img (ext4,
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

# The initramfs: only what mounts the root (virtio and ext4, loaded at boot), made once, when the
# kernel is installed, as these files are there before it is.
cat >"$tmp/initramfs-hook" <<'HOOK'
#!/bin/sh
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
for m in virtio_pci virtio_blk ext4; do force_load "$m"; done
HOOK

# CI builds the image on every run (a fresh machine), so it carries only what the guest uses: no
# documentation, and of the kernel's modules only file systems, block and virtio drivers (a
# 314 MB image instead of 711 MB). Most of the build is downloading and unpacking.
mmdebstrap --quiet --variant=minbase --include="$pkgs" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks"' \
    --essential-hook='echo MODULES=list >"$1/etc/initramfs-tools/conf.d/gpubox-vm.conf"' \
    --essential-hook="install -m 0755 $tmp/initramfs-hook \"\$1/etc/initramfs-tools/hooks/gpubox-vm\"" \
    --customize-hook='echo gpubox-vm >"$1/etc/hostname"' \
    --customize-hook='chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash tester' \
    --customize-hook='mkdir -p "$1/var/lib/systemd/linger" && touch "$1/var/lib/systemd/linger/tester"' \
    --customize-hook="install -m 0644 $tmp/gpubox-vmtest.service \"\$1/etc/systemd/system/\"" \
    --customize-hook="install -m 0755 $tmp/gpubox-vmtest \"\$1/usr/local/sbin/\"" \
    --customize-hook='chroot "$1" systemctl enable gpubox-vmtest.service' \
    --customize-hook='for m in "$1"/usr/lib/modules/*/kernel; do
        find "$m" -mindepth 1 -maxdepth 1 ! -name fs ! -name lib ! -name crypto ! -name drivers -exec rm -rf {} +
        find "$m/drivers" -mindepth 1 -maxdepth 1 ! -name block ! -name virtio ! -name char -exec rm -rf {} +
        chroot "$1" depmod -a "$(basename "$(dirname "$m")")"
    done' \
    bookworm "$tmp/root" "$mirror"

mkdir -p "$out"
cp "$tmp"/root/boot/vmlinuz-* "$out/vmlinuz.new"
cp "$tmp"/root/boot/initrd.img-* "$out/initrd.new"
rm -f "$out/root.img.new"
mke2fs -q -t ext4 -L gpubox-vm -d "$tmp/root" "$out/root.img.new" 2G
for f in vmlinuz initrd root.img; do mv "$out/$f.new" "$out/$f"; done
