#!/usr/bin/env bash
# A small, realistic grader built on gpubox (run it as an ordinary user).
#
#   examples/autograder/grade.sh SUBMISSION.c [TESTDIR]
#
# 1. compiles the C submission inside a sandbox over the host's root (for its compiler), with
#    limits, so a hostile #include or a compiler bomb cannot touch anything;
# 2. runs the program on every TESTDIR/*.in in a minimal rootfs with time, memory, process and
#    output limits and an isolate-style verdict file (--meta-format isolate);
# 3. compares outputs and prints a verdict table: AC, WA, RE, TLE, MLE, OLE, CE, IE.
# Exits 0 when every test is AC, 1 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
gpubox=${GPUBOX:-gpubox}
[ $# -ge 1 ] || { echo "usage: $0 SUBMISSION.c [TESTDIR]" >&2; exit 2; }
sub=$(readlink -f "$1")
tests=$(readlink -f "${2:-$here/tests}")
work=$(mktemp -d "${TMPDIR:-/tmp}/grade.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/out"

# key FILE KEY: a value from an isolate-format meta file ("status" is absent when OK).
key() { sed -n "s/^$2://p" "$1"; }

"$gpubox" rootfs create "$work/rootfs" >/dev/null || exit 2
"$gpubox" run --wall-time-limit 30 --time-limit 20 --memory-limit 1G --pids-limit 64 \
    --ro-bind "$sub:/tmp/src/main.c" --bind "$work/out:/tmp/out" --workdir /tmp \
    --meta "$work/compile.meta" --meta-format isolate \
    / gcc -O2 -std=c11 -o /tmp/out/main /tmp/src/main.c -lm 2>"$work/compile.err"
compiled=$?

printf '%-10s %-5s %8s %9s  %s\n' TEST VERDICT TIME "MEM(KiB)" DETAIL
pass=0 total=0
for input in "$tests"/*.in; do
    name=$(basename "$input" .in)
    total=$((total + 1))
    if [ "$compiled" != 0 ]; then
        printf '%-10s %-5s %8s %9s  %s\n' "$name" CE - - "$(head -c 60 "$work/compile.err" | tr '\n' ' ')"
        continue
    fi
    meta=$work/$name.meta
    "$gpubox" run --wall-time-limit 2 --time-limit 1 --memory-limit 64M --pids-limit 8 \
        --stdout-limit 1M --stderr-limit 64K --fsize-limit 1M \
        --ro-bind "$work/out/main:/box/main" --meta "$meta" --meta-format isolate \
        "$work/rootfs" /box/main <"$input" >"$work/$name.got" 2>/dev/null
    status=$(key "$meta" status)
    status=${status:-OK}
    case $status in
        OK) if cmp -s "$work/$name.got" "${input%.in}.out"; then verdict=AC; pass=$((pass + 1)); else verdict=WA; fi ;;
        TO) verdict=TLE ;;
        ML) verdict=MLE ;;
        OL) verdict=OLE ;;
        RE | SG) verdict=RE ;;
        *) verdict=IE ;;
    esac
    printf '%-10s %-5s %8s %9s  %s\n' "$name" "$verdict" "$(key "$meta" time)" "$(key "$meta" max-rss)" "$(key "$meta" message)"
done
echo "score: $pass/$total"
[ "$pass" = "$total" ]
