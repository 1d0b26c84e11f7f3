#include "isolate/spawn.hpp"

#include <linux/sched.h>
#include <signal.h>

#include "common/sys.hpp"

namespace gpubox::isolate {

Spawned spawn_sandbox(int ns_flags, int cgroup_fd, void (*child)(void*), void* arg) {
    int pidfd = -1;
    clone_args args{};
    args.flags = static_cast<std::uint64_t>(ns_flags) | CLONE_PIDFD;
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
    }
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    const pid_t pid = sys::clone3(&args, sizeof args, ns_flags);
    if (pid == 0) {
        child(arg);
        sys::exit_now(125);
    }
    Spawned s;
    s.pid = pid;
    s.pidfd.reset(pidfd);
    return s;
}

Spawned spawn_sibling(void (*child)(void*), void* arg) {
    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_PARENT | CLONE_PIDFD;
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = 0;  // CLONE_PARENT: the parent's own exit signal (SIGCHLD) is used
    const pid_t pid = sys::clone3(&args, sizeof args, 0);
    if (pid == 0) {
        child(arg);
        sys::exit_now(125);
    }
    Spawned s;
    s.pid = pid;
    s.pidfd.reset(pidfd);
    return s;
}

}  // namespace gpubox::isolate
