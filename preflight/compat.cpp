#include "preflight/compat.hpp"

#include <algorithm>

#include "common/text.hpp"

namespace gpubox::preflight {
namespace {

std::string unsupported_brand(const std::vector<std::string>& brands,
                              const std::vector<int>& listed) {
    for (const std::string& b : brands) {
        if (b.empty()) continue;
        const bool ok = listed.empty()
                            ? brand_supports_forward_compat(b)
                            : std::count(listed.begin(), listed.end(), brand_number(b)) > 0;
        if (!ok) return b;
    }
    return "";
}

}  // namespace

CompatDecision decide_compat(const std::optional<CompatFacts>& compat,
                             const std::optional<std::string>& host_driver,
                             const std::vector<std::string>& brands) {
    CompatDecision d;
    if (!compat || compat->libcuda.empty()) return d;
    d.present = true;
    const CompatFacts& c = *compat;
    if (c.libcuda.size() > 1) {
        d.reason =
            cat(c.libcuda.size(), " libcuda.so.* files in ", c.dir, " (the toolkit uses none)");
        return d;
    }
    if (!host_driver) {
        d.reason = "the host driver's version is unknown";
        return d;
    }
    const auto newer = compare_versions(c.version, *host_driver);
    if (!newer || *newer <= 0) {
        d.reason = cat("compat driver ", c.version, " is not newer than the host's ", *host_driver);
        return d;
    }
    const int host_major = major_of(*host_driver);
    if (c.note && !c.note->drivers.empty() &&
        std::count(c.note->drivers.begin(), c.note->drivers.end(), host_major) == 0) {
        d.reason =
            cat("its .note.cuda.fwd_compatibility does not list host driver branch ", host_major);
        return d;
    }
    if (!c.note && major_of(c.version) <= host_major) {
        d.reason = cat("compat driver ", c.version, " is of the host's branch ", host_major);
        return d;
    }
    if (const std::string b =
            unsupported_brand(brands, c.note ? c.note->devices : std::vector<int>{});
        !b.empty()) {
        d.reason = cat("a ", b, " GPU does not support forward compatibility");
        return d;
    }
    d.use = true;
    d.cuda = c.note && !c.note->cuda.empty() ? c.note->cuda : cuda_for_driver(c.version).cuda;
    d.reason = cat("compat driver ", c.version, " (CUDA ", d.cuda, ") is newer than the host's ",
                   *host_driver, c.note ? " and its note lists this branch" : "");
    return d;
}

std::vector<std::pair<std::string, std::string>> compat_overrides(const CompatFacts& compat) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& f : compat.files) {
        const auto so = f.find(".so.");
        if (so == std::string::npos || f.substr(so + 4) != compat.version) continue;
        out.emplace_back(f.substr(0, so), compat.dir + "/" + f);
    }
    return out;
}

}  // namespace gpubox::preflight
