#!/usr/bin/env bash
# gpubox check and gpubox run's preflight against the simulated GPU host (driver 550.54.14, so
# CUDA 12.4; GPU 0 a Tesla T4, 7.5; GPU 1 an RTX A6000, 8.6; a Broadwell CPU without AVX-512)
# and test images built here: the nvcc-built fat binaries and the x86-64-v4 program of
# tests/fixtures/cuda, fake CUDA runtimes, and forward-compatibility libcudas newer and older
# than the host's driver.
E2E_FAKE_HOSTS=1
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    # The unprivileged run reads these: copies it may read, removed when the root harness exits.
    fx=$(mktemp -d /tmp/gpubox-e2e-cuda.XXXXXX) && chmod 0755 "$fx" &&
        install -m 0644 "${CUDA_FIXTURES:?}"/*.so "$fx/" && install -m 0755 "$CUDA_FIXTURES/isa-v4" "$fx/" &&
        install -m 0755 "${FAKE_COMPAT_LIBCUDA:?}" "${FAKE_LIBCUDA_OLD:?}" "$fx/" ||
        { echo "Bail out! cannot stage the CUDA fixtures"; exit 1; }
    trap 'rm -rf "$fx"' EXIT
    export CUDA_FIXTURES=$fx FAKE_COMPAT_LIBCUDA=$fx/$(basename "$FAKE_COMPAT_LIBCUDA")
    export FAKE_LIBCUDA_OLD=$fx/$(basename "$FAKE_LIBCUDA_OLD")
fi
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_HOST:-}" ] || skip "the simulated GPU host is built as root (run the suite as root; it drops privileges)"
H=$E2E_HOST
L=/usr/lib/x86_64-linux-gnu

# A host whose GPU 1 is an A100 (compute capability 8.0), made by lib.sh's root part: fake-gpu-host
# copies its driver libraries from the build directory, which uid 65534 may not be able to read.
A=$E2E_HOST_A100

R=$WORK/rootfs
make_rootfs "$R"
install -m 0755 "$GPUPROBE" "$R/usr/bin/gpuprobe"
require_userns "$R"

# The CUDA image: the rootfs plus the fixtures' objects, listed in its ld.so.cache as ldconfig would list them.
C=$WORK/cuda-image
cp -a "$R" "$C"
mkdir -p "$C/usr/lib/x86_64-linux-gnu" "$C/usr/local/cuda/lib64" "$C/usr/bin" "$C/etc"
entries=()
for f in "$CUDA_FIXTURES"/*.so; do
    install -m 0644 "$f" "$C$L/" && entries+=("$(basename "$f")=$L/$(basename "$f")")
done
"$FAKE_GPU_HOST" --write-ldcache "$C/etc/ld.so.cache" "${entries[@]}"
install -m 0755 "$CUDA_FIXTURES/isa-v4" "$C/usr/bin/app-v4"
: >"$C/usr/local/cuda/lib64/libcudart.so.13.0.48" && ln -s libcudart.so.13.0.48 "$C/usr/local/cuda/lib64/libcudart.so.13"

before=$(tree_hash "$C")
box check --driver-root "$H" --gpu 1 "$C"
expect_eq "check: a CUDA 13 image on a CUDA 12.4 driver does not fit (exit 1)" "$rc" 1
expect_match "check: the runtime finding names the file and the driver" "$out" \
    '^FAIL cuda: needs CUDA runtime 13\.0\.48 \[/usr/local/cuda/lib64/libcudart\.so\.13\.0\.48\]; node: driver 550\.54\.14 \(CUDA 12\.4\) \[/sys/module/nvidia/version\]; the runtime fails with cudaErrorInsufficientDriver'
expect_match "check: sm_90-only SASS does not fit an 8.6 GPU" "$out" \
    '^FAIL arch: needs sm_90 \[/usr/lib/x86_64-linux-gnu/libsm90only\.so\]; node: GPU 1 \(0000:5e:00\.0, NVIDIA RTX A6000\), compute capability 8\.6'
expect_match "check: sm_80 SASS fits an 8.6 GPU" "$out" '^ok arch: needs SASS for sm_86 \(1 CUDA object\)'
expect_match "check: the last line says it does not fit" "$out" 'does not fit: the image cannot run on this node$'
expect_eq "check never writes the image" "$(tree_hash "$C")" "$before"

box check --driver-root "$A" --gpu 1 "$C"
expect_match "check: sm_90-only on an sm_80 GPU (A100) does not fit" "$out" \
    '^FAIL arch: needs sm_90 \[/usr/lib/x86_64-linux-gnu/libsm90only\.so\]; node: GPU 1 \(0000:5e:00\.0, NVIDIA A100-SXM4-80GB\), compute capability 8\.0 \[/sys/bus/pci/devices/0000:5e:00\.0/device\]'
expect_match "check: PTX-only fits by JIT, and says the first start is slow" "$out" \
    '^note arch: needs PTX compute_80 \[/usr/lib/x86_64-linux-gnu/libptx80only\.so\]; .*JIT-compiles the PTX, so the first start is slow'
expect_match "check: sm_75+sm_90 with PTX compute_90 does not fit 8.0" "$out" '^FAIL arch: needs sm_75 sm_90 PTX compute_90 '

box check --driver-root "$H" "$C" app-v4
expect_eq "check: an x86-64-v4 program on a CPU without AVX-512 does not fit" "$rc" 1
expect_match "check: the ISA finding names the note, the CPU and what it lacks" "$out" \
    '^FAIL isa: needs x86-64-v4 \(its GNU property note\) \[/usr/bin/app-v4\]; node: Intel\(R\) Xeon\(R\) CPU E5-2690 v4 @ 2\.60GHz: x86-64-v3 \[/proc/cpuinfo\]; the CPU lacks avx512f avx512bw avx512cd avx512dq avx512vl'
box check --json --driver-root "$H" "$C" app-v4
expect_match "check --json: fits false" "$out" '"fits": false'
expect_match "check --json: the isa finding" "$out" '"check": "isa",'

# NVIDIA_REQUIRE_CUDA on a ROOTFS: from --env (the image's config, were it pulled) or --require.
box check --driver-root "$H" --gpu 0 --env NVIDIA_REQUIRE_CUDA='cuda>=13.0 brand=tesla,driver>=470,driver<471' "$R"
expect_eq "check: NVIDIA_REQUIRE_CUDA cuda>=13.0 fails on CUDA 12.4 (exit 1)" "$rc" 1
expect_match "check: ... as the toolkit words it" "$out" \
    '^FAIL require: needs cuda>=13\.0 \(or 1 other alternative\) \[NVIDIA_REQUIRE_CUDA\]; node: driver 550\.54\.14 \(CUDA 12\.4\) \[/sys/module/nvidia/version\]; unsatisfied condition cuda>=13\.0'
box check --driver-root "$H" --gpu 0 --env NVIDIA_REQUIRE_CUDA='cuda>=12.4 brand=tesla,driver>=470,driver<471' "$R"
expect_eq "check: NVIDIA_REQUIRE_CUDA cuda>=12.4 holds (exit 0)" "$rc" 0
expect_match "check: ... and says so" "$out" '^ok require: needs cuda>=12\.4 '
box check --driver-root "$H" --gpu 0 --require 'cuda>=12.8' "$R"
expect_eq "check: the toolkit's mistake (cuda>=12.8 on a 12.x driver) is a warning (exit 0)" "$rc" 0
expect_match "check: ... which says why" "$out" '^warn require: needs cuda>=12\.8 \[--require\]; .*minor-version compatibility runs it'
box check --driver-root "$H" --gpu 0 --require 'arch>=8.0' "$R"
expect_match "check: arch is the selected GPU's compute capability (7.5)" "$out" '^FAIL require: needs arch>=8\.0 '
box check --driver-root "$H" --gpu 0 --env NVIDIA_REQUIRE_CUDA='cuda>=13.0' --env NVIDIA_DISABLE_REQUIRE=1 "$R"
expect_eq "check: NVIDIA_DISABLE_REQUIRE=1 switches requirements off" "$rc:$out" "0:fits: the image can run on this node"

box check --require 'cuda==12' "$R"
expect_eq "check: an invalid --require is gpubox's error (125)" "$rc" 125
expect_eq "check: ... in one line" "$err" "gpubox: --require: invalid condition \"cuda==12\" (PROPERTY OP VALUE: cuda, driver, arch with = != < <= > >= and a version; brand with = or !=)"
box check "$WORK/no-such-image"
expect_eq "check: a missing image is 125" "$rc" 125
expect_match "check: ... that names it" "$err" 'no-such-image" is not a directory'
box check --driver-root "$H" --gpu 9 "$R"
expect_eq "check: a GPU the host lacks is 125" "$rc" 125

# gpubox run: the cheap checks before anything starts.
mkdir "$WORK/out"
box run --driver-root "$H" --gpu 0 --env NVIDIA_REQUIRE_CUDA='cuda>=13.0' "$R" echo started
expect_eq "run: by default a misfit is a warning and the run goes on" "$rc:$out" "0:started"
expect_eq "run: ... one line on stderr" "$err" \
    "gpubox: warning: preflight: require: needs cuda>=13.0 [NVIDIA_REQUIRE_CUDA]; node: driver 550.54.14 (CUDA 12.4) [/sys/module/nvidia/version]; unsatisfied condition cuda>=13.0: update the driver, or use an image built for an older CUDA"
box run --driver-root "$H" --gpu 0 --preflight enforce --env NVIDIA_REQUIRE_CUDA='cuda>=13.0' --bind "$WORK/out:/out" \
    "$R" touch /out/started
expect_eq "run --preflight enforce: exits 125" "$rc" 125
expect_match "run --preflight enforce: says why" "$err" '^gpubox: preflight: require: needs cuda>=13\.0 '
expect_match "run --preflight enforce: ... with a hint" "$err" "hint: 'gpubox check' lists every finding"
check "run --preflight enforce: nothing started" test ! -e "$WORK/out/started"
V=$WORK/isa-image
cp -a "$R" "$V" && install -m 0755 "$CUDA_FIXTURES/isa-v4" "$V/usr/bin/app-v4"
box run --driver-root "$H" --preflight enforce "$V" app-v4
expect_eq "run --preflight enforce: an x86-64-v4 program on a CPU without AVX-512 is 125" "$rc" 125
expect_match "run --preflight enforce: ... naming the ISA" "$err" '^gpubox: preflight: isa: needs x86-64-v4'
box run --driver-root "$H" --gpu 0 --preflight off --env NVIDIA_REQUIRE_CUDA='cuda>=13.0' "$R" echo started
expect_eq "run --preflight off: no check, no warning" "$rc:$out:$err" "0:started:"
box run --driver-root "$H" --env NVIDIA_REQUIRE_CUDA='cuda>=13.0' "$C" echo started
expect_eq "run without --gpu: the image's CUDA needs are not checked (no GPU inside)" "$rc:$out:$err" "0:started:"
box run --preflight sometimes "$R" true
expect_eq "run --preflight with a bad mode is 125" "$rc" 125

# Forward compatibility: the image's compat libcuda (570.86.10, CUDA 12.8) is newer than the
# host's 550.54.14, so it is what the workload loads; an older one (535.104.05) is never used.
F=$WORK/compat-new
cp -a "$R" "$F"
mkdir -p "$F/usr/local/cuda/compat"
install -m 0755 "$FAKE_COMPAT_LIBCUDA" "$F/usr/local/cuda/compat/"
ln -s libcuda.so.570.86.10 "$F/usr/local/cuda/compat/libcuda.so.1"
box run --driver-root "$H" --gpu 0 "$F" gpuprobe
expect_match "compat newer than the driver: libcuda comes from the image's compat directory" "$out" \
    '^libcuda_path=/usr/local/cuda/compat/libcuda\.so\.570\.86\.10$'
expect_match "compat newer than the driver: it answers CUDA 12.8" "$out" '^cuda_driver_version=12080$'
expect_match "compat newer than the driver: NVML is still the host's" "$out" '^nvml_driver_version=550\.54\.14$'
box check --driver-root "$H" --gpu 0 --require 'cuda>=12.8' "$F"
expect_match "check: says gpubox uses the compat driver" "$out" \
    '^note compat: needs compat driver 570\.86\.10 \[/usr/local/cuda/compat/libcuda\.so\.570\.86\.10\]; .*gpubox uses it'
expect_match "check: cuda>=12.8 holds with it (nvidia-container-cli would not count it)" "$out" '^note require: needs cuda>=12\.8 '
O=$WORK/compat-old
cp -a "$R" "$O"
mkdir -p "$O/usr/local/cuda/compat"
install -m 0755 "$FAKE_LIBCUDA_OLD" "$O/usr/local/cuda/compat/"
ln -s libcuda.so.535.104.05 "$O/usr/local/cuda/compat/libcuda.so.1"
box run --driver-root "$H" --gpu 0 "$O" gpuprobe
expect_match "compat older than the driver: the host's libcuda wins" "$out" \
    '^libcuda_path=/usr/lib/x86_64-linux-gnu/libcuda\.so\.550\.54\.14$'
expect_match "compat older than the driver: it answers the host's CUDA 12.4" "$out" '^cuda_driver_version=12040$'
box check --driver-root "$H" --gpu 0 "$O"
expect_match "check: says why the host's driver is used" "$out" \
    "^note compat: .*the host's driver libraries are used: compat driver 535\.104\.05 is not newer than the host's 550\.54\.14"
# A pulled image: its config's NVIDIA_REQUIRE_CUDA and Cmd are what check and run's preflight
# read (the image is the CUDA image above as one layer of an OCI layout, pulled as this user).
export GPUBOX_IMAGES=$WORK/images
P=$WORK/oci-cuda
python3 - "$E2E_DIR" "$C" "$P" <<'PY' || { echo "Bail out! the OCI layout could not be written"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1])
import oci_image
lay, t = oci_image.Layout(sys.argv[3]), oci_image.Tar()
t.tree(sys.argv[2])
cfg = {"Env": ["PATH=/usr/bin:/bin", "NVIDIA_REQUIRE_CUDA=cuda>=13.0"], "Cmd": ["app-v4"]}
lay.tag(lay.image([t.bytes()], "amd64", cfg), "cuda13")
lay.close()
PY
box pull --name cuda13 "oci:$P:cuda13"
[ "$rc" = 0 ] || echo "# pull: $err"
expect_eq "pull: the CUDA image is stored by name" "$rc $out" "0 cuda13"
box check --driver-root "$H" --gpu 0 cuda13
expect_eq "check IMAGE (a pulled image's name): does not fit -> 1" "$rc" 1
expect_match "check IMAGE: the requirement comes from the image's config" "$out" \
    '^FAIL require: needs cuda>=13\.0 \[NVIDIA_REQUIRE_CUDA\]'
expect_match "check IMAGE: the image's Cmd is the command checked" "$out" '^FAIL isa: needs x86-64-v4 .*\[/usr/bin/app-v4\]'
box check --driver-root "$H" --gpu 0 --env NVIDIA_DISABLE_REQUIRE=1 cuda13 true
expect_no_match "check IMAGE: --env goes on top of the image's Env" "$out" '^FAIL require'
box run --driver-root "$H" --gpu 0 cuda13 true
expect_eq "run IMAGE: the preflight warns and the workload runs" "$rc" 0
expect_match "run IMAGE: the warning names the image's requirement" "$err" 'cuda>=13\.0'
box run --preflight enforce --driver-root "$H" --gpu 0 cuda13 true
expect_eq "run IMAGE --preflight enforce: 125 before anything starts" "$rc" 125
finish
