# Sourced by the Slurm tests after lib.sh (with E2E_AS_ROOT=1): starts a real single-node Slurm
# (Debian 12's slurm-wlm 22.05) as root, with its own munged, ports, state and config in a temp
# dir T, and stops it at exit; jobs are submitted as uid 65534 (as_nobody). gres.conf names a
# simulated GPU host H's /dev/nvidia[0-3] (minors out of PCI order), and task/cgroup with
# ConstrainDevices=yes (cgroup v1 devices) fences each job to its own. Sets G (gpubox), R (a
# rootfs of uid 65534's), J (the jobs' directory, uid 65534's), NODE, SLURM_CONF, cgv1, UUID_OF
# (minor -> UUID) and S (see below).
bail() { echo "Bail out! $1"; exit 1; }
must_work() { [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; }
skip() { if must_work; then echo "Bail out! $1"; exit 1; fi; echo "1..0 # SKIP $1"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (it starts slurmctld, slurmd and munged)"
for b in slurmctld slurmd munged sbatch srun squeue scancel sinfo; do
    command -v "$b" >/dev/null || skip "$b is missing (apt-get install slurm-wlm munge)"
done

T=$(mktemp -d /tmp/gpubox-slurm.XXXXXX)
chmod 0755 "$T"
NODE=gpubox$RANDOM$$  # (random too: in another pid namespace the same pid may run a suite)
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
stop_all() {
    for p in slurmd slurmctld munged; do
        [ -s "$T/$p.pid" ] && kill "$(cat "$T/$p.pid")" 2>/dev/null
    done
    for p in slurmd slurmctld munged; do
        [ -s "$T/$p.pid" ] && wait_until 60 eval '! kill -0 "$(cat "$T/$p.pid")" 2>/dev/null'
    done
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
mkdir -m 0755 "$T/jobs" "$T/munge" "$T/state" "$T/spool" && chown 65534:65534 "$T/jobs"
J=$T/jobs
# minor -> UUID, from gpubox list: "INDEX PCI nvidia MODEL... UUID /dev/nvidiaN"
declare -A UUID_OF
while read -r uuid node; do UUID_OF[${node#/dev/nvidia}]=$uuid; done < <("$G" list --driver-root "$H" | grep -o 'GPU-[0-9a-f-]* *\/dev\/nvidia[0-9]*')

# --- munge and Slurm, private to this test ---
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none && chmod 0400 "$T/munge/munge.key"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/sock" --pid-file="$T/munged.pid" \
    --log-file="$T/munge/log" --seed-file="$T/munge/seed" || skip "munged does not start: $(tail -1 "$T/munge/log")"
# Ports free now, not fixed ones, and a node name of its own (Slurm's cgroup v1 directories are
# named after it): another suite on this host (a fresh-root check, another checkout's) may run
# its own Slurm at the same time.
read -r ctld_port slurmd_port < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
cgv1=0
[ -d /sys/fs/cgroup/devices ] && [ -f /sys/fs/cgroup/devices/devices.deny ] && cgv1=1
cat >"$T/slurm.conf" <<EOF
ClusterName=gpubox
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=$([ $cgv1 = 1 ] && echo task/cgroup || echo task/none)
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
KillWait=10
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
NodeName=$NODE NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=16 RealMemory=1000 Gres=gpu:4 State=UNKNOWN
PartitionName=p Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=$NODE Name=gpu File=$H/dev/nvidia[0-3]" >"$T/gres.conf"
printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainDevices=yes\nConstrainCores=no\nConstrainRAMSpace=no\n' >"$T/cgroup.conf"
export SLURM_CONF=$T/slurm.conf
slurmctld -i || skip "slurmctld does not start: $(tail -3 "$T/slurmctld.log")"
slurmd -N "$NODE" || skip "slurmd does not start: $(tail -3 "$T/slurmd.log")"
node_idle() { sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix)'; }
wait_until 120 node_idle
sinfo -h -o %t | grep -qE '^(idle|mix)' || { echo "Bail out! the node is not idle: $(sinfo -h -o '%t %E'; tail -5 "$T/slurmd.log")"; exit 1; }
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
