#!/usr/bin/env bash
# --rdma against a simulated host with two InfiniBand HCAs (fake-gpu-host --hca --hca: sysfs
# entries as the kernel makes them, /dev/infiniband's nodes made by mknod, as root). The nodes
# have no driver behind them: libibverbs finds and lists the devices (ibv_devices, ibv_devinfo
# -l), opening one fails (ENXIO). Run as uid 65534 with the host's "/" as ROOTFS (Debian's
# ibverbs-utils). Checks: what /dev/infiniband holds inside (verbs and rdma_cm, not umad),
# discovery, RLIMIT_MEMLOCK left as the caller has it, step mode (automatic), the device cgroup
# check, no device.
export E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (mknod for the simulated HCA's nodes)"
command -v ibv_devices >/dev/null || skip "ibv_devices is missing (apt-get install ibverbs-utils)"

T=$(mktemp -d /tmp/gpubox-rdma.XXXXXX)
chmod 0755 "$T"
CG=""
cleanup() {
    [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
    rm -rf "$T" "$WORK"
}
trap cleanup EXIT
install -m 0755 "$GPUBOX" "$T/gpubox"
"$FAKE_GPU_HOST" "$T/host" --gpus 1 --hca --hca >/dev/null && "$FAKE_GPU_HOST" "$T/plain" --gpus 1 >/dev/null ||
    { echo "Bail out! fake-gpu-host failed"; exit 1; }
H=$T/host
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all)
# as_nobody ARGS...: gpubox ARGS as uid 65534; sets $rc, $out, $err.
as_nobody() {
    "${NOBODY[@]}" "$T/gpubox" "$@" >"$WORK/.out" 2>"$WORK/.err"
    rc=$?
    out=$(cat "$WORK/.out")
    err=$(cat "$WORK/.err")
}
chmod 0777 "$WORK"

as_nobody run -v --rdma --driver-root "$H" / sh -c 'ls /dev/infiniband | tr "\n" " "; echo; echo "SYSFS_PATH=$SYSFS_PATH"'
expect_eq "--rdma: /dev/infiniband holds the verbs nodes and rdma_cm, not umad0; SYSFS_PATH points to the simulated host's sysfs" \
    "$rc:$out" "0:rdma_cm uverbs0 uverbs1 "$'\n'"SYSFS_PATH=/run/gpubox/sys"
expect_match "... and says (-v) what it left out" "$err" 'rdma: left out /dev/infiniband/umad0'
expect_match "... and where the sysfs entries are" "$err" 'rdma: sysfs: 2 classes and 2 device directories under /run/gpubox/sys'
expect_match "... per HCA" "$err" 'rdma: mlx5_1 \(uverbs1, /sys/devices/pci0000:00/0000:5f:00.0\)'

as_nobody run --rdma --driver-root "$H" / ibv_devices
expect_match "ibv_devices inside lists both HCAs with their GUIDs" "$rc:$out" \
    '^0:.*device.*node GUID'$'\n''.*'$'\n''[[:space:]]*mlx5_0[[:space:]]+0c42a10300103456'$'\n''[[:space:]]*mlx5_1[[:space:]]+0c42a10300113456'
as_nobody run --rdma --driver-root "$H" / ibv_devinfo -l
expect_match "ibv_devinfo -l: 2 HCAs found" "$rc:$out" '^0:2 HCAs found:'
as_nobody run --rdma --driver-root "$H" / ibv_devinfo -d mlx5_0
expect_match "ibv_devinfo -d mlx5_0 finds the device and fails to open it (no driver behind the node)" \
    "$rc:$out$err" '^[^0].*Failed to open device'
as_nobody run --driver-root "$H" / sh -c 'ls /dev/infiniband 2>&1; ibv_devices'
expect_no_match "without --rdma: no /dev/infiniband, no device" "$out" 'mlx5|^uverbs'

# RLIMIT_MEMLOCK: verbs pin memory; gpubox leaves the caller's limit (as Slurm's
# PropagateResourceLimits or a site's limits.conf gives jobs: often unlimited; here the most
# this host allows, soft raised to hard, and a lower one).
hard=$(ulimit -H -l)
out=$(prlimit --memlock="$([ "$hard" = unlimited ] && echo unlimited || echo $((hard * 1024)))" "${NOBODY[@]}" \
    "$T/gpubox" run --rdma --driver-root "$H" / sh -c 'ulimit -l' 2>/dev/null)
expect_eq "RLIMIT_MEMLOCK is left as the caller has it (the hard limit, $hard)" "$out" "$hard"
out=$(prlimit --memlock=65536:131072 "${NOBODY[@]}" "$T/gpubox" run --rdma --driver-root "$H" / sh -c 'ulimit -l; ulimit -H -l' 2>/dev/null | tr '\n' ' ')
expect_eq "... and a finite one too (soft and hard)" "$out" "64 128 "

as_nobody cdi list --rdma
expect_match "--rdma is run's flag only (not cdi list's)" "$rc:$err" '^125:gpubox: cdi list: unknown option "--rdma"'
as_nobody run --rdma --driver-root "$T/plain" / true
expect_match "--rdma on a host without an HCA: exit 125 and why" "$rc:$err" \
    '^125:gpubox: --rdma: no RDMA device \(uverbs\*\) in /dev/infiniband'

# Step mode (forced here with a Slurm step's variables; test_slurm_multinode.sh runs real ones)
# hands the RDMA devices in without being asked, and on a host without any it does nothing.
mkdir -m 0700 "$T/steps" && chown 65534:65534 "$T/steps"
step() { (cd "$T/steps" && "${NOBODY[@]}" env GPUBOX_STEP_DIR="$T/steps" SLURM_JOB_ID="$1" SLURM_STEP_ID=0 \
    SLURMD_NODENAME=n1 "$T/gpubox" run --step --driver-root "$2" / sh -c 'ls /dev/infiniband 2>&1 | tr "\n" " "; ibv_devices 2>/dev/null | grep -c mlx5' 2>&1); }
expect_eq "step mode: the RDMA devices without --rdma, and libibverbs finds both HCAs" "$(step 77 "$H")" "rdma_cm uverbs0 uverbs1 2"
expect_match "step mode on a host without an HCA: none, no error" "$(step 78 "$T/plain")" "No such file or directory 0$"

# The device cgroup check: a cgroup v1 devices group that denies uverbs1.
if [ -f /sys/fs/cgroup/devices/devices.deny ]; then
    CG=/sys/fs/cgroup/devices/gpubox-rdma-$$
    mkdir "$CG" && echo 'c 231:193 rwm' >"$CG/devices.deny"
    out=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$CG" "${NOBODY[@]}" "$T/gpubox" run --rdma --driver-root "$H" / true 2>&1; echo "rc=$?")
    expect_match "a device cgroup that refuses uverbs1: exit 125, naming the cgroup and the node" "$out" \
        '^gpubox: --rdma: the device cgroup "[0-9]+:devices:/gpubox-rdma-[0-9]+" refuses /dev/infiniband/uverbs1'
    expect_match "... exit status 125" "$out" '^rc=125$'
else
    must_work && not_ok "cgroup v1 devices controller missing" || echo "# skip the device cgroup check: no cgroup v1 devices controller"
fi
finish
