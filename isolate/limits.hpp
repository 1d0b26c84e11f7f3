#pragma once
// Resource limits: what was asked (Limits), how each is enforced (mechanisms), and the rlimits
// the workload gets. Pure, apart from apply_rlimits() in the child.
#include <sys/resource.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpubox::isolate {

struct Limits {
    std::optional<double> wall_seconds, cpu_seconds;
    std::optional<std::uint64_t> memory_bytes, pids, fsize_bytes, nofile, stack_bytes, as_bytes;
    std::optional<std::uint64_t> stdout_bytes, stderr_bytes;
    bool any() const {
        return wall_seconds || cpu_seconds || memory_bytes || pids || fsize_bytes || nofile ||
               stack_bytes || as_bytes || stdout_bytes || stderr_bytes;
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

struct LimitPlan {
    std::vector<RlimitOp> rlimits;
    std::vector<std::pair<std::string, std::string>> mechanisms;  // limit name -> how
    bool sample_usage = false;  // init reports the sandbox's CPU and memory use
    int sample_ms = 100;
};

// Pure. `kernel_nproc_per_userns`: Linux >= 5.14 counts RLIMIT_NPROC per user namespace.
// `caller_root`: the kernel never applies RLIMIT_NPROC to the host's uid 0.
LimitPlan plan_limits(const Limits& l, const CgroupCaps& cg, bool kernel_nproc_per_userns, bool root_inside,
                      bool caller_root);

// Child side: setrlimit() for each op; a hard limit can only go down.
void apply_rlimits(const std::vector<RlimitOp>& ops);

}  // namespace gpubox::isolate
