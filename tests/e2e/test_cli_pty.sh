#!/usr/bin/env bash
# An interactive shell at a terminal: its own pty (in the sandbox's devpts), job control, the
# caller's window size at start and on SIGWINCH, the caller's terminal settings restored, and
# no pty where the caller has no terminal. script(1) plays the caller's terminal.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
command -v script >/dev/null || { echo "Bail out! script(1) (bsdutils) is missing"; exit 1; }

# at_terminal INPUT CMD: CMD at a 30x100 terminal, INPUT typed into it; the terminal's output
# without carriage returns. The input stays open until the session has ended, so that its end
# never ends the session first (on a loaded machine gpubox may not even have started by then).
at_terminal() {
    local ended=$WORK/.ended
    rm -f "$ended"
    { printf '%s' "$1"; wait_until 120 test -e "$ended"; } |
        { timeout 120 script -qec "stty rows 30 cols 100; $2" /dev/null 2>&1; : >"$ended"; } | tr -d '\r'
}

out=$(at_terminal $'tty\nsleep 10 &\nsleep 0.5; jobs\nkill %1\nwait %1; jobs; echo checked\nexit 3\n' "\"$GPUBOX\" run \"$R\" sh -i; echo rc=\$?")
expect_match "tty names the sandbox's own /dev/pts/N" "$out" 'tty'$'\n''/dev/pts/[0-9]+'$'\n'
expect_match "a background job runs" "$out" '^\[1\]\+ +Running +sleep 10$'
after_kill=${out##*'/ $ kill %1'}
expect_match "kill %1 ends it: job control" "$after_kill" '^checked$'
expect_no_match "kill %1 ends it: no longer running" "$after_kill" 'Running'
expect_no_match "the shell has job control" "$out" "can't access tty|job control turned off"
expect_match "the shell's exit status is gpubox's" "$out" '^rc=3$'

out=$(at_terminal "" "\"$GPUBOX\" run \"$R\" sh -c 'stty size; tty >/dev/null && echo tty-resolves; [ -t 2 ] && echo stderr-tty'")
expect_match "the caller's window size at start" "$out" '^30 100$'
expect_match "fd 0 is a pty of the sandbox's devpts (ttyname resolves)" "$out" '^tty-resolves$'
expect_match "fd 2 too, when the caller's stderr is the terminal" "$out" '^stderr-tty$'

# A resize reaches the workload: it waits for SIGWINCH, then reports its size.
mkdir "$WORK/sync"
out=$(at_terminal "" "\"$GPUBOX\" run --bind \"$WORK/sync:/sync\" \"$R\" sh -c 'trap \"stty size; exit 0\" WINCH; touch /sync/ready; while :; do sleep 0.1; done' </dev/tty & \
    for i in \$(seq 1000); do [ -e \"$WORK/sync/ready\" ] && break; sleep 0.1; done; stty rows 40 cols 120; wait")
expect_match "SIGWINCH passes the new size on" "$out" '^40 120$'

# The caller's terminal comes back as it was (raw mode undone), even after a limit kill.
out=$(at_terminal "" "stty -g >\"$WORK/before\"; \"$GPUBOX\" run --wall-time-limit 0.5 \"$R\" sleep 5; echo rc=\$?; stty -g >\"$WORK/after\"")
expect_match "a limit kill at a terminal: 137 and the line" "$out" $'gpubox: killed: wall-clock limit 0.500 s exceeded\nrc=137'
expect_eq "terminal settings restored" "$(cat "$WORK/after")" "$(cat "$WORK/before")"

# No terminal, no pty: the workload sees the pipes it always saw.
box run "$R" sh -c 'tty; ls -l /proc/self/fd/0 | sed "s/.*-> //"' </dev/null
expect_match "without a terminal, no pty" "$out" '^not a tty$'
finish
