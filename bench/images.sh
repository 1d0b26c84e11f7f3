#!/usr/bin/env bash
# Image pull: time and disk use of pulling a ~1 GB image (random files over 5 gzip layers, on a
# busybox base) from a local registry, `gpubox pull` against the peer the issue names,
# `skopeo copy docker://... oci:DIR` + `umoci unpack --rootless`, in the same run, N rounds each
# (default 5), alternating which goes first. Then the store itself: two tags sharing their base
# and data layers (a quarter of the image's size) pulled into one store, layered and --flat
# (the store's size by du), a re-pull of a stored tag, and a sandbox's start-up
# (`run IMAGE true`) from stacked layers against one tree. The registry is Debian's docker-registry on
# 127.0.0.1 with TLS and basic auth (tests/e2e/registry_lib.sh), started here as root; both
# sides pull as uid 65534 with the same CA and credentials. BENCH_IMAGE_MIB sets the size.
# Last, single-file images (squashfs_round): a file-heavy tree as a tree and as squashfs, mounted
# by squashfuse (/dev/fuse opened for the bench, restored after) or unpacked by unsquashfs.
# BENCH_PARTS=squashfs runs that part alone (no registry).
. "$(dirname "$0")/common.sh"
. "$TOP/tests/e2e/registry_lib.sh"

# The registry side, as root, before bench_setup drops to uid 65534 (it keeps the environment).
PARTS=${BENCH_PARTS:-all}
if [ -z "${GPUBOX_BENCH_UNPRIVILEGED:-}" ]; then
    # squashfs_round: FUSE open to uid 65534 for the bench's run, its mode restored after.
    FUSE_MODE=$(stat -c %a /dev/fuse)
    trap 'chmod "$FUSE_MODE" /dev/fuse' EXIT
    chmod 0666 /dev/fuse
fi
if [ -z "${GPUBOX_BENCH_UNPRIVILEGED:-}" ] && [ "$PARTS" = all ]; then
    missing=$(reg_missing_tools)
    command -v umoci >/dev/null || missing+="umoci "
    [ -z "$missing" ] || { echo "bench: missing $missing(bash .ci/install-deps.sh)" >&2; exit 1; }
    [ "$(uname -m)" = x86_64 ] && REG_ARCH=amd64 || REG_ARCH=arm64
    REG_TOP=$(mktemp -d /tmp/gpubox-bench-reg.XXXXXX)
    trap 'reg_stop_all; rm -rf "$REG_TOP"; chmod "$FUSE_MODE" /dev/fuse' EXIT
    trap 'exit 143' TERM INT HUP
    reg_init "$REG_TOP"
    reg_start main tls
    mkdir -p "$REG_TOP/base/bin" "$REG_TOP/base/etc" "$REG_TOP/base/tmp"
    cp /bin/busybox "$REG_TOP/base/bin/busybox"
    for app in sh true ls cat du; do ln -s busybox "$REG_TOP/base/bin/$app"; done
    s=$SECONDS
    python3 "$TOP/tests/e2e/oci_image.py" big "$REG_TOP/oci" --base "$REG_TOP/base" \
        --arch "$REG_ARCH" --mib "${BENCH_IMAGE_MIB:-1024}" --layers 5
    reg_push "oci:$REG_TOP/oci:big" "docker://127.0.0.1:$REG_PORT/lab/big:1"
    python3 "$TOP/tests/e2e/oci_image.py" pair "$REG_TOP/pair" --base "$REG_TOP/base" \
        --arch "$REG_ARCH" --mib $(("${BENCH_IMAGE_MIB:-1024}" / 4))
    reg_push "oci:$REG_TOP/pair:one" "docker://127.0.0.1:$REG_PORT/lab/one:1"
    reg_push "oci:$REG_TOP/pair:two" "docker://127.0.0.1:$REG_PORT/lab/two:1"
    rm -rf "$REG_TOP/pair"
    echo "bench: made and pushed the image in $((SECONDS - s)) s" >&2
    rm -rf "$REG_TOP/oci"
    REG_CA=$REG_TOP/ca/ca.crt
    export REG_TOP REG_PORT REG_CA REG_USER REG_PASS
fi
bench_setup "$@"

N=${N:-5}

# timed LOG COMMAND...: runs COMMAND under GNU time; appends "wall_s cpu_s maxrss_kib" to LOG.
timed() {
    local log=$1
    shift
    /usr/bin/time -f '%e %U %S %M' -o "$OUTDIR/time.txt" "$@" >/dev/null 2>"$OUTDIR/cmd.err" ||
        { echo "bench: failed: $*" >&2; cat "$OUTDIR/cmd.err" >&2; exit 1; }
    awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$OUTDIR/time.txt" >>"$log"
}
disk_mib() { du -sm "$@" | awk '{ s += $1 } END { print s }'; }

gpubox_round() {
    export GPUBOX_IMAGES=$OUTDIR/store
    rm -rf "$GPUBOX_IMAGES"
    timed "$OUTDIR/gpubox.log" "$GPUBOX" pull "$SRC"
    disk_mib "$GPUBOX_IMAGES" >>"$OUTDIR/gpubox.du"
    # the same digest again: reused, nothing unpacked
    timed "$OUTDIR/gpubox-again.log" "$GPUBOX" pull "$SRC"
    rm -rf "$GPUBOX_IMAGES"
}
peer_round() {
    rm -rf "$OUTDIR/oci" "$OUTDIR/bundle"
    local s=$EPOCHREALTIME
    timed "$OUTDIR/skopeo.log" skopeo --policy "$POLICY" copy -q "$SRC" "oci:$OUTDIR/oci:big"
    timed "$OUTDIR/umoci.log" umoci unpack --rootless --image "$OUTDIR/oci:big" "$OUTDIR/bundle"
    # both steps: wall from here, CPU as the two steps' sum
    awk -v s="$s" -v e="$EPOCHREALTIME" -v a="$(tail -1 "$OUTDIR/skopeo.log")" \
        -v b="$(tail -1 "$OUTDIR/umoci.log")" \
        'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.2f %.2f\n", e - s, x[2] + y[2] }' \
        >>"$OUTDIR/peer.log"
    echo "$(disk_mib "$OUTDIR/oci") $(disk_mib "$OUTDIR/bundle")" >>"$OUTDIR/peer.du"
    rm -rf "$OUTDIR/oci" "$OUTDIR/bundle"
}

# Two tags sharing their base and data layers into one store, layered or --flat (FLAT=--flat),
# then a re-pull of the first, and a sandbox's start-up from it.
store_round() {
    local kind=$1 flag=${2:-}
    export GPUBOX_IMAGES=$OUTDIR/store-$kind
    rm -rf "$GPUBOX_IMAGES"
    timed "$OUTDIR/$kind-pull1.log" "$GPUBOX" pull $flag "docker://127.0.0.1:$REG_PORT/lab/one:1"
    timed "$OUTDIR/$kind-pull2.log" "$GPUBOX" pull $flag "docker://127.0.0.1:$REG_PORT/lab/two:1"
    disk_mib "$GPUBOX_IMAGES" >>"$OUTDIR/$kind.du"
    timed "$OUTDIR/$kind-again.log" "$GPUBOX" pull $flag "docker://127.0.0.1:$REG_PORT/lab/one:1"
    for _ in 1 2 3; do timed "$OUTDIR/$kind-start.log" "$GPUBOX" run one:1 true; done
    timed "$OUTDIR/$kind-find.log" "$GPUBOX" run one:1 find / -xdev -type f
    rm -rf "$GPUBOX_IMAGES"
}

# Single-file images: a file-heavy tree (busybox, the host's python3 standard library and its
# Perl library: some 2,500 files of ~50 MiB) stored as a tree (tar:) and --squashfs, then start-up (run IMAGE
# true) and a file-heavy workload (every file read: find | xargs cat) from the tree, from the
# squashfs file mounted by squashfuse, and the one-time unpack (unsquashfs) a run does where
# FUSE is closed (it then runs from the tree: the tree's rows).
squashfs_prepare() {
    local t=$OUTDIR/heavy
    rm -rf "$t" && mkdir -p "$t/bin" "$t/etc" "$t/tmp" "$t/data"
    cp /bin/busybox "$t/bin/busybox"
    for app in sh true find xargs cat; do ln -s busybox "$t/bin/$app"; done
    cp -r /usr/lib/python3.11 "$t/data/python" && cp -r /usr/share/perl "$t/data/perl"
    find "$t" -name __pycache__ -prune -exec rm -rf {} +
    tar -C "$t" -cf "$OUTDIR/heavy.tar" . && rm -rf "$t"
}
squashfs_round() {
    # One store each: a digest stored already keeps its form.
    local tree=$OUTDIR/store-tree sqsh=$OUTDIR/store-sqsh sq
    rm -rf "$tree" "$sqsh" "$OUTDIR/unpacked"
    GPUBOX_IMAGES=$tree timed "$OUTDIR/sq-pull-tree.log" "$GPUBOX" pull --name img "tar:$OUTDIR/heavy.tar"
    GPUBOX_IMAGES=$sqsh timed "$OUTDIR/sq-pull-sqsh.log" "$GPUBOX" pull --squashfs --name img \
        "tar:$OUTDIR/heavy.tar"
    sq=$(ls "$sqsh"/blobs/sha256/*/rootfs.sqsh)
    disk_mib "$sq" >>"$OUTDIR/sq-sqsh.du"
    timed "$OUTDIR/sq-unpack.log" unsquashfs -q -n -d "$OUTDIR/unpacked" "$sq"
    disk_mib "$OUTDIR/unpacked" >>"$OUTDIR/sq-tree.du"
    rm -rf "$OUTDIR/unpacked"
    for kind in tree sqsh; do
        export GPUBOX_IMAGES=$OUTDIR/store-$kind
        for _ in 1 2 3; do timed "$OUTDIR/sq-$kind-start.log" "$GPUBOX" run img true; done
        timed "$OUTDIR/sq-$kind-cat.log" "$GPUBOX" run img sh -c 'find / -xdev -type f | xargs cat >/dev/null'
    done
    rm -rf "$tree" "$sqsh"
}

# median and range of column COL of FILE: "median (min-max)"
stat_col() {
    sort -n -k"$2,$2" "$1" | awk -v c="$2" '{ v[NR] = $c }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%g (%g-%g)", m, v[1], v[NR] }'
}

squashfs_report() {
    echo "single-file images: busybox + python3.11's and Perl's libraries" \
        "($(tar -tf "$OUTDIR/heavy.tar" | wc -l) entries); $N rounds, median (min-max)"
    printf '%-48s %s\n' "pull tar: as a tree, as --squashfs, wall s" \
        "$(stat_col "$OUTDIR/sq-pull-tree.log" 1), $(stat_col "$OUTDIR/sq-pull-sqsh.log" 1)"
    printf '%-48s %s\n' "squashfs file, tree (du), MiB" \
        "$(stat_col "$OUTDIR/sq-sqsh.du" 1), $(stat_col "$OUTDIR/sq-tree.du" 1)"
    printf '%-48s %s\n' "one-time unpack (unsquashfs, FUSE closed), wall s" \
        "$(stat_col "$OUTDIR/sq-unpack.log" 1)"
    for img in tree sqsh; do
        printf '%-48s %s\n' "$img: run IMAGE true, wall s" "$(stat_col "$OUTDIR/sq-$img-start.log" 1)"
        printf '%-48s %s\n' "$img: find / -type f | xargs cat, wall s" \
            "$(stat_col "$OUTDIR/sq-$img-cat.log" 1)"
    done
}
if [ "$PARTS" = squashfs ]; then
    squashfs_prepare
    for ((i = 0; i < N; i++)); do squashfs_round; done
    squashfs_report
    exit 0
fi
SRC=docker://127.0.0.1:$REG_PORT/lab/big:1
reg_user_config "$HOME" "$REG_PORT"
# skopeo's trust policy for the peer: the bench's own, as gpubox brings its own.
POLICY=$REG_TOP/policy.json
echo "machine: $(nproc) cores, $(uname -r); gpubox $("$GPUBOX" --version | cut -d' ' -f2)," \
    "skopeo $(skopeo --version | cut -d' ' -f3), umoci $(umoci --version | cut -d' ' -f3)," \
    "docker-registry $(docker-registry --version | cut -d' ' -f3)"
echo "free on $OUTDIR: $(df -h --output=avail "$OUTDIR" | tail -1 | tr -d ' ')"
# one warm-up round each, so that the registry's blobs are in the page cache for both alike
gpubox_round && peer_round
rm -f "$OUTDIR"/*.log "$OUTDIR"/*.du
for ((i = 0; i < N; i++)); do
    if ((i % 2)); then peer_round && gpubox_round; else gpubox_round && peer_round; fi
done
echo "image: ${BENCH_IMAGE_MIB:-1024} MiB of random files in 5 layers + a busybox base layer;" \
    "$N rounds, median (min-max)"
printf '%-48s %s\n' "gpubox pull, wall s" "$(stat_col "$OUTDIR/gpubox.log" 1)"
printf '%-48s %s\n' "gpubox pull, CPU s (user+sys)" "$(stat_col "$OUTDIR/gpubox.log" 2)"
printf '%-48s %s\n' "gpubox pull, peak RSS KiB" "$(stat_col "$OUTDIR/gpubox.log" 3)"
printf '%-48s %s\n' "gpubox pull again (same digest), wall s" \
    "$(stat_col "$OUTDIR/gpubox-again.log" 1)"
printf '%-48s %s\n' "skopeo copy + umoci unpack, wall s" "$(stat_col "$OUTDIR/peer.log" 1)"
printf '%-48s %s\n' "skopeo copy + umoci unpack, CPU s" "$(stat_col "$OUTDIR/peer.log" 2)"
printf '%-48s %s\n' "  skopeo copy docker:// oci:, wall s" "$(stat_col "$OUTDIR/skopeo.log" 1)"
printf '%-48s %s\n' "  umoci unpack --rootless, wall s" "$(stat_col "$OUTDIR/umoci.log" 1)"
printf '%-48s %s\n' "  skopeo CPU s, umoci CPU s" \
    "$(stat_col "$OUTDIR/skopeo.log" 2), $(stat_col "$OUTDIR/umoci.log" 2)"
printf '%-48s %s\n' "  skopeo, umoci peak RSS KiB" \
    "$(stat_col "$OUTDIR/skopeo.log" 3), $(stat_col "$OUTDIR/umoci.log" 3)"
printf '%-48s %s\n' "disk: gpubox store, MiB" "$(stat_col "$OUTDIR/gpubox.du" 1)"
awk '{ print $1 + $2 }' "$OUTDIR/peer.du" >"$OUTDIR/peer.sum"
printf '%-48s %s\n' "disk: peer OCI layout + bundle, MiB" "$(stat_col "$OUTDIR/peer.sum" 1)"
printf '%-48s %s\n' "disk: peer bundle alone, MiB" "$(stat_col "$OUTDIR/peer.du" 2)"
for ((i = 0; i < N; i++)); do store_round layered && store_round flat --flat; done
echo "store: two tags sharing a base and $(("${BENCH_IMAGE_MIB:-1024}" / 4)) MiB of data," \
    "each with a layer of its own; $N rounds, median (min-max)"
for kind in layered flat; do
    printf '%-48s %s\n' "$kind: pull one:1, then two:1, wall s" \
        "$(stat_col "$OUTDIR/$kind-pull1.log" 1), $(stat_col "$OUTDIR/$kind-pull2.log" 1)"
    printf '%-48s %s\n' "$kind: store for both tags, MiB" "$(stat_col "$OUTDIR/$kind.du" 1)"
    printf '%-48s %s\n' "$kind: re-pull of one:1, wall s" "$(stat_col "$OUTDIR/$kind-again.log" 1)"
    printf '%-48s %s\n' "$kind: run one:1 true, wall s" "$(stat_col "$OUTDIR/$kind-start.log" 1)"
    printf '%-48s %s\n' "$kind: run one:1 find / -type f, wall s" \
        "$(stat_col "$OUTDIR/$kind-find.log" 1)"
done
median() { stat_col "$@" | cut -d' ' -f1; }
echo "ratio gpubox / peer, medians: wall $(ratio "$(median "$OUTDIR/gpubox.log" 1)" \
    "$(median "$OUTDIR/peer.log" 1)"), CPU $(ratio "$(median "$OUTDIR/gpubox.log" 2)" \
    "$(median "$OUTDIR/peer.log" 2)")"
squashfs_prepare
for ((i = 0; i < N; i++)); do squashfs_round; done
squashfs_report
