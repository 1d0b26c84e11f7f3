#include "image/run_config.hpp"

#include "common/error.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::image {

RunConfig translate_config(const Stored& img, const RunAsked& asked) {
    const Config& c = img.config;
    RunConfig r;
    r.rootfs = img.rootfs.string();
    for (const std::string& kv : c.env) {
        const auto eq = kv.find('=');
        if (eq == 0 || eq == std::string::npos) continue;  // docker ignores such entries too
        r.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        if (r.env.back().first == "NVIDIA_DRIVER_CAPABILITIES")
            r.driver_capabilities = r.env.back().second;
    }
    r.env.insert(r.env.end(), asked.env.begin(), asked.env.end());
    if (!asked.workdir_given && !c.working_dir.empty())
        r.workdir = rootfs::normalize_container_path(c.working_dir,
                                                     cat("image ", img.name, ": WorkingDir"));
    r.argv = c.entrypoint;
    const std::vector<std::string>& args = asked.argv.empty() ? c.cmd : asked.argv;
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    if (r.argv.empty())
        throw UsageError(cat("run: missing CMD (image ", img.name, " has no Entrypoint or Cmd)"));
    return r;
}

}  // namespace gpubox::image
