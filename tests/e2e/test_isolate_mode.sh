#!/bin/bash
# gpubox as isolate, driven as a judge (CMS) drives isolate: --init, copy a program into the
# box, --run it several times with limits and --meta, read what it wrote, --cleanup. Every
# verdict is checked in isolate's words (isolate.c, isolate.1): status, exitsig/exitcode,
# killed, times, memory, messages, exit codes 0/1/2.

# As root (CI): another user, uid 65533, makes box 0 in its own default root, and root makes a
# shared sticky directory, before lib.sh drops to uid 65534 for the rest (test_state_dirs.sh
# attacks the boxes' root from another user).
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    other=$(mktemp -d /tmp/gpubox-e2e-other.XXXXXX) && chmod 0755 "$other"
    install -m 0755 "${GPUBOX:?}" "$other/gpubox" && ln -s gpubox "$other/isolate"
    shared=$(mktemp -d /tmp/gpubox-e2e-shared.XXXXXX) && chmod 1777 "$shared"
    as_other() { setpriv --reuid=65533 --regid=65533 --clear-groups env -u XDG_RUNTIME_DIR "$@"; }
    as_other env -u GPUBOX_ISOLATE_ROOT "$other/isolate" --init >"$other/default-box" &&
        as_other sh -c "echo 65533 >\"\$1/box/owner\"" sh "$(cat "$other/default-box")" ||
        { echo "Bail out! uid 65533 cannot make a box"; exit 1; }
    export E2E_OTHER_BOX=$(cat "$other/default-box") E2E_SHARED_ROOT=$shared
    # The default roots the test made (/tmp/gpubox-isolate-UID, as isolate keeps its own): gone
    # afterwards, where they hold nothing but lock files.
    trap 'as_other "$other/isolate" --cleanup; rm -rf "$other" "$shared"
          for d in /tmp/gpubox-isolate-65533 /tmp/gpubox-isolate-65534; do
              [ -d "$d" ] && find "$d" -mindepth 1 ! -name "*.lock" | grep -q . || rm -rf "$d"
          done' EXIT
fi
source "$(dirname "$0")/lib.sh"

command -v gcc >/dev/null || { echo "1..0 # SKIP gcc is needed to build the submissions"; exit 77; }
mkdir -p "$WORK/bin" && ln -s "$GPUBOX" "$WORK/bin/isolate"
ISO=$WORK/bin/isolate
export GPUBOX_ISOLATE_ROOT=$WORK/boxes
gcc -static -O2 -pthread -o "$WORK/prog" "$E2E_DIR/isolate_judge_prog.c" || { echo "Bail out! gcc -static failed"; exit 1; }
M=$WORK/meta

# iso ARGS...: run isolate mode; sets $rc, $out, $err.
iso() {
    "$ISO" "$@" >"$WORK/.out" 2>"$WORK/.err"
    rc=$?
    out=$(cat "$WORK/.out")
    err=$(cat "$WORK/.err")
}
# mf KEY: a value from the isolate meta file $M ("" when absent).
mf() { sed -n "s/^$1://p" "$M"; }
# run_prog ARGS... -- MODE [ARG]: one --run of the submission in box 0 with a fresh meta file.
run_prog() {
    local opts=()
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    rm -f "$M"
    iso -M "$M" "${opts[@]}" --run -- ./prog "$@"
}
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# --- a box, as isolate makes one ---------------------------------------------------------
iso --init
expect_eq "--init prints the box's directory (its parent of box/)" "$rc:$out" "0:$GPUBOX_ISOLATE_ROOT/0"
BOX=$out/box
check "box/ is there for the judge to fill" test -d "$BOX"
cp "$WORK/prog" "$BOX/prog" && echo "2 3" >"$BOX/in.txt"
# Its root: a fresh tmpfs holding the rules' directories alone, as isolate's own box root (an
# overlay over an empty directory showed the same for about 0.2-0.5 ms more a run).
iso -p10 --run -- /bin/sh -c 'stat -f -c %T /; ls -A /'
expect_eq "the box's root is a tmpfs" "$rc:$(head -1 <<<"$out")" "0:tmpfs"
dirs=$(for d in bin box dev lib lib64 proc tmp usr; do [ -e "/$d" ] || [ "$d" = box ] && echo "$d"; done)
expect_eq "  holding the default rules' directories alone" "$(tail -n +2 <<<"$out")" "$dirs"

# --- verdicts ------------------------------------------------------------------------------
run_prog -t 1 -w 5 -i in.txt -o out.txt -- ok
expect_eq "correct: exit 0, isolate's OK line" "$rc:$(echo "$err" | sed -E 's/[0-9]+\.[0-9]{3}/T/g')" "0:OK (T sec real, T sec wall)"
expect_eq "correct: the output the program wrote into the box" "$(cat "$BOX/out.txt")" 5
expect_eq "correct: no status, no message, exitcode 0 (isolate writes none on success)" "$(mf status)|$(mf message)|$(mf exitcode)" "||0"
expect_match "correct: isolate's keys in isolate's order" "$(cat "$M")" \
    $'^time:[0-9]+\\.[0-9]{3}\ntime-wall:[0-9]+\\.[0-9]{3}\nmax-rss:[1-9][0-9]*\ncsw-voluntary:[0-9]+\ncsw-forced:[0-9]+\ncg-mem:[1-9][0-9]*\nexitcode:0$'

run_prog -t 1 -i in.txt -o out.txt -s -- wa
expect_eq "wrong answer: still a clean run (the judge compares), silent" "$rc:$err:$(cat "$BOX/out.txt")" "0::-1"
# -o rewritten in the same box, by a shorter output: emptied when opened (its writer is a second
# open file of it, trusted_path::written_apart), nothing of the last run's left.
run_prog -t 1 -i in.txt -o out.txt -- ok
expect_eq "-o rewritten by a shorter output holds that output alone" "$rc:$(od -c "$BOX/out.txt" | head -1)" \
    "0:$(printf '5\n' | od -c | head -1)"

run_prog -t 1 -- exit3
expect_eq "exit 3: RE, exitcode 3, exit 1" "$rc:$(mf status):$(mf exitcode):$(mf message)" "1:RE:3:Exited with error status 3"
expect_eq "exit 3: the status line" "$err" "Exited with error status 3"

run_prog -t 1 -- segv
expect_eq "segfault: SG, exitsig 11" "$rc:$(mf status):$(mf exitsig):$(mf message)" "1:SG:11:Caught fatal signal 11"

run_prog -t 1 -w 10 -- cpu
expect_eq "CPU loop under --time=1: TO, killed" "$rc:$(mf status):$(mf killed):$(mf message)" "1:TO:1:Time limit exceeded"
expect_eq "CPU loop: isolate's status line alone on stderr (no line of gpubox's)" "$err" "Time limit exceeded"
# The sampler kills once a pass sees the limit (about 10 ms late when idle, later under load);
# RLIMIT_CPU, ceil(1) + 1 = 2 s, bounds the one process whatever the load: the pass came first.
check "CPU loop: time >= 1 s, and below the RLIMIT_CPU backstop of 2 s ($(mf time))" eval 'at_least "$(mf time)" 1 && ! at_least "$(mf time)" 2'

run_prog -t 5 -w 1 -- sleep
expect_eq "sleep past --wall-time=1: TO, killed, a message with 'wall' (CMS looks for it)" \
    "$rc:$(mf status):$(mf killed):$(mf message)" "1:TO:1:Time limit exceeded (wall clock)"
# (time: the sandbox's CPU, about 0 for a sleep: the monitor measures from outside; never the wall time)
check "sleep: time-wall >= 1 s ($(mf time-wall)), time ~0 ($(mf time))" eval 'at_least "$(mf time-wall)" 1 && ! at_least "$(mf time)" 0.02'

iso --cleanup && iso --cg --init  # the cgroup mode is the box's, as isolate's lock records it
cp "$WORK/prog" "$BOX/prog"
run_prog --cg -t 10 -w 20 --cg-mem=65536 -- alloc
expect_eq "512 MiB under --cg-mem=65536: SG, exitsig 9, cg-oom-killed (never ML)" \
    "$rc:$(mf status):$(mf exitsig):$(mf cg-oom-killed)" "1:SG:9:1"
# cg-mem is the peak the sampler saw: past the limit, and how far past depends on when the
# sampler ran (within 64 MiB over when idle, more on a loaded machine), so the upper bound is
# only what the program could take (512 MiB and its own few).
check "512 MiB: cg-mem is the peak, past the limit ($(mf cg-mem) KiB)" eval '[ "$(mf cg-mem)" -ge 60000 ] && [ "$(mf cg-mem)" -le 540000 ]'
expect_match "  --cg on the fallback says so, once, on gpubox's own stderr" "$(grep -c 'isolate --cg: no delegated cgroup v2' "$WORK/.err")" '^1$'
# A site demands exact limits without changing the judge's command line.
GPUBOX_REQUIRE_CGROUP=1 run_prog --cg -t 1 -- ok
expect_match "GPUBOX_REQUIRE_CGROUP=1 without a delegated cgroup v2: refused, naming doctor" \
    "$rc:$err" "--require-cgroup: no cgroup v2 with the memory controller.*gpubox doctor"
run_prog -t 1 -- ok
expect_match "a --cg box refuses a run without --cg, as isolate" "$rc:$err" "^2:This box was initialized with an incompatible control group mode$"
iso --cg --cleanup && iso --init && cp "$WORK/prog" "$BOX/prog"

run_prog -t 10 -m 65536 -- alloc
expect_match "512 MiB under --mem=65536 (address space): malloc fails, the program's own exit" \
    "$rc:$(mf status):$(mf exitcode):$out" "^1:RE:1:malloc failed after [0-9]+ MiB$"
check "--mem: it got less than 64 MiB ($out)" eval '[ "$(echo "$out" | grep -Eo "[0-9]+" | head -1)" -lt 64 ]'

run_prog -p20 -t 5 -w 10 -- forkbomb
check "fork bomb under --processes=20: at most 19 children ($out), then fork fails" eval '[ "$out" -le 19 ] && [ "$out" -ge 10 ]'
expect_eq "fork bomb: the program itself ended normally" "$rc:$(mf status)" "0:"
run_prog -t 1 -- forkbomb
expect_eq "default --processes=1: no fork at all" "$rc:$out" "0:0"

run_prog -t 5 -f 1024 -o flood.txt -- flood
expect_eq "stdout flood under --fsize=1024: SG, exitsig 25 (SIGXFSZ)" "$rc:$(mf status):$(mf exitsig)" "1:SG:25"
check "flood: the box's file stops at 1 MiB ($(stat -c %s "$BOX/flood.txt") bytes)" eval '[ "$(stat -c %s "$BOX/flood.txt")" -le 1048576 ]'

run_prog -p10 -t 1 -w 10 -- threads
# The main thread only joins: counted alone, the run would end at the wall limit, 10 s.
expect_eq "4 spinning threads under --time=1: TO on the CPU limit, not the wall's" \
    "$rc:$(mf status):$(mf killed):$(mf message)" "1:TO:1:Time limit exceeded"
check "threads: CPU time of all threads counted ($(mf time) s in $(mf time-wall) s wall)" at_least "$(mf time)" 1

run_prog -t 1 -- read /etc/passwd
expect_eq "a host file outside the box's rules does not exist inside" "$rc:$(mf status):$out" "1:RE:No such file or directory"
run_prog -t 1 --dir=etc -- read /etc/passwd
expect_match "--dir=etc binds it" "$rc:$out" "^0:read [1-9][0-9]* bytes$"
run_prog -t 1 -- read /box/../../etc/passwd
expect_eq "no way out of /box by .." "$rc:$out" "1:No such file or directory"

# isolate's box: its default rules and nothing else (isolate 2.x, rules.c: box, bin, dev,
# dev/shm, lib, lib64, proc, tmp, usr). No /sys (the host's hardware and settings, such as
# /sys/kernel/mm/transparent_hugepage/enabled) and no /run.
run_prog -t 1 -- ls /
expect_eq "the box's root holds what isolate's holds" "$rc:$out" "0:bin box dev lib lib64 proc tmp usr"
run_prog -t 1 -- read /sys/kernel/mm/transparent_hugepage/enabled
expect_eq "no /sys in the box" "$rc:$(mf status):$out" "1:RE:No such file or directory"
run_prog -t 1 --dir=sys=sysfs:fs -- ls /sys/kernel/mm
expect_match "... unless a rule asks for it (--dir=sys=sysfs:fs)" "$rc:$out" "^0:.*transparent_hugepage"
iso -M "$M" -t 1 --run -- ./missing
expect_eq "a program that is not there: isolate's execve() line and status line, no line of gpubox's" \
    "$rc:$err" $'1:execve("./missing"): No such file or directory\nExited with error status 127'

# max-rss is the program's peak resident set (isolate: the rusage of its processes), not that
# of gpubox's own processes (about 3 MiB); cg-mem, without a cgroup, never below it.
run_prog -t 1 -- exit3
check "a small static program: max-rss is its own, under 2.5 MiB ($(mf max-rss) KiB; isolate 2.x: 1.2-1.4 MiB)" \
    eval '[ "$(mf max-rss)" -gt 0 ] && [ "$(mf max-rss)" -lt 2560 ]'
expect_eq "... and cg-mem agrees with it (no cgroup: at least the largest resident set)" "$(mf cg-mem)" "$(mf max-rss)"
run_prog -t 10 -- alloc
check "512 MiB touched: max-rss is 512 MiB and up ($(mf max-rss) KiB), cg-mem as much ($(mf cg-mem) KiB)" \
    eval '[ "$(mf max-rss)" -ge 524288 ] && [ "$(mf max-rss)" -lt 540000 ] && [ "$(mf cg-mem)" -ge "$(mf max-rss)" ]'
run_prog -t 1 -w 10 -- cpu
check "a program gpubox killed: max-rss is still its own ($(mf max-rss) KiB), cg-mem no less" \
    eval '[ "$(mf max-rss)" -gt 0 ] && [ "$(mf max-rss)" -lt 2560 ] && [ "$(mf cg-mem)" -ge "$(mf max-rss)" ]'

run_prog -t 1 -- symlink
check "a symlink the program planted in the box is gone after the run" test ! -L "$BOX/planted"

# --- isolate's errors ----------------------------------------------------------------------
rm -f "$M"
iso -b 5 -M "$M" --run -- ./prog ok
expect_eq "--run without --init: isolate's message, exit 2" "$rc:$err" "2:Box not found, did you run \`isolate --init'?"
expect_eq "... and status XX in the meta file" "$(mf status)" XX
iso --cleanup
expect_eq "--cleanup: exit 0" "$rc" 0
check "--cleanup removed the box" test ! -e "$GPUBOX_ISOLATE_ROOT/0"
iso --run -- ./prog ok
expect_eq "a box used after --cleanup" "$rc:$err" "2:Box not found, did you run \`isolate --init'?"
iso --cleanup
expect_eq "--cleanup of a box that is gone does nothing" "$rc:$out:$err" "0::"
iso --quota=100,100 --init
expect_match "--quota: a clear error" "$rc:$err" "^2:--quota: disk quotas need root"
iso --as-uid=0 --as-gid=0 --init
expect_match "--as-uid of another user: a clear error" "$rc:$err" "^2:--as-uid/--as-gid: gpubox runs unprivileged"
iso --bogus
expect_match "an unknown option: usage error, exit 2" "$rc:$err" "^2:isolate: unrecognized option '--bogus'"

iso -b 1 --init && cp "$WORK/prog" "$out/box/prog"
"$ISO" -b 1 -t 5 -w 6 --run -- ./prog sleep >"$WORK/busy.out" 2>&1 &
wait_until 60 grep -qs sleeping "$WORK/busy.out" || not_ok "(the first run of box 1 did not start)"
iso -b 1 --run -- ./prog ok
expect_eq "a busy box" "$rc:$err" "2:This box is currently in use by another process"
iso -b 1 --wait -s -t 1 -i /dev/null --run -- ./prog exit3
expect_eq "--wait waits for it" "$rc" 1
wait
iso -b 1 --cleanup

# --- one uid's boxes, another's ------------------------------------------------------------
if [ -n "${E2E_OTHER_BOX:-}" ]; then
    box_default=$(env -u GPUBOX_ISOLATE_ROOT -u XDG_RUNTIME_DIR "$ISO" --init)
    expect_eq "default root: per uid, so box 0 of uid 65534 is not uid 65533's" \
        "$box_default:$E2E_OTHER_BOX" "/tmp/gpubox-isolate-65534/0:/tmp/gpubox-isolate-65533/0"
    check "uid 65533's box is untouched and invisible" test ! -e "$box_default/box/owner"
    env -u GPUBOX_ISOLATE_ROOT -u XDG_RUNTIME_DIR "$ISO" --cleanup
    GPUBOX_ISOLATE_ROOT=$E2E_SHARED_ROOT iso --init
    expect_match "a shared sticky root is refused: each user's boxes are in a root of their own" "$rc:$err" \
        "^2:box root \"$E2E_SHARED_ROOT\" belongs to uid 0, not to you \(uid 65534\); set GPUBOX_ISOLATE_ROOT or XDG_RUNTIME_DIR"
else
    ok "# SKIP two users' boxes need the suite to start as root"
fi

# --- gpubox isolate, gpubox run --meta-format isolate -------------------------------------
box isolate --version
expect_match "gpubox isolate --version" "$rc:$out" "^0:The process isolator 2"
rm -f "$M"
mkdir -p "$WORK/r" && cp "$WORK/prog" "$WORK/r/prog"
box run --meta "$M" --meta-format isolate --memory-limit 64M --time-limit 10 "$WORK/r" /prog alloc
expect_eq "gpubox run --meta-format isolate: a memory kill is SG/9 with cg-oom-killed" \
    "$(mf status):$(mf exitsig):$(mf cg-oom-killed)" "SG:9:1"

finish
