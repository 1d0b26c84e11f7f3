#include "image/store_dir.hpp"

#include <sys/stat.h>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"
#include "rootfs/view.hpp"

namespace gpubox::image {

std::optional<StoreDir> open_store(const std::filesystem::path& store, bool create) {
    using trusted_path::Missing;
    UniqueFd fd = trusted_path::open_state_dir(
        store.string(), create ? Missing::create : Missing::absent_ok, "image store",
        "set GPUBOX_IMAGES to a directory of your own that only you can write, below directories "
        "only you and root can change (the default: ~/.local/share/gpubox/images)");
    if (!fd.valid()) return std::nullopt;
    std::filesystem::path real = sys::read_fd_link(fd.get());
    return StoreDir{std::move(fd), std::move(real)};
}

namespace {

std::optional<SiteStore> open_site_store(const std::filesystem::path& root) {
    const UniqueFd dir = trusted_path::open_shared_dir(
        root.string(), "site image store",
        "a site store (GPUBOX_IMAGES_RO) must be changeable by root and its owner alone: ask "
        "its admin, or leave it out of GPUBOX_IMAGES_RO");
    if (!dir.valid()) return std::nullopt;
    const std::filesystem::path real = sys::read_fd_link(dir.get());
    UniqueFd view = rootfs::open_read_only_view(real.string(), "site image store");
    const struct stat a = sys::fstat(dir.get(), real.string());
    const struct stat b = sys::fstat(view.get(), real.string());
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        sys::fail(cat("open(", quote(real.string()), "): the site store was replaced meanwhile"),
                  ESTALE);
    const std::filesystem::path read = cat("/proc/self/fd/", view.get());
    return SiteStore{std::move(view), StoreView{read, real, true}};
}

}  // namespace

std::optional<Stored> Stores::find(std::string_view name) const {
    if (user)
        if (auto s = image::find(user->path, name)) return s;
    for (const SiteStore& site : sites)
        if (auto s = image::find(site.where, name)) return s;
    return std::nullopt;
}

std::vector<Stored> Stores::list() const {
    std::vector<Stored> out = user ? image::list(user->path) : std::vector<Stored>{};
    for (const SiteStore& site : sites)
        for (Stored& s : image::list(site.where)) out.push_back(std::move(s));
    return out;
}

const SiteStore* Stores::site_of(std::string_view name) const {
    for (const SiteStore& site : sites)
        if (image::find(site.where, name)) return &site;
    return nullptr;
}

Stores open_stores(const std::map<std::string, std::string>& env) {
    Stores out;
    try {
        out.user = open_store(store_root(env), false);
    } catch (const UsageError&) {
        // neither GPUBOX_IMAGES, XDG_DATA_HOME nor HOME: no store of the user's to look in
    }
    for (const std::filesystem::path& root : site_roots(env))
        if (auto site = open_site_store(root)) out.sites.push_back(std::move(*site));
    return out;
}

}  // namespace gpubox::image
