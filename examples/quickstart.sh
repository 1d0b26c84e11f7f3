#!/usr/bin/env bash
# README's first command: install what building and running gpubox needs (not the test suite's
# tools: tests/run-all.sh adds those), build it, install it to /usr/local (as root),
# make the default rootfs, and run gpubox's main job, `gpubox run --gpu 0 ROOTFS nvidia-smi -L`, as an unprivileged user.
# On a host without an NVIDIA GPU it runs the same job against the simulated GPU host that the
# test suite uses (--driver-root), and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target gpubox gpubox_man fake-gpu-host gpuprobe probe >/dev/null
echo "built: $(./build/launcher/gpubox --version)"
# On PATH for everyone, like any tool: /usr/local/bin/gpubox, gpubox(1), bash and zsh completion,
# and the AppArmor profile where AppArmor 4 is in use. (Or a package: cd build && cpack -G DEB.)
if [ "$(id -u)" = 0 ]; then
    cmake --install build --strip >/dev/null
    echo "installed: $(command -v gpubox) (man gpubox; completion in new shells)"
else
    echo "not root: gpubox stays at build/launcher/gpubox; 'sudo cmake --install build' puts it on PATH"
fi

demo=$(mktemp -d /tmp/gpubox-quickstart.XXXXXX)
chmod 0755 "$demo"
install -m 0755 build/launcher/gpubox "$demo/gpubox"
runas=()
if [ "$(id -u)" = 0 ]; then
    runas=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
    mkdir "$demo/home" && chown 65534:65534 "$demo/home"
fi
"${runas[@]}" "$demo/gpubox" rootfs create "$demo/home/rootfs" 2>/dev/null ||
    { mkdir -p "$demo/home"; "$demo/gpubox" rootfs create "$demo/home/rootfs"; }
install -m 0755 build/tests/gpuprobe "$demo/home/rootfs/usr/bin/gpuprobe"
echo "default rootfs: $demo/home/rootfs (busybox + the host's glibc, no driver files)"

if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null; then
    echo "== real NVIDIA GPU found: host GPUs"
    nvidia-smi -L
    driver=()
else
    echo "== no NVIDIA GPU here: using the SIMULATED GPU host from the test suite"
    echo "   (4 NVIDIA GPUs, Device Minors out of PCI order, tiny real driver libraries 550.54.14)"
    build/tests/fake-gpu-host "$demo/simulated-host" --gpus 4
    driver=(--driver-root "$demo/simulated-host")
fi
echo "== gpubox list"
"${runas[@]}" "$demo/gpubox" list "${driver[@]}"
echo "== as uid $("${runas[@]}" id -u): gpubox run --gpu 0 ROOTFS nvidia-smi -L"
"${runas[@]}" "$demo/gpubox" run "${driver[@]}" --gpu 0 "$demo/home/rootfs" nvidia-smi -L
echo "== inside the sandbox: GPU nodes, driver answers, identity"
"${runas[@]}" "$demo/gpubox" run "${driver[@]}" --gpu 0 "$demo/home/rootfs" sh -c \
    'ls -l /dev/nvidia* | sed "s/^/  /"; gpuprobe | sed "s/^/  /"; grep -E "^(Uid|CapEff|NoNewPrivs|Seccomp)" /proc/self/status | sed "s/^/  /"'
rm -rf "$demo"
echo "quickstart done"
