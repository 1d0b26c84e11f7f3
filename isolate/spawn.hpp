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

// The workload, posix_spawn's way: a child that shares our memory until it execs or exits
// (CLONE_VM | CLONE_VFORK), while we wait. Neither process copies the other's page tables nor
// takes copy-on-write faults, and its exec tears no copy of our memory down: a fork's cost where
// faults are dear (bench/README.md). `child` runs on a stack of its own (a guard page below it),
// mapped by the first call and kept for the next (from one thread only: calls must not overlap),
// and must not return; it must leave alone what we read afterwards (what it allocates on our
// heap is ours to leak), and what is the memory's, not the process's (PR_SET_DUMPABLE), it sets
// for us too: it puts that back before its exec. Not for a child that enters another user
// namespace by setns (refused while the memory is shared). The caller catches no signal (init
// waits for its signals): a handler would run in the child, on our memory.
pid_t spawn_until_exec(void (*child)(void*), void* arg);

}  // namespace gpubox::isolate
