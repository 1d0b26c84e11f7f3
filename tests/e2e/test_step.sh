#!/usr/bin/env bash
# Step mode's rendezvous without a scheduler: tasks of a made-up Slurm step (its variables set by
# hand) run with --step. Tasks of one step share a sandbox and leave no name behind; another
# step's do not share it; kill -9 of the first task leaves nothing once the others are done; a task
# whose options differ from the sandbox's is refused; each task keeps its own limits without a
# cgroup (the monitor counts its tree); a stale socket (a keeper killed, a recycled job id) is replaced; a step
# directory another user planted is refused; --shm-size sizes the one /dev/shm; process_vm_readv
# reaches siblings only; --step outside a step says why. Two real uids
# (65534, 65533), so it starts as root.
export E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root (two uids)"; exit 77; fi
T=$(mktemp -d /tmp/gpubox-step.XXXXXX)
chmod 0755 "$T"
trap 'rm -rf "$T" "$WORK"' EXIT
install -m 0755 "$GPUBOX" "$T/gpubox"
G=$T/gpubox
"$G" rootfs create "$T/rootfs" >/dev/null && install -m 0755 "$PROBE" "$T/rootfs/bin/probe" &&
    chown -R 65534:65534 "$T/rootfs" || { echo "Bail out! rootfs"; exit 1; }
R=$T/rootfs
mkdir -m 0700 "$T/steps" && chown 65534:65534 "$T/steps"
S=$((1000 + RANDOM % 9000))
# task UID JOB STEP RANK CMD...: one task of a 4-task step on one node, in the background's way
task() {
    local uid=$1 job=$2 st=$3 rank=$4
    shift 4
    (cd "$T" && setpriv --reuid="$uid" --regid="$uid" --clear-groups env -i PATH=/usr/bin:/bin \
        GPUBOX_STEP_DIR="${STEP_DIR:-$T/steps}" SLURM_JOB_ID="$job" SLURM_STEP_ID="$st" SLURM_PROCID="$rank" \
        SLURM_LOCALID="$rank" SLURM_NTASKS=4 SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=4 \
        SLURM_STEP_NODELIST=n1 SLURMD_NODENAME=n1 ${TASK_ENV:+"$TASK_ENV"} "$G" run "$@")
}
four() {  # JOB STEP CMD...: 4 tasks at once as uid 65534; $out
    local job=$1 st=$2 i
    shift 2
    for i in 0 1 2 3; do task 65534 "$job" "$st" "$i" "$@" >"$T/out.$i" 2>&1 & done
    wait
    out=$(cat "$T"/out.?)
}
ns='echo $(readlink /proc/self/ns/pid) $(readlink /proc/self/ns/ipc) rank=$SLURM_PROCID'

# Each waits (up to 20 s) until all four are in, as ranks do in MPI_Init: a task that ended
# before the last one started would end the step's sandbox, and the last would make another
# (a CI run under load: 2 namespaces for 4 quick tasks).
barrier='touch /tmp/up.$SLURM_PROCID; i=0; while [ "$(ls /tmp | grep -c "^up\.")" -lt 4 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done'
four 9 0 "$R" sh -c "$ns; $barrier"
expect_eq "4 tasks that start at once: one pid and IPC namespace" \
    "$(grep -c 'rank=' <<<"$out"):$(cut -d' ' -f1,2 <<<"$out" | sort -u | wc -l)" "4:1"
[ "$(grep -c 'rank=' <<<"$out")" = 4 ] || echo "# $(tr '\n' '|' <<<"$out")"
# (The keeper removes the names once the last task's connection closes: just after.)
wait_until 30 eval '[ -z "$(ls -A "$T/steps")" ]'
expect_eq "... and the step directory is empty after them" "$(ls -A "$T/steps")" ""

for i in 0 1; do task 65534 9 1 "$i" "$R" sh -c "$ns; sleep 1" >"$T/a.$i" 2>&1 & done
for i in 0 1; do task 65534 9 2 "$i" "$R" sh -c "$ns; sleep 1" >"$T/b.$i" 2>&1 & done
wait
a=$(cut -d' ' -f1 "$T"/a.? | sort -u) b=$(cut -d' ' -f1 "$T"/b.? | sort -u)
[ "$(wc -l <<<"$a")" = 1 ] || echo "# $(cat "$T"/a.? | tr "\n" "|")"
expect_eq "two steps at once: a sandbox each" "$(wc -l <<<"$a"):$(wc -l <<<"$b"):$([ "$a" != "$b" ] && echo differ)" "1:1:differ"

# A socket nobody listens on, as a keeper killed with kill -9 leaves it, and its lock file.
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c 'import socket,sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.bind(sys.argv[1])' "$T/steps/step-slurm-9.3-n1.sock"
: >"$T/steps/step-slurm-9.3-n1.lock"; chown 65534:65534 "$T/steps/step-slurm-9.3-n1.lock"
four 9 3 "$R" sh -c "$ns"
expect_eq "a stale socket of the same step is replaced" "$(grep -c 'rank=' <<<"$out")" 4

# kill -9 of the keeper: the step's processes all go, and the next step of that id starts anew.
for i in 0 1 2 3; do task 65534 9 4 "$i" "$R" sh -c "echo started; exec sleep ${S}1" >"$T/k.$i" 2>&1 & done
wait_until 60 eval '[ "$(cat "$T"/k.? | grep -c started)" = 4 ]'
keeper=$(pgrep -u 65534 -P 1 -f -- "$G run $R sh -c echo started" | head -1)
[ -n "$keeper" ] && kill -9 "$keeper"
wait_until 30 eval '[ -z "$(leftovers "^sleep ${S}1")" ]'
expect_eq "kill -9 of the keeper: every task's workload goes" "$(leftovers "^sleep ${S}1")" ""
for p in $(leftovers "^sleep ${S}1"); do kill -9 "$p"; done  # (so that a failure ends here)
wait
four 9 4 "$R" sh -c "$ns"
expect_eq "... and the same step id works again" "$(grep -c 'rank=' <<<"$out")" 4

# kill -9 of the first task's gpubox (whose keeper made the sandbox) while the others run: they
# finish, and the last one out tears it all down: no process, no name in the step directory.
task 65534 9 7 0 "$R" sh -c "echo started; exec sleep ${S}7" >"$T/f.0" 2>&1 &
wait_until 60 eval 'grep -q started "$T/f.0"'
for i in 1 2 3; do task 65534 9 7 "$i" "$R" sh -c 'sleep 2; echo done $SLURM_PROCID' >"$T/f.$i" 2>&1 & done
first=$(pgrep -u 65534 -f -- "$G run $R sh -c echo started; exec sleep ${S}7" | while read -r p; do
    [ "$(ps -o ppid= -p "$p" | tr -d ' ')" != 1 ] && echo "$p"; done | head -1)
sleep 1
[ -n "$first" ] && kill -9 "$first"
wait
expect_eq "kill -9 of the first task's gpubox: the 3 others finish, exit 0" \
    "$(cat "$T"/f.[123] | sort | tr '\n' ' ')" "done 1 done 2 done 3 "
wait_until 30 eval '[ -z "$(leftovers "sleep ${S}7")$(ls -A "$T/steps")" ]'
expect_eq "... then nothing is left: no process, no name in the step directory" \
    "$(leftovers "sleep ${S}7")$(ls -A "$T/steps")" ""
expect_eq "... and no mount on the host of anything of the test's" "$(grep -c "$T" /proc/self/mountinfo)" 0

# A task whose options differ from the sandbox's (made by the step's first task): refused in one
# line that names the difference, exit 125, and the step's sandbox goes on.
mkdir "$T/other" && cp -a "$R/." "$T/other/"
mismatch() {  # DESC WANT ARGS...: the step's first task runs with "$R", a second with ARGS
    local desc=$1 want=$2
    shift 2
    rm -f "$T/m.0"  # (the last round's "started" is not this one's)
    task 65534 9 8 0 "$R" sh -c "echo started; sleep 3; echo done" >"$T/m.0" 2>&1 &
    wait_until 60 eval 'grep -q started "$T/m.0"'
    task 65534 9 8 1 "$@" true >"$T/m.1" 2>&1
    local rc=$?
    wait
    expect_match "$desc: exit 125 and one line naming it" "$rc:$(head -1 "$T/m.1")" "$want"
    expect_eq "... (one line, and a hint)" "$(wc -l <"$T/m.1"):$(grep -c '^gpubox: hint:' "$T/m.1")" "2:1"
    expect_eq "... and the step's first task finishes" "$(tail -1 "$T/m.0")" done
    [ "$rc" = 125 ] || echo "# m.0: $(tr '\n' '|' <"$T/m.0") m.1: $(tr '\n' '|' <"$T/m.1")"
}
mismatch "another ROOTFS" '^125:gpubox: step mode: this task asks for ROOTFS ".*/other", the step.s sandbox on this node has ROOTFS ".*/rootfs"$' "$T/other"
mismatch "another bind" '^125:gpubox: step mode: this task asks for mounts .*--ro-bind /etc:/mnt.*, the step.s sandbox on this node has' --ro-bind /etc:/mnt "$R"
mismatch "a read-only root" '^125:gpubox: step mode: this task asks for the root --read-only, the step.s sandbox on this node has the root overlay' --read-only "$R"
mismatch "another GPU" '^125:gpubox: step mode: this task asks for GPUs 0, the step.s sandbox on this node has GPUs none$' --gpu 0 "$R"
wait_until 30 eval '[ -z "$(ls -A "$T/steps")" ]'
expect_eq "... nothing left in the step directory" "$(ls -A "$T/steps")" ""

# Each task keeps its own limits without a cgroup: the monitor measures the task's own tree in
# the shared pid namespace; one task over its limit is killed alone, its sibling finishes OK.
# Task 1 sleeps until the test has looked (then its sleep is ended, quietly, and it says "fine"):
# however long task 0 takes on a loaded host (a CI run at load 57: longer than the 12 s it once
# slept).
limits_pair() {  # DESC WANT ARGS...: task 0 runs ARGS, task 1 a quiet one; $left
    local desc=$1 want=$2
    shift 2
    rm -rf "$T"/l.* "$T/meta"; mkdir "$T/meta" && chown 65534 "$T/meta"
    task 65534 9 9 0 --meta "$T/meta/0" --wall-time-limit 30 "$@" >"$T/l.0" 2>&1 &
    local first=$!
    task 65534 9 9 1 --meta "$T/meta/1" --wall-time-limit 300 "$R" sh -c "{ sleep ${S}8; } 2>/dev/null; echo fine" >"$T/l.1" 2>&1 &
    local second=$!
    wait "$first"
    # The killed task's processes, while the other one runs (a SIGKILLed process may take a
    # moment to be scheduled and die on a loaded machine). Its workload's, by their command line
    # "sh -c ...": the step's keeper, init and holder carry the command line of the gpubox that
    # made the step, which is this task's when it came first, and they rightly stay.
    wait_until 10 eval '[ -z "$(pgrep -u 65534 -f "^sh -c .*S${S}9")" ]'
    left=$(pgrep -u 65534 -f "^sh -c .*S${S}9")$(kill -0 "$second" 2>/dev/null || echo " (the other task had ended)")
    wait_until 60 eval 'pgrep -u 65534 -fx "sleep ${S}8" >/dev/null'
    pkill -u 65534 -fx "sleep ${S}8"
    wait
    M=$T/meta/0
    expect_eq "$desc: $want" "$(field status):$(field limit)" "$want"
    [ "$(field status)" = "${want%%:*}" ] || echo "# $(tr '\n' '|' <"$T/l.0")"
    M=$T/meta/1
    expect_eq "... and the other task finishes OK" "$(field status):$(cat "$T/l.1")" "OK:fine"
}
limits_pair "--memory-limit 64M, 256 MiB in a step's task" "ML:memory" --memory-limit 64M "$R" probe hog anon 256 1000 10
# Socket buffers in a step's task, which shares the host's network namespace: the walk finds the
# task's own sockets through its fds, and the host's sock_diag says what they hold (the build
# before counted none there: 512 MiB of unread unix stream buffers ended OK).
for k in ustream tcp; do
    limits_pair "--memory-limit 64M, up to 512 MiB of $k socket buffers unread in a step's task" \
        "ML:memory" --memory-limit 64M "$R" probe sockmem $k 512 3
done
limits_pair "--time-limit 0.6, two busy children in a step's task" "TO:cpu_time" --time-limit 0.6 "$R" \
    sh -c "(while :; do :; done) & (while :; do :; done) & wait; echo S${S}9"
expect_eq "... and nothing of the killed task is left while the other runs" "$left" ""
wait_until 30 eval '[ -z "$(ls -A "$T/steps")" ]'

# Another user's directory where the steps meet: refused before anything runs.
mkdir -m 0777 "$T/planted" && chown 65533:65533 "$T/planted"
STEP_DIR=$T/planted task 65534 9 5 0 "$R" true >"$T/p" 2>&1
expect_match "a step directory of another user's is refused: exit 125 and why" "$?:$(cat "$T/p")" \
    '^125:gpubox: step directory ".*planted".*(belongs to uid 65533|writable by others)'
expect_eq "... and nothing of this user's is made in it" "$(ls -A "$T/planted")" ""

# --shm-size: the ranks' one /dev/shm, a tmpfs of its own of that size.
four 9 6 --shm-size 64m "$R" sh -c 'df -k /dev/shm | tail -1; echo $SLURM_PROCID >/dev/shm/r$SLURM_PROCID; i=0; while [ $(ls /dev/shm | grep -c "^r") -lt 4 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; ls /dev/shm | grep -c "^r"'
expect_eq "--shm-size 64m: one /dev/shm of 65536 KiB that the 4 tasks share" \
    "$(grep -cE '^[^ ]+ +65536 ' <<<"$out"):$(grep -cx ' *4' <<<"$out")" "4:4"
# process_vm_readv: between the workloads (cross-memory attach), never to init or outside.
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$G" run "$R" sh -c 'sleep 5 & probe vmread $!; probe vmread 1; kill $!' 2>&1)
expect_eq "process_vm_readv of a sibling is allowed (EFAULT at address 0), of init refused" \
    "$(tr '\n' ' ' <<<"$out")" "vmread=EFAULT vmread=EPERM "
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$G" run "$R" probe vmread $$ 2>&1)
expect_eq "... and a host pid is not even there" "$out" "vmread=ESRCH"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin "$G" run --step "$R" true 2>&1)
expect_match "--step outside any step: exit 125 and why" "$?:$out" '^125:gpubox: --step: no Slurm step'
# Errors in deciding on step mode and in the step's options come before anything starts, and
# --meta still gets gpubox's verdict (XX), as a private run's set-up errors do.
rm -rf "$T/meta"; mkdir "$T/meta" && chown 65534 "$T/meta"
M=$T/meta/outside
setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin "$G" run --step --meta "$M" "$R" true 2>/dev/null
expect_eq "  --meta: XX" "$?:$(field status)" "125:XX"
M=$T/meta/pmix
out=$(TASK_ENV=PMIX_SERVER_TMPDIR=$T/steps/../steps task 65534 9 12 0 --meta "$M" "$R" true 2>&1)
expect_eq "a step's option refused (PMIX_SERVER_TMPDIR with ..): exit 125 and --meta XX" \
    "$?:$(field status):$out" "125:XX:gpubox: PMIX_SERVER_TMPDIR: \"$T/steps/../steps\" contains \"..\""
finish
