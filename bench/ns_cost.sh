#!/usr/bin/env bash
# What each namespace and each fresh filesystem costs this host's kernel (bench/ns_cost.c), as
# gpubox makes them: unprivileged, in a user namespace. ROUNDS rounds of N iterations a row, the
# rows interleaved; printed: each row's median CPU (all CPUs, the kernel's deferred teardown
# included) and wall per iteration, and what it adds to the row it builds on.
#
#   sudo bash bench/ns_cost.sh            # N=2000 ROUNDS=3; measured as uid 65534
. "$(dirname "$0")/common.sh"  # TOP, compiled
N=${N:-2000} ROUNDS=${ROUNDS:-3}
W=$(mktemp -d "${BENCH_TMPDIR:-/tmp}/gpubox-ns-cost.XXXXXX")
trap 'rm -rf "$W"' EXIT
chmod 0755 "$W"
compiled "$W/ns_cost" "$BENCH_DIR/ns_cost.c" -O2
AS=()
[ "$(id -u)" = 0 ] && AS=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
mapfile -t rows < <("$W/ns_cost" rows)  # "ROW BASE" lines: the rows, and what each builds on
for ((r = 0; r < ROUNDS; r++)); do
    for row in "${rows[@]}"; do (cd "$W" && "${AS[@]}" ./ns_cost "$N" "${row%% *}"); done
done >"$W/results"
printf '%s\n' "${rows[@]}" >"$W/rows"
python3 - "$W/results" "$W/rows" <<'PY'
import statistics, sys
cpu, wall = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    cpu.setdefault(f[0], []).append(float(f[5])); wall.setdefault(f[0], []).append(float(f[2]))
base = dict(line.split() for line in open(sys.argv[2]))
print(f"{'row':20s} {'cpu us':>8s} {'wall us':>8s}  adds (cpu)")
for row in cpu:
    b = base[row]
    c = statistics.median(cpu[row])
    adds = f"{c - statistics.median(cpu[b]):+7.0f} over {b}" if b != "-" else ""
    print(f"{row:20s} {c:8.0f} {statistics.median(wall[row]):8.0f}  {adds}")
PY
