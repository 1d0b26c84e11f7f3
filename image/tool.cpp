#include "image/tool.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <linux/close_range.h>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::image {
namespace {

// The helper's "progress: TEXT" lines, shown on gpubox's stderr (a terminal) over each other;
// everything else stays in `err` for the failure message.
void relay_progress(std::string& err, std::size_t& scanned, bool& shown) {
    static const std::string kTag = "progress: ";
    for (std::size_t nl; (nl = err.find('\n', scanned)) != std::string::npos;) {
        if (err.compare(scanned, kTag.size(), kTag) != 0) {
            scanned = nl + 1;
            continue;
        }
        const std::string line =
            "\r" + err.substr(scanned + kTag.size(), nl - scanned - kTag.size());
        [[maybe_unused]] ssize_t ignored = ::write(2, line.data(), line.size());
        shown = true;
        err.erase(scanned, nl + 1 - scanned);
    }
}

// Reads both pipes to EOF without letting either fill up.
void drain(int out_fd, int err_fd, std::string& out, std::string& err, bool relay,
           const std::function<void()>& tick) {
    std::size_t scanned = 0;
    bool shown = false;
    pollfd p[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    std::string* sink[2] = {&out, &err};
    int open = (out_fd >= 0) + (err_fd >= 0);
    while (open > 0) {
        if (::poll(p, 2, tick ? 200 : -1) < 0) {
            if (errno == EINTR) continue;
            sys::fail("poll(helper pipes)", errno);
        }
        if (tick) tick();
        for (int i = 0; i < 2; ++i) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[8192];
            const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                p[i].fd = -1, --open;
                continue;
            }
            if (sink[i]->size() < (1u << 20)) sink[i]->append(buf, static_cast<std::size_t>(n));
            if (relay && i == 1) relay_progress(err, scanned, shown);
        }
    }
    if (shown) [[maybe_unused]]
        ssize_t ignored = ::write(2, "\r\033[K", 4);
}

}  // namespace

bool ToolResult::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string ToolResult::failure() const {
    if (WIFSIGNALED(status)) return cat("killed by signal ", WTERMSIG(status));
    return cat("exited with status ", WEXITSTATUS(status));
}

ToolResult run_tool(const Program& program, const std::vector<std::string>& args,
                    const std::vector<std::string>& env, bool stdout_to_stderr, bool relay_progress,
                    const std::function<void()>& tick) {
    UniqueFd null = sys::open_at(AT_FDCWD, "/dev/null", O_RDWR);
    UniqueFd out_r, out_w, err_r, err_w;
    if (!stdout_to_stderr) sys::pipe(out_r, out_w);
    sys::pipe(err_r, err_w);
    const pid_t pid = companion::spawn(
        program, args, env, {null.get(), stdout_to_stderr ? 2 : out_w.get(), err_w.get()});
    out_w.reset(), err_w.reset(), null.reset();
    ToolResult r;
    drain(out_r.valid() ? out_r.get() : -1, err_r.get(), r.out, r.err, relay_progress, tick);
    while (::waitpid(pid, &r.status, 0) < 0)
        if (errno != EINTR) sys::fail(cat("waitpid(", pid, ")"), errno);
    return r;
}

Program find_unpack_helper() { return find_helper("gpubox-unpack"); }

Program find_helper(const std::string& name) { return companion::find(name); }

std::string find_skopeo() {
    for (const char* p : {"/usr/bin/skopeo", "/bin/skopeo"})
        if (::access(p, X_OK) == 0) return p;
    throw PlanError(
        "skopeo is not installed (it fetches images for gpubox pull)",
        "install it: apt install skopeo (Debian, Ubuntu), dnf install skopeo (Fedora, RHEL)");
}

}  // namespace gpubox::image
