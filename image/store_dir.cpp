#include "image/store_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::image {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's path walk
constexpr const char* kStoreHint =
    "set GPUBOX_IMAGES to a directory of your own that only you can write, below directories "
    "only you and root can change (the default: ~/.local/share/gpubox/images)";

bool writable_by_others(const struct stat& st, uid_t uid, gid_t gid) {
    if (st.st_mode & S_IWOTH) return true;
    return (st.st_mode & S_IWGRP) && !(st.st_gid == gid && gid == uid);
}

std::string mode_text(const struct stat& st) { return cat("mode 0", std::oct, st.st_mode & 07777); }

// The components of `path` still to walk, the next one last.
void push_components(const std::string& path, std::vector<std::string>& todo) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i <= path.size();) {
        std::size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        const std::string part = path.substr(i, j - i);
        if (!part.empty() && part != ".") parts.push_back(part);
        i = j + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

[[noreturn]] void refuse(const fs::path& store, const std::string& dir, const std::string& problem,
                         bool is_store) {
    const std::string where = is_store
                                  ? cat("image store ", quote(dir))
                                  : cat("image store ", quote(store.string()), ": ", quote(dir));
    std::string hint = kStoreHint;  // the fix
    if (is_store && problem.find("writable") != std::string::npos)
        hint = cat("chmod go-w ", quote(dir), ", or ", hint);
    throw PlanError(cat(where, " is ", problem), hint);
}

// One step of the walk: NAME in `dir` (checked), opened without following it; a symlink is
// read, and its text joins the components still to walk, where root or the caller owns it (a
// sticky directory takes anyone's new entries: the kernel's protected_symlinks rule). False
// where NAME is missing.
bool step(const fs::path& store, UniqueFd& dir, std::string& at, const std::string& name,
          std::vector<std::string>& todo, int& links, bool create) {
    int fd = sys::try_open_at(dir.get(), name, O_PATH | O_NOFOLLOW | O_DIRECTORY);
    if (fd == -ENOENT && create) {
        const int made = sys::try_mkdir_at(dir.get(), name, 0700);
        if (made < 0 && made != -EEXIST)
            sys::fail(cat("mkdir(", quote(at + "/" + name), ")"), -made);
        fd = sys::try_open_at(dir.get(), name, O_PATH | O_NOFOLLOW | O_DIRECTORY);
    }
    if (fd == -ENOENT) return false;
    std::string text;
    if ((fd == -ENOTDIR || fd == -ELOOP) && sys::try_read_link_at(dir.get(), name, text) == 0) {
        struct stat st {};
        if (sys::try_lstat_at(dir.get(), name, st) == 0 && st.st_uid != 0 &&
            st.st_uid != ::getuid())
            refuse(store, at + "/" + name,
                   cat("a symlink owned by uid ", st.st_uid, ", neither root nor you (uid ",
                       ::getuid(), ")"),
                   false);
        if (++links > kMaxLinks) sys::fail(cat("open(", quote(at + "/" + name), ")"), ELOOP);
        if (!text.empty() && text[0] == '/')
            dir = sys::open_at(AT_FDCWD, "/", O_PATH | O_DIRECTORY), at = "";
        push_components(text, todo);
        return true;
    }
    if (fd < 0)
        sys::fail(cat("open(", quote(at + "/" + name), ", O_PATH|O_NOFOLLOW|O_DIRECTORY)"), -fd);
    dir.reset(fd);
    at = name == ".." ? at.substr(0, at.rfind('/')) : at + "/" + name;
    return true;
}

}  // namespace

std::string store_dir_problem(const struct stat& st, uid_t uid, gid_t gid, bool is_store) {
    if (!S_ISDIR(st.st_mode)) return "not a directory";
    if (is_store) {
        if (st.st_uid != uid)
            return cat("owned by uid ", st.st_uid, ", not by you (uid ", uid, ")");
        if (writable_by_others(st, uid, gid))
            return cat("writable by others (", mode_text(st), ")");
        return "";
    }
    if (st.st_uid != 0 && st.st_uid != uid)
        return cat("owned by uid ", st.st_uid, ", neither root nor you (uid ", uid,
                   "), who could replace what lies below it");
    if (writable_by_others(st, uid, gid) && !(st.st_mode & S_ISVTX))
        return cat("writable by others and not sticky (", mode_text(st),
                   "): another user could replace what lies below it");
    return "";
}

std::optional<StoreDir> open_store(const fs::path& store, bool create) {
    const fs::path abs = store.is_absolute() ? store : fs::current_path() / store;
    std::vector<std::string> todo;
    push_components(abs.string(), todo);
    UniqueFd dir = sys::open_at(AT_FDCWD, "/", O_PATH | O_DIRECTORY);
    std::string at;
    int links = 0;
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    for (;;) {
        const bool is_store = todo.empty();
        const std::string problem =
            store_dir_problem(sys::fstat(dir.get(), at.empty() ? "/" : at), uid, gid, is_store);
        if (!problem.empty()) refuse(store, at.empty() ? "/" : at, problem, is_store);
        if (is_store) break;
        const std::string name = todo.back();
        todo.pop_back();
        if (!step(store, dir, at, name, todo, links, create)) return std::nullopt;
    }
    fs::path real = sys::read_fd_link(dir.get());
    return StoreDir{std::move(dir), std::move(real)};
}

}  // namespace gpubox::image
