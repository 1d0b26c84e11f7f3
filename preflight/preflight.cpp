#include "preflight/preflight.hpp"

#include <sys/stat.h>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "preflight/discover.hpp"

namespace gpubox::preflight {

Mode parse_mode(const std::string& text) {
    if (text == "off") return Mode::off;
    if (text == "warn") return Mode::warn;
    if (text == "enforce") return Mode::enforce;
    throw UsageError(cat("--preflight: ", quote(text), " is none of warn (default), enforce, off"));
}

const char* to_string(Mode m) {
    switch (m) {
        case Mode::off: return "off";
        case Mode::warn: return "warn";
        case Mode::enforce: return "enforce";
    }
    return "?";
}

Target resolve_target(const std::string& spec, const std::map<std::string, std::string>& env) {
    struct stat st {};
    if (::stat(spec.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return {spec, env};
    throw PlanError(
        cat(quote(spec), " is not a directory (a ROOTFS) and no pulled image has that name"),
        "give a root filesystem directory (gpubox rootfs create DIR makes one)");
}

Report check_image(const Request& r) {
    const ImageFacts image = discover_image_facts(r.root, r.target.rootfs, r.target.env,
                                                  {r.command, r.workdir, r.objects, 5});
    const HostFacts host = discover_host_facts(r.driver_root, r.gpus, true);
    std::vector<Requirement> reqs = collect_requirements(r.target.env);
    reqs.insert(reqs.end(), r.requirements.begin(), r.requirements.end());
    return plan_findings(image, host, reqs);
}

RunFacts preflight_run(Mode mode, const Request& r) {
    RunFacts facts;
    if (mode == Mode::off) return facts;
    Report report;
    try {
        // Without --gpu the workload gets no GPU: its CUDA parts cannot matter, only the CPU,
        // so neither they nor the driver's version are read (every run pays what is read here).
        using K = gpu::GpuSpec::Kind;
        const bool gpus = r.gpus.kind != K::none;
        ImageFacts image = discover_image_facts(r.root, r.target.rootfs, r.target.env,
                                                {r.command, r.workdir, false, 0, gpus});
        if (gpus) facts = {true, image.compat};
        // A lease or Slurm spec names its GPUs later: the driver's facts alone.
        gpu::GpuSpec spec = r.gpus;
        if (spec.kind != K::all && spec.kind != K::list && spec.kind != K::minors)
            spec.kind = K::none;
        const bool cpu = image.command && image.command->isa > 1;
        const HostFacts host = discover_host_facts(r.driver_root, spec, cpu, gpus);
        report = plan_findings(
            image, host, gpus ? collect_requirements(r.target.env) : std::vector<Requirement>{});
        if (gpus && !host.gpus.empty()) {
            facts.decision = report.compat;
            facts.decided_driver = host.driver;
            for (const GpuFacts& g : host.gpus) facts.decided_brands.push_back(g.brand);
        }
    } catch (...) {
        log::debug("preflight: skipped: " + describe(std::current_exception()));
        return {};
    }
    for (const Finding& f : report.findings) {
        if (f.verdict != Verdict::fails) continue;
        if (mode == Mode::enforce)
            throw PlanError(
                cat("preflight: ", render_line(f)),
                "'gpubox check' lists every finding; --preflight warn (or off) starts it anyway");
        log::warn(cat("preflight: ", render_line(f)));
    }
    return facts;
}

std::vector<std::pair<std::string, std::string>> forward_compat(
    const std::optional<CompatFacts>& compat, const std::optional<std::string>& driver,
    const std::vector<std::string>& models, std::string& why, const RunFacts& taken) {
    std::vector<std::string> brands;
    for (const std::string& m : models) brands.push_back(brand_of(m));
    const bool same =
        taken.decision && taken.decided_driver == driver && taken.decided_brands == brands;
    const CompatDecision d = same ? *taken.decision : decide_compat(compat, driver, brands);
    why = d.present ? cat(d.use ? "using " : "not using ", compat->dir, ": ", d.reason) : "";
    return d.use ? compat_overrides(*compat) : std::vector<std::pair<std::string, std::string>>{};
}

}  // namespace gpubox::preflight
