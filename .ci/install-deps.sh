#!/usr/bin/env bash
# The Debian 12 packages gpubox needs, from Debian's archive, on top of a minbase system
# (tools/fresh-root-check.sh checks that on a fresh root). Idempotent; run as root. Skips apt when
# every package is already installed.
#   .ci/install-deps.sh build   what building, installing, packaging and running gpubox needs
#                               (README's first command, examples/quickstart.sh)
#   .ci/install-deps.sh         that, and what the test suite and the benchmarks call
#                               (README's second command, tests/run-all.sh)
set -euo pipefail
# Build: compilers, CMake and the libraries gpubox links (catch2: the default build configures
# tests/, where quickstart finds the simulated GPU host); file: cpack -G DEB (dpkg-shlibdeps).
# Run: busybox-static (gpubox rootfs create), skopeo (gpubox pull), util-linux (setpriv),
# squashfs-tools (single-file images: pull --squashfs and export build them with mksquashfs,
# runs check them with unsquashfs, and unpack them where FUSE is closed), squashfuse (runs
# mount them through FUSE in the sandbox's user namespace; it brings libfuse3, and gpubox
# hands it the mounted /dev/fuse, so no fusermount3 and no fuse3 package is needed).
build=(build-essential cmake pkg-config libseccomp-dev libsystemd-dev
       libarchive-dev nettle-dev nlohmann-json3-dev catch2 file busybox-static skopeo util-linux
       squashfs-tools squashfuse libyaml-dev)  # CDI specs are YAML by default (nvidia-ctk writes /etc/cdi/nvidia.yaml)
tests=(clang libclang-rt-14-dev   # run-all.sh: unit tests under ASan/UBSan, libFuzzer smoke
       clang-format git           # tools/check-format.sh: clang-format 14 over `git ls-files`
       bsdutils procps time       # e2e: script(1) as a terminal, pgrep, /usr/bin/time
       python3                    # e2e: the OCI images, layer by layer (tests/e2e/*.py)
       zsh                        # test_install.sh: zsh completion
       slurm-wlm munge            # test_slurm.sh starts its own munged, slurmctld and slurmd
       # test_slurm_mpi.sh: Debian's Open MPI (mpicc, its libraries) and PMIx, which Slurm's
       # mpi/pmix plugin loads (srun --mpi=pmix), and MPICH (mpicc.mpich; srun --mpi=pmi2; Open
       # MPI stays the default mpicc); test_slurm_multinode.sh and bench/mpi.sh too, with two
       # nodes in network namespaces (ip, nsenter); ibverbs-utils: ibv_devices in test_rdma.sh
       openmpi-bin libopenmpi-dev libpmix-dev mpich libmpich-dev iproute2 ibverbs-utils
       # test_images_registry.sh and bench/images.sh: Debian's v2 registry server, htpasswd -B,
       # openssl for the test CA, umoci (the benchmark's peer)
       docker-registry apache2-utils openssl umoci
       mmdebstrap                 # test_install.sh and the VM test: fresh Debian 12 roots
       qemu-system-x86 e2fsprogs  # tests/vm: the systemd guest, its ext4 disks (mke2fs -d)
       bubblewrap hyperfine       # bench/: the peer and the timer
       strace                     # test_setup_calls.sh: what a run's set-up calls, in order
       # test_cdi_podman.sh: Debian's podman, rootless, with runc (crun refuses a hybrid cgroup
       # setup), vfs storage and no network, so uidmap for its user namespace
       podman runc uidmap)
case ${1:-all} in
    build) pkgs=("${build[@]}") ;;
    all) pkgs=("${build[@]}" "${tests[@]}") ;;
    *) echo "usage: install-deps.sh [build]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # The package enables a registry service on port 5000; the tests start their own on loopback.
    if [[ " ${missing[*]} " == *" docker-registry "* ]] && [ -d /run/systemd/system ]; then
        systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
    fi
fi
