#!/usr/bin/env bash
# A judge's loop, isolate's way: --init once, N runs of a tiny static program with limits and a
# meta file, --cleanup; through (a) gpubox's isolate mode and (b) `gpubox run`, both as uid
# 65534, and (c) isolate itself as a peer, as root, where ISOLATE names a binary of it.
#
#   sudo bash bench/judge.sh                       # (a) and (b)
#   sudo ISOLATE=/path/isolate ISOLATE_CONFIG=/path/isolate.cf bash bench/judge.sh
#   sudo PAR=2 GPUBOX=/path/gpubox ... bash bench/judge.sh  # two judges at once; a given binary
#
# ISOLATE is built by you from ioi/isolate's source (`make CONFIG=<file> isolate`), outside this
# repository; ISOLATE_CONFIG is the <file> it was built with: this script writes it, pointing
# isolate's box and lock roots at its temp dir (no --cg: it needs a cgroup v2 of its own).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build-bench}
N=${N:-300}
[ "$(id -u)" = 0 ] || { echo "judge.sh: run as root (isolate needs it; gpubox is measured as uid 65534)" >&2; exit 1; }
# GPUBOX=path: that binary as it is (another build, an older one) instead of building one.
if [ -z "${GPUBOX:-}" ]; then
    cmake -S "$TOP" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target gpubox >/dev/null
    GPUBOX=$BUILD/launcher/gpubox
fi
W=$(mktemp -d /tmp/gpubox-judge.XXXXXX)
# isolate's config is written below, pointing into $W: given back as it was at the end, or any
# later isolate run would make $W's box and lock roots again (a temp dir left behind).
trap '[ -f "$W/isolate.cf.before" ] && cat "$W/isolate.cf.before" >"$ISOLATE_CONFIG"; rm -rf "$W"' EXIT
chmod 0755 "$W"
install -m 0755 "$GPUBOX" "$W/gpubox"
ln -s gpubox "$W/isolate"
printf 'int main(void) { return 0; }\n' >"$W/tiny.c"
gcc -static -O2 -o "$W/tiny" "$W/tiny.c"
mkdir -p "$W/work" "$W/rootfs" && cp "$W/tiny" "$W/rootfs/tiny" && chown -R 65534:65534 "$W/work"
LIMITS=(-t 1 -w 5 -m 262144)  # isolate's units: seconds, KiB

# The judge's loop with ISO as isolate; prints runs per second of the whole loop.
judge_loop() {  # judge_loop ISOLATE-BINARY META-DIR [BOX]
    local iso=$1 meta=$2 b=${3:-0} s e box
    s=$(date +%s%N)
    box=$("$iso" -b "$b" --init)
    cp "$W/tiny" "$box/box/tiny"
    for i in $(seq "$N"); do "$iso" -b "$b" -s -M "$meta/$b-$i" "${LIMITS[@]}" --run -- ./tiny; done
    "$iso" -b "$b" --cleanup
    e=$(date +%s%N)
    awk -v n="$N" -v ns=$((e - s)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }'
}
run_loop() {  # gpubox run, the same limits in its terms, an isolate meta file [LOOP [MEMORY-OPTION]]
    local s e k=${1:-0} mem=${2:---as-limit} limits
    limits=(--time-limit 1 --wall-time-limit 5 "$mem" 256M --pids-limit 1)
    [ "$mem" = none ] && limits=()  # (e): the same run without limits
    s=$(date +%s%N)
    for i in $(seq "$N"); do
        "$W/gpubox" run "${limits[@]}" --read-only \
            --meta "$W/work/run-$k-$i" --meta-format isolate "$W/rootfs" /tiny
    done
    e=$(date +%s%N)
    awk -v n="$N" -v ns=$((e - s)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }'
}
export -f judge_loop run_loop
export W N LIMITS_STR="${LIMITS[*]}"
as_nobody() {  # in a directory of its own: the checkout may be where uid 65534 cannot go
    (cd "$W/work" && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all env -u XDG_RUNTIME_DIR \
        GPUBOX_ISOLATE_ROOT="$W/work/boxes" W="$W" N="$N" bash -c "LIMITS=($LIMITS_STR); $1")
}

# PAR=2: two judges at once, each its own box (or loop), N runs each; runs/s summed.
PAR=${PAR:-1}
par() {  # par COMMAND-WITH-$k: PAR copies at once, the sum of what they print
    local k out=() pids=() sum=0
    for ((k = 0; k < PAR; k++)); do
        out+=("$W/par-$k")
        (eval "$1") >"$W/par-$k" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for f in "${out[@]}"; do sum=$((sum + $(cat "$f"))); done
    echo "$sum"
}
echo "machine: $(nproc) cores, $(uname -r); $N runs of a static no-op with -t 1 -w 5 -m 262144 and -M, $PAR at a time"
a=$(par 'as_nobody "judge_loop \"\$W/isolate\" \"\$W/work\" $k"')
b=$(par 'as_nobody "run_loop $k"')
d=$(par 'as_nobody "run_loop $k --memory-limit"')
e=$(par 'as_nobody "run_loop $k none"')
c=""
if [ -n "${ISOLATE:-}" ]; then
    : "${ISOLATE_CONFIG:?set ISOLATE_CONFIG to the config path ISOLATE was built with}"
    [ -f "$ISOLATE_CONFIG" ] && cp "$ISOLATE_CONFIG" "$W/isolate.cf.before"
    printf 'box_root = %s\nlock_root = %s\ncg_root = /sys/fs/cgroup\nfirst_uid = 60000\nfirst_gid = 60000\nnum_boxes = 100\n' \
        "$W/iso/boxes" "$W/iso/locks" >"$ISOLATE_CONFIG"
    mkdir -p "$W/iso/meta"
    c=$(par 'judge_loop "$ISOLATE" "$W/iso/meta" $k')
fi
printf '%-52s %8s %8s\n' "" "runs/s" "ratio"
printf '%-52s %8s %8s\n' "(a) gpubox isolate mode, uid 65534" "$a" "${c:+$(awk -v x="$a" -v y="$c" 'BEGIN { printf "%.2f", x / y }')}"
printf '%-52s %8s %8s\n' "(b) gpubox run --meta-format isolate, uid 65534" "$b" "${c:+$(awk -v x="$b" -v y="$c" 'BEGIN { printf "%.2f", x / y }')}"
printf '%-52s %8s %8s\n' "(d) as (b), --memory-limit 256M (no cgroup)" "$d" "${c:+$(awk -v x="$d" -v y="$c" 'BEGIN { printf "%.2f", x / y }')}"
printf '%-52s %8s %8s\n' "(e) as (b), no limits" "$e" "${c:+$(awk -v x="$e" -v y="$c" 'BEGIN { printf "%.2f", x / y }')}"
[ -n "$c" ] && printf '%-52s %8s %8s\n' "(c) isolate $("$ISOLATE" --version | head -1 | awk '{print $NF}'), root, no --cg" "$c" "1.00"
echo "ratio: runs/s over isolate's"
