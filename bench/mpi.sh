#!/usr/bin/env bash
# MPI under Slurm, bare vs gpubox, side by side: Debian 12's slurm-wlm 22.05 (one node, started
# here as root with its own munged, ports, state and config, as tests/e2e/test_slurm.sh does),
# Open MPI 4.1 with PMIx 4 (srun --mpi=pmix), jobs run as uid 65534, ROOTFS the host's "/".
#   - 8-byte and 1 MiB ping-pong (one-way latency) and 8-byte allreduce between 2 ranks on the
#     node (tests/e2e/mpi_ranks.c bench), ROUNDS rounds (default 7), bare and gpubox alternating;
#   - start-up of a 4-rank step (srun -n 4 ... mpi_ranks init: MPI_Init and MPI_Finalize),
#     STARTS pairs (default 30), bare and gpubox alternating (common.sh's pairs).
# Every srun is a step of one allocation (salloc -n 4), held for the whole run.
# Medians over the rounds, spread (min..max) and the gpubox/bare ratio.
# GPUBOX_MPI=step (default): `srun --mpi=pmix gpubox run / ...` with nothing else, the shared-
# memory transport forced (OMPI_MCA_btl=self,vader) on both sides: gpubox's step mode.
# GPUBOX_MPI=tcp: the only recipe that worked before step mode (issue #30): each task dumps its
# Slurm/PMIx environment into a file for --env-file, --share-net, the PMIx directories bound,
# and OMPI_MCA_btl=self,tcp inside (bare keeps vader: what the user gives up).
# GPUBOX=/path/to/gpubox: that binary (else the build in BUILD, made here as bench/common.sh does).
. "$(dirname "$0")/common.sh"
SLURM_LIB_FUNCTIONS=1 . "$TOP/tests/e2e/slurm_lib.sh"  # start_munge, slurm_conf, start_slurm...
[ "$(id -u)" = 0 ] || { echo "bench: run as root (it starts munged, slurmctld and slurmd)" >&2; exit 1; }
for b in slurmctld slurmd munged srun mpicc; do
    command -v "$b" >/dev/null || { echo "bench: $b is missing (bash .ci/install-deps.sh)" >&2; exit 1; }
done
MODE=${GPUBOX_MPI:-step}
ROUNDS=${ROUNDS:-7} STARTS=${STARTS:-30} ITERS=${ITERS:-20000}
bench_gpubox

T=$(mktemp -d /tmp/gpubox-bench-mpi.XXXXXX)
chmod 0755 "$T"
NODE=benchmpi$RANDOM
stop_all() {
    # The allocation and its steps first: a slurmstepd outlives a killed slurmd (seen: one left
    # running for an hour after a run).
    if [ -s "$T/slurmctld.pid" ]; then
        scancel --full $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
        for _ in $(seq 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
    fi
    stop_slurm
    rm -rf "$T"
}
trap stop_all EXIT
trap 'exit 143' TERM INT HUP  # (the EXIT trap then stops the daemons)
install -m 0755 "$GPUBOX" "$T/gpubox"
G=$T/gpubox
mkdir -m 0755 "$T/jobs" && chown 65534:65534 "$T/jobs"
J=$T/jobs
mpicc -O2 -o "$J/mpi_ranks" "$TOP/tests/e2e/mpi_ranks.c"

start_munge || { echo "bench: $slurm_err" >&2; exit 1; }
read -r ctld_port slurmd_port < <(free_ports 2)
slurm_conf localhost "$ctld_port" "$slurmd_port" TaskPlugin=task/none \
    "NodeName=$NODE NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN" \
    "PartitionName=p Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
export SLURM_CONF=$T/slurm.conf
start_slurm "$NODE" && slurm_idle 60 "$NODE" || { echo "bench: $slurm_err" >&2; exit 1; }

# The pre-step-mode recipe, per task: its environment into a file, the PMIx directories bound.
cat >"$J/tcp.sh" <<EOF
#!/bin/bash
f=$J/env.\$SLURM_STEP_ID.\$SLURM_PROCID
env | grep -E '^(SLURM|PMIX|PMI|OMPI)_' | grep -v '^OMPI_MCA_btl=' >"\$f"
echo OMPI_MCA_btl=self,tcp >>"\$f"
binds=()
for d in "\$PMIX_SERVER_TMPDIR" "\$PMIX_SYSTEM_TMPDIR" /tmp/spmix_appdir_\$(id -u)_\$SLURM_JOB_ID.\$SLURM_STEP_ID; do
    [ -d "\$d" ] && binds+=(--bind "\$d:\$d")
done
exec $G run --share-net --env-file "\$f" "\${binds[@]}" --bind $J:/mnt / /mnt/mpi_ranks "\$@"
EOF
chmod 0755 "$J/tcp.sh"
if [ "$MODE" = tcp ]; then
    boxed=("$J/tcp.sh")
else
    boxed=("$G" run --bind "$J:/mnt" / /mnt/mpi_ranks)
fi
# One allocation of 4 tasks, held for the whole run: every srun below is a step in it, so that
# start-up is a step's, not a job's (no scheduling, no waiting for the last job's release).
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups env SLURM_CONF="$SLURM_CONF")
JOB=$(cd "$J" && "${nobody[@]}" salloc -n 4 --no-shell 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
[ -n "$JOB" ] || { echo "bench: salloc failed" >&2; exit 1; }
# as_nobody ARGS...: srun ARGS as uid 65534 in that allocation, shared memory forced (the tcp
# recipe overrides it inside the sandbox).
as_nobody() {
    (cd "$J" && "${nobody[@]}" OMPI_MCA_btl=self,vader srun --jobid="$JOB" --mpi=pmix "$@")
}

echo "machine: $(nproc) cores, $(uname -r); gpubox $("$G" --version | cut -d' ' -f2); $(srun --version); Open MPI $(ompi_info --version 2>/dev/null | sed -n 's/^Open MPI v//p')"
echo "gpubox side: $([ "$MODE" = tcp ] && echo "the pre-step-mode recipe (--share-net, --env-file, btl self,tcp)" || echo "srun --mpi=pmix gpubox run / ... (step mode), btl self,vader")"
echo "bare side: srun --mpi=pmix ./mpi_ranks, btl self,vader; 2 ranks on one node, $ITERS iterations, $ROUNDS rounds"
: >"$T/bare" && : >"$T/boxed"
for ((r = 0; r < ROUNDS; r++)); do
    as_nobody -n 2 ./mpi_ranks bench "$ITERS" >>"$T/bare"
    as_nobody -n 2 "${boxed[@]}" bench "$ITERS" >>"$T/boxed"
done
# stats NAME FILE: "median min max" of NAME's values in FILE.
stats() {
    awk -v k="$1" '$1 == k { v[++n] = $2 }
        END { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j] < v[j - 1]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
              printf "%.3f %.3f %.3f\n", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2, v[1], v[n] }' "$2"
}
printf '%-26s %22s %22s %8s\n' "microseconds" "bare: median (min..max)" "gpubox: median (min..max)" "ratio"
for k in pingpong8 pingpong1m allreduce8; do
    read -r bm bl bh < <(stats "$k" "$T/bare")
    read -r gm gl gh < <(stats "$k" "$T/boxed")
    printf '%-26s %22s %22s %8s\n' "$k" "$bm ($bl..$bh)" "$gm ($gl..$gh)" "$(ratio "$gm" "$bm")"
done
read -r a b d q1 q3 < <(pairs "$STARTS" -- as_nobody -n 4 ./mpi_ranks init -- as_nobody -n 4 "${boxed[@]}" init)
echo "start-up, srun -n 4 mpi_ranks init, $STARTS interleaved pairs (ms): bare $a, gpubox $b, added $d median (quartiles $q1 to $q3)"
as_nobody -n 4 "${boxed[@]}" >"$T/check" 2>&1 || true
echo "check (gpubox, 4 ranks): $(grep -c 'ring ok' "$T/check") of 4 rings ok, $(grep -c 'of 4 on' "$T/check") ranks of 4 ($(grep -m1 -o 'rank 0 of [0-9]*' "$T/check" || echo none))"
