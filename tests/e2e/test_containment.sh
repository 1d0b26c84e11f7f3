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
# metered DESC MAX_CPU MAX_MEM_MIB: what the last run really used stays within the bound.
metered() {
    have_meter || { ok "$1 # SKIP no meter outside CI"; return; }
    if within "$used_cpu" 0 "$2" && [ "$used_mem_mib" -le "$3" ]; then ok "$1 (cpu ${used_cpu}s, memory ${used_mem_mib} MiB)"
    else not_ok "$1" "really used: cpu ${used_cpu}s (max $2), memory ${used_mem_mib} MiB (max $3)"; fi
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

# --- memory: every way to take it ends in ML, within 10 % + a few MiB ----------------------
limit=64
# At 1 GiB/s, the rate the bound is promised for. A run that fails having filled gpubox's tmpfs
# (whose budget is the memory limit: writes end in ENOSPC there) failed at the limit: ML too.
for kind in anon shared memfd sysv file:/dev/shm/hog file:/tmp/hog file:/var/hog; do
    mrun run --memory-limit ${limit}M --wall-time-limit 20 --meta "$M" "$R" probe hog "$kind" 1024 1024 2
    expect_eq "memory held as $kind (1 GiB at 1 GiB/s under --memory-limit ${limit}M): ML" "$(field status):$(field limit)" "ML:memory"
    peak=$(field memory_peak_kb)
    check "  memory_peak_kb ($peak) is the true peak: at least the limit" test "${peak:-0}" -ge $((limit * 1024))
    metered "  really used at most 10 % + 8 MiB over the limit" 30 $((limit * 11 / 10 + 8))
done
mrun run --memory-limit ${limit}M --wall-time-limit 20 --meta "$M" "$R" probe hog anon 1024 0 2
expect_eq "1 GiB as fast as it can be touched: ML" "$(field status)" "ML"
metered "  really used at most 10 % + 32 MiB over the limit (the 5 ms sampling period at several GiB/s)" 30 $((limit * 11 / 10 + 32))
box run --memory-limit 128M --wall-time-limit 20 --meta "$M" "$R" probe hog shared2 80 0 2
expect_eq "80 MiB shared by two processes under --memory-limit 128M: counted once, OK" "$(field status):$out" "OK:hog=80"
box run --memory-limit ${limit}M --wall-time-limit 20 --meta "$M" "$R" probe hog malloc1 512 0 1
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
box run "$R" probe forkbomb
check "a sandbox with no limit option still cannot make more than 4096 processes ($out)" \
    awk -v o="$out" 'BEGIN { split(o, a, "="); exit !(a[1] == "forks" && a[2] >= 4000 && a[2] < 4096) }'
check "  and none is left" test -z "$(pgrep -f 'probe forkbomb' || true)"

# --- CPU: every process counts, also those nobody waits for --------------------------------
mrun run --time-limit 1 --wall-time-limit 20 --meta "$M" "$R" probe reaped-chain 40 100
expect_eq "auto-reaped children (SIGCHLD ignored), 40 x 100 ms, under --time-limit 1: TO" "$(field status):$(field limit)" "TO:cpu_time"
metered "  really used at most 10 % + one sampling period over the limit" 1.2 200
mrun run --time-limit 1 --wall-time-limit 20 --meta "$M" "$R" probe reaped-chain 40 100 nocldwait
expect_eq "auto-reaped children (SA_NOCLDWAIT): TO" "$(field status):$(field limit)" "TO:cpu_time"
metered "  really used at most 10 % + one sampling period over the limit" 1.2 200
mrun run --time-limit 1 --wall-time-limit 20 --meta "$M" "$R" probe reaped-chain 400 10
expect_eq "auto-reaped children that live less than a sampling period, 400 x 10 ms: TO" "$(field status):$(field limit)" "TO:cpu_time"
metered "  really used at most 10 % + one sampling period over the limit" 1.2 200
mrun run --time-limit 2 --wall-time-limit 20 --meta "$M" "$R" sh -c 'while :; do /bin/true; done'
expect_eq "a shell fork loop under --time-limit 2: TO" "$(field status):$(field limit)" "TO:cpu_time"
metered "  really used at most 10 % + one sampling period over the limit" 2.3 200
mrun run --time-limit 1 --wall-time-limit 20 --meta "$M" "$R" probe spin 4 10
expect_eq "4 spinning threads under --time-limit 1: TO" "$(field status):$(field limit)" "TO:cpu_time"
metered "  really used at most 10 % + one sampling period over the limit" 1.2 200
mrun run --time-limit 1 --wall-time-limit 20 --meta "$M" "$R" probe spin 1 0.5
expect_eq "  a run under its CPU limit is OK" "$(field status)" "OK"
check "  and its cpu_time is what it used ($(field cpu_time))" within "$(field cpu_time)" 0.5 0.7
sleep 0.2
check "nothing of any sandbox is left" test -z "$(pgrep -f 'probe (hog|spin|reaped)' || true)"
finish
