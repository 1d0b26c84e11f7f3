#pragma once
// A crowd set apart from its monitor. Without a cgroup, a workload of many runnable processes
// (a fork bomb at its --pids-limit) is held to its CPU limit by the monitor's passes; its tasks
// are SCHED_IDLE (weight 3), but a thousand of them on the monitor's run queue outweigh it
// (1024): in a child cpu cgroup, where autogroups do not apply, passes took 60-210 ms of wall
// time for 15-20 ms of CPU, and the crowd ran on meanwhile (1.2-1.4 s used against a limit of
// 1 s in one run of eight). Once a crowd is seen, the monitor keeps one CPU and the sandbox's
// processes the others (docs/limits.md; launcher/monitor/supervise.cpp decides when).
//
// The monitor knows the sandbox's processes by the pids of its own /proc (the sandbox's pid
// namespace), which sched_setaffinity does not take: they are found here in the host's /proc
// instead, from init down through each task's children file. Each is opened as a pidfd first,
// so its pid cannot name another process while it is pinned, and checked to be the child of
// the process it was listed under. Best effort: a process that sets its own affinity back
// (sched_setaffinity is not refused) is held by the monitor's turns alone.
#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gpubox::isolate {

// Pure: the CPUs of `usable` but `keep` (the monitor's); empty where that leaves none (one
// usable CPU, or `keep` not among them): then nothing is set apart.
cpu_set_t all_but(const cpu_set_t& usable, int keep);
// Pure: the pids a /proc/PID/task/TID/children file lists ("12 345 "); junk ends the list.
std::vector<pid_t> parse_children(std::string_view text);

// Pins every process of the sandbox whose init is host pid `init` (the caller's child; init
// and each thread included) to `cpus`, through the host's /proc, each found in its parent's
// children files and held by a pidfd while it is checked to be that parent's child still,
// breadth first. A slice at a time (step), so that the monitor's passes go on meanwhile: a
// sweep over a thousand processes takes a starved monitor up to 0.2 s.
class PinSweep {
public:
    PinSweep(pid_t init, const cpu_set_t& cpus) : cpus_(cpus), queue_{{init, 0}}, seen_{init} {}
    // Goes on for at most `budget_ns` of wall time (at least one process); whether it is done.
    bool step(std::uint64_t budget_ns);
    std::size_t pinned() const { return pinned_; }  // tasks pinned so far

private:
    cpu_set_t cpus_;
    std::vector<std::pair<pid_t, pid_t>> queue_;  // each process, and its parent (0: init)
    std::unordered_set<pid_t> seen_;
    std::size_t next_ = 0, pinned_ = 0;
};
// A whole sweep at once. Returns how many tasks were pinned.
std::size_t pin_tree(pid_t init, const cpu_set_t& cpus);

}  // namespace gpubox::isolate
