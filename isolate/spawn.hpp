#pragma once
#include <sys/types.h>

#include "common/unique_fd.hpp"

namespace gpubox::isolate {

struct Spawned {
    pid_t pid = -1;
    UniqueFd pidfd;
};

// THE one clone of gpubox: clone3(ns_flags | CLONE_PIDFD). In the child, `child` runs on its
// copy of `arg` and must not return (it is [[noreturn]] by contract; _exit(125) guards it).
// With `cgroup_fd` >= 0 the child starts in that cgroup (CLONE_INTO_CGROUP), so not one of its
// instructions runs outside the limits. What the two processes say to each other afterwards
// goes over one channel: launcher/sandbox/channel.hpp.
Spawned spawn_sandbox(int ns_flags, int cgroup_fd, void (*child)(void*), void* arg);

// From a process that entered a running sandbox's namespaces (setns: launcher/sandbox/child_main.hpp, join_main): the
// first process in them, made a child of this one's parent (clone3 CLONE_PARENT | CLONE_PIDFD),
// so that the monitor, not this short-lived go-between, waits for it. Its pid is as this
// process sees it (the monitor's view).
Spawned spawn_sibling(void (*child)(void*), void* arg);

}  // namespace gpubox::isolate
