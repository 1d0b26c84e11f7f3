#!/usr/bin/env bash
# Whether every tracked C and C++ file reads as clang-format 14 writes it with .clang-format.
#   tools/check-format.sh        names each file that differs and how many of its lines would
#                                change; exit 1 if any does (tests/run-all.sh runs this)
#   tools/check-format.sh --fix  formats those files in place
# Only clang-format 14 (Debian 12's) is accepted: other versions lay out the same config
# differently, and CI must agree with what developers run.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
version=$("$cf" --version 2>/dev/null || true)
if [[ $version != *"version 14."* ]]; then
    echo "check-format: needs clang-format 14 (Debian 12's clang-format package), got: ${version:-none}" >&2
    exit 2
fi
mapfile -d '' files < <(git ls-files -z -- '*.cpp' '*.hpp' '*.c' '*.h')
if [[ ${1:-} == --fix ]]; then
    "$cf" -i -- "${files[@]}"
    exit 0
fi
bad=0 lines=0
for f in "${files[@]}"; do
    n=$("$cf" -- "$f" | diff -- "$f" - | grep -c '^<' || true)
    if [[ $n -gt 0 ]]; then
        echo "$f: $n lines differ from clang-format's"
        bad=$((bad + 1)) lines=$((lines + n))
    fi
done
if [[ $bad -gt 0 ]]; then
    echo "check-format: $bad of ${#files[@]} files, $lines lines, are not formatted (tools/check-format.sh --fix)" >&2
    exit 1
fi
echo "check-format: ${#files[@]} files formatted"
