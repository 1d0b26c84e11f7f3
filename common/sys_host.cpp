#include "common/sys_host.hpp"

#include <dirent.h>
#include <sys/file.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::sys {

int try_kill(pid_t pid, int sig) { return ::kill(pid, sig) == 0 ? 0 : -errno; }

int try_poll_in(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    return ready < 0 ? -errno : ready;
}

ssize_t read_some(int fd, void* buf, std::size_t len) {
    for (;;) {
        const ssize_t n = ::read(fd, buf, len);
        if (n >= 0) return n;
        if (errno != EINTR) return -errno;
    }
}

struct stat stat(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) < 0)
        fail(Syscall::stat, errno, cat("stat(", quote(path), ")"), path);
    return st;
}

void mkdir(const std::string& path, mode_t mode) {
    if (::mkdir(path.c_str(), mode) < 0)
        fail(Syscall::mkdir, errno, cat("mkdir(", quote(path), ")"), path);
}

void pwrite_all(int fd, const std::string& data, off_t offset, const std::string& what) {
    for (std::size_t done = 0; done < data.size();) {
        const ssize_t n =
            ::pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(Syscall::pwrite, errno, cat("pwrite(", quote(what), ")"), what);
        done += static_cast<std::size_t>(n);
    }
}

namespace {

// The entries of an open directory; `dir` is consumed. -errno where it cannot be read.
int read_dir(UniqueFd dir, std::vector<std::string>& out) {
    DIR* d = ::fdopendir(dir.get());
    if (!d) return -errno;
    dir.release();  // closedir() closes it
    errno = 0;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") out.push_back(name);
    }
    const int err = errno;
    ::closedir(d);
    return err ? -err : 0;
}

}  // namespace

std::vector<std::string> list_dir(int dirfd, const std::string& name) {
    UniqueFd dir = open_at(dirfd, name, O_RDONLY | O_DIRECTORY);
    std::vector<std::string> out;
    if (const int err = read_dir(std::move(dir), out); err < 0)
        fail(Syscall::getdents64, -err, cat("readdir(", quote(name), ")"), name);
    return out;
}

std::optional<std::vector<std::string>> try_list_dir(int dirfd, const std::string& name) {
    const int fd = try_open_at(dirfd, name, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return std::nullopt;
    std::vector<std::string> out;
    if (read_dir(UniqueFd(fd), out) < 0) return std::nullopt;
    return out;
}

void remove_dir_at(int dirfd, const std::string& name) {
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) < 0)
        fail(Syscall::unlinkat, errno, cat("unlinkat(", quote(name), ", AT_REMOVEDIR)"), name);
}

int try_rmdir(const std::string& path) { return ::rmdir(path.c_str()) == 0 ? 0 : -errno; }

std::string try_read_at(int dirfd, const std::string& name, std::size_t cap) {
    const int raw = try_open_at(dirfd, name, O_RDONLY);
    if (raw < 0) return {};
    UniqueFd fd(raw);
    // Appended as read, not into `cap` bytes zeroed first: a large cap costs nothing then.
    std::string out;
    char buf[4096];
    for (ssize_t n; out.size() < cap &&
                    (n = ::read(fd.get(), buf, std::min(sizeof buf, cap - out.size()))) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    return out;
}

bool try_stat_at(int dirfd, const std::string& name, struct stat& st) {
    return ::fstatat(dirfd, name.c_str(), &st, 0) == 0;
}

bool try_fstat(int fd, struct stat& st) { return ::fstat(fd, &st) == 0; }

std::optional<struct statfs> try_fstatfs(int fd) {
    struct statfs fs {};
    if (::fstatfs(fd, &fs) < 0) return std::nullopt;
    return fs;
}

std::uint64_t ns_per_clock_tick() {
    static const std::uint64_t ns =
        1000000000ULL / static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    return ns;
}

std::string node_name() {
    utsname u{};
    ::uname(&u);
    return u.nodename;
}

// Host-side wrappers declared in sys.hpp (box locks, leases, `doctor`), kept here, apart from
// the wrappers the sandbox side calls.

bool flock_exclusive(int fd, bool wait, const std::string& what) {
    int rc;
    do rc = ::flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
    while (rc < 0 && errno == EINTR);
    if (rc == 0) return true;
    if (errno == EWOULDBLOCK && !wait) return false;
    fail(Syscall::flock, errno, cat("flock(", quote(what), ", LOCK_EX)"), what);
}

bool flock_try(int fd, bool shared, const std::string& what) {
    int rc;
    do rc = ::flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB);
    while (rc < 0 && errno == EINTR);
    if (rc == 0) return true;
    if (errno == EWOULDBLOCK) return false;
    fail(Syscall::flock, errno,
         cat("flock(", quote(what), shared ? ", LOCK_SH|LOCK_NB)" : ", LOCK_EX|LOCK_NB)"), what);
}

int try_faccessat(const std::string& path, int mode) {
    return ::faccessat(AT_FDCWD, path.c_str(), mode, AT_EACCESS) == 0 ? 0 : -errno;
}

void ftruncate(int fd, off_t size, const std::string& what) {
    if (::ftruncate(fd, size) < 0)
        fail(Syscall::ftruncate, errno, cat("ftruncate(", quote(what), ", ", size, ")"), what);
}

std::string kernel_release() {
    utsname u{};
    ::uname(&u);
    return u.release;
}

bool kernel_at_least(int major, int minor) {
    int a = 0, b = 0;
    std::sscanf(kernel_release().c_str(), "%d.%d", &a, &b);
    return a > major || (a == major && b >= minor);
}

}  // namespace gpubox::sys
