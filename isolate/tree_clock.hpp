#pragma once
// The kernel's count of the workload's CPU, without a cgroup: a software perf counter
// (task-clock) that the sandbox's init opens on itself before it has forked anything, and hands
// the monitor (channel::Meter). Opened on another task, the counter is installed by a call on the
// CPU that task last ran on, and the caller waits for it: an interrupt to that CPU (the monitor's
// open on init took 12-45 us a run on the development VM, 75-120 us where that CPU slept); on
// itself, none (4.5 us).
// With `inherit`, the kernel gives every process and thread forked below init a copy of it as it
// is born (nothing the workload does can refuse it: its filter refuses perf_event_open, and a
// process disables only the counters it opened itself), and folds each copy's count back into
// this one when its task exits, however it is reaped: dead processes are in it, a child the
// kernel reaps included, which /proc shows nowhere. Off in init itself (init's time is gpubox's),
// it is enabled in the workload by its execve (enable_on_exec), and every process forked after
// that inherits it enabled. Init closes its fd once sent: the workload never holds one.
//
// Close to the truth, not exact (measured on Linux 6.18): each copy's count ends before its
// task's exit frees its memory and files (~50 us a process, 6.7 ms for one that held 100 MiB),
// and it runs on the CPU's clock, so it holds what a hypervisor stole from a vCPU while the
// workload ran on it, which the scheduler's own time leaves out (+5-6 % on the development VM
// beside other tests, +18 % once in a CI run). So it bounds what the monitor charges for children the kernel reaps
// (isolate::bounded), and the exact sum over the live processes stands where it can.
//
// A read costs the kernel a walk over the live copies, about 60 us for 1,000 processes on the
// development VM. The copies cost each context switch of the workload about 0.2-0.3 us (a pipe's
// round trip between two processes on one CPU: 5.3 -> 5.7 us), charged to it. And the first
// counter on any task after a second with none waits while the kernel switches its scheduler
// hooks for them on: an RCU grace period, 8-28 ms on the development VM (HZ 250), which a run
// with a CPU or memory limit started after a quiet second pays before its workload starts (none
// is opened for a workload that may make no other process: LimitPlan::tree_clock); a judge's
// runs one after another find the hooks on (the kernel keeps them a second past the last
// counter's close). A counter the monitor opened on itself while init set up, to start that
// wait sooner, hid 0.5 ms of it: the set-up before init's open takes ~2.5 ms (bench/README.md).
//
// Lent where unprivileged perf counters are (kernel.perf_event_paranoid <= 2, the upstream
// default; Debian's and Ubuntu's kernels ship 3 or 4) and no seccomp filter of a container
// refuses perf_event_open. Not for a sandbox others may join (run --name: gpubox exec's processes
// are not init's descendants) nor a step's task.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::isolate {

class TreeClock {
public:
    TreeClock() = default;
    // Attached to `init` (0: the caller), which must not have forked yet; the errno where the
    // kernel refused.
    static TreeClock attach(pid_t init);
    // One init opened and sent (channel::Meter): its fd, or the errno it was refused with.
    static TreeClock adopt(UniqueFd fd, int error);
    UniqueFd take() { return std::move(fd_); }
    bool valid() const { return fd_.valid(); }
    int error() const { return error_; }
    // Nanoseconds of CPU the workload's processes used so far (above), the exited ones
    // included; nullopt where the read failed.
    std::optional<std::uint64_t> read() const;

private:
    UniqueFd fd_;
    int error_ = 0;
};

// Pure: whether kernel.perf_event_paranoid (its text) lends an unprivileged process a counter on
// its own processes' user-space time, which task-clock is (<= 2); the host's root always has one.
bool tree_clock_lent(const std::string& paranoid, bool caller_root);
// The same, read from /proc/sys/kernel/perf_event_paranoid.
bool tree_clock_lent_here(bool caller_root);

}  // namespace gpubox::isolate
