#!/usr/bin/env bash
# Runs in the systemd guest of tests/vm/test_systemd_vm.sh as the lingering user "tester": no
# login session, a cgroup that root owns (the test's own service), and a systemd user manager
# with a delegated subtree. gpubox's way to a cgroup there is a transient scope. Asserts on
# cgroup files and events, never on CPU shares: the guest runs under software emulation.
# The guest's kernel is Debian 12's own (6.1), whose overlayfs takes no layer from a detached
# mount: the roots are checked here first, as a user of Debian 12, RHEL 9 or Ubuntu 22.04 runs them.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
box run "$R" true
[ "$rc" = 0 ] || { echo "Bail out! gpubox cannot run a trivial sandbox: $err"; exit 1; }
M=$WORK/meta.json
box run "$R" sh -c 'echo new >/etc/gpubox-vm; cat /etc/gpubox-vm; ls /tmp /run; df -k /tmp | tail -1'
expect_match "the overlay root on Linux $(uname -r): a write lands in gpubox's layer" "$out" '^new$'
check "  and never in ROOTFS" test ! -e "$R/etc/gpubox-vm"
box run --read-only "$R" sh -c 'touch /etc/x 2>&1; echo y >/tmp/y && cat /tmp/y'
expect_match "a read-only root: /etc refuses, /tmp takes the write" "$out" 'Read-only file system'
expect_match "  and /tmp takes the write" "$out" '^y$'
box run --memory-limit 64M --tmpfs /scratch "$R" sh -c 'dd if=/dev/zero of=/scratch/f bs=1M count=8 2>/dev/null; wc -c </scratch/f'
expect_eq "a --tmpfs directory of gpubox's tmpfs, with a limit" "$out" 8388608
box run / sh -c 'test -d /usr/bin && echo x >/tmp/x && cat /tmp/x'
expect_eq "ROOTFS / (bound, not overlaid) with its tmpfs places" "$rc:$out" "0:x"
# Linux 6.1's overlayfs reads its lower layer through a file of another path than later
# kernels: ROOTFS keeps its access times all the same (listed once: listing reads a directory).
find "$R" >"$WORK/list" && xargs touch -h -a -d @978307200 <"$WORK/list"
box run "$R" sh -c 'ls / /usr/bin >/dev/null; cat /etc/passwd >/dev/null'
box check "$R" true
box run --preflight enforce --read-only "$R" true
expect_eq "no access time in ROOTFS changed (preflight, check, entries, execve, reads)" \
    "$(xargs stat -c '%X %n' <"$WORK/list" | grep -v '^978307200 ')" ""
scopes() { systemctl --user list-units --all --plain --no-legend 'gpubox-*' 2>&1; }
echo "# tester's own cgroup: $(cat /proc/self/cgroup)"

box run --print-plan --cgroup systemd --memory-limit 64M --pids-limit 10 --time-limit 5 "$R" true
expect_eq "--print-plan --cgroup systemd: exit 0" "$rc" 0
expect_match "  memory through the scope's memory.max" "$out" '^limit memory: cgroup memory.max'
expect_match "  processes through pids.max" "$out" '^limit pids: cgroup pids.max$'
expect_match "  kill through cgroup.kill" "$out" '^limit kill: cgroup.kill$'

box run -v --memory-limit 64M --wall-time-limit 120 --meta "$M" "$R" probe membomb
expect_eq "auto, memory bomb: ML, exit 137" "$(field status):$rc" "ML:137"
expect_eq "  oom_killed (memory.events oom_kill)" "$(field oom_killed)" true
expect_eq "  memory mechanism" "$(mechanism memory)" "cgroup memory.max (swap off)"
expect_match "  the sandbox's cgroup is <scope>/sandbox" "$(field cgroup)" '/gpubox-[0-9]+-[0-9a-f]{8}\.scope/sandbox$'
expect_match "  -v names the scope" "$err" 'cgroup: systemd scope gpubox-[0-9]+-[0-9a-f]{8}\.scope'

# A fork bomb, looked at from outside while it runs: the scope's files, then its events. The
# workload then waits on a fifo (no fork, which the bomb's sleeping children leave no room for)
# until the test has looked: an event, not a time, whatever the emulation's and the host's speed.
mkdir "$WORK/sync" && mkfifo "$WORK/sync/go"
"$GPUBOX" run --cgroup systemd --pids-limit 10 --memory-limit 256M --wall-time-limit 600 --meta "$M" \
    --bind "$WORK/sync:/sync" "$R" sh -c 'probe forkbomb; : >/sync/bombed; read -r x </sync/go' \
    >"$WORK/fork.out" 2>"$WORK/fork.err" &
gpubox_pid=$!
scope=
in_scope() {
    local own
    own=$(sed -n 's/^0:://p' "/proc/$gpubox_pid/cgroup" 2>/dev/null || true)
    case $own in */gpubox-*.scope/monitor) scope=/sys/fs/cgroup${own%/monitor} ;; *) return 1 ;; esac
}
wait_until 300 in_scope
wait_until 300 test -e "$WORK/sync/bombed"
events=$(cat "$scope/sandbox/pids.events" 2>/dev/null || true)
check "--cgroup systemd: gpubox moved itself into <scope>/monitor" test -n "$scope"
expect_match "  the scope's children get memory and pids" "$(cat "$scope/cgroup.subtree_control" 2>&1)" '(^| )memory( |$).*pids|pids.*memory'
expect_eq "  sandbox pids.max" "$(cat "$scope/sandbox/pids.max" 2>&1)" 10
expect_eq "  sandbox memory.max" "$(cat "$scope/sandbox/memory.max" 2>&1)" 268435456
expect_match "  pids.events: the fork bomb hit pids.max" "$events" '^max [1-9]'
check "  pids.current stays at most 10" awk -v c="$(cat "$scope/sandbox/pids.current" 2>/dev/null || echo 0)" 'BEGIN { exit !(c <= 10) }'
timeout 60 sh -c 'echo go >"$1"' _ "$WORK/sync/go"  # (a sandbox that is gone reads no fifo)
wait "$gpubox_pid"
rc=$?
expect_eq "  the run ends normally (exit 0)" "$rc" 0
check "  fewer than 10 forks succeeded ($(cat "$WORK/fork.out"))" \
    awk -v o="$(cat "$WORK/fork.out")" 'BEGIN { split(o, a, "="); exit !(a[1] == "forks" && a[2] > 0 && a[2] < 10) }'
expect_eq "  pids mechanism" "$(mechanism pids)" "cgroup pids.max"

box run --cgroup systemd --time-limit 1 --wall-time-limit 120 --meta "$M" "$R" sh -c 'while :; do :; done'
expect_eq "CPU spin: TO on the CPU limit, exit 137" "$(field status):$(field limit):$rc" "TO:cpu_time:137"
expect_match "  cpu_time mechanism" "$(mechanism cpu_time)" '^cgroup cpu.stat usage_usec'
check "  cpu.stat's usage at least the limit ($(field cpu_time) s)" awk -v c="$(field cpu_time)" 'BEGIN { exit !(c >= 1) }'

box run --cgroup systemd --wall-time-limit 3 --meta "$M" "$R" \
    sh -c '(setsid sh -c "trap \"\" TERM HUP; exec sleep 4311" &) ; exec sleep 4311'
expect_eq "double fork + setsid: TO, killed through cgroup.kill" "$(field status):$(mechanism kill)" "TO:cgroup.kill"
gone() { [ -z "$(pgrep -f "$1" || true)" ]; }
check "  nothing survives" wait_until 60 gone 'sleep 4311'

XDG_RUNTIME_DIR=/nonexistent box run --cgroup systemd --memory-limit 64M "$R" true
expect_eq "--cgroup systemd without a user bus: exit 125" "$rc" 125
expect_match "  one line that names the step and the error" "$err" \
    '^gpubox: cgroup: systemd scope "gpubox-[0-9]+-[0-9a-f]{8}\.scope": connect to the user bus: no bus socket "/nonexistent/bus"'
expect_eq "  exactly one line" "$(printf '%s\n' "$err" | wc -l)" 1
XDG_RUNTIME_DIR=/nonexistent box run -v --memory-limit 64M --meta "$M" "$R" true
expect_eq "auto without a user bus: falls back and runs (exit 0)" "$rc" 0
expect_match "  memory by sampling instead" "$(mechanism memory)" '^sum over the sandbox'
expect_match "  -v says why" "$err" 'no bus socket "/nonexistent/bus"'
box run --require-cgroup --memory-limit 64M --meta "$M" "$R" true
expect_eq "--require-cgroup with a user manager: the scope's cgroup, exact (exit 0)" "$rc:$(mechanism memory)" "0:cgroup memory.max (swap off)"
XDG_RUNTIME_DIR=/nonexistent box run --require-cgroup --memory-limit 64M --meta "$M" "$R" true
expect_eq "--require-cgroup without a user bus: refused, exit 125, XX" "$rc:$(field status)" "125:XX"
expect_match "  one line naming doctor, and the fix" "$err" $'^gpubox: --require-cgroup: no cgroup v2 with the memory controller[^\n]*gpubox doctor[^\n]*\ngpubox: hint: '

# gpubox-scope, the sd-bus helper, must be beside gpubox (or in ../libexec/gpubox/).
mkdir "$WORK/lone" && cp "$GPUBOX" "$WORK/lone/gpubox"
"$WORK/lone/gpubox" run --cgroup systemd --memory-limit 64M "$R" true >"$WORK/.out" 2>"$WORK/.err"
rc=$? err=$(cat "$WORK/.err")
expect_eq "--cgroup systemd without gpubox-scope: exit 125" "$rc" 125
expect_match "  one line naming the places looked in" "$err" \
    '^gpubox: cgroup: systemd scope "[^"]*": find gpubox.s sd-bus helper: no helper gpubox-scope \(looked for [^ ]*/lone/gpubox-scope and [^ ]*/lone/../libexec/gpubox/gpubox-scope\)$'
mkdir -p "$WORK/lone/../libexec/gpubox" && cp "$(dirname "$GPUBOX")/gpubox-scope" "$WORK/libexec/gpubox/"
"$WORK/lone/gpubox" run --cgroup systemd --memory-limit 64M --meta "$M" "$R" true >"$WORK/.out" 2>"$WORK/.err"
rc=$?
expect_eq "  found in ../libexec/gpubox/: runs in a scope (exit 0)" "$rc:$(mechanism memory)" "0:cgroup memory.max (swap off)"
chmod g+w "$WORK/libexec/gpubox/gpubox-scope"
"$WORK/lone/gpubox" run -v --memory-limit 64M --meta "$M" "$R" true >"$WORK/.out" 2>"$WORK/.err"
rc=$? err=$(cat "$WORK/.err")
expect_eq "  group-writable: auto falls back and runs (exit 0)" "$rc" 0
expect_match "  memory by sampling instead" "$(mechanism memory)" '^sum over the sandbox'
expect_match "  -v says why" "$err" 'gpubox-scope": writable by its group or by anyone \(mode 0775\)'

# What the systemd route costs (gpubox-scope's exec and its D-Bus round trips, the cgroup
# moves), in wall time under software emulation: far slower than real hardware, for scale only.
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
off=() sd=()
for _ in 1 2 3; do
    off+=("$(ms "$GPUBOX" run --cgroup off --memory-limit 64M "$R" true)")
    sd+=("$(ms "$GPUBOX" run --cgroup systemd --memory-limit 64M "$R" true)")
done
med() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
echo "# wall ms under TCG, 3 runs each: --cgroup off: ${off[*]} (median $(med "${off[@]}")); --cgroup systemd: ${sd[*]} (median $(med "${sd[@]}"))"

# --cgroup PATH: a delegated directory of a scope we made ourselves (not named gpubox-*).
systemd-run --user --scope --quiet -p Delegate=yes --unit "vmtest-path-$$" \
    env GPUBOX="$GPUBOX" R="$R" M="$M" bash -c '
    cg=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)
    mkdir "$cg/leaf" "$cg/boxes" && echo $$ >"$cg/leaf/cgroup.procs" &&
        echo "+memory +pids" >"$cg/cgroup.subtree_control" &&
        exec "$GPUBOX" run --cgroup "$cg/boxes" --memory-limit 64M --wall-time-limit 120 --meta "$M" "$R" probe membomb' \
    >"$WORK/.out" 2>"$WORK/.err"
rc=$?
expect_eq "--cgroup PATH (a delegated scope's directory): memory bomb ML, exit 137" "$(field status):$rc" "ML:137"
expect_eq "  oom_killed" "$(field oom_killed)" true
expect_match "  the sandbox's cgroup is below PATH" "$(field cgroup)" '/vmtest-path-[0-9]+\.scope/boxes/gpubox-[0-9]+$'
box run --cgroup /sys/fs/cgroup/no-such-dir --memory-limit 64M "$R" true
expect_eq "--cgroup PATH that is no cgroup: exit 125" "$rc" 125
expect_match "  and says so" "$err" 'not a cgroup v2 directory'

no_scopes() { [ -z "$(scopes)" ]; }
wait_until 120 no_scopes
expect_eq "every gpubox scope is gone afterwards" "$(scopes)" ""
expect_eq "  and no gpubox cgroup is left" "$(find /sys/fs/cgroup -name 'gpubox-[0-9]*' 2>/dev/null)" ""
finish
