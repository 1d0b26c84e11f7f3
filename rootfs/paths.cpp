#include "rootfs/paths.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::rootfs {

std::string normalize_container_path(const std::string& path, const std::string& what) {
    if (path.empty()) throw UsageError(cat(what, ": empty path"));
    if (path.find('\0') != std::string::npos) throw UsageError(cat(what, ": path contains NUL"));
    if (path.front() != '/') throw UsageError(cat(what, ": ", quote(path), " is not absolute"));
    if (path.size() > 4095) throw UsageError(cat(what, ": path too long"));
    std::string out;
    for (const std::string& c : split_path(path)) {
        if (c == "..") throw UsageError(cat(what, ": ", quote(path), " contains \"..\""));
        out += "/" + c;
    }
    return out.empty() ? "/" : out;
}

std::vector<std::string> split_path(const std::string& p) {
    std::vector<std::string> parts;
    std::size_t i = 0;
    while (i < p.size()) {
        std::size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        std::string c = p.substr(i, j - i);
        if (!c.empty() && c != ".") parts.push_back(c);
        i = j + 1;
    }
    return parts;
}

bool is_within(const std::string& path, const std::string& dir) {
    if (dir == "/") return true;
    return path == dir ||
           (starts_with(path, dir) && path.size() > dir.size() && path[dir.size()] == '/');
}

bool is_plain_name(const std::string& name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

bool is_plain_path(const std::string& path) {
    if (path.size() < 2 || path.front() != '/') return false;
    for (std::size_t i = 1; i <= path.size();) {
        const std::size_t j = std::min(path.find('/', i), path.size());
        if (!is_plain_name(path.substr(i, j - i))) return false;
        i = j + 1;
    }
    return true;
}

std::string parent_of(const std::string& p) {
    auto pos = p.rfind('/');
    return pos == 0 || pos == std::string::npos ? "/" : p.substr(0, pos);
}

std::string base_name(const std::string& p) {
    auto pos = p.rfind('/');
    return pos == std::string::npos ? p : p.substr(pos + 1);
}

}  // namespace gpubox::rootfs
