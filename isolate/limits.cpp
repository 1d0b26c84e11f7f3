#include "isolate/limits.hpp"

#include <cerrno>
#include <cmath>

#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::isolate {

LimitPlan plan_limits(const Limits& l, const CgroupCaps& cg, bool nproc_per_userns, bool root_inside,
                      bool caller_root) {
    LimitPlan p;
    p.rlimits.push_back({RLIMIT_CORE, 0, "RLIMIT_CORE"});  // no core dumps into the sandbox
    if (l.wall_seconds) p.mechanisms.emplace_back("wall_time", "monitor timer (CLOCK_MONOTONIC)");
    if (l.cpu_seconds) {
        // The whole sandbox's CPU, sampled every 50 ms; RLIMIT_CPU is a per-process backstop.
        const auto backstop = static_cast<rlim_t>(std::ceil(*l.cpu_seconds)) + 1;
        p.rlimits.push_back({RLIMIT_CPU, backstop, "RLIMIT_CPU"});
        p.mechanisms.emplace_back("cpu_time", cg.usable ? "cgroup cpu.stat usage_usec, sampled every 50 ms"
                                                        : "sum over the sandbox's processes (its own /proc), sampled every 50 ms");
        p.sample_usage = !cg.usable;
        p.sample_ms = 50;
    }
    if (l.memory_bytes) {
        if (cg.memory) {
            p.mechanisms.emplace_back("memory", "cgroup memory.max (swap off)");
        } else {
            // Resident anonymous memory summed over the sandbox, sampled every 20 ms; RLIMIT_DATA
            // at twice the limit stops one process from outrunning the sampler. Not RLIMIT_AS:
            // it breaks JITs and CUDA, which reserve address space they never touch.
            p.rlimits.push_back({RLIMIT_DATA, *l.memory_bytes * 2, "RLIMIT_DATA"});
            p.mechanisms.emplace_back("memory", "sum of resident memory over the sandbox's processes, sampled every 20 ms, + RLIMIT_DATA (2x) per process");
            p.sample_usage = true;
            p.sample_ms = 20;
        }
    }
    if (l.pids) {
        if (cg.pids) {
            p.mechanisms.emplace_back("pids", "cgroup pids.max");
        } else {
            // In the sandbox's own user namespace, so it counts the sandbox's processes only
            // (Linux >= 5.14); init is one of them with --root.
            p.rlimits.push_back({RLIMIT_NPROC, *l.pids + (root_inside ? 1 : 0), "RLIMIT_NPROC"});
            p.mechanisms.emplace_back("pids", caller_root ? "RLIMIT_NPROC (NOT enforced: the kernel exempts the host's uid 0; delegate the pids controller)"
                                              : nproc_per_userns ? "RLIMIT_NPROC in the sandbox's user namespace"
                                                                 : "RLIMIT_NPROC (Linux < 5.14: counts all of the user's processes)");
        }
    }
    if (l.fsize_bytes) p.rlimits.push_back({RLIMIT_FSIZE, *l.fsize_bytes, "RLIMIT_FSIZE"}), p.mechanisms.emplace_back("fsize", "RLIMIT_FSIZE");
    if (l.nofile) p.rlimits.push_back({RLIMIT_NOFILE, *l.nofile, "RLIMIT_NOFILE"}), p.mechanisms.emplace_back("nofile", "RLIMIT_NOFILE");
    if (l.stack_bytes) p.rlimits.push_back({RLIMIT_STACK, *l.stack_bytes, "RLIMIT_STACK"}), p.mechanisms.emplace_back("stack", "RLIMIT_STACK");
    if (l.as_bytes) p.rlimits.push_back({RLIMIT_AS, *l.as_bytes, "RLIMIT_AS"}), p.mechanisms.emplace_back("address_space", "RLIMIT_AS");
    if (l.stdout_bytes) p.mechanisms.emplace_back("stdout", "monitor relay counts bytes");
    if (l.stderr_bytes) p.mechanisms.emplace_back("stderr", "monitor relay counts bytes");
    p.mechanisms.emplace_back("kill", cg.usable ? "cgroup.kill" : "SIGKILL to the pid namespace's init");
    // Processes the kernel kills when init dies never reach init's rusage, so without a cgroup
    // the last sample is the only record of their CPU time: sample whenever limits apply.
    if (!cg.usable && l.any()) p.sample_usage = true;
    return p;
}

void apply_rlimits(const std::vector<RlimitOp>& ops) {
    for (const RlimitOp& op : ops) {
        rlimit cur{};
        ::getrlimit(op.resource, &cur);
        // Never raise: a hard limit cannot go up in a user namespace, and a lower caller limit wins.
        rlimit want{std::min(op.value, cur.rlim_max), std::min(op.value, cur.rlim_max)};
        if (::setrlimit(op.resource, &want) < 0)
            sys::fail(cat("setrlimit(", op.name, ", ", want.rlim_cur, ")"), errno);
    }
}

}  // namespace gpubox::isolate
