#include "preflight/findings.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "preflight/isa.hpp"

namespace gpubox::preflight {
namespace {

// The driver's CUDA version as the sandbox sees it: the image's compat driver's where used.
std::string effective_cuda(const HostFacts& host, const CompatDecision& compat) {
    return compat.use ? compat.cuda : host.cuda.cuda;
}

std::string node_cuda(const HostFacts& host, const CompatDecision& compat) {
    if (!host.driver) return "no NVIDIA driver";
    std::string s =
        cat("driver ", *host.driver, " (CUDA ", host.cuda.lower_bound ? ">= " : "",
            host.cuda.cuda.empty() ? "?" : host.cuda.cuda, ") [", host.driver_file, "]");
    if (compat.use) s += cat(", with the image's compat driver CUDA ", compat.cuda);
    return s;
}

// "cuda>=12.4 brand=tesla,driver>=470,... (11 more)" is long: the first alternative and a count.
std::string short_expr(const std::string& expr) {
    const auto sp = expr.find(' ');
    if (sp == std::string::npos) return expr;
    const auto n = std::count(expr.begin() + static_cast<std::ptrdiff_t>(sp), expr.end(), ' ');
    return cat(expr.substr(0, sp), " (or ", n,
               n == 1 ? " other alternative)" : " other alternatives)");
}

RequireFacts facts_for(const HostFacts& host, const std::string& cuda, const GpuFacts* g) {
    RequireFacts f{cuda, host.driver.value_or(""), "", "", g != nullptr};
    if (g) f.arch = g->cc ? g->cc->text() : "", f.brand = g->brand;
    return f;
}

// The first GPU (or the driver alone) the requirement fails for.
Evaluation evaluate_all(const Requirement& r, const HostFacts& host, const std::string& cuda) {
    if (host.gpus.empty()) return evaluate_requirement(r.expr, facts_for(host, cuda, nullptr));
    for (const GpuFacts& g : host.gpus)
        if (Evaluation e = evaluate_requirement(r.expr, facts_for(host, cuda, &g));
            e.outcome != Outcome::satisfied)
            return e;
    return {};
}

// The toolkit's known mistake: "cuda>=12.8" against a 12.4 driver fails, though CUDA's
// minor-version compatibility runs any 12.x runtime on a 12.x driver at least 525.60.13.
bool only_minor_version(const Requirement& r, const HostFacts& host, const std::string& cuda) {
    const int major = major_of(cuda);
    const std::string minimum = minor_compat_minimum(major);
    if (minimum.empty() || !host.driver || compare_versions(*host.driver, minimum).value_or(-1) < 0)
        return false;
    return evaluate_all(r, host, cat(major, ".999")).outcome == Outcome::satisfied;
}

Finding require_finding(const Requirement& r, const HostFacts& host, const CompatDecision& compat) {
    Finding f{"require", Verdict::fits, short_expr(r.expr), node_cuda(host, compat), r.source, ""};
    const std::string cuda = effective_cuda(host, compat);
    const Evaluation e = evaluate_all(r, host, cuda);
    if (e.outcome == Outcome::invalid) {
        f.verdict = Verdict::fails;
        f.detail = cat("invalid condition ", quote(e.condition),
                       ": nvidia-container-cli refuses the container");
    } else if (e.outcome == Outcome::unsatisfied && only_minor_version(r, host, cuda)) {
        f.verdict = Verdict::warn;
        f.detail = cat(
            "unsatisfied condition ", e.condition,
            ", which nvidia-container-cli enforces; CUDA "
            "minor-version compatibility runs it on this driver (without newer PTX JIT and APIs), "
            "so gpubox only warns");
    } else if (e.outcome == Outcome::unsatisfied) {
        f.verdict = Verdict::fails;
        f.detail = cat("unsatisfied condition ", e.condition,
                       ": update the driver, or use an image built for an older CUDA");
    } else if (compat.use && evaluate_all(r, host, host.cuda.cuda).outcome != Outcome::satisfied) {
        f.verdict = Verdict::note;
        f.detail =
            "holds with the image's forward-compatibility driver, which nvidia-container-cli does "
            "not count";
    }
    return f;
}

Finding runtime_finding(const ImageFacts& image, const HostFacts& host,
                        const CompatDecision& compat) {
    const bool lib = !image.cudart.empty();
    const std::string version = lib ? image.cudart : image.toolkit;
    Finding f{"cuda",
              Verdict::fits,
              cat("CUDA runtime ", version),
              node_cuda(host, compat),
              lib ? image.cudart_file : image.toolkit_file,
              ""};
    const std::string cuda = effective_cuda(host, compat);
    const auto runtime = major_minor(version);
    if (!host.driver || cuda.empty() || !runtime) {
        f.verdict = host.driver ? Verdict::note : Verdict::fails;
        f.detail = host.driver ? "cannot compare" : "no NVIDIA driver on this node";
        return f;
    }
    if (compare_versions(*runtime, cuda).value_or(1) <= 0) return f;
    const std::string minimum = minor_compat_minimum(major_of(*runtime));
    if (major_of(*runtime) == major_of(cuda) && !minimum.empty() &&
        compare_versions(*host.driver, minimum).value_or(-1) >= 0) {
        f.verdict = Verdict::note;
        f.detail = cat("runs by CUDA minor-version compatibility (driver >= ", minimum,
                       "); features newer than CUDA ", cuda, " (PTX JIT of newer PTX) fail");
        return f;
    }
    f.verdict = Verdict::fails;
    std::string way = ", or the image's forward-compatibility libraries (cuda-compat)";
    if (compat.present)
        way = compat.use ? "" : "; the image's compat libraries are not used: " + compat.reason;
    f.detail =
        cat("the runtime fails with cudaErrorInsufficientDriver (35, 'CUDA driver version is "
            "insufficient for CUDA runtime version'): needs a driver of CUDA ",
            *runtime, " or newer", way);
    return f;
}

Finding compat_finding(const ImageFacts& image, const HostFacts& host,
                       const CompatDecision& compat) {
    const CompatFacts& c = *image.compat;
    Finding f{"compat",
              Verdict::note,
              cat("compat driver ", c.version.empty() ? "?" : c.version),
              node_cuda(host, CompatDecision{}),
              c.dir + "/" + (c.libcuda.empty() ? "" : c.libcuda.front()),
              ""};
    f.detail = compat.use
                   ? cat("gpubox uses it: its libraries come first in the sandbox's ld.so.cache (",
                         compat.reason, ")")
                   : cat("the host's driver libraries are used: ", compat.reason);
    if (!c.note_problem.empty()) f.detail += cat("; ", c.note_problem);
    return f;
}

}  // namespace

const char* to_string(Verdict v) {
    switch (v) {
        case Verdict::fits: return "ok";
        case Verdict::note: return "note";
        case Verdict::warn: return "warn";
        case Verdict::fails: return "FAIL";
    }
    return "?";
}

bool Report::fits() const {
    return std::none_of(findings.begin(), findings.end(),
                        [](const Finding& f) { return f.verdict == Verdict::fails; });
}

Report plan_findings(const ImageFacts& image, const HostFacts& host,
                     const std::vector<Requirement>& requirements) {
    Report r;
    std::vector<std::string> brands;
    for (const GpuFacts& g : host.gpus) brands.push_back(g.brand);
    r.compat = decide_compat(image.compat, host.driver, brands);
    if (host.gpus_asked && !host.driver)
        r.findings.push_back({"driver", Verdict::fails, "an NVIDIA driver", "none", "",
                              "no NVIDIA kernel module version (/sys/module/nvidia/version)"});
    for (const Requirement& q : requirements)
        r.findings.push_back(require_finding(q, host, r.compat));
    if (!image.cudart.empty() || !image.toolkit.empty())
        r.findings.push_back(runtime_finding(image, host, r.compat));
    if (r.compat.present) r.findings.push_back(compat_finding(image, host, r.compat));
    add_object_findings(image, host, r);
    return r;
}

std::string render_line(const Finding& f) {
    std::string s = cat(f.check, ": needs ", f.needs);
    if (!f.file.empty()) s += cat(" [", f.file, "]");
    if (!f.has.empty()) s += cat("; node: ", f.has);
    if (!f.detail.empty()) s += cat("; ", f.detail);
    return s;
}

std::string render_text(const Report& r) {
    std::string out;
    for (const Finding& f : r.findings) out += cat(to_string(f.verdict), " ", render_line(f), "\n");
    out += r.fits() ? "fits: the image can run on this node\n"
                    : "does not fit: the image cannot run on this node\n";
    return out;
}

std::string render_json(const Report& r) {
    nlohmann::json j = {{"fits", r.fits()},
                        {"forward_compat", r.compat.use},
                        {"findings", nlohmann::json::array()}};
    for (const Finding& f : r.findings)
        j["findings"].push_back(
            {{"check", f.check},
             {"result",
              to_string(f.verdict) == std::string("FAIL") ? "fail" : to_string(f.verdict)},
             {"needs", f.needs},
             {"has", f.has},
             {"file", f.file},
             {"detail", f.detail}});
    return j.dump(2) + "\n";
}

}  // namespace gpubox::preflight
