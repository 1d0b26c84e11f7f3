#pragma once
// The image store's directory: a state directory of the caller's (common/trusted_path.hpp: the
// caller's own, on a way from "/" that only root and the caller can change), held by fd. What
// the store's path names can then only change by root's or the caller's hand, so gpubox and its
// helpers (skopeo, gpubox-unpack) may go by its real path while the fd is held.
#include <filesystem>
#include <optional>

#include "common/unique_fd.hpp"

namespace gpubox::image {

struct StoreDir {
    UniqueFd fd;                 // the store, O_PATH, held while it is used
    std::filesystem::path path;  // its real path ("/proc/self/fd/N" resolved): no link on it
};

// Opens STORE as above; with `create`, missing directories are made on the way (mode 0700, as
// the XDG spec asks). Nullopt where it does not exist and `create` is false. Throws PlanError
// naming the directory, what is wrong and the fix.
std::optional<StoreDir> open_store(const std::filesystem::path& store, bool create);

}  // namespace gpubox::image
