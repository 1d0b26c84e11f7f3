#!/usr/bin/env bash
# A small, realistic grader built on gpubox (run it as an ordinary user).
#
#   examples/autograder/grade.sh SUBMISSION.c [TESTDIR]
#
# 1. compiles the C submission inside a sandbox with limits, in a minimal rootfs with only the
#    host's /usr (for its compiler) added read-only, so that a hostile #include, .incbin or
#    compiler bomb can neither touch nor read anything else: not the expected outputs, not this
#    grader's work directory, not the user's files;
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

# Compile. Not over the host's "/": the compiler reads whatever file the submission names
# (#include "/abs/path/tests/1.out", a relative "../../..", the assembler's .incbin), and could
# print it into the program or into its error messages, so it must see only what it needs.
# The tests may live anywhere (/home, /srv, /var/tmp, a checkout), so rather than mask their path,
# the root is the minimal rootfs (its own /etc with passwd, group, hosts; empty /home, /root;
# /bin, /sbin, /lib -> usr/*; /lib64 with a copy of the host's dynamic loader) with the host's
# /usr bound read-only over its /usr. On a merged-/usr host (Debian 12) that is all of gcc,
# cc1, as, ld, the headers and the libraries; gcc needs nothing from /etc (no ld.so.cache: the
# loader searches the multiarch directories by default). /tmp is a fresh tmpfs for gcc's
# temporaries; the only host paths besides /usr are the submission, read-only, and a fresh
# output directory.
usr_masks=()
for dir in "$tests" "$work"; do
    # Something kept below /usr itself would come in with it: hide it under an empty tmpfs.
    case $dir/ in /usr/*) usr_masks+=(--tmpfs "$dir") ;; esac
done
"$gpubox" run --wall-time-limit 30 --time-limit 20 --memory-limit 1G --pids-limit 64 \
    --ro-bind /usr:/usr "${usr_masks[@]}" \
    --ro-bind "$sub:/tmp/src/main.c" --bind "$work/out:/tmp/out" --workdir /tmp \
    --meta "$work/compile.meta" --meta-format isolate \
    "$work/rootfs" gcc -O2 -std=c11 -o /tmp/out/main /tmp/src/main.c -lm 2>"$work/compile.err"
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
    # Read as a judge reads isolate's verdicts (CMS does the same): a memory kill is a SIGKILL
    # with cg-oom-killed, an output kill a SIGXFSZ; the status alone says SG for both.
    status=$(key "$meta" status)
    status=${status:-OK}
    detail=$(key "$meta" message)
    if [ "$(key "$meta" cg-oom-killed)" = 1 ]; then
        status=ML detail="memory limit exceeded (peak $(key "$meta" cg-mem) KiB)"
    elif [ "$status" = SG ] && [ "$(key "$meta" exitsig)" = 25 ]; then
        status=OL detail="output limit exceeded"
    fi
    case $status in
        OK) if cmp -s "$work/$name.got" "${input%.in}.out"; then verdict=AC; pass=$((pass + 1)); else verdict=WA; fi ;;
        TO) verdict=TLE ;;
        ML) verdict=MLE ;;
        OL) verdict=OLE ;;
        RE | SG) verdict=RE ;;
        *) verdict=IE ;;
    esac
    printf '%-10s %-5s %8s %9s  %s\n' "$name" "$verdict" "$(key "$meta" time)" "$(key "$meta" max-rss)" "$detail"
done
echo "score: $pass/$total"
[ "$pass" = "$total" ]
