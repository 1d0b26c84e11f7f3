#pragma once
// Single-file images: an image kept as one squashfs file (`pull --squashfs`, `export`), built
// and checked with Debian's squashfs-tools (mksquashfs, unsquashfs); runs mount it with
// squashfuse (launcher/monitor/fuse_root.hpp) or, where FUSE is not open to the caller, run
// from a tree unsquashfs unpacked once into the caller's store (docs/images.md says which path
// a run takes when).
#include <sys/types.h>

#include <filesystem>
#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::image {

// Debian's tool NAME in /usr/bin, /usr/sbin, /bin or /sbin; PlanError naming the package.
std::string find_system_tool(const std::string& name, const std::string& package);

// Whether PATH is a regular file that starts with squashfs's magic ("hsqs"), read without
// changing its access time; another user's file, which cannot be read so, by its name (.sqsh,
// .squashfs).
bool is_squashfs_file(const std::string& path);

// mksquashfs of the directory `src` (an fd: a tree, or an image's stacked view) into `out`,
// made anew (it must not exist): every file root's, no xattrs, then checked with
// `unsquashfs -s`. PlanError with the tool's own words on failure; `out` is then removed.
void make_squashfs(int src, const std::string& src_name, const std::string& out);

// `unsquashfs -s FILE`, FILE in directory `dir` (or AT_FDCWD, FILE absolute): PlanError where
// it is no squashfs file unsquashfs reads.
void check_squashfs(int dir, const std::string& file);

// The sha256 of a file, "sha256:<hex>" (coreutils' sha256sum).
std::string file_digest(const std::string& file);

// The tree FILE (in directory `dir_fd`: a read-only view of its directory, so that no read
// changes it, not even an access time) unpacks to, in the caller's STORE/squashfs/<key>/tree
// (`key`: the stored image's digest hex, or what tells a FILE.sqsh apart: device, inode, size,
// change time): unpacked once by unsquashfs into STORE/tmp and renamed into place, so that a
// killed unpack leaves no half tree; FILE is only read. Returns the tree.
std::filesystem::path unpacked_tree(const std::filesystem::path& store, int dir_fd,
                                    const std::string& file, const std::string& key);

// A run's hold on an unpacked tree (a shared flock on STORE/squashfs/<key>, which prune takes
// exclusively before it removes one), for the run to keep till it ends; the tree, unpacked anew
// where prune removed it meanwhile, in `tree`.
UniqueFd hold_unpacked(const std::filesystem::path& store, int dir_fd, const std::string& file,
                       const std::string& key, std::filesystem::path& tree);

// The key of a FILE.sqsh for unpacked_tree: "f<dev>-<ino>-<size>-<ctime ns>".
std::string file_key(const std::string& file);

// squashfuse_ll (Debian's squashfuse, its low-level daemon) serving FILE (in directory `dir`, a read-only view of it) on
// `fuse`, a /dev/fuse mounted already ("/dev/fd/0": its stdin), in the foreground, with no
// environment; its stdout /dev/null, its stderr gpubox's. Returns its pid.
pid_t spawn_squashfuse(int dir, const std::string& file, int fuse);

// Whether the caller can open /dev/fuse read-write; "" where it can, else the one line that
// says why not and the fix.
std::string fuse_problem();

}  // namespace gpubox::image
