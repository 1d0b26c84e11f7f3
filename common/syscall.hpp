#pragma once
// Which system call failed, as a value: SysError carries one, and error hints are keyed on it
// (with errno and the path), so rewording an error message cannot lose its hint.
#include <string_view>

namespace gpubox {

enum class Syscall {
    unknown,  // not a system call gpubox names (a check of its own), or not said
    // files and directories
    open,
    openat,
    openat2,
    fstat,
    fstatat,
    stat,
    lstat,
    statfs,
    fstatfs,
    access,
    faccessat,
    mkdir,
    mkdirat,
    mknodat,
    rmdir,
    unlinkat,
    symlinkat,
    renameat,
    readlink,
    readlinkat,
    fchmod,
    fchmodat,
    chdir,
    fchdir,
    read,
    write,
    pread,
    pwrite,
    ftruncate,
    lseek,
    fsync,
    opendir,
    getdents64,
    mmap,
    realpath,
    flock,
    fcntl,
    dup2,
    close_range,
    ioctl,
    // mounts
    mount,
    fsopen,
    fsconfig,
    fsmount,
    open_tree,
    open_tree_attr,
    mount_setattr,
    move_mount,
    pivot_root,
    umount2,
    // processes, namespaces and limits
    clone,
    clone3,
    fork,
    unshare,
    setns,
    execve,
    waitpid,
    kill,
    pidfd_open,
    pidfd_send_signal,
    prctl,
    getrlimit,
    setrlimit,
    sched_setscheduler,
    setsid,
    seccomp,
    capset,
    sethostname,
    sched_setaffinity,
    // ipc and signals
    pipe2,
    socket,
    socketpair,
    connect,
    sendmsg,
    recvmsg,
    memfd_create,
    poll,
    signalfd,
    sigprocmask,
    sigaction,
    tcgetattr,
    tcsetattr,
};

// "openat2"; "?" for Syscall::unknown.
std::string_view to_string(Syscall call);
// The Syscall named `name` ("openat2"), or Syscall::unknown.
Syscall syscall_from_name(std::string_view name);

}  // namespace gpubox
