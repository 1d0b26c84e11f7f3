#include "preflight/isa.hpp"

#include <sstream>
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

bool has_flag(const std::string& flags, const char* flag) {
    std::istringstream in(flags);
    for (std::string f; in >> f;)
        if (f == flag) return true;
    return false;
}

}  // namespace

std::string x86_missing(const std::string& flags, int level) {
    std::string out;
    for (int l = 0; l < level && l < static_cast<int>(levels().size()); ++l)
        for (const char* f : levels()[static_cast<std::size_t>(l)])
            if (!has_flag(flags, f)) out += (out.empty() ? "" : " ") + std::string(f);
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
