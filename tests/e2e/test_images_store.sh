#!/usr/bin/env bash
# The image store as a user of a cluster meets it, against a real registry on loopback (TLS and
# basic auth, tests/e2e/registry_lib.sh) serving two images that share their base and data
# layers: pull progress on a terminal and off one, --quiet; local names with '/', a SOURCE
# without a transport, a hint for `run FILE.tar`; and a site store (GPUBOX_IMAGES_RO) that
# another uid filled and made read-only, which a user runs from and never writes, not even an
# access time.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/registry_lib.sh"

# As root, before lib.sh drops to uid 65534: the registry (root's), the images pushed to it,
# and the site store, filled by uid 65533 (the "admin") with gpubox pull and left read-only.
setup() {
    REG_TOP=$(mktemp -d /tmp/gpubox-store.XXXXXX)
    trap 'reg_stop_all; rm -rf "$REG_TOP"' EXIT
    trap 'exit 143' TERM INT HUP
    reg_init "$REG_TOP" || bail "cannot make the test CA and htpasswd"
    reg_start main tls && REG_TLS_PORT=$REG_PORT || bail "cannot start the TLS registry"
    case $(uname -m) in
        x86_64) REG_ARCH=amd64 ;;
        aarch64) REG_ARCH=arm64 ;;
        *) bail "no test images for $(uname -m)" ;;
    esac
    "$GPUBOX" rootfs create "$REG_TOP/base" >/dev/null || bail "gpubox rootfs create failed"
    python3 "$HERE/oci_image.py" pair "$REG_TOP/oci" --base "$REG_TOP/base" --arch "$REG_ARCH" \
        --mib 8 || bail "oci_image.py failed"
    local main=docker://127.0.0.1:$REG_TLS_PORT/lab
    reg_push "oci:$REG_TOP/oci:one" "$main/one:1" && reg_push "oci:$REG_TOP/oci:two" "$main/two:1" ||
        bail "skopeo copy to the registry failed"
    REG_CA=$REG_TOP/ca/ca.crt
    # The admin's pull, with gpubox and its unpacker where uid 65533 can run them.
    mkdir -p "$REG_TOP/bin" "$REG_TOP/admin" && chmod 0755 "$REG_TOP/bin" &&
        install -m 0755 "$GPUBOX" "$(dirname "$GPUBOX")/gpubox-unpack" "$REG_TOP/bin/" &&
        reg_user_config "$REG_TOP/admin" "$REG_TLS_PORT" && chown -R 65533:65533 "$REG_TOP/admin" ||
        bail "cannot prepare the admin's pull"
    SITE=$REG_TOP/site
    mkdir "$SITE" && chown 65533:65533 "$SITE" && chmod 0700 "$SITE" || bail "cannot make $SITE"
    (cd "$REG_TOP/admin" && setpriv --reuid=65533 --regid=65533 --clear-groups \
        env -i PATH=/usr/bin:/bin HOME="$REG_TOP/admin" GPUBOX_IMAGES="$SITE" \
        "$REG_TOP/bin/gpubox" pull --name site-only "$main/two:1" >/dev/null &&
        setpriv --reuid=65533 --regid=65533 --clear-groups \
            env -i PATH=/usr/bin:/bin HOME="$REG_TOP/admin" GPUBOX_IMAGES="$SITE" \
            "$REG_TOP/bin/gpubox" pull --name shared "$main/one:1" >/dev/null) ||
        bail "the admin's pull into the site store failed"
    # The store's own directories read-only for everyone, the admin too (the images' trees keep
    # their own modes, as pulled); none of it is uid 65534's.
    chmod 0555 "$SITE" "$SITE/names" "$SITE/blobs" "$SITE/blobs/sha256" "$SITE/tmp" ||
        bail "cannot make the site store read-only"
    # Access times older than the modification times: any read (relatime) would update them.
    find "$SITE" -exec touch -a -h -d @1000000000 {} + || bail "cannot age the site store"
    export REG_TLS_PORT REG_CA REG_USER REG_PASS SITE
}
bail() { echo "Bail out! $*"; exit 1; }

if [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    : "${GPUBOX:?set GPUBOX to the gpubox binary}"
    reg_require_tools
    [ "$(id -u)" = 0 ] || { echo "1..0 # SKIP the site store is filled by another uid (run as root)"; exit 77; }
    setup
fi
. "$HERE/lib.sh"
command -v script >/dev/null || { echo "Bail out! script(1) (bsdutils) is missing"; exit 1; }

make_rootfs "$WORK/rootfs"
require_userns "$WORK/rootfs"
unset XDG_RUNTIME_DIR XDG_DATA_HOME XDG_CONFIG_HOME REGISTRY_AUTH_FILE DOCKER_CONFIG GPUBOX_IMAGES_RO
export HOME=$WORK/home GPUBOX_IMAGES=$WORK/store
mkdir -p "$HOME"
reg_user_config "$HOME" "$REG_TLS_PORT"
R=127.0.0.1:$REG_TLS_PORT

# --- progress, off a terminal: one line per layer, then the summary
box pull "docker://$R/lab/one:1"
printf '# %s\n' "$err"
expect_eq "pull off a terminal: exit 0, the name" "$rc:$out" "0:one:1"
expect_eq "pull off a terminal: one line per layer (3), then the summary" \
    "$(grep -cE '^gpubox: pull: layer [1-3]/3 sha256:[0-9a-f]{12}: [0-9.]+ [KMG]?i?B' <<<"$err")" 3
expect_match "pull off a terminal: the summary line last" "$(tail -1 <<<"$err")" '^gpubox: pulled one:1 '
expect_eq "pull off a terminal: nothing else" "$(wc -l <<<"$err")" 4

# --- --quiet: the name alone
box pull --quiet "docker://$R/lab/two:1"
expect_eq "pull --quiet: exit 0, the name on stdout" "$rc:$out" "0:two:1"
expect_eq "pull --quiet: nothing on stderr" "$err" ""

# --- on a terminal: each layer's bytes, total and rate, redrawn in place, then the summary
at_terminal() {
    timeout 300 script -qec "$1" /dev/null </dev/null 2>&1
}
tty_out=$(GPUBOX_IMAGES=$WORK/store-tty at_terminal "\"$GPUBOX\" pull docker://$R/lab/one:1")
printf '# %s\n' "$(tr '\r' '|' <<<"$tty_out" | tail -c 600)"
expect_match "pull at a terminal: a layer's bytes of its total and a rate" "$tty_out" \
    'sha256:[0-9a-f]{12} +[0-9.]+ [KMG]?i?B */ *[0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B/s'
expect_match "pull at a terminal: redrawn in place (cursor moves up or carriage returns)" \
    "$tty_out" $'(\r|\033\\[[0-9]*A)'
expect_match "pull at a terminal: ends with the summary line" \
    "$(tr '\r' '\n' <<<"$tty_out" | sed $'s/\033\\[K//g' | grep -v '^\s*$' | tail -2 | head -1)" '^gpubox: pulled one:1 '
rm -rf "$WORK/store-tty"

# --- layers stored once: two tags sharing their base take its size once
S2=$WORK/store2
store_kib() { du -sk "$S2" | cut -f1; }
GPUBOX_IMAGES=$S2 box pull --quiet "docker://$R/lab/one:1"
one_kib=$(store_kib)
GPUBOX_IMAGES=$S2 box pull "docker://$R/lab/two:1"
both_kib=$(store_kib)
printf '# store: %s KiB with one:1, %s KiB with two:1 too\n' "$one_kib" "$both_kib"
expect_eq "two tags pulled" "$rc:$out" "0:two:1"
expect_eq "  the 2 layers stored already say so in their lines" \
    "$(grep -cE '^gpubox: pull: layer [1-3]/3 sha256:[0-9a-f]{12}: .*, already stored: not unpacked again$' <<<"$err")" 2
check "the second tag adds less than 10 % (its own layer, not the shared 12 MiB again)" \
    test $((both_kib - one_kib)) -lt $((one_kib / 10))
expect_eq "the store holds four layer trees for the two images (2 shared, 1 each of their own)" \
    "$(ls "$S2/layers/sha256" | wc -l)" 4
GPUBOX_IMAGES=$S2 box images
printf '# %s\n' "$out"
expect_match "images: SHARED and UNIQUE columns" "$out" '^NAME +DIGEST +SIZE +SHARED +UNIQUE +PULLED$'
shared_of() { awk -v n="$1" '$1 == n { print $5, $6 }' <<<"$out"; }
check "  the two tags share the same bytes, more than none" \
    test "$(shared_of one:1)" = "$(shared_of two:1)" -a "$(shared_of one:1 | cut -d' ' -f1)" -gt 0
expect_eq "  the rows line up under the header (PULLED)" \
    "$(sed -E '1s/PULLED$//; 2,$s/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]+$//' <<<"$out" | awk '{ print length($0) }' | sort -u | wc -l)" 1
GPUBOX_IMAGES=$S2 box images --json
expect_eq "images --json: shared_size_bytes + unique_size_bytes = size_bytes, shared > 0" \
    "$(python3 -c 'import json,sys
for i in json.load(sys.stdin):
    print(i["name"], i["shared_size_bytes"] + i["unique_size_bytes"] == i["size_bytes"], i["shared_size_bytes"] > 0)' <<<"$out")" \
    "one:1 True True"$'\n'"two:1 True True"
GPUBOX_IMAGES=$S2 box run one:1
expect_eq "run one:1: its layers stacked" "$rc:$out" "0:one"
GPUBOX_IMAGES=$S2 box run two:1 sh -c 'cat /marker; ls /data; stat -c %s /data/blob'
expect_eq "run two:1: its own layer over the shared ones" "$rc:$out" $'0:two\nblob\n8388608'
# A running sandbox holds its image, and so its layers: rmi refuses, prune keeps them.
mkdir "$WORK/sync"
GPUBOX_IMAGES=$S2 "$GPUBOX" run --bind "$WORK/sync:/sync" one:1 \
    sh -c 'touch /sync/ready; while [ ! -e /sync/stop ]; do sleep 0.1; done' &
bg=$!
wait_until 120 test -e "$WORK/sync/ready"
GPUBOX_IMAGES=$S2 box rmi one:1
expect_eq "rmi of an image a sandbox runs: 125" "$rc" 125
mkdir "$S2/tmp/pull-2147483646-leftover"  # a pull whose process is gone
GPUBOX_IMAGES=$S2 box prune
expect_eq "prune while it runs: only the dead pull's leftover goes" "$rc:$out" \
    "0:pruned 0 images, 0 layers, 0 unpacked squashfs trees, 1 leftover"
expect_eq "... every layer kept" "$(ls "$S2/layers/sha256" | wc -l)" 4
touch "$WORK/sync/stop"
wait "$bg"
GPUBOX_IMAGES=$S2 box rmi two:1
expect_eq "rmi two:1: its own layer goes, the shared ones stay" \
    "$rc:$(ls "$S2/layers/sha256" | wc -l)" "0:3"
GPUBOX_IMAGES=$S2 box run one:1
expect_eq "one:1 still runs" "$rc:$out" "0:one"
GPUBOX_IMAGES=$S2 box rmi one:1
expect_eq "rmi of the last image: every layer goes" "$rc:$(ls -A "$S2/layers/sha256")" "0:"
# --flat: one tree, as every image was stored before layers were shared (and still runs so).
GPUBOX_IMAGES=$WORK/store3 box pull --quiet --flat "docker://$R/lab/one:1"
expect_eq "pull --flat: no layer trees, the image's rootfs the whole tree" \
    "$rc:$(ls -A "$WORK/store3/layers/sha256"):$(ls "$WORK/store3"/blobs/sha256/*/rootfs/data)" "0::blob"
GPUBOX_IMAGES=$WORK/store3 box run one:1
expect_eq "a flat (old-layout) image runs as before" "$rc:$out" "0:one"
GPUBOX_IMAGES=$S2 box prune extra
expect_eq "prune takes no argument: 125" "$rc" 125

# --- frictions
box pull --quiet --name lab/py "docker://$R/lab/one:1"
expect_eq "pull --name lab/py: a local name may contain '/'" "$rc:$out:$err" "0:lab/py:"
box run lab/py
expect_eq "run lab/py: the stored image (its Cmd)" "$rc:$out" "0:one"
box images
expect_match "images lists lab/py" "$out" '^lab/py +sha256:'
box rmi lab/py
expect_eq "rmi lab/py" "$rc:$out" "0:lab/py"
box pull --quiet --name bare "$R/lab/two:1"
expect_eq "pull HOST:PORT/REPO:TAG without a transport: docker:// (as podman)" "$rc:$out:$err" "0:bare:"
box rmi bare
tar -C "$WORK/rootfs" -cf "$WORK/py.tar" .
cd "$WORK" || exit 1
box run ./py.tar true
expect_eq "run FILE.tar: exit 125" "$rc" 125
expect_eq "run FILE.tar: one line and a hint" "$(wc -l <<<"$err")" 2
expect_match "run FILE.tar: the hint says pull tar:FILE" "$err" \
    $'^gpubox: run: "./py.tar" is a file.*\ngpubox: hint: .*gpubox pull tar:./py.tar'
cd - >/dev/null
rm -f "$WORK/py.tar"

# --- the site store: another uid's, read-only; run from it, never written
# Looked at through a read-only bind mount (in a user namespace of the test's own), so that the
# looking changes no access time.
site_state() {
    unshare -Urm sh -c 'mount --bind -r "$1" "$1" && cd "$1" &&
        find . -printf "%p %y %m %s %A@ %T@ %C@\n"' _ "$SITE" | LC_ALL=C sort
}
site0=$(site_state)
expect_match "the site store's state is seen, its access times old" "$site0" \
    '^\./names/shared f 644 [0-9]+ 1000000000\.0+ '
export GPUBOX_IMAGES_RO=$SITE
box run site-only
expect_eq "run NAME only in the site store: runs it" "$rc:$out" "0:two"
box run site-only sh -c 'ls /data; cat /marker >/dev/null; find / -xdev >/dev/null; touch /tmp/new && echo wrote'
expect_eq "a run of a site image reads its tree, writes its own layer" "$rc:$out" $'0:blob\nwrote'
box images
expect_match "images lists the site's images, marked as such" "$out" '^site-only +sha256:.* site$'
box pull --quiet --name shared "docker://$R/lab/two:1"
expect_eq "pull of a name the site has: into the user's store" "$rc:$out" "0:shared"
box run shared
expect_eq "a name resolves in the user's store first" "$rc:$out" "0:two"
box rmi shared
box run shared
expect_eq "... then in the site store" "$rc:$out" "0:one"
box rmi shared
expect_eq "rmi of a site image: exit 125" "$rc" 125
expect_match "rmi of a site image: one line, the site store named" "$err" \
    "^gpubox: rmi: shared is in the site store \"$SITE\" \(read-only"
box pull --quiet "docker://$R/lab/one:1"
expect_eq "pull with a site store: exit 0" "$rc" 0
GPUBOX_IMAGES_RO=$WORK/nope box images
expect_eq "a missing site store: images still works" "$rc" 0
expect_eq "the site store is unchanged: no entry, mode, size, access or change time" \
    "$(diff <(echo "$site0") <(site_state) | head -20)" ""
unset GPUBOX_IMAGES_RO

finish
