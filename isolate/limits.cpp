#include "isolate/limits.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "isolate/usage.hpp"

namespace gpubox::isolate {

namespace {

constexpr std::pair<LimitName, std::string_view> kLimitNames[] = {
    {LimitName::wall_time, "wall_time"}, {LimitName::cpu_time, "cpu_time"},
    {LimitName::memory, "memory"},       {LimitName::pids, "pids"},
    {LimitName::fsize, "fsize"},         {LimitName::nofile, "nofile"},
    {LimitName::stack, "stack"},         {LimitName::address_space, "address_space"},
    {LimitName::stdout_, "stdout"},      {LimitName::stderr_, "stderr"},
    {LimitName::tmpfs, "tmpfs"},         {LimitName::kill, "kill"},
};

constexpr int kMemorySampleMs = 5;
// What kernel.msgmnb is in a new IPC namespace, whatever the host's (MSGMNB, ipc/msg.c).
constexpr std::uint64_t kNewNamespaceMsgmnb = 16384;
// SysV message queues under a memory limit: msgmnb as a new namespace has it (so init need not
// write it), whose 1-byte messages hold about 64 bytes of slab each, 1 MiB a queue; as many
// queues as make L / 8 (with the tmpfs's inodes and inotify's queues, each about L / 8 too, the
// capped forms stacked stay under half of L), at least 1, at most 32.
constexpr std::uint64_t kMsgQueueBytes = kNewNamespaceMsgmnb, kMsgQueueSlab = kMsgQueueBytes * 64;
std::uint64_t msg_queues(std::uint64_t memory_limit) {
    return std::clamp<std::uint64_t>(memory_limit / 8 / kMsgQueueSlab, 1, 32);
}
constexpr std::uint64_t kDefaultNofile = 1024;

void plan_cpu(const Limits& l, const CgroupCaps& cg, LimitPlan& p) {
    // The whole sandbox's CPU, sampled; RLIMIT_CPU is a per-process backstop.
    const auto backstop = static_cast<rlim_t>(std::ceil(*l.cpu_seconds)) + 1;
    p.rlimits.push_back({RLIMIT_CPU, backstop, "RLIMIT_CPU"});
    p.mechanisms.emplace_back(LimitName::cpu_time,
                              cg.usable ? "cgroup cpu.stat usage_usec, sampled every 50 ms" : "");
    p.sample_usage = !cg.usable;
    p.sample_ms = 10;
}

void plan_memory(const Limits& l, const CgroupCaps& cg, LimitPlan& p) {
    if (cg.memory) {
        p.mechanisms.emplace_back(LimitName::memory, "cgroup memory.max (swap off)");
        return;
    }
    // No RLIMIT_DATA or RLIMIT_AS: both refuse address space that is never touched (JITs,
    // CUDA, a malloc larger than what is used), and a refused allocation would be graded as the
    // program's crash. The monitor counts what is really held and kills at the limit; what it
    // cannot see is made impossible or capped by a knob of the sandbox's own.
    p.mechanisms.emplace_back(
        LimitName::memory,
        cat("sum over the sandbox of resident private and shared memory (by proportional share "
            "where over the limit), page tables, gpubox's tmpfs and socket buffers "
            "(sock_diag: its own network namespace's, or a step's task's own sockets in the "
            "host's), "
            "read by the monitor "
            "every ",
            kMemorySampleMs,
            " ms near the limit (before it at 1 GiB/s, and before kernel memory at 4 GiB/s could "
            "pass 2 x the limit + 64 MiB; at most 50 ms apart); memfd_create "
            "refused, SysV segments die with their last attach; kernel "
            "memory capped: ",
            msg_queues(*l.memory_bytes), " SysV message queues, ", tmpfs_inodes(*l.memory_bytes),
            " tmpfs inodes, ", notify_groups(*l.memory_bytes),
            " inotify instances and fanotify groups, ", tmpfs_inodes(*l.memory_bytes) / 2,
            " watches and marks, RLIMIT_NOFILE ", l.nofile.value_or(kDefaultNofile),
            "; each open fd charged ", kFdBytes >> 10,
            " KiB, epoll watches and mappings counted; vmsplice refused"));
    p.sample_usage = true;
    p.sample_ms = kMemorySampleMs;
    p.refuse_memfd = true;
    p.ipc.rmid_forced = true;  // a SysV segment lives only while attached, where Pss_Shmem sees it
    p.ipc.msg_queues = msg_queues(*l.memory_bytes);
    p.ipc.msg_queue_bytes = kMsgQueueBytes;
    p.ipc.notify_groups = notify_groups(*l.memory_bytes);
    p.ipc.notify_marks = tmpfs_inodes(*l.memory_bytes) / 2;  // each pins an inode of ~1 KiB
    if (!l.nofile) p.rlimits.push_back({RLIMIT_NOFILE, kDefaultNofile, "RLIMIT_NOFILE"});
}

void plan_pids(const Limits& l, const CgroupCaps& cg, const LimitContext& ctx, LimitPlan& p) {
    const std::uint64_t pids = l.pids.value_or(kDefaultPids);
    if (pids == 0) {
        p.mechanisms.emplace_back(LimitName::pids, "unlimited (--pids-limit unlimited)");
        return;
    }
    if (l.pids && cg.pids) {
        p.mechanisms.emplace_back(LimitName::pids, "cgroup pids.max");
        return;
    }
    // In the sandbox's own user namespace, so it counts the sandbox's processes only (Linux >=
    // 5.14); init is one of them with --root.
    p.rlimits.push_back({RLIMIT_NPROC, pids + (ctx.root_inside ? 1 : 0), "RLIMIT_NPROC"});
    const std::string dflt =
        l.pids ? "" : cat(" (the default, ", kDefaultPids, "; --pids-limit N or unlimited)");
    p.mechanisms.emplace_back(
        LimitName::pids,
        ctx.caller_root
            ? "RLIMIT_NPROC (NOT enforced: the kernel exempts the host's uid 0; delegate "
              "the pids controller)" +
                  dflt
        : ctx.nproc_per_userns
            ? "RLIMIT_NPROC in the sandbox's user namespace" + dflt
            : "RLIMIT_NPROC (Linux < 5.14: counts all of the user's processes)" + dflt);
}

}  // namespace

std::string_view to_string(LimitName name) {
    for (const auto& [n, text] : kLimitNames)
        if (n == name) return text;
    return "?";
}

std::optional<LimitName> limit_from_name(std::string_view name) {
    for (const auto& [n, text] : kLimitNames)
        if (text == name) return n;
    return std::nullopt;
}

std::uint64_t plan_tmpfs_size(std::uint64_t tmpfs_size,
                              const std::optional<std::uint64_t>& memory_limit,
                              std::uint64_t mem_available) {
    if (tmpfs_size) return tmpfs_size;
    if (memory_limit) return *memory_limit;
    return std::max<std::uint64_t>(mem_available / 4, 16ULL << 20);
}

std::uint64_t tmpfs_inodes(std::uint64_t memory_limit) {
    return std::max<std::uint64_t>(4096, memory_limit / (8 << 10));
}

std::uint64_t notify_groups(std::uint64_t memory_limit) {
    return std::max<std::uint64_t>(1, memory_limit / (64 << 20));
}

std::optional<std::uint64_t> parse_mem_available(const std::string& meminfo) {
    const auto at = meminfo.find("MemAvailable:");
    if (at == std::string::npos) return std::nullopt;
    char* end = nullptr;
    const unsigned long long kb = std::strtoull(meminfo.c_str() + at + 13, &end, 10);
    if (end == meminfo.c_str() + at + 13) return std::nullopt;
    return static_cast<std::uint64_t>(kb) * 1024;
}

LimitPlan plan_limits(const Limits& l, const CgroupCaps& cg, const LimitContext& ctx) {
    const std::string no_cgroup = ctx.no_cgroup.empty() ? "none to be had" : ctx.no_cgroup;
    if (ctx.require_cgroup && !cg.memory)
        throw PlanError(cat("--require-cgroup: no cgroup v2 with the memory controller for the "
                            "sandbox (",
                            no_cgroup, "); 'gpubox doctor' says what to change"),
                        "a delegated cgroup v2: a systemd user manager (loginctl enable-linger, "
                        "dbus-user-session), or a cgroup directory delegated to this user "
                        "(--cgroup PATH)");
    // Socket buffers are counted in the sandbox's own network namespace (sock_diag): in the
    // host's, no sound filter by process costs O(processes), and unbounded they would be. A
    // step's tasks share the host's network by design (multi-node ranks): their memory limit is
    // a task's own, the job's cgroup (Slurm's) the host's bound (docs/limits.md).
    if (ctx.share_net && !ctx.step_task && l.memory_bytes && !cg.memory)
        throw PlanError(
            cat("--memory-limit with --share-net needs a cgroup with the memory controller (",
                no_cgroup,
                "): without one, the sandbox's socket buffers in the host's network namespace "
                "could not be counted"),
            "drop --share-net (the sandbox's own network namespace is counted), or run where a "
            "cgroup v2 is delegated to you ('gpubox doctor' says how)");
    LimitPlan p;
    p.rlimits.push_back({RLIMIT_CORE, 0, "RLIMIT_CORE"});  // no core dumps into the sandbox
    if (l.wall_seconds)
        p.mechanisms.emplace_back(LimitName::wall_time, "monitor timer (CLOCK_MONOTONIC)");
    if (l.cpu_seconds) plan_cpu(l, cg, p);
    if (l.memory_bytes) plan_memory(l, cg, p);
    plan_pids(l, cg, ctx, p);
    if (l.fsize_bytes)
        p.rlimits.push_back({RLIMIT_FSIZE, *l.fsize_bytes, "RLIMIT_FSIZE"}),
            p.mechanisms.emplace_back(LimitName::fsize, "RLIMIT_FSIZE");
    if (l.nofile)
        p.rlimits.push_back({RLIMIT_NOFILE, *l.nofile, "RLIMIT_NOFILE"}),
            p.mechanisms.emplace_back(LimitName::nofile, "RLIMIT_NOFILE");
    if (l.stack_bytes)
        p.rlimits.push_back({RLIMIT_STACK, *l.stack_bytes, "RLIMIT_STACK"}),
            p.mechanisms.emplace_back(LimitName::stack, "RLIMIT_STACK");
    if (l.as_bytes)
        p.rlimits.push_back({RLIMIT_AS, *l.as_bytes, "RLIMIT_AS"}),
            p.mechanisms.emplace_back(LimitName::address_space, "RLIMIT_AS");
    if (l.stdout_bytes) p.mechanisms.emplace_back(LimitName::stdout_, "monitor relay counts bytes");
    if (l.stderr_bytes) p.mechanisms.emplace_back(LimitName::stderr_, "monitor relay counts bytes");
    // gpubox's tmpfs bounds files; the IPC namespace's shmmax/shmall bound SysV segments.
    p.ipc.shm_bytes = l.memory_bytes && ctx.host_share && ctx.tmpfs_size == *l.memory_bytes
                          ? ctx.host_share
                          : ctx.tmpfs_size;
    p.mechanisms.emplace_back(LimitName::tmpfs,
                              cat("one tmpfs of ", ctx.tmpfs_size >> 20,
                                  " MiB for every writable in-memory place; "
                                  "SysV shared memory up to ",
                                  p.ipc.shm_bytes >> 20, " MiB (kernel.shmmax/shmall)"));
    p.mechanisms.emplace_back(LimitName::kill,
                              cg.usable ? "cgroup.kill" : "SIGKILL to the pid namespace's init");
    const std::uint64_t tasks = l.pids.value_or(kDefaultPids);  // 0: unlimited
    if (p.sample_usage &&
        (tasks == 0 || tasks > std::uint64_t{kCrowdPerCpu} * std::max(ctx.cpus, 1U))) {
        p.idle_policy = true;
        p.rlimits.push_back({RLIMIT_NICE, 0, "RLIMIT_NICE"});
        p.refuse_setsid = ctx.autogroups;
        p.take_turns = !p.refuse_setsid;
    }
    // Only CPU and memory limits need the monitor to read the sandbox periodically; without
    // them it reads the sandbox once, when it kills it (the CPU of what the kill ends).
    p.lone = tasks == 1 && !ctx.caller_root;  // the host's uid 0 is exempt from RLIMIT_NPROC
    p.tree_clock = p.sample_usage && ctx.tree_clock && !ctx.step_task && !p.lone;  // LimitContext
    for (auto& [name, how] : p.mechanisms)
        if (name == LimitName::cpu_time && how.empty())
            how = sampled_cpu_mechanism(p, p.tree_clock);
    return p;
}

std::string sampled_cpu_mechanism(const LimitPlan& p, bool tree_clock) {
    return cat(
        "sum over the sandbox's processes (its own /proc), read by the monitor every ", p.sample_ms,
        " ms near the limit (before it with every CPU busy, at most 50 ms apart), a pass cut "
        "short once over",
        p.lone ? "; one process, no child for the kernel to reap"
               : cat("; a child the kernel reaps is charged ",
                     tree_clock ? "what the kernel's count of the workload's CPU (a task-clock "
                                  "perf counter every process inherits) says beyond that sum, at "
                                  "most an upper bound"
                                : "an upper bound",
                     " (its last sample + the time since, or that time if never seen)"),
        p.idle_policy ? "; the workload runs under SCHED_IDLE (RLIMIT_NICE 0), below the "
                        "monitor, which reads a crowd of tasks without pause"
                      : "",
        p.refuse_setsid ? "; setsid() refused (EPERM): a new session would be an "
                          "autogroup as heavy as the monitor"
                        : "");
}

bool autogroup_applies(bool enabled, const std::string& self_cgroup,
                       const std::string& v2_root_subtree) {
    if (!enabled) return false;
    std::optional<std::string_view> v2;
    for (std::string_view line : split_lines(self_cgroup)) {  // "ID:CONTROLLERS:PATH"
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string_view::npos || b == std::string_view::npos) continue;
        const std::string controllers = cat(",", line.substr(a + 1, b - a - 1), ",");
        const std::string_view path = line.substr(b + 1);
        if (controllers.find(",cpu,") != std::string::npos) return path == "/";  // v1's cpu
        if (line.substr(0, a) == "0" && controllers == ",,") v2 = path;
    }
    if (!v2) return false;  // no cpu hierarchy found: say no, the policy stays as it is
    // cgroup v2: below the root, a process is in the root task group unless cpu is enabled.
    for (std::string_view c : split_words(v2_root_subtree))
        if (c == "cpu") return *v2 == "/";
    return true;
}

void apply_rlimits(const std::vector<RlimitOp>& ops) {
    for (const RlimitOp& op : ops) {
        // Never raise: a hard limit cannot go up in a user namespace, and a lower caller limit wins.
        sys::lower_rlimit(op.resource, op.value, op.name);
    }
}

void apply_ipc_limits(const IpcLimits& ipc) {
    // Each file opened below its directory, not by its whole path: in a new namespace a sysctl's
    // open costs ~20 us (its inode is made afresh each time), the walk of /proc/sys/ ~10 more
    // (the nine files of a memory limit then: 0.3 ms by their paths, 0.2 by their directories').
    struct Dir {
        const char* path;
        bool may_lack = false;  // user.max_*: absent without inotify or fanotify, nothing to cap
        UniqueFd fd{};
    } kernel{"/proc/sys/kernel"}, user{"/proc/sys/user", true};
    auto put = [](Dir& dir, const char* name, const std::string& value) {
        if (!dir.fd.valid()) dir.fd = sys::open_at(AT_FDCWD, dir.path, O_PATH | O_DIRECTORY);
        const std::string path = cat(dir.path, "/", name);
        const int fd = sys::try_open_at(dir.fd.get(), name, O_WRONLY);
        if (fd == -ENOENT && dir.may_lack) return;
        if (fd < 0) sys::fail(Syscall::open, -fd, cat("open(", quote(path), ", O_WRONLY)"), path);
        sys::write_all(UniqueFd(fd).get(), value, path);
    };
    try {
        if (ipc.shm_bytes) {
            put(kernel, "shmmax", std::to_string(ipc.shm_bytes));
            put(kernel, "shmall", std::to_string(ipc.shm_bytes / sys::page_size()));  // in pages
        }
        if (ipc.rmid_forced) put(kernel, "shm_rmid_forced", "1");
        if (ipc.msg_queues) put(kernel, "msgmni", std::to_string(ipc.msg_queues));
        if (ipc.msg_queue_bytes && ipc.msg_queue_bytes != kNewNamespaceMsgmnb)  // ours is new
            put(kernel, "msgmnb", std::to_string(ipc.msg_queue_bytes));
        if (ipc.notify_groups)
            for (const char* n : {"max_inotify_instances", "max_fanotify_groups"})
                put(user, n, std::to_string(ipc.notify_groups));
        if (ipc.notify_marks)
            for (const char* n : {"max_inotify_watches", "max_fanotify_marks"})
                put(user, n, std::to_string(ipc.notify_marks));
    } catch (...) {
        std::throw_with_nested(SetupError("the sandbox's IPC and user namespace limits"));
    }
}

}  // namespace gpubox::isolate
