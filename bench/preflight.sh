#!/usr/bin/env bash
# What gpubox run's preflight (--preflight warn, the default) costs at start-up, against
# --preflight off, on `gpubox run --gpu 0` of the simulated 8-GPU host: a plain rootfs, and a
# CUDA image (a CUDA runtime, version.json, forward-compatibility libraries and NVIDIA's full
# NVIDIA_REQUIRE_CUDA), which gives every cheap check something to read. Medians over RUNS runs
# (default 300) side by side, then the median of interleaved paired differences. And, for
# scale, `gpubox check` (with its fat-binary scan) of the CUDA image.
. "$(dirname "$0")/common.sh"
bench_setup "$@"
R=$OUTDIR/rootfs
"$GPUBOX" rootfs create "$R" >/dev/null
H=${BENCH_DRIVER_ROOT:-$W/host8}
C=$OUTDIR/cuda-image
cp -a "$R" "$C"
mkdir -p "$C/usr/local/cuda/lib64" "$C/usr/local/cuda/compat"
: >"$C/usr/local/cuda/lib64/libcudart.so.12.8.57" && ln -s libcudart.so.12.8.57 "$C/usr/local/cuda/lib64/libcudart.so.12"
echo '{"cuda": {"name": "CUDA SDK", "version": "12.8.0"}}' >"$C/usr/local/cuda/version.json"
cp "$H/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14" "$C/usr/local/cuda/compat/libcuda.so.570.86.10"
ln -s libcuda.so.570.86.10 "$C/usr/local/cuda/compat/libcuda.so.1"
req='cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=unknown,driver>=550,driver<551'

echo "NVIDIA_REQUIRE_CUDA=$req" >"$OUTDIR/require.env"
E="--env-file $OUTDIR/require.env"
run_off() { echo "$GPUBOX run --preflight off ${2:-} --driver-root $H --gpu 0 $1 /bin/true"; }
echo "machine: $(nproc) cores, $(uname -r); gpubox $("$GPUBOX" --version | cut -d' ' -f2), $(hyperfine --version)"
echo "measured as uid $(id -u); median of ${RUNS:-300} runs each, milliseconds"
mapfile -t t < <(measure "$(run_off "$R")" "$GPUBOX run --driver-root $H --gpu 0 $R /bin/true" \
    "$(run_off "$C" "$E")" "$GPUBOX run $E --driver-root $H --gpu 0 $C /bin/true")
printf '%-62s %8s\n' "command" "median"
printf '%-62s %8s\n' "gpubox run --gpu 0 --preflight off, rootfs" "${t[0]}"
printf '%-62s %8s\n' "gpubox run --gpu 0 (preflight warn), rootfs" "${t[1]}"
printf '%-62s %8s\n' "gpubox run --gpu 0 --preflight off, CUDA image + REQUIRE" "${t[2]}"
printf '%-62s %8s\n' "gpubox run --gpu 0 (preflight warn), CUDA image + REQUIRE" "${t[3]}"
read -r _ _ d q1 q3 < <(pairs 400 -- $(run_off "$R") -- "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" /bin/true)
echo "preflight added, rootfs, 400 interleaved pairs:     $d ms median (quartiles $q1 to $q3)"
read -r _ _ d q1 q3 < <(pairs 400 -- $(run_off "$C" "$E") -- "$GPUBOX" run $E --driver-root "$H" --gpu 0 "$C" /bin/true)
echo "preflight added, CUDA image, 400 interleaved pairs: $d ms median (quartiles $q1 to $q3)"
# The same preflight timed inside one process (no fork, exec or namespace noise around it).
read -r m a b < <("$W/preflight-cost" "$H" "$R" /bin/true 2000)
echo "preflight in-process, rootfs:                        $m us median (quartiles $a to $b), 2000 calls"
read -r m a b < <("$W/preflight-cost" "$H" "$C" /bin/true 2000 "NVIDIA_REQUIRE_CUDA=$req")
echo "preflight in-process, CUDA image + REQUIRE:          $m us median (quartiles $a to $b), 2000 calls"
# ... and its first call in a fresh process, as a run pays it (cold: page faults, first mapping).
cold() { for _ in $(seq 300); do "$W/preflight-cost" "$@"; done | awk '{ print $1 }' | sort -n |
         awk '{ v[NR] = $1 } END { printf "%s us median (quartiles %s to %s)", v[int(NR / 2)], v[int(NR / 4)], v[int(3 * NR / 4)] }'; }
echo "preflight first call per process, rootfs:            $(cold "$H" "$R" /bin/true 1), 300 processes"
echo "preflight first call per process, CUDA image:        $(cold "$H" "$C" /bin/true 1 "NVIDIA_REQUIRE_CUDA=$req"), 300 processes"
mapfile -t t < <(RUNS=50 measure "$GPUBOX check --driver-root $H --gpu 0 $C")
echo "gpubox check --gpu 0 of the CUDA image (with its scan): ${t[0]} ms median of 50"
