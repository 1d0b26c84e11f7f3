#!/usr/bin/env bash
# The limits without a cgroup, attacked (issue #31): each attack a hostile submission can make
# against the memory and CPU limits when nothing is delegated, judged by what the sandbox really
# used, read from the harness's own meters (cgroup v1 cpuacct and memory, made by the root part of
# lib.sh: they count the kernel's memory a process makes it hold, too), never from gpubox's report
# alone. Each bound below is a mechanism's, not a timing's: the whole footprint of a sandbox with
# --memory-limit L stays within 2 x L + 64 MiB; a CPU limit of 1 s is killed by 1.2 s of CPU.
E2E_METER=1 E2E_CPU_CGROUP=1
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
M=$WORK/meta.json
if ! have_meter && [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; then
    echo "Bail out! no cgroup v1 meters (CI runs this suite as root, where lib.sh makes them)"; exit 1
fi
if have_meter && [ -z "${E2E_CPUCG:-}" ] && [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; then
    echo "Bail out! no child cpu cgroup (lib.sh makes one as root, beside the meters)"; exit 1
fi
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
mrun() { meter_start; box "$@"; meter_stop; }
# footprint DESC LIMIT_MIB: the last run really held at most 2 x LIMIT + 64 MiB.
footprint() {
    have_meter || { ok "$1 # SKIP no meter outside CI"; return; }
    local max=$(($2 * 2 + 64))
    if [ "$used_mem_mib" -le "$max" ]; then ok "$1 (really held $used_mem_mib MiB, bound $max)"
    else not_ok "$1" "really held $used_mem_mib MiB; bound 2 x $2 + 64 = $max MiB"; fi
}
# cpu_bound DESC MAX: the last run's sandbox really used at most MAX s of CPU: what the meter saw
# less the monitor's own (gpubox's rusage, which --meta reports; 0 where an old build does not).
cpu_bound() {
    have_meter || { ok "$1 # SKIP no meter outside CI"; return; }
    local mon sandbox
    mon=$(field monitor_cpu_time)
    sandbox=$(awk -v u="$used_cpu" -v m="${mon:-0}" 'BEGIN { printf "%.3f", u - m }')
    if within "$sandbox" 0 "$2"; then ok "$1 (the sandbox really used ${sandbox}s; the monitor ${mon:-?}s)"
    else not_ok "$1" "the sandbox really used ${sandbox}s of CPU (the meter ${used_cpu}s, the monitor ${mon:-?}s); bound $2 s"; fi
    # What a judge reads: where the kernel's count bounds what the monitor charges for children
    # it reaps, the verdict's cpu_time is near what the sandbox really used (the meter also
    # holds init and the shell that started gpubox). Near, not within a few %: the count holds
    # the time a hypervisor steals from the vCPUs (1.31 s once for 1.11 s in a CI run; 1.0-1.15
    # s on the development VM). Without it a fork bomb's vanished children were charged bounds:
    # 2.6-8.4 s reported for ~1.1 s really used in 5 of 33 runs (ffc419f).
    case "$(mechanism cpu_time)" in *"the kernel's count"*)
        check "  and the cpu_time it reports is near what it really used ($(field cpu_time) s; really ${sandbox}s)" \
            within "$(field cpu_time)" 1 "$(awk -v s="$sandbox" 'BEGIN { print s * 1.5 }')" ;;
    esac
}
# stopped: the run was killed for its memory (ML), or the workload was refused what it asked for
# (its probe says why it stopped): either way it did not get to hold it.
stopped() { [ "$(field status):$(field limit)" = ML:memory ] || matches "$out" '^(hog|kmem|remote)=[0-9]+ ([a-z_]+=)?E[A-Z]+'; }

# --- memory it counts, it counts once ---------------------------------------------------------
mrun run --memory-limit 256M --wall-time-limit 60 --meta "$M" "$R" probe hog cow 100 0 2
expect_eq "100 MiB touched, then shared copy-on-write by 7 idle children, under --memory-limit 256M: OK" \
    "$(field status):$out" "OK:hog=100"
footprint "  and it really held about 100 MiB" 256
# What it reports (memory_peak_kb), with a limit far above: by share too, not every child's
# resident set again (4ab5a9f reported 813 MiB for these 100; a PyTorch job's 4 DataLoader
# workers on a real GPU 2.6 GiB for 0.68), and no more than the meter outside saw (but the fds'
# charges, bounds of up to 10 KiB an fd: 8 MiB).
mrun run --memory-limit 2G --wall-time-limit 60 --meta "$M" "$R" probe hog cow 100 0 2
peak=$(($(field memory_peak_kb) / 1024)) seen=${used_mem_mib:-}
have_meter || seen=140
check "the same under --memory-limit 2G reports the peak it held: $peak MiB (outside: ${seen:-?} MiB)" \
    within "$peak" 100 $((seen + 8))
# And where the children then write every page (8 copies, 256 MiB; Python's reference counts do
# it to a forked worker's objects): pages stop being shared without any process's resident set
# growing. The shares are read again while pages are shared, paced by what a read costs (200
# times it: 3.5 ms a read here, so every 0.7 s; 5 s held leave several reads after the writes):
# the report holds the 8 copies (a build that read them only at a new peak reported 34 MiB).
mrun run --memory-limit 2G --wall-time-limit 60 --meta "$M" "$R" probe hog cow-write 32 0 5
peak=$(($(field memory_peak_kb) / 1024)) seen=${used_mem_mib:-}
have_meter || seen=300
check "32 MiB shared by 8 processes, then copied by each, under --memory-limit 2G: $peak MiB reported (outside: ${seen:-?} MiB)" \
    within "$peak" 240 $((seen + 8))

# --- memory it counts cannot hide -------------------------------------------------------------
for kind in memfd-hidden memfd-flight; do
    mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe hog "$kind" 256 1024 5
    check "a 256 MiB memfd ($kind) under --memory-limit 64M: ML, or no memfd at all ($(field status): $out)" stopped
    footprint "  the sandbox's footprint stays bounded" 64
done

# A process that never runs keeps what it was read to hold (its status is not read again), unless
# its resident set moves: 512 MiB written into a sleeping child's untouched mapping by its parent
# (process_vm_writev, which MPI's cross-memory attach needs) is counted all the same.
mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe remote 512 3
check "512 MiB faulted into a sleeping process from outside it, under --memory-limit 64M: ML ($(field status): $out)" stopped
footprint "  the sandbox's footprint stays bounded" 64

# --- the sampler is not the workload's --------------------------------------------------------
box run --time-limit 5 --memory-limit 64M --meta "$M" "$R" sleep 2
check "a sleeping workload is charged at most 10 ms per second of wall ($(field cpu_time) s for $(field wall_time) s)" \
    awk -v c="$(field cpu_time)" -v w="$(field wall_time)" 'BEGIN { exit !(c <= 0.010 * w) }'
box run --time-limit 0.5 --memory-limit 64M --meta "$M" "$R" sleep 2
expect_eq "  and a 2 s sleep under --time-limit 0.5 is OK: the wait is not CPU" "$(field status)" OK

# --- the sampler cannot be starved --------------------------------------------------------------
# killed by 1.2 s: the limit, plus what 2 CPUs run in the 0.1 s a pass may take to come round.
# Twice: where the test runs (in the root cpu cgroup, the sandbox's session is an autogroup of its
# own, which shares the CPU with the monitor's as one task), and in a child cpu cgroup, where
# autogroup does not apply and the monitor is one task among the sandbox's thousand. There the
# crowd shares the monitor's run queue, where SCHED_IDLE tasks that waited long enough outrank the
# monitor and each run up to a tick before it (stalls of seconds: 1.08-5.7 s measured before), so
# at most 100 of its processes a CPU run at once and the rest take turns, near the limit the
# monitor passes without sleeping, and a crowd is set apart from the monitor's CPU
# (docs/limits.md). The fork bomb is held to the same 1.2 s there (with the teardown below):
# before the crowd was set apart it was held to 1.5 s there, measured 1.07-1.22 s (e743dc2, load
# 185-270 from other sessions; the build before it 1.37-3.32 s); set apart, 39 runs with two busy
# loops or other e2e tests beside it came to 0.86-1.13 s (median 1.00) past the teardown, at least
# 66 ms inside the bound. "Where the test runs" is itself a child cgroup when the suite is started
# in one (a CI job's, a service's, tools/fresh-root-check.sh's). The session bomb's children
# each call setsid(): in the root cpu cgroup each new session would be an autogroup, a scheduling
# group as heavy as the monitor's whatever its tasks' policy, so there setsid() is refused to a
# crowd (the build before: 8-10 s of wall time on 2 CPUs, the monitor given 35 ms); in a child
# cgroup autogroups do not apply and it is the fork bomb again.
# A bomb is killed with up to 1000 processes, and the kernel's work to end them (their memory
# unmapped, their page tables freed, each reaped) is charged to the sandbox after the kill, by any
# mechanism (a cgroup's count holds it too). It is the host's: 0.43-0.54 s on the VM where a CI
# run failed this bound (fork and exit of a small process there: 0.4-0.6 ms). Measured here,
# outside gpubox, for 1000 copies of the probe, and allowed on top of the bomb's bound: once
# before the bombs, and again right after each, under the load it ran under (a CI run with a
# compiler beside it: forkspin 1.719 s against 1.2 + 0.499 measured before it), the larger.
teardown_s() { "$PROBE" teardown 1000 "$E2E_CPUACCT/cpuacct.usage" | sed -n 's/.*teardown_s=//p'; }
teardown=0
if have_meter; then
    teardown=$(teardown_s)
    check "the kernel's teardown of 1000 processes is measured (${teardown:-?} s)" within "${teardown:-x}" 0 5
fi
own_cpu_cgroup=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3; exit}' /proc/self/cgroup)
[ -n "$own_cpu_cgroup" ] || own_cpu_cgroup=$(awk -F: '$1 == 0 {print $3; exit}' /proc/self/cgroup)
for cg in "" ${E2E_CPUCG:+"$E2E_CPUCG"}; do
    where=${cg:+" (in a child cpu cgroup)"}
    for w in "sh -c 'while :; do :; done'" "probe spin 4 10" "sh -c 'while :; do /bin/true; done'" "probe forkspin e2e-attacks" "probe sessionspin e2e-attacks"; do
        meter_start
        # gpubox started by a subshell that moved itself into the cgroup first
        eval "(${cg:+echo \$BASHPID >\"\$cg/cgroup.procs\" &&} box run --time-limit 1 --pids-limit 1000 --wall-time-limit 30 --meta \"\$M\" \"\$R\" $w)"
        meter_stop
        expect_eq "--time-limit 1 against $w$where: TO on the CPU limit" "$(field status):$(field limit)" "TO:cpu_time"
        bound=1.2
        # The session bomb is not the issue's 1.2 s workload list: its bound is that the limit
        # holds near 1 s, not 14 (measured 1.08-1.20 s; 1.201 s once with the fresh-root check's
        # whole suite beside the CI run on the same 2 CPUs).
        [ "${w#probe sessionspin}" != "$w" ] && bound=1.5
        if [ "${w%spin e2e-attacks}" != "$w" ]; then
            again=$(have_meter && teardown_s)
            bound=$(awk -v b="$bound" -v t="${teardown:-0}" -v u="${again:-0}" \
                'BEGIN { printf "%.3f", b + (u > t ? u : t) }')
        fi
        cpu_bound "  killed by $bound s of CPU, measured from outside" "$bound"
    done
    check "  nothing of the fork bomb is left" test -z "$(leftovers 'probe forkspin e2e-attacks')"
    check "  nothing of the session bomb is left" test -z "$(leftovers 'probe sessionspin e2e-attacks')"
done
# An honest crowd takes turns (at most 100 runnable processes a CPU; the rest stopped, then
# continued in turn): 300 busy processes under a CPU limit all finish, and their shell's wait sees
# nothing of it.
box run --time-limit 60 --pids-limit 1000 --wall-time-limit 120 --meta "$M" "$R" sh -c \
    'i=0; while [ $i -lt 300 ]; do (n=0; while [ $n -lt 30000 ]; do n=$((n+1)); done; echo x) & i=$((i+1)); done; wait'
expect_eq "300 busy processes under --time-limit 60, a crowd taking turns: all finish" \
    "$(field status):$(echo "$out" | grep -c x)" "OK:300"
# A crowd of more than 16 tasks a CPU is set apart from the monitor: its processes pinned to the
# other CPUs, and given every CPU back once it is no crowd (docs/limits.md). Where the test runs
# (in the root cpu cgroup, an autogroup beside the monitor's) and in a child cpu cgroup (where it
# takes turns too). What the workload's shell sees of its own CPUs: before, among 100 sleepers,
# after they are gone. (Up to a7b3bd3, a crowd was set apart in a child cgroup alone.)
if [ "$(nproc)" -ge 2 ]; then
    cat >"$R/apart.sh" <<'SH'
c() { grep Cpus_allowed_list /proc/self/status | cut -f2; }
before=$(c)
i=0
while [ $i -lt 100 ]; do sleep 1 & i=$((i + 1)); done
sleep 0.5
among=$(c)
wait
sleep 0.5
echo "$before $among $(c)"
SH
    for cg in "" ${E2E_CPUCG:+"$E2E_CPUCG"}; do
        where=${cg:+" in a child cpu cgroup"}
        : >"$WORK/apart"
        eval "(${cg:+echo \$BASHPID >\"\$cg/cgroup.procs\" &&} box run --time-limit 30 --pids-limit 1000 \
            --wall-time-limit 60 \"\$R\" sh /apart.sh && echo \"\$out\" >\"\$WORK/apart\")"
        read -r before among after <"$WORK/apart"
        check "a crowd of 100${where:- where the test runs} is set apart: its CPUs $before, among it $among" \
            test -n "$among" -a "$among" != "$before"
        expect_eq "  and once it is gone, its CPUs are every one again" "$after" "$before"
    done
fi
# What a workload sees of that: setsid() refused only to a crowd, only where autogroups apply.
autogroups=no
if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] && [ "$own_cpu_cgroup" = / ]; then
    autogroups=yes
fi
box run --time-limit 5 "$R" probe setsid
expect_eq "setsid() under a CPU limit and the default pids limit (autogroups here: $autogroups)" \
    "$out" "setsid=$([ $autogroups = yes ] && echo EPERM || echo OK)"
box run --time-limit 5 --pids-limit $((4 * $(nproc))) "$R" probe setsid
expect_eq "  and with a pids limit of 4 a CPU (no crowd): works" "$out" "setsid=OK"

# --- kernel memory is bounded -----------------------------------------------------------------
# Each form held in no process's resident set: SysV messages (1 byte each, ~64 bytes of slab),
# empty files (an inode and a dentry each), page tables (one per 2 MiB mapped).
for k in "msgq 4000000" "files 400000" "ptes 60000"; do
    mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe kmem $k 3
    check "kernel memory ($k) under --memory-limit 64M: ML, or capped ($(field status): $out)" stopped
    footprint "  the sandbox's footprint stays bounded" 64
done
# Mappings no page backs (a vm_area_struct each, ~240 bytes of slab, up to vm.max_map_count a
# process): 1.2 million across 20 processes.
mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe vmas 1200000 3
check "kernel memory (mappings) under --memory-limit 64M: ML ($(field status): $out)" stopped
footprint "  the sandbox's footprint stays bounded" 64

# Held through open files (#31), in no process's resident set: pipes enlarged and filled, 1000
# per process (pipe data is capped per user at fs.pipe-user-pages-soft, 64 MiB, then 2 pages a
# pipe: processes multiply it); pipes pinning huge pages through vmsplice (one 4 KiB slot holds
# its whole 2 MiB page); epoll watches on timerfds, many per file (a watch lives while its file
# does, whatever became of the fd it was added through); inotify instances' event queues (8 MiB
# each, 128 per user); pipes held by threads with fd tables of their own, which /proc/PID/fd
# does not show. The monitor charges each open fd what the costliest fd it cannot see into
# holds, counts epoll watches, and refuses vmsplice and threads' own fd tables; the user namespace
# caps inotify instances.
for k in "pipes 20000" "threads 20000" "vmsplice 20" "epoll 1500000" "inotify 32"; do
    mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe fdkmem $k 3
    check "kernel memory through open files ($k) under --memory-limit 64M: ML, or refused ($(field status): $out)" stopped
    footprint "  the sandbox's footprint stays bounded" 64
done
# The same watches while the monitor's session is crowded: busy loops in the session gpubox was
# started from (a judge's, a CI job's), which autogroups schedule with the monitor as one share,
# the workload, a session of its own, as a whole share alone. Reading a watch costs what making
# one does, and the build before's walk got a seventh of the workload's CPU: all 1.5 million
# were made (300 MiB held). A walk that finds the sandbox's kernel memory growing now puts the
# workload's session at nice 19. The loops run 6 s: the build before had made them all by
# 2.5-3.2 s; held below them, the workload makes the rest once they end. (Where autogroups do
# not apply, the workload's SCHED_IDLE holds it below the monitor, and this passes as well.)
loops=()
for _ in $(seq $((2 * $(nproc)))); do timeout 6 sh -c 'while :; do :; done' & loops+=($!); done
mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe fdkmem epoll 1500000 3
kill "${loops[@]}" 2>/dev/null; wait "${loops[@]}" 2>/dev/null
check "epoll watches, the monitor's session crowded ($((2 * $(nproc))) busy loops), under --memory-limit 64M: ML ($(field status): $out)" stopped
footprint "  the sandbox's footprint stays bounded" 64
# The forms stacked ("the forms stack", #31): SysV messages, empty files, an inotify queue and
# pipes to the user's soft limit, each capped or charged, in one sandbox, then anonymous memory up
# to the limit beside them. The capped forms' terms add up (the message queues, the tmpfs's inodes
# and inotify's queues about L / 8 each, the pipes' 64 MiB); the footprint still stays within
# 2 x L + 64 MiB (the build before, with 32 MiB of message queues at any L: 170 MiB held; now 143).
mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" sh -c \
    'probe kmem msgq 4000000 4 & probe kmem files 400000 4 & probe fdkmem inotify 32 4 &
     probe fdkmem pipes 1500 4 & sleep 1; probe hog anon 60 64 3; wait'
expect_match "kernel memory's forms stacked, then anonymous memory to the limit, under --memory-limit 64M: ML or OK" "$(field status)" '^(ML|OK)$'
footprint "  the sandbox's footprint stays bounded" 64
# The fd starvation attack: 100 sleepers with 5000 fds each, then one process allocating 2 GiB as
# fast as it can. A pass reads no fd (its cost is per process), so the kill comes in time.
mrun run --memory-limit 64M --nofile-limit 5000 --wall-time-limit 60 --meta "$M" "$R" probe fdkmem fdstarve 4990 3
check "100 sleepers x 5000 fds, then 2 GiB, under --memory-limit 64M: ML ($(field status): $out)" stopped
footprint "  the sandbox's footprint stays bounded" 64
# ...and an honest program's files are no reason to kill it: 1000 open files under 256M.
mrun run --memory-limit 256M --wall-time-limit 60 --meta "$M" "$R" probe fdkmem open 1000 1
expect_eq "1000 open files under --memory-limit 256M: OK" "$(field status):$out" "OK:kmem=1000 done"

# Socket buffers: the kernel's memory, charged to no process. Up to 512 MiB queued and left
# unread (the probe's own cap, so that a build that neither counts nor bounds them cannot take the
# host's memory): unix stream pairs, the same with 1-byte writes and the writer closed (its
# sock leaves sock_diag's list, the reader's queue stays), unix datagram pairs with the writer
# closed, datagram sockets with an address fed by senders that closed (an empty datagram first:
# its queue's length reads 0), TCP over loopback. Counted through sock_diag in the sandbox's
# network namespace. The meter does not see TCP's buffers (cgroup v1 accounts them only where
# memory.kmem.tcp is limited): there only the ML is judged.
for k in ustream ustream-closed udgram-closed udgram-named tcp; do
    mrun run --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe sockmem $k 512 3
    check "socket buffers ($k) under --memory-limit 64M: ML, or refused ($(field status): $out)" stopped
    footprint "  the sandbox's footprint stays bounded" 64
done

# --- judges can demand exactness ---------------------------------------------------------------
box run --memory-limit 64M --meta "$M" "$R" true
if [ "$(field cgroup)" = null ]; then
    box run --require-cgroup --memory-limit 64M --meta "$M" "$R" true
    expect_eq "--require-cgroup where no cgroup v2 with memory can be had: 125, XX" "$rc:$(field status)" "125:XX"
    expect_match "  one line, and the doctor fix" "$err" $'^gpubox: --require-cgroup: no cgroup v2 with the memory controller[^\n]*gpubox doctor[^\n]*\ngpubox: hint: '
    # In the host's network namespace the monitor cannot count socket buffers: refused, not
    # left unbounded (the build before ran it, and 512 MiB of unix stream buffers ended OK).
    box run --share-net --memory-limit 64M --wall-time-limit 60 --meta "$M" "$R" probe sockmem ustream 512 3
    expect_eq "--memory-limit with --share-net and no cgroup: refused, 125, XX" "$rc:$(field status)" "125:XX"
    expect_match "  one line naming the cgroup it needs, and a hint" "$err" $'^gpubox: --memory-limit with --share-net needs a cgroup with the memory controller[^\n]*\ngpubox: hint: drop --share-net'
else
    box run --require-cgroup --memory-limit 64M --meta "$M" "$R" true
    expect_eq "--require-cgroup with a cgroup: runs, exact" "$rc:$(field status):$(mechanism memory)" "0:OK:cgroup memory.max (swap off)"
fi
finish
