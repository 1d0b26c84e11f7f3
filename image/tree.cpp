#include "image/tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/entry_plan.hpp"
#include "image/store.hpp"

namespace gpubox::image {
namespace {

std::vector<std::string> entries_of(int dirfd, const std::string& what) {
    const int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) sys::fail(cat("openat(", quote(what), ", O_DIRECTORY)"), errno);
    DIR* d = ::fdopendir(fd);
    if (!d) {
        ::close(fd);
        sys::fail(cat("fdopendir(", quote(what), ")"), errno);
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
}

// A directory of DIRFD, opened without following a link, made writable and searchable for us
// first (chmod through /proc/self/fd: fchmod refuses an O_PATH fd, and a directory of mode 0
// cannot be opened any other way).
UniqueFd open_dir_writable(int dirfd, const std::string& name) {
    UniqueFd p = sys::open_at(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    const struct stat st = sys::fstat(p.get(), name);
    if ((st.st_mode & 0700) != 0700) {
        const std::string proc = cat("/proc/self/fd/", p.get());
        if (::chmod(proc.c_str(), (st.st_mode & 07777) | 0700) != 0)
            sys::fail(cat("chmod(", quote(name), ")"), errno);
    }
    return sys::open_at(p.get(), ".", O_RDONLY | O_DIRECTORY);
}

}  // namespace

void remove_at(int dirfd, const std::string& name) {
    struct stat st {};
    if (!sys::lstat_at(dirfd, name, st)) return;
    if (S_ISDIR(st.st_mode)) {
        UniqueFd d = open_dir_writable(dirfd, name);
        for (const std::string& child : entries_of(d.get(), name)) remove_at(d.get(), child);
        if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
            sys::fail(cat("unlinkat(", quote(name), ", AT_REMOVEDIR)"), errno);
        return;
    }
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT)
        sys::fail(cat("unlinkat(", quote(name), ")"), errno);
}

void remove_lower_entries(int dirfd, const std::string& rel, const std::set<std::string>& added) {
    for (const std::string& child : entries_of(dirfd, rel)) {
        const std::string path = rel.empty() ? child : rel + "/" + child;
        if (!keeps_under_opaque(added, path)) {
            remove_at(dirfd, child);
            continue;
        }
        struct stat st {};
        if (sys::lstat_at(dirfd, child, st) && S_ISDIR(st.st_mode)) {
            UniqueFd d = open_dir_writable(dirfd, child);
            remove_lower_entries(d.get(), path, added);
        }
    }
}

void remove_tree(const std::filesystem::path& path) {
    const std::filesystem::path parent = path.parent_path().empty() ? "." : path.parent_path();
    UniqueFd p = sys::open_at(AT_FDCWD, parent.string(), O_PATH | O_DIRECTORY);
    remove_at(p.get(), path.filename().string());
}

}  // namespace gpubox::image
