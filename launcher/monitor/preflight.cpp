// gpubox run's preflight: the facts and judgement of gpubox check (preflight/), without the
// fat-binary scan.
#include "launcher/monitor/preflight.hpp"

#include "preflight/preflight.hpp"

namespace gpubox::launcher {

std::map<std::string, std::string> env_map(
    const std::vector<std::pair<std::string, std::string>>& env) {
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : env) out[k] = v;  // later ones win, as in the sandbox
    return out;
}

preflight::RunFacts run_preflight(const Options& o, int root, const gpu::GpuSpec& gpus) {
    if (o.preflight == preflight::Mode::off) return {};
    preflight::Request r;
    r.target = {o.rootfs, env_map(o.env)};
    r.root = root;
    r.command = o.argv.empty() ? "" : o.argv.front();
    r.workdir = o.workdir;
    r.driver_root = o.driver_root;
    r.gpus = gpus;
    return preflight::preflight_run(o.preflight, r);
}

}  // namespace gpubox::launcher
