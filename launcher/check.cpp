// gpubox check IMAGE|ROOTFS [CMD], and gpubox run's preflight: the same facts and judgement
// (preflight/), the run's without the fat-binary scan.
#include <iostream>
#include <map>

#include "common/error.hpp"
#include "gpu/slurm.hpp"
#include "launcher/commands.hpp"
#include "preflight/preflight.hpp"

namespace gpubox::launcher {
namespace {

std::map<std::string, std::string> env_map(
    const std::vector<std::pair<std::string, std::string>>& env) {
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : env) out[k] = v;  // later ones win, as in the sandbox
    return out;
}

}  // namespace

int check_command(const Options& o) {
    preflight::Request r;
    r.target = preflight::resolve_target(o.check_target, env_map(o.env));
    r.command = o.argv.empty() ? "" : o.argv.front();
    r.driver_root = o.driver_root;
    r.gpus = gpu::resolve_gpu_spec(gpu::parse_gpu_spec(o.gpu));
    if (r.gpus.kind == gpu::GpuSpec::Kind::lease)
        throw UsageError(
            "check: --gpu auto leases GPUs at run time; name them (indices, UUIDs, all)");
    for (const std::string& e : o.requirements) r.requirements.push_back({"--require", e});
    r.objects = true;
    const preflight::Report report = preflight::check_image(r);
    std::cout << (o.json ? preflight::render_json(report) : preflight::render_text(report))
              << std::flush;
    return report.fits() ? 0 : 1;
}

void run_preflight(const Options& o) {
    if (o.preflight == preflight::Mode::off) return;
    preflight::Request r;
    r.target = {o.rootfs, env_map(o.env)};
    r.command = o.argv.empty() ? "" : o.argv.front();
    r.workdir = o.workdir;
    r.driver_root = o.driver_root;
    try {
        r.gpus = gpu::resolve_gpu_spec(gpu::parse_gpu_spec(o.gpu));
    } catch (...) {
        r.gpus = {};  // the run reports a spec it cannot resolve itself
    }
    preflight::preflight_run(o.preflight, r);
}

}  // namespace gpubox::launcher
