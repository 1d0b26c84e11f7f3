#include "isolate/crowd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <unordered_set>

#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/unique_fd.hpp"
#include "isolate/usage.hpp"

namespace gpubox::isolate {
namespace {

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL  // Linux >= 6.9: a pidfd for one thread, not only a group leader
#endif

bool to_pid(std::string_view s, pid_t& out) {
    std::uint64_t v = 0;
    if (!to_u64(s, v) || v == 0 || v > static_cast<std::uint64_t>(INT32_MAX)) return false;
    out = static_cast<pid_t>(v);
    return true;
}

// Process `pid` held by a pidfd (while it is held, the pid names it and no other process), if
// it is `parent`'s child (0: trusted, the monitor's own child): what a children file listed may
// have died since and its pid named another.
UniqueFd hold(pid_t pid, pid_t parent) {
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    ProcSample p;
    if (!fd.valid() ||
        (parent &&
         (!parse_proc_stat(sys::try_read_at(AT_FDCWD, cat("/proc/", pid, "/stat")), 1, p) ||
          p.ppid != parent)))
        return {};
    return fd;
}

// Thread `tid` of held process `pid`, held too: the same for one thread (Linux >= 6.9).
UniqueFd hold_thread(pid_t pid, pid_t tid) {
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, tid, PIDFD_THREAD)));
    struct stat st {};
    if (!fd.valid() || ::stat(cat("/proc/", pid, "/task/", tid).c_str(), &st) != 0) return {};
    return fd;
}

}  // namespace

cpu_set_t all_but(const cpu_set_t& usable, int keep) {
    cpu_set_t out = usable;
    if (keep < 0 || keep >= CPU_SETSIZE || !CPU_ISSET(keep, &usable) || CPU_COUNT(&usable) < 2)
        CPU_ZERO(&out);
    else CPU_CLR(keep, &out);
    return out;
}

std::vector<pid_t> parse_children(std::string_view text) {
    std::vector<pid_t> out;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find_first_of(" \n", at), text.size());
        pid_t pid = 0;
        if (end > at && !to_pid(text.substr(at, end - at), pid)) break;
        if (end > at) out.push_back(pid);
        at = end + 1;
    }
    return out;
}

bool PinSweep::step(std::uint64_t budget_ns) {
    if (CPU_COUNT(&cpus_) == 0) return true;
    const std::uint64_t end = sys::monotonic_ns() + budget_ns;
    for (bool first = true; next_ < queue_.size(); first = false) {
        if (!first && sys::monotonic_ns() >= end) return false;
        const auto [pid, parent] = queue_[next_++];  // breadth first: parents before children
        const UniqueFd leader = hold(pid, parent);
        if (!leader.valid()) continue;  // gone, or its pid names another process now
        const std::string tasks = cat("/proc/", pid, "/task");
        for (const std::string& name :
             sys::try_list_dir(AT_FDCWD, tasks).value_or(std::vector<std::string>{})) {
            pid_t tid = 0;
            if (!to_pid(name, tid)) continue;
            const UniqueFd thread = tid == pid ? UniqueFd() : hold_thread(pid, tid);
            if (tid != pid && !thread.valid()) continue;
            if (::sched_setaffinity(tid, sizeof cpus_, &cpus_) == 0) ++pinned_;
            // What this task forks from now on inherits its affinity; what it forked is listed.
            for (const pid_t child : parse_children(
                     sys::try_read_at(AT_FDCWD, cat(tasks, "/", tid, "/children"), 1 << 16)))
                if (seen_.insert(child).second) queue_.emplace_back(child, pid);
        }
    }
    return true;
}

std::size_t pin_tree(pid_t init, const cpu_set_t& cpus) {
    PinSweep sweep(init, cpus);
    sweep.step(~0ULL / 2);
    return sweep.pinned();
}

}  // namespace gpubox::isolate
