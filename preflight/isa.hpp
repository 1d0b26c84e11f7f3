#pragma once
// x86-64 micro-architecture levels (the psABI's x86-64-v2/v3/v4) from /proc/cpuinfo's flags.
// Pure.
#include <string>

namespace gpubox::preflight {

// The highest level all of whose features the flags list (1 = baseline .. 4 = v4).
int x86_level_of(const std::string& flags);
// The features of `level` (and below) that the flags lack, space-separated ("" if none).
std::string x86_missing(const std::string& flags, int level);
std::string x86_level_name(int level);  // "x86-64-v4", "x86-64-baseline"

}  // namespace gpubox::preflight
