#!/usr/bin/env bash
# README's first command: install what building and running gpubox needs (not the test suite's
# tools: tests/run-all.sh adds those), build it, install it to /usr/local (as root),
# make the default rootfs, and run gpubox's main job, `gpubox run --gpu 0 ROOTFS nvidia-smi -L`, as an unprivileged user.
# On a host without an NVIDIA GPU it runs the same job against the simulated GPU host that the
# test suite uses (--driver-root), and says so.
# Each step says what it does and about how long it takes (measured from a fresh Debian 12 root
# on a 2-core VM: 6 to 7.5 minutes in all, most of it compiling; far longer on a busy host). The compiler's and linker's
# output goes to build/quickstart-build.log, shown only if the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
cores=$(nproc)
t_step=$SECONDS
step() { printf '==> [%s/5] %s\n' "$1" "$2"; t_step=$SECONDS; }
done_step() { printf '    done (%d s)\n' $((SECONDS - t_step)); }

step 1 "Debian packages that building and running gpubox needs (.ci/install-deps.sh build: compilers, CMake, libseccomp, skopeo, busybox-static...): about 1-2 min on a fresh host, nothing when they are installed"
bash .ci/install-deps.sh build
done_step

# About 10 CPU-minutes of compiling (measured: about 5 min on 2 cores).
step 2 "building gpubox (about $(((10 + cores - 1) / cores)) min with $cores cores; the compiler's output: build/quickstart-build.log)"
mkdir -p build
log=build/quickstart-build.log
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build build -j"$cores" --target gpubox gpubox_man fake-gpu-host gpuprobe probe; } >"$log" 2>&1; then
    echo "quickstart: the build failed; the end of $log:" >&2
    tail -40 "$log" >&2
    exit 1
fi
done_step
echo "    built: $(./build/launcher/gpubox --version)"

# On PATH for everyone, like any tool: /usr/local/bin/gpubox, gpubox(1), bash and zsh completion,
# and the AppArmor profile where AppArmor 4 is in use. (Or a package: cd build && cpack -G DEB.)
step 3 "installing to /usr/local (a few seconds)"
if [ "$(id -u)" = 0 ]; then
    cmake --install build --strip >/dev/null
    echo "    installed: $(command -v gpubox) (man gpubox; completion in new shells)"
else
    echo "    not root: gpubox stays at build/launcher/gpubox; 'sudo cmake --install build' puts it on PATH"
fi

step 4 "the default rootfs: busybox and the host's glibc, offline (a second)"
demo=$(mktemp -d /tmp/gpubox-quickstart.XXXXXX)
chmod 0755 "$demo"
install -m 0755 build/launcher/gpubox "$demo/gpubox"
runas=()
if [ "$(id -u)" = 0 ]; then
    runas=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
    mkdir "$demo/home" && chown 65534:65534 "$demo/home"
fi
"${runas[@]}" "$demo/gpubox" rootfs create "$demo/home/rootfs" >/dev/null 2>&1 ||
    { mkdir -p "$demo/home"; "$demo/gpubox" rootfs create "$demo/home/rootfs" >/dev/null; }
install -m 0755 build/tests/gpuprobe "$demo/home/rootfs/usr/bin/gpuprobe"
echo "    default rootfs: $demo/home/rootfs (busybox + the host's glibc, no driver files)"
step 5 "gpubox's main job, as an unprivileged user (seconds)"

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
