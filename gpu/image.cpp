#include "gpu/image.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "common/log.hpp"
#include "common/text.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::gpu {
namespace {

#if defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
#else
constexpr const char* kMultiarch = "x86_64-linux-gnu";
#endif

bool has_dir(int root, const std::string& path) {
    const int fd = rootfs::try_open_in_root(root, path, O_PATH | O_DIRECTORY);
    if (fd < 0) return false;
    const UniqueFd owned(fd);  // only whether it opened matters
    return true;
}

}  // namespace

std::string choose_libdir(bool has_multiarch) {
    return has_multiarch ? cat("/usr/lib/", kMultiarch) : "/usr/lib64";
}

ImageInfo inspect_image(int root) {
    ImageInfo info;
    info.libdir = choose_libdir(has_dir(root, cat("/usr/lib/", kMultiarch)) ||
                                has_dir(root, cat("/lib/", kMultiarch)));
    const auto cache = rootfs::map_regular_in_root(root, "/etc/ld.so.cache", 64 << 20);
    if (!cache) return info;
    std::string problem;
    info.ldcache = parse_mapped_ldcache(*cache, parse_ldcache, problem);
    if (!problem.empty())
        log::warn(
            cat("ROOTFS's /etc/ld.so.cache is unusable (", problem, "); gpubox writes a new one"));
    return info;
}

}  // namespace gpubox::gpu
