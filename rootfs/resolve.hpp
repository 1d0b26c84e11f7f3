#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::rootfs {

// Open `path` (a container path) under `root`, never leaving it: absolute symlinks and ".." are
// resolved as if `root` were "/", magic links (/proc/self/fd/N) are refused. Uses
// openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS); where openat2 is refused (ENOSYS, EPERM from an
// outer seccomp filter, EINVAL), a component-by-component openat(O_NOFOLLOW) walk with the same
// semantics, bounded to 40 symlink hops. `flags` are open(2) flags; O_CLOEXEC is always added.
UniqueFd open_in_root(int root, const std::string& path, int flags);

// Like open_in_root but returns -errno instead of throwing (for "does it exist" probes).
int try_open_in_root(int root, const std::string& path, int flags);

// A regular file under `root`, read whole in one read() (an ld.so.cache runs to hundreds of
// KiB). nullopt where it is missing, not a regular file (a FIFO does not block), larger than
// `limit`, or grew while read.
std::optional<std::string> read_regular_in_root(int root, const std::string& path, std::size_t limit);

// The same walk, without openat2: exposed so tests can compare both paths on one table.
int walk_in_root(int root, const std::string& path, int flags);

}  // namespace gpubox::rootfs
