#pragma once
#include "launcher/sandbox/spec.hpp"

namespace gpubox::launcher {

// The sandbox's init (pid 1): set up, fork the workload, reap, forward signals, report. `fds`
// is the child's copy: it closes the monitor's ends first.
[[noreturn]] void sandbox_init(const ChildSpec& spec, RunFds& fds) noexcept;
// Role::joined, in a child of the monitor: enter the sandbox (fds.join_init), start the task's
// init in it as the monitor's child (channel::Joined), and go.
[[noreturn]] void join_main(const ChildSpec& spec, RunFds& fds) noexcept;

}  // namespace gpubox::launcher
