#include "image/store_dir.hpp"

#include "common/sys.hpp"
#include "common/trusted_path.hpp"

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

}  // namespace gpubox::image
