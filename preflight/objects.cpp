// The findings about the image's ELF files: fat binaries against the GPUs, x86-64 levels
// against the CPU.
#include <algorithm>

#include "common/text.hpp"
#include "preflight/findings.hpp"
#include "preflight/isa.hpp"

namespace gpubox::preflight {
namespace {

std::string list(const std::vector<int>& archs, const char* prefix) {
    std::vector<std::string> names;
    for (int a : archs) names.push_back(cat(prefix, a));
    return join(names, " ");
}

std::string targets(const FatbinTargets& t) {
    std::string s = list(t.sass, "sm_");
    if (!t.ptx.empty()) s += cat(s.empty() ? "" : " ", "PTX ", list(t.ptx, "compute_"));
    return s.empty() ? "no code" : s;
}

// SASS for sm_XY runs on devices of compute capability X.Z with Z >= Y; PTX for compute_XY
// is JIT-compiled by the driver for any device of capability X.Y or above.
Verdict fit(const FatbinTargets& t, const ComputeCapability& cc) {
    for (int s : t.sass)
        if (s / 10 == cc.major && s % 10 <= cc.minor) return Verdict::fits;
    for (int p : t.ptx)
        if (p <= cc.sm()) return Verdict::note;
    return Verdict::fails;
}

Finding fatbin_finding(const ObjectFacts& o, const GpuFacts& g) {
    Finding f{"arch", Verdict::fits, targets(*o.fatbin), "", o.path, ""};
    f.has = cat(g.label(), ", compute capability ", g.cc->text(), " [", g.id_file, "]");
    f.verdict = fit(*o.fatbin, *g.cc);
    if (f.verdict == Verdict::note)
        f.detail = cat("no SASS for sm_", g.cc->sm(),
                       ": the driver JIT-compiles the PTX, so the first start is "
                       "slow (cached in ~/.nv/ComputeCache afterwards)");
    if (f.verdict == Verdict::fails)
        f.detail =
            cat("no SASS for sm_", g.cc->major, "x up to sm_", g.cc->sm(),
                " and no PTX at or below compute_", g.cc->sm(),
                ": kernels fail with 'no kernel image is available for execution on the device'");
    return f;
}

void add_fatbins(const ImageFacts& image, const HostFacts& host, Report& r) {
    std::vector<const ObjectFacts*> objects;
    for (const ObjectFacts& o : image.objects)
        if (o.fatbin && (!o.fatbin->sass.empty() || !o.fatbin->ptx.empty())) objects.push_back(&o);
    if (image.command && image.command->fatbin &&
        std::none_of(objects.begin(), objects.end(),
                     [&](auto* o) { return o->path == image.command->path; }))
        objects.push_back(&*image.command);
    if (!image.scan_stopped.empty())
        r.findings.push_back({"arch", Verdict::note, "", "", "",
                              cat("fat-binary scan stopped after ", image.scanned_files,
                                  " files: ", image.scan_stopped)});
    for (const GpuFacts& g : host.gpus) {
        if (!g.cc) {
            if (!objects.empty())
                r.findings.push_back({"arch", Verdict::note, cat(objects.size(), " CUDA objects"),
                                      g.label(), "",
                                      cat("gpubox does not know device id 0x", std::hex,
                                          g.device_id, "'s compute capability: not checked")});
            continue;
        }
        std::size_t ok = 0;
        for (const ObjectFacts* o : objects) {
            Finding f = fatbin_finding(*o, g);
            if (f.verdict == Verdict::fits) ++ok;
            else r.findings.push_back(std::move(f));
        }
        if (ok)
            r.findings.push_back({"arch", Verdict::fits,
                                  cat("SASS for sm_", g.cc->sm(), " (", ok,
                                      ok == 1 ? " CUDA object)" : " CUDA objects)"),
                                  cat(g.label(), ", compute capability ", g.cc->text()), "", ""});
    }
}

void add_isa(const ImageFacts& image, const HostFacts& host, Report& r) {
    std::vector<const ObjectFacts*> objects;
    if (image.command) objects.push_back(&*image.command);
    for (const ObjectFacts& o : image.objects)
        if (!image.command || o.path != image.command->path) objects.push_back(&o);
    const int cpu = host.cpu_flags.empty() ? 0 : x86_level_of(host.cpu_flags);
    for (const ObjectFacts* o : objects) {
        if (o->isa <= 1 || host.cpu_flags.empty()) continue;
        Finding f{"isa", Verdict::fits, x86_level_name(o->isa) + " (its GNU property note)",
                  "",    o->path,       ""};
        f.has = cat(host.cpu_model.empty() ? "CPU" : host.cpu_model, ": ", x86_level_name(cpu),
                    " [", host.cpu_file, "]");
        if (o->isa > cpu) {
            f.verdict = Verdict::fails;
            f.detail = cat("the CPU lacks ", x86_missing(host.cpu_flags, o->isa),
                           ": the program dies with 'Illegal instruction' (SIGILL)");
        }
        r.findings.push_back(std::move(f));
    }
}

}  // namespace

void add_object_findings(const ImageFacts& image, const HostFacts& host, Report& r) {
    add_fatbins(image, host, r);
    add_isa(image, host, r);
}

std::string GpuFacts::label() const {
    return cat("GPU ", index, " (", bus, model.empty() ? "" : ", ", model, ")");
}

}  // namespace gpubox::preflight
