#pragma once
// The image store's directory: a state directory of the caller's (common/trusted_path.hpp: the
// caller's own, on a way from "/" that only root and the caller can change), held by fd. What
// the store's path names can then only change by root's or the caller's hand, so gpubox and its
// helpers (skopeo, gpubox-unpack) may go by its real path while the fd is held.
//
// Site stores (GPUBOX_IMAGES_RO) are another user's (an admin's), which the caller only reads:
// checked as trusted_path::open_shared_dir does (only root and their owner can change them),
// and read through a read-only mount of their own, so that not even an access time changes
// there. A name is looked up in the user's store first, then in each site store in order.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.hpp"
#include "image/store.hpp"

namespace gpubox::image {

struct StoreDir {
    UniqueFd fd;                 // the store, O_PATH, held while it is used
    std::filesystem::path path;  // its real path ("/proc/self/fd/N" resolved): no link on it
};

// Opens STORE as above; with `create`, missing directories are made on the way (mode 0700, as
// the XDG spec asks). Nullopt where it does not exist and `create` is false. Throws PlanError
// naming the directory, what is wrong and the fix.
std::optional<StoreDir> open_store(const std::filesystem::path& store, bool create);

struct SiteStore {
    UniqueFd view;  // a read-only mount of it (or, without a user namespace, the directory)
    StoreView where;
};

// Every store a name is looked up in, the user's first.
struct Stores {
    std::optional<StoreDir> user;
    std::vector<SiteStore> sites;
    std::optional<Stored> find(std::string_view name) const;
    std::vector<Stored> list() const;  // the user's, then each site's, each sorted by name
    const SiteStore* site_of(std::string_view name) const;  // the first site store naming it
};

// The user's store (where store_root(env) names one that exists) and the site stores of
// GPUBOX_IMAGES_RO that exist. Throws PlanError for a store that cannot be trusted.
Stores open_stores(const std::map<std::string, std::string>& env);

}  // namespace gpubox::image
