#!/usr/bin/env bash
# Small frictions a new user meets, each answered in one line (and a hint where it helps), exit
# 125 where it is an error: a CUDA_VISIBLE_DEVICES without --gpu, the limit-kill lines in the
# units the user wrote, --fsize-limit's kill, --writable on a ROOTFS that is not the caller's,
# options after ROOTFS, docker's habits, `gpubox list` on a host without a driver.
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    # A ROOTFS of root's, which the unprivileged caller may read but not write.
    rr=$(mktemp -d /tmp/gpubox-e2e-frictions.XXXXXX) && chmod 0755 "$rr" &&
        "${GPUBOX:?}" rootfs create "$rr/R" >/dev/null ||
        { echo "Bail out! cannot make root's ROOTFS"; exit 1; }
    trap 'rm -rf "$rr"' EXIT
    export E2E_ROOTS_ROOTFS=$rr/R
fi
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
lines() { printf '%s\n' "$1" | grep -c .; }

# --- CUDA_VISIBLE_DEVICES set by a wrapper (Slurm, a job script), no --gpu ---
CUDA_VISIBLE_DEVICES=0,1 box run "$R" true
expect_eq "CUDA_VISIBLE_DEVICES without --gpu: the run goes on (exit 0)" "$rc" 0
expect_match "  a warning that it means no GPU here" "$err" \
    '^gpubox: warning: CUDA_VISIBLE_DEVICES=0,1 is set, but without --gpu the sandbox has no GPU$'
expect_match "  and a hint naming --gpu" "$err" '^gpubox: hint: .*--gpu'
expect_eq "  two lines" "$(lines "$err")" 2
CUDA_VISIBLE_DEVICES=0,1 box run --gpu none "$R" true
expect_eq "  --gpu none: no GPU meant, no warning" "$rc:$err" "0:"
CUDA_VISIBLE_DEVICES=0,1 box run --quiet "$R" true
expect_eq "  --quiet: no warning" "$rc:$err" "0:"
CUDA_VISIBLE_DEVICES=NoDevFiles box run "$R" true
expect_eq "  Slurm's NoDevFiles (no GPU in the job): no warning" "$rc:$err" "0:"

# --- limit kills in the user's units ---
box run --memory-limit 64M --wall-time-limit 10 "$R" probe membomb e2e-frictions
expect_match "memory kill: the line says 64M, as written" "$err" '^gpubox: .*memory limit 64M'
expect_no_match "  not in bytes" "$err" '67108864'
box run --stdout-limit 1K "$R" sh -c 'yes flood'
expect_match "stdout kill: the line says 1K" "$err" '^gpubox: killed: stdout limit 1K exceeded$'
M=$WORK/meta.json
box run --fsize-limit 1M --meta "$M" "$R" sh -c 'dd if=/dev/zero of=/tmp/big bs=1M count=4 2>/dev/null'
expect_eq "--fsize-limit exceeded: the writer's signal, 128 + SIGXFSZ" "$rc" 153
expect_match "  one line says so" "$err" '^gpubox: killed: file size limit 1M exceeded \(RLIMIT_FSIZE: SIGXFSZ\)$'
expect_eq "  one line" "$(lines "$err")" 1
expect_match "  the verdict names the limit" "$(cat "$M")" '"limit": "fsize"'
expect_match "  and says killed" "$(cat "$M")" '"killed": true'

# --- --writable on a ROOTFS the caller does not own ---
if [ -n "${E2E_ROOTS_ROOTFS:-}" ]; then
    box run --writable "$E2E_ROOTS_ROOTFS" sh -c 'echo x >/etc/motd'
    expect_eq "--writable on root's ROOTFS: exit 125, up front" "$rc" 125
    expect_match "  one line saying whose it is" "$err" \
        "^gpubox: run: --writable: ROOTFS \"$E2E_ROOTS_ROOTFS\" belongs to uid 0, not to you \(uid $(id -u)\)"
    expect_match "  and a hint" "$err" '^gpubox: hint: .*--overlay'
    expect_no_match "  not the program's own error" "$err" 'Permission denied'
else
    ok "--writable on root's ROOTFS # SKIP made as root"
fi

# --- options after ROOTFS ---
box run "$R" --gpu 0 true
expect_eq "run ROOTFS --gpu 0 CMD: exit 125" "$rc" 125
expect_match "  says options go before ROOTFS, with the command line meant" "$err" \
    "^gpubox: run: option \"--gpu\" after ROOTFS would be the command: options go before ROOTFS \(gpubox run --gpu 0 $R true\)$"
expect_eq "  one line" "$(lines "$err")" 1
box run "$R" -- --gpu
expect_eq "  after an explicit --, CMD is CMD (127: no such program)" "$rc" 127

# --- docker's habits ---
docker_habit() {  # ARGS... then: want in $want
    box run "$@" "$R" true
    expect_eq "run $1: exit 125" "$rc" 125
    expect_match "  did you mean" "$err" "$want"
    expect_eq "  one line" "$(lines "$err")" 1
}
want='^gpubox: run: unknown option "-it" \(docker.s\): not needed: .*terminal' docker_habit -it
want='^gpubox: run: unknown option "--rm" \(docker.s\): not needed: ' docker_habit --rm
want='^gpubox: run: unknown option "-e" \(docker.s\): did you mean --env K=V\?' docker_habit -e A=1
want='^gpubox: run: unknown option "--gpus" \(docker.s\): did you mean --gpu all\?' docker_habit --gpus all
want='^gpubox: run: unknown option "--volume" \(docker.s\): did you mean --bind /tmp:/mnt \(or --ro-bind\)\?' docker_habit --volume /tmp:/mnt
box run -v /tmp:/mnt "$R" true
expect_eq "run -v SRC:DST (docker's volume): exit 125" "$rc" 125
expect_match "  -v is gpubox's verbose flag: did you mean --bind" "$err" \
    '^gpubox: run: -v is gpubox.s "more output"; did you mean --bind /tmp:/mnt\?'

# --- gpubox list without a driver ---
mkdir "$WORK/nodriver"
box list --driver-root "$WORK/nodriver"
expect_eq "list without a driver: exit 0" "$rc" 0
expect_eq "  no empty table" "$(printf '%s\n' "$out" | grep -c INDEX)" 0
expect_match "  one line that says so, and what to check" "$out$err" 'no GPU driver'
expect_eq "  one line" "$(lines "$out$err")" 1
finish
