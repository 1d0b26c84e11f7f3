#!/usr/bin/env bash
# Limit accuracy: how far past --memory-limit and --time-limit a sandbox really gets before
# gpubox kills it. "Really" is what an independent meter says: cgroup v1 memory and cpuacct
# groups made here by root (gpubox never looks at cgroup v1, so they only measure). Without a
# cgroup, gpubox runs as uid 65534, as an ordinary user runs it; the CPU rows run again as root,
# where gpubox makes its own cgroup v2 (cpu.stat, cgroup.kill; this host's v2 hierarchy has no
# memory controller, so memory has only the no-cgroup path). N runs per row (default 5).
# Prints a Markdown table. BUILD=build reuses an existing build instead of building build-bench.
. "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "bench: run as root (the meters are cgroup v1 groups only root can make)" >&2; exit 1; }
N=${N:-5}
# Release, as the other scripts build; an existing BUILD keeps its own build type.
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$TOP" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target gpubox probe >/dev/null

W=$(mktemp -d /tmp/gpubox-bench.XXXXXX)
meters=()
cleanup() {
    # Back to where we came from; rmdir fails (and says so) if anything of ours is still alive.
    for d in "${meters[@]}"; do
        echo $$ >"${d%/*}/cgroup.procs" && rmdir "$d" || echo "bench: could not remove $d" >&2
    done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 0755 "$W"
install -m 0755 "$BUILD/launcher/gpubox" "$W/gpubox"
R=$W/rootfs
"$W/gpubox" rootfs create "$R" >/dev/null
install -m 0755 "$BUILD/tests/probe" "$R/usr/bin/probe"
mkdir "$W/work" && chown 65534:65534 "$W/work" && cd "$W/work" || exit
M=$W/work/meta.json
as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all env HOME="$W/work")

# The meters: a child of this shell's own group in each v1 controller (as tests/e2e/lib.sh finds
# it), with this shell moved in, so that every gpubox started below, and all it starts, is counted.
for ctl in cpuacct memory; do
    base=/sys/fs/cgroup/$ctl$(sed -n "s/^[0-9]*:\([^:]*,\)*$ctl\(,[^:]*\)*://p" /proc/self/cgroup)
    [ -d "$base" ] || { echo "bench: no cgroup v1 $ctl controller to measure with" >&2; exit 1; }
    mkdir "${base%/}/gpubox-bench-$$" && meters+=("${base%/}/gpubox-bench-$$")
    echo $$ >"${base%/}/gpubox-bench-$$/cgroup.procs"
done
CPUACCT=${meters[0]} MEMCG=${meters[1]}
# A child cgroup of the cpu controller (v1, below this shell's own), where autogroups do not
# apply: the rows marked so start gpubox in it (the shell itself stays where it is).
base=/sys/fs/cgroup/cpu$(sed -n 's/^[0-9]*:\([^:]*,\)*cpu\(,[^:]*\)*://p' /proc/self/cgroup)
CPUCG=""
mkdir "${base%/}/gpubox-bench-cpu-$$" 2>/dev/null && CPUCG=${base%/}/gpubox-bench-cpu-$$ && meters+=("$CPUCG")

# field NAME / mechanism LIMIT: from the JSON verdict (gpubox's own 2-space layout), as lib.sh.
field() { grep -E "^  \"$1\":" "$M" | sed -E 's/^  "[^"]*": //; s/,$//; s/^"//; s/"$//'; }
mechanism() { grep -A2 "\"$1\": {" "$M" | grep mechanism | sed -E 's/.*"mechanism": "(.*)",?/\1/'; }
# The table's short name for a mechanism: its first words and its sampling period.
short() { sed -E 's/^((cgroup [^ ,]+)|sum over the sandbox).*((sampled|read by the monitor) every [0-9]+ ms).*/\1 … \3/' <<<"$1"; }

declare -A full=()   # short mechanism -> the whole text, printed under the table
EXTRA=()             # more options for the CPU rows (the fork bomb's --pids-limit)
INCG=""              # a cgroup to start each run in (CPUCG: the child cpu cgroup row)
# row KIND LIMIT RATE AS LABEL COMMAND...: N metered runs of COMMAND under one limit.
# KIND mem: LIMIT in MiB, RATE the workload's MiB/s (0: as fast as it can). KIND cpu: LIMIT in s.
# AS user: uid 65534 (no cgroup); root: gpubox makes a cgroup v2.
row() {
    local kind=$1 limit=$2 rate=$3 as=$4 label=$5; shift 5
    local pre=() opt=(--time-limit "$limit" "${EXTRA[@]}") want=cpu_time i vals="" st="" mech m0 c0 s l mon
    [ "$as" = user ] && pre=("${as_user[@]}")
    [ -n "$INCG" ] && pre=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$INCG" "${pre[@]}")
    [ "$kind" = mem ] && opt=(--memory-limit "${limit}M") && want=memory
    for ((i = 0; i < N; i++)); do
        rm -f "$M"
        echo 0 >"$MEMCG/memory.max_usage_in_bytes"   # resets the peak to the usage now
        m0=$(<"$MEMCG/memory.usage_in_bytes") c0=$(<"$CPUACCT/cpuacct.usage")
        "${pre[@]}" "$W/gpubox" run --wall-time-limit 30 --meta "$M" "${opt[@]}" "$R" "$@" >/dev/null 2>&1 || true
        # One line per run: memory peak above the start (bytes), CPU used (ns), gpubox's wall time.
        # The monitor's own CPU (monitor_cpu_time) is the host's, never the sandbox's: taken out.
        mon=$(field monitor_cpu_time)
        vals+="$(($(<"$MEMCG/memory.max_usage_in_bytes") - m0)) $(($(<"$CPUACCT/cpuacct.usage") - c0 - $(awk -v m="${mon:-0}" 'BEGIN { printf "%d", m * 1e9 }'))) $(field wall_time)"$'\n'
        # The verdict, and which limit it names where that is not the one under test.
        s=$(field status) l=$(field limit)
        st+="$s$([ "$l" = "$want" ] || [ "$s" = OK ] || echo "($l)") "
    done
    mech=$(mechanism "$want")
    full[$(short "$mech")]=$mech
    mech=$(short "$mech")
    if [ "$as" = root ]; then
        case $mech in "cgroup cpu.stat"*) label+=", cgroup v2" ;; *) mech="NOT A CGROUP: $mech" ;; esac
    fi
    # Overrun = really used - limit. Kill latency: memory overrun / the fill rate; CPU overrun /
    # the CPUs the workload kept busy (CPU used / wall time, median over the runs).
    awk -v kind="$kind" -v limit="$limit" -v rate="$rate" -v label="$label" -v mech="$mech" -v st="$st" '
        function sort(v, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j] < v[j - 1]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t } }
        function med(v, n) { return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
        NF == 3 { n++; o[n] = kind == "mem" ? $1 / 1048576 - limit : $2 / 1e9 - limit; b[n] = $3 > 0 ? $2 / 1e9 / $3 : 0 }
        END {
            sort(o, n); sort(b, n); mo = med(o, n); mb = med(b, n)
            unit = kind == "mem" ? " MiB" : " s"; f = kind == "mem" ? "%.1f" : "%.3f"
            ov = mo >= 0 ? sprintf("+" f unit, mo) : sprintf("stricter by " f unit, -mo)
            ov = ov sprintf(" (" f " … " f ")", o[1], o[n])
            if (kind == "mem") lat = rate > 0 ? sprintf("%.0f ms", mo / rate * 1000) : "— (rate unknown)"
            else lat = mo > 0 ? sprintf("%.0f ms (%.1f CPUs busy)", mo / mb * 1000, mb) : sprintf("— (early; %.1f CPUs busy)", mb)
            split(st, s, " "); for (i = 1; i <= n; i++) c[s[i]]++
            v = ""; for (k in c) v = v (v == "" ? "" : ", ") k " " c[k] "/" n
            printf "| %s | %s | %s | %s | %s | %+.1f %% | %s |\n", (kind == "mem" ? limit " MiB" : limit " s"), label, mech, v, ov, mo / limit * 100, lat
        }' <<<"$vals"
}

# The load matters: on a shared machine a workload gets less than the CPUs it could keep busy.
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); gpubox $("$W/gpubox" --version | cut -d' ' -f2); $N runs per row"
echo
echo "| limit | workload | mechanism | verdicts | overrun: median (min … max) | % of limit | kill latency |"
echo "|---|---|---|---|---|---|---|"
for lim in 64 256; do
    for rate in 256 1024; do row mem $lim $rate user "anon at $rate MiB/s" probe hog anon 2048 $rate 2; done
    row mem $lim 0 user "anon as fast as it can" probe hog anon 2048 0 2
    for kind in shared sysv file:/dev/shm/x; do row mem $lim 1024 user "$kind at 1024 MiB/s" probe hog $kind 2048 1024 2; done
    row mem $lim 0 user "one MAP_POPULATE of 2 GiB" probe hog populate 2048 0 2
done
EXTRA=()
for as in user root; do
    for lim in 1 2; do
        row cpu $lim 0 $as "busy loop" probe spin 1 10
        row cpu $lim 0 $as "4 spinning threads" probe spin 4 10
        row cpu $lim 0 $as "shell fork loop" sh -c 'while :; do /bin/true; done'
        row cpu $lim 0 $as "auto-reaped chain 100 × 100 ms" probe reaped-chain 100 100
        row cpu $lim 0 $as "auto-reaped chain 1000 × 10 ms" probe reaped-chain 1000 10
        row cpu $lim 0 $as "auto-reaped chain 2000 × 2 ms" probe reaped-chain 2000 2
        # (Not as root: the kernel exempts the host's uid 0 from RLIMIT_NPROC, and this host's
        # cgroup v2 may have no pids controller.)
        EXTRA=(--pids-limit 1000)
        [ "$as" = user ] && row cpu $lim 0 $as "for(;;) fork() bomb, --pids-limit 1000" probe forkspin bench
        [ "$as" = user ] && [ -n "$CPUCG" ] && INCG=$CPUCG &&
            row cpu $lim 0 $as "for(;;) fork() bomb, --pids-limit 1000, in a child cpu cgroup" probe forkspin bench
        INCG=""
        EXTRA=()
    done
done

# What the monitor costs, and what a sleeping workload is charged: N runs each of a 2 s and a
# 12 s sleep with CPU and memory limits (no cgroup). The charge is the verdict's cpu_time per
# second of wall; the monitor's own CPU per second is the difference between the two lengths
# of its monitor_cpu_time (setup cancels out), as % of one core.
echo
echo "| idle sandbox, --time-limit 20 --memory-limit 64M, no cgroup | median (min … max) |"
echo "|---|---|"
charge="" mon2="" mon12=""
for ((i = 0; i < N; i++)); do
    rm -f "$M"
    "${as_user[@]}" "$W/gpubox" run --time-limit 20 --memory-limit 64M --meta "$M" "$R" sleep 2 >/dev/null 2>&1
    charge+="$(awk -v c="$(field cpu_time)" -v w="$(field wall_time)" 'BEGIN { printf "%.2f", c / w * 1000 }') "
    mon2+="$(field monitor_cpu_time) "
    "${as_user[@]}" "$W/gpubox" run --time-limit 20 --memory-limit 64M --meta "$M" "$R" sleep 12 >/dev/null 2>&1
    mon12+="$(field monitor_cpu_time) "
done
stats() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f (%.2f … %.2f)", m, v[1], v[NR] }'; }
echo "| CPU charged to a sleeping workload, ms per s of wall (target ≤ 10) | $(stats <<<"$charge") |"
echo "| the monitor's own CPU, % of one core (target < 0.5) | $(paste -d' ' <(tr ' ' '\n' <<<"$mon2" | grep .) <(tr ' ' '\n' <<<"$mon12" | grep .) | awk '{ printf "%.3f ", ($2 - $1) / 10 * 100 }' | stats) |"
echo
echo "Mechanisms in full (from the verdicts' limits.NAME.mechanism):"
for k in "${!full[@]}"; do echo "- $k: ${full[$k]}"; done
echo
echo "whole run: ${SECONDS} s; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
