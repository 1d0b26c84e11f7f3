#pragma once
// Resource limits: what was asked (Limits), how each is enforced (mechanisms), and the rlimits
// the workload gets. Pure, apart from apply_rlimits() in the child.
#include <sys/resource.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpubox::isolate {

// A limit, or a part of the sandbox's bounds, by name: --meta's "limits" keys and "limit" value,
// and `--print-plan`'s "limit NAME:" lines. stdout_/stderr_: `stdout` is a macro.
enum class LimitName {
    wall_time,
    cpu_time,
    memory,
    pids,
    fsize,
    nofile,
    stack,
    address_space,
    stdout_,
    stderr_,
    tmpfs,
    kill,
};
// "wall_time", "stdout", ...: the one table of names.
std::string_view to_string(LimitName name);
std::optional<LimitName> limit_from_name(std::string_view name);
inline std::ostream& operator<<(std::ostream& out, LimitName name) {
    return out << to_string(name);
}

struct Limits {
    std::optional<double> wall_seconds, cpu_seconds;
    std::optional<std::uint64_t> memory_bytes, fsize_bytes, nofile, stack_bytes, as_bytes;
    std::optional<std::uint64_t> pids;  // unset: kDefaultPids; 0: unlimited
    std::optional<std::uint64_t> stdout_bytes, stderr_bytes;
    bool any() const {
        return wall_seconds || cpu_seconds || memory_bytes || (pids && *pids) || fsize_bytes ||
               nofile || stack_bytes || as_bytes || stdout_bytes || stderr_bytes;
    }
};

// What a delegated cgroup v2 can do for us on this host (found by the monitor).
struct CgroupCaps {
    bool usable = false;  // a cgroup of our own: cgroup.kill, cpu.stat
    bool memory = false;  // memory.max
    bool pids = false;    // pids.max
};

struct RlimitOp {
    int resource;
    rlim_t value;  // soft and hard
    std::string name;
};

// The sandbox's IPC namespace's limits (kernel.shm*), written by init, which owns it.
struct IpcLimits {
    std::uint64_t shm_bytes = 0;  // kernel.shmmax and, in pages, kernel.shmall; 0: as they are
    bool rmid_forced = false;     // kernel.shm_rmid_forced: a segment dies with its last attach
    // kernel.msgmni and kernel.msgmnb (0: as they are): message queues hold kernel memory, at
    // most msgmni x msgmnb messages of about 64 bytes each (a queue holds at most msgmnb bytes
    // and msgmnb messages).
    std::uint64_t msg_queues = 0, msg_queue_bytes = 0;
    // The sandbox's user namespace's own caps (user.max_inotify_* and user.max_fanotify_*, 0: as
    // they are), which count everything below it: an inotify instance or fanotify group queues up
    // to 16384 events of up to 512 bytes (8 MiB, measured), a watch or mark pins its inode.
    std::uint64_t notify_groups = 0, notify_marks = 0;
};

// With no --pids-limit, a sandbox still cannot take the host's pids (--pids-limit unlimited lifts it).
constexpr std::uint64_t kDefaultPids = 4096;
// More runnable tasks than this many per CPU crowd the monitor out (LimitPlan::idle_policy).
constexpr unsigned kCrowdPerCpu = 4;

struct LimitPlan {
    std::vector<RlimitOp> rlimits;
    std::vector<std::pair<LimitName, std::string>> mechanisms;  // limit -> how it is enforced
    bool sample_usage = false;  // the monitor measures the sandbox's CPU and memory use
    int sample_ms = 100;        // this often (more slowly where a pass costs more, at most 25 ms)
    // memfd_create() refused (ENOSYS, so that callers fall back to a file in /dev/shm, which
    // gpubox's tmpfs counts): a memfd's pages are in no process's resident set once unmapped,
    // and one in flight in an SCM_RIGHTS message is in no process at all. The same filter
    // refuses vmsplice and threads with fd tables of their own (isolate::limits_filter).
    bool refuse_memfd = false;
    // The workload runs under SCHED_IDLE from its start, with RLIMIT_NICE 0 so that nothing in
    // the sandbox leaves it: where the monitor measures the sandbox and its pids limit allows a
    // crowd (more than kCrowdPerCpu tasks a CPU). Without a cgroup of its own, each runnable
    // task of the sandbox shares the CPU with the monitor as a task of the same weight (in the
    // root cpu cgroup a session is an autogroup and shares as one, but not in a child cgroup: a
    // CI job's, a service's), so a fork bomb of a thousand tasks leaves the monitor a thousandth
    // of a CPU, and its next pass seconds away. Under SCHED_IDLE each weighs 3 to the monitor's
    // 1024 and yields to it when it wakes (nice 19, weight 15, was measured too weak: the
    // monitor got 1-7 % of a CPU among 1000). It is decided before the workload runs: once a
    // crowd exists the monitor is too starved to demote it. Only the sandbox's tasks among
    // themselves, and against other tasks of the caller's own cpu cgroup, see the difference;
    // the workload's CPU time is the same. In a child cgroup this is not enough: the crowd shares
    // the monitor's run queue, and a SCHED_IDLE task that has waited long enough there (lag over
    // its ~480 ms virtual slice, which 500 tasks a CPU reach) outranks the monitor and runs up to
    // a tick before it: 335 of them held it off for 1.4 s once. So the monitor also lets at most
    // kRunnablePerCpu of a crowd's processes run at once (launcher/monitor/supervise.cpp).
    bool idle_policy = false;
    // setsid() refused (EPERM) under idle_policy where the kernel's autogroups apply (the root
    // cpu cgroup, kernel.sched_autogroup_enabled): each new session is an autogroup, scheduled as
    // one entity weighing as much as the monitor's whatever its tasks' policy, so a fork bomb
    // whose children each call setsid() would leave the monitor one share among a thousand
    // (measured: a 1 s CPU limit killed after 8-10 s of wall time on 2 CPUs).
    bool refuse_setsid = false;
    // Where the workload runs below the monitor but shares its run queue (idle_policy without
    // refuse_setsid: a child cpu cgroup, or autogroups off), a crowd under a CPU limit the
    // monitor samples takes turns: at most kRunnablePerCpu of its processes a CPU run at once
    // (launcher/monitor/supervise.cpp). Not where each session is an autogroup: the crowd is one
    // entity there, and its waiting tasks outrank only each other.
    bool take_turns = false;
    // The kernel's count of the workload's CPU (isolate/tree_clock.hpp) bounds what the monitor
    // charges for children the kernel reaps, where LimitContext::tree_clock says it can be had;
    // the monitor goes without where the kernel then refuses the counter. Not for a workload
    // that may make no other process (`lone`: a pids limit of 1, isolate's default, which the
    // kernel enforces on all but the host's uid 0): it leaves no child to reap, so the count
    // would add nothing, and the first counter opened after a quiet second costs a run an RCU
    // grace period (8-28 ms on the development VM).
    bool tree_clock = false;
    bool lone = false;
    IpcLimits ipc;
};

// Pure. How a CPU limit the monitor samples is enforced, in --meta's words: summed over the
// sandbox's /proc, a child the kernel reaps charged by the kernel's count (`tree_clock`) or an
// upper bound.
std::string sampled_cpu_mechanism(const LimitPlan& p, bool tree_clock);

// Pure. The size of gpubox's one tmpfs (every writable in-memory place of the sandbox, see
// rootfs::RootSpec::tmpfs_size): --tmpfs-size, else the memory limit, else a quarter of the
// memory available at start, so that no sandbox can fill the host's memory through files.
std::uint64_t plan_tmpfs_size(std::uint64_t tmpfs_size,
                              const std::optional<std::uint64_t>& memory_limit,
                              std::uint64_t mem_available);
// Pure. The nr_inodes of gpubox's tmpfs under a memory limit without a cgroup: an empty file
// holds about 1 KiB of kernel memory (its inode and dentry), so at most an eighth of the limit.
std::uint64_t tmpfs_inodes(std::uint64_t memory_limit);
// Pure. user.max_inotify_instances and max_fanotify_groups under a memory limit without a
// cgroup: one 8 MiB event queue per 64 MiB of the limit (at least one), an eighth of it.
std::uint64_t notify_groups(std::uint64_t memory_limit);
// Pure. MemAvailable from /proc/meminfo's text, in bytes.
std::optional<std::uint64_t> parse_mem_available(const std::string& meminfo);

// What plan_limits() depends on besides the limits and the cgroup: the host's facts, gathered
// once by the caller, and the run's shape.
struct LimitContext {
    bool nproc_per_userns = true;  // Linux >= 5.14 counts RLIMIT_NPROC per user namespace
    bool root_inside = false;      // --root: the workload is uid 0 of its user namespace
    bool caller_root = false;  // the host's uid 0, to whom the kernel never applies RLIMIT_NPROC
    // plan_tmpfs_size()'s, which also bounds SysV shared memory, unless a memory limit does:
    // then SysV gets `host_share` (plan_tmpfs_size() with no limit), so that a segment larger
    // than the limit is made, and killed as ML when touched, not refused at shmget() and graded
    // as the program's failure.
    std::uint64_t tmpfs_size = 0;
    std::uint64_t host_share = 0;
    unsigned cpus = 1;        // the CPUs the sandbox may use (LimitPlan::idle_policy)
    bool autogroups = false;  // a new session would be an autogroup (autogroup_applies())
    bool share_net = false;   // --share-net: the sandbox is in the host's network namespace
    bool step_task = false;   // a Slurm step's task (launcher/monitor/step_plan.hpp)
    // The kernel lends the monitor a count of the workload's CPU (isolate::tree_clock_lent) and
    // nothing joins the sandbox from outside (run --name: gpubox exec's processes are not init's
    // descendants). A step's task (step_task) has none either: its init is not the step's.
    bool tree_clock = false;
    bool require_cgroup = false;  // --require-cgroup: exact limits or none (cg.memory or refuse)
    std::string no_cgroup;        // why no cgroup was had, for a refusal's line ("" if unknown)
};

// Pure. Throws PlanError where the limits cannot be kept without a cgroup the host did not give.
LimitPlan plan_limits(const Limits& l, const CgroupCaps& cg, const LimitContext& ctx);
// Pure. Whether the kernel's autogroups schedule a new session of this process as a group of its
// own: kernel.sched_autogroup_enabled (`enabled`) and the process in the root cpu task group,
// from /proc/self/cgroup (`self_cgroup`): cgroup v1's cpu hierarchy at "/", or, with cgroup v2
// only, "0::/" or a root whose cgroup.subtree_control (`v2_root_subtree`) lacks cpu.
bool autogroup_applies(bool enabled, const std::string& self_cgroup,
                       const std::string& v2_root_subtree);

// Child side: setrlimit() for each op; a hard limit can only go down.
void apply_rlimits(const std::vector<RlimitOp>& ops);
// Child side, in init (which owns the sandbox's IPC and user namespaces): write kernel.shm*,
// kernel.msgmn* and user.max_{ino,fano}tify_*.
void apply_ipc_limits(const IpcLimits& ipc);

}  // namespace gpubox::isolate
