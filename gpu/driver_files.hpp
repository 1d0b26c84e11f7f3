#pragma once
// What NVIDIA_DRIVER_CAPABILITIES means, as tables: the libraries, binaries and device nodes each
// capability pulls in (after libnvidia-container's nvc_info.c and options.h).
#include <string>
#include <vector>

namespace gpubox::gpu {

enum Cap : unsigned {
    kCapCompute = 1,
    kCapUtility = 2,
    kCapGraphics = 4,
    kCapVideo = 8,
    kCapDisplay = 16,
    kCapNgx = 32
};
constexpr unsigned kCapDefault = kCapCompute | kCapUtility;
constexpr unsigned kCapAll = 63;

// Pure: "compute,utility" or "all" -> bit set. Throws UsageError naming an unknown capability.
unsigned parse_capabilities(const std::string& text);

// ld.so.cache keys (sonames) are matched against these prefixes.
std::vector<std::string> library_prefixes(unsigned caps);
std::vector<std::string> binary_names(unsigned caps);
// The host's files that tell vendor-neutral loaders where the driver is (Vulkan ICD, EGL
// vendor, ...): bound where the host has them.
std::vector<std::string> config_files(unsigned caps);

bool needs_uvm(unsigned caps);      // compute or video
bool needs_modeset(unsigned caps);  // display

}  // namespace gpubox::gpu
