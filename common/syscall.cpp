#include "common/syscall.hpp"

#include <array>
#include <utility>

namespace gpubox {
namespace {

using Row = std::pair<Syscall, std::string_view>;
using S = Syscall;

// The one table between a Syscall and its name.
constexpr std::array kNames = {
    Row{S::open, "open"},
    Row{S::openat, "openat"},
    Row{S::openat2, "openat2"},
    Row{S::fstat, "fstat"},
    Row{S::fstatat, "fstatat"},
    Row{S::stat, "stat"},
    Row{S::lstat, "lstat"},
    Row{S::statfs, "statfs"},
    Row{S::fstatfs, "fstatfs"},
    Row{S::access, "access"},
    Row{S::faccessat, "faccessat"},
    Row{S::mkdir, "mkdir"},
    Row{S::mkdirat, "mkdirat"},
    Row{S::mknodat, "mknodat"},
    Row{S::rmdir, "rmdir"},
    Row{S::unlinkat, "unlinkat"},
    Row{S::symlinkat, "symlinkat"},
    Row{S::renameat, "renameat"},
    Row{S::readlink, "readlink"},
    Row{S::readlinkat, "readlinkat"},
    Row{S::fchmod, "fchmod"},
    Row{S::fchmodat, "fchmodat"},
    Row{S::chdir, "chdir"},
    Row{S::fchdir, "fchdir"},
    Row{S::read, "read"},
    Row{S::write, "write"},
    Row{S::pread, "pread"},
    Row{S::pwrite, "pwrite"},
    Row{S::ftruncate, "ftruncate"},
    Row{S::lseek, "lseek"},
    Row{S::fsync, "fsync"},
    Row{S::opendir, "opendir"},
    Row{S::getdents64, "getdents64"},
    Row{S::mmap, "mmap"},
    Row{S::realpath, "realpath"},
    Row{S::flock, "flock"},
    Row{S::fcntl, "fcntl"},
    Row{S::dup2, "dup2"},
    Row{S::close_range, "close_range"},
    Row{S::ioctl, "ioctl"},
    Row{S::mount, "mount"},
    Row{S::fsopen, "fsopen"},
    Row{S::fsconfig, "fsconfig"},
    Row{S::fsmount, "fsmount"},
    Row{S::open_tree, "open_tree"},
    Row{S::open_tree_attr, "open_tree_attr"},
    Row{S::mount_setattr, "mount_setattr"},
    Row{S::move_mount, "move_mount"},
    Row{S::pivot_root, "pivot_root"},
    Row{S::umount2, "umount2"},
    Row{S::clone, "clone"},
    Row{S::clone3, "clone3"},
    Row{S::fork, "fork"},
    Row{S::unshare, "unshare"},
    Row{S::setns, "setns"},
    Row{S::execve, "execve"},
    Row{S::waitpid, "waitpid"},
    Row{S::kill, "kill"},
    Row{S::pidfd_open, "pidfd_open"},
    Row{S::pidfd_send_signal, "pidfd_send_signal"},
    Row{S::prctl, "prctl"},
    Row{S::getrlimit, "getrlimit"},
    Row{S::setrlimit, "setrlimit"},
    Row{S::sched_setscheduler, "sched_setscheduler"},
    Row{S::setsid, "setsid"},
    Row{S::seccomp, "seccomp"},
    Row{S::capset, "capset"},
    Row{S::sethostname, "sethostname"},
    Row{S::sched_setaffinity, "sched_setaffinity"},
    Row{S::pipe2, "pipe2"},
    Row{S::socket, "socket"},
    Row{S::socketpair, "socketpair"},
    Row{S::connect, "connect"},
    Row{S::sendmsg, "sendmsg"},
    Row{S::recvmsg, "recvmsg"},
    Row{S::memfd_create, "memfd_create"},
    Row{S::poll, "poll"},
    Row{S::signalfd, "signalfd"},
    Row{S::sigprocmask, "sigprocmask"},
    Row{S::sigaction, "sigaction"},
    Row{S::tcgetattr, "tcgetattr"},
    Row{S::tcsetattr, "tcsetattr"},
};

}  // namespace

std::string_view to_string(Syscall call) {
    for (const auto& [c, name] : kNames)
        if (c == call) return name;
    return "?";
}

Syscall syscall_from_name(std::string_view name) {
    for (const auto& [c, n] : kNames)
        if (n == name) return c;
    return Syscall::unknown;
}

}  // namespace gpubox
