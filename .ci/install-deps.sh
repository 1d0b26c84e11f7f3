#!/usr/bin/env bash
# Everything gpubox needs to build, test and benchmark on Debian 12, from Debian's archive.
# Idempotent; run as root. Skips apt when every package is already installed.
set -euo pipefail
# clang-format: tools/check-format.sh (clang-format 14, the version .clang-format is tuned for).
pkgs=(build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
      libcap-ng-dev libseccomp-dev catch2 nlohmann-json3-dev
      busybox-static util-linux bsdutils procps iproute2 bubblewrap hyperfine time
      libsystemd-dev qemu-system-x86 mmdebstrap e2fsprogs
      skopeo libarchive-dev nettle-dev python3  # gpubox pull: skopeo fetches, gpubox-unpack unpacks
      slurm-wlm munge)  # tests/e2e/test_slurm.sh starts its own munged, slurmctld and slurmd
pkgs+=(zsh)  # tests/e2e/test_install.sh: zsh completion
# CDI specs are YAML by default (nvidia-ctk writes /etc/cdi/nvidia.yaml): yaml-cpp, linked from
# its static archive. tests/e2e/test_cdi_podman.sh: Debian's podman, rootless, with runc (crun
# refuses a hybrid cgroup setup), vfs storage and no network, so uidmap for its user namespace.
pkgs+=(libyaml-cpp-dev podman runc uidmap)
# tests/e2e/test_images_registry.sh and bench/images.sh: Debian's v2 registry server to pull from,
# skopeo to push, umoci (the benchmark's peer), htpasswd -B, openssl for the test CA, python3 to
# craft the layer tars.
pkgs+=(docker-registry skopeo umoci apache2-utils openssl python3)
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
