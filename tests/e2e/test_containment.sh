#!/usr/bin/env bash
# Containment without a cgroup (the CI machine's case), tried as a hostile submission would:
# the caller's files behind fds 0-2, memory the sampler did not see (shared, memfd, SysV, tmpfs),
# CPU of processes nobody waits for, and defaults that must protect the host with no limit given.
# What the sandbox really used is read from the harness's own meters (cgroup v1 cpuacct and
# memory, made by the root part of lib.sh), never from gpubox's report alone.
E2E_METER=1
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
M=$WORK/meta.json
if ! have_meter && [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; then
    echo "Bail out! no cgroup v1 meters (CI runs this suite as root, where lib.sh makes them)"; exit 1
fi
# within NUMBER LOW HIGH
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
# metered DESC CPU_LOW CPU_HIGH MEM_LOW_MIB MEM_HIGH_MIB: what the last run really used (the
# meters, from outside) lies within the bounds; "-" for a bound the mechanism does not give.
metered() {
    have_meter || { ok "$1 # SKIP no meter outside CI"; return; }
    local b=("${@:2}") i
    for i in 0 1 2 3; do [ "${b[i]}" != - ] || b[i]=$((i % 2 ? 1000000000 : 0)); done
    if within "$used_cpu" "${b[0]}" "${b[1]}" && within "$used_mem_mib" "${b[2]}" "${b[3]}"; then
        ok "$1 (cpu ${used_cpu}s, memory ${used_mem_mib} MiB)"
    else
        not_ok "$1" "really used: cpu ${used_cpu}s (bounds $2 .. $3), memory ${used_mem_mib} MiB (bounds $4 .. $5)"
    fi
}
# overrun WHAT LIMIT QUIET: the last run's real use past LIMIT, as a TAP comment. How far past
# the limit a sampled limit lets a sandbox go depends on when the sampler gets the CPU: QUIET
# is the figure on a quiet machine (bench/limits.sh), not a bound on a loaded one.
overrun() {
    have_meter || return 0
    echo "# $1: really used cpu ${used_cpu}s, memory ${used_mem_mib} MiB; limit $2 (quiet machine: $3); load $(cut -d' ' -f1 /proc/loadavg)"
}
mrun() { meter_start; box "$@"; meter_stop; }

# --- fds 0-2: nothing the caller hands in can be changed -----------------------------------
printf 'line one\nline two\n' >"$WORK/in.txt"
chmod 444 "$WORK/in.txt"
in_hash=$(stat -c '%a %s' "$WORK/in.txt")$(sha256sum <"$WORK/in.txt")
box run --memory-limit 64M "$R" sh -c 'chmod 644 /proc/self/fd/0; echo PWNED > /proc/self/fd/0; cat' <"$WORK/in.txt"
expect_eq "a stdin file cannot be chmod-ed or rewritten through /proc/self/fd/0" \
    "$(stat -c '%a %s' "$WORK/in.txt")$(sha256sum <"$WORK/in.txt")" "$in_hash"
box run --wall-time-limit 10 "$R" sh -c 'exec 3<>/proc/self/fd/0 && echo PWNED >&3; exec 3>&-; : > /proc/self/fd/0; cat' <"$WORK/in.txt"
expect_eq "  nor opened read-write or truncated, with no limit given either" \
    "$(stat -c '%a %s' "$WORK/in.txt")$(sha256sum <"$WORK/in.txt")" "$in_hash"
box run "$R" cat <"$WORK/in.txt"
expect_eq "  the workload still reads the file's content on stdin" "$out" "line one
line two"
head -c 20000000 /dev/urandom >"$WORK/big.in"
box run "$R" sha256sum <"$WORK/big.in"
expect_eq "  20 MB of stdin arrive intact" "${out%% *}" "$(sha256sum <"$WORK/big.in" | cut -d' ' -f1)"
box run --wall-time-limit 5 --meta "$M" "$R" true <"$WORK/big.in"
expect_eq "  a workload that never reads its stdin file ends normally" "$(field status):$rc" "OK:0"
box run "$R" sh -c 'test -p /proc/self/fd/0 && echo pipe' </dev/null
expect_eq "  /dev/null as stdin is relayed too (an empty pipe)" "$out" pipe
echo keep >"$WORK/log.txt"
chmod 640 "$WORK/log.txt"
"$GPUBOX" run "$R" sh -c 'chmod 666 /proc/self/fd/1; : > /proc/self/fd/1; echo mine' >>"$WORK/log.txt" 2>/dev/null
expect_eq "a stdout file (appended to) keeps its mode and earlier content" "$(stat -c %a "$WORK/log.txt"):$(cat "$WORK/log.txt")" "640:keep
mine"
"$GPUBOX" run "$R" sh -c 'echo out; echo err >&2; echo out2' >"$WORK/both.txt" 2>&1
expect_eq "  stdout and stderr into one file keep their order" "$(cat "$WORK/both.txt")" "out
err
out2"
# Started with fds closed (a daemon, <&-): gpubox's own first fds must not stand in for them.
out=$(timeout 20 "$GPUBOX" run --wall-time-limit 5 "$R" sh -c 'cat; echo ok' <&- 2>&1)
expect_eq "a closed stdin is an empty one: no fd of gpubox's reaches the workload, nothing hangs" "$?:$out" "0:ok"
timeout 20 "$GPUBOX" run "$R" sh -c 'echo out; echo err >&2' >&- 2>&-
expect_eq "  closed stdout and stderr: the run still ends normally" "$?" 0
out=$(echo piped | "$GPUBOX" run "$R" sh -c 'test -p /proc/self/fd/0 && cat')
expect_eq "a pipe stays the caller's pipe" "$out" piped
if command -v script >/dev/null; then
    out=$(script -qec "$GPUBOX run $R sh -c '[ -t 0 ] && [ -t 1 ] && echo tty'" /dev/null </dev/null | tr -d '\r')
    expect_eq "a terminal stays a terminal" "$out" tty
fi

# --- memory: every way to take it is counted, and ends in ML ------------------------------
# Without a cgroup the memory limit is the monitor's: it sums what the sandbox holds every 5 ms,
# and the monitor kills. Whatever the load, that promises: every kind below is counted (else
# the hog holds 256 MiB for 20 s, exits 0 and the run is OK), the kill comes once a pass sees
# the limit (the verdict's peak is past it), and not before the sandbox really holds it (the
# meter: at least the limit less the few MiB that init and the probe hold themselves). How soon
# after the limit the pass comes is the scheduler's: on a quiet machine the overrun stays within
# 10 % + 8 MiB at 1 GiB/s (bench/limits.sh), on a loaded one it grows with the sampler's delay
# (one run on a loaded machine saw 522 MiB through a memfd), so it is printed, not asserted.
# A run that fails having filled gpubox's tmpfs (whose budget is the memory limit: writes end in
# ENOSPC there) failed at the limit: ML too.
limit=64
for kind in anon shared sysv file:/dev/shm/hog file:/tmp/hog file:/var/hog; do
    mrun run --memory-limit ${limit}M --wall-time-limit 60 --meta "$M" "$R" probe hog "$kind" 256 1024 20
    expect_eq "memory held as $kind (256 MiB at 1 GiB/s under --memory-limit ${limit}M): ML" "$(field status):$(field limit)" "ML:memory"
    peak=$(field memory_peak_kb)
    check "  memory_peak_kb ($peak) is the true peak: at least the limit" test "${peak:-0}" -ge $((limit * 1024))
    metered "  the sandbox really held the limit before the kill" - - $((limit - 8)) -
    overrun "  $kind at 1 GiB/s" "${limit} MiB" "within 10 % + 8 MiB"
done
expect_match "  the mechanism: the monitor's sum" "$(mechanism memory)" '^sum over the sandbox .* read by the monitor every 5 ms'
# A memfd's pages are in no process's resident set once unmapped (or sent away in an SCM_RIGHTS
# message and closed): under a memory limit without a cgroup, there are none.
box run --memory-limit ${limit}M --wall-time-limit 60 --meta "$M" "$R" probe hog memfd 256 1024 20
expect_match "memfd_create is refused under a sampled memory limit (ENOSYS: callers fall back to /dev/shm)" "$out" '^hog=0 memfd_create=ENOSYS'
box run --wall-time-limit 60 --meta "$M" "$R" probe hog memfd 1 0 0
expect_eq "  (control: without a memory limit it is there)" "$out" "hog=1"
mrun run --memory-limit ${limit}M --wall-time-limit 60 --meta "$M" "$R" probe hog anon 1024 0 20
expect_eq "1 GiB as fast as it can be touched: ML" "$(field status):$(field limit)" "ML:memory"
metered "  the sandbox really held the limit before the kill" - - $((limit - 8)) -
overrun "  anon as fast as it can be touched" "${limit} MiB" "within 10 % + 32 MiB"
box run --memory-limit 128M --wall-time-limit 60 --meta "$M" "$R" probe hog shared2 80 0 2
expect_eq "80 MiB shared by two processes under --memory-limit 128M: counted once, OK" "$(field status):$out" "OK:hog=80"
box run --memory-limit ${limit}M --wall-time-limit 60 --meta "$M" "$R" probe hog malloc1 512 0 20
expect_eq "one malloc(512M) under --memory-limit 64M: ML, not SG or RE" "$(field status):$(field limit)" "ML:memory"
check "  max_rss_kb is the true peak too, not init's rusage" test "$(field max_rss_kb)" -ge $((limit * 1024))
box run --wall-time-limit 20 --meta "$M" "$R" probe hog file:/dev/hog 64 0 0
expect_match "/dev takes no files (it holds only gpubox's nodes and links)" "$out" '^hog=0 open=EROFS'

# --- one budget for every writable tmpfs -------------------------------------------------------
box run --tmpfs-size 16M --tmpfs /scratch "$R" sh -c '
    for d in /tmp /dev/shm /run /scratch /home; do
        dd if=/dev/zero of=$d/fill bs=1M count=12 2>/dev/null; echo "$d $(( $(wc -c <$d/fill) >> 20 ))"; rm -f $d/fill
    done
    dd if=/dev/zero of=/tmp/a bs=1M count=10 2>/dev/null; dd if=/dev/zero of=/dev/shm/b bs=1M count=10 2>/dev/null
    echo "after 10M in /tmp, /dev/shm took $(( $(wc -c </dev/shm/b) >> 20 ))"'
expect_match "--tmpfs-size 16M caps each writable place alike" "$out" $'^/tmp 12\n/dev/shm 12\n/run 12\n/scratch 12\n/home 12\n'
expect_match "  and all of them together: one budget" "$out" 'after 10M in /tmp, /dev/shm took [0-6]$'
box run --tmpfs-size 16M "$R" probe hog sysv 32 0 0
expect_match "SysV shared memory is bounded by the budget (kernel.shmmax of the sandbox's IPC namespace)" "$out" '^hog=0 shmget=EINVAL'
avail_kb=$(awk '/^MemAvailable/ {print $2}' /proc/meminfo)
box run "$R" sh -c 'df -k /tmp | tail -1; cat /proc/sys/kernel/shmall'
tmp_kb=$(printf '%s\n' "$out" | awk 'NR==1 {print $2}')
check "with no limit at all, the sandbox's tmpfs budget is a quarter of MemAvailable ($tmp_kb KiB of $avail_kb)" \
    within "$tmp_kb" $((avail_kb / 5)) $((avail_kb * 3 / 10))
shmall=$(printf '%s\n' "$out" | sed -n 2p)
check "  and so is SysV shared memory (kernel.shmall $shmall pages)" within "$((shmall * 4))" $((avail_kb / 5)) $((avail_kb * 3 / 10))
box run --print-plan "$R" true
expect_match "  --print-plan states the default pids cap" "$out" '^limit pids: .*4096'
expect_no_match "  and no refusal of the limits' among the seccomp filter's rules" "$out" '^ENOSYS memfd_create'
box run --print-plan --cgroup off --memory-limit 64M "$R" true
expect_match "  under a memory limit without a cgroup, the limits' refusals are the filter's own rules" \
    "$out" $'\nENOSYS memfd_create [^\n]*\nENOSYS vmsplice [^\n]*\nEPERM  clone arg0&0x10400==0x10000 '
box run "$R" probe forkbomb e2e-containment  # (the mark: test_limits runs fork bombs too, perhaps at once)
check "a sandbox with no limit option still cannot make more than 4096 processes ($out)" \
    awk -v o="$out" 'BEGIN { split(o, a, "="); exit !(a[1] == "forks" && a[2] >= 4000 && a[2] < 4096) }'
check "  and none is left" test -z "$(leftovers 'probe forkbomb e2e-containment')"

# --- CPU: every process counts, also those nobody waits for --------------------------------
# The CPU limit is the monitor's too (it sums the sandbox's CPU every 10 ms; the verdict's
# cpu_time is what the kill pass saw), with RLIMIT_CPU at ceil(limit) + 1 s as an exact
# per-process backstop. Whatever the load, that promises: every process is counted (else these
# workloads, which end by themselves after 4 s of CPU or never, end OK or at the wall limit);
# the kill comes once a pass sees the limit; a process someone waits for is counted exactly (its
# cutime), so the sandbox really used the limit. A child the kernel reaps is in nobody's cutime.
# Where the kernel lends gpubox a perf counter (kernel.perf_event_paranoid <= 2, and no filter of
# a container refusing perf_event_open), such children are charged what its count of the
# workload (every process it forked, dead ones included: isolate/tree_clock.hpp) says beyond the
# sum: the sandbox really used its limit, less what a hypervisor's steal adds to the count (5-6 %
# measured on the development VM beside other tests, up to 18 % once in a CI run: held to 80 %;
# the upper bound alone stopped the chains below at 50-77 %). Elsewhere, and never more than
# that, each is charged an upper bound (its last sample plus the time since, however long the
# sampler was kept waiting; a pid never seen, at most what the CPUs could have run meanwhile), so
# a chain's charge is at most (2 x CPUs + 1) x its wall time and the run lasts at least limit /
# (2 x CPUs + 1). That fallback is tried here too, as in a container: gpubox run under a seccomp
# filter that refuses perf_event_open (no_perf.py). How late a pass comes on a loaded machine is
# the scheduler's: the overrun is printed, not asserted.
cpus=$(nproc)
# cpu_test DESC LIMIT exact|counted|charged MAX_CPU WORKLOAD...: MAX_CPU "-" where no rlimit
# bounds the whole workload.
cpu_test() {
    local desc=$1 lim=$2 how=$3 max=$4 what
    shift 4
    mrun run --time-limit "$lim" --wall-time-limit 60 --meta "$M" "$R" "$@"
    expect_eq "$desc under --time-limit $lim: TO" "$(field status):$(field limit)" "TO:cpu_time"
    check "  the kill saw the limit (cpu_time $(field cpu_time))" within "$(field cpu_time)" "$lim" 1000000
    if [ "$how" = exact ]; then
        what="counted exactly: really used the limit"
        [ "$max" = - ] || what+=", and at most $max s (RLIMIT_CPU, plus gpubox's own processes)"
        metered "  $what" "$(awk -v l="$lim" 'BEGIN { print l * 0.95 }')" "$max" - -
    elif [ "$how" = counted ]; then
        metered "  charged by the kernel's count: really used the limit, less what a hypervisor's steal adds to the count" \
            "$(awk -v l="$lim" 'BEGIN { print l * 0.8 }')" - - -
    else
        check "  charged an upper bound, not more: the run lasted at least limit / $((2 * cpus + 1)) ($(field wall_time) s)" \
            within "$(field wall_time)" "$(awk -v l="$lim" -v c="$cpus" 'BEGIN { print l / (2 * c + 1) }')" 1000000
    fi
    overrun "  $desc" "${lim} s" "within 10 % + 0.2 s"
}
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)
if perf_lent; then reaped=counted
else reaped=charged; echo "# kernel.perf_event_paranoid is $paranoid here: such children are charged the upper bound"; fi
cpu_test "auto-reaped children (SIGCHLD ignored), 40 x 100 ms" 1 $reaped - probe reaped-chain 40 100
expect_match "  the mechanism (kernel.perf_event_paranoid $paranoid)" "$(mechanism cpu_time)" "$(cpu_counted_re)"
cpu_test "auto-reaped children (SA_NOCLDWAIT), 40 x 100 ms" 1 $reaped - probe reaped-chain 40 100 nocldwait
cpu_test "auto-reaped children that live less than a sampling period, 400 x 10 ms" 1 $reaped - probe reaped-chain 400 10
# Children far shorter than a pass: the sum over /proc charged each never seen the time between
# passes, and killed the chain having really used 0.51 s of its 1 s (ffc419f; 400 x 10 ms: 0.77 s).
cpu_test "auto-reaped children of 2 ms each, one at a time, 2000 of them" 1 $reaped - probe reaped-chain 2000 2
# The fallback, as in a container whose filter refuses perf_event_open.
printf '#!/bin/sh\nexec python3 %s %s "$@"\n' "$E2E_DIR/no_perf.py" "$GPUBOX" >"$WORK/gpubox-no-perf"
chmod 755 "$WORK/gpubox-no-perf"
GPUBOX=$WORK/gpubox-no-perf cpu_test "without the kernel's counter (perf_event_open refused), auto-reaped children, 40 x 100 ms" \
    1 charged - probe reaped-chain 40 100
expect_match "  the mechanism: the monitor's sum, such children charged an upper bound" "$(mechanism cpu_time)" \
    "^sum over the sandbox's processes .*read by the monitor every 10 ms.* is charged an upper bound"
GPUBOX=$WORK/gpubox-no-perf cpu_test "  and a shell fork loop, waited for" 2 exact - sh -c 'while :; do /bin/true; done'
cpu_test "a shell fork loop" 2 exact - sh -c 'while :; do /bin/true; done'
# One process: RLIMIT_CPU (2 s) bounds it; the meter also counts gpubox's monitor and init.
cpu_test "4 spinning threads" 1 exact 2.5 probe spin 4 10
mrun run --time-limit 2 --wall-time-limit 60 --meta "$M" "$R" probe spin 1 0.5
expect_eq "  a run under its CPU limit is OK" "$(field status)" "OK"
check "  and its cpu_time is what the sandbox used: the probe's 0.5 s, at most all the meter saw ($(field cpu_time))" \
    within "$(field cpu_time)" 0.5 "${used_cpu:-1e9}"
check "nothing of any sandbox is left" test -z "$(leftovers 'probe (hog|spin|reaped)')"
finish
