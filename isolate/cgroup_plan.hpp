#pragma once
// The pure half of the cgroup path: what --cgroup asked for, which routes to a cgroup of the
// sandbox's own to try in which order, and the text parsers they need. No I/O here.
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isolate/limits.hpp"

namespace gpubox::isolate {

enum class CgroupMode {
    auto_,    // own writable cgroup, else a systemd scope, else none (with a reason)
    off,      // never
    systemd,  // a systemd scope or exit 125
    path,     // below an existing delegated cgroup directory
};

struct CgroupRequest {
    CgroupMode mode = CgroupMode::auto_;
    std::string path;  // CgroupMode::path only: absolute
};

// "auto", "off", "systemd" or an absolute directory; UsageError otherwise.
CgroupRequest parse_cgroup_request(const std::string& text);
// "auto", "off", "systemd", "PATH": --cgroup's words, from the one table of them.
std::string_view to_string(CgroupMode mode);

// Ways to a cgroup of the sandbox's own.
enum class CgroupRoute {
    own,            // below our own cgroup, where we may write (root, or a delegated subtree)
    systemd_scope,  // a transient scope with Delegate=yes from the caller's systemd
    given,          // below --cgroup PATH
};
std::vector<CgroupRoute> plan_cgroup_routes(CgroupMode mode);

// How much of what `wanted` asks for a cgroup with `got` enforces: 0 for an unusable one, then
// one point for being usable (cgroup.kill, cpu.stat) and two per asked controller it has.
int cgroup_score(const CgroupCaps& got, const Limits& wanted);
// Whether `got` enforces everything asked, so that `auto` stops looking.
bool cgroup_covers(const CgroupCaps& got, const Limits& wanted);

// Pure. Whether a run looks for a cgroup at all. Where one is asked for (--require-cgroup,
// --cgroup systemd or PATH with a limit), and where one enforces a limit better than the
// fallback: CPU and memory (read by the kernel, not sampled), and processes where RLIMIT_NPROC
// cannot count the sandbox's (the host's uid 0 is exempt; before Linux 5.14 it counts all of the
// user's). A wall-clock limit is a timer, the rlimits and output caps are the kernel's and the
// relay's: a run with only those neither searches nor makes one.
bool cgroup_wanted(const Limits& l, CgroupMode mode, bool required, bool caller_root,
                   bool nproc_per_userns);

// One line of advice for `gpubox doctor`: how to make `route` work, given why it did not (`why`,
// as setup_cgroup() words it), for user `uid`.
std::string cgroup_fix(CgroupRoute route, const std::string& why, uid_t uid);
// The same for a scope without the cpu controller (cpu.stat works without it; cpu.max does not).
std::string cgroup_cpu_fix();

// The cgroup2 mount point from /proc/self/mountinfo text (octal escapes decoded).
std::optional<std::string> parse_cgroup2_mount(std::string_view mountinfo);
// The unified hierarchy's path ("0::/a/b") from /proc/PID/cgroup text.
std::optional<std::string> parse_proc_cgroup(std::string_view text);
// Pure: the nearest cgroup directory two absolute ones share, by whole names. cgroup v2 moves a
// process from one to the other only where its user may write that one's cgroup.procs.
std::string common_cgroup(const std::string& a, const std::string& b);
// "gpubox-<pid>-<8 hex digits>.scope".
std::string scope_unit_name(pid_t pid, std::uint32_t random);
// Pure: the monitor pid in a sandbox cgroup's name ("gpubox-<pid>"), for anything else nullopt.
std::optional<pid_t> sandbox_cgroup_pid(const std::string& name);
// Whether the last component of cgroup path `path` is `unit`.
bool cgroup_is_unit(std::string_view path, std::string_view unit);
// The "+ctrl" words for cgroup.subtree_control: those of `wanted` that `controllers` (the text
// of cgroup.controllers) offers, in `wanted`'s order.
std::vector<std::string> plan_subtree_control(std::string_view controllers,
                                              const std::vector<std::string>& wanted);

}  // namespace gpubox::isolate
