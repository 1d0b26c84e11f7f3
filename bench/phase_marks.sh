#!/usr/bin/env bash
# A serial run's milestones, isolate's and gpubox's isolate mode side by side (bench/README.md,
# "a serial run, phase by phase"): N runs of each row, one row after the other, under bpftrace
# marking a handful of syscalls only (the namespaces' clone3 and unshare, pivot_root, the old
# root's umount2, the workload's seccomp and exec, each process's end), so that the rest of a
# run pays nothing for the trace (bench/trace_phases.py traces every syscall: ~1-2 us each).
# Printed: each milestone's median, us from the exec of the sandbox binary.
#
#   sudo ISOLATE=/path/isolate ISOLATE_CONFIG=/path/isolate.cf bash bench/phase_marks.sh
#   sudo N=200 GPUBOX=/path/gpubox BENCH_TMPDIR=/mnt/tmpfs ... bash bench/phase_marks.sh
#
# Both rows as vs_isolate_serial.sh runs them: isolate installed setuid root, everything started
# as uid 65534, `-s -t 1 -w 5 -m 262144 -M meta --run -- ./tiny`; gpubox as `gpubox isolate`
# (so that its processes are named apart from isolate's).
. "$(dirname "$0")/common.sh"  # TOP, BUILD, bench_gpubox
N=${N:-200}
[ "$(id -u)" = 0 ] || { echo "phase_marks.sh: run as root (bpftrace, and isolate is setuid root)" >&2; exit 1; }
command -v bpftrace >/dev/null || { echo "phase_marks.sh: bpftrace is missing (apt-get install bpftrace)" >&2; exit 1; }
: "${ISOLATE:?set ISOLATE to an isolate binary}" "${ISOLATE_CONFIG:?set ISOLATE_CONFIG to the config path ISOLATE was built with}"
bench_gpubox
W=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/gpubox-phase-marks.XXXXXX")
isolate_peer_setup  # builds, tiny, the image, isolate's config, NOBODY (common.sh)
setuid_isolate  # $W/isolate setuid root, $W/meta (common.sh)
cd "$W/work" || exit 1
for k in 0 11; do
    [ $k = 0 ] && b=("$W/isolate") || b=("$W/new" isolate)
    box=$("${NOBODY[@]}" "${b[@]}" -b $k --init) && "${NOBODY[@]}" cp "$W/tiny" "$box/box/tiny"
done
# Each mark: its name, the time (ns) and the pid. `isolate` and `new` name the sandbox binaries'
# processes (gpubox's before its workload's exec too), `tiny` the workload.
cat >"$W/marks.bt" <<'EOF'
tracepoint:sched:sched_process_exec { printf("exec %lld %d %s\n", nsecs, pid, comm); }
tracepoint:syscalls:sys_enter_clone3 /comm == "new" || comm == "isolate"/ { printf("clone3_in %lld %d\n", nsecs, pid); }
tracepoint:syscalls:sys_exit_clone3 /comm == "new" || comm == "isolate"/ { printf("clone3_out %lld %d\n", nsecs, pid); }
tracepoint:syscalls:sys_exit_unshare /comm == "new"/ { printf("unshare_out %lld %d\n", nsecs, pid); }
tracepoint:syscalls:sys_enter_pivot_root /comm == "new"/ { printf("pivot %lld %d\n", nsecs, pid); }
tracepoint:syscalls:sys_exit_umount /comm == "new"/ { printf("umount_out %lld %d\n", nsecs, pid); }
tracepoint:syscalls:sys_enter_seccomp /comm == "new" || comm == "isolate"/ { printf("seccomp %lld %d\n", nsecs, pid); }
tracepoint:sched:sched_process_exit /comm == "new" || comm == "isolate" || comm == "tiny"/ { printf("exit %lld %d %s\n", nsecs, pid, comm); }
EOF
ISO=(-s -t 1 -w 5 -m 262144)
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); $N runs a row"
for row in isolate new; do
    [ $row = isolate ] && run=("$W/isolate" -b 0) || run=("$W/new" isolate -b 11)
    # The row's loop, as uid 65534 (bpftrace starts its command itself, without a shell).
    {
        printf 'cd %q || exit 1\n' "$W/work"
        printf 'for ((i = 0; i < %d; i++)); do\n    ' "$N"
        printf '%q ' "${NOBODY[@]}" "${run[@]}" "${ISO[@]}" -M
        printf -- '%q-$i --run -- ./tiny || exit 1\ndone\n' "$W/meta/$row"
    } >"$W/loop-$row.sh"
    bpftrace -q "$W/marks.bt" -c "/bin/bash $W/loop-$row.sh" >"$W/marks-$row" 2>"$W/marks-$row.err" ||
        { cat "$W/marks-$row.err" >&2; exit 1; }
done
"${NOBODY[@]}" "$W/isolate" -b 0 --cleanup >/dev/null
"${NOBODY[@]}" "$W/new" isolate -b 11 --cleanup >/dev/null
python3 - "$W/marks-isolate" "$W/marks-new" <<'PY'
import statistics, sys
names = {"clone3_in": "the namespaces' clone3 starts", "clone3_out": "clone3 done",
         "net": "init's network namespace done (its unshare)", "pivot": "the mounts done (pivot_root)",
         "umount_out": "the old root detached (umount2)", "seccomp": "the workload's seccomp",
         "wl_exec": "the workload's exec", "wl_exit": "the workload ends",
         "end": "the sandbox binary ends"}
def marks(path, binary):
    """Per run (from an exec of `binary` to that process's end): each mark's first time, us."""
    runs, cur = [], None
    for line in open(path):
        p = line.split()
        if len(p) < 3 or not p[1].isdigit(): continue
        kind, t, pid = p[0], int(p[1]) / 1e3, int(p[2])
        comm = p[3] if len(p) > 3 else ""
        if kind == "exec" and comm == binary and cur is None:
            cur = {"t0": t, "pid": pid, "m": {}}
            continue
        if cur is None: continue
        m, rel = cur["m"], t - cur["t0"]
        if kind in ("clone3_in", "clone3_out") and pid == cur["pid"]: m.setdefault(kind, rel)
        elif kind == "unshare_out" and pid != cur["pid"]: m.setdefault("net", rel)
        elif kind in ("pivot", "umount_out"): m.setdefault(kind, rel)
        elif kind == "seccomp": m["seccomp"] = rel  # the last one: the workload's
        elif kind == "exec" and comm == "tiny": m.setdefault("wl_exec", rel)
        elif kind == "exit" and comm == "tiny": m.setdefault("wl_exit", rel)
        elif kind == "exit" and pid == cur["pid"]:
            m["end"] = rel
            runs.append(m)
            cur = None
    return runs[5:]  # the first runs warm caches
rows = {"isolate": marks(sys.argv[1], "isolate"), "isolate mode": marks(sys.argv[2], "new")}
print(f"{'us from the exec (median)':46s}" + "".join(f"{r:>14s}" for r in rows))
for key, label in names.items():
    cells = []
    for runs in rows.values():
        v = [m[key] for m in runs if key in m]
        cells.append(f"{statistics.median(v):14.0f}" if len(v) > len(runs) / 2 else f"{'':14s}")
    print(f"{label:46s}" + "".join(cells))
print("runs: " + ", ".join(f"{r} {len(v)}" for r, v in rows.items()))
PY
