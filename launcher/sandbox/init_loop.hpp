#pragma once
// The sandbox's init once the workload runs: pid 1 reaps, forwards signals and reports its end.
// It measures nothing: the monitor does, from outside (isolate/usage.hpp).
#include <sys/types.h>

#include <exception>

#include <vector>

#include "launcher/sandbox/spec.hpp"

namespace gpubox::launcher {

// Reap everything, forward signals to the workload, send its status (Exited), then exit, which
// makes the kernel kill whatever is left in the pid namespace.
[[noreturn]] void init_loop(Ends& own, pid_t workload);

// The sandbox's one error path: `e` as a Failure frame on `control`, then _exit with its code
// (125 setup, 126 cannot execute, 127 not found).
[[noreturn]] void report_and_exit(int control, std::exception_ptr e) noexcept;

// Signals the monitor forwards to the sandbox, and init to the workload.
const std::vector<int>& forwarded_signals();

}  // namespace gpubox::launcher
