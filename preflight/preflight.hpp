#pragma once
// `gpubox check` and `gpubox run`'s preflight: gather the facts, judge them, report.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_spec.hpp"
#include "preflight/facts.hpp"
#include "preflight/findings.hpp"
#include "preflight/mode.hpp"

namespace gpubox::preflight {

struct Target {
    std::string rootfs;
    std::map<std::string, std::string> env;  // the image's config env, then --env
};
// IMAGE|ROOTFS -> what to read. A directory is a ROOTFS, whose environment is `env` alone (a
// directory has no config); a pulled image's rootfs and config env come from the image store
// once it exists (image/store.hpp), with `env` over them.
Target resolve_target(const std::string& spec, const std::map<std::string, std::string>& env);

struct Request {
    Target target;
    int root = -1;              // target.rootfs's read-only view (rootfs/view.hpp), borrowed
    std::string command;        // the workload's argv[0], "" for none
    std::string workdir = "/";  // run --workdir: where a relative argv[0] starts
    std::string driver_root = "/";
    gpu::GpuSpec gpus;
    std::vector<Requirement> requirements;  // --require, on top of the image's
    bool objects = false;                   // scan the image's libraries for fat binaries
};

Report check_image(const Request& r);

// gpubox run: off does nothing; warn logs one line per failing finding; enforce throws
// PlanError for the first. Never reads more than the cheap facts (no library scan), and a fact
// it cannot read is left out, not an error: the run itself reports what it needs.
// Returns what it read that the run's GPU planner needs again, so that the planner decides on
// the same facts instead of reading ROOTFS a second time.
struct RunFacts {
    bool compat_read = false;           // the image's compat directory was looked at
    std::optional<CompatFacts> compat;  // and this is what it holds (none: no compat libcuda)
    // The forward-compatibility decision the preflight took and what it took it on: the host
    // driver's version and the named GPUs' brands. None where the GPUs are named only later (a
    // lease, Slurm's): the planner then decides, on the same compat facts.
    std::optional<CompatDecision> decision;
    std::optional<std::string> decided_driver;
    std::vector<std::string> decided_brands;
};
RunFacts preflight_run(Mode mode, const Request& r);

// The run's GPU planner: the image's forward-compatibility libraries that win in the sandbox's
// ld.so.cache ((stem, container path) pairs, see compat_overrides), or none. `why` gets the
// decision either way ("" when the image has no compat libcuda). `compat`: the image's compat
// directory, as the preflight read it (RunFacts), else discover_compat's. `taken`: the
// preflight's, whose decision is the one used where it was taken on this driver and these GPUs,
// so that the preflight's warning and the run's mounts never disagree.
std::vector<std::pair<std::string, std::string>> forward_compat(
    const std::optional<CompatFacts>& compat, const std::optional<std::string>& driver,
    const std::vector<std::string>& models, std::string& why, const RunFacts& taken = {});

}  // namespace gpubox::preflight
