#include "isolate/spawn.hpp"

#include <linux/sched.h>
#include <signal.h>

#include "common/sys.hpp"

namespace gpubox::isolate {

namespace {

// clone3 with a pidfd: the child runs `child` and never returns; the parent gets both handles.
Spawned clone_with_pidfd(clone_args& args, int ns_flags, void (*child)(void*), void* arg) {
    int pidfd = -1;
    args.flags |= CLONE_PIDFD;
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
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

}  // namespace

Spawned spawn_sandbox(int ns_flags, int cgroup_fd, void (*child)(void*), void* arg) {
    clone_args args{};
    args.flags = static_cast<std::uint64_t>(ns_flags);
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
    }
    args.exit_signal = SIGCHLD;
    return clone_with_pidfd(args, ns_flags, child, arg);
}

Spawned spawn_sibling(void (*child)(void*), void* arg) {
    clone_args args{};
    args.flags = CLONE_PARENT;
    args.exit_signal = 0;  // CLONE_PARENT: the parent's own exit signal (SIGCHLD) is used
    return clone_with_pidfd(args, 0, child, arg);
}

}  // namespace gpubox::isolate
