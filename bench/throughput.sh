#!/usr/bin/env bash
# Autograder throughput: N short submissions back to back and 2 at a time, with limits and a
# verdict file on, gpubox vs bwrap + timeout + prlimit doing the same job. Runs per second.
. "$(dirname "$0")/common.sh"
bench_setup "$@"
N=${N:-300}
R=$OUTDIR/rootfs
"$GPUBOX" rootfs create "$R" >/dev/null
mkdir -p "$OUTDIR/meta"

gpubox_job() {
    "$GPUBOX" run --wall-time-limit 5 --time-limit 2 --memory-limit 256M --pids-limit 64 \
        --meta "$OUTDIR/meta/$1.json" "$R" /bin/true
}
bwrap_job() {
    # The same limits the classic way, less the process limit: RLIMIT_NPROC outside a user
    # namespace counts all of the user's processes, so bwrap itself could not fork. The exit
    # status is the only verdict.
    timeout -s KILL 5 prlimit --cpu=2 --data=$((512 << 20)) -- \
        bwrap --unshare-all --die-with-parent --new-session --ro-bind "$R" / --proc /proc --dev /dev \
        --tmpfs /tmp --tmpfs /run /bin/true
    echo "exit=$?" >"$OUTDIR/meta/$1.txt"
}
export -f gpubox_job bwrap_job
export GPUBOX R OUTDIR

rate() {  # rate PARALLEL JOB
    local s e
    s=$(date +%s%N)
    seq "$N" | xargs -P "$1" -I{} bash -c "$2 {}"
    e=$(date +%s%N)
    awk -v n="$N" -v ns=$((e - s)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }'
}

echo "machine: $(nproc) cores; $N runs of /bin/true with wall/CPU/memory/pids limits and a verdict file"
printf '%-44s %10s %10s\n' "" "serial" "2 at once"
g1=$(rate 1 gpubox_job); g2=$(rate 2 gpubox_job)
b1=$(rate 1 bwrap_job); b2=$(rate 2 bwrap_job)
printf '%-44s %10s %10s\n' "gpubox (runs/s)" "$g1" "$g2"
printf '%-44s %10s %10s\n' "bwrap + timeout + prlimit (runs/s)" "$b1" "$b2"
printf '%-44s %10s %10s\n' "ratio gpubox / bwrap" "$(ratio "$g1" "$b1")" "$(ratio "$g2" "$b2")"
ok=$(grep -l '"status": "OK"' "$OUTDIR"/meta/*.json | wc -l)
echo "gpubox verdicts written: $(ls "$OUTDIR"/meta/*.json | wc -l), status OK: $ok"
