#!/usr/bin/env bash
# examples/autograder: each shipped submission gets the verdicts it deserves, unprivileged.
. "$(dirname "$0")/lib.sh"
A=$E2E_DIR/examples/autograder
[ -d "$A" ] || A=$(cd "$(dirname "$0")/../../examples/autograder" && pwd)
make_rootfs "$WORK/probe-rootfs"
require_userns "$WORK/probe-rootfs"
verdicts() { awk 'NR > 1 && $1 != "score:" { printf "%s ", $2 }' <<<"$1"; }
survivors() { pgrep -f "/box/main" || true; }

for case in "correct:AC AC AC :0" "wrong:AC AC WA :1" "crash:RE RE RE :1" "slow:TLE TLE TLE :1" \
            "forkbomb:TLE TLE TLE :1" "membomb:MLE MLE MLE :1"; do
    name=${case%%:*}; rest=${case#*:}; want=${rest%:*}; want_rc=${rest##*:}
    out=$(GPUBOX=$GPUBOX bash "$A/grade.sh" "$A/submissions/$name.c" 2>&1); rc=$?
    expect_eq "$name.c: verdicts" "$(verdicts "$out")" "$want"
    expect_eq "$name.c: grader exit status" "$rc" "$want_rc"
done
expect_match "the table shows the limit that ended a run" "$out" 'memory limit exceeded \(peak [0-9]+ KiB\)'
check "nothing of any submission is left running" test -z "$(survivors)"
printf 'int main( {\n' >"$WORK/broken.c"
out=$(GPUBOX=$GPUBOX bash "$A/grade.sh" "$WORK/broken.c" 2>&1)
expect_eq "a submission that does not compile: CE" "$(verdicts "$out")" "CE CE CE "

# A hostile submission must not be able to read the grader's expected outputs at compile time
# (#include by absolute or relative path, or the assembler's .incbin), nor any other file of the
# user's. The tests live in a directory of their own with an answer no one could guess, outside
# /tmp (which a sandbox over the host's "/" gets a fresh tmpfs at, hiding $WORK by chance): in
# /var/tmp where it is writable, as a course directory under /home or /srv would be.
outside=$(mktemp -d /var/tmp/gpubox-e2e.XXXXXX 2>/dev/null) || outside=$(mktemp -d "$WORK/outside.XXXXXX")
trap 'rm -rf "$outside"; chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT  # and lib.sh's
course=$outside/course
mkdir -p "$course/tests" "$outside/home"
secret=7$RANDOM$RANDOM$RANDOM
printf '1 1\n' >"$course/tests/1.in"
printf '%s\n' "$secret" >"$course/tests/1.out"
printf 'long long grades = 42;\n' >"$course/private.txt"       # the TESTDIR's parent
printf 'long long notes = 42;\n' >"$outside/home/notes.txt"    # the user's home
grade_hostile() { # NAME: grade $WORK/NAME.c against $course/tests; sets $out and $rc.
    out=$(HOME=$outside/home GPUBOX=$GPUBOX bash "$A/grade.sh" "$WORK/$1.c" "$course/tests" 2>&1); rc=$?
}
cat >"$WORK/include-abs.c" <<EOF
#include <stdio.h>
int main(void) {
    long long answer =
#include "$course/tests/1.out"
    ;
    printf("%lld\n", answer);
    return 0;
}
EOF
# From /tmp/src (or any directory), enough ".." reach "/".
sed "s|#include \"/|#include \"../../../../../../../../../../../../|" "$WORK/include-abs.c" >"$WORK/include-rel.c"
cat >"$WORK/incbin.c" <<EOF
#include <stdio.h>
extern const char answer[];
__asm__(".section .rodata\n.globl answer\nanswer:\n.incbin \"$course/tests/1.out\"\n.byte 0\n.previous\n");
int main(void) { fputs(answer, stdout); return 0; }
EOF
for name in include-abs include-rel incbin; do
    grade_hostile "$name"
    expect_eq "$name.c: cannot read the expected output at compile time: CE" "$(verdicts "$out")" "CE "
    expect_no_match "$name.c: the expected output appears nowhere in the grader's output" "$out" "$secret"
    expect_eq "$name.c: grader exit status" "$rc" 1
done

# Nothing else of the host's that the compiler does not need is there either: a submission that
# fails to compile if any of these files is visible must compile (and then get WA).
probes=("$course/tests/1.out" "$course/tests/1.in" "$course/private.txt" "$outside/home/notes.txt"
        "$A/tests/1.out" "$A/grade.sh" "$E2E_DIR/lib.sh" "$GPUBOX")
for f in /etc/hostname /etc/shadow /etc/ld.so.cache /root/.bashrc; do [ -r "$f" ] && probes+=("$f"); done
{
    for f in "${probes[@]}"; do printf '#if __has_include("%s")\n#error visible: %s\n#endif\n' "$f" "$f"; done
    printf 'int main(void) { return 0; }\n'
} >"$WORK/probe.c"
grade_hostile probe
expect_no_match "the compile sandbox sees none of the host's other files" "$out" 'visible:'
expect_eq "probe.c: compiles, then gets WA" "$(verdicts "$out")" "WA "
finish
