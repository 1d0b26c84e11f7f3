// gpubox check IMAGE|ROOTFS [CMD]: the facts and judgement of gpubox run's preflight
// (launcher/monitor/preflight.cpp, preflight/), with the fat-binary scan.
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "common/print.hpp"
#include "common/error.hpp"
#include "gpu/slurm.hpp"
#include "image/store.hpp"
#include "image/store_dir.hpp"
#include "launcher/commands/commands.hpp"
#include "launcher/monitor/preflight.hpp"
#include "launcher/commands/image.hpp"
#include "preflight/preflight.hpp"
#include "rootfs/view.hpp"

namespace gpubox::launcher {
namespace {

// A pulled image of that name, unless the operand is a path or a directory (as run decides).
std::optional<image::Stored> pulled_image(const std::string& operand) {
    struct stat st {};
    if (operand.empty() || operand[0] == '/' || operand[0] == '.' ||
        (::stat(operand.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
        return std::nullopt;
    std::map<std::string, std::string> env;  // only what store_root and site_roots read
    for (const char* k : {"GPUBOX_IMAGES", "GPUBOX_IMAGES_RO", "XDG_DATA_HOME", "HOME"})
        if (const char* v = std::getenv(k)) env[k] = v;
    return image::open_stores(env).find(operand);
}

// IMAGE|ROOTFS as `gpubox run` would run it: a pulled image brings its Env (under --env), its
// WorkingDir and its Entrypoint + Cmd as the command to check; a directory, --env and CMD alone.
void set_target(const Options& o, preflight::Request& r, std::vector<std::string>& layers) {
    Options run = o;
    if (const std::optional<image::Stored> img = pulled_image(o.check_target)) {
        const image::Config& c = img->config;
        const bool no_cmd = o.argv.empty() && c.entrypoint.empty() && c.cmd.empty();
        if (no_cmd) run.argv = {""};  // nothing to check, and that is no error here
        run = apply_image_config(run, *img);
        if (no_cmd) run.argv.clear();
        r.target = {run.rootfs, env_map(run.env)};
        layers = run.image_layers;
        if (!img->squashfs.empty()) r.target.rootfs = unpacked_squashfs(*img);
    } else {
        r.target = preflight::resolve_target(o.check_target, env_map(o.env));
    }
    r.command = run.argv.empty() ? "" : run.argv.front();
    r.workdir = run.workdir;
}

}  // namespace

int check_command(const Options& o) {
    preflight::Request r;
    std::vector<std::string> layers;  // a layered image's, stacked for the view
    set_target(o, r, layers);
    r.driver_root = o.driver_root;
    r.gpus = gpu::resolve_gpu_spec(o.gpu);
    if (r.gpus.kind == gpu::GpuSpec::Kind::lease)
        throw UsageError(
            "check: --gpu auto leases GPUs at run time; name them (indices, UUIDs, all)");
    for (const std::string& e : o.requirements) r.requirements.push_back({"--require", e});
    r.objects = true;
    const UniqueFd root = rootfs::open_read_only_view(r.target.rootfs, "ROOTFS", layers);
    r.root = root.get();
    const preflight::Report report = preflight::check_image(r);
    print(o.json ? preflight::render_json(report) : preflight::render_text(report));
    return report.fits() ? 0 : 1;
}

}  // namespace gpubox::launcher
