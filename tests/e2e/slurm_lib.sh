# Sourced by the Slurm tests after lib.sh (with E2E_AS_ROOT=1): starts a real single-node Slurm
# (Debian 12's slurm-wlm 22.05) as root, with its own munged, ports, state and config in a temp
# dir T, and stops it at exit; jobs are submitted as uid 65534 (as_nobody). gres.conf names a
# simulated GPU host H's /dev/nvidia[0-3] (minors out of PCI order), and task/cgroup with
# ConstrainDevices=yes (cgroup v1 devices) fences each job to its own. Sets G (gpubox), R (a
# rootfs of uid 65534's), J (the jobs' directory, uid 65534's), NODE, SLURM_CONF, cgv1, UUID_OF
# (minor -> UUID) and S (see below).
# The functions below serve this file's single node, test_slurm_multinode.sh's two nodes and
# bench/mpi.sh: each Slurm is private to a temp dir T (its munged, state, spool, pid and log files,
# slurmd's per node: $T/slurmd-NODE.{pid,log}, $T/spool-NODE). Sourced with
# SLURM_LIB_FUNCTIONS=1, this file defines them and starts nothing. On failure they return 1 with
# the reason in slurm_err.
# start_munge: a munged of T's own, its key new, its socket $T/munge/sock.
start_munge() {
    mkdir -m 0755 "$T/munge" &&
        dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none && chmod 0400 "$T/munge/munge.key" &&
        munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/sock" --pid-file="$T/munged.pid" \
            --log-file="$T/munge/log" --seed-file="$T/munge/seed" ||
        { slurm_err="munged does not start: $(tail -1 "$T/munge/log" 2>/dev/null)"; return 1; }
}
# free_ports N: N TCP ports of 127.0.0.1 free now, on one line.
free_ports() {
    python3 -c 'import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))' "$1"
}
# slurm_conf CTLD_HOST CTLD_PORT SLURMD_PORT LINE...: $T/slurm.conf, the settings every Slurm
# here shares, then each LINE (TaskPlugin, the nodes and the partition, and what else differs).
slurm_conf() {
    mkdir -p -m 0755 "$T/state"
    {
        cat <<EOF
ClusterName=gpubox
SlurmctldHost=$1
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$2
SlurmdPort=$3
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool-%n
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd-%n.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd-%n.log
ProctrackType=proctrack/linuxproc
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
KillWait=10
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
EOF
        shift 3
        printf '%s\n' "$@"
    } >"$T/slurm.conf"
}
# slurm_on NODE COMMAND...: runs COMMAND where NODE runs: here, on the host (a test whose nodes
# have namespaces of their own defines its own).
slurm_on() { shift; "$@"; }
# start_slurm NODE...: slurmctld where the first NODE runs, and a slurmd for each NODE.
start_slurm() {
    local n
    slurm_on "$1" slurmctld -i || { slurm_err="slurmctld does not start: $(tail -3 "$T/slurmctld.log")"; return 1; }
    for n; do
        mkdir -p -m 0755 "$T/spool-$n" && slurm_on "$n" slurmd -N "$n" ||
            { slurm_err="slurmd $n does not start: $(tail -3 "$T/slurmd-$n.log")"; return 1; }
    done
}
# slurm_idle SECONDS NODE...: until every NODE is idle (or mixed), as the first NODE's sinfo says.
slurm_idle() {
    local s=$1 i
    shift
    for ((i = 0; i < s * 10; i++)); do
        [ "$(slurm_on "$1" sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix)')" = $# ] && return 0
        sleep 0.1
    done
    slurm_err="the nodes are not idle: $(slurm_on "$1" sinfo -h -N -o '%N %t %E' 2>&1; tail -n 3 "$T"/slurmd-*.log)"
    return 1
}
# stop_slurm: stops the daemons that T's pid files name (slurmd's, slurmctld, munged), and waits
# until each has gone (up to a minute each).
stop_slurm() {
    local f p pids=() i
    for f in "$T"/slurmd-*.pid "$T/slurmctld.pid" "$T/munged.pid"; do
        [ -s "$f" ] && pids+=("$(cat "$f")")
    done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for ((i = 0; i < 600; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
}
[ "${SLURM_LIB_FUNCTIONS:-0}" = 1 ] && return 0

[ "$(id -u)" = 0 ] || skip "needs root (it starts slurmctld, slurmd and munged)"
for b in slurmctld slurmd munged sbatch srun squeue scancel sinfo; do
    command -v "$b" >/dev/null || skip "$b is missing (apt-get install slurm-wlm munge)"
done

T=$(mktemp -d /tmp/gpubox-slurm.XXXXXX)
chmod 0755 "$T"
NODE=gpubox$RANDOM$$  # (random too: in another pid namespace the same pid may run a suite)
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
stop_all() {
    stop_slurm
    # Slurm's cgroup v1 directories (slurmd removes the jobs' own; the top one stays).
    for c in /sys/fs/cgroup/*/slurm_"$NODE" /sys/fs/cgroup/*/slurm; do
        [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    rm -rf "$T" "$WORK"
}
trap stop_all EXIT

install -m 0755 "$GPUBOX" "$T/gpubox"
G=$T/gpubox
"$FAKE_GPU_HOST" "$T/host" --gpus 4 >/dev/null || { echo "Bail out! fake-gpu-host failed"; exit 1; }
H=$T/host
"$G" rootfs create "$T/rootfs" >/dev/null && chown -R 65534:65534 "$T/rootfs" || { echo "Bail out! rootfs"; exit 1; }
R=$T/rootfs
mkdir -m 0755 "$T/jobs" && chown 65534:65534 "$T/jobs"
J=$T/jobs
# minor -> UUID, from gpubox list: "INDEX PCI nvidia MODEL... UUID /dev/nvidiaN"
declare -A UUID_OF
while read -r uuid node; do UUID_OF[${node#/dev/nvidia}]=$uuid; done < <("$G" list --driver-root "$H" | grep -o 'GPU-[0-9a-f-]* *\/dev\/nvidia[0-9]*')

# --- munge and Slurm, private to this test ---
start_munge || skip "$slurm_err"
# Ports free now, not fixed ones, and a node name of its own (Slurm's cgroup v1 directories are
# named after it): another suite on this host (a fresh-root check, another checkout's) may run
# its own Slurm at the same time.
read -r ctld_port slurmd_port < <(free_ports 2)
cgv1=0
[ -d /sys/fs/cgroup/devices ] && [ -f /sys/fs/cgroup/devices/devices.deny ] && cgv1=1
slurm_conf localhost "$ctld_port" "$slurmd_port" \
    "TaskPlugin=$([ $cgv1 = 1 ] && echo task/cgroup || echo task/none)" GresTypes=gpu \
    "NodeName=$NODE NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=16 RealMemory=1000 Gres=gpu:4 State=UNKNOWN" \
    "PartitionName=p Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
echo "NodeName=$NODE Name=gpu File=$H/dev/nvidia[0-3]" >"$T/gres.conf"
printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainDevices=yes\nConstrainCores=no\nConstrainRAMSpace=no\n' >"$T/cgroup.conf"
export SLURM_CONF=$T/slurm.conf
start_slurm "$NODE" || skip "$slurm_err"
slurm_idle 120 "$NODE" || { echo "Bail out! $slurm_err"; exit 1; }
as_nobody() { (cd "$J" && "${NOBODY[@]}" env SLURM_CONF="$SLURM_CONF" "$@"); }
# wait_jobs SECONDS: until nobody's jobs are all gone from the queue.
no_jobs() { [ -z "$(squeue -h -u 65534 2>/dev/null)" ]; }
wait_jobs() { wait_until "$1" no_jobs; }
job_gone() { ! squeue -h -j "$1" 2>/dev/null | grep -q .; }
# The workloads sleep for ${S}NN seconds, S drawn per run, so that the leftover check matches
# this run's processes only, not another suite's on the same host (pgrep sees into every pid
# namespace below ours, a fresh-root check's included).
S=$((1000 + RANDOM % 9000))
left() { pgrep -f -- "$1" >/dev/null && echo "left: $(pgrep -af -- "$1")" || true; }
