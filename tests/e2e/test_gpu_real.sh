#!/usr/bin/env bash
# On a host with a real NVIDIA GPU: one GPU inside, and it is host GPU 0. Skipped (77) elsewhere,
# the only skip allowed in CI (which has no GPU).
. "$(dirname "$0")/lib.sh"
if [ ! -e /dev/nvidiactl ] || ! command -v nvidia-smi >/dev/null; then
    echo "1..0 # SKIP no NVIDIA GPU on this host"
    exit 77
fi
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
box run --gpu 0 "$R" nvidia-smi -L
expect_eq "nvidia-smi -L inside lists exactly one GPU" "$(printf '%s\n' "$out" | grep -c '^GPU ')" 1
expect_match "it is host GPU 0" "$out" "$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)"
box run --gpu 0 "$R" sh -c 'ls /proc/driver/nvidia/gpus | wc -l'
expect_eq "one procfs GPU entry" "$out" 1
# The image holds no driver: CUDA and OpenCL inside reach the host's, as a program would.
install -m 0755 "${GPUPROBE:?set GPUPROBE to the gpuprobe binary}" "$R/usr/bin/gpuprobe"
box run --gpu 0 "$R" gpuprobe
expect_match "cuInit against the host driver succeeds" "$out" '^cuInit=0$'
expect_match "CUDA sees exactly one device" "$out" '^devices=1$'
expect_match "NVML reports the host's driver version" "$out" "^nvml_driver_version=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0)\$"
if /sbin/ldconfig -p | grep -q 'libnvidia-opencl\.so\.1 '; then
    box run --gpu 0 "$R" sh -c 'gpuprobe "$(cat /etc/OpenCL/vendors/nvidia.icd)"'
    expect_eq "OpenCL's vendor file names the host's libnvidia-opencl, and it loads" "$rc:$out" "0:libnvidia-opencl.so.1=ok"
fi
finish
