#!/usr/bin/env bash
# What limits add to a run: `gpubox run --read-only` of a static no-op as uid 65534, without
# limits and with all of a judge's (-t 1 -w 5, --as-limit or --memory-limit 256M, --pids-limit 1),
# interleaved run by run (one run of each in turn, N rounds after 3 warm-up rounds), so that a
# loaded machine's drift falls on every row alike. Wall median (IQR) and CPU per run (user +
# system of gpubox and the workload, from the children's rusage). OLD=path adds the same rows
# for another build, in the same rounds.
#
#   sudo bash bench/limit_cost.sh                  # builds gpubox (Release) into build-bench
#   sudo GPUBOX=/path/gpubox OLD=/path/old N=100 bash bench/limit_cost.sh
. "$(dirname "$0")/common.sh"  # TOP, BUILD, bench_gpubox
N=${N:-100}
[ "$(id -u)" = 0 ] || { echo "limit_cost.sh: run as root (it measures as uid 65534)" >&2; exit 1; }
bench_gpubox
W=$(mktemp -d /tmp/gpubox-limit-cost.XXXXXX)
trap 'rm -rf "$W"' EXIT
chmod 0755 "$W"
install -m 0755 "$GPUBOX" "$W/new"
[ -n "${OLD:-}" ] && install -m 0755 "$OLD" "$W/old"
printf 'int main(void) { return 0; }\n' >"$W/tiny.c"
compiled "$W/tiny" "$W/tiny.c" -static -O2
mkdir -p "$W/rootfs" "$W/work" && cp "$W/tiny" "$W/rootfs/tiny" && chown 65534:65534 "$W/work"
cat >"$W/inter.py" <<'PY'
import os, resource, shlex, statistics, subprocess, sys, time
n = int(sys.argv[1]); rows = [a.split("=", 1) for a in sys.argv[2:]]
wall = {k: [] for k, _ in rows}; cpu = {k: 0.0 for k, _ in rows}
for i in range(n + 3):
    for k, c in rows:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN); s = time.perf_counter()
        rc = subprocess.run(shlex.split(c), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        e = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if rc: sys.exit(f"limit_cost.sh: {k}: exit {rc}")
        if i >= 3:
            wall[k].append((e - s) * 1000)
            cpu[k] += (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
print(f"{'':24s} {'wall ms, median (IQR)':>24s} {'CPU ms/run':>11s} {'CPU ratio':>10s}")
base = {}
for k, _ in rows:
    x = sorted(wall[k]); c = cpu[k] / n; b = k.split()[0]
    base.setdefault(b, c)
    print(f"{k:24s} {statistics.median(x):7.2f} ({x[len(x)//4]:5.2f}-{x[3*len(x)//4]:5.2f})    {c:8.2f} {c / base[b]:10.2f}")
PY
R="--read-only $W/rootfs /tiny"
ALL="--time-limit 1 --wall-time-limit 5 --pids-limit 1"
args=()
for b in new ${OLD:+old}; do
    args+=("$b no limits=$W/$b run $R" "$b all, --as-limit=$W/$b run $ALL --as-limit 256M $R"
        "$b all, --memory-limit=$W/$b run $ALL --memory-limit 256M $R"
        "$b --wall-time-limit=$W/$b run --wall-time-limit 5 $R")
done
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $N rounds"
cd "$W/work" && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all env -u XDG_RUNTIME_DIR \
    python3 "$W/inter.py" "$N" "${args[@]}"
