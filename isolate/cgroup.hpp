#pragma once
// A cgroup v2 of the sandbox's own, where this user may have one: below our own cgroup where we
// may write it (root, or a delegated subtree we run in), in a transient systemd scope with
// Delegate=yes (systemd_scope.hpp), or below --cgroup PATH. Monitor side only. In `auto` mode
// every failure here is a reason to fall back, never an error; `--cgroup systemd` and `--cgroup
// PATH` fail instead (exit 125).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.hpp"
#include "isolate/cgroup_plan.hpp"
#include "isolate/limits.hpp"

namespace gpubox::isolate {

struct Cgroup {
    std::string path;  // absolute, e.g. /sys/fs/cgroup/user.slice/.../gpubox-1234
    UniqueFd dir;      // for clone3(CLONE_INTO_CGROUP)
    CgroupCaps caps;
    // How the cgroup was had, for people: "own cgroup /sys/fs/cgroup/...", "systemd scope
    // gpubox-1234-0a1b2c3d.scope", "--cgroup /sys/fs/cgroup/..."; empty without one.
    std::string how;
    std::string reason;  // why it is not usable, or which controllers are missing
    // The routes tried and not taken, each with why (`gpubox doctor` shows them with a fix).
    std::vector<std::pair<CgroupRoute, std::string>> passed_over;
};

// What this host tells this process of cgroup v2, read once a run for every use below: where
// cgroup2 is mounted (none: no cgroup v2) and /proc/self/cgroup's text.
struct CgroupHost {
    std::optional<std::string> mount;
    std::string self;
};
CgroupHost read_cgroup_host();

// Make and configure the sandbox's cgroup for `limits`, the way `request` asks.
Cgroup setup_cgroup(const Limits& limits, const CgroupRequest& request,
                    const CgroupHost& host = read_cgroup_host());

std::optional<std::uint64_t> cgroup_cpu_usec(const Cgroup& cg);
std::optional<std::uint64_t> cgroup_memory_peak(const Cgroup& cg);
bool cgroup_oom_killed(const Cgroup& cg);
bool cgroup_kill(const Cgroup& cg);  // writes cgroup.kill; false if the kernel lacks it
void remove_cgroup(Cgroup& cg);      // rmdir once its processes are gone
// Whether a session this process starts would be an autogroup of its own (autogroup_applies(),
// from this host's kernel.sched_autogroup_enabled and our own cgroups). Throws nothing.
bool autogroups_here(const CgroupHost& host);

}  // namespace gpubox::isolate
