#!/usr/bin/env bash
# Usage: sudo tools/hot-text.sh [OUT]   (OUT: default launcher/hot_text.ld; ROUNDS=4,
#        BUILD_TYPES="RelWithDebInfo Release": README's build and bench/'s, whose inlining differs)
#
# Writes the linker script that places the code a run of gpubox executes side by side, at the
# start of its text (CMakeLists.txt: GPUBOX_HOT_TEXT). Why: each process of a run (the monitor,
# the sandbox's init, the workload's before its exec) maps gpubox's text a 64 KiB window a page
# fault (the kernel's fault-around), none shared (a fork does not copy a file mapping's page
# tables), and all unmapped again at exit. The code a run calls was spread over ~50 of the 71
# windows of gpubox's 4.6 MiB of text; laid out, the monitor faults in 19 and init in 15
# (bench/README.md: the faults and the CPU measured). Rerun after changes to what a run
# executes: a function it misses is only slower to reach; a name gone matches nothing.
#
# How, for each build type, in two passes, on the runs a judge and a user make (below), as uid
# 65534; the script holds what both find for either build type:
#  1. gpubox built with -pg (tools/hot-text/gxx-pg), each function calling mcount.S on entry,
#     which marks it in a map the run's processes share (mark.c): the sections that hold its
#     functions (-ffunction-sections: .text.NAME; the link map says which; layout.py marked).
#  2. ROUNDS times: gpubox built with the script so far and a link map, the runs' text faults
#     recorded (perf record -e page-faults -d); the input section of each that fell outside the
#     hot code joins it (layout.py faulted): what -pg does not see, glibc's and libstdc++'s
#     objects, and gpubox's functions the profiling build inlined or named otherwise.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$TOP/launcher/hot_text.ld}
ROUNDS=${ROUNDS:-4} BUILD_TYPES=${BUILD_TYPES:-RelWithDebInfo Release}
H=$TOP/tools/hot-text
[ "$(id -u)" = 0 ] || { echo "hot-text.sh: run as root (gpubox runs as uid 65534; perf records every process)" >&2; exit 1; }
command -v perf >/dev/null || { echo "hot-text.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
W=$(mktemp -d /tmp/gpubox-hot-text.XXXXXX)
trap 'rm -rf "$W"' EXIT
chmod 0755 "$W"
mkdir -p "$W/rootfs"/{proc,dev,sys,tmp,run} "$W/work" "$W/d"
printf 'int main(void) { return 0; }\n' >"$W/tiny.c"
cc -static -O2 -o "$W/rootfs/tiny" "$W/tiny.c"
chown 65534:65534 "$W/work"
ln -s ../gpubox "$W/d/isolate"
AS=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all env -i PATH=/usr/bin:/bin
    HOME="$W/work" HOT_TEXT_OUT="$W/work/marks" GPUBOX_ISOLATE_ROOT="$W/work/boxes")
ALL=(--time-limit 1 --wall-time-limit 5 --memory-limit 64M --pids-limit 8)

# The runs: `run` without limits and with every limit (read-only and overlay roots, a meta
# file), on a simulated GPU host, and isolate mode's box cycle with and without limits.
runs() {
    local g=$W/gpubox box
    (
        cd "$W/work"
        "${AS[@]}" "$g" run --read-only "$W/rootfs" /tiny
        "${AS[@]}" "$g" run "${ALL[@]}" --meta "$W/work/meta" --meta-format isolate --read-only "$W/rootfs" /tiny
        "${AS[@]}" "$g" run "${ALL[@]}" "$W/rootfs" /tiny
        "${AS[@]}" "$g" run --driver-root "$W/host" --gpu 0 --read-only "$W/rootfs" /tiny
        box=$("${AS[@]}" "$W/d/isolate" -b 7 --init)
        cp "$W/rootfs/tiny" "$box/box/tiny" && chown 65534:65534 "$box/box/tiny"
        "${AS[@]}" "$W/d/isolate" -b 7 -s -t 1 -w 5 -m 262144 -M "$W/work/meta-i" --run -- ./tiny
        "${AS[@]}" "$W/d/isolate" -b 7 -s --run -- ./tiny
        "${AS[@]}" "$W/d/isolate" -b 7 --cleanup >/dev/null
    )
}

build() {  # build DIR CMAKE_ARGS...: gpubox (and the simulated GPU host), installed as $W/gpubox
    local dir=$1
    shift
    cmake -S "$TOP" -B "$dir" "$@" >/dev/null
    cmake --build "$dir" -j"$(nproc)" --target fake-gpu-host >/dev/null
    rm -f "$dir/launcher/gpubox"  # linked last: the link map is its (every link writes one)
    cmake --build "$dir" -j"$(nproc)" --target gpubox >/dev/null
    install -m 0755 "$dir/launcher/gpubox" "$W/gpubox"
}

cc -O2 -c "$H/mark.c" -o "$W/mark.o"
cc -c "$H/mcount.S" -o "$W/mcount.o"
for type in $BUILD_TYPES; do
    echo "hot-text.sh: $type: the profiling build" >&2
    rm -f "$W/work/marks"
    build "$W/pg-$type" -DCMAKE_BUILD_TYPE="$type" -DGPUBOX_HOT_TEXT=OFF \
        -DCMAKE_CXX_COMPILER="$H/gxx-pg" -DCMAKE_CXX_FLAGS=-ffunction-sections \
        -DCMAKE_EXE_LINKER_FLAGS="$W/mark.o $W/mcount.o -Wl,-Map=$W/gpubox.map"
    [ -d "$W/host" ] || "$W/pg-$type/tests/fake-gpu-host" "$W/host" --gpus 2 >/dev/null
    runs
    python3 "$H/layout.py" marked "$W/gpubox.map" "$W/work/marks" "$W/patterns"
    for ((r = 1; r <= ROUNDS; r++)); do
        echo "hot-text.sh: $type: round $r of $ROUNDS" >&2
        python3 "$H/layout.py" write "$W/patterns" "$W/hot.ld"
        build "$W/laid-$type" -DCMAKE_BUILD_TYPE="$type" -DGPUBOX_HOT_TEXT_LD="$W/hot.ld" \
            -DCMAKE_EXE_LINKER_FLAGS="-Wl,-Map=$W/gpubox.map"
        perf record -q -e page-faults -c 1 -a -d -o "$W/faults.data" -- \
            bash -c "$(declare -f runs); $(declare -p W AS ALL); runs; runs" >/dev/null
        perf script -i "$W/faults.data" -F comm,pid,addr 2>/dev/null >"$W/faults"
        python3 "$H/layout.py" faulted "$W/gpubox.map" "$W/faults" gpubox,isolate "$W/patterns"
    done
done
python3 "$H/layout.py" write "$W/patterns" "$OUT"
echo "hot-text.sh: $(grep -c '^    \*' "$OUT") sections in $OUT" >&2
