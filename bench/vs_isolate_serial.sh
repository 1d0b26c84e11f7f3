#!/usr/bin/env bash
# A judge's serial loop against isolate, as judges run it: isolate installed setuid root, every
# row started as uid 65534. LOOPS loops of ROUNDS rounds (bench/serial_loop.c: each round runs
# every row once, in an order drawn afresh); per loop, each row's median wall time and isolate's
# over it (the rate ratio, > 1: faster than isolate); at the end, the median ratio over the
# loops and its range.
#
#   sudo ISOLATE=/path/isolate ISOLATE_CONFIG=/path/isolate.cf bash bench/vs_isolate_serial.sh
#   sudo LOOPS=6 ROUNDS=100 GPUBOX=/path/gpubox OLD=/path/old ... bash bench/vs_isolate_serial.sh
#   sudo BENCH_TMPDIR=/mnt/tmpfs ... bash bench/vs_isolate_serial.sh   (DIR on a mount without nosuid)
#   sudo GAP_MS=1300 LOOPS=2 ROUNDS=10 ... bash bench/vs_isolate_serial.sh   (a run after a quiet second)
#
# Rows: isolate (`-s -t 1 -w 5 -m 262144 -M meta --run -- ./tiny`); gpubox's isolate mode with
# the same command line; `gpubox run` with every limit (--time-limit 1 --wall-time-limit 5
# --memory-limit 64M --pids-limit 8 --meta, isolate's format), on a read-only ROOTFS holding
# only the no-op. Each run writes a meta file of its own, as CMS names them (run.log.N): on ext4,
# overwriting one costs its writer a flush at close (isolate ~0.5 ms a run here; gpubox avoids
# it, common/trusted_path.cpp), which MODE=overwrite measures instead. OLD=path adds both gpubox
# rows for another build. The binaries are installed (written) afresh, as a package would be:
# how the kernel holds a binary's pages (written, or read back after being dropped) moves
# gpubox's time by a few per cent (bench/README.md).
. "$(dirname "$0")/common.sh"  # TOP, BUILD, bench_gpubox
LOOPS=${LOOPS:-4} ROUNDS=${ROUNDS:-100} MODE=${MODE:-new} GAP_MS=${GAP_MS:-0}
case $MODE in new) N='-{N}' ;; overwrite) N= ;; *) echo "vs_isolate_serial.sh: MODE is new or overwrite" >&2; exit 1 ;; esac
[ "$(id -u)" = 0 ] || { echo "vs_isolate_serial.sh: run as root (isolate is installed setuid root)" >&2; exit 1; }
: "${ISOLATE:?set ISOLATE to an isolate binary}" "${ISOLATE_CONFIG:?set ISOLATE_CONFIG to the config path ISOLATE was built with}"
bench_gpubox
W=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/gpubox-vs-isolate-serial.XXXXXX")
isolate_peer_setup  # builds, tiny, the image, isolate's config, NOBODY (common.sh)
compiled "$W/serial_loop" "$BENCH_DIR/serial_loop.c" -O2
setuid_isolate  # $W/isolate setuid root, $W/meta (common.sh)
ISO=(-s -t 1 -w 5 -m 262144)
ALL=(--time-limit 1 --wall-time-limit 5 --memory-limit 64M --pids-limit 8)
cd "$W/work" || exit 1
box=$("${NOBODY[@]}" "$W/isolate" -b 0 --init) && "${NOBODY[@]}" cp "$W/tiny" "$box/box/tiny"
rows=(isolate) cmd=("$W/isolate" -b 0 "${ISO[@]}" -M "$W/meta/0$N" --run -- ./tiny) boxes=()
for b in "${builds[@]}"; do
    k=$((11 + ${#boxes[@]})) && boxes+=("$b:$k")
    box=$("${NOBODY[@]}" "$W/$b.d/isolate" -b "$k" --init) && "${NOBODY[@]}" cp "$W/tiny" "$box/box/tiny"
    rows+=("$b:isolate-mode" "$b:run-limits")
    cmd+=(:: "$W/$b.d/isolate" -b "$k" "${ISO[@]}" -M "$W/meta/$k$N" --run -- ./tiny
        :: "$W/$b" run "${ALL[@]}" --meta "$W/meta/r-$b$N" --meta-format isolate --read-only "$W/rootfs" /tiny)
done
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $LOOPS loops of $ROUNDS rounds, meta files $MODE, ${GAP_MS} ms before each run"
for ((l = 0; l < LOOPS; l++)); do
    [ "$MODE" = new ] && find "$W/meta" -mindepth 1 -delete  # each loop's files new again
    "${NOBODY[@]}" GAP_MS="$GAP_MS" "$W/serial_loop" "$ROUNDS" "${cmd[@]}" >"$W/loop$l"
done
"${NOBODY[@]}" "$W/isolate" -b 0 --cleanup >/dev/null
for e in "${boxes[@]}"; do "${NOBODY[@]}" "$W/${e%%:*}.d/isolate" -b "${e#*:}" --cleanup >/dev/null; done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${rows[@]}" -- "$W"/loop* <<'PY'
import statistics, sys
cut = sys.argv.index("--")
rows, files = sys.argv[1:cut], sys.argv[cut + 1:]
loops = []
for f in files:  # serial_loop's lines: index, median, q1, q3, cpu, command
    loops.append({int(p[0]): (float(p[1]), float(p[4])) for p in (l.split() for l in open(f))})
print(f"{'row':20s} {'median ms (loops)':>24s} {'cpu ms':>7s} {'ratio to isolate: median (min-max)':>36s}")
for i, row in enumerate(rows):
    ms = [lp[i][0] for lp in loops]
    q = sorted(lp[0][0] / lp[i][0] for lp in loops)
    print(f"{row:20s} {statistics.median(ms):10.2f} ({min(ms):.2f}-{max(ms):.2f}) "
          f"{statistics.median(lp[i][1] for lp in loops):7.2f} {statistics.median(q):20.3f} ({q[0]:.3f}-{q[-1]:.3f})")
PY
