#!/usr/bin/env bash
# GPU isolation against the simulated host (tests/fixtures): 4 NVIDIA GPUs whose Device Minors
# are not in PCI order, an AMD and an Intel GPU, real tiny driver libraries of two versions.
E2E_FAKE_HOSTS=1
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_HOST:-}" ] || skip "the simulated GPU host is built as root (run the suite as root; it drops privileges)"
R=$WORK/rootfs
make_rootfs "$R"
install -m 0755 "$GPUPROBE" "$R/usr/bin/gpuprobe"
require_userns "$R"
H=$E2E_HOST
gbox() { box run --driver-root "$H" "$@"; }
uuid0=GPU-000000a0-1111-2222-3333-444400000010

box list --driver-root "$H"
expect_match "list: driver version" "$out" '^driver: 550.54.14$'
expect_match "list: a header" "$out" '^INDEX +PCI +VENDOR +MODEL +UUID +NODES$'
expect_match "list: index 0 is the lowest bus, minor 2" "$out" "^0 +0000:3b:00.0  nvidia  Tesla T4 +$uuid0  /dev/nvidia2$"
expect_match "list: index 3 has minor 1" "$out" '^3 +0000:af:00.0  nvidia .*  /dev/nvidia1$'
expect_match "list: the AMD GPU" "$out" '^- +0000:c1:00.0  amd +- +- +/dev/dri/card1 /dev/dri/renderD129$'
expect_eq "list: no audio function, NVSwitch or bridge" "$(printf '%s\n' "$out" | grep -c '^[0-9-] ')" 6
box list --json --driver-root "$H"
expect_match "list --json" "$out" '"driver_version": "550.54.14"'
expect_match "list --json: minor" "$out" '"minor": 2'

before=$(tree_hash "$R")
gbox --gpu 0 "$R" nvidia-smi -L
expect_eq "--gpu 0: nvidia-smi -L lists exactly host GPU 0" "$out" "GPU 0: Tesla T4 (UUID: $uuid0)"
gbox --gpu 0 "$R" probe stat /dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset /dev/kfd
expect_eq "--gpu 0: exactly the right nodes (major:minor)" "$out" "/dev/nvidia0=ENOENT
/dev/nvidia1=ENOENT
/dev/nvidia2=chr 195:2
/dev/nvidia3=ENOENT
/dev/nvidiactl=chr 195:255
/dev/nvidia-uvm=chr 508:0
/dev/nvidia-uvm-tools=chr 508:1
/dev/nvidia-modeset=ENOENT
/dev/kfd=ENOENT"
gbox --gpu 0 "$R" sh -c 'ls /proc/driver/nvidia/gpus; ls /proc/driver; ls /proc/driver/nvidia; grep ModifyDeviceFiles /proc/driver/nvidia/params; grep -c "Device Minor:.*2" /proc/driver/nvidia/gpus/*/information'
expect_eq "--gpu 0: only its procfs entry, ModifyDeviceFiles 0" "$out" "0000:3b:00.0
nvidia
gpus
params
registry
version
ModifyDeviceFiles: 0
1"
gbox --gpu 0 "$R" sh -c 'stat -c "%a %n" /proc/driver/nvidia /proc/driver/nvidia/params; echo 1 >/proc/driver/nvidia/params'
expect_eq "--gpu 0: /proc/driver keeps its modes" "$out" $'555 /proc/driver/nvidia\n444 /proc/driver/nvidia/params'
expect_match "--gpu 0: /proc/driver is read-only" "$err" 'params: Read-only file system$'
# An image with a /proc/driver directory of its own: it must not show through beside the GPU's.
P=$WORK/image-with-proc-driver
cp -a "$R" "$P"
mkdir -p "$P/proc/driver/nvidia/gpus/0000:99:00.0" && echo "the image's" >"$P/proc/driver/image-file"
box run --driver-root "$H" --gpu 0 "$P" sh -c 'ls /proc/driver /proc/driver/nvidia/gpus; nvidia-smi -L; touch /proc/driver/x'
expect_match "an image's own /proc/driver stays hidden" "$out" $'^/proc/driver:\nnvidia\n\n/proc/driver/nvidia/gpus:\n0000:3b:00.0\nGPU 0: Tesla T4 [^\n]*$'
expect_match "... and that /proc/driver is read-only too" "$err" 'x: Read-only file system$'
gbox --gpu 0 "$R" gpuprobe
expect_eq "--gpu 0: the probe exits 0" "$rc" 0
expect_match "dlopen(libcuda.so.1) reaches the host driver" "$out" '^cuda_driver_version=12040$'
expect_match "cuInit succeeds" "$out" '^cuInit=0$'
expect_match "CUDA sees one device" "$out" '^devices=1$'
expect_match "libnvidia-ml answers the host driver version" "$out" '^nvml_driver_version=550.54.14$'
expect_match "libcuda.so (the dev name) resolves too" "$out" '^libcuda.so=ok$'
# While the monitor discovers, init is kept off the monitor's CPU; the workload gets the user's.
gbox --gpu 0 "$R" grep Cpus_allowed_list /proc/self/status
expect_eq "--gpu 0: the workload runs on the CPUs gpubox was given" "$out" "$(grep Cpus_allowed_list /proc/self/status)"
if [ "$(nproc)" -gt 1 ]; then
    out=$(taskset -c 1 "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" grep Cpus_allowed_list /proc/self/status 2>&1)
    expect_eq "--gpu 0 under taskset -c 1: the workload keeps CPU 1 only" "$out" $'Cpus_allowed_list:\t1'
fi
# The monitor makes the GPU's entries in init's layer while init sets up: the user's umask
# must not reach them, and a user's mount onto a GPU path lands on that path, not through it.
out=$(umask 077; "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" stat -c '%a %n' /etc/ld.so.cache /lib/firmware/nvidia /usr/lib/x86_64-linux-gnu 2>&1)
expect_eq "--gpu 0 under umask 077: the GPU's entries keep their modes" "$out" "644 /etc/ld.so.cache
755 /lib/firmware/nvidia
755 /usr/lib/x86_64-linux-gnu"
echo "the user's" >"$WORK/users-libcuda" && chmod 644 "$WORK/users-libcuda"
gbox --gpu 0 --ro-bind "$WORK/users-libcuda:/usr/lib/x86_64-linux-gnu/libcuda.so.1" "$R" sh -c \
    'cd /usr/lib/x86_64-linux-gnu; cat libcuda.so.1; readlink libcuda.so.1; head -c 4 libcuda.so.550.54.14 | od -An -c'
expect_eq "a user's mount onto a driver link wins, and the driver stays whole" "$rc:$out" "0:the user's
 177   E   L   F"
# The ICD loaders find the driver through vendor files: OpenCL's comes with compute, made for
# the driver's soname; Vulkan's and EGL's are the host's, with graphics (not by default).
gbox --gpu 0 "$R" sh -c 'cat /etc/OpenCL/vendors/nvidia.icd; gpuprobe "$(cat /etc/OpenCL/vendors/nvidia.icd)"
    test -e /usr/share/vulkan || echo no Vulkan files; test -e /usr/share/glvnd || echo no EGL files'
expect_eq "compute: OpenCL's vendor file names the driver's library, and it loads" "$rc:$out" "0:libnvidia-opencl.so.1
libnvidia-opencl.so.1=ok
no Vulkan files
no EGL files"
gbox --gpu 0 --gpu-caps graphics "$R" sh -c 'cd /usr/share; cat vulkan/icd.d/nvidia_icd.json glvnd/egl_vendor.d/10_nvidia.json
    gpuprobe libGLX_nvidia.so.0; test -e /etc/OpenCL || echo no OpenCL file
    awk "\$5 ~ /nvidia_icd.json\$/ { print \$6 }" /proc/self/mountinfo | cut -d, -f1-3'
expect_eq "graphics: the host's Vulkan ICD and EGL vendor files, and the library they name loads" "$out" \
    "$(cat "$H/usr/share/vulkan/icd.d/nvidia_icd.json" "$H/usr/share/glvnd/egl_vendor.d/10_nvidia.json")
libGLX_nvidia.so.0=ok
no OpenCL file
ro,nosuid,nodev"
gbox --gpu 0 "$R" sh -c 'find / -name "*535.104.05*" 2>/dev/null; grep -c 535.104 /etc/ld.so.cache; true'
expect_eq "the older driver's libraries are nowhere in the sandbox" "$out" "0"
expect_eq "ROOTFS unchanged after GPU runs" "$(tree_hash "$R")" "$before"

gbox --gpu 1,3 "$R" sh -c 'nvidia-smi -L | wc -l; ls /dev | grep "^nvidia[0-9]" | tr "\n" " "'
expect_eq "--gpu 1,3: two GPUs, minors 0 and 1" "$out" "2
nvidia0 nvidia1 "
gbox --gpu gpu-000000A2-1111-2222-3333-444400000012 "$R" sh -c 'ls /dev | grep "^nvidia[0-9]"'
expect_eq "--gpu by UUID (any case)" "$out" "nvidia3"
gbox --gpu GPU-000000a3 "$R" sh -c 'ls /dev | grep "^nvidia[0-9]"'
expect_eq "--gpu by a unique UUID prefix" "$out" "nvidia1"
gbox --gpu GPU-000000a "$R" true
expect_match "--gpu by a prefix of several UUIDs -> 125, naming them" "$rc:$err" '^125:gpubox: --gpu GPU-000000a: names GPUs 0, 1, 2, 3; give more of the UUID$'
gbox --gpu 00000000:5E:00.0 "$R" sh -c 'ls /dev | grep "^nvidia[0-9]"; ls /proc/driver/nvidia/gpus'
expect_eq "--gpu by PCI address (8-digit domain)" "$out" "nvidia0
0000:5e:00.0"
gbox --gpu all "$R" sh -c 'nvidia-smi -L | wc -l; ls /dev/dri; ls /dev/dri/by-path; ls /dev/kfd'
expect_eq "--gpu all: every GPU, DRM nodes and by-path links" "$out" "4
by-path
card0
card1
renderD128
renderD129
pci-0000:00:02.0-card
pci-0000:00:02.0-render
pci-0000:c1:00.0-card
pci-0000:c1:00.0-render
/dev/kfd"
gbox --gpu 0000:c1:00.0 "$R" sh -c 'ls /dev/dri; ls /dev/kfd; ls /dev | grep -c nvidia'
expect_eq "an AMD GPU by PCI address: kfd and its own DRM nodes only" "$out" "by-path
card1
renderD129
/dev/kfd
0"
gbox --gpu none "$R" gpuprobe
expect_eq "--gpu none: no driver inside" "$rc" 1
expect_match "--gpu none: libcuda is not there" "$out" 'libcuda=libcuda.so.1: cannot open shared object file'
gbox --gpu 0 --gpu-caps utility "$R" sh -c 'ls /dev | grep nvidia | tr "\n" " "; ls /usr/lib/x86_64-linux-gnu/ | grep -c libcuda; nvidia-smi -L'
expect_eq "--gpu-caps utility: no UVM nodes, no libcuda, nvidia-smi works" "$out" "nvidia2 nvidiactl 0
GPU 0: Tesla T4 (UUID: $uuid0)"

gbox --gpu 7 "$R" true
expect_eq "unknown GPU -> 125" "$rc" 125
expect_eq "unknown GPU: one line lists the host's GPUs; 'gpubox list' has the rest" "$err" "gpubox: --gpu 7: no such GPU; GPUs on this host: \
0 (0000:3b:00.0 Tesla T4), 1 (0000:5e:00.0 NVIDIA RTX A6000), 2 (0000:86:00.0 Tesla T4), 3 (0000:af:00.0 NVIDIA RTX A6000), \
0000:00:02.0 (intel), 0000:c1:00.0 (amd)
gpubox: hint: indices count NVIDIA GPUs in PCI bus order, as nvidia-smi does; 'gpubox list' shows every detail"
box run --driver-root "$E2E_HOST_NOUVM" --gpu 0 "$R" true
expect_eq "host without /dev/nvidia-uvm -> 125" "$rc" 125
expect_eq "host without /dev/nvidia-uvm: a clear error and a hint" "$err" 'gpubox: host device node "/dev/nvidia-uvm" is missing
gpubox: hint: run '"'"'nvidia-modprobe -u -c=0'"'"' (or any CUDA program) once on the host to create it'
box run --driver-root "$E2E_HOST_NOUVM" --gpu 0 --gpu-caps utility "$R" nvidia-smi -L
expect_eq "without UVM, utility-only still works" "$rc" 0
# A GPU the driver lists but does not describe (its information file unreadable, as when it has
# fallen off the bus) keeps its index, as in nvidia-smi: --gpu 1 is still the second GPU.
box list --driver-root "$E2E_HOST_NOINFO"
expect_match "list: a GPU without its information keeps index 0, and says why" "$out" \
    $'\n0 +0000:3b:00.0  nvidia  - +- +- \\("/proc/driver/nvidia/gpus/0000:3b:00.0/information" cannot be read\\)\n1 +0000:5e:00.0  nvidia '
box run --driver-root "$E2E_HOST_NOINFO" --gpu 1 "$R" nvidia-smi -L
expect_match "... --gpu 1 is still the GPU at 0000:5e:00.0" "$rc:$out" '^0:GPU 0: [^\n]*UUID: GPU-000000a1-'
box run --driver-root "$E2E_HOST_NOINFO" --gpu 0 "$R" true
expect_match "... --gpu 0 -> 125, naming the file" "$rc:$err" \
    '^125:gpubox: GPU 0 \(0000:3b:00.0\): "/proc/driver/nvidia/gpus/0000:3b:00.0/information" cannot be read'
# An entry of the driver's listing with no PCI address (not a name the driver gives, and no
# information to place it by): indices are uncertain, so they are refused; a PCI address works.
odd='"/proc/driver/nvidia/gpus/odd" is not named by a PCI address, and "/proc/driver/nvidia/gpus/odd/information" cannot be read'
box list --driver-root "$E2E_HOST_ODD"
expect_match "list: an unplaceable GPU entry is shown, and why; the others keep their indices" "$rc:$out" \
    $'^0:.*\n1 +0000:5e:00.0  nvidia .*\n\\? +\\? +nvidia  - +- +- \\('"$odd"'\)$'
box run --driver-root "$E2E_HOST_ODD" --gpu 0 "$R" true
expect_eq "... --gpu 0 -> 125: indices are uncertain" "$rc:$err" "125:gpubox: --gpu 0: the driver lists a GPU that cannot be placed in PCI order: $odd
gpubox: hint: GPU indices are uncertain until it is fixed: select GPUs by UUID or PCI address (see 'gpubox list')"
box run --driver-root "$E2E_HOST_ODD" --gpu 0000:5e:00.0 "$R" nvidia-smi -L
expect_match "... a PCI address still selects its GPU" "$rc:$out" '^0:GPU 0: [^\n]*UUID: GPU-000000a1-'
# MIG: GPU 1 has GPU instances 1 (compute instances 0, 1) and 2 (0); GPU 0 is in MIG mode with
# none. A MIG device gets the GPU's node, its two capability nodes and their access files only.
M=$E2E_HOST_MIG
mig1=MIG-GPU-000000a1-1111-2222-3333-444400000011
box list --driver-root "$M"
expect_match "list: MIG mode is shown" "$out" '^1 +0000:5e:00.0  nvidia .*  /dev/nvidia0 \(MIG mode: 2 GPU instances\)$'
# NVML's names of them (fake_nvml answers from the simulated host's layout).
mig111=MIG-000000b0-5555-6666-7777-888800000011 mig120=MIG-000000b0-5555-6666-7777-888800000020
expect_match "list: each MIG device, by GPU:GI:CI, NVML's profile, memory and MIG-<uuid>, with its nodes" "$out" \
    "^1:1:1 +0000:5e:00.0  nvidia  MIG 1c.2g.20gb 20096MiB GI 1 CI 1 +$mig111  /dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap14\$"
expect_match "list: a 1g.10gb instance" "$out" "^1:2:0 +0000:5e:00.0  nvidia  MIG 1g.10gb 9984MiB GI 2 CI 0 +$mig120  "
expect_no_match "list: nothing unknown" "$out" "unknown"
box list --json --driver-root "$M"
expect_match "list --json: the MIG devices" "$out" "\"name\": \"$mig1/2/0\""
expect_match "list --json: NVML's UUID, profile and memory" "$out" \
    "\"memory_bytes\": 10468982784,"$'\n'" *\"name\": \"$mig1/2/0\",(.|"$'\n'")*\"profile\": \"1g.10gb\","$'\n'" *\"uuid\": \"$mig120\""
expect_match "list --json: the MIG mode" "$out" '"mig_mode": "enabled"'
# Without gpubox-nvml (a gpubox copied alone): all /proc gives, and one line that the rest is unknown.
mkdir -p "$WORK/alone" && cp "$GPUBOX" "$WORK/alone/gpubox"
"$WORK/alone/gpubox" list --driver-root "$M" >"$WORK/.out" 2>"$WORK/.err"
rc=$? out=$(cat "$WORK/.out") err=$(cat "$WORK/.err")
expect_match "list without the NVML helper: the MIG devices from /proc, by the toolkit's name" "$rc:$err:$out" \
    "^0::(.|"$'\n'")*"$'\n'"1:1:1 +0000:5e:00.0  nvidia  MIG GI 1 CI 1 +$mig1/1/1  /dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap14"$'\n'
expect_match "... and one line saying what is unknown" "$out" \
    "^MIG profiles, memory and MIG-<uuid>s unknown: no helper gpubox-nvml \\(looked for $WORK/alone/gpubox-nvml and $WORK/alone/../libexec/gpubox/gpubox-nvml\\)\$"
mig_probe='probe stat /dev/nvidia0 /dev/nvidia2 /dev/nvidia-caps/nvidia-cap1 /dev/nvidia-caps/nvidia-cap2 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13 /dev/nvidia-caps/nvidia-cap14 /dev/nvidia-caps/nvidia-cap21 && cd /proc/driver/nvidia/capabilities && find . -type f | sort && cat gpu0/mig/gi1/ci1/access && ls /proc/driver'
box run --driver-root "$M" --gpu 1:1:1 "$R" sh -c "$mig_probe"
mig_1_1_1="$rc:$err:$out"
expect_eq "--gpu 1:1:1: the GPU's node, its two capability nodes, its access files and no others" "$rc:$err:$out" "0::/dev/nvidia0=chr 195:0
/dev/nvidia2=ENOENT
/dev/nvidia-caps/nvidia-cap1=ENOENT
/dev/nvidia-caps/nvidia-cap2=ENOENT
/dev/nvidia-caps/nvidia-cap12=chr 241:12
/dev/nvidia-caps/nvidia-cap13=ENOENT
/dev/nvidia-caps/nvidia-cap14=chr 241:14
/dev/nvidia-caps/nvidia-cap21=ENOENT
./gpu0/mig/gi1/access
./gpu0/mig/gi1/ci1/access
DeviceFileMinor: 14
DeviceFileMode: 292
DeviceFileModify: 1
nvidia"
box run --driver-root "$M" --gpu "$mig111" "$R" sh -c "$mig_probe"
expect_eq "--gpu MIG-<uuid>: exactly that MIG device (1:1:1), as by GPU:GI:CI" "$rc:$err:$out" "$mig_1_1_1"
box run --driver-root "$M" --gpu MIG-00000000-5555-6666-7777-888800000011 "$R" true
expect_eq "--gpu MIG-<uuid> of no MIG device -> 125, the host's listed" "$rc:$err" "125:gpubox: --gpu MIG-00000000-5555-6666-7777-888800000011: no MIG device has that UUID; MIG devices on this host: 1:1:0 (MIG-000000b0-5555-6666-7777-888800000010), 1:1:1 ($mig111), 1:2:0 ($mig120)
gpubox: hint: 'gpubox list' shows every MIG device"
box run --driver-root "$M" --gpu "$mig1/2/0" "$R" probe stat /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap21 /dev/nvidia-caps/nvidia-cap22
expect_eq "--gpu MIG-GPU-<uuid>/2/0: that MIG device" "$rc:$out" "0:/dev/nvidia-caps/nvidia-cap12=ENOENT
/dev/nvidia-caps/nvidia-cap21=chr 241:21
/dev/nvidia-caps/nvidia-cap22=chr 241:22"
box run --driver-root "$M" --gpu 1:3:0 "$R" true
expect_eq "--gpu 1:3:0: no such MIG device -> 125, the GPU's listed" "$rc:$err" "125:gpubox: --gpu 1:3:0: GPU 1 (0000:5e:00.0) has no MIG device GI 3 CI 0; its MIG devices: 1:1:0, 1:1:1, 1:2:0
gpubox: hint: 'gpubox list' shows every MIG device"
box run --driver-root "$M" --gpu 1 "$R" nvidia-smi -L
expect_eq "--gpu 1 in MIG mode: a warning that CUDA needs its MIG devices" "$rc:$err" "0:gpubox: warning: GPU 1 (0000:5e:00.0) \
is in MIG mode (2 GPU instances): CUDA runs only on MIG devices, so it will find none; give them by --gpu GPU:GI:CI (see 'gpubox list'); nvidia-smi still works"
expect_match "... and nvidia-smi inside lists it" "$out" '^GPU 0: NVIDIA RTX A6000 '
box run --driver-root "$M" --gpu 0 "$R" true
expect_eq "the host's other GPU: no warning" "$rc:$err" "0:"
# --gpu auto hands out a GPU in MIG mode by its MIG devices: GPU 0 (none) whole, then 1:1:0.
GPUBOX_LEASE_DIR=$WORK/leases box run --driver-root "$M" --gpu auto:2 "$R" probe stat /dev/nvidia2 /dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13 /dev/nvidia-caps/nvidia-cap14
expect_eq "--gpu auto:2 on a MIG host: GPU 0 and MIG device 1:1:0" "$rc:$out" "0:/dev/nvidia2=chr 195:2
/dev/nvidia0=chr 195:0
/dev/nvidia-caps/nvidia-cap12=chr 241:12
/dev/nvidia-caps/nvidia-cap13=chr 241:13
/dev/nvidia-caps/nvidia-cap14=ENOENT"
# --gpu slurm with gres.conf's MultipleFiles=: Slurm's index 1 is MIG device 1:2:0.
mkdir -p "$WORK/slurm" && printf '%s\n' "Name=gpu File=/dev/nvidia2" \
    "Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22" >"$WORK/slurm/gres.conf"
SLURM_CONF=$WORK/slurm/slurm.conf SLURM_JOB_ID=7 SLURM_STEP_GPUS=1 box run --driver-root "$M" --gpu slurm "$R" probe stat /dev/nvidia2 /dev/nvidia0 /dev/nvidia-caps/nvidia-cap21 /dev/nvidia-caps/nvidia-cap22
expect_eq "--gpu slurm: a MultipleFiles= MIG device" "$rc:$out" "0:/dev/nvidia2=ENOENT
/dev/nvidia0=chr 195:0
/dev/nvidia-caps/nvidia-cap21=chr 241:21
/dev/nvidia-caps/nvidia-cap22=chr 241:22"
box doctor --driver-root "$M"
expect_match "doctor: a GPU in MIG mode with no instance is explained (NVML says it is in MIG mode)" "$out" \
    "^note     GPU 0 \\(0000:3b:00.0\\) is in MIG mode with no GPU instance: CUDA finds no device on it\$"
# A host whose GPU 2 is MIG-capable with MIG mode off (made by lib.sh as root, as the fake
# hosts read the build directory, and given to the caller, who makes its libnvidia-ml
# group-writable below).
mig4=${E2E_HOST_MIG4:?}
box doctor --driver-root "$mig4"
expect_match "doctor: MIG mode with no instance, told apart from ..." "$out" \
    "^note     GPU 0 \\(0000:3b:00.0\\) is in MIG mode with no GPU instance: CUDA finds no device on it\$"
expect_no_match "... a GPU with MIG mode off, which gets no note" "$out" "GPU 2 \\(0000:86:00.0\\).*MIG"
"$WORK/alone/gpubox" doctor --driver-root "$mig4" >"$WORK/.out" 2>&1
expect_match "doctor without NVML: it cannot tell, says so, and how to check" "$(cat "$WORK/.out")" \
    "info     MIG mode unknown: no helper gpubox-nvml .*"$'\n'"(.|"$'\n'")*note     GPU 2 \\(0000:86:00.0\\) has no MIG GPU instance: if it is in MIG mode \\(nvidia-smi -i 2 --query-gpu=mig.mode.current\\), CUDA finds no device on it"
# A libnvidia-ml someone else could have written is not loaded (its code would run as the caller).
nvml4=$mig4/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14
chmod g+w "$nvml4" && box list --driver-root "$mig4"
expect_match "list: a group-writable libnvidia-ml is not loaded, and that is the one line" "$rc:$out" \
    "^0:.*"$'\n'"MIG profiles, memory and MIG-<uuid>s unknown: \"$nvml4\" is not a regular file owned by root or the caller and writable by no one else: not loaded\$"
chmod g-w "$nvml4"
# gpubox-nvml runs for list, never for a plain run: a stand-in beside a copy of gpubox says when.
# (A program, not a script: gpubox runs its helpers by fd, which no interpreter could open.)
mkdir -p "$WORK/spy" && cp "$GPUBOX" "$WORK/spy/gpubox" &&
    printf '#include <stdio.h>\nint main(int c, char** v) { FILE* f = fopen("%s/spy/ran", "a"); fprintf(f, "%%s\\n", v[1]); return 1; }\n' \
        "$WORK" >"$WORK/spy/spy.c" && cc -o "$WORK/spy/gpubox-nvml" "$WORK/spy/spy.c" || not_ok "cc builds the stand-in"
"$WORK/spy/gpubox" run --driver-root "$M" --gpu 0 "$R" true && "$WORK/spy/gpubox" run --driver-root "$M" --gpu 1:1:0 "$R" true
expect_eq "run --gpu 0 and --gpu 1:1:0 start no gpubox-nvml" "$?:$(cat "$WORK/spy/ran" 2>/dev/null)" "0:"
"$WORK/spy/gpubox" list --driver-root "$M" >/dev/null
expect_eq "list starts it once, with the driver's libnvidia-ml by its resolved path" "$(cat "$WORK/spy/ran" 2>/dev/null)" \
    "$M/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14"
# CDI, generated: a spec for the MIG host, its cdiVersion the lowest its features need (digit
# device names and hostPath: 0.5.0), listed, and consumed by gpubox itself.
C=$WORK/cdi && mkdir -p "$C"
box cdi generate --driver-root "$M" --output "$C/nvidia.yaml"
expect_eq "cdi generate: writes the spec, CDI 0.5.0" "$rc:$out" "0:gpubox: wrote \"$C/nvidia.yaml\" (cdiVersion 0.5.0, 8 devices of nvidia.com/gpu)"
mkdir -p "$WORK/cdi-prefix" && box cdi generate --driver-root "$E2E_HOST_PREFIX" --format json --output "$WORK/cdi-prefix/nvidia.json"
expect_match "cdi generate: a driver under a prefix and no nvidia-cdi-hook: it says what consumers need" "$rc:$err" \
    "^0:gpubox: warning: cdi generate: the driver's libraries are in /usr/local/nvidia/lib64, .*: consumers need LD_LIBRARY_PATH=/usr/local/nvidia/lib64 "
box cdi list --cdi-spec-dir "$WORK/cdi-prefix"
expect_match "... and its JSON spec reads back" "$rc:$out" "nvidia.com/gpu=all  $WORK/cdi-prefix/nvidia.json \(cdiVersion 0.5.0\)"
XDG_CONFIG_HOME=$WORK/xdg box cdi generate --driver-root "$M"
expect_eq "cdi generate without --output: a spec per kind the host has, in \$XDG_CONFIG_HOME/cdi" "$rc:$out" "0:gpubox: wrote \"$WORK/xdg/cdi/nvidia.yaml\" (cdiVersion 0.5.0, 8 devices of nvidia.com/gpu)
gpubox: wrote \"$WORK/xdg/cdi/amd.yaml\" (cdiVersion 0.5.0, 3 devices of amd.com/gpu)
gpubox: wrote \"$WORK/xdg/cdi/intel.yaml\" (cdiVersion 0.5.0, 3 devices of intel.com/gpu)"
XDG_CONFIG_HOME=$WORK/xdg box run --device amd.com/gpu=0 --device intel.com/gpu=0000:00:02.0 "$R" probe stat /dev/kfd /dev/dri/card1 /dev/dri/renderD129 /dev/dri/card0 /dev/dri/renderD128 /dev/nvidiactl
expect_eq "... and the caller's own directory is read: the AMD and Intel GPUs' nodes" "$rc:$out" "0:/dev/kfd=chr 235:0
/dev/dri/card1=chr 226:1
/dev/dri/renderD129=chr 226:129
/dev/dri/card0=chr 226:0
/dev/dri/renderD128=chr 226:128
/dev/nvidiactl=ENOENT"
box cdi list --cdi-spec-dir "$C"
expect_match "cdi list: the MIG devices by GPU:GI:CI" "$out" "^nvidia.com/gpu=1:1:1  $C/nvidia.yaml \(cdiVersion 0.5.0\)$"
box run --cdi-spec-dir "$C" --device nvidia.com/gpu=1:1:1 "$R" sh -c 'probe stat /dev/nvidia0 /dev/nvidia2 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13 /dev/nvidia-caps/nvidia-cap14 /dev/nvidiactl; echo $NVIDIA_VISIBLE_DEVICES; gpuprobe | head -1'
expect_eq "--device nvidia.com/gpu=1:1:1 from a generated spec: that MIG device's nodes, the driver loads" "$rc:$out" "0:/dev/nvidia0=chr 195:0
/dev/nvidia2=ENOENT
/dev/nvidia-caps/nvidia-cap12=chr 241:12
/dev/nvidia-caps/nvidia-cap13=ENOENT
/dev/nvidia-caps/nvidia-cap14=chr 241:14
/dev/nvidiactl=chr 195:255
void
cuda_driver_version=12040"
box run --cdi-spec-dir "$C" --gpu nvidia.com/gpu=0 "$R" probe stat /dev/nvidia0 /dev/nvidia2
expect_eq "--gpu given a CDI name: as --device" "$rc:$out" "0:/dev/nvidia0=ENOENT
/dev/nvidia2=chr 195:2"
box run --cdi-spec-dir "$C" --device nvidia.com/gpu=7 "$R" true
expect_match "--device of a name no spec has: 125, what the kind offers" "$rc:$err" \
    '^125:gpubox: --device nvidia.com/gpu=7: no such CDI device; nvidia.com/gpu offers 0, 1, 1:1:0, 1:1:1, 1:2:0, GPU-'
# CDI, consumed: specs as NVIDIA's, AMD's and Intel's tools write them, the hooks' work done
# natively (soname links and the loader's cache), no hook run.
T=$WORK/cdi-toolkit && mkdir -p "$T"
for f in "$E2E_DIR"/cdi-fixtures/*.json "$E2E_DIR"/cdi-fixtures/*.yaml; do sed "s|@HOST@|$M|g" "$f" >"$T/$(basename "$f")"; done
mv "$T/nvidia-toolkit.json" "$WORK/nvidia-toolkit.json"
box run --cdi-spec-dir "$T" --device nvidia.com/gpu=0 "$R" sh -c 'probe stat /dev/nvidia2 /dev/nvidia0; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; readlink /usr/lib/x86_64-linux-gnu/libcuda.so; gpuprobe | head -1; test -x /usr/bin/nvidia-smi'
expect_eq "the toolkit's spec: its nodes, tools, soname links and loader cache; CUDA loads" "$rc:$err:$out" "0::/dev/nvidia2=chr 195:2
/dev/nvidia0=ENOENT
libcuda.so.550.54.14
libcuda.so.1
cuda_driver_version=12040"
box run --cdi-spec-dir "$T" --device amd.com/gpu=0 --device intel.com/gpu=card0 "$R" sh -c 'probe stat /dev/kfd /dev/dri/card1 /dev/dri/renderD129 /dev/dri/card0; echo $ZE_AFFINITY_MASK'
expect_eq "AMD's and Intel's specs: their nodes and environment" "$rc:$out" "0:/dev/kfd=chr 235:0
/dev/dri/card1=chr 226:1
/dev/dri/renderD129=chr 226:129
/dev/dri/card0=chr 226:0
0"
sed -i 's|nvidia-cdi-hook$|evil-hook|; s|- nvidia-cdi-hook$|- evil-hook|' "$T/nvidia-toolkit.yaml"
sed -i '0,/path: \/usr\/bin\/nvidia-cdi-hook/s||path: /usr/bin/evil-hook|' "$T/nvidia-toolkit.yaml"
box run --cdi-spec-dir "$T" --device nvidia.com/gpu=0 "$R" true
expect_eq "a hook other than nvidia-cdi-hook's verbs: refused, one line, 125" "$rc:$(printf '%s\n' "$err" | head -1)" \
    "125:gpubox: --device nvidia.com/gpu=0 ($T/nvidia-toolkit.yaml): createContainer hook \"/usr/bin/evil-hook\": gpubox runs no hook from a spec"
box run --device /dev/shm "$R" true
expect_eq "--device /dev/PATH that is no character device: 125" "$rc:$err" "125:gpubox: --device /dev/shm: \"/dev/shm\" is not a character device
gpubox: hint: gpubox gives a sandbox the host's character devices only"
box run --device /dev/zero:r "$R" sh -c 'probe stat /dev/zero; head -c 3 /dev/zero | od -An -tx1'
expect_eq "--device /dev/zero:r: the host's node" "$rc:$out" "0:/dev/zero=chr 1:5
 00 00 00"
box run --driver-root "$WORK/nohost" --gpu 0 "$R" true
expect_match "a missing --driver-root is named" "$rc:$err" '^125:gpubox: --driver-root ".*nohost" is not a directory'
# ROOTFS=/, the host's own stack: it has mounts below it, so it is bound, not an overlay. The
# directories that lack the driver's files get overlays of their own; the host's stay unchanged.
host_files() { ls /usr/bin/nvidia-smi /usr/lib/x86_64-linux-gnu/libcuda* /etc/OpenCL/vendors/nvidia.icd 2>/dev/null; sha256sum /etc/ld.so.cache; }
before_host=$(host_files)
box run --driver-root "$H" --gpu 0 --ro-bind "$GPUPROBE:/tmp/gpuprobe" / sh -c \
    'nvidia-smi -L && /tmp/gpuprobe && cat /etc/OpenCL/vendors/nvidia.icd; touch /usr/lib/x86_64-linux-gnu/new 2>&1'
expect_match "--gpu with ROOTFS=/: nvidia-smi lists host GPU 0, and the driver loads" "$rc:$out" \
    $'^1:GPU 0: Tesla T4 [^\n]*\ncuda_driver_version=12040\n'
expect_match "... from the host's own library directory" "$out" '^libcuda_path=/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14$'
expect_match "... with OpenCL's vendor file" "$out" '^libnvidia-opencl.so.1$'
expect_match "... and that directory is as read-only as the rest of the bound root" "$out" 'Read-only file system$'
expect_eq "... the host's directories are unchanged" "$(host_files)" "$before_host"
box run --print-plan --driver-root "$H" --gpu 0 / true
expect_match "... and --print-plan says the root is bound, not overlaid" "$out" '^root rbind / read-only \(it has mounts below it'
# Another bound ROOTFS, which ships its own older driver: the overlays of its directories take
# the host's, the image's soname link is replaced there, and the image stays unchanged.
B=$E2E_BOUND_ROOTFS
install -m 0755 "$GPUPROBE" "$B/usr/bin/gpuprobe"
cp "$H/usr/lib/x86_64-linux-gnu/nvidia-old/libcuda.so.535.104.05" "$B/usr/lib/x86_64-linux-gnu/"
ln -s libcuda.so.535.104.05 "$B/usr/lib/x86_64-linux-gnu/libcuda.so.1"
before_b=$(tree_hash "$B")
box run --driver-root "$H" --gpu 0 "$B" sh -c 'gpuprobe; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; nvidia-smi -L'
expect_match "a bound ROOTFS that ships an older driver: the host's loads, and its soname link is the host's" \
    "$rc:$out" $'^0:cuda_driver_version=12040\n(.*\n)*libcuda.so.550.54.14\nGPU 0: Tesla T4 '
expect_eq "... and the image is unchanged" "$(tree_hash "$B")" "$before_b"
# A driver installed under a prefix (/usr/local/nvidia/{lib64,bin}), with shell scripts of the
# tools' names in /usr/bin that exec them, as some GPU clouds lay it out.
box run --driver-root "$E2E_HOST_PREFIX" --gpu 0 "$R" sh -c 'nvidia-smi -L && gpuprobe && head -c 4 /usr/bin/nvidia-smi | tail -c 3'
expect_match "a driver under a prefix: nvidia-smi works inside, and CUDA loads" "$rc:$out" \
    $'^0:GPU 0: Tesla T4 [^\n]*\ncuda_driver_version=12040\n'
expect_match "... nvidia-smi is the driver's ELF tool, not the host's wrapper script" "$out" '^ELF$'
box doctor --driver-root "$E2E_HOST_NOUVM"
expect_eq "doctor fails on a broken host" "$rc" 1
expect_match "doctor names the missing node and the fix" "$out" $'^PROBLEM  /dev/nvidia-uvm is missing$'
expect_match "doctor says how to fix it" "$out" "fix: run 'nvidia-modprobe -u -c=0' as root"
box doctor --driver-root "$H"
expect_match "doctor reports the ignored older libraries" "$out" 'ok       6 driver libraries at version 550.54.14 \(ignored: 535.104.05\)'

# A FIFO where the image's ld.so.cache should be: read as no cache, never waited on.
F=$WORK/image-with-fifo
cp -a "$R" "$F"
rm -f "$F/etc/ld.so.cache" && mkfifo "$F/etc/ld.so.cache"
out=$(timeout -s KILL 60 "$GPUBOX" run --driver-root "$H" --gpu 0 "$F" gpuprobe 2>&1); rc=$?
expect_eq "an image whose ld.so.cache is a FIFO: the run does not hang" "$rc" 0
expect_match "... and the host's driver loads through gpubox's cache" "$out" '^cuda_driver_version=12040$'

# An image that ships its own, older driver: in the loader's directory and, through its own
# ld.so.cache, in another one. The host's driver must win both ways.
I=$WORK/image-with-driver
cp -a "$R" "$I"
mkdir -p "$I/opt/compat"
cp "$H/usr/lib/x86_64-linux-gnu/nvidia-old/libcuda.so.535.104.05" "$I/opt/compat/"
ln -s libcuda.so.535.104.05 "$I/opt/compat/libcuda.so.1"
cp "$I/opt/compat/libcuda.so.535.104.05" "$I/usr/lib/x86_64-linux-gnu/"
ln -s libcuda.so.535.104.05 "$I/usr/lib/x86_64-linux-gnu/libcuda.so.1"
"$FAKE_GPU_HOST" --write-ldcache "$I/etc/ld.so.cache" libcuda.so.1=/opt/compat/libcuda.so.1 \
    libc.so.6=/usr/lib/x86_64-linux-gnu/libc.so.6
before_i=$(tree_hash "$I")
box run --driver-root "$H" --gpu 0 "$I" gpuprobe
expect_match "without gpubox's cache the image's cache would win; with it the host's driver wins" "$out" $'^cuda_driver_version=12040$'
# A read-only root takes the GPU's entries in gpubox's layer too, below its own read-only one.
box run --driver-root "$H" --gpu 0 --read-only "$I" sh -c 'gpuprobe; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1'
expect_match "--read-only: the host's driver wins there too" "$out" $'^cuda_driver_version=12040\n.*\nlibcuda.so.550.54.14$'
expect_eq "the image that ships a driver is unchanged" "$(tree_hash "$I")" "$before_i"
box run "$I" gpuprobe
expect_match "(control: without --gpu the image's own old libcuda is what loads)" "$out" $'^cuda_driver_version=12020$'

# RHEL-like layout: glibc in /usr/lib64, found through the image's cache, and /usr/lib64 and
# /usr/bin mode 0555 as RHEL and Fedora ship them: the monitor, making the GPU's entries as the
# user, must not be shut out of the directories it makes in gpubox's layer.
L=$WORK/rhel
"$GPUBOX" rootfs create "$L" >/dev/null
mkdir -p "$L/usr/lib64"
mv "$L"/usr/lib/x86_64-linux-gnu/* "$L/usr/lib64/" && rmdir "$L/usr/lib/x86_64-linux-gnu"
install -m 0755 "$GPUPROBE" "$L/usr/bin/gpuprobe"
"$FAKE_GPU_HOST" --write-ldcache "$L/etc/ld.so.cache" libc.so.6=/usr/lib64/libc.so.6
chmod 0555 "$L/usr/lib64" "$L/usr/bin"
box run --driver-root "$H" --gpu 0 "$L" sh -c 'gpuprobe && ls /usr/lib64/libcuda.so.1 && stat -c "%a %n" /usr/lib64 /usr/bin && nvidia-smi -L'
expect_match "RHEL lib64 layout: libraries land in /usr/lib64 and load" "$rc:$out" $'^0:cuda_driver_version=12040\n.*libcuda_path=/usr/lib64/libcuda.so.550.54.14.*\n/usr/lib64/libcuda.so.1\n'
expect_match "RHEL's 0555 /usr/lib64 and /usr/bin keep their modes, and take the driver's files" "$out" $'\n555 /usr/lib64\n555 /usr/bin\nGPU 0: Tesla T4'
# Minimal layout: static busybox only.
M=$WORK/minimal
"$GPUBOX" rootfs create "$M" >/dev/null
rm -rf "$M/usr/lib/x86_64-linux-gnu" "$M/lib64"
box run --driver-root "$H" --gpu 0 "$M" sh -c 'nvidia-smi -L && ls /usr/lib64 | grep -c "^libcuda"'
expect_eq "minimal layout: tools work, libraries are placed" "$rc:$out" "0:GPU 0: Tesla T4 (UUID: $uuid0)
3"

# A hostile image: symlinks planted at the GPU's mount targets and on their way, pointing out
# of the image. The host's files must land inside the new root, and nothing outside it change.
X=$WORK/hostile
cp -a "$R" "$X"
mkdir -p "$WORK/victim" && echo untouched >"$WORK/victim/file"
lib=$X/usr/lib/x86_64-linux-gnu
ln -s "$WORK/victim/libcuda" "$lib/libcuda.so.550.54.14"          # a bind target
ln -s /etc/passwd "$lib/libcuda.so.1"                              # a soname link's place
ln -s "$WORK/victim/smi" "$X/usr/bin/nvidia-smi"                   # a tool's target
ln -s "$WORK/victim/ld.so.cache" "$X/etc/ld.so.cache"              # the cache gpubox writes
ln -s "../../../../../../../../$WORK/victim" "$X/usr/lib/firmware" # a parent, escaping upwards
before_x=$(tree_hash "$X")
before_v=$(tree_hash "$WORK/victim")
box run --driver-root "$H" --gpu 0 "$X" sh -c 'gpuprobe; nvidia-smi -L; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; ls /lib/firmware/nvidia/550.54.14'
expect_match "hostile links at the GPU's targets: the driver still loads, in the root" "$rc:$out" \
    $'^0:cuda_driver_version=12040\n(.*\n)*GPU 0: Tesla T4 [^\n]*\nlibcuda.so.550.54.14\ngsp_tu10x.bin$'
expect_eq "... nothing outside the image changed" "$(tree_hash "$WORK/victim")" "$before_v"
expect_eq "... and the image is unchanged" "$(tree_hash "$X")" "$before_x"

# Sandboxes started side by side: each one's mounts race the others' lookups. A ".." on the way
# to a mount target (here the image's library directory, a relative link) must still resolve:
# openat2 answers EAGAIN where a mount anywhere on the host raced a "..".
D=$WORK/dotdot
cp -a "$R" "$D"
mv "$D/usr/lib/x86_64-linux-gnu" "$D/usr/libreal"
ln -s ../../usr/libreal "$D/usr/lib/x86_64-linux-gnu"
for j in 1 2 3 4; do
    for i in $(seq 40); do
        "$GPUBOX" run --driver-root "$H" --gpu 0 "$D" true 2>>"$WORK/side-by-side.err" || echo "$?" >>"$WORK/side-by-side.rc"
    done &
done
wait
expect_eq "160 GPU sandboxes, 4 at a time, through a relative link with '..': none fails" \
    "$(cat "$WORK/side-by-side.rc" "$WORK/side-by-side.err" 2>/dev/null | sort | uniq -c | head -3)" ""
finish
