#include "preflight/version.hpp"

#include <cstdlib>
#include <cstring>

namespace gpubox::preflight {
namespace {

bool digits_and_dots(const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos;
}

struct Branch {
    int driver_major;
    const char* cuda;
};
// The first driver branch of each CUDA version (R590 is CUDA 13.1, as the compat library of
// 590.44.01 declares in its .note.cuda.fwd_compatibility).
constexpr Branch kBranches[] = {
    {410, "10.0"}, {418, "10.1"}, {440, "10.2"}, {450, "11.0"}, {455, "11.1"}, {460, "11.2"},
    {465, "11.3"}, {470, "11.4"}, {495, "11.5"}, {510, "11.6"}, {515, "11.7"}, {520, "11.8"},
    {525, "12.0"}, {530, "12.1"}, {535, "12.2"}, {545, "12.3"}, {550, "12.4"}, {555, "12.5"},
    {560, "12.6"}, {565, "12.7"}, {570, "12.8"}, {575, "12.9"}, {580, "13.0"}, {590, "13.1"},
};
// A branch newer than the last one above supports at least its CUDA version.
constexpr int kNextUnknownBranch = 595;

}  // namespace

std::optional<int> compare_versions(const std::string& a, const std::string& b) {
    if (!digits_and_dots(a) || !digits_and_dots(b)) return std::nullopt;
    const char* p = a.c_str();
    const char* q = b.c_str();
    while (*p && *q) {
        char *pe = nullptr, *qe = nullptr;
        const unsigned long long x = std::strtoull(p, &pe, 10), y = std::strtoull(q, &qe, 10);
        if (pe == p || qe == q) return std::nullopt;  // "..": no number where one belongs
        if (x != y) return x < y ? -1 : 1;
        p = pe + std::strspn(pe, ".");
        q = qe + std::strspn(qe, ".");
    }
    // What is left of the longer one counts only where it is not all zeros ("12.4.0" == "12.4").
    p += std::strspn(p, ".0");
    q += std::strspn(q, ".0");
    if (!*p && !*q) return 0;
    return *p ? 1 : -1;
}

std::optional<std::string> major_minor(const std::string& version) {
    if (!digits_and_dots(version) || version[0] == '.') return std::nullopt;
    const auto dot = version.find('.');
    if (dot == std::string::npos) return version + ".0";
    const auto end = version.find('.', dot + 1);
    std::string out = version.substr(0, end);
    if (out.size() == dot + 1) out += "0";
    return out;
}

int major_of(const std::string& version) {
    if (version.empty() || version[0] < '0' || version[0] > '9') return -1;
    return std::atoi(version.c_str());
}

DriverCuda cuda_for_driver(const std::string& driver_version) {
    const int major = major_of(driver_version);
    DriverCuda out;
    for (const Branch& b : kBranches)
        if (major >= b.driver_major) out.cuda = b.cuda;
    out.lower_bound = major >= kNextUnknownBranch;
    return out;
}

std::string minor_compat_minimum(int cuda_major) {
    switch (cuda_major) {
        case 11: return "450.80.02";
        case 12: return "525.60.13";
        case 13: return "580.65.06";
        default: return "";
    }
}

}  // namespace gpubox::preflight
