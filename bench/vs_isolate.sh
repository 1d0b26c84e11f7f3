#!/usr/bin/env bash
# Runs/s against isolate, interleaved: ROUNDS rounds; in each, every row runs a batch of M runs of
# a static no-op (PAR loops at once, M each), the rows' order rotating round by round, so that a
# loaded machine's drift falls on every row alike. Per round, each row's runs/s over isolate's in
# the same round; printed: the median ratio (min-max over rounds) and the median runs/s.
#
#   sudo ISOLATE=/path/isolate ISOLATE_CONFIG=/path/isolate.cf bash bench/vs_isolate.sh
#   sudo PAR=2 ROUNDS=15 M=40 GPUBOX=/path/gpubox OLD=/path/old ... bash bench/vs_isolate.sh
#   sudo BENCH_TMPDIR=/mnt/tmpfs ... bash bench/vs_isolate.sh   (the temp dir there, not in /tmp)
#   sudo UNIT=job PAR=2 ... bash bench/vs_isolate.sh   (a judge's job for a unit, below)
#
# Rows: isolate as root without --cg (`-t 1 -w 5 -m 262144 -M meta`); gpubox's isolate mode with
# the same command line, as uid 65534; `gpubox run` with every limit (--time-limit 1
# --wall-time-limit 5 --memory-limit 64M --pids-limit 8 --meta), as uid 65534; `gpubox run` with
# none. OLD=path adds the last three rows for another build, in the same rounds.
# UNIT=job: each unit is a judge's whole job, as CMS makes one for a submission (its
# IsolateSandbox): `--init` of the loop's box, the program copied in, one `--run` as above,
# `--cleanup`; rows isolate and isolate mode only (`gpubox run` has no box to make).
# ISOLATE is built by you from ioi/isolate's source (`make CONFIG=<file> isolate`); this script
# writes <file>, pointing isolate's box and lock roots at its temp dir.
. "$(dirname "$0")/common.sh"  # TOP, BUILD, bench_gpubox
ROUNDS=${ROUNDS:-15} M=${M:-40} PAR=${PAR:-1} UNIT=${UNIT:-run}
case $UNIT in run | job) ;; *) echo "vs_isolate.sh: UNIT is run or job" >&2; exit 1 ;; esac
[ "$(id -u)" = 0 ] || { echo "vs_isolate.sh: run as root (isolate needs it; gpubox is measured as uid 65534)" >&2; exit 1; }
: "${ISOLATE:?set ISOLATE to an isolate binary}" "${ISOLATE_CONFIG:?set ISOLATE_CONFIG to the config path ISOLATE was built with}"
bench_gpubox
W=$(mktemp -d "${BENCH_TMPDIR:-/tmp}/gpubox-vs-isolate.XXXXXX")
isolate_peer_setup  # builds, tiny, the image, isolate's config, NOBODY (common.sh)
mkdir "$W/iso/meta"
ISO_ARGS="-s -t 1 -w 5 -m 262144"
ALL="--time-limit 1 --wall-time-limit 5 --memory-limit 64M --pids-limit 8"

# One batch: M runs in a loop, as a judge makes them; gpubox's rows in one shell as uid 65534.
# Each run's meta file is a new one, as CMS names them (run.log.N): overwriting one on ext4 costs
# isolate 0.4-2.5 ms here (truncating to 0 makes the last close flush the new data), and gpubox
# no longer (common/trusted_path.hpp, written_apart).
batch() {  # batch ROW LOOP ROUND BOX
    local row=$1 k=$2 r=$3 box=$4 i
    case $row in
    isolate)
        for ((i = 0; i < M; i++)); do
            if [ "$UNIT" = job ]; then box=$("$ISOLATE" -b "$k" --init) && cp "$W/tiny" "$box/box/tiny"; fi
            "$ISOLATE" -b "$k" $ISO_ARGS -M "$W/iso/meta/$k-$r-$i" --run -- ./tiny
            if [ "$UNIT" = job ]; then "$ISOLATE" -b "$k" --cleanup >/dev/null; fi
        done ;;
    *)
        cd "$W/work" && "${NOBODY[@]}" W="$W" M="$M" UNIT="$UNIT" ISO_ARGS="$ISO_ARGS" ALL="$ALL" bash -c "$GBATCH" batch "$row" "$k" "$r" "$box" ;;
    esac
}
GBATCH='row=$1 k=$2 r=$3 box=$4 b=${1%%:*}
case $row in
*:isolate-mode) for ((i = 0; i < M; i++)); do
    if [ "$UNIT" = job ]; then d=$("$W/$b.d/isolate" -b "$box" --init) && cp "$W/tiny" "$d/box/tiny"; fi
    "$W/$b.d/isolate" -b "$box" $ISO_ARGS -M "$W/work/m-$row-$k-$r-$i" --run -- ./tiny
    if [ "$UNIT" = job ]; then "$W/$b.d/isolate" -b "$box" --cleanup >/dev/null; fi; done ;;
*:run-limits) for ((i = 0; i < M; i++)); do
    "$W/$b" run $ALL --meta "$W/work/r-$row-$k-$r-$i" --meta-format isolate --read-only "$W/rootfs" /tiny; done ;;
*:run-none) for ((i = 0; i < M; i++)); do "$W/$b" run --read-only "$W/rootfs" /tiny; done ;;
esac'
rows=(isolate)
for b in "${builds[@]}"; do
    rows+=("$b:isolate-mode")
    if [ "$UNIT" = run ]; then rows+=("$b:run-limits" "$b:run-none"); fi
done
box_of() {  # box_of ROW LOOP: the box of that row's loop (gpubox's boxes: 10 and up)
    local j
    for j in "${!rows[@]}"; do [ "${rows[$j]}" = "$1" ] && echo $((10 * (j + 1) + $2)); done
}
# Boxes: isolate's as root, gpubox's as uid 65534, one per row and loop (UNIT=job: each job's own).
for ((k = 0; k < PAR; k++)); do
    [ "$UNIT" = run ] || break
    box=$("$ISOLATE" -b "$k" --init) && cp "$W/tiny" "$box/box/tiny"
    for r in "${rows[@]}"; do
        [[ $r == *:isolate-mode ]] || continue
        box=$(cd "$W/work" && "${NOBODY[@]}" "$W/${r%%:*}.d/isolate" -b "$(box_of "$r" "$k")" --init)
        "${NOBODY[@]}" cp "$W/tiny" "$box/box/tiny"
    done
done
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $M ${UNIT}s a row, $PAR at a time"
: >"$W/results"
for ((r = 0; r < ROUNDS; r++)); do
    n=${#rows[@]}
    for ((j = 0; j < n; j++)); do
        row=${rows[$(((j + r) % n))]}
        s=$(date +%s%N) pids=()
        for ((k = 0; k < PAR; k++)); do batch "$row" "$k" "$r" "$(box_of "$row" "$k")" & pids+=($!); done
        wait "${pids[@]}"
        e=$(date +%s%N)
        echo "$r $row $(awk -v n=$((M * PAR)) -v ns=$((e - s)) 'BEGIN { printf "%.1f", n / (ns / 1e9) }')" >>"$W/results"
    done
done
for ((k = 0; k < PAR; k++)); do
    [ "$UNIT" = run ] || break
    "$ISOLATE" -b "$k" --cleanup >/dev/null
    for r in "${rows[@]}"; do
        [[ $r == *:isolate-mode ]] && (cd "$W/work" && "${NOBODY[@]}" "$W/${r%%:*}.d/isolate" -b "$(box_of "$r" "$k")" --cleanup >/dev/null)
    done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$W/results" "$UNIT" <<'PY'
import statistics, sys
rate = {}
for line in open(sys.argv[1]):
    r, row, v = line.split(); rate.setdefault(row, {})[int(r)] = float(v)
iso = rate["isolate"]
print(f"{'row':24s} {sys.argv[2] + 's/s median':>14s} {'ratio to isolate: median (min-max)':>36s}")
for row, by in rate.items():
    q = sorted(by[r] / iso[r] for r in by)
    print(f"{row:24s} {statistics.median(by.values()):14.1f} {statistics.median(q):12.2f} ({q[0]:.2f}-{q[-1]:.2f})")
PY
