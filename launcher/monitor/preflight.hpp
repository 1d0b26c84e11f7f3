#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_spec.hpp"
#include "launcher/cli/options.hpp"
#include "preflight/preflight.hpp"

namespace gpubox::launcher {

// --env-file and --env as the sandbox sees them: later ones win.
std::map<std::string, std::string> env_map(
    const std::vector<std::pair<std::string, std::string>>& env);

// gpubox run's preflight (warns, or throws PlanError), and what it read that the GPU plan uses
// again. `root`: ROOTFS's read-only view (rootfs/view.hpp), borrowed; `gpus`: --gpu resolved
// (none where it cannot be: the run reports that itself).
preflight::RunFacts run_preflight(const Options& o, int root, const gpu::GpuSpec& gpus);

}  // namespace gpubox::launcher
