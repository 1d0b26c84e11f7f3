#pragma once
// A cgroup v2 of the sandbox's own, where this user may make one: a delegated subtree (systemd
// user slice with Delegate=), or anywhere when gpubox runs as root. Monitor side only. Every
// failure here is a reason to fall back, never an error.
#include <cstdint>
#include <optional>
#include <string>

#include "common/unique_fd.hpp"
#include "isolate/limits.hpp"

namespace gpubox::isolate {

struct Cgroup {
    std::string path;  // absolute, e.g. /sys/fs/cgroup/user.slice/.../gpubox-1234
    UniqueFd dir;      // for clone3(CLONE_INTO_CGROUP)
    CgroupCaps caps;
    std::string reason;  // why it is not usable, or which controllers are missing
};

// Make and configure the sandbox's cgroup. `mode`: "auto" tries, "off" never does.
Cgroup setup_cgroup(const Limits& limits, const std::string& mode);

std::optional<std::uint64_t> cgroup_cpu_usec(const Cgroup& cg);
std::optional<std::uint64_t> cgroup_memory_peak(const Cgroup& cg);
bool cgroup_oom_killed(const Cgroup& cg);
bool cgroup_kill(const Cgroup& cg);  // writes cgroup.kill; false if the kernel lacks it
void remove_cgroup(Cgroup& cg);      // rmdir once its processes are gone

}  // namespace gpubox::isolate
