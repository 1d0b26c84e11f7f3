#include "common/companion.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"

namespace gpubox::companion {

std::vector<std::string> candidates(const std::string& exe, const std::string& name) {
    const auto slash = exe.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? ""
                                                       : exe.substr(0, slash);
    return {cat(dir, "/", name), cat(dir, "/../libexec/gpubox/", name)};
}

std::string problem(const struct stat& st, uid_t exe_owner) {
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (st.st_uid != 0 && st.st_uid != exe_owner)
        return cat("owned by uid ", st.st_uid, ", neither root nor the owner of gpubox (uid ",
                   exe_owner, ")");
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return cat("writable by its group or by anyone (mode ", mode, ")");
    if (!(st.st_mode & S_IXUSR)) return cat("not executable (mode ", mode, ")");
    return "";
}

Program find(const std::string& name) {
    const std::string exe = sys::read_link_at(AT_FDCWD, "/proc/self/exe");
    const struct stat self = sys::stat("/proc/self/exe");
    const std::vector<std::string> paths = candidates(exe, name);
    for (const std::string& path : paths) {
        const int fd = sys::try_open_at(AT_FDCWD, path, O_PATH);
        if (fd == -ENOENT) continue;
        if (fd < 0) sys::fail(Syscall::open, -fd, cat("open(", quote(path), ", O_PATH)"), path);
        Program p{path, UniqueFd(fd)};
        const std::string why = problem(sys::fstat(p.fd.get(), path), self.st_uid);
        if (!why.empty()) throw SetupError(cat("helper ", quote(path), ": ", why));
        return p;
    }
    throw SetupError(cat("no helper ", name, " (looked for ", join(paths, " and "), ")"));
}

pid_t spawn(const Program& p, const std::vector<std::string>& args,
            const std::vector<std::string>& env, const std::array<int, 3>& fds, bool cwd_root) {
    std::vector<char*> argv, envp;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr), envp.push_back(nullptr);
    const std::string exec_failed = cat("execve(", quote(p.path), "): ");
    const pid_t pid = sys::fork(p.path);
    if (pid != 0) return pid;
    // Raw, async-signal-safe calls only until the exec (see common/sys_host.hpp). dup2 clears
    // FD_CLOEXEC on 0-2; every other fd is closed by the exec.
    for (int i = 0; i < 3; ++i)
        if (::dup2(fds[static_cast<std::size_t>(i)], i) < 0) ::_exit(127);
    if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (!cwd_root || ::chdir("/") == 0) {
        if (p.fd.valid())
            ::syscall(SYS_execveat, p.fd.get(), "", argv.data(), envp.data(), AT_EMPTY_PATH);
        else ::execve(p.path.c_str(), argv.data(), envp.data());
    }
    const char* why = std::strerror(errno);
    [[maybe_unused]] ssize_t ignored = ::write(2, exec_failed.data(), exec_failed.size());
    ignored = ::write(2, why, std::strlen(why));
    ignored = ::write(2, "\n", 1);
    ::_exit(127);
}

}  // namespace gpubox::companion
