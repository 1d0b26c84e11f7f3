#pragma once
#include "isolate/cgroup.hpp"
#include "isolate/limits.hpp"
#include "isolate/spawn.hpp"
#include "isolate/tree_clock.hpp"
#include "isolate/usage.hpp"
#include "launcher/monitor/verdict.hpp"

namespace gpubox::launcher {

struct Supervised {
    const isolate::Spawned& child;
    int control;  // the control channel: frames from init and the workload
    const isolate::Limits& limits;
    isolate::Cgroup& cgroup;  // may be unusable
    int stdin_relay = -1;     // write end of the stdin pipe (non-blocking), fed from fd 0
    int stdout_relay = -1;    // read ends of the output pipes (see launcher/monitor/stdio.hpp)
    int stderr_relay = -1;
    int pty_master = -1;  // the workload's pty (launcher/monitor/pty.hpp): SIGWINCH resizes it
    // After SIGTERM, SIGINT or SIGHUP to gpubox (forwarded to the workload), the sandbox has
    // this long to end before gpubox kills it (--kill-after): a scheduler's KillWait still
    // finds gpubox alive to write --meta.
    double kill_after = 5;
    int parent_pidfd = -1;  // --die-with-parent: gpubox's parent; readable once it died
    // Without a cgroup: the monitor measures the sandbox through the /proc init sends
    // (channel::Meter), every sample_ms (0: only when it kills the sandbox, for its CPU time).
    int sample_ms = 0;
    std::uint64_t sampled_memory_limit = 0;  // the memory limit the samples enforce, if any
    // Step mode: the task's init as the step's pid namespace numbers it. The samples measure its
    // tree only (isolate::task_tree), and a kill ends that tree, not the namespace.
    pid_t task_root = 0;
    // A crowd under a sampled CPU limit is set apart from the monitor's CPU (kApartPerCpu)
    // wherever one may form (isolate::LimitPlan::idle_policy), and takes turns (kRunnablePerCpu)
    // where it shares the monitor's run queue (LimitPlan::take_turns).
    bool crowd_apart = false;
    bool take_turns = false;
    bool joinable = false;  // run --name: gpubox exec may add processes from outside
    // (The kernel's count of the workload's CPU, which bounds what the samples charge for
    // children the kernel reaps, comes with init's meters: isolate/tree_clock.hpp.)
};

// The monitor's loop: forward signals (then kill after the grace), measure the sandbox and
// enforce wall-clock, CPU, memory and output limits, kill the sandbox when the parent dies, wait
// for init, and collect what happened.
RunOutcome supervise(const Supervised& s);

}  // namespace gpubox::launcher
