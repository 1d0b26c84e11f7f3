#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// `rel` below `dir` as spelled: no symlink and no magic link anywhere on the way, never above
// `dir` (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, plus `resolve`).
// The fd, or -errno: ELOOP for a link on the way, ENOSYS/EPERM/EINVAL where openat2 is refused,
// EAGAIN where a ".." still raced mounts after sys::try_openat2's retries.
int try_open_beneath(int dir, const std::string& rel, int flags, std::uint64_t resolve = 0);

// A regular file mapped read-only. Its pages are read where they are looked at: a binary search
// of a host's ld.so.cache (hundreds of KiB) touches a few, where reading it whole cost ~0.4 ms
// with 5000 libraries listed. ldconfig renames a new cache into place and never rewrites one,
// but a file can still shrink while mapped (a driver root being rewritten, an image's owner
// truncating it), and a read past its new end faults (SIGBUS). While a MappedFile lives, such
// a fault maps a page of zeros there instead and the read goes on: the parsers bound-check
// every offset, and truncated() tells the caller to discard what it read. A SIGBUS anywhere
// else keeps its usual effect. Single-threaded use: the monitor and `gpubox list`.
struct MappingGuard;  // the SIGBUS handler's slot for one live mapping (resolve.cpp)
class MappedFile {
public:
    MappedFile() = default;
    MappedFile(const char* data, std::size_t size, MappingGuard* guard) : data_(data), size_(size), guard_(guard) {}
    MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_), guard_(o.guard_) {
        o.data_ = nullptr, o.size_ = 0, o.guard_ = nullptr;
    }
    MappedFile& operator=(MappedFile&& o) noexcept;
    ~MappedFile();
    std::string_view bytes() const { return {data_, size_}; }
    // The file shrank under a read of the mapping, which then saw zeros.
    bool truncated() const;

private:
    const char* data_ = nullptr;
    std::size_t size_ = 0;
    MappingGuard* guard_ = nullptr;
};

// A regular file under `root`, mapped. nullopt where it is missing, not a regular file (a FIFO
// does not block), or larger than `limit`.
std::optional<MappedFile> map_regular_in_root(int root, const std::string& path, std::size_t limit);

// The same walk, without openat2: exposed so tests can compare both paths on one table.
int walk_in_root(int root, const std::string& path, int flags);

}  // namespace gpubox::rootfs
