#pragma once
// The sandbox's init once the workload runs: pid 1 reaps, forwards signals, measures and reports.
#include <sys/types.h>

#include <exception>

#include <vector>

#include "launcher/sandbox/spec.hpp"

namespace gpubox::launcher {

// Reap everything, forward signals to the workload, send Sample frames (spec.sample_ms) and its
// status (Exited), then exit, which makes the kernel kill whatever is left in the pid namespace.
// `tmpfs` is gpubox's tmpfs, whose files count as the sandbox's memory.
[[noreturn]] void init_loop(const ChildSpec& spec, Ends& own, pid_t workload, int tmpfs);

// The sandbox's one error path: `e` as a Failure frame on `control`, then _exit with its code
// (125 setup, 126 cannot execute, 127 not found).
[[noreturn]] void report_and_exit(int control, std::exception_ptr e) noexcept;

// Signals the monitor forwards to the sandbox, and init to the workload.
const std::vector<int>& forwarded_signals();

}  // namespace gpubox::launcher
