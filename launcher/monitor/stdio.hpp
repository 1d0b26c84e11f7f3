#pragma once
// What the workload gets as fds 0-2. The workload runs as the caller's uid, so it owns any file
// the caller hands it: through /proc/self/fd/N it could fchmod, reopen read-write, truncate or
// rewrite that file (a grader's test input, a log). So it is never handed an fd to a host file.
// Pipes, sockets and terminals are passed as they are: a pipe or socket holds no file, and a
// terminal must stay a terminal. Anything else (a regular file, /dev/null or another device, a
// directory) is relayed by the monitor through a pipe. Output with a cap is always relayed,
// since the monitor counts it.
#include <sys/stat.h>

#include <array>
#include <optional>

namespace gpubox::launcher {

struct StdioFd {
    std::optional<struct stat> st;  // nullopt: the fd is closed
    bool tty = false;
};

struct StdioPlan {
    std::array<bool, 3> relay{};  // fd i reaches the workload through a pipe of the monitor
    bool err_into_out = false;    // fds 1 and 2 are one file: one relay keeps their order
};

// Pure. `capped[i]`: an output cap applies to fd i (1 or 2).
StdioPlan plan_stdio(const std::array<StdioFd, 3>& fds, const std::array<bool, 3>& capped);

// The caller's fds 0-2 as plan_stdio takes them.
std::array<StdioFd, 3> inspect_stdio();

}  // namespace gpubox::launcher
