#!/usr/bin/env bash
# What the workload can see and do: identity, privileges, pids, network, files, syscalls.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
me=$(id -u); mygid=$(id -g)

box run "$R" probe status
expect_match "CapEff is zero" "$out" $'^CapEff:\t0000000000000000$'
expect_match "CapPrm is zero" "$out" $'^CapPrm:\t0000000000000000$'
expect_match "CapBnd is zero" "$out" $'^CapBnd:\t0000000000000000$'
expect_match "CapAmb is zero" "$out" $'^CapAmb:\t0000000000000000$'
expect_match "NoNewPrivs is 1" "$out" $'^NoNewPrivs:\t1$'
expect_match "Seccomp is 2 (filter)" "$out" $'^Seccomp:\t2$'
expect_match "the caller's uid appears unchanged" "$out" "^Uid:"$'\t'"$me"$'\t'"$me"
expect_match "the caller's gid appears unchanged" "$out" "^Gid:"$'\t'"$mygid"$'\t'"$mygid"
box run --root "$R" probe status
expect_match "--root maps the caller to uid 0" "$out" $'^Uid:\t0\t0'
expect_match "--root still has no capabilities" "$out" $'^CapEff:\t0000000000000000$'
box run --no-seccomp "$R" probe status
expect_match "--no-seccomp turns the filter off" "$out" $'^Seccomp:\t0$'

box run "$R" probe pids
expect_eq "only the sandbox's pids are visible (init and the workload)" "$(echo $out)" "1 2"
box run "$R" probe ls /sys/class/net
expect_eq "only lo in the network namespace" "$out" "lo"
box run "$R" cat /sys/class/net/lo/operstate /sys/class/net/lo/flags
expect_match "lo is up" "$out" '0x9$'
host_ifaces=$(ls /sys/class/net | sort | tr '\n' ' ')
box run --share-net "$R" sh -c 'ls /sys/class/net | sort | tr "\n" " "'
expect_eq "--share-net keeps the host's interfaces" "$out" "$host_ifaces"
box run "$R" hostname;                  expect_eq "hostname is isolated" "$out" "gpubox"
box run --hostname build7 "$R" hostname; expect_eq "--hostname" "$out" "build7"
expect_eq "the host's hostname is unchanged" "$(hostname)" "$(cat /proc/sys/kernel/hostname)"

echo secret >"$WORK/secret"
box run "$R" probe read "$WORK/secret" /etc/shadow
expect_match "a host file outside the binds is not there" "$out" "$WORK/secret=ENOENT"
exec 7<"$WORK/secret"
box run "$R" probe fds
exec 7<&-
expect_eq "an fd inherited by gpubox is closed inside" "$(echo $out)" "0 1 2"
# Init is not dumpable (its /proc closed to the workload), as the workload's first instruction
# finds it: the workload shares init's memory, and so its dumpable flag, until its exec.
box run "$R" probe read /proc/1/exe /proc/1/root/etc/passwd /proc/1/fd /proc/1/environ
expect_match "init's exe (the gpubox binary) cannot be opened" "$out" '/proc/1/exe=EACCES'
expect_match "init's root cannot be followed" "$out" '/proc/1/root/etc/passwd=EACCES'
expect_match "init's fds cannot be listed" "$out" '/proc/1/fd=EACCES'
expect_match "init's environment cannot be read" "$out" '/proc/1/environ=EACCES'

box run "$R" probe syscalls
for want in unshare_user=EPERM unshare_mnt=EPERM clone3=ENOSYS clone_newuser=EPERM mount=EPERM \
    open_tree=ENOSYS open_tree_attr=ENOSYS fsopen=ENOSYS keyctl=EPERM add_key=EPERM bpf=EPERM perf_event_open=EPERM \
    userfaultfd=EPERM io_uring_setup=EPERM socket_vsock=EPERM personality_norandom=EPERM \
    ptrace_attach_1=EPERM kexec_load=EPERM init_module=EPERM chroot=EPERM; do
    expect_match "syscall denied: $want" "$out" "^$want\$"
done
box run "$R" sh -c 'unshare -U true'
expect_match "unshare -U fails inside" "$rc:$err" '^1:.*Operation not permitted'
box run "$R" sh -c 'mount -t tmpfs none /mnt'
expect_eq "mount fails inside" "$rc" 1
# TIOCSTI needs a terminal on stdin: script(1) gives the sandbox a pty.
got=$(script -qec "'$GPUBOX' run '$R' probe tiocsti" /dev/null </dev/null | tr -d '\r')
expect_match "TIOCSTI is refused" "$got" '^tiocsti=EPERM$'
expect_match "TIOCSTI with high bits set is refused (32-bit compare)" "$got" '^tiocsti_high_bits=EPERM$'

box run "$R" probe ls /dev
expect_eq "/dev holds only the minimal set" "$(echo $out | tr ' ' '\n' | sort | tr '\n' ' ')" \
    "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
box run "$R" probe stat /dev/null /dev/zero /dev/urandom /dev/pts/ptmx
expect_match "/dev/null is the real null device" "$out" '^/dev/null=chr 1:3$'
expect_match "/dev/pts is a new devpts instance" "$out" '^/dev/pts/ptmx=chr 5:2$'
box run "$R" sh -c 'echo ok > /dev/null && head -c 4 /dev/urandom | wc -c'
expect_eq "device nodes work" "$out" "4"
box run "$R" cat /proc/self/mountinfo
nosuid_missing=$(printf '%s\n' "$out" | awk '{ if ($6 !~ /nosuid/) print $5 }')
expect_eq "no mount lacks nosuid" "$nosuid_missing" ""
expect_match "/sys is read-only" "$out" ' /sys ro,'
expect_match "/proc/sys is read-only" "$out" ' /proc/sys ro,'
box run "$R" probe write /proc/sys/kernel/hostname /proc/sysrq-trigger
expect_match "writes to /proc/sys fail" "$out" '/proc/sys/kernel/hostname=E(ROFS|ACCES|PERM)'
expect_no_match "writes to /proc/sysrq-trigger do not reach the kernel" "$out" '/proc/sysrq-trigger=OK$' 

# ROOTFS is never modified, and writes are discarded at exit.
before=$(tree_hash "$R")
box run "$R" sh -c 'echo x >/newfile && echo y >>/etc/passwd && rm /etc/hosts && mkdir -p /var/d && chmod 700 /root && touch /usr/bin/busybox && echo t >/tmp/t'
expect_eq "the workload can write (to the tmpfs layer)" "$rc" 0
expect_eq "ROOTFS is unchanged on disk, timestamps included" "$(tree_hash "$R")" "$before"
box run "$R" sh -c 'ls /newfile /tmp/t 2>&1; grep -c "" /etc/passwd'
expect_match "writes do not survive the run" "$out" 'No such file or directory'
box run --read-only "$R" sh -c 'echo x >/newfile'
expect_match "--read-only refuses writes to the root" "$rc:$err" '^1:.*Read-only file system'
box run --read-only "$R" sh -c 'echo x >/tmp/x && cat /tmp/x'
expect_eq "--read-only still has a writable /tmp" "$out" "x"
# --read-only over a ROOTFS that has every mount point gpubox needs: a read-only bind of it, no
# overlay (whose superblock and teardown cost 0.1-0.5 ms a run for nothing); one that lacks a
# mount point (/run here) gets the overlay, which holds it. Old build: an overlay either way.
fstype='awk "\$5 == \"/\"" /proc/self/mountinfo | sed "s/.* - \([^ ]*\) .*/\1/"'
box run --read-only "$R" sh -c "$fstype"
expect_eq "--read-only, every mount point there: ROOTFS bound, no overlay" "$rc:$out" \
    "0:$(findmnt -n -o FSTYPE -T "$R")"
cp -a "$R" "$WORK/norun" && rmdir "$WORK/norun/run"
box run --read-only "$WORK/norun" sh -c "$fstype; echo x >/newfile"
expect_match "  a mount point missing: the overlay, read-only too" "$rc:$out:$err" \
    '^1:overlay:.*Read-only file system'
cp -a "$R" "$WORK/rw"
box run --writable "$WORK/rw" sh -c 'echo kept >/kept'
expect_eq "--writable writes reach the disk" "$(cat "$WORK/rw/kept" 2>&1)" "kept"

mkdir -p "$WORK/data" && echo in >"$WORK/data/f"
box run --bind "$WORK/data:/data" "$R" sh -c 'cat /data/f && echo out >/data/g'
expect_eq "--bind is readable and writable" "$out:$(cat "$WORK/data/g")" "in:out"
box run --ro-bind "$WORK/data:/mnt/data" "$R" sh -c 'cat /mnt/data/f; echo x >/mnt/data/h'
expect_match "--ro-bind is read-only" "$out:$err" '^in:.*Read-only file system'
box run --tmpfs /scratch "$R" sh -c 'echo x >/scratch/y && cat /scratch/y'
expect_eq "--tmpfs" "$out" "x"
box run --tmpfs-size 1M "$R" sh -c 'dd if=/dev/zero of=/tmp/big bs=1M count=4 2>&1'
expect_match "--tmpfs-size caps /tmp" "$rc:$out" '^1:.*No space left on device'

export GPUBOX_TEST_SECRET=leak
printf '# comment\nFROM_FILE=1\n' >"$WORK/env"
box run --env A=b --env-file "$WORK/env" --env PATH=/usr/bin:/bin "$R" env
expect_no_match "the caller's environment does not leak" "$out" 'GPUBOX_TEST_SECRET'
expect_match "--env" "$out" '^A=b$'
expect_match "--env-file" "$out" '^FROM_FILE=1$'
expect_match "--env overrides a default" "$out" '^PATH=/usr/bin:/bin$'
expect_match "HOME has a default" "$out" '^HOME=/tmp$'
box run / sh -c 'echo x >/tmp/t && cat /tmp/t; echo y >/etc/gpubox-e2e; set -- /proc/[0-9]*; echo $#'
# Its own /proc: gpubox's init and sh, counted by the shell's own glob. (Counted by
# `ls /proc | grep -c`, a CI run found 3 processes, not 4: ls can list /proc before the shell
# has forked grep.)
expect_eq "ROOTFS=/ (mounts below it): read-only bind, own /tmp and /proc" "$rc:$out" $'0:x\n2'
expect_match "ROOTFS=/: the host's /etc is read-only" "$err" 'gpubox-e2e: Read-only file system$'
expect_eq "  the host's /etc is untouched" "$(ls /etc/gpubox-e2e 2>&1)" "ls: cannot access '/etc/gpubox-e2e': No such file or directory"
box run --workdir /etc "$R" pwd; expect_eq "--workdir" "$out" "/etc"
box run "$R" readlink /proc/self/cwd; expect_eq "cwd is inside the new root" "$out" "/"
finish
