#include "preflight/device.hpp"

#include <algorithm>
#include <cctype>

namespace gpubox::preflight {
namespace {

struct Block {
    unsigned first, last;
    ComputeCapability cc;
};
// Device-id blocks per chip (from the PCI ID database and NVIDIA's CUDA GPU list). Maxwell is
// the oldest architecture the current drivers support.
constexpr Block kBlocks[] = {
    {0x1340, 0x13bf, {5, 0}},   // GM107, GM108
    {0x13c0, 0x13ff, {5, 2}},   // GM204 (Tesla M60, M6)
    {0x1400, 0x14ff, {5, 2}},   // GM206
    {0x1580, 0x15ff, {6, 0}},   // GP100 (Tesla P100)
    {0x1700, 0x17ff, {5, 2}},   // GM200 (Tesla M40)
    {0x1b00, 0x1cff, {6, 1}},   // GP102, GP104, GP106, GP107 (Tesla P40, P4)
    {0x1d00, 0x1d7f, {6, 1}},   // GP108
    {0x1d80, 0x1dff, {7, 0}},   // GV100 (Tesla V100, TITAN V)
    {0x1e00, 0x1fff, {7, 5}},   // TU102, TU104, TU106, TU117 (Tesla T4)
    {0x2000, 0x20ff, {8, 0}},   // GA100 (A100, A30)
    {0x2180, 0x21ff, {7, 5}},   // TU116
    {0x2200, 0x22ff, {8, 6}},   // GA102 (A10, A40, RTX A6000)
    {0x2300, 0x23ff, {9, 0}},   // GH100 (H100, H200, GH200)
    {0x2400, 0x25ff, {8, 6}},   // GA103, GA104, GA106, GA107 (A2, A16)
    {0x2600, 0x28ff, {8, 9}},   // AD102, AD103, AD104, AD106, AD107 (L4, L40S)
    {0x2900, 0x29ff, {10, 0}},  // GB100, GB102 (B200, GB200)
    {0x2b00, 0x2dff, {12, 0}},  // GB202, GB203, GB205, GB206 (RTX PRO 6000, RTX 5090)
};

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

bool has(const std::string& s, const char* word) { return s.find(word) != std::string::npos; }

struct Brand {
    const char* name;
    int number;  // nvmlBrandType_t
};
constexpr Brand kBrands[] = {
    {"unknown", 0},     {"quadro", 1},       {"tesla", 2},      {"nvs", 3},        {"grid", 4},
    {"geforce", 5},     {"titan", 6},        {"vapps", 7},      {"vpc", 8},        {"vcs", 9},
    {"vws", 10},        {"cloudgaming", 11}, {"quadrortx", 12}, {"nvidiartx", 13}, {"nvidia", 14},
    {"geforcertx", 15}, {"titanrtx", 16},
};

}  // namespace

std::optional<ComputeCapability> compute_capability_of(unsigned id) {
    for (const Block& b : kBlocks)
        if (id >= b.first && id <= b.last) return b.cc;
    return std::nullopt;
}

std::string brand_of(const std::string& model) {
    const std::string m = lower(model);
    if (m.empty()) return "";
    if (has(m, "geforce")) return "geforce";
    if (has(m, "titan")) return "titan";
    if (has(m, "quadro")) return has(m, "rtx") ? "quadrortx" : "quadro";
    if (has(m, "tesla")) return "tesla";
    if (has(m, "grid")) return "grid";
    if (m.rfind("nvs", 0) == 0 || has(m, " nvs ")) return "nvs";
    if (has(m, "rtx")) return "nvidiartx";  // RTX A6000, RTX 6000 Ada, RTX PRO 6000
    return "nvidia";                        // A100, H100, H200, L4, B200
}

int brand_number(const std::string& brand) {
    for (const Brand& b : kBrands)
        if (brand == b.name) return b.number;
    return 0;
}

bool brand_supports_forward_compat(const std::string& brand) {
    const int n = brand_number(brand);
    return n == 1 || n == 2 || (n >= 7 && n <= 14);
}

}  // namespace gpubox::preflight
