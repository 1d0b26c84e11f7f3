#!/usr/bin/env bash
# What `gpubox pull` may write, and where: a layer bomb (a small gzip layer of zeros, a sparse
# member declaring far more than it holds), --max-size, the free space a pull leaves on the
# store's filesystem, and the store's directory, which must be the caller's own on a way no
# other user can change (two real users: 65533 attacks, 65534 pulls). Plain tar layers
# (tar:FILE) go straight to gpubox-unpack, so no skopeo is needed.
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    # Made as root: another user's directories, and a small filesystem for the store.
    st=$(mktemp -d /tmp/gpubox-e2e-store.XXXXXX) && chmod 0755 "$st" &&
        mkdir -m 0755 "$st/theirs" && chown 65533:65533 "$st/theirs" &&
        mkdir -m 0777 "$st/shared" && chown 65533:65533 "$st/shared" &&
        mkdir -m 1777 "$st/sticky" && mkdir -m 0777 "$st/sticky/attacker" &&
        chown 65533:65533 "$st/sticky/attacker" &&
        setpriv --reuid=65533 --regid=65533 --clear-groups ln -s "$st/sticky/attacker" "$st/sticky/images" &&
        mkdir "$st/small" && mount -t tmpfs -o size=48m,mode=0755,uid=65534,gid=65534 gpubox-e2e "$st/small" ||
        { echo "Bail out! cannot make the other user's directories"; exit 1; }
    trap 'umount "$st/small"; rm -rf "$st"' EXIT
    export E2E_STORES=$st
fi
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_STORES:-}" ] || skip "two users' directories are made as root (run the suite as root; it drops privileges)"
S=$E2E_STORES
B=$WORK/base
make_rootfs "$B"
require_userns "$B"
tar -C "$B" -cf "$WORK/base.tar" .
export GPUBOX_IMAGES=$WORK/store
store_state() { (cd "$1" 2>/dev/null && find . -path ./lock -prune -o -printf '%p %y %s\n' | LC_ALL=C sort); }
# refused DESC WANT-REGEX: the last `box` failed with exit 125 and exactly one line (or a line
# and its hint) matching WANT.
refused() {
    expect_eq "$1: exit 125" "$rc" 125
    expect_match "$1: the reason" "$err" "$2"
    expect_eq "$1: one line, and a hint at most" "$(printf '%s\n' "$err" | grep -vc '^gpubox: hint: ')" 1
}

# --- a legitimate image pulls and runs ---
box pull --name base "tar:$WORK/base.tar"
expect_eq "pull of a real rootfs: exit 0" "$rc" 0
box run base cat /etc/os-release
expect_eq "... and it runs" "$rc" 0
before=$(store_state "$GPUBOX_IMAGES")

# --- a decompression bomb: 300 MiB of zeros in a gzip layer of 300 KiB ---
truncate -s 300M "$WORK/zeros"
tar -C "$WORK" -czf "$WORK/bomb.tar.gz" zeros && rm "$WORK/zeros"
box pull --name bomb "tar:$WORK/bomb.tar.gz"
refused "a gzip layer expanding 1000 times" \
    '^gpubox: pull tar:.*bomb\.tar\.gz: .*"zeros": the layer expands to more than 100 times its compressed size of [0-9]+ KiB \([0-9]+ MiB so far\), which no real layer does: a decompression bomb$'
expect_eq "... stores nothing (no temp directory left, no name, no tree)" \
    "$(store_state "$GPUBOX_IMAGES")" "$before"

# --- --max-size, the whole image's declared size ---
box pull --name small --max-size 1M "tar:$WORK/base.tar"
refused "--max-size 1M: a rootfs of a few MiB" \
    '^gpubox: pull tar:.*: ".*": the image unpacks to more than --max-size 1 MiB \([0-9]+ (KiB|MiB) so far\)$'
expect_eq "... stores nothing" "$(store_state "$GPUBOX_IMAGES")" "$before"
box pull --name small --max-size 1X "tar:$WORK/base.tar"
expect_eq "--max-size takes a SIZE" "$rc $err" "125 gpubox: --max-size: invalid size \"1X\" (e.g. 4096B, 64K, 256M, 2G)"
# A sparse member counts by its declared size, not by the blocks it takes.
truncate -s 1G "$WORK/sparse"
tar -C "$WORK" --sparse -czf "$WORK/sparse.tar.gz" sparse && rm "$WORK/sparse"
box pull --name sparse --max-size 512M "tar:$WORK/sparse.tar.gz"
refused "a sparse 1 GiB member against --max-size 512M" \
    '"sparse": the image unpacks to more than --max-size 512 MiB \(1\.0 GiB so far\)$'
expect_eq "... stores nothing" "$(store_state "$GPUBOX_IMAGES")" "$before"

# --- the store's filesystem keeps free space: a 48 MiB store, a layer of 60 MiB (zeros:
# below the ratio's floor) ---
truncate -s 60M "$WORK/zeros60"
tar -C "$WORK" -czf "$WORK/z60.tar.gz" zeros60 && rm "$WORK/zeros60"
small=$(df --output=used "$S/small" | tail -1)
GPUBOX_IMAGES=$S/small/store box pull --name z60 "tar:$WORK/z60.tar.gz"
refused "a 60 MiB member into a 48 MiB store" \
    '"zeros60": the store.s filesystem has [0-9]+ MiB free, and this needs 60 MiB more while a pull leaves [0-9]+ KiB \(1 %, at most 1 GiB\) free$'
expect_eq "... wrote nothing there (and left no store)" "$(df --output=used "$S/small" | tail -1) $(ls -A "$S/small")" "$small "
GPUBOX_IMAGES=$S/small/store box pull --name base "tar:$WORK/base.tar"
expect_eq "... while a real rootfs fits" "$rc" 0

# --- the store's directory: the caller's own, on a way only root and the caller can change ---
GPUBOX_IMAGES=$S/theirs box pull --name base "tar:$WORK/base.tar"
refused "a store another user owns" "^gpubox: image store \"$S/theirs\" belongs to uid 65533, not to you \(uid 65534\)$"
expect_match "... and the hint names the fix" "$err" '^gpubox: hint: set GPUBOX_IMAGES to a directory of your own'
expect_eq "... nothing written into it" "$(ls -A "$S/theirs")" ""
GPUBOX_IMAGES=$S/theirs box images
refused "images: the same store" "belongs to uid 65533, not to you"
GPUBOX_IMAGES=$S/theirs box run base true
refused "run IMAGE: the same store" "belongs to uid 65533, not to you"
GPUBOX_IMAGES=$S/shared/mine box pull --name base "tar:$WORK/base.tar"
refused "a store below a directory another user owns and anyone may write" \
    "^gpubox: image store \"$S/shared/mine\": \"$S/shared\" belongs to uid 65533$"
expect_eq "... nothing made there" "$(ls -A "$S/shared")" ""
GPUBOX_IMAGES=$S/sticky/images box pull --name base "tar:$WORK/base.tar"
refused "a symlink another user planted in a sticky directory, to a directory they can write" \
    "^gpubox: image store \"$S/sticky/images\" is a symlink of uid 65533$"
expect_eq "... nothing of the image in the attacker's directory" "$(ls -A "$S/sticky/attacker")" ""
mkdir -m 0777 "$WORK/open"
chmod 0777 "$WORK/open"
GPUBOX_IMAGES=$WORK/open box pull --name base "tar:$WORK/base.tar"
refused "a store of one's own that anyone may write" "^gpubox: image store \"$WORK/open\" is writable by others \(mode 0777\)$"
expect_match "... the hint says chmod go-w" "$err" "^gpubox: hint: chmod go-w \"$WORK/open\", or set GPUBOX_IMAGES"
ln -s store "$WORK/mine"
GPUBOX_IMAGES=$WORK/mine box run base true
expect_eq "a symlink of one's own to one's store is followed" "$rc" 0
finish
