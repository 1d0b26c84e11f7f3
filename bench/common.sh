# Shared by the bench scripts: build gpubox if needed, drop to an unprivileged user when run as
# root (as the tests do), and small statistics helpers. Needs hyperfine, bwrap and GNU time.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$BENCH_DIR/.." && pwd)
BUILD=${BUILD:-$TOP/build-bench}

# GPUBOX unset: this checkout's gpubox, built optimised into BUILD (the scripts that measure one
# binary, not bench_setup's set of tools).
bench_gpubox() {
    if [ -z "${GPUBOX:-}" ]; then
        cmake -S "$TOP" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$BUILD" -j"$(nproc)" --target gpubox >/dev/null
        GPUBOX=$BUILD/launcher/gpubox
    fi
}

# compiled OUT SRC FLAGS...: SRC built with gcc into OUT; where BENCH_PREBUILT names a directory
# (a host with no compiler: a GPU node), its file of OUT's name instead, built elsewhere from SRC.
compiled() {
    local out=$1 src=$2
    shift 2
    if [ -n "${BENCH_PREBUILT:-}" ]; then install -m 0755 "$BENCH_PREBUILT/$(basename "$out")" "$out"
    else gcc "$@" -o "$out" "$src"; fi
}

# The runs side by side with isolate (vs_isolate.sh, vs_isolate_serial.sh), in the caller's temp
# dir $W: the builds measured (new, and old where OLD is set), each installed afresh (how the
# kernel holds a binary's pages moves its time, bench/README.md) with a link named isolate for
# isolate mode; a static no-op, tiny; the judge's read-only image for the run rows, holding it
# and the top-level directories every image has (a bare directory would get an overlay to hold
# gpubox's mount points, 0.1-0.5 ms more a run); and ISOLATE_CONFIG pointing isolate's boxes and
# locks into $W, given back as it was at the end (or any later isolate run would make them
# again: a temp dir left behind). Sets builds and NOBODY (a command prefix: uid 65534).
isolate_peer_setup() {
    trap '[ -f "$W/isolate.cf.before" ] && cat "$W/isolate.cf.before" >"$ISOLATE_CONFIG"; rm -rf "$W"' EXIT
    chmod 0755 "$W"
    builds=(new)
    install -m 0755 "$GPUBOX" "$W/new" && mkdir "$W/new.d" && ln -s ../new "$W/new.d/isolate"
    if [ -n "${OLD:-}" ]; then
        install -m 0755 "$OLD" "$W/old" && mkdir "$W/old.d" && ln -s ../old "$W/old.d/isolate"
        builds+=(old)
    fi
    printf 'int main(void) { return 0; }\n' >"$W/tiny.c"
    compiled "$W/tiny" "$W/tiny.c" -static -O2
    mkdir -p "$W/work" "$W/rootfs"/{proc,dev,sys,tmp,run} "$W/iso/boxes" "$W/iso/locks"
    cp "$W/tiny" "$W/rootfs/tiny" && chown 65534:65534 "$W/work"
    if [ -f "$ISOLATE_CONFIG" ]; then cp "$ISOLATE_CONFIG" "$W/isolate.cf.before"; fi
    printf 'box_root = %s\nlock_root = %s\ncg_root = /sys/fs/cgroup\nfirst_uid = 60000\nfirst_gid = 60000\nnum_boxes = 100\n' \
        "$W/iso/boxes" "$W/iso/locks" >"$ISOLATE_CONFIG"
    NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all env -u XDG_RUNTIME_DIR
        GPUBOX_ISOLATE_ROOT="$W/work/boxes")
}

# $W/isolate: ISOLATE installed setuid root, as judges install it (so $W must not be on a
# nosuid mount), and $W/meta, uid 65534's, for the rows' meta files (vs_isolate_serial.sh,
# phase_marks.sh).
setuid_isolate() {
    install -o root -m 4755 "$ISOLATE" "$W/isolate"
    if findmnt -no OPTIONS -T "$W" | grep -qw nosuid; then
        echo "$(basename "$0"): $W is on a nosuid mount" >&2
        exit 1
    fi
    mkdir "$W/meta" && chown 65534:65534 "$W/meta"
}

bench_setup() {
    if [ -z "${GPUBOX_BENCH_UNPRIVILEGED:-}" ]; then
        for t in hyperfine bwrap /usr/bin/time; do
            command -v "$t" >/dev/null || { echo "bench: $t is missing (bash .ci/install-deps.sh)" >&2; exit 1; }
        done
        # An optimised, static build: what `cmake --build` makes by default, without -g.
        cmake -S "$TOP" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$BUILD" -j"$(nproc)" --target gpubox gpubox-unpack fake-gpu-host preflight-cost >/dev/null
        W=$(mktemp -d /tmp/gpubox-bench.XXXXXX)
        chmod 0755 "$W"
        install -m 0755 "$BUILD/launcher/gpubox" "$W/gpubox"
        install -m 0755 "$BUILD/launcher/gpubox-unpack" "$W/gpubox-unpack"  # gpubox pull's unpacker
        install -m 0755 "$BUILD/tests/fake-gpu-host" "$W/fake-gpu-host"
        install -m 0755 "$BUILD/tests/preflight-cost" "$W/preflight-cost"
        # BENCH_BASELINE=FILE: another gpubox binary (an earlier commit's, built the same way),
        # measured beside this one in the same run (startup.sh's before/after rows).
        if [ -n "${BENCH_BASELINE:-}" ]; then install -m 0755 "$BENCH_BASELINE" "$W/gpubox-baseline"; fi
        if [ "$(id -u)" = 0 ]; then
            # A real driver's full compute and utility set: 11 libraries, 5 tools. Character
            # nodes need root.
            "$W/fake-gpu-host" "$W/host8" --gpus 8 --full-driver
            # The same host with 20000 unrelated files beside the driver's libraries, and 5000
            # more libraries in its ld.so.cache (a big HPC node's cache lists thousands).
            "$W/fake-gpu-host" "$W/host8big" --gpus 8 --full-driver
            for i in $(seq 20000); do : >"$W/host8big/usr/lib/x86_64-linux-gnu/unrelated-$i.so"; done
            mapfile -t entries < <(ldconfig -p -C "$W/host8big/etc/ld.so.cache" | sed -n 's/^\t\([^ ]*\) .* => \(.*\)$/\1=\2/p')
            for i in $(seq 5000); do entries+=("libunrelated$i.so.1=/usr/lib/x86_64-linux-gnu/unrelated-$i.so"); done
            "$W/fake-gpu-host" --write-ldcache "$W/host8big/etc/ld.so.cache" "${entries[@]}"
            mkdir "$W/work" && chown 65534:65534 "$W/work"
            # The unprivileged part runs copies of the scripts, in a directory of its own: the
            # checkout may be where uid 65534 cannot go (a clone in root's home, mode 0700).
            mkdir -p "$W/bench" "$W/tests/e2e"
            install -m 0644 "$BENCH_DIR"/*.sh "$W/bench/"
            install -m 0644 "$TOP/tests/e2e/registry_lib.sh" "$W/tests/e2e/"
            # (|| rc=$?: under set -e a failed run would exit here and leave $W behind)
            rc=0
            (cd "$W/work" && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
                env GPUBOX_BENCH_UNPRIVILEGED=1 W="$W" HOME="$W/work" PATH="$PATH" \
                bash "$W/bench/$(basename "$0")" "$@") || rc=$?
            rm -rf "$W"
            exit $rc
        fi
        echo "bench: run as root so the simulated GPU host can be built and gpubox measured as uid 65534" >&2
        exit 1
    fi
    GPUBOX=$W/gpubox
    OUTDIR=$W/work
    cd "$OUTDIR"
}

# hyperfine over the given commands; prints "name median_ms" lines (ms, 3 decimals).
measure() {
    local csv=$OUTDIR/h.csv
    hyperfine -N --style none --warmup 20 --runs "${RUNS:-300}" --export-csv "$csv" "$@" >/dev/null
    awk -F, 'NR > 1 { printf "%.3f\n", $4 * 1000 }' "$csv"
}

# runs_per_second N COMMAND...: N sequential runs, wall clock.
runs_per_second() {
    local n=$1; shift
    local s e
    s=$(date +%s%N)
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1; done
    e=$(date +%s%N)
    awk -v n="$n" -v ns=$((e - s)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }'
}

# pairs N -- A... -- B...: N runs of A and B back to back (A, B, A, B, ...), so that the VM's
# drift over seconds lands on both alike. Prints "median_A median_B median(B-A) q1(B-A) q3(B-A)",
# milliseconds. Each run is timed from bash ($EPOCHREALTIME); the fork and exec are the same
# for both sides and cancel in the difference.
pairs() {
    local n=$1; shift 2
    local a=() b=() t0 t1 t2 i
    while [ "$1" != "--" ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    for ((i = 0; i < 10; i++)); do "${a[@]}" >/dev/null 2>&1; "${b[@]}" >/dev/null 2>&1; done
    for ((i = 0; i < n; i++)); do
        t0=$EPOCHREALTIME; "${a[@]}" >/dev/null 2>&1
        t1=$EPOCHREALTIME; "${b[@]}" >/dev/null 2>&1
        t2=$EPOCHREALTIME
        echo "$((${t1/./} - ${t0/./})) $((${t2/./} - ${t1/./}))"
    done | awk '{ a[NR] = $1; b[NR] = $2; d[NR] = $2 - $1 }
        function med(v, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j] < v[j - 1]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
                                       return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
        END { ma = med(a, NR); mb = med(b, NR); md = med(d, NR)
              printf "%.3f %.3f %.3f %.3f %.3f\n", ma / 1000, mb / 1000, md / 1000, d[int(NR / 4) + 1] / 1000, d[int(3 * NR / 4)] / 1000 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
