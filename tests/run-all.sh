#!/usr/bin/env bash
# README's second command: install dependencies, build, and run the whole test suite
# (unit, the executor in a user namespace, end-to-end as an unprivileged user, GPU-simulated, unit tests under sanitizers, fuzz smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh
jobs=$(nproc)
export GPUBOX_TESTS_MUST_WORK=${GPUBOX_TESTS_MUST_WORK:-1}

# Debug information as line tables only (-g1), in every build here: full -g took a third to
# two fifths of each build's compile time (a 2-vCPU VM: launcher/monitor/run.cpp 20.3 s -> 12.1,
# under ASan 18.8 -> 12.9), no test reads it, and a backtrace or a sanitizer's report still
# names file and line. (The code compiled is the same: -g does not change GCC's code.)
echo "== build (-O2, _FORTIFY_SOURCE, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUBOX_WERROR=ON \
    -DCMAKE_CXX_FLAGS="-D_FORTIFY_SOURCE=2" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== unit tests under AddressSanitizer + UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGPUBOX_SANITIZE=ON -DGPUBOX_WERROR=ON \
    -DCMAKE_CXX_FLAGS_DEBUG="-g1" >/dev/null
cmake --build build-asan -j"$jobs" --target gpubox_unit_tests
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1 ./build-asan/tests/gpubox_unit_tests

echo "== fuzz smoke: libFuzzer on the ld.so.cache, procfs, image-file (preflight) and CDI spec parsers (clang, ASan, UBSan)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DGPUBOX_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_ldcache fuzz_proc fuzz_preflight fuzz_cdi
for f in ldcache proc preflight cdi; do
    corpus=$(mktemp -d)
    ./build-fuzz/tests/fuzz/fuzz_$f -max_total_time="${GPUBOX_FUZZ_SECONDS:-20}" \
        "$corpus" "tests/fuzz/corpus/$f" >"$corpus.log" 2>&1 || { tail -40 "$corpus.log"; exit 1; }
    echo "fuzz_$f: $(grep -E '^Done' "$corpus.log")"
    rm -rf "$corpus" "$corpus.log"
done
echo "== format: every tracked C/C++ file as clang-format 14 writes it (.clang-format)"
bash tools/check-format.sh
echo "all test stages passed"
