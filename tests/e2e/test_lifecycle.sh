#!/usr/bin/env bash
# Process lifecycle: nothing of the sandbox outlives gpubox or the workload; signals reach it.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
# survivors MARK: processes (outside gpubox itself) whose command line carries MARK.
survivors() { pgrep -f -- "$1" | grep -v "^$$\$" || true; }
gone() { [ -z "$(survivors "$1")" ]; }
wait_gone() { wait_until 60 gone "$1"; }
running() { [ "$(survivors "$1" | wc -l)" -ge "$2" ]; }

"$GPUBOX" run "$R" sh -c 'sleep 4241 & sleep 4241 & exec sleep 4241' &
gp=$!
check "three sleeps run in the sandbox" wait_until 60 running 'sleep 4241' 3
kill -9 "$gp"; wait "$gp" 2>/dev/null
check "after kill -9 of gpubox no sandbox process survives" wait_gone 'sleep 4241'

box run "$R" sh -c 'sleep 4242 & (setsid sh -c "trap \"\" TERM HUP; exec sleep 4242" &) ; exit 0'
expect_eq "the workload's exit ends the run" "$rc" 0
check "background, setsid'd and TERM-ignoring children die with the workload" wait_gone 'sleep 4242'

set -m  # job control: background jobs must not start with SIGINT ignored
for sig in TERM INT HUP USR1; do
    # A file per signal: the background job truncates its output file only once it has forked,
    # and a shared one could still say "ready" from the signal before.
    out_file=$WORK/sig-$sig.out
    "$GPUBOX" run "$R" sh -c "trap 'echo got $sig; exit 3' $sig; echo ready; sleep 3021 & wait" >"$out_file" &
    gp=$!
    wait_until 60 grep -qs ready "$out_file"
    kill -"$sig" "$gp"
    wait "$gp"; rc=$?
    expect_eq "SIG$sig sent to gpubox reaches the workload" "$rc:$(tail -1 "$out_file")" "3:got $sig"
done
set +m
check "no sleep left behind by the signal tests" wait_gone 'sleep 3021'

box run "$R" sh -c 'sh -c "kill -9 \$\$"; echo child-killed=$?'
expect_eq "kill -9 inside kills the target with ordinary semantics" "$out" "child-killed=137"
box run "$R" sh -c 'ps -o pid,comm 2>/dev/null | sed -n 2p || cat /proc/1/comm'
expect_match "pid 1 is gpubox's init, not the workload" "$out" 'gpubox|1 '
finish
