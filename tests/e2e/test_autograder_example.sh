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
expect_match "the table shows the limit that ended a run" "$out" 'killed: memory limit 67108864 bytes exceeded'
check "nothing of any submission is left running" test -z "$(survivors)"
printf 'int main( {\n' >"$WORK/broken.c"
out=$(GPUBOX=$GPUBOX bash "$A/grade.sh" "$WORK/broken.c" 2>&1)
expect_eq "a submission that does not compile: CE" "$(verdicts "$out")" "CE CE CE "
finish
