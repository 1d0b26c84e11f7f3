#pragma once
// Named sandboxes (run --name NAME, ps, exec NAME): a registry of the caller's running ones.
//
// The registry is a state directory of the caller's own (common/trusted_path.hpp): GPUBOX_SANDBOX_DIR,
// else $XDG_RUNTIME_DIR/gpubox/sandboxes, else /tmp/gpubox-sandboxes-UID; nobody else can plant,
// replace or read anything in it. Per sandbox, NAME.lock, which its monitor holds locked (flock
// LOCK_EX) for as long as it runs, and NAME.sandbox, what ps shows and exec needs. The lock is
// the liveness: a sandbox whose monitor died (kill -9) leaves a lock nobody holds, and the next
// ps, run or exec that finds it removes both files. So a name is unique per user while its
// sandbox runs, and no pid is ever trusted on its own: exec opens a pidfd of the recorded init
// and checks it against the recorded start time and the lock still held.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.hpp"
#include "isolate/limits.hpp"

namespace gpubox::launcher::named {

// Pure: why `name` cannot name a sandbox ("contains '/'"), or "" when it can: 1 to 64 of
// [A-Za-z0-9_.-], not starting with '.' or '-'.
std::string name_problem(const std::string& name);

// What ps shows and exec needs, as the run's monitor wrote it.
struct Entry {
    std::string name;
    pid_t pid = 0;             // the sandbox's init, as the host sees it
    std::uint64_t start = 0;   // its start time (/proc/PID/stat field 22, clock ticks)
    pid_t monitor = 0;         // the run's gpubox
    std::int64_t started = 0;  // when, in seconds since the epoch
    std::string rootfs;        // ROOTFS, or run IMAGE's name
    std::string gpus;          // "none", or the selected GPUs
    std::string limits;        // "mem 64M (cgroup), pids 4096 (rlimit)" (limits_summary)
    // What a process exec starts needs to be confined as the workload is.
    std::string seccomp = "default";  // default, off, or the --seccomp-bpf file
    bool refuse_memfd = false;        // the limits' filter (isolate::limits_filter)
    bool refuse_setsid = false;       // likewise
    bool nested = true;               // the workload's user namespace is a nested one
    bool own_net = true;              // the sandbox has a network namespace of its own
    std::string cgroup;               // the sandbox's cgroup directory, or ""
    std::vector<std::pair<int, std::uint64_t>> rlimits;  // the workload's
    std::string workdir = "/";                           // the workload's, exec's default
    std::vector<std::string> env;  // the workload's environment ("K=V"), exec's base
};
// Pure: ps's LIMITS, the limits that apply and how each is enforced, the default pids limit
// included: "mem 64M (cgroup), wall 10s (monitor), pids 4096 (rlimit)"; "-" where none does.
std::string limits_summary(const isolate::Limits& l, const isolate::LimitPlan& plan);
std::string render(const Entry& e);    // key=value lines
Entry parse(const std::string& text);  // what render wrote; unknown keys ignored
std::string render_json(const std::vector<Entry>& entries, std::int64_t now);  // ps --json

// run --name: the name, held while the run lasts. claim() refuses (PlanError) a name in use.
class Claim {
public:
    Claim() = default;
    Claim(Claim&&) = default;
    Claim& operator=(Claim&&) noexcept;
    ~Claim();
    bool held() const { return lock_.valid(); }
    // The entry, once init runs (written whole: a temporary renamed over the name).
    void publish(const Entry& e);

private:
    friend Claim claim(const std::string& name);
    void release() noexcept;
    UniqueFd dir_, lock_;
    std::string name_;
};
Claim claim(const std::string& name);

// The caller's running sandboxes, by name; stale entries removed on the way.
std::vector<Entry> list();
// exec NAME: the running sandbox of that name, with a pidfd of its init checked against the
// entry (a pid reused since is refused); PlanError where there is none.
struct Target {
    Entry entry;
    UniqueFd init;
};
Target find(const std::string& name);

// /proc/PID/stat's start time (field 22), or 0 where the process is gone.
std::uint64_t start_time(pid_t pid);

}  // namespace gpubox::launcher::named
