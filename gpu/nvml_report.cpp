#include "gpu/nvml_report.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

constexpr std::size_t kMaxLine = 512, kMaxGpus = 64, kMaxMig = 64;

bool uuid_ok(const std::string& s, const char* prefix) {
    const std::size_t n = std::char_traits<char>::length(prefix);
    return s.size() > n && s.size() <= 96 && s.compare(0, n, prefix) == 0 &&
           std::all_of(s.begin(), s.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
           });
}

bool number(const std::string& s, std::uint64_t max, std::uint64_t& out) {
    if (s.empty() || s.size() > 20 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
    out = 0;
    for (char c : s) {
        const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
        if (d > max || out > (max - d) / 10) return false;
        out = out * 10 + d;
    }
    return true;
}

bool mode(const std::string& s, int& out) {
    if (s == "-") out = -1;
    else if (s == "0" || s == "1") out = s[0] - '0';
    else return false;
    return true;
}

}  // namespace

std::string mig_profile_of(const std::string& name) {
    const auto at = name.rfind(" MIG ");
    if (at == std::string::npos) return "";
    const std::string p = name.substr(at + 5);
    const bool ok = !p.empty() && p.size() <= 32 && std::all_of(p.begin(), p.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+';
    });
    return ok ? p : "";
}

NvmlReport parse_nvml_report(const std::string& text) {
    NvmlReport r;
    std::istringstream in(text);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
        ++n;
        const auto bad = [&](const char* why) {
            throw PlanError(cat("gpubox-nvml's line ", n, " ", why));
        };
        if (line.size() > kMaxLine) bad("is too long");
        if (std::any_of(line.begin(), line.end(), [](char c) {
                return static_cast<unsigned char>(c) < 0x20 ||
                       static_cast<unsigned char>(c) >= 0x7f;
            }))
            bad("has control or non-ASCII characters");
        std::istringstream words(line);
        std::string kind;
        words >> kind;
        if (kind == "nvml") {
            words >> r.driver_version;
            if (r.driver_version.empty() || r.driver_version.size() > 32)
                bad("is no driver version");
        } else if (kind == "gpu") {
            std::string bus, uuid, cur, pend, extra;
            words >> bus >> uuid >> cur >> pend;
            NvmlGpu g;
            const auto pci = parse_pci_address(bus);
            if (!pci || !uuid_ok(uuid, "GPU-") || !mode(cur, g.mig_mode) ||
                !mode(pend, g.mig_pending) || (words >> extra))
                bad("is no 'gpu BUS_ID UUID CURRENT PENDING'");
            if (r.gpus.size() >= kMaxGpus) bad("lists too many GPUs");
            g.pci = *pci, g.uuid = uuid;
            r.gpus.push_back(std::move(g));
        } else if (kind == "mig") {
            std::string gi, ci, mem, uuid;
            words >> gi >> ci >> mem >> uuid;
            std::string name;
            std::getline(words >> std::ws, name);
            NvmlMig m;
            std::uint64_t a = 0, b = 0;
            if (!number(gi, 14, a) || !number(ci, 7, b) || !number(mem, UINT64_MAX, m.memory) ||
                !uuid_ok(uuid, "MIG-") || name.size() > 96)
                bad("is no 'mig GI CI MEMORY UUID NAME'");
            if (r.gpus.empty()) bad("names a MIG device before any GPU");
            if (r.gpus.back().mig.size() >= kMaxMig) bad("lists too many MIG devices");
            m.gi = static_cast<int>(a), m.ci = static_cast<int>(b);
            m.uuid = uuid, m.name = name, m.profile = mig_profile_of(name);
            r.gpus.back().mig.push_back(std::move(m));
        }
    }
    if (r.driver_version.empty()) throw PlanError("gpubox-nvml gave no report");
    return r;
}

void apply_nvml_report(GpuInventory& inv, const NvmlReport& report) {
    for (Gpu& g : inv.gpus) {
        if (g.vendor != Vendor::nvidia) continue;
        const auto it = std::find_if(report.gpus.begin(), report.gpus.end(), [&](const NvmlGpu& n) {
            return n.pci == g.pci && (g.uuid.empty() || g.uuid == n.uuid);
        });
        if (it == report.gpus.end()) continue;
        g.mig_mode = it->mig_mode, g.mig_pending = it->mig_pending;
        for (MigDevice& m : g.mig)
            for (const NvmlMig& n : it->mig)
                if (n.gi == m.gi && n.ci == m.ci)
                    m.uuid = n.uuid, m.profile = n.profile, m.memory = n.memory;
    }
    inv.nvml = true;
}

}  // namespace gpubox::gpu
