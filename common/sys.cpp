#include "common/sys.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <net/if.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <type_traits>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::sys {

std::string open_flags(int flags) {
    std::string s;
    auto add = [&](int bit, const char* name) {
        if (flags & bit) s += cat(s.empty() ? "" : "|", name);
    };
    if ((flags & O_ACCMODE) == O_WRONLY) s = "O_WRONLY";
    else if ((flags & O_ACCMODE) == O_RDWR) s = "O_RDWR";
    else if (!(flags & O_PATH)) s = "O_RDONLY";
    add(O_PATH, "O_PATH");
    add(O_DIRECTORY, "O_DIRECTORY");
    add(O_NOFOLLOW, "O_NOFOLLOW");
    add(O_CREAT, "O_CREAT");
    add(O_EXCL, "O_EXCL");
    add(O_TRUNC, "O_TRUNC");
    return s;
}

namespace {

std::string attr_names(std::uint64_t a) {
    std::string s;
    auto add = [&](std::uint64_t bit, const char* name) {
        if (a & bit) s += cat(s.empty() ? "" : "|", name);
    };
    add(MOUNT_ATTR_RDONLY, "ro");
    add(MOUNT_ATTR_NOSUID, "nosuid");
    add(MOUNT_ATTR_NODEV, "nodev");
    add(MOUNT_ATTR_NOEXEC, "noexec");
    return s.empty() ? "0" : s;
}

// `op` names the call for the error; a callable builds that text only when the call failed,
// since these wrappers run on the start-up path.
template <typename Op>
int check(long ret, Syscall call, const std::string& path, const Op& op) {
    if (ret >= 0) return static_cast<int>(ret);
    const int err = errno;
    if constexpr (std::is_invocable_v<Op>) fail(call, err, op(), path);
    else fail(call, err, op, path);
}

// The same for a call site that gives only the text: SysError reads the call and path from it.
template <typename Op>
int check(long ret, const Op& op) {
    if (ret >= 0) return static_cast<int>(ret);
    const int err = errno;
    if constexpr (std::is_invocable_v<Op>) fail(op(), err);
    else fail(op, err);
}

}  // namespace

void fail(const std::string& op_text, int err) { throw SysError(err, op_text); }

void fail(Syscall call, int err, const std::string& op_text, const std::string& path) {
    throw SysError(call, err, op_text, path);
}

UniqueFd open_at(int dirfd, const std::string& path, int flags, mode_t mode) {
    int fd = ::openat(dirfd, path.c_str(), flags | O_CLOEXEC, mode);
    if (fd < 0)
        fail(Syscall::open, errno, cat("open(", quote(path), ", ", open_flags(flags), ")"), path);
    return UniqueFd(fd);
}

int try_openat2(int dirfd, const std::string& path, std::uint64_t flags, std::uint64_t resolve,
                std::uint64_t mode) {
    open_how how{};
    how.flags = flags | O_CLOEXEC;
    how.mode = mode;
    how.resolve = resolve;
    // A ".." under RESOLVE_IN_ROOT or RESOLVE_BENEATH that races a mount or a rename anywhere
    // on the host fails with EAGAIN (the kernel cannot prove it stayed inside), and openat2(2)
    // says to retry: a node starting sandboxes side by side mounts all the time.
    for (int tries = 0;; ++tries) {
        const long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
        if (fd >= 0) return static_cast<int>(fd);
        if (errno != EAGAIN || tries == 1000) return -errno;
    }
}

struct stat fstat(int fd, const std::string& what) {
    struct stat st {};
    if (::fstat(fd, &st) < 0) fail(Syscall::fstat, errno, cat("fstat(", quote(what), ")"), what);
    return st;
}

bool lstat_at(int dirfd, const std::string& name, struct stat& st) {
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
    if (errno == ENOENT) return false;
    fail(Syscall::fstatat, errno, cat("fstatat(", quote(name), ", AT_SYMLINK_NOFOLLOW)"), name);
}

void mkdir_at(int dirfd, const std::string& name, mode_t mode) {
    if (::mkdirat(dirfd, name.c_str(), mode) < 0 && errno != EEXIST)
        fail(Syscall::mkdirat, errno, cat("mkdirat(", quote(name), ")"), name);
}

// One call where open(O_CREAT|O_EXCL) needs a close() too; regular files need no privilege.
void mknod_file_at(int dirfd, const std::string& name, mode_t mode) {
    if (::mknodat(dirfd, name.c_str(), S_IFREG | mode, 0) < 0 && errno != EEXIST)
        fail(Syscall::mknodat, errno, cat("mknodat(", quote(name), ", S_IFREG)"), name);
}

void symlink_at(const std::string& text, int dirfd, const std::string& name) {
    if (::symlinkat(text.c_str(), dirfd, name.c_str()) < 0)
        fail(Syscall::symlinkat, errno, cat("symlinkat(", quote(text), " -> ", quote(name), ")"),
             name);
}

void rename_at(int dirfd, const std::string& from, const std::string& to) {
    if (::renameat(dirfd, from.c_str(), dirfd, to.c_str()) < 0)
        fail(Syscall::renameat, errno, cat("renameat(", quote(from), " -> ", quote(to), ")"), from);
}

void fchmod(int fd, mode_t mode, const std::string& what) {
    check(::fchmod(fd, mode), Syscall::fchmod, what,
          [&] { return cat("fchmod(", quote(what), ")"); });
}

std::string read_link_at(int dirfd, const std::string& name) {
    char buf[4096];
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf);
    if (n < 0) fail(Syscall::readlinkat, errno, cat("readlinkat(", quote(name), ")"), name);
    if (static_cast<std::size_t>(n) == sizeof buf)
        fail(Syscall::readlinkat, ENAMETOOLONG, cat("readlinkat(", quote(name), ")"), name);
    return std::string(buf, static_cast<std::size_t>(n));
}

std::string read_fd_link(int fd) { return read_link_at(AT_FDCWD, cat("/proc/self/fd/", fd)); }

int try_write_all(int fd, std::string_view data) noexcept {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        if (n == 0) return EIO;  // a write of more than nothing that wrote nothing: no progress
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
}

void write_all(int fd, std::string_view data, const std::string& what) {
    if (const int err = try_write_all(fd, data))
        fail(Syscall::write, err, cat("write(", quote(what), ")"), what);
}

std::string read_all(int fd, const std::string& what, std::size_t limit) {
    std::string out;
    char buf[16384];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(Syscall::read, errno, cat("read(", quote(what), ")"), what);
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > limit) fail(Syscall::read, EFBIG, cat("read(", quote(what), ")"), what);
    }
    return out;
}

std::string read_file(const std::string& path, std::size_t limit) {
    UniqueFd fd = open_at(AT_FDCWD, path, O_RDONLY);
    return read_all(fd.get(), path, limit);
}

void write_file(const std::string& path, std::string_view data) {
    UniqueFd fd = open_at(AT_FDCWD, path, O_WRONLY);
    write_all(fd.get(), data, path);
}

int try_open_at(int dirfd, const std::string& name, int flags, mode_t mode) {
    const int fd = ::openat(dirfd, name.c_str(), flags | O_CLOEXEC, mode);
    return fd < 0 ? -errno : fd;
}

int try_lstat_at(int dirfd, const std::string& name, struct stat& st) {
    return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int try_stat(const std::string& path, struct stat& st) {
    return ::stat(path.c_str(), &st) < 0 ? -errno : 0;
}

int try_read_link_at(int dirfd, const std::string& name, std::string& text) {
    char buf[4096];
    const ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf);
    if (n < 0) return -errno;
    if (static_cast<std::size_t>(n) == sizeof buf) return -ENAMETOOLONG;
    text.assign(buf, static_cast<std::size_t>(n));
    return 0;
}

int try_mkdir_at(int dirfd, const std::string& name, mode_t mode) {
    return ::mkdirat(dirfd, name.c_str(), mode) < 0 ? -errno : 0;
}

int try_mknod_file_at(int dirfd, const std::string& name, mode_t mode) {
    return ::mknodat(dirfd, name.c_str(), S_IFREG | mode, 0) < 0 ? -errno : 0;
}

int try_symlink_at(const std::string& text, int dirfd, const std::string& name) {
    return ::symlinkat(text.c_str(), dirfd, name.c_str()) < 0 ? -errno : 0;
}

int try_unlink_at(int dirfd, const std::string& name) {
    return ::unlinkat(dirfd, name.c_str(), 0) < 0 ? -errno : 0;
}

void fchmod_at(int dirfd, const std::string& name, mode_t mode) {
    if (::fchmodat(dirfd, name.c_str(), mode, 0) < 0)
        fail(cat("fchmodat(", quote(name), ", 0", std::oct, mode, ")"), errno);
}

mode_t set_umask(mode_t mask) { return ::umask(mask); }

pid_t fork(const std::string& what) {
    return check(::fork(), [&] { return cat("fork() for ", what); });
}

int wait_status(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) fail(cat("waitpid(", pid, ")"), errno);
    return status;
}

void kill_and_reap(pid_t pid) noexcept {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
}

UniqueFd fsopen(const std::string& fstype) {
    return UniqueFd(check(::syscall(SYS_fsopen, fstype.c_str(), FSOPEN_CLOEXEC), Syscall::fsopen,
                          fstype, [&] { return cat("fsopen(", quote(fstype), ")"); }));
}

void fsconfig_string(int fsfd, const std::string& fstype, const std::string& key,
                     const std::string& value) {
    check(::syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, key.c_str(), value.c_str(), 0),
          Syscall::fsconfig, fstype,
          [&] { return cat("fsconfig(", quote(fstype), ", ", key, "=", quote(value), ")"); });
}

void fsconfig_flag(int fsfd, const std::string& fstype, const std::string& key) {
    check(::syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_FLAG, key.c_str(), nullptr, 0),
          Syscall::fsconfig, fstype,
          [&] { return cat("fsconfig(", quote(fstype), ", ", key, ")"); });
}

void fsconfig_create(int fsfd, const std::string& fstype) {
    check(::syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0),
          Syscall::fsconfig, fstype,
          [&] { return cat("fsconfig(", quote(fstype), ", FSCONFIG_CMD_CREATE)"); });
}

UniqueFd fsmount(int fsfd, const std::string& fstype, unsigned attrs) {
    return UniqueFd(
        check(::syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, attrs), Syscall::fsmount, fstype,
              [&] { return cat("fsmount(", quote(fstype), ", ", attr_names(attrs), ")"); }));
}

UniqueFd open_tree_clone(int fd, const std::string& what, bool recursive, std::uint64_t set) {
    const auto name = [&] {
        return cat("open_tree(", quote(what), ", OPEN_TREE_CLONE", recursive ? "|AT_RECURSIVE" : "",
                   set ? cat(", ", attr_names(set)) : std::string(), ")");
    };
    if (set) {
        const int tree = try_open_tree_attr(fd, "", recursive, set);
        if (tree < 0) fail(Syscall::open_tree, -tree, name(), what);
        return UniqueFd(tree);
    }
    unsigned flags =
        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
    return UniqueFd(check(::syscall(SYS_open_tree, fd, "", flags), Syscall::open_tree, what, name));
}

static int try_open_tree_clone(int dirfd, const std::string& path, bool recursive) {
    const unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0) |
                           (path.empty() ? AT_EMPTY_PATH : 0);
    const long fd = ::syscall(SYS_open_tree, dirfd, path.c_str(), flags);
    return fd < 0 ? -errno : static_cast<int>(fd);
}

#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467  // the same number on every architecture
#endif

int try_open_tree_attr(int dirfd, const std::string& path, bool recursive, std::uint64_t set) {
    const unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0) |
                           (path.empty() ? AT_EMPTY_PATH : 0);
    static bool two_calls = false;  // an older kernel, or a filter that does not know the call
    if (!two_calls) {
        mount_attr attr{};
        attr.attr_set = set;
        const long fd =
            ::syscall(SYS_open_tree_attr, dirfd, path.c_str(), flags, &attr, sizeof attr);
        if (fd >= 0) return static_cast<int>(fd);
        if (errno != ENOSYS && errno != EPERM) return -errno;
        two_calls = true;
    }
    const int fd = try_open_tree_clone(dirfd, path, recursive);
    if (fd < 0) return fd;
    UniqueFd tree(fd);
    mount_setattr(fd, path, set, 0, recursive);
    return tree.release();
}

UniqueFd open_tree_attr(int dirfd, const std::string& what, bool recursive, std::uint64_t set) {
    const int fd = try_open_tree_attr(dirfd, ".", recursive, set);
    if (fd < 0)
        fail(Syscall::open_tree, -fd,
             cat("open_tree(", quote(what), ", OPEN_TREE_CLONE", recursive ? "|AT_RECURSIVE" : "",
                 ", ", attr_names(set), ")"),
             what);
    return UniqueFd(fd);
}

void mount_setattr(int mntfd, const std::string& what, std::uint64_t set, std::uint64_t clr,
                   bool recursive) {
    mount_attr attr{};
    attr.attr_set = set;
    attr.attr_clr = clr;
    unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
    check(::syscall(SYS_mount_setattr, mntfd, "", flags, &attr, sizeof attr),
          Syscall::mount_setattr, what, [&] {
              return cat("mount_setattr(", quote(what), ", ", attr_names(set),
                         recursive ? ", AT_RECURSIVE" : "", ")");
          });
}

void move_mount(int from_fd, const std::string& from, int to_fd, const std::string& to) {
    check(::syscall(SYS_move_mount, from_fd, "", to_fd, "",
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH),
          Syscall::move_mount, from,
          [&] { return cat("move_mount(", quote(from), " -> ", quote(to), ")"); });
}

int try_move_mount_at(int from_fd, int dirfd, const std::string& name) {
    return ::syscall(SYS_move_mount, from_fd, "", dirfd, name.c_str(), MOVE_MOUNT_F_EMPTY_PATH) < 0
               ? -errno
               : 0;
}

void make_rprivate() {
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), Syscall::mount, "/",
          "mount(\"/\", MS_REC|MS_PRIVATE)");
}

void pivot_root_here() {
    check(::syscall(SYS_pivot_root, ".", "."), Syscall::pivot_root, ".",
          "pivot_root(\".\", \".\")");
}

void umount_detach(const std::string& path) {
    check(::umount2(path.c_str(), MNT_DETACH), Syscall::umount2, path,
          [&] { return cat("umount2(", quote(path), ", MNT_DETACH)"); });
}

void fchdir(int fd, const std::string& what) {
    check(::fchdir(fd), Syscall::fchdir, what, [&] { return cat("fchdir(", quote(what), ")"); });
}

void chdir(const std::string& path) {
    check(::chdir(path.c_str()), Syscall::chdir, path,
          [&] { return cat("chdir(", quote(path), ")"); });
}

void unshare(int flags) {
    check(::unshare(flags), Syscall::unshare, "",
          [&] { return cat("unshare(0x", std::hex, flags, ")"); });
}

void sethostname(const std::string& name) {
    check(::sethostname(name.data(), name.size()), Syscall::sethostname, "",
          [&] { return cat("sethostname(", quote(name), ")"); });
}

void set_loopback_up() {
    UniqueFd s(check(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), Syscall::socket, "",
                     "socket(AF_INET)"));
    ifreq req{};
    std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
    check(::ioctl(s.get(), SIOCGIFFLAGS, &req), Syscall::ioctl, "lo",
          "ioctl(\"lo\", SIOCGIFFLAGS)");
    req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP | IFF_RUNNING);
    check(::ioctl(s.get(), SIOCSIFFLAGS, &req), Syscall::ioctl, "lo",
          "ioctl(\"lo\", SIOCSIFFLAGS, IFF_UP)");
}

UniqueFd pidfd_open(pid_t pid) {
    return UniqueFd(check(::syscall(SYS_pidfd_open, pid, 0), Syscall::pidfd_open, "",
                          [&] { return cat("pidfd_open(", pid, ")"); }));
}

void prctl(int option, unsigned long arg, const std::string& what) {
    check(::prctl(option, arg, 0, 0, 0), Syscall::prctl, "",
          [&] { return cat("prctl(", what, ")"); });
}

void lower_rlimit(int resource, std::uint64_t value, const std::string& name) {
    rlimit cur{};
    check(::getrlimit(resource, &cur), Syscall::getrlimit, "",
          [&] { return cat("getrlimit(", name, ")"); });
    const rlim_t v = std::min<rlim_t>(value, cur.rlim_max);
    const rlimit want{v, v};
    check(::setrlimit(resource, &want), Syscall::setrlimit, "",
          [&] { return cat("setrlimit(", name, ", ", v, ")"); });
}

void set_sched_idle() {
    const sched_param none{};
    check(::sched_setscheduler(0, SCHED_IDLE, &none), Syscall::sched_setscheduler, "",
          [] { return std::string("sched_setscheduler(0, SCHED_IDLE)"); });
}

std::uint64_t page_size() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }

void close_range_cloexec(unsigned first) {
    check(::syscall(SYS_close_range, first, ~0U, CLOSE_RANGE_CLOEXEC), Syscall::close_range, "",
          [&] { return cat("close_range(", first, ", ~0, CLOSE_RANGE_CLOEXEC)"); });
}

void close_range_cloexec_except(unsigned first, const std::vector<int>& keep) {
    for (int k : keep) {
        if (k < 0 || static_cast<unsigned>(k) < first) continue;
        if (static_cast<unsigned>(k) > first)
            check(::syscall(SYS_close_range, first, k - 1, CLOSE_RANGE_CLOEXEC),
                  Syscall::close_range, "", [&] {
                      return cat("close_range(", first, ", ", k - 1, ", CLOSE_RANGE_CLOEXEC)");
                  });
        first = static_cast<unsigned>(k) + 1;
    }
    close_range_cloexec(first);
}

void setns(int fd, int flags, const std::string& what) {
    check(::setns(fd, flags), Syscall::setns, "",
          [&] { return cat("setns(", what, ", 0x", std::hex, flags, ")"); });
}

UniqueFd dup_cloexec(int fd) {
    const int n = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0) fail(Syscall::fcntl, errno, cat("fcntl(", fd, ", F_DUPFD_CLOEXEC)"));
    return UniqueFd(n);
}

void dup2(int from, int to) {
    check(::dup2(from, to), Syscall::dup2, "", cat("dup2(", from, ", ", to, ")"));
}

void pipe(UniqueFd& read_end, UniqueFd& write_end) {
    int fds[2];
    check(::pipe2(fds, O_CLOEXEC), Syscall::pipe2, "", "pipe2(O_CLOEXEC)");
    read_end.reset(fds[0]);
    write_end.reset(fds[1]);
}

void socketpair(UniqueFd& a, UniqueFd& b) {
    int fds[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds),
          "socketpair(AF_UNIX, SOCK_SEQPACKET)");
    a.reset(fds[0]);
    b.reset(fds[1]);
}

UniqueFd memfd(const std::string& name) {
    return UniqueFd(check(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING),
                          Syscall::memfd_create, name,
                          [&] { return cat("memfd_create(", quote(name), ")"); }));
}

void install_seccomp_filter(const void* prog_bytes, std::size_t len) {
    sock_fprog prog{};
    prog.len = static_cast<unsigned short>(len / sizeof(sock_filter));
    prog.filter = static_cast<sock_filter*>(const_cast<void*>(prog_bytes));
    check(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog), Syscall::seccomp, "",
          [&] { return cat("seccomp(SECCOMP_SET_MODE_FILTER, ", prog.len, " instructions)"); });
}

}  // namespace gpubox::sys
