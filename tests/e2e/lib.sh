# Sourced by every tests/e2e/test_*.sh. Runs the real gpubox binary as an unprivileged user:
# when started as root (CI), it copies the binary, the probe and the scripts to a temp dir and
# re-runs the script as uid/gid 65534 with no capabilities and no supplementary groups, with the
# checkout and the build directory out of its sight (below).
set -u
: "${GPUBOX:?set GPUBOX to the gpubox binary}" "${PROBE:?set PROBE to the probe binary}"
E2E_DIR=${E2E_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
# must_work: the suite must not skip (CI: GPUBOX_TESTS_MUST_WORK=1). skip REASON: the test
# cannot run here: "1..0 # SKIP REASON", exit 77; where it must work, a Bail out! instead.
# bail REASON: the test's set-up failed.
must_work() { [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ]; }
skip() { if must_work; then echo "Bail out! $*"; exit 1; fi; echo "1..0 # SKIP $*"; exit 77; }
bail() { echo "Bail out! $*"; exit 1; }

if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ] && [ "${E2E_AS_ROOT:-0}" != 1 ]; then
    top=$(mktemp -d /tmp/gpubox-e2e.XXXXXX)
    chmod 0755 "$top"
    install -m 0755 "$GPUBOX" "$top/gpubox"
    # its sd-bus helper, beside it as gpubox expects
    [ -x "$(dirname "$GPUBOX")/gpubox-scope" ] && install -m 0755 "$(dirname "$GPUBOX")/gpubox-scope" "$top/"
    # and its image unpacker (gpubox pull)
    [ -x "$(dirname "$GPUBOX")/gpubox-unpack" ] && install -m 0755 "$(dirname "$GPUBOX")/gpubox-unpack" "$top/"
    # and its NVML helper (list, doctor, --gpu MIG-<uuid>)
    [ -x "$(dirname "$GPUBOX")/gpubox-nvml" ] && install -m 0755 "$(dirname "$GPUBOX")/gpubox-nvml" "$top/"
    install -m 0755 "$PROBE" "$top/probe"
    extra=()
    if [ -n "${GPUPROBE:-}" ]; then
        install -m 0755 "$GPUPROBE" "$top/gpuprobe"
        install -m 0755 "$FAKE_GPU_HOST" "$top/fake-gpu-host"
        extra+=(GPUPROBE="$top/gpuprobe" FAKE_GPU_HOST="$top/fake-gpu-host")
        # The simulated GPU hosts need root (character nodes, chrooted ldconfig): build them
        # here, root-owned like a real driver installation, before dropping privileges.
        if [ "${E2E_FAKE_HOSTS:-0}" = 1 ]; then
            "$FAKE_GPU_HOST" "$top/host" --gpus 4 && "$FAKE_GPU_HOST" "$top/host-nouvm" --gpus 2 --no-uvm &&
                "$FAKE_GPU_HOST" "$top/host-noinfo" --gpus 2 &&
                rm "$top/host-noinfo/proc/driver/nvidia/gpus/0000:3b:00.0/information" &&
                "$FAKE_GPU_HOST" "$top/host-odd" --gpus 2 && mkdir "$top/host-odd/proc/driver/nvidia/gpus/odd" &&
                "$FAKE_GPU_HOST" "$top/host-mig" --gpus 2 --mig &&
                "$FAKE_GPU_HOST" "$top/host-prefix" --gpus 2 --prefix /usr/local/nvidia &&
                "$FAKE_GPU_HOST" "$top/host-a100" --gpus 2 --model 1:0x20b0:"NVIDIA A100-SXM4-80GB" &&
                "$FAKE_GPU_HOST" "$top/host-mig4" --gpus 4 --mig && chown -R 65534:65534 "$top/host-mig4" ||
                { echo "Bail out! fake-gpu-host failed"; exit 1; }
            extra+=(E2E_HOST="$top/host" E2E_HOST_NOUVM="$top/host-nouvm" E2E_HOST_NOINFO="$top/host-noinfo"
                    E2E_HOST_ODD="$top/host-odd" E2E_HOST_MIG="$top/host-mig" E2E_HOST_PREFIX="$top/host-prefix"
                    E2E_HOST_A100="$top/host-a100" E2E_HOST_MIG4="$top/host-mig4")
            # A ROOTFS with a mount below it, as the host's "/" has: gpubox binds such a root
            # instead of overlaying it. The user's, so that the test can fill it.
            "$GPUBOX" rootfs create "$top/bound" >/dev/null && mkdir "$top/bound/mnt" &&
                mount -t tmpfs -o size=64k gpubox-e2e "$top/bound/mnt" && chown -R 65534:65534 "$top/bound" ||
                { echo "Bail out! cannot make a ROOTFS with a mount below it"; exit 1; }
            extra+=(E2E_BOUND_ROOTFS="$top/bound")
        fi
    fi
    # E2E_METER=1: an independent meter of what the test's processes really use, gpubox's
    # sandboxes included: cgroup v1 cpuacct and memory groups (the CI machine has them), made
    # here as root, which the unprivileged test reads and resets. They limit nothing, and gpubox
    # never looks at cgroup v1, so it runs as on any host without a delegated cgroup.
    meters=()
    if [ "${E2E_METER:-0}" = 1 ]; then
        for ctl in cpuacct memory; do
            base=/sys/fs/cgroup/$ctl$(sed -n "s/^[0-9]*:\([^:]*,\)*$ctl\(,[^:]*\)*://p" /proc/self/cgroup)
            [ -d "$base" ] || continue
            # Meters of runs that were killed before their cleanup (a test timeout): their owner is gone.
            for stale in "$base"/gpubox-e2e-*; do
                [ -d "$stale" ] && ! kill -0 "${stale##*-}" 2>/dev/null && rmdir "$stale" 2>/dev/null
            done
            mkdir -p "$base/gpubox-e2e-$$" && echo $$ >"$base/gpubox-e2e-$$/cgroup.procs" || continue
            meters+=("$base")
            [ "$ctl" = memory ] && chown 65534 "$base/gpubox-e2e-$$/memory.max_usage_in_bytes" &&
                extra+=(E2E_MEMCG="$base/gpubox-e2e-$$")
            [ "$ctl" = cpuacct ] && extra+=(E2E_CPUACCT="$base/gpubox-e2e-$$")
        done
    fi
    # E2E_CPU_CGROUP=1: a child cgroup of the cpu controller (cgroup v1 `cpu`, below this
    # script's own), which the unprivileged test may move its own processes into (a subshell that
    # writes its pid to $E2E_CPUCG/cgroup.procs). In the root cpu cgroup each session is an
    # autogroup of its own and shares the CPU as one; in a child cgroup (a CI job's, a systemd
    # service's) autogroup does not apply and every task counts alike: both must be tested.
    cpu_cgroup=
    if [ "${E2E_CPU_CGROUP:-0}" = 1 ]; then
        base=/sys/fs/cgroup/cpu$(sed -n 's/^[0-9]*:\([^:]*,\)*cpu\(,[^:]*\)*://p' /proc/self/cgroup)
        for stale in "${base%/}"/gpubox-e2e-cpu-*; do
            [ -d "$stale" ] && ! kill -0 "${stale##*-}" 2>/dev/null && rmdir "$stale" 2>/dev/null
        done
        if [ -w "$base/cgroup.procs" ] && mkdir "${base%/}/gpubox-e2e-cpu-$$" 2>/dev/null; then
            cpu_cgroup=${base%/}/gpubox-e2e-cpu-$$
            chown 65534 "$cpu_cgroup/cgroup.procs" && extra+=(E2E_CPUCG="$cpu_cgroup")
        fi
    fi
    for f in "$E2E_DIR"/*.sh "$E2E_DIR"/*.c "$E2E_DIR"/*.py; do [ -e "$f" ] && install -m 0644 "$f" "$top/"; done
    [ -d "$E2E_DIR/../../examples" ] && cp -r "$E2E_DIR/../../examples" "$top/examples"
    [ -d "$E2E_DIR/../fixtures/cdi" ] && cp -r "$E2E_DIR/../fixtures/cdi" "$top/cdi-fixtures"
    # README and docs/, whose examples test_doc_examples.sh runs
    [ -d "$E2E_DIR/../../docs" ] && mkdir "$top/doc-src" && cp "$E2E_DIR/../../README.md" "$top/doc-src/" &&
        cp -r "$E2E_DIR/../../docs" "$top/doc-src/docs"
    mkdir "$top/work" && chown 65534:65534 "$top/work"
    # The unprivileged part reads nothing of the checkout or the build directory, which may be
    # where uid 65534 cannot go (a clone in root's home, mode 0700): it runs in a mount namespace
    # where both are hidden under an empty root-only tmpfs, wherever they are, and starts in its
    # own working directory.
    src=$(cd "$E2E_DIR/../.." && pwd) build=$(cd "$(dirname "$GPUBOX")/.." && pwd)
    hide=("$src")
    case $build/ in "$src"/*) ;; *) hide+=("$build") ;; esac  # (a build below the checkout goes with it)
    for d in "${hide[@]}"; do
        # never hide the test's own directory (nor "/": a GPUBOX=/tmp/gpubox's build is "/",
        # and a tmpfs over the root is a chroot, where no user namespace can be made)
        under=${d%/}/
        case $top/ in "$under"*) hide=() ;; esac
    done
    cd "$top/work" || exit 1
    unshare --mount --propagation private -- bash -c '
        n=$1; shift
        for ((i = 0; i < n; i++)); do
            mount -t tmpfs -o mode=0700,size=4k gpubox-e2e-hidden "$1" ||
                { echo "Bail out! cannot hide $1 from the unprivileged part (a tmpfs over it)"; exit 1; }
            shift
        done
        exec "$@"' _ "${#hide[@]}" "${hide[@]}" \
        setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
        env GPUBOX_E2E_UNPRIVILEGED=1 GPUBOX="$top/gpubox" PROBE="$top/probe" E2E_DIR="$top" \
        TMPDIR="$top/work" "${extra[@]}" bash "$top/$(basename "$0")"
    rc=$?
    if [ -n "$cpu_cgroup" ]; then  # what is left in it (nothing, when the test passed) goes up
        while read -r p; do echo "$p" >"${cpu_cgroup%/*}/cgroup.procs"; done <"$cpu_cgroup/cgroup.procs"
        rmdir "$cpu_cgroup"
    fi
    for base in "${meters[@]}"; do
        echo $$ >"$base/cgroup.procs" && rmdir "$base/gpubox-e2e-$$"
    done
    if [ -d "$top/bound/mnt" ]; then umount "$top/bound/mnt"; fi
    rm -rf "$top"
    exit $rc
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpubox-e2e.XXXXXX")
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1)); failed=$((failed + 1))
    echo "not ok $n - $1"
    shift
    for line in "$@"; do printf '#   %s\n' "$line"; done
}
# check DESC COMMAND...: passes when COMMAND exits 0.
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d" "command: $*"; fi; }
# expect_eq DESC GOT WANT
expect_eq() {
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "got:  $(printf %q "$2")" "want: $(printf %q "$3")"; fi
}
# matches TEXT EXTENDED-REGEX: a one-line regex matches any line of TEXT (^ and $ anchor lines);
# a regex spanning lines matches TEXT as one string (^ and $ anchor its ends; . matches a
# newline). grep would take each line of such a regex as a pattern of its own, any one enough.
matches() {
    if [[ $2 == *$'\n'* ]]; then [[ $1 =~ $2 ]]; else printf '%s\n' "$1" | grep -Eq -- "$2"; fi
}
# expect_match DESC TEXT EXTENDED-REGEX
expect_match() {
    if matches "$2" "$3"; then ok "$1"; else not_ok "$1" "text: $(printf %q "$2")" "want: /$3/"; fi
}
expect_no_match() {
    if matches "$2" "$3"; then not_ok "$1" "text: $(printf %q "$2")" "must not match: /$3/"; else ok "$1"; fi
}

# box ARGS...: run gpubox; sets $rc, $out, $err.
box() {
    "$GPUBOX" "$@" >"$WORK/.out" 2>"$WORK/.err"
    rc=$?
    out=$(cat "$WORK/.out")
    err=$(cat "$WORK/.err")
}

# wait_until SECONDS COMMAND...: COMMAND, every 0.1 s, until it succeeds (0) or SECONDS of wall
# time have passed (1). For waiting on an event: the cap is a margin for a loaded machine and
# costs nothing when the event comes.
wait_until() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

# meter_start / meter_stop: what the commands in between really used, by the root harness's
# cgroup v1 meters (E2E_METER=1): $used_cpu (seconds) and $used_mem_mib (peak above the start).
# have_meter says whether there are meters (always in CI, where the suite runs as root).
# leftovers PATTERN: the pids of processes matching PATTERN (pgrep -f) that this test started,
# its sandboxes' included: those in its cgroup v1 cpuacct group or below it (E2E_METER=1 put the
# test there; gpubox never moves a process in a v1 hierarchy). Another suite's processes on the
# same host (a fresh-root check beside this one: pgrep sees into every pid namespace below ours)
# are in a group of their own. Without a cpuacct hierarchy, every match.
cpuacct_of() { sed -n 's/^[0-9]*:\([^:]*,\)*cpuacct\(,[^:]*\)*://p' "$1" 2>/dev/null; }
leftovers() {
    local mine p
    mine=$(cpuacct_of /proc/self/cgroup)
    mine=${mine%/}
    for p in $(pgrep -f -- "$1"); do
        [ "$p" = "$$" ] && continue
        case "$(cpuacct_of "/proc/$p/cgroup")/" in "$mine"/*) echo "$p" ;; esac
    done
}
have_meter() { [ -n "${E2E_CPUACCT:-}" ] && [ -n "${E2E_MEMCG:-}" ]; }
meter_start() {
    have_meter || return 0
    # What the last run held is freed after it ends, some of it late (files through task work,
    # slab through RCU callbacks, later still under load): a reset while it falls would charge
    # this run the fall (the peak is reset to the usage then, the base read after). Wait, up to
    # 3 s, until the usage stops falling.
    local was now i
    now=$(cat "$E2E_MEMCG/memory.usage_in_bytes")
    for i in $(seq 60); do
        was=$now
        sleep 0.05
        now=$(cat "$E2E_MEMCG/memory.usage_in_bytes")
        [ "$now" -ge $((was - (256 << 10))) ] && break
    done
    echo 0 >"$E2E_MEMCG/memory.max_usage_in_bytes"
    meter_mem0=$(cat "$E2E_MEMCG/memory.usage_in_bytes")
    meter_cpu0=$(cat "$E2E_CPUACCT/cpuacct.usage")
}
meter_stop() {
    have_meter || return 0
    used_cpu=$(awk -v a="$meter_cpu0" -v b="$(cat "$E2E_CPUACCT/cpuacct.usage")" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    used_mem_mib=$(( ($(cat "$E2E_MEMCG/memory.max_usage_in_bytes") - meter_mem0) >> 20 ))
}

# field NAME / mechanism LIMIT / limit_value LIMIT: a value from the JSON verdict in $M (gpubox's
# own 2-space layout).
field() { grep -E "^  \"$1\":" "$M" | sed -E 's/^  "[^"]*": //; s/,$//; s/^"//; s/"$//'; }
# perf_lent: whether the kernel lends gpubox a count of the workload's CPU here
# (kernel.perf_event_paranoid <= 2; isolate/tree_clock.hpp). cpu_counted_re: a CPU limit's
# mechanism without a cgroup, then: the sum over /proc, a child the kernel reaps charged by that
# count (at most an upper bound), else the upper bound alone.
perf_lent() { [ "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 9)" -le 2 ]; }
cpu_counted_re() {
    local charged="an upper bound"
    perf_lent && charged="what the kernel's count of the workload's CPU"
    echo "^sum over the sandbox's processes .*read by the monitor every 10 ms.* is charged $charged"
}
mechanism() { grep -A2 "\"$1\": {" "$M" | grep mechanism | sed -E 's/.*"mechanism": "(.*)",?/\1/'; }
limit_value() { grep -A2 "\"$1\": {" "$M" | grep '"value"' | sed -E 's/.*"value": ([^,]*),?/\1/'; }

# make_rootfs DIR: gpubox's default rootfs plus the static probe.
make_rootfs() {
    "$GPUBOX" rootfs create "$1" >/dev/null || { echo "Bail out! rootfs create failed"; exit 1; }
    install -m 0755 "$PROBE" "$1/usr/bin/probe"
}

# tree_hash DIR: content, type, mode, owner, size, mtime and link target of every entry.
tree_hash() {
    (cd "$1" && find . -printf '%p %y %m %U %G %s %T@ %l\n' | LC_ALL=C sort &&
        find . -type f -exec sha256sum {} + | LC_ALL=C sort) | sha256sum | cut -d' ' -f1
}

# Skip (77) only where user namespaces really are unavailable, and never in CI.
require_userns() {
    if ! "$GPUBOX" run "$1" true 2>"$WORK/.userns"; then
        if grep -q "user namespace" "$WORK/.userns" && [ "${GPUBOX_TESTS_MUST_WORK:-0}" != 1 ]; then
            echo "1..0 # SKIP user namespaces unavailable: $(head -1 "$WORK/.userns")"
            exit 77
        fi
        echo "Bail out! gpubox cannot run a trivial sandbox: $(cat "$WORK/.userns")"
        exit 1
    fi
}

finish() {
    echo "1..$n"
    echo "$((n - failed)) passed, $failed failed"
    [ "$failed" = 0 ]
}
