#!/usr/bin/env bash
# What a limited run's set-up does, in calls, as strace sees them (no timing): what #31's
# performance work took out stays out. bench/vs_isolate.sh measures what it is worth.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
command -v strace >/dev/null || { echo "Bail out! strace is missing (.ci/install-deps.sh installs it)"; exit 1; }

T=$WORK/trace
strace -f -qq -o "$T" -e trace=openat,unshare,recvfrom,recvmsg,execve,seccomp,mkdirat,getdents64,socket,sendto,clone,clone3,readlink,wait4 \
    "$GPUBOX" run --time-limit 1 --wall-time-limit 5 --memory-limit 64M --pids-limit 8 "$R" true \
    >"$WORK/.out" 2>"$WORK/.err"
expect_eq "the traced run succeeds" "$?" 0
# The workload: the process that executes true (after gpubox's own exec; its path is not shown:
# until its exec the workload shares init's memory, which is not dumpable, so strace cannot read
# its arguments); init: the one that makes the network namespace.
wl=$(awk 'NR > 1 && $2 ~ /^execve\(/ {print $1; exit}' "$T")
init=$(grep -E '^[0-9]+ +unshare\(CLONE_NEWNET' "$T" | awk '{print $1}' | head -1)
check "strace saw the workload's exec and init's network namespace" test -n "$wl" -a -n "$init"

# Init makes the workload as posix_spawn would, sharing its memory until the workload's exec:
# no copy of init's page tables, no copy-on-write faults in either (isolate/spawn.hpp).
check "init makes the workload by clone(CLONE_VM | CLONE_VFORK), not fork" \
    grep -qE "^$init +clone\(.*flags=CLONE_VM\|CLONE_VFORK\|SIGCHLD" "$T"
# Which is safe while init catches no signal: a handler would run in the workload before its
# exec, on init's memory.
expect_eq "  and init catches no signal" \
    "$("$GPUBOX" run --time-limit 1 "$R" sh -c 'grep SigCgt /proc/1/status' 2>&1)" "SigCgt:	0000000000000000"

# Dropping every capability takes no file read: libcap-ng read /proc/self/status three times.
before_exec=$(awk -v p="$wl" '$1 == p' "$T" | sed -n '1,/execve(/p')
expect_no_match "the workload reads no /proc status before its exec" "$before_exec" '/status"'

# Init makes its network namespace (the costliest) while the monitor writes its id maps, not after
# the monitor's go.
first=$(awk -v p="$init" '$1 == p' "$T" | grep -m1 -oE 'unshare\(CLONE_NEWNET|recv(from|msg)\(')
expect_eq "init makes its network namespace before it takes the monitor's go" "$first" "unshare(CLONE_NEWNET"

# The limits' filter (memfd_create refused under a sampled memory limit) is folded into the
# default one: the kernel checks and compiles one program, not two.
expect_eq "the workload installs one seccomp filter" \
    "$(awk -v p="$wl" '$1 == p' "$T" | grep -c 'seccomp(SECCOMP_SET_MODE_FILTER')" 1

# Where the sandbox's cgroup is not ours to make (no delegation: the one mkdirat is refused), the
# cgroup search reads no controllers and lists no directory first: every limited run pays it.
refused=$(grep -nE 'mkdirat\([0-9]+, "gpubox-[0-9]+".*= -1 E(ACCES|PERM|ROFS)' "$T" | head -1 | cut -d: -f1)
if [ -n "$refused" ]; then
    expect_no_match "a cgroup not ours: the search reads and lists nothing before its mkdirat" \
        "$(sed -n "1,${refused}p" "$T" | grep -E 'cgroup\.controllers|getdents64')" .
else
    ok "a cgroup not ours: the search reads and lists nothing before its mkdirat # SKIP delegated here"
fi

# /proc/self/mountinfo, whose read has the kernel print every mount (~50 us): init reads it not
# (the monitor's go says whether ROOTFS has mounts below it, read while init makes its network
# namespace; init's paths are hidden from strace, its realpath's readlinks are not), and the
# cgroup search, before the monitor's clone3, not where statfs finds cgroup2 at its usual place.
mon=$(head -1 "$T" | awk '{print $1}')
expect_eq "init resolves ROOTFS's real path for no mountinfo search (no readlink)" \
    "$(awk -v p="$init" '$1 == p' "$T" | grep -c ' readlink(')" 0
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] ||
    [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
    expect_eq "  the cgroup search reads no mountinfo (before the monitor's clone3)" \
        "$(awk -v p="$mon" '$1 == p' "$T" | sed '/clone3(/q' | grep -c 'openat(.*/proc/self/mountinfo')" 0
else
    ok "  the cgroup search reads no mountinfo # SKIP no cgroup2 at /sys/fs/cgroup(/unified)"
fi
# What the host says of cgroups is read once a run: the cgroup search and the autogroup check
# (a sampled CPU limit) share one read of /proc/self/cgroup.
expect_eq "the monitor reads /proc/self/cgroup once before its clone3" \
    "$(awk -v p="$mon" '$1 == p' "$T" | sed '/clone3(/q' | grep -c 'openat(.*/proc/self/cgroup"')" 1

# The last pass of a run where nothing outlived the workload comes once init is reaped, when the
# kernel has emptied the sandbox's pid namespace: it lists no /proc (Sampler::set_ended). Old
# build (f864c63): two getdents64 after the monitor's wait4 of init, finding no pid.
reaped=$(awk -v p="$mon" '$1 == p' "$T" | grep -nE 'wait4\([0-9]+,' | tail -1 | cut -d: -f1)
check "the monitor's wait4 of init is in the trace" test -n "$reaped"
expect_eq "  and the last pass after it lists no directory" \
    "$(awk -v p="$mon" '$1 == p' "$T" | sed -n "${reaped:-\$},\$p" | grep -c 'getdents64(')" 0

# The socket meter: under a memory limit, a sock_diag socket in the sandbox's network namespace
# (its line may end "<unfinished ...>" where another traced call came between).
# A sandbox with no socket is dumped for nothing: neither while it runs nor after init's exit,
# when its sockstat, opened while init lived, still says so (a dump of TCP walks the whole
# host's hash table).
expect_eq "a memory limit: init makes the sock_diag meter" \
    "$(awk -v p="$init" '$1 == p' "$T" | grep -c 'socket(AF_NETLINK, [^)]*NETLINK_SOCK_DIAG')" 1
expect_eq "  a sandbox without sockets: no TCP or UDP dump, during the run or after it" \
    "$(grep -cE 'sendto\(.*sdiag_family=AF_INET' "$T")" 0

# A wall-clock limit is a timer, and RLIMIT_NPROC counts the sandbox's processes in its user
# namespace (the caller is not the host's root): no cgroup is looked for, no socket meter made.
strace -f -qq -o "$T" -e trace=mkdirat,socket,connect,newfstatat \
    "$GPUBOX" run --wall-time-limit 5 --pids-limit 8 "$R" true >"$WORK/.out" 2>"$WORK/.err"
expect_eq "a run with a wall-clock and a pids limit succeeds" "$?" 0
expect_no_match "  it looks for no cgroup (no mkdirat of one, no user bus)" \
    "$(grep -E 'mkdirat\([0-9]+, "gpubox-|/bus"' "$T")" .
expect_no_match "  and makes no socket meter" "$(grep -E 'NETLINK_SOCK_DIAG' "$T")" .

# A plain run's mount set-up: init's calls from its first fsopen to pivot_root (strace sees their
# names and results only: init is not dumpable). Where the kernel has open_tree_attr (6.15),
# each clone takes its attributes in that one call (no open_tree + mount_setattr pair; the one
# mount_setattr left seals /dev), and gpubox's tmpfs directories are made with their modes
# (the one chmod left is the overlay's upper directory taking ROOTFS's mode).
P=$WORK/trace-plain
strace -f -qq -o "$P" "$GPUBOX" run "$R" true >"$WORK/.out" 2>"$WORK/.err"
expect_eq "the traced plain run succeeds" "$?" 0
init=$(grep -E '^[0-9]+ +unshare\(CLONE_NEWNET' "$P" | awk '{print $1}' | head -1)
mounts=$(awk -v p="$init" '$1 == p' "$P" | grep -v 'resumed>' | sed -n '/fsopen(/,/pivot_root(/p')
if grep -qE '(open_tree_attr|syscall_0x1d3)\(.*= (0x[0-9a-f]+|[0-9]+)$' <<<"$mounts"; then
    expect_eq "the mount set-up: no open_tree without its attributes" \
        "$(grep -c ' open_tree(' <<<"$mounts")" 0
    expect_eq "the mount set-up: one mount_setattr (/dev sealed)" \
        "$(grep -c ' mount_setattr(' <<<"$mounts")" 1
else
    ok "the mount set-up: no open_tree without its attributes # SKIP no open_tree_attr here"
    ok "the mount set-up: one mount_setattr (/dev sealed) # SKIP no open_tree_attr here"
fi
expect_eq "the mount set-up: one chmod (the overlay's upper directory)" \
    "$(grep -cE ' fchmod(at)?\(' <<<"$mounts")" 1
echo "# init's mount set-up: $(wc -l <<<"$mounts") calls"
# The monitor's read-only view of ROOTFS (init's first recursive clone of it) is attached in
# init's mount namespace, over the overlay's lower layer: closing a detached tree dissolves it,
# an RCU grace period every run, off the monitor's CPU and ahead of init's old-root detach.
F=$WORK/trace-ff
strace -ff -qq -o "$F" "$GPUBOX" run "$R" true \
    >"$WORK/.out" 2>"$WORK/.err"
expect_eq "the run traced per process succeeds" "$?" 0
ft=$(grep -l 'unshare(CLONE_NEWNET' "$F".* | head -1)
view=$(grep -m1 -E '(open_tree_attr|open_tree|syscall_0x1d3)\([^,]+, [^,]+, (0x88001|[A-Z_|]*AT_RECURSIVE)' "$ft" |
    sed -E 's/.*= (0x[0-9a-f]+|[0-9]+)$/\1/')
check "  the monitor's view of ROOTFS is attached in init's mount namespace" \
    grep -qE "^move_mount\($((view)), .*= 0$" "$ft"
rm -f "$F".*

# Without --gpu the preflight checks the command against the CPU only: the monitor reads none of
# the image's CUDA files (its ld.so.cache included) nor the driver's version, every run.
monitor=$(awk -v p="$(head -1 "$P" | awk '{print $1}')" '$1 == p' "$P")
expect_eq "a run without --gpu: the monitor reads no CUDA file nor the driver's version" \
    "$(grep -oE '"[^"]*(ld\.so\.cache|/cuda|nvidia/version)[^"]*"' <<<"$monitor" | tr '\n' ' ')" ""
# It maps the command (found through PATH) once, for the search and its ELF facts both.
expect_eq "the preflight maps the command once" \
    "$(grep -cE 'mmap\(NULL, [0-9]+, PROT_READ, MAP_PRIVATE, [0-9]+, 0' <<<"$monitor")" 1

# An idle sandbox's passes (a memory limit: one every 23 ms at 64M) read each process's schedstat
# alone while none ran since the last pass (isolate::Sampler::nothing_ran): its stat is not read
# again. The sleeper is pid 2 of the sandbox; its stat begins "2 (sleep)". Old build: a stat read
# each pass (about 40 a second). (-s 64: a schedstat under load is longer than 16 bytes.)
# Nor is the sandbox's /proc listed again after a quiet pass, by the pass or by the walk of the
# processes' fds and mappings (isolate/kernel_walk.hpp), the monitor's or a thread's: nothing
# ran, so nothing forked nor opened (build 4e225cc: 47 getdents64 a second, one each pass;
# where the walk had moved to a thread, 66589aa: 4 more each 100 ms). Counted from the first
# pass that sees the sleeper asleep: on a loaded host its start-up (under strace) takes passes
# of its own, each rightly reading it all.
Q=$WORK/quiet
strace -f -qq -o "$Q" -e trace=pread64,getdents64 -s 64 \
    "$GPUBOX" run --time-limit 5 --memory-limit 64M "$R" sleep 2 >"$WORK/.out" 2>"$WORK/.err"
expect_eq "the idle run succeeds" "$?" 0
asleep=$(grep -nm1 -E 'pread64\([0-9]+, "2 \(sleep\) S ' "$Q" | cut -d: -f1)
idle=$(sed -n "${asleep:-\$}"',$p' "$Q")
passes=$(grep -cE 'pread64\([0-9]+, "[0-9]+ [0-9]+ [0-9]' <<<"$idle")  # sum_exec_runtime run_delay pcount
stats=$(grep -cE 'pread64\([0-9]+, "2 \(sleep\) ' <<<"$idle")
check "asleep, the monitor read the sleeper's schedstat at least 10 times (passes: $passes)" \
    test "$passes" -ge 10
check "  and its stat at most 4 times ($stats): an idle pass reads no stat" test "$stats" -le 4
lists=$(grep -c 'getdents64(' <<<"$idle")
check "  and lists directories at most 12 times ($lists): an idle pass lists nothing" \
    test "$lists" -le 12
rm -f "$Q"

finish
