#pragma once

#include "gpu/gpu_spec.hpp"
#include "gpu/lease.hpp"
#include "isolate/seccomp.hpp"
#include "launcher/sandbox/child_main.hpp"
#include "launcher/cli/options.hpp"
#include "launcher/monitor/verdict.hpp"
#include "launcher/monitor/step.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::launcher {

// Pure apart from reading files the options name (--seccomp-bpf) and GPU discovery: every plan
// for one run.
struct RunPlan {
    std::uint64_t host_share = 0;  // a quarter of MemAvailable: bounds what no limit bounds
    int ns_flags = 0;
    ChildSpec spec;
    std::string seccomp_text;              // the policy as --print-plan shows it
    std::vector<std::string> gpu_summary;  // index -> bus -> node -> UUID, per selected GPU
    // Set when the GPU's ops are planned after clone(), while the sandbox sets up, and placed
    // against spec.plan. The sandbox's init receives the whole plan (channel::DevicePlan).
    bool devices_later = false;
    gpu::GpuSpec gpus;  // --gpu, with slurm and env resolved
    gpu::Lease lease;   // --gpu auto: held by the monitor until it exits
    step::Member step;  // step mode: this task's membership, and the sandbox it joins
};
RunPlan plan_run(const Options& o);

// --print-plan: the whole plan as text.
std::string render_plan(const RunPlan& plan);

// Monitor: spawn the sandbox, forward signals, enforce limits, wait, write --meta; returns
// gpubox's exit code. `report`, if given, gets the verdict and what it was made from (isolate
// mode writes its own meta file and status line from them).
struct RunReport {
    Verdict verdict;
    RunOutcome outcome;
};
int run_sandbox(const Options& o, RunReport* report = nullptr);

// An XX verdict (JSON) at `path` for a command line that did not parse; "" does nothing.
void write_usage_failure_meta(const std::string& path, const std::string& message);

}  // namespace gpubox::launcher
