#!/usr/bin/env python3
"""Where a sandbox's run goes, from a kernel trace: phases and in-syscall time per process.

  perf record -a -o T.data -e raw_syscalls:sys_enter,raw_syscalls:sys_exit \
      -e sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit -- LOOP
  perf script -i T.data -F comm,pid,tid,time,event,trace > T.txt
  python3 bench/trace_phases.py T.txt gpubox    # or: isolate (the same trace, runs alternating)

Roles, per run: `mon` the process that executes a file named COMM, `init` its first child, `wl`
init's first child (gpubox: monitor, init, workload; isolate: isolate, its keeper, the box's
process). Prints the median phases (exec to init's start, init's network namespace, pivot_root or
chroot, the workload's start, exec and exit, init's exit, the caller's return) and, per role,
the time spent inside each syscall per run (waits included: poll, wait4, rt_sigtimedwait and
blocking receives are waits), then grouped. Tracing costs ~1-2 us a syscall: compare runs of one
trace, never absolute figures with untraced ones.
"""
import re, sys, collections, statistics
nr = {}
for l in open('/usr/include/x86_64-linux-gnu/asm/unistd_64.h'):
    m = re.match(r'#define __NR_(\w+) (\d+)', l)
    if m: nr[int(m.group(2))] = m.group(1)
ev = []
pat = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$')
for l in open(sys.argv[1]):
    m = pat.match(l)
    if not m: continue
    comm, pid, tid, t, e, rest = m.groups()
    ev.append((float(t)*1e3, comm.strip(), int(pid), int(tid), e, rest))
target = sys.argv[2]  # the file the monitor executes
role = {}  # tid -> role
runs = []
open_sys = {}
dur = collections.defaultdict(lambda: collections.defaultdict(float))
cnt = collections.defaultdict(lambda: collections.defaultdict(int))
phase = []
cur = None
for t, comm, pid, tid, e, rest in ev:
    if e == 'sched:sched_process_exec' and ('filename=' in rest) and rest.split('filename=')[1].split()[0].endswith(target):
        role[tid] = 'mon'; cur = {'exec': t}; runs.append(cur)
    elif e == 'sched:sched_process_fork':
        m = re.search(r'pid=(\d+) .*child_pid=(\d+)', rest)
        p, c = int(m.group(1)), int(m.group(2))
        if role.get(p) == 'mon' and 'init_start' not in cur: role[c] = 'init'; cur['init_start'] = t
        elif role.get(p) == 'init' and 'wl_start' not in cur: role[c] = 'wl'; cur['wl_start'] = t
    elif e == 'sched:sched_process_exec' and role.get(tid) == 'wl':
        cur['wl_exec'] = t
    elif e == 'sched:sched_process_exit':
        r = role.get(tid)
        if r and cur is not None: cur[r + '_exit'] = t
    elif e == 'raw_syscalls:sys_enter':
        r = role.get(tid)
        if r: open_sys[tid] = (t, int(rest.split()[1]))
    elif e == 'raw_syscalls:sys_exit':
        r = role.get(tid)
        if r and tid in open_sys:
            t0, n = open_sys.pop(tid)
            name = nr.get(n, str(n))
            dur[r][name] += t - t0; cnt[r][name] += 1
            if r == 'mon' and name in ('clone3','clone') and 'clone_ret' not in cur: cur['clone_ret'] = t
            if r == 'init' and name == 'chroot': cur['pivot'] = t; cur.setdefault('netns_done', cur['init_start'])
            if r == 'init' and name == 'unshare' : cur['netns_done'] = t
            if r == 'init' and name == 'pivot_root': cur['pivot'] = t
runs = [r for r in runs if all(k in r for k in ('init_start','wl_start','wl_exec','mon_exit'))]
N = len(runs); print("runs", N)
def med(k1, k2):
    return statistics.median(r[k2] - r[k1] for r in runs)
steps = [('exec','init_start'),('init_start','netns_done'),('netns_done','pivot'),('pivot','wl_start'),('wl_start','wl_exec'),('wl_exec','wl_exit'),('wl_exit','init_exit'),('init_exit','mon_exit'),('exec','mon_exit')]
for a, b in steps:
    try: print(f"{a:>12s} -> {b:<12s} {med(a,b):7.3f} ms")
    except Exception as x: print(a, b, x)
for r in ('mon','init','wl'):
    tot = sum(dur[r].values())/N
    print(f"== {r}: in-syscall time per run {tot:.3f} ms, syscalls {sum(cnt[r].values())/N:.0f}")
    for name, d in sorted(dur[r].items(), key=lambda x: -x[1])[:14]:
        print(f"   {name:20s} {d/N*1000:8.1f} us  x{cnt[r][name]/N:.1f}")
groups = {
  'namespaces (clone3/clone/unshare/setns)': ['clone3','clone','unshare','setns'],
  'mount API (fsopen/fsconfig/fsmount/move_mount/open_tree/open_tree_attr/mount_setattr/mount)': ['fsopen','fsconfig','fsmount','move_mount','open_tree','467','mount_setattr','mount'],
  'pivot_root/chroot + umount2 of the old root': ['pivot_root','chroot','umount2','fchdir','chdir'],
  'mkdir/mknod/symlink': ['mkdirat','mknodat','symlinkat','mkdir','mknod','symlink','fchmodat','fchmod'],
  'path opens and stats (openat/openat2/newfstatat/readlink)': ['openat','openat2','newfstatat','readlink','statx'],
  'close': ['close','close_range'],
  'seccomp + prctl + caps': ['seccomp','prctl','capset','capget'],
  'execve': ['execve'],
  'reads/writes/ipc (read/write/sendmsg/recvmsg/recvfrom/getdents64/ioctl)': ['read','write','sendmsg','recvmsg','recvfrom','getdents64','ioctl','socket'],
}
for r in ('mon','init','wl'):
    print(f"-- {r} grouped (us per run, waits excluded)")
    used = set()
    for g, names in groups.items():
        t = sum(dur[r].get(n, 0) for n in names) / N * 1000
        c = sum(cnt[r].get(n, 0) for n in names) / N
        used |= set(names)
        if t > 5: print(f"   {g:70s} {t:7.0f}  x{c:.0f}")
    rest = {k: v for k, v in dur[r].items() if k not in used and k not in ('poll','wait4','rt_sigtimedwait')}
    print(f"   {'other':70s} {sum(rest.values())/N*1000:7.0f}  x{sum(cnt[r][k] for k in rest)/N:.0f}")
