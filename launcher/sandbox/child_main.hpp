#pragma once
#include "launcher/sandbox/spec.hpp"

namespace gpubox::launcher {

// The sandbox's init (pid 1): set up, fork the workload, reap, forward signals, report. `fds`
// is the child's copy: it closes the monitor's ends first.
[[noreturn]] void sandbox_init(const ChildSpec& spec, RunFds& fds) noexcept;

}  // namespace gpubox::launcher
