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

[[noreturn]] void exec_child(const Program& prog, char* const* argv, char* const* envp, int null_fd,
                             int out_fd, int err_fd) {
    // dup2 clears FD_CLOEXEC on 0-2; every other fd is closed by the exec.
    if (::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(127);
    if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (prog.fd >= 0) {
        ::syscall(SYS_execveat, prog.fd, "", argv, envp, AT_EMPTY_PATH);
    } else {
        ::execve(prog.path.c_str(), argv, envp);
    }
    const std::string msg = cat("execve(", quote(prog.path), "): ", std::strerror(errno), "\n");
    [[maybe_unused]] ssize_t ignored = ::write(2, msg.data(), msg.size());
    ::_exit(127);
}

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

// As gpubox-scope (isolate/cgroup_plan.cpp): a helper someone else could rewrite would run with
// the caller's rights, so it must be an executable regular file owned by root or by gpubox's
// owner, with no group or world write bit.
std::string helper_problem(const struct stat& st, uid_t exe_owner) {
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (st.st_uid != 0 && st.st_uid != exe_owner)
        return cat("owned by uid ", st.st_uid, ", neither root nor gpubox's owner");
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by group or others";
    if (!(st.st_mode & S_IXUSR)) return "not executable";
    return "";
}

}  // namespace

bool ToolResult::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string ToolResult::failure() const {
    if (WIFSIGNALED(status)) return cat("killed by signal ", WTERMSIG(status));
    return cat("exited with status ", WEXITSTATUS(status));
}

ToolResult run_tool(const Program& path, const std::vector<std::string>& args,
                    const std::vector<std::string>& env, bool stdout_to_stderr, bool relay_progress,
                    const std::function<void()>& tick) {
    std::vector<char*> argv, envp;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr), envp.push_back(nullptr);
    UniqueFd null = sys::open_at(AT_FDCWD, "/dev/null", O_RDWR);
    UniqueFd out_r, out_w, err_r, err_w;
    if (!stdout_to_stderr) sys::pipe(out_r, out_w);
    sys::pipe(err_r, err_w);
    const pid_t pid = ::fork();
    if (pid < 0) sys::fail("fork()", errno);
    if (pid == 0)
        exec_child(path, argv.data(), envp.data(), null.get(), stdout_to_stderr ? 2 : out_w.get(),
                   err_w.get());
    out_w.reset(), err_w.reset(), null.reset();
    ToolResult r;
    drain(out_r.valid() ? out_r.get() : -1, err_r.get(), r.out, r.err, relay_progress, tick);
    while (::waitpid(pid, &r.status, 0) < 0)
        if (errno != EINTR) sys::fail(cat("waitpid(", pid, ")"), errno);
    return r;
}

Program find_unpack_helper() { return find_helper("gpubox-unpack"); }

Program find_helper(const std::string& name) {
    char exe[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) sys::fail("readlink(\"/proc/self/exe\")", errno);
    exe[n] = '\0';
    struct stat self {};
    if (::stat("/proc/self/exe", &self) < 0) sys::fail("stat(\"/proc/self/exe\")", errno);
    const std::string e = exe;
    const std::string dir = e.substr(0, e.rfind('/'));
    const std::vector<std::string> candidates = {dir + "/" + name,
                                                 dir + "/../libexec/gpubox/" + name};
    for (const std::string& path : candidates) {
        const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) continue;
        if (fd < 0) sys::fail(cat("open(", quote(path), ", O_PATH)"), errno);
        UniqueFd owned(fd);
        const std::string problem = helper_problem(sys::fstat(fd, path), self.st_uid);
        if (!problem.empty()) throw SetupError(cat("helper ", quote(path), ": ", problem));
        return {path, owned.release()};
    }
    throw SetupError(cat("no helper ", name, " (looked for ", join(candidates, " and "), ")"));
}

std::string find_skopeo() {
    for (const char* p : {"/usr/bin/skopeo", "/bin/skopeo"})
        if (::access(p, X_OK) == 0) return p;
    throw PlanError(
        "skopeo is not installed (it fetches images for gpubox pull)",
        "install it: apt install skopeo (Debian, Ubuntu), dnf install skopeo (Fedora, RHEL)");
}

}  // namespace gpubox::image
