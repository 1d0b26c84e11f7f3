#pragma once
// Driver and CUDA versions, compared as NVIDIA's tools compare them. Pure.
#include <optional>
#include <string>

namespace gpubox::preflight {

// libnvidia-container's dsl_compare_version: dot-separated numbers compared as numbers, missing
// trailing parts as zeros ("12" == "12.0"). nullopt when either has a character other than a
// digit or a dot (the toolkit then calls the whole expression invalid).
std::optional<int> compare_versions(const std::string& a, const std::string& b);

// "12.4.1" -> "12.4"; "12" -> "12.0"; nullopt for anything that is not digits and dots.
std::optional<std::string> major_minor(const std::string& version);
int major_of(const std::string& version);  // leading number, -1 if none

// The CUDA version a driver supports (what cuDriverGetVersion and nvidia-smi report), from
// NVIDIA's table of driver branches (CUDA Toolkit release notes, "CUDA Toolkit and
// Corresponding Driver Versions"): each branch supports exactly one CUDA version.
struct DriverCuda {
    std::string cuda;          // "12.4"; empty for a driver older than the table
    bool lower_bound = false;  // the driver is newer than the table: at least `cuda`
};
DriverCuda cuda_for_driver(const std::string& driver_version);

// CUDA minor-version compatibility: a runtime of major M runs on any driver at least this new
// (11: 450.80.02, 12: 525.60.13, 13: 580.65.06), without the features newer than the driver
// (PTX JIT of newer PTX, APIs that return cudaErrorCallRequiresNewerDriver). "" if unknown.
std::string minor_compat_minimum(int cuda_major);

}  // namespace gpubox::preflight
