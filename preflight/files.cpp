#include "preflight/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "common/unique_fd.hpp"
#include "gpu/inventory.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::preflight {

std::optional<std::string> read_in(int root, const std::string& path, std::size_t limit) {
    const int fd = rootfs::try_open_in_root(root, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    UniqueFd f(fd);
    std::string out(limit, '\0');
    std::size_t got = 0;
    for (ssize_t n; got < limit && (n = ::read(fd, out.data() + got, limit - got)) > 0;)
        got += static_cast<std::size_t>(n);
    out.resize(got);
    return out;
}

std::vector<std::string> list_in(int root, const std::string& path) {
    return gpu::list_dir(root, path);
}

std::string link_in(int root, const std::string& path) {
    const auto slash = path.rfind('/');
    const std::string parent =
        slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
    const int fd = rootfs::try_open_in_root(root, parent, O_PATH | O_DIRECTORY);
    if (fd < 0) return "";
    UniqueFd dir(fd);
    char buf[4096];
    const ssize_t n = ::readlinkat(fd, path.substr(slash + 1).c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

}  // namespace gpubox::preflight
