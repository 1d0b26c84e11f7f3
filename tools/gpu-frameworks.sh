#!/usr/bin/env bash
# gpu-frameworks.sh BINDIR [OUTDIR]: on a host with a real NVIDIA GPU, as root, what gpubox must
# do there, each judged by what a user sees: ../shared/gpu-check.sh (or $GPU_CHECK), the suite's
# test_gpu_real.sh, then the frameworks users run (tools/gpu_frameworks.py: PyTorch with 4
# DataLoader workers under a memory limit, a PyTorch process past one, NCCL, Triton, JAX, CuPy)
# under `gpubox run --gpu 0 /` as an unprivileged user, each inside a cgroup v2 made here as an
# outside meter (memory.peak, cpu.stat); a CDI spec generated on this host and run from; doctor,
# list; and the start-up's median with and without --gpu 0. Lines PASS/FAIL, a summary, and the
# logs (dev.log, fw.txt, metas.txt, doctor.txt, nvidia.yaml, gpu-check.log) in OUTDIR.
#
# BINDIR holds gpubox, gpubox-nvml, probe, gpuprobe and fake-gpu-host (stripped copies from a
# build: cmake --build build; strip -o BINDIR/NAME build/...). Python: $PYTHON, else python3.
set -u
B=$(cd "${1:?usage: gpu-frameworks.sh BINDIR [OUTDIR]}" && pwd)
T=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-${OUT:-./gpu-frameworks-out}}
mkdir -p "$OUT"
log=$OUT/dev.log
: >"$log"
pass=0 fail=0
say() { echo "$*" | tee -a "$log"; }
verdict() { # verdict OK DESC
    if [ "$1" = 0 ]; then say "PASS $2"; pass=$((pass + 1)); else say "FAIL $2"; fail=$((fail + 1)); fi
}
{ date; uname -r; nvidia-smi -L; cat /proc/driver/nvidia/version
  nvidia-smi --query-gpu=mig.mode.current --format=csv; ls -l /dev/nvidia*; nproc; } >>"$log" 2>&1

check=${GPU_CHECK:-$T/../shared/gpu-check.sh}
[ -f "$check" ] || check=$B/gpu-check.sh
if [ -f "$check" ]; then
    say "== gpu-check.sh"
    timeout 200 bash "$check" "$B/gpubox" "$OUT" 2>&1 | tail -12 | tee -a "$log"
    verdict "${PIPESTATUS[0]}" "gpu-check.sh"
fi
say "== test_gpu_real.sh"
if [ -x /bin/busybox ]; then
    GPUBOX=$B/gpubox PROBE=$B/probe GPUPROBE=$B/gpuprobe FAKE_GPU_HOST=$B/fake-gpu-host \
        GPUBOX_TESTS_MUST_WORK=1 timeout 120 bash "$T/tests/e2e/test_gpu_real.sh" 2>&1 | tee -a "$log" | tail -3
    verdict "${PIPESTATUS[0]}" "test_gpu_real.sh"
else
    say "SKIP test_gpu_real.sh: no /bin/busybox (its ROOTFS is made by gpubox rootfs create)"
fi

# An unprivileged user, and a folder of its own outside /tmp (the sandbox's /tmp is its own).
user=gpuboxfw
id "$user" >/dev/null 2>&1 || useradd -M -s /bin/sh "$user"
U=$(id -u "$user")
W=$(mktemp -d /var/lib/gpubox-fw.XXXXXX)
chmod 755 "$W"
install -m 0755 "$B/gpubox" "$B/gpubox-nvml" "$W/"
install -m 0644 "$T/tools/gpu_frameworks.py" "$W/"
install -d -o "$U" -g "$U" "$W/home" "$W/cdi"
trap 'rm -rf "$W"; userdel "$user" 2>/dev/null; rmdir /sys/fs/cgroup/gpubox-fw-* 2>/dev/null' EXIT
as_user=(setpriv --reuid="$U" --regid="$U" --clear-groups --inh-caps=-all
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$W/home")
G=$W/gpubox
py=${PYTHON:-$(command -v python3)}
echo "+memory +cpu" >/sys/fs/cgroup/cgroup.subtree_control 2>>"$log"

# fw NAME WANT [gpubox options]: tools/gpu_frameworks.py NAME under gpubox; WANT: the status
# --meta must report (OK, ML...).
fw() {
    local n=$1 want=$2 s cg=/sys/fs/cgroup/gpubox-fw-$1 rc status
    shift 2
    mkdir -p "$cg"
    s=$(date +%s%N)
    timeout 200 sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "${as_user[@]}" "$G" run --gpu 0 \
        --env HOME=/tmp --env TRITON_CACHE_DIR=/tmp/triton --env XDG_CACHE_HOME=/tmp/cache \
        --env XLA_PYTHON_CLIENT_PREALLOCATE=false --meta "$W/home/$n.meta" "$@" / \
        "$py" "$W/gpu_frameworks.py" "$n" >"$W/$n.out" 2>&1
    rc=$?
    status=$(sed -n 's/.*"status": "\([A-Z]*\)".*/\1/p' "$W/home/$n.meta" 2>/dev/null | head -1)
    { echo "=== $n $*"; cat "$W/$n.out"; } >>"$OUT/fw.txt"
    { echo "=== $n $*"; cat "$W/home/$n.meta"; } >>"$OUT/metas.txt" 2>&1
    [ "$status" = "$want" ] && { [ "$want" != OK ] || grep -q "^$n ok" "$W/$n.out"; }
    verdict $? "$n $* (status ${status:-none}, rc $rc, $(( ($(date +%s%N) - s) / 1000000 )) ms): $(grep -m1 "^$n ok" "$W/$n.out")"
    say "   outside meter: memory.peak $(( $(cat "$cg/memory.peak" 2>/dev/null || echo 0) >> 20 )) MiB, cpu $(awk '/usage_usec/ { printf "%.2f s", $2 / 1e6 }' "$cg/cpu.stat");" \
        "gpubox's meta: $(grep -E '"(memory_peak_kb|cpu_time|monitor_cpu_time)"' "$W/home/$n.meta" | tr -d ' \n')"
    rmdir "$cg"
}
say "== frameworks under gpubox run --gpu 0 / as uid $U ($py)"
fw devcount OK
fw torch_loader OK --memory-limit 1G --pids-limit 256
fw torch_hog ML --memory-limit 1G
fw nccl OK
fw triton OK
fw jax OK
fw cupy OK

say "== CDI: a spec of this host, and runs from it"
"${as_user[@]}" "$G" cdi generate --output "$W/cdi/nvidia.yaml" >>"$log" 2>&1
verdict $? "gpubox cdi generate"
cp "$W/cdi/nvidia.yaml" "$OUT/" 2>/dev/null
smi=$("${as_user[@]}" "$G" run --cdi-spec-dir "$W/cdi" --device nvidia.com/gpu=0 / nvidia-smi -L 2>>"$log")
[ "$(grep -c '^GPU ' <<<"$smi")" = 1 ]
verdict $? "--device nvidia.com/gpu=0: one GPU ($smi)"
n=$("${as_user[@]}" "$G" run --cdi-spec-dir "$W/cdi" --device nvidia.com/gpu=all / "$py" "$W/gpu_frameworks.py" devcount 2>>"$log" | sed -n 's/^devcount ok //p')
[ "$n" = "$(nvidia-smi -L | grep -c '^GPU ')" ]
verdict $? "--device nvidia.com/gpu=all: PyTorch sees every GPU ($n)"

say "== doctor, list"
"${as_user[@]}" "$G" doctor >"$OUT/doctor.txt" 2>&1
verdict $? "gpubox doctor"
"${as_user[@]}" "$G" list 2>&1 | tee -a "$log"

say "== start-up: gpubox run / true, median of 21"
for spec in none 0; do
    ts=()
    for _ in $(seq 21); do
        s=$(date +%s%N)
        "${as_user[@]}" "$G" run --gpu "$spec" / true
        ts+=($((($(date +%s%N) - s) / 1000)))
    done
    say "--gpu $spec: $(printf '%s\n' "${ts[@]}" | sort -n | sed -n 11p) us"
done
say "$pass passed, $fail failed"
[ "$fail" = 0 ]
