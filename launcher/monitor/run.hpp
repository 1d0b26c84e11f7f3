#pragma once
#include <exception>

#include "gpu/gpu_spec.hpp"
#include "gpu/lease.hpp"
#include "isolate/cgroup.hpp"
#include "isolate/limits.hpp"
#include "isolate/seccomp.hpp"
#include "launcher/sandbox/child_main.hpp"
#include "launcher/cli/options.hpp"
#include "launcher/monitor/verdict.hpp"
#include "launcher/monitor/kept_overlay.hpp"
#include "preflight/preflight.hpp"
#include "launcher/monitor/named.hpp"
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
    gpu::GpuSpec gpus;     // --gpu, with slurm and env resolved
    gpu::Lease lease;      // --gpu auto: held by the monitor until it exits
    KeptOverlay kept;      // --overlay DIR: locked by the monitor until it exits
    std::string squashfs;  // a squashfs image's file, mounted over ROOTFS before Go (fuse_root)
    // The limits: the sandbox's cgroup (made where a limit needs one; may be unusable, and is
    // removed by the caller) and how each limit is enforced, as --print-plan shows it.
    isolate::Cgroup cgroup;
    isolate::LimitPlan limits;
    // What the preflight read of ROOTFS that the GPU plan decides on again (forward
    // compatibility), so that both judge the same tree.
    preflight::RunFacts preflight;
    step::Member step;     // step mode: this task's membership, and the sandbox it joins
    named::Claim named;    // run --name: the name, held while the run lasts
    UniqueFd into_cgroup;  // exec NAME: the named sandbox's cgroup, which its task joins
    int sample_ms = 0;  // without a cgroup: how often the monitor measures the sandbox (0: never)
    std::uint64_t sampled_memory_limit = 0;  // the memory limit those samples enforce, if any
};

// What a run reads once, for the preflight, the plan and the sandbox alike.
struct RunInputs {
    int rootfs = -1;                // ROOTFS (O_PATH), opened once per run; init checks its own
    int view = -1;                  // its read-only view, where the monitor reads it before clone()
    gpu::GpuSpec gpus;              // --gpu resolved (Slurm's, the environment's), unless
    std::exception_ptr gpus_error;  // it cannot be: then plan_run reports why
    preflight::RunFacts preflight;  // what a preflight before the plan read (--print-plan's)
};

// One run: what the command line asked for, and what the command holds while the run lasts.
struct RunRequest {
    Options options;
    UniqueFd image_hold;  // run IMAGE: the hold on the stored image (image::hold_image)
};

// The whole plan: namespaces, mounts (with --device's and, for --print-plan, the GPU's), the
// workload, seccomp, the cgroup and the limits. `in.view` must be valid where it plans devices.
RunPlan plan_run(const RunRequest& r, const RunInputs& in);

// --print-plan: the whole plan as text.
std::string render_plan(const RunPlan& plan);

// Whether the root is ROOTFS (`rootfs`, an O_PATH fd) bound read-only instead of an overlay, and
// why: it has mounts below it (rootfs::bound_instead), or, --read-only over a plain ROOTFS (no
// image layers, no squashfs, no GPU), it has every mount point the plan needs
// (rootfs::layer_is_empty): the same files show.
enum class BoundRoot { no, submounts, complete };
BoundRoot bound_root(const RunPlan& plan, int rootfs);

// Monitor: spawn the sandbox, forward signals, enforce limits, wait, write --meta; returns
// gpubox's exit code. `report`, if given, gets the verdict and what it was made from (isolate
// mode writes its own meta file and status line from them).
struct RunReport {
    Verdict verdict;
    RunOutcome outcome;
};
int run_sandbox(const RunRequest& r, RunReport* report = nullptr);
int run_sandbox(const Options& o, RunReport* report = nullptr);  // holds nothing

// exec NAME CMD: CMD in the caller's running sandbox NAME (launcher/monitor/named.hpp), as its
// workload is; returns CMD's exit status as run does the workload's.
int exec_sandbox(const Options& o);

// An XX verdict (JSON) at `path` for a run refused before it opened --meta (a command line that
// did not parse, step mode's decision or options); "" does nothing.
void write_usage_failure_meta(const std::string& path, const std::string& message);

}  // namespace gpubox::launcher
