#include "isolate/tree_clock.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/sys_host.hpp"

namespace gpubox::isolate {

TreeClock TreeClock::attach(pid_t init) {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;  // time on a CPU, user and kernel alike
    a.inherit = 1;
    a.disabled = 1, a.enable_on_exec = 1;  // see the header: from the workload's execve
    // Asked of an unprivileged caller (paranoid 2); task-clock counts the kernel's time all the
    // same, as the tasks' run time does (measured: their rusage within 1 % on a quiet machine,
    // a child's syscalls included).
    a.exclude_kernel = 1, a.exclude_hv = 1;
    TreeClock c;
    const long fd = ::syscall(SYS_perf_event_open, &a, init, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) c.error_ = errno;
    else c.fd_.reset(static_cast<int>(fd));
    return c;
}

TreeClock TreeClock::adopt(UniqueFd fd, int error) {
    TreeClock c;
    c.fd_ = std::move(fd);
    c.error_ = c.fd_.valid() ? 0 : error;
    return c;
}

std::optional<std::uint64_t> TreeClock::read() const {
    std::uint64_t ns = 0;
    if (!fd_.valid() || ::read(fd_.get(), &ns, sizeof ns) != sizeof ns) return std::nullopt;
    return ns;
}

bool tree_clock_lent(const std::string& paranoid, bool caller_root) {
    if (caller_root) return true;
    char* end = nullptr;
    const long level = std::strtol(paranoid.c_str(), &end, 10);
    return end != paranoid.c_str() && level <= 2;
}

bool tree_clock_lent_here(bool caller_root) {
    return tree_clock_lent(sys::try_read_at(AT_FDCWD, "/proc/sys/kernel/perf_event_paranoid", 32),
                           caller_root);
}

}  // namespace gpubox::isolate
