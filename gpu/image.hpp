#pragma once
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.hpp"
#include "gpu/ldcache.hpp"

namespace gpubox::gpu {

// What the injection needs to know about ROOTFS, read (never written) through an fd with every
// path resolved inside it.
struct ImageInfo {
    std::string libdir;                 // where the image's loader looks by default
    std::vector<LdCacheEntry> ldcache;  // the image's own cache, if it has a readable one
    // CUDA forward compatibility, where the launcher chose it (preflight/compat.hpp): library
    // stems ("libcuda") whose sonames lead to the image's compat file instead of the host's.
    std::vector<std::pair<std::string, std::string>> compat_first;  // stem, container path
};

// `root`: ROOTFS's read-only view (rootfs/view.hpp), so that reading it changes no timestamp.
ImageInfo inspect_image(int root);

// Pure: the library directory for a layout. Debian/Ubuntu multiarch when the image has it,
// else the lib64 directory glibc's loader searches on RHEL-like systems.
std::string choose_libdir(bool has_multiarch);

}  // namespace gpubox::gpu
