#!/usr/bin/env bash
# Multi-rank jobs under a real Slurm (Debian 12's slurm-wlm 22.05, one node, pmix v4 wire-up)
# with Debian's Open MPI 4.1: `srun -n 4 --mpi=pmix gpubox run ROOTFS ./mpi_test`, no other
# flag, finds its 4 ranks over PMIx and talks over shared memory (OMPI_MCA_btl=self,vader
# forced), in a rootfs that has Open MPI and in a minimal one with the MPI libraries bound in;
# an NCCL-like 4-rank program (abstract unix sockets, /dev/shm, pidfd_getfd, process_vm_readv);
# Debian's MPICH over PMI-2 (srun --mpi=pmi2: PMI_FD); the variables torchrun's ranks expect;
# --gpu slurm in a step; --no-step's warning; kill -9 of one rank and scancel leave nothing
# behind. Slurm, munged and the state are the test's own (slurm_lib.sh).
export E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
command -v mpicc >/dev/null || skip "mpicc is missing (apt-get install openmpi-bin libopenmpi-dev)"
# The programs, built first (into $WORK, then the jobs' directory).
mpicc -O2 -o "$WORK/mpi_test" "$E2E_DIR/mpi_test.c" || { echo "Bail out! mpicc failed"; exit 1; }
cc -O2 -Wall -o "$WORK/nccl_like" "$E2E_DIR/nccl_like.c" || { echo "Bail out! cc nccl_like.c failed"; exit 1; }
# Debian's MPICH (4.0, ch4:ucx, its own PMI client): PMI-2's inherited socket (PMI_FD).
mpich=0
if command -v mpicc.mpich >/dev/null; then
    mpicc.mpich -O2 -o "$WORK/mpi_mpich" "$E2E_DIR/mpi_test.c" && mpich=1 || { echo "Bail out! mpicc.mpich failed"; exit 1; }
fi
. "$(dirname "$0")/slurm_lib.sh"
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no mpi/pmix plugin (srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n' ' '))"

# The job directory is the submit directory and the working one.
install -o 65534 -g 65534 "$WORK/mpi_test" "$WORK/nccl_like" "$J/"
[ $mpich = 1 ] && install -o 65534 -g 65534 "$WORK/mpi_mpich" "$J/"
# A rootfs with Open MPI: the host's own tree, read-only (gpubox binds a root with mounts below).
FULL=/
# A minimal one (busybox) with the MPI libraries bound in from the host.
libs=(--ro-bind /usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu --ro-bind /lib64:/lib64
      --ro-bind /usr/share/openmpi:/usr/share/openmpi --ro-bind /etc/openmpi:/etc/openmpi)
STATE=$T/steps  # GPUBOX_STEP_DIR: where the steps' sandboxes meet, uid 65534's
mkdir -m 0700 "$STATE" && chown 65534:65534 "$STATE"
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1  # shared memory only: no TCP fallback
run_step() {  # SRUN-ARGS... -- GPUBOX-RUN-ARGS...: $out, $rc
    local s=()
    while [ "$1" != -- ]; do s+=("$1"); shift; done
    shift
    out=$(as_nobody env GPUBOX_STEP_DIR="$STATE" OMPI_MCA_btl="$OMPI_MCA_btl" OMPI_MCA_pml="$OMPI_MCA_pml" \
        timeout 120 srun "${s[@]}" "$G" run "$@" 2>&1)
    rc=$?
}
ranks_ok() {  # DESC: ranks 0..3 of 4, right sums, intact messages, rank 0's verdict
    local got
    got=$(grep -o '^rank [0-9] of [0-9]' <<<"$out" | sort | tr '\n' ' ')
    expect_eq "$1: ranks 0..3 of 4" "$got" "rank 0 of 4 rank 1 of 4 rank 2 of 4 rank 3 of 4 "
    expect_eq "$1: 4 right sums and intact 1 MiB messages" \
        "$(grep -c '^rank [0-9]: allreduce 10 right, 1 MiB from [0-9] intact$' <<<"$out")" 4
    expect_match "$1: rank 0 says ok, exit 0" "$rc:$out" '^0:(.|'$'\n'')*mpi_test: ok'
    [ "$rc" = 0 ] || { echo "# $(tr '\n' '|' <<<"$out" | cut -c1-1500)"; tail -30 "$T/slurmd-$NODE.log" | sed 's/^/# slurmd: /'; }
}

# Slurm's first step on a fresh node sometimes aborts at launch (seen under load): a warm-up.
for _ in 1 2 3; do as_nobody srun -n 1 --mpi=pmix true 2>/dev/null && break; sleep 1; done
run_step -n 4 --mpi=pmix -- "$FULL" ./mpi_test
ranks_ok "srun -n 4 --mpi=pmix gpubox run / ./mpi_test (vader forced)"
run_step -n 4 --mpi=pmix -- "${libs[@]}" "$R" ./mpi_test
ranks_ok "... in a minimal rootfs with the MPI libraries bound in"
if [ $mpich = 1 ]; then
    run_step -n 4 --mpi=pmi2 -- "$FULL" ./mpi_mpich
    ranks_ok "MPICH, srun --mpi=pmi2 (PMI_FD kept open)"
elif must_work; then
    not_ok "MPICH: mpicc.mpich is missing (apt-get install mpich libmpich-dev)"
else
    echo "# skip MPICH: mpicc.mpich is missing"
fi
run_step -n 4 --mpi=pmix -- "$FULL" sh -c 'readlink /proc/self/ns/pid /proc/self/ns/ipc /proc/self/ns/mnt; echo cwd=$(pwd)'
[ "$rc" = 0 ] || echo "# $(tr '\n' '|' <<<"$out" | cut -c1-1500)"
expect_eq "the 4 tasks share one pid, IPC and mount namespace" \
    "$(grep -cE '^(pid|ipc|mnt):\[' <<<"$out"):$(grep -E '^(pid|ipc|mnt):\[' <<<"$out" | sort -u | wc -l)" "12:3"
expect_eq "... and start in the submit directory" "$(grep -c "^cwd=$J\$" <<<"$out")" 4
host_pidns=$(readlink /proc/self/ns/pid)
expect_no_match "... which is not the host's pid namespace" "$out" "^$host_pidns\$"

run_step -n 4 -- "$FULL" ./nccl_like
expect_eq "NCCL-like: abstract sockets, /dev/shm, pidfd_getfd, process_vm_readv between 4 ranks" \
    "$rc:$(grep -c '^nccl_like rank [0-3]: ok$' <<<"$out")" "0:4"
[ "$rc" = 0 ] || echo "# $(tr '\n' '|' <<<"$out" | cut -c1-1500)"

# --gpu slurm in a step: the keeper plans the step's GPUs (SLURM_STEP_GPUS) for the shared
# sandbox, and every task sees them (simulated host; per-task binding is not mapped yet).
out=$(as_nobody env GPUBOX_STEP_DIR="$STATE" srun -n 2 --gres=gpu:2 bash -c 'echo "gpus=$SLURM_STEP_GPUS"; '"$G"' run --driver-root '"$H"' --gpu slurm '"$R"' nvidia-smi -L' 2>&1)
m=$(sed -n 's/^gpus=//p' <<<"$out" | sort -u)
want=""
for x in ${m//,/ }; do want+="${UUID_OF[$x]} "; done
expect_eq "--gpu slurm in a 2-task step: both tasks see the step's 2 GPUs ($m)" \
    "$(grep -o 'GPU-[0-9a-f-]*' <<<"$out" | sort | tr '\n' ' ')" \
    "$(for u in $want; do echo "$u"; echo "$u"; done | sort | tr '\n' ' ')"
# Per-task binding (--gpus-per-task=1): each task's CUDA devices are its own GPU, the one Slurm
# bound to it (with ConstrainDevices=yes the one its device cgroup lets it open: Slurm 22.05
# writes the step's first GPU into every task's SLURM_STEP_GPUS then), by UUID, and the shared
# sandbox holds the nodes of the node's GPUs (a peer's for CUDA IPC, where the cgroup allows it).
out=$(as_nobody env GPUBOX_STEP_DIR="$STATE" srun -n 2 --gpus-per-task=1 bash -c 'own=; for i in 0 1 2 3; do [ -w '"$H"'/dev/nvidia$i ] && own+=$i; done; [ ${#own} = 1 ] || own=$SLURM_STEP_GPUS; echo "task$SLURM_PROCID own=$own"; '"$G"' run --driver-root '"$H"' --gpu slurm '"$R"' sh -c "echo task$SLURM_PROCID cvd=\$CUDA_VISIBLE_DEVICES nodes=\$(ls /dev | grep -c ^nvidia[0-9])"' 2>&1)
want="" got=""
for t in 0 1; do
    o=$(sed -n "s/^task$t own=//p" <<<"$out")
    want+="task$t cvd=${UUID_OF[$o]:-?} "
    got+="$(grep -o "^task$t cvd=[^ ]*" <<<"$out") "
done
expect_eq "--gpus-per-task=1 in a 2-task step: each task's CUDA_VISIBLE_DEVICES is its own GPU's UUID" "$got" "$want"
expect_eq "... and both see the node's 4 GPU nodes in the shared /dev" "$(grep -o 'nodes=[0-9]*' <<<"$out" | tr '\n' ' ')" "nodes=4 nodes=4 "
[ "$(grep -c cvd=GPU- <<<"$out")" = 2 ] || echo "# $(tr '\n' '|' <<<"$out" | cut -c1-1500)"
out=$(as_nobody srun -n 2 --gpus-per-task=1 bash -c 'own=; for i in 0 1 2 3; do [ -w '"$H"'/dev/nvidia$i ] && own+=$i; done; [ ${#own} = 1 ] || own=$SLURM_STEP_GPUS; echo "task$SLURM_PROCID own=$own"; '"$G"' run --no-step --driver-root '"$H"' --gpu slurm '"$R"' nvidia-smi -L | sed "s/^/task$SLURM_PROCID /"' 2>&1)
want="" got=""
for t in 0 1; do
    o=$(sed -n "s/^task$t own=//p" <<<"$out")
    want+="task$t ${UUID_OF[$o]:-?} "
    got+="$(grep "^task$t GPU" <<<"$out" | grep -o "^task$t\|GPU-[0-9a-f-]*" | tr '\n' ' ')"
done
expect_eq "... and with --no-step, each task's private sandbox has its own GPU" "$got" "$want"
run_step -n 2 -N 1 -- "$R" sh -c 'echo "torch=$RANK/$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"'
expect_eq "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE from Slurm's variables" \
    "$(grep -o 'torch=[^ ]* local=[^ ]*' <<<"$out" | sort | tr '\n' ' ')" "torch=0/2 local=0/2 torch=1/2 local=1/2 "
expect_match "... MASTER_ADDR and MASTER_PORT too" "$out" '^torch=0/2 .* master=[^:]+:[0-9]+$'

run_step -n 2 -- --no-step "$R" sh -c 'echo "rank=${SLURM_PROCID:-none}"'
expect_eq "--no-step: two private sandboxes, no wire-up passed" "$rc:$(grep -c '^rank=none$' <<<"$out")" "0:2"
expect_match "... and a one-line warning that the ranks will not find each other" "$out" \
    '^gpubox: warning: --no-step: .*(tasks|PMI).*will not find each other'

# --- kill -9 of one rank's gpubox: the others go on; scancel then leaves nothing ---
cat >"$J/kill.sh" <<EOF2
#!/bin/bash
export GPUBOX_STEP_DIR=$STATE
srun -n 4 $G run $R sh -c 'echo started \$SLURM_PROCID; exec sleep ${S}21'
EOF2
id=$(as_nobody sbatch --parsable -n 4 -o "$J/kill.out" "$J/kill.sh")
four_started() { [ "$(leftovers "^sleep ${S}21" | wc -l)" = 4 ]; }
wait_until 120 four_started || echo "# kill.out: $(tr '\n' '|' <"$J/kill.out")"
# The victim: one task's gpubox, the parent of its workload's parent (the task's init).
w=$(leftovers "^sleep ${S}21" | head -1)
t=$(ps -o ppid= -p "$w" | tr -d ' ')
victim=$(ps -o ppid= -p "$t" | tr -d ' ')
kill -9 $victim
sleep 1
expect_eq "after kill -9 of one task's gpubox, the other 3 workloads run on" "$(leftovers "^sleep ${S}21" | wc -l)" 3
scancel "$id"
wait_until 120 job_gone "$id"
wait_until 30 eval '[ -z "$(leftovers "^sleep ${S}21")$(leftovers "$G run")" ]'
expect_eq "... and after scancel nothing is left" "$(leftovers "^sleep ${S}21")$(leftovers "$G run")" ""
expect_eq "... nor in the rendezvous directory" "$(ls -A "$STATE" 2>/dev/null | grep -v '\.lock$')" ""

cat >"$J/cancel.sh" <<EOF2
#!/bin/bash
export GPUBOX_STEP_DIR=$STATE
srun -n 4 --mpi=pmix $G run $R sh -c 'echo started; exec sleep ${S}22'
EOF2
id=$(as_nobody sbatch --parsable -n 4 -o "$J/cancel.out" "$J/cancel.sh")
four() { [ "$(grep -c '^started' "$J/cancel.out" 2>/dev/null)" = 4 ]; }
wait_until 120 four
scancel "$id"
wait_until 120 job_gone "$id"
wait_until 30 eval '[ -z "$(leftovers "^sleep ${S}22")$(leftovers "$G run")" ]'
expect_eq "scancel of a 4-task step: nothing left" "$(leftovers "^sleep ${S}22")$(leftovers "$G run")" ""
expect_eq "... nor in the rendezvous directory" "$(ls -A "$STATE" 2>/dev/null)" ""
finish
