#include "preflight/isa.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

namespace gpubox::preflight {
namespace {

// The psABI's lists, spelled as the kernel spells them in /proc/cpuinfo (pni is SSE3, abm
// carries LZCNT; OSXSAVE is implied by xsave where the kernel enabled it).
const std::vector<std::vector<const char*>>& levels() {
    static const std::vector<std::vector<const char*>> table = {
        {"cx8", "cmov", "fxsr", "mmx", "sse", "sse2"},
        {"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"},
        {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"},
        {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
    };
    return table;
}

// The flags as a sorted list: the line has a few hundred, the levels ask for 27.
std::vector<std::string_view> split(const std::string& flags) {
    std::vector<std::string_view> out;
    for (std::size_t i = 0; i < flags.size();) {
        const std::size_t start = flags.find_first_not_of(" \t", i);
        if (start == std::string::npos) break;
        std::size_t end = flags.find_first_of(" \t", start);
        if (end == std::string::npos) end = flags.size();
        out.push_back(std::string_view(flags).substr(start, end - start));
        i = end;
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

std::string x86_missing(const std::string& flags, int level) {
    const std::vector<std::string_view> have = split(flags);
    std::string out;
    for (int l = 0; l < level && l < static_cast<int>(levels().size()); ++l)
        for (const char* f : levels()[static_cast<std::size_t>(l)])
            if (!std::binary_search(have.begin(), have.end(), std::string_view(f)))
                out += (out.empty() ? "" : " ") + std::string(f);
    return out;
}

int x86_level_of(const std::string& flags) {
    int level = 0;
    while (level < 4 && x86_missing(flags, level + 1).empty()) ++level;
    return level;
}

std::string x86_level_name(int level) {
    return level <= 1 ? "x86-64-baseline" : "x86-64-v" + std::to_string(level);
}

}  // namespace gpubox::preflight
