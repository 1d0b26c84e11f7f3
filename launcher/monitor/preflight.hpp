#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

// --env-file and --env as the sandbox sees them: later ones win.
std::map<std::string, std::string> env_map(
    const std::vector<std::pair<std::string, std::string>>& env);

// gpubox run's preflight (warns, or throws PlanError). `root`: ROOTFS's read-only view
// (rootfs/view.hpp), borrowed.
void run_preflight(const Options& o, int root);

}  // namespace gpubox::launcher
