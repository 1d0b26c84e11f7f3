#pragma once
// The image store's directory is the caller's own, and so is the way to it. gpubox reaches it
// from "/" one component at a time, each opened O_PATH|O_NOFOLLOW|O_DIRECTORY and checked
// after it was opened (a symlink is read and its target walked the same way), so no directory
// that another user could change lies on the way: not the store, which only the caller may
// own and write, and not one above it, which only root or the caller may own and whose
// entries no other user may rename (written only by them, or sticky as /tmp is). What the
// store's path names can then only change by root's or the caller's hand, so gpubox and its
// helpers (skopeo, gpubox-unpack) may go by that path while the fd is held.
#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::image {

struct StoreDir {
    UniqueFd fd;                 // the store, O_PATH, held while it is used
    std::filesystem::path path;  // its real path ("/proc/self/fd/N" resolved): no link on it
};

// Opens STORE (absolute) as above; with `create`, missing directories are made on the way
// (mode 0700, as the XDG spec asks). Nullopt where it does not exist and `create` is false.
// Throws PlanError naming the directory, what is wrong and the fix.
std::optional<StoreDir> open_store(const std::filesystem::path& store, bool create);

// Pure: what makes directory `st` unsafe on the way to the store (`is_store`: the store
// itself), or "" where nothing does. `uid`, `gid`: the caller's. Group write is harmless only
// in the caller's own group (gid == uid, as USERGROUPS_ENAB makes them).
std::string store_dir_problem(const struct stat& st, uid_t uid, gid_t gid, bool is_store);

}  // namespace gpubox::image
