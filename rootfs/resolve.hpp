#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/mapped_file.hpp"
#include "common/unique_fd.hpp"

namespace gpubox::rootfs {

// Symlinks followed in one resolution before it fails with ELOOP: the kernel's own limit
// (MAXSYMLINKS), so the walk gives up exactly where openat2 would.
constexpr int kMaxSymlinkHops = 40;

// Open `path` (a container path) under `root`, never leaving it: absolute symlinks and ".." are
// resolved as if `root` were "/", magic links (/proc/self/fd/N) are refused. Uses
// openat2(RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS); where openat2 is refused (ENOSYS, EPERM from an
// outer seccomp filter, EINVAL), resolve_in_root's follow mode, which has the same semantics.
// `flags` are open(2) flags; O_CLOEXEC is always added.
UniqueFd open_in_root(int root, const std::string& path, int flags);

// Like open_in_root but returns -errno instead of throwing (for "does it exist" probes).
int try_open_in_root(int root, const std::string& path, int flags);

// `rel` below `dir` as spelled: no symlink and no magic link anywhere on the way, never above
// `dir` (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, plus `resolve`).
// The fd, or -errno: ELOOP for a link on the way, ENOSYS/EPERM/EINVAL where openat2 is refused,
// EAGAIN where a ".." still raced mounts after sys::try_openat2's retries.
int try_open_beneath(int dir, const std::string& rel, int flags, std::uint64_t resolve = 0);

// THE component walk inside a root: one component at a time on its parent's fd, never following
// a link by path (fstatat/openat with O_NOFOLLOW, readlinkat), ".." stopping at the root, an
// absolute link restarting there, at most kMaxSymlinkHops links. The modes its callers need:
enum class ResolveMode {
    follow,     // open the path, following every link (the last too, unless O_NOFOLLOW)
    create,     // the same, making each missing component through hooks.make
    canonical,  // the path the kernel will resolve to, where it exists and beyond: components
                // past a missing one are taken as spelled; nothing is made
};
struct ResolveHooks {
    // create: make missing `name` in directory `dir` (`last`: the path's own entry); throws to
    // refuse (a directory not on a filesystem gpubox mounted, say).
    std::function<void(int dir, const std::string& name, bool last)> make;
    // canonical: stop before looking at this prefix (relative components of the result so far,
    // the candidate last), which then ends the result (a mount of the plan covers it).
    std::function<bool(const std::vector<std::string>& parts)> stop;
};
struct Resolved {
    // follow, create: the path opened with `flags`; canonical: the deepest directory as an
    // O_PATH fd where the whole path exists, else -ENOENT. Or -errno (ELOOP past the hops).
    int fd = -ENOENT;
    std::vector<std::string> parts;  // the canonical components below the root
    std::vector<mode_t> modes;       // the mode of each (07777 bits), 0 where missing
    bool stopped = false;            // canonical: hooks.stop ended the walk
};
// The caller owns Resolved::fd when it is >= 0.
Resolved resolve_in_root(int root, const std::string& path, ResolveMode mode, int flags,
                         const ResolveHooks& hooks = {});

// resolve_in_root in follow mode, the fd or -errno: exposed so tests can compare both paths on
// one table.
int walk_in_root(int root, const std::string& path, int flags);

// A regular file under `root`, mapped (see common/mapped_file.hpp). nullopt where it is missing,
// not a regular file (a FIFO does not block), or larger than `limit`.
using MappedFile = gpubox::MappedFile;
std::optional<MappedFile> map_regular_in_root(int root, const std::string& path, std::size_t limit);

}  // namespace gpubox::rootfs
