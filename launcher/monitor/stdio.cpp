#include "launcher/monitor/stdio.hpp"

#include <unistd.h>

#include "common/sys.hpp"

namespace gpubox::launcher {

StdioPlan plan_stdio(const std::array<StdioFd, 3>& fds, const std::array<bool, 3>& capped) {
    StdioPlan p;
    for (int i = 0; i < 3; ++i) {
        const StdioFd& f = fds[static_cast<std::size_t>(i)];
        if (!f.st) continue;  // closed: it stays closed
        const bool holds_no_file = S_ISFIFO(f.st->st_mode) || S_ISSOCK(f.st->st_mode) || f.tty;
        p.relay[static_cast<std::size_t>(i)] =
            !holds_no_file || capped[static_cast<std::size_t>(i)];
    }
    // `>file 2>&1`: one relay for both keeps the order in which the workload wrote them. Not
    // with a cap on either: each is counted on its own.
    const auto& out = fds[1].st;
    const auto& err = fds[2].st;
    p.err_into_out = p.relay[1] && p.relay[2] && !capped[1] && !capped[2] && out && err &&
                     !S_ISFIFO(out->st_mode) && !S_ISSOCK(out->st_mode) &&
                     out->st_dev == err->st_dev && out->st_ino == err->st_ino;
    return p;
}

std::array<StdioFd, 3> inspect_stdio() {
    std::array<StdioFd, 3> fds;
    for (int i = 0; i < 3; ++i) {
        struct stat st {};
        if (::fstat(i, &st) < 0) continue;
        fds[static_cast<std::size_t>(i)] = {st, S_ISCHR(st.st_mode) && sys::is_terminal(i)};
    }
    return fds;
}

}  // namespace gpubox::launcher
