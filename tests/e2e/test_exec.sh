#!/usr/bin/env bash
# Named sandboxes: run --name, ps, exec NAME CMD (docs/exec.md). Two real users, as root only
# orchestrates: uid 65534 owns the sandboxes, uid 65533 attacks them. Checks: exec runs in the
# sandbox (its pid namespace and root, NoNewPrivs, seccomp, no capability), CMD's exit status,
# stdin, --env and --workdir; the exec'd process counted in the sandbox's --memory-limit and
# killed when the sandbox ends; ps and ps --json; a stale entry after kill -9 of the monitor;
# names unique per user and checked; another user's ps, exec and nsenter refused; a registry
# another user made, or a symlink planted in ours, refused.
export E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to act as two users (uid 65534 and 65533)"
command -v setpriv >/dev/null || skip "setpriv is missing (util-linux)"

T=$(mktemp -d /tmp/gpubox-exec.XXXXXX)
chmod 0755 "$T"
cd "$T" || exit 1
install -m 0755 "$GPUBOX" "$T/gpubox"
mkdir -m 0700 "$T/u" "$T/a" "$T/run-u" "$T/run-a" && chown 65534:65534 "$T/u" "$T/run-u" &&
    chown 65533:65533 "$T/a" "$T/run-a" || { echo "Bail out! cannot make the users' directories"; exit 1; }
U=(setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
   HOME="$T/u" XDG_RUNTIME_DIR="$T/run-u")
A=(setpriv --reuid=65533 --regid=65533 --clear-groups env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
   HOME="$T/a" XDG_RUNTIME_DIR="$T/run-a")
R=$T/u/rootfs
"${U[@]}" "$T/gpubox" rootfs create "$R" >/dev/null && install -o 65534 -m 0755 "$PROBE" "$R/usr/bin/probe" ||
    { echo "Bail out! rootfs create failed"; exit 1; }
"${U[@]}" "$T/gpubox" run "$R" true 2>/dev/null || skip "unprivileged user namespaces are not available"

runs=()
stop_all() {
    for p in "${runs[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ -n "${D:-}" ] && [ -d "$D" ]; then wait_until 10 rmdir "$D"/*/ "$D" 2>/dev/null; fi
    rm -rf "$T" "$WORK"
}
trap stop_all EXIT

as_u() { "${U[@]}" "$T/gpubox" "$@" >"$WORK/.out" 2>"$WORK/.err"; rc=$?; out=$(cat "$WORK/.out"); err=$(cat "$WORK/.err"); }
as_a() { "${A[@]}" "$T/gpubox" "$@" >"$WORK/.out" 2>"$WORK/.err"; rc=$?; out=$(cat "$WORK/.out"); err=$(cat "$WORK/.err"); }
listed() { "${U[@]}" "$T/gpubox" ps 2>/dev/null | grep -q "^$1 "; }
# start NAME ARGS...: run --name NAME ARGS in the background as uid 65534, until ps lists it.
start() {
    local name=$1
    shift
    "${U[@]}" "$T/gpubox" run --name "$name" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    last=$!
    runs+=("$last")
    wait_until 30 listed "$name" || not_ok "run --name $name: listed by ps" "$(cat "$WORK/$name.err")"
}
chmod 0777 "$WORK"

start job --memory-limit 64M "$R" sh -c 'echo marker >/tmp/m; exec sleep 3001'
job_monitor=$last
# ps lists the sandbox once init is up, maybe before its workload ran a line: on a loaded machine
# (the fresh-root check's run-all, load 20) a workload under SCHED_IDLE (docs/limits.md) was
# still in its exec of sleep, its arguments and environment not yet set up. Until its sleep is.
wait_until 30 pgrep -f '^sleep 3001$' >/dev/null

# In the sandbox: its pid namespace (the workload is pid 2), its root, as confined as it.
as_u exec job sh -c 'tr "\0" " " </proc/2/cmdline; echo; cat /tmp/m; hostname; id -u'
expect_eq "exec: the workload's pid namespace (pid 2), root, hostname and uid" "$rc:$out" \
    "0:sleep 3001 "$'\n'"marker"$'\n'"gpubox"$'\n'"65534"
as_u exec job sh -c 'grep -E "^(NoNewPrivs|Seccomp|CapEff|CapPrm|CapBnd):" /proc/self/status'
expect_eq "exec: NoNewPrivs, seccomp filter, no capability" "$rc:$out" \
    "0:CapPrm:"$'\t'"0000000000000000"$'\n'"CapEff:"$'\t'"0000000000000000"$'\n'"CapBnd:"$'\t'"0000000000000000"$'\n'"NoNewPrivs:"$'\t'"1"$'\n'"Seccomp:"$'\t'"2"
as_u exec job sh -c 'readlink /proc/self/ns/user; readlink /proc/2/ns/user; readlink /proc/self/ns/mnt; readlink /proc/2/ns/mnt'
lines=($out)
check "exec: the workload's user and mount namespaces" test "$rc:${lines[0]:-}:${lines[2]:-}" = "0:${lines[1]:-x}:${lines[3]:-x}"

# A named sandbox's init is dumpable (so that its owner's exec may enter it); the workload, and
# what exec runs, still cannot reach it: no capability in init's user namespace.
# (Its fd numbers are listed, as a step's init's are: /proc/1/fd is the caller's directory.)
reach_init='for f in exe cwd root fd/0 fd/3; do readlink /proc/1/$f; done; cat /proc/1/environ /proc/1/mem; ls /proc/1/root/; true'
as_u exec job sh -c "$reach_init"
expect_eq "exec: init's exe, cwd, root, fds, environ and memory stay closed to CMD" "$rc:$out" "0:"
start rootjob --root "$R" sh -c "$reach_init; exec sleep 3007"
as_u exec rootjob sh -c "id -u; $reach_init"
expect_eq "  with --root too (uid 0 inside, in init's user namespace), and to the workload" \
    "$rc:$out:$(cat "$WORK/rootjob.out")" "0:0:"
kill -TERM "$last"
wait "$last" 2>/dev/null

as_u exec job sh -c 'tr "\0" "\n" </proc/2/environ | grep -c "^PATH="; readlink /proc/2/exe'
expect_eq "exec: at the workload as at its own process (its environ, its exe)" "$rc:$out" "0:1"$'\n'"/usr/bin/busybox"

as_u exec job sh -c 'exit 7'
expect_eq "exec: CMD's exit status" "$rc" 7
as_u exec job sh -c 'kill -TERM $$'
expect_eq "exec: CMD killed by a signal: 128+n" "$rc" 143
as_u exec job no-such-command
expect_eq "exec: CMD not found: 127, one line" "$rc:$err" \
    "127:gpubox: execve(\"no-such-command\"): No such file or directory (searched the sandbox's PATH)"
out=$(echo from-stdin | "${U[@]}" "$T/gpubox" exec job cat)
expect_eq "exec: stdin" "$out" "from-stdin"
as_u exec --env GREETING=hi --workdir /tmp job sh -c 'echo "$GREETING"; pwd'
expect_eq "exec --env --workdir" "$rc:$out" "0:hi"$'\n'"/tmp"
# The run's environment is exec's base: its values, not only its names (--env, the GPUs' and
# the step's variables, TERM), kept in the entry, which only the owner can read (docs/exec.md).
start envjob --env TOKEN=run-value "$R" sleep 3011
as_u exec --env GREETING=hi envjob sh -c 'echo "$TOKEN $GREETING"'
expect_eq "exec: the run's --env values, exec's --env on top" "$rc:$out" "0:run-value hi"
expect_eq "  kept in a 0600 entry in the caller's 0700 registry" \
    "$(stat -c '%a %u' "$T/run-u/gpubox/sandboxes" "$T/run-u/gpubox/sandboxes/envjob.sandbox" | tr '\n' ' ')" \
    "700 65534 600 65534 "
kill -TERM "$last"
as_u exec -it job true
expect_eq "exec -it: accepted (a pty comes where stdin and stdout are terminals)" "$rc" 0

# Signals to gpubox exec reach CMD; a terminal gives CMD a pty of its own.
"${U[@]}" "$T/gpubox" exec job sh -c 'trap "echo got-TERM; exit 5" TERM; echo ready; sleep 3005 & wait' \
    >"$WORK/sig.out" 2>&1 &
sig_pid=$!
runs+=("$sig_pid")
wait_until 20 grep -q ready "$WORK/sig.out"
kill -TERM "$sig_pid"
wait "$sig_pid"
expect_eq "exec: SIGTERM forwarded to CMD, its status returned" "$?:$(cat "$WORK/sig.out")" "5:ready"$'\n'"got-TERM"
if command -v script >/dev/null; then
    out=$("${U[@]}" TERM=xterm script -qec "$T/gpubox exec job sh -c 'tty; test -t 0 && echo stdin-tty'" /dev/null </dev/null 2>&1 | tr -d '\r')
    expect_match "exec on a terminal: CMD's own pty in the sandbox's devpts" "$out" '^/dev/pts/[0-9]+$'
    expect_match "  on its stdin" "$out" '^stdin-tty$'
fi

# ps: the caller's running sandboxes.
as_u ps
expect_match "ps: NAME PID IMAGE GPUS LIMITS UPTIME" "$out" "^NAME +PID +IMAGE +GPUS +LIMITS +UPTIME$"
expect_match "ps: the sandbox, its init's pid, ROOTFS, GPUs, limits" "$out" \
    "^job +[0-9]+ +$R +none +mem 64M \((cgroup|monitor)\), pids 4096 \((rlimit|not enforced)\) +[0-9]+s$"
# aligned: each header word starts where the row's field below it does.
aligned() {
    local head=$1 row=$2 i
    for ((i = 0; i < ${#head}; i++)); do
        [ "${head:i:1}" != " " ] && { [ "$i" = 0 ] || [ "${head:i-1:1}" = " " ]; } || continue
        [ "${row:i:1}" != " " ] && { [ "$i" = 0 ] || [ "${row:i-1:1}" = " " ]; } || return 1
    done
}
check "ps: the rows line up under the header" aligned "$(sed -n 1p <<<"$out")" "$(grep '^job ' <<<"$out")"
as_u ps --json
expect_match "ps --json: name, image, limits" "$(printf '%s' "$out" | tr -d '\n')" \
    '"image": *"'"$R"'",.*"limits": *"mem 64M \((cgroup|monitor)\), pids 4096 \([a-z ]+\)",.*"name": *"job",'
pid=$(printf '%s\n' "$out" | sed -n 's/.*"pid": \([0-9]*\).*/\1/p')
check "ps --json: the pid is the sandbox's init, a child of the monitor" \
    test "$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)" = "$job_monitor"

# Names: unique per user while the sandbox runs; checked.
as_u run --name job "$R" true
expect_eq "run --name job again: refused, one line and a hint, 125" "$rc:$err" \
    "125:gpubox: run: --name \"job\": a sandbox of that name is running (pid $pid)"$'\n'"gpubox: hint: 'gpubox ps' lists them; choose another name, or 'gpubox exec job CMD' runs CMD in it"
for bad in a/b .. ../job .hidden -x ""; do
    as_u run --name "$bad" "$R" true
    expect_match "run --name \"$bad\": refused, 125" "$rc:$err" "^125:gpubox: run: --name \"[^\"]*\": the name "
done
as_u exec ../job true
expect_match "exec ../job: refused, 125" "$rc:$err" '^125:gpubox: exec: no sandbox can be named "../job"'

# Another user: sees nothing, enters nothing.
as_a ps
expect_eq "another user's ps does not list it" "$rc:$out" "0:NAME  PID      IMAGE  GPUS  LIMITS  UPTIME"
as_a exec job true
expect_match "another user's exec: refused, 125" "$rc:$err" '^125:gpubox: exec: no running sandbox named "job"$'
reg=$T/run-u/gpubox/sandboxes
GPUBOX_SANDBOX_DIR=$reg "${A[@]}" GPUBOX_SANDBOX_DIR="$reg" "$T/gpubox" exec job true >"$WORK/.out" 2>"$WORK/.err"
rc=$?
expect_match "another user's exec through the owner's registry: refused, 125" "$rc:$(cat "$WORK/.err")" \
    "^125:gpubox: sandbox registry \"$reg\""
"${A[@]}" nsenter -t "$pid" -U -m -p true 2>/dev/null
check "another user's nsenter into the sandbox's init: refused by the kernel" test $? -ne 0

# No pid is trusted on its own: an entry whose init's start time is not that pid's (as after
# the pid was reused) is refused, and nothing runs.
"${U[@]}" cp "$reg/job.sandbox" "$T/u/job.saved"
"${U[@]}" sed -i 's/^start=.*/start=1/' "$reg/job.sandbox"
as_u exec job sh -c 'echo ran'
expect_eq "exec: a pid whose start time is not the recorded init's: refused, 125" "$rc:$out:$err" \
    '125::gpubox: exec: the sandbox "job" has ended'
"${U[@]}" cp "$T/u/job.saved" "$reg/job.sandbox"

# A registry another user made, and a symlink planted in ours.
mkdir -m 0777 "$T/theirs" && chown 65533:65533 "$T/theirs"
GPUBOX_SANDBOX_DIR=$T/theirs
"${U[@]}" GPUBOX_SANDBOX_DIR="$T/theirs" "$T/gpubox" run --name x "$R" true >/dev/null 2>"$WORK/.err"
expect_match "a registry another user made: refused, 125" "$?:$(cat "$WORK/.err")" \
    "^125:gpubox: sandbox registry \"$T/theirs\".*(belongs to uid 65533|writable by others)"
"${U[@]}" ln -s "$T/u/target" "$reg/planted.lock"
as_u run --name planted "$R" true
expect_match "a symlink in the registry: not followed, 125" "$rc:$err" '^125:gpubox: .*planted.lock.*Too many levels of symbolic links'
check "  nothing made at the symlink's target" test ! -e "$T/u/target"
as_u ps
expect_match "  ps: says so, lists the rest" "$rc:$err:$out" '^0:gpubox: warning: .*planted.lock.*Too many levels of symbolic links.*:NAME'
expect_match "  ps: lists the rest" "$out" '^job '

rm -f "$reg/planted.lock"

# GPUs: ps names the sandbox's (a simulated host's), and exec's CMD sees its nodes.
if [ -n "${FAKE_GPU_HOST:-}" ] && "$FAKE_GPU_HOST" "$T/host" --gpus 2 >/dev/null 2>&1; then
    start gpu --gpu 1 --driver-root "$T/host" "$R" sleep 3006
    as_u ps
    expect_match "ps: the sandbox's GPUs" "$out" "^gpu +[0-9]+ +$R +1 +pids 4096 \\([a-z ]+\\) +[0-9]+s$"
    as_u run --gpu 1 --driver-root "$T/host" "$R" sh -c 'ls /dev | grep -E "^nvidia[0-9]+$"'
    want=$out
    as_u exec gpu sh -c 'ls /dev | grep -E "^nvidia[0-9]+$"'
    expect_eq "exec: the sandbox's GPU node (as run --gpu 1 has it), and only it" "$rc:$out" "0:$want"
    kill -TERM "$last"
    wait "$last" 2>/dev/null
fi

# With a cgroup: a cgroup v2 directory delegated to uid 65534 (made here as root), the run's
# gpubox started in it. exec from inside that tree joins the sandbox's cgroup; from outside it
# (where cgroup v2 lets no process of the user in) exec refuses rather than run uncounted.
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
D=${cg2:+$cg2/gpubox-e2e-exec-$$}
if [ -n "$D" ] && mkdir "$D" 2>/dev/null && mkdir "$D/run" && chown -R 65534:65534 "$D"; then
    # (bash -c, not a function: $! is then gpubox's own pid.)
    in_d=(bash -c 'echo $$ >"$1/run/cgroup.procs" && shift && exec "$@"' _ "$D")
    "${in_d[@]}" "${U[@]}" "$T/gpubox" run --cgroup "$D" --pids-limit 50 --name cg "$R" sleep 3009 \
        >"$WORK/cg.out" 2>"$WORK/cg.err" &
    last=$!
    runs+=("$last")
    wait_until 30 listed cg || not_ok "run --name cg --cgroup: listed by ps" "$(cat "$WORK/cg.err")"
    as_u ps --json
    cg=$(printf '%s\n' "$out" | sed -n 's/.*"cgroup": "\(.*\)",/\1/p')
    expect_match "ps --json: the sandbox's cgroup" "$cg" "^$D/gpubox-[0-9]+$"
    as_u ps
    expect_match "ps: --pids-limit in a delegated cgroup" "$out" "^cg +.* +pids 50 \\((cgroup|rlimit)\\) +[0-9]+s$"
    check "  the rows line up under the header" aligned "$(sed -n 1p <<<"$out")" "$(grep '^cg ' <<<"$out")"
    "${in_d[@]}" "${U[@]}" "$T/gpubox" exec cg sh -c 'grep "^0::" /proc/self/cgroup; sleep 3010' >"$WORK/.out" 2>&1 &
    exec_pid=$!
    runs+=("$exec_pid")
    wait_until 20 pgrep -f '^sleep 3010$' >/dev/null
    check "exec from the run's cgroup tree: CMD in the sandbox's cgroup" grep -q "^$(pgrep -f '^sleep 3010$')$" "$cg/cgroup.procs"
    kill -TERM "$exec_pid"
    wait "$exec_pid"
    expect_eq "  seen from inside: its cgroup namespace's root" "$(cat "$WORK/.out")" "0::/"
    as_u exec cg true
    expect_eq "exec from elsewhere: refused rather than run outside the cgroup, 125" "$rc:$(printf '%s\n' "$err" | head -1)" \
        "125:gpubox: exec: cannot enter the sandbox's cgroup \"$cg\" (clone3(0): Permission denied), and will not run outside its limits"
    kill -TERM "$last"
    wait "$last" 2>/dev/null
    # run --cgroup into another tree of this user's, whose nearest cgroup in common with the
    # caller's is root's: cgroup v2 refuses the move, and run says that, not user namespaces.
    if mkdir "$D-other" && chown 65534:65534 "$D-other"; then
        "${in_d[@]}" "${U[@]}" "$T/gpubox" run --cgroup "$D-other" --pids-limit 50 "$R" true >"$WORK/.out" 2>"$WORK/.err"
        rc=$? err=$(cat "$WORK/.err")
        expect_eq "run --cgroup DIR from a cgroup whose nearest in common with DIR is root's: 125, why, the fix" \
            "$rc:$err" "125:gpubox: cgroup: --cgroup \"$D-other\": cgroup v2 refuses to move the sandbox there from this process's cgroup \"$D/run\": the nearest cgroup both share, \"$cg2\", is not this user's to write"$'\n'"gpubox: hint: start gpubox from within the cgroup tree delegated to you that holds DIR (as systemd-run --user --scope -p Delegate=yes does), or give --cgroup a directory below your own cgroup"
        rmdir "$D-other"/*/ "$D-other" 2>/dev/null
    fi
    rmdir "$D"/*/ "$D" 2>/dev/null
fi

# Counted in the sandbox's --memory-limit: an exec'd process over it gets the sandbox killed.
as_u exec job probe hog anon 200 0 10
exec_rc=$rc
wait "$job_monitor"
job_rc=$?
expect_match "exec'd process over the sandbox's memory limit: the sandbox is killed (ML)" \
    "$job_rc:$(cat "$WORK/job.err")" "^137:gpubox: killed: memory limit 64M exceeded"
expect_eq "  the exec'd process with it (SIGKILL)" "$exec_rc" 137
check "  ps no longer lists it" bash -c "! $(printf '%q ' "${U[@]}") $T/gpubox ps | grep -q '^job '"

# Killed with the sandbox: the exec'd process does not outlive it.
start ends "$R" sleep 3002
ends_monitor=$last
"${U[@]}" "$T/gpubox" exec ends sleep 3003 >/dev/null 2>&1 &
exec_pid=$!
runs+=("$exec_pid")
wait_until 20 pgrep -f '^sleep 3003$' >/dev/null
# One that leaves exec's session (setsid) outlives the exec, in the sandbox: not the sandbox.
as_u exec ends sh -c 'setsid sh -c ": >/tmp/left; exec sleep 3008" >/dev/null 2>&1 </dev/null &
    while [ ! -e /tmp/left ]; do sleep 0.05; done'
as_u exec ends ps
expect_match "exec: a setsid'd process outlives its exec, in the sandbox" "$out" '^ +[0-9]+ +[a-z]+ +sleep 3008$'
kill -TERM "$ends_monitor"
wait "$exec_pid"
expect_eq "exec'd process killed when the sandbox ends" "$?" 137
check "  nothing left behind, the setsid'd one included" wait_until 10 bash -c '! pgrep -f "^sleep 300[238]$" >/dev/null'

# A stale entry: the monitor killed -9 (its sandbox goes with it), the name free again.
start stale "$R" sleep 3004
# (Its sleep running first, as for job above: a kill before the workload's exec leaves no sleep
# to see go, and ps then still finds init alive, its lock held, until init is reaped.)
wait_until 30 pgrep -f '^sleep 3004$' >/dev/null
kill -9 "$last"
wait "$last" 2>/dev/null
check "kill -9 of the monitor: the sandbox goes" wait_until 10 bash -c '! pgrep -f "^sleep 3004$" >/dev/null'
as_u ps
expect_no_match "  ps does not list the stale entry" "$out" "^stale "
check "  and removed it" test ! -e "$reg/stale.lock" -a ! -e "$reg/stale.sandbox"
as_u exec stale true
expect_match "  exec into it: refused, 125" "$rc:$err" '^125:gpubox: exec: no running sandbox named "stale"$'
as_u run --name stale "$R" true
expect_eq "  the name is free again" "$rc" 0
check "  and its entry gone after the run" test -z "$(ls -A "$reg")"

echo "1..$n"
[ "$failed" = 0 ]
