#pragma once
#include "isolate/cgroup.hpp"
#include "isolate/limits.hpp"
#include "isolate/spawn.hpp"
#include "launcher/verdict.hpp"

namespace gpubox::launcher {

struct Supervised {
    const isolate::Spawned& child;
    int report_fd;                  // framed messages from init and the workload
    const isolate::Limits& limits;
    isolate::Cgroup& cgroup;        // may be unusable
    int stdin_relay = -1;           // write end of the stdin pipe (non-blocking), fed from fd 0
    int stdout_relay = -1;          // read ends of the output pipes (see launcher/stdio.hpp)
    int stderr_relay = -1;
    int pty_master = -1;            // the workload's pty (launcher/pty.hpp): SIGWINCH resizes it
};

// The monitor's loop: forward signals, enforce wall-clock, CPU, memory and output limits, wait
// for init, and collect what happened.
RunOutcome supervise(const Supervised& s);

}  // namespace gpubox::launcher
