#!/usr/bin/env bash
# Autograder limits and containment, unprivileged, without a delegated cgroup (the CI machine's
# case): every verdict is read from --meta, and the host is checked afterwards.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
M=$WORK/meta.json
survivors() { pgrep -f -- "$1" | grep -v "^$$\$" || true; }
host_ok() {  # responsive, nothing of the sandbox left, ROOTFS unchanged
    local t0 t1
    t0=$(date +%s%N); /bin/true; t1=$(date +%s%N)
    [ $(((t1 - t0) / 1000000)) -lt 5000 ] && [ -z "$(survivors "$1")" ] && [ "$(tree_hash "$R")" = "$rootfs_hash" ]
}
rootfs_hash=$(tree_hash "$R")

box run --wall-time-limit 1 --meta "$M" "$R" sleep 4301
expect_eq "sleeping past the wall limit: gpubox exits 128+9" "$rc" 137
expect_eq "  status TO" "$(field status)" TO
expect_eq "  the wall-clock limit triggered" "$(field limit)" wall_time
# The monitor's timer never fires early; how late it runs is the scheduler's (about 100 ms when
# idle): a bound that tells a timer that fired from the sleep's end, whatever the load.
check "  wall time is at the limit: never before it, well before the sleep's end ($(field wall_time) s)" \
    awk -v w="$(field wall_time)" 'BEGIN { exit !(w >= 1.0 && w < 30) }'
expect_eq "  mechanism" "$(mechanism wall_time)" "monitor timer (CLOCK_MONOTONIC)"
check "  host fine, nothing left" host_ok 'sleep 4301'

box run --time-limit 0.5 --wall-time-limit 10 --meta "$M" "$R" sh -c 'while :; do :; done'
expect_eq "CPU spin: TO on the CPU limit" "$(field status):$(field limit):$rc" "TO:cpu_time:137"
# The sampler kills once a pass sees the limit (about 10 ms late when idle, later under load),
# and one process never gets past RLIMIT_CPU, ceil(limit) + 1 = 2 s: the pass came first.
check "  cpu time at the limit, and the sampler's kill before the RLIMIT_CPU backstop ($(field cpu_time) s)" \
    awk -v c="$(field cpu_time)" 'BEGIN { exit !(c >= 0.5 && c < 2) }'
expect_no_match "  (the verdict does not name RLIMIT_CPU)" "$(field message)" RLIMIT_CPU
expect_match "  mechanism: the kernel's count of the workload's CPU (else the sum over its /proc)" \
    "$(mechanism cpu_time)" "$(cpu_counted_re)"
# The main process only waits; the CPU is spent by its children. A limit that counted the main
# process alone would never fire, and the run would end at the wall limit instead.
box run --time-limit 0.6 --wall-time-limit 10 --meta "$M" "$R" sh -c '(while :; do :; done) & (while :; do :; done) & wait'
expect_eq "the CPU limit counts every process of the sandbox" "$(field status):$(field limit)" "TO:cpu_time"

# (The marks make the leftover checks this test's own: other tests run bombs too, perhaps at once.)
box run --memory-limit 64M --wall-time-limit 10 --meta "$M" "$R" probe membomb e2e-limits
expect_eq "memory bomb: ML" "$(field status):$(field limit)" "ML:memory"
expect_match "  mechanism: the sandbox's memory, read by the monitor" "$(mechanism memory)" '^sum over the sandbox .* read by the monitor every 5 ms'
check "  host fine" host_ok 'probe membomb e2e-limits'

box run --pids-limit 20 --wall-time-limit 5 --meta "$M" "$R" probe forkbomb e2e-limits
check "fork bomb: at most 19 forks succeed under --pids-limit 20" awk -v o="$out" 'BEGIN { split(o, a, "="); exit !(a[1] == "forks" && a[2] > 0 && a[2] <= 19) }'
expect_eq "  mechanism" "$(mechanism pids)" "RLIMIT_NPROC in the sandbox's user namespace"
sleep 0.2
check "  host fine, no bomb process left" host_ok 'probe forkbomb e2e-limits'
box run --pids-limit 5 --wall-time-limit 5 "$R" sh -c ':(){ :|:& };:; sleep 1; echo alive'
check "  a shell fork bomb ends at the wall limit or sooner, and leaves nothing" host_ok 'sh -c :'

box run --wall-time-limit 1 --meta "$M" "$R" sh -c '(setsid sh -c "trap \"\" TERM HUP INT; exec sleep 4302" &) ; (sleep 4302 &); exec sleep 4302'
expect_eq "double fork + setsid + TERM ignored: TO" "$(field status)" TO
sleep 0.2
check "  no process of the sandbox survives" host_ok 'sleep 4302'
box run --wall-time-limit 1 --meta "$M" "$R" sh -c 'sleep 4303 & kill -STOP $$'
expect_eq "self-SIGSTOP: still killed at the wall limit" "$(field status):$rc" "TO:137"
sleep 0.2
check "  nothing stopped is left behind" host_ok 'sleep 4303'

fill=fill-e2e-limits-$$
box run --tmpfs-size 32M --meta "$M" "$R" sh -c "dd if=/dev/zero of=/tmp/$fill bs=1M count=100 2>&1; dd if=/dev/zero of=/dev/shm/$fill bs=1M count=100 2>&1; df -k /tmp | tail -1"
expect_match "filling /tmp stops at the tmpfs cap" "$out" 'No space left on device'
expect_match "  the sandbox's /tmp is 32 MiB" "$out" '32768'
# (By name, not by the host's free space: other tests write to /tmp at the same time.)
check "  the host's /tmp and /dev/shm got nothing" test ! -e "/tmp/$fill" -a ! -e "/dev/shm/$fill"
box run --fsize-limit 1M --meta "$M" "$R" sh -c 'dd if=/dev/zero of=/tmp/big bs=1M count=4'
expect_eq "--fsize-limit: the writer dies of SIGXFSZ" "$(field status):$(field signal)" "SG:25"

"$GPUBOX" run --stdout-limit 1M --meta "$M" "$R" sh -c 'yes flood' >"$WORK/flood.out" 2>/dev/null
expect_eq "output flood: stdout is cut at the cap" "$(wc -c <"$WORK/flood.out")" 1048576
expect_eq "  status OL" "$(field status):$(field limit)" "OL:stdout"
/usr/bin/time -f %M -o "$WORK/rss" "$GPUBOX" run --stdout-limit 10G "$R" sh -c 'head -c 300000000 /dev/zero' >/dev/null
check "  300 MB streamed through the relay with gpubox under 16 MiB RSS" test "$(tail -1 "$WORK/rss")" -lt 16384

port=$((20000 + RANDOM % 20000))
busybox nc -l -p "$port" >/dev/null 2>&1 &
listener=$!
# listening: a LISTEN (0A) socket on the port in /proc/net/tcp (a connection would end nc)
listening() { cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -qi "^ *[0-9]*: [0-9A-F]*:$(printf %04X "$1") 0*:0* 0A "; }
wait_until 60 listening "$port" || not_ok "(the host listener did not come up)"
box run "$R" probe connect 127.0.0.1 "$port"
expect_eq "a host listener on 127.0.0.1 is unreachable" "$out" "connect=ECONNREFUSED"
check "  (control: the listener is up on the host)" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null

"$GPUBOX" run "$R" sh -c 'probe shm create 4242 60 & probe abstract listen gpubox-e2e 60' >"$WORK/a.out" &
a=$!
both_made() { grep -q '^shm_create=' "$WORK/a.out" && grep -q '^listen=' "$WORK/a.out"; }
wait_until 60 both_made || not_ok "(the first sandbox did not make its segment and socket)"
box run "$R" sh -c 'probe shm find 4242; probe abstract connect gpubox-e2e'
expect_eq "SysV shm and abstract sockets of a concurrent sandbox are invisible" "$out" "shm_find=ENOENT
abstract_connect=ECONNREFUSED"
kill -TERM "$a"
wait "$a"
expect_match "  (control: they existed in the other sandbox)" "$(cat "$WORK/a.out")" 'shm_create=OK'
box run "$R" sh -c 'probe shm create 77 0 && probe shm find 77; probe abstract listen x 0'
expect_match "  (control: visible inside the same sandbox)" "$out" 'shm_find=OK'

sleep 4304 &
victim=$!
box run "$R" sh -c 'probe kill-all; echo after'
check "kill(-1) inside does not reach the host" kill -0 "$victim"
box run "$R" probe ptrace "$victim"
expect_eq "ptrace of an outside pid fails" "$out" "ptrace=EPERM"
kill "$victim"; wait "$victim" 2>/dev/null

# The first sandbox writes its file, says so, and reads it back once the second has run.
mkdir "$WORK/sync"
"$GPUBOX" run --bind "$WORK/sync:/sync" "$R" sh -c 'echo A >/tmp/mine; touch /sync/written
    while [ ! -e /sync/go ]; do sleep 0.1; done; cat /tmp/mine' >"$WORK/c1" &
c1=$!
wait_until 60 test -e "$WORK/sync/written" || not_ok "(the first sandbox did not write its file)"
box run "$R" sh -c 'ls /tmp/mine 2>&1; echo B >/tmp/mine'
touch "$WORK/sync/go"
wait "$c1"
expect_match "concurrent sandboxes have their own /tmp" "$out:$(cat "$WORK/c1")" 'No such file or directory:A$'

box run --meta "$M" --meta-format isolate --time-limit 1 "$R" sh -c 'exit 3'
# isolate's own words and keys (isolate.c: final_stats(), err()); cg-mem is always written (CMS reads it).
expect_match "isolate format" "$(cat "$M")" $'^time:[0-9.]+\ntime-wall:[0-9.]+\nmax-rss:[0-9]+\ncsw-voluntary:[0-9]+\ncsw-forced:[0-9]+\ncg-mem:[0-9]+\nexitcode:3\nstatus:RE\nmessage:Exited with error status 3$'
box run --meta "$M" "$WORK/nowhere" true
expect_eq "setup failure: meta written, status XX" "$(field status):$rc" "XX:125"
box run --meta "$M" --bogus "$R" true
expect_eq "unparsable command line: meta still written" "$(field status)" "XX"
box run --meta "$M" "$R" no-such-command
expect_eq "exec failure is gpubox's (XX, 127), not a program result" "$(field status):$rc" "XX:127"
box run --memory-limit 64M --meta "$M" "$R" true
expect_eq "OK run" "$(field status):$(field exit_code)" "OK:0"

# The last word (launcher/monitor/supervise.cpp): what a program writes to its /tmp just before
# it ends counts in the peak reported, though it ran too briefly for any pass (50 ms apart under
# 2G). With nothing of the sandbox left, the files are read once init is gone: its tmpfs
# outlives it in the monitor's hands. (A build with no last word reported 0 MiB here.)
box run --memory-limit 2G --meta "$M" "$R" sh -c 'dd if=/dev/zero of=/tmp/end bs=1M count=48 2>/dev/null'
peak=$(($(field memory_peak_kb) / 1024))
check "48 MiB written to /tmp at the very end count in the peak reported ($peak MiB)" test "$peak" -ge 48
finish
