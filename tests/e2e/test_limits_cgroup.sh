#!/usr/bin/env bash
# The cgroup v2 path. gpubox uses a cgroup where it may make one: a delegated subtree, or
# anywhere as root. CI delegates nothing, so this script alone runs as root (the others drop to
# uid 65534); elsewhere it runs as the caller and skips if no cgroup can be made.
E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
M=$WORK/meta.json

box run --print-plan --time-limit 1 "$R" true
if ! printf '%s\n' "$out" | grep -q '^limit kill: cgroup.kill$'; then
    if [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
        echo "Bail out! root could not make a cgroup: $(printf '%s\n' "$out" | grep '^limit')"; exit 1
    fi
    echo "1..0 # SKIP no cgroup v2 subtree this user may write (not root, nothing delegated)"
    exit 77
fi
ok "gpubox makes a cgroup of its own here (uid $(id -u))"
expect_match "--print-plan: CPU time from cpu.stat" "$out" '^limit cpu_time: cgroup cpu.stat usage_usec'

box run --time-limit 0.5 --wall-time-limit 10 --meta "$M" "$R" sh -c 'while :; do :; done'
expect_eq "CPU spin: TO on the CPU limit" "$(field status):$(field limit):$rc" "TO:cpu_time:137"
# cpu.stat is read every 50 ms (later on a loaded machine); RLIMIT_CPU, ceil(0.5) + 1 = 2 s, bounds
# the one process whatever the load: the cgroup's kill came first.
check "  cpu time (cgroup) at the limit, and before the RLIMIT_CPU backstop ($(field cpu_time) s)" \
    awk -v c="$(field cpu_time)" 'BEGIN { exit !(c >= 0.5 && c < 2) }'
expect_eq "  mechanism" "$(mechanism cpu_time)" "cgroup cpu.stat usage_usec, sampled every 50 ms"
cg=$(field cgroup)
expect_match "  the verdict names the sandbox's cgroup" "$cg" '/gpubox-[0-9]+$'
check "  the cgroup is removed afterwards" test ! -e "$cg"
# A monitor killed by SIGKILL leaves its (empty) cgroup: the next run removes it, unless its
# monitor is alive.
parent=${cg%/*}
mkdir "$parent/gpubox-4194000" "$parent/gpubox-$$"
box run --time-limit 1 "$R" true
check "a stale sandbox cgroup (its monitor gone) is removed by the next run" test ! -e "$parent/gpubox-4194000"
check "  one whose monitor lives stays" test -d "$parent/gpubox-$$"
rmdir "$parent/gpubox-$$" "$parent/gpubox-4194000" 2>/dev/null

# A wall-clock limit alone is a timer: no cgroup is made for it, and the pid namespace ends
# with its init. With a CPU limit beside it the cgroup is made, and its kill ends the sandbox.
escape='(setsid sh -c "trap \"\" TERM HUP; exec sleep 4311" &) ; exec sleep 4311'
box run --wall-time-limit 1 --meta "$M" "$R" sh -c "$escape"
expect_eq "double fork + setsid under a wall-clock limit alone: TO, no cgroup, killed through init" \
    "$(field status):$(mechanism kill):$(field cgroup)" "TO:SIGKILL to the pid namespace's init:null"
sleep 0.2
expect_eq "  nothing survives" "$(pgrep -f 'sleep 4311' || true)" ""
box run --time-limit 30 --wall-time-limit 1 --meta "$M" "$R" sh -c "$escape"
expect_eq "  with a CPU limit too: TO, killed through cgroup.kill" "$(field status):$(mechanism kill)" "TO:cgroup.kill"
sleep 0.2
expect_eq "  nothing survives" "$(pgrep -f 'sleep 4311' || true)" ""

box run --memory-limit 64M --wall-time-limit 10 --meta "$M" "$R" probe membomb
expect_eq "memory bomb: ML, by whichever mechanism this host offers" "$(field status)" ML
expect_match "  the mechanism is named" "$(mechanism memory)" '^(cgroup memory.max|sum over the sandbox)'
box run --pids-limit 10 --meta "$M" "$R" true
expect_match "pids: the mechanism says whether it is enforced" "$(mechanism pids)" '^(cgroup pids.max|RLIMIT_NPROC)'
finish
