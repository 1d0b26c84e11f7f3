#include "common/trusted_path.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <vector>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::trusted_path {
namespace {

// Symlinks followed in one walk before it fails with ELOOP, as the kernel's MAXSYMLINKS.
constexpr int kMaxLinks = 40;

std::string mode_text(mode_t mode) { return cat("mode 0", std::oct, mode & 07777); }

std::string writable_by(mode_t mode) { return (mode & S_IWOTH) ? "others" : "its group"; }

// Written by someone other than the caller: others, or a group that is not the caller's own
// user-private one (gid == the caller's gid == the caller's uid).
bool writable_by_another(const struct stat& st, uid_t euid, gid_t egid) {
    if (st.st_mode & S_IWOTH) return true;
    return (st.st_mode & S_IWGRP) && !(st.st_gid == egid && egid == euid);
}

// The components of `text` in order ("" and "." dropped; ".." kept: it is resolved by fd).
std::deque<std::string> components(const std::string& text) {
    std::deque<std::string> out;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t slash = std::min(text.find('/', at), text.size());
        std::string part = text.substr(at, slash - at);
        if (!part.empty() && part != ".") out.push_back(std::move(part));
        at = slash + 1;
    }
    return out;
}

// The walk's state: the directories opened so far from "/" (each checked) and their names.
class Walk {
public:
    // `owner`: whose directory it is (the caller's, for a state directory); its user-private
    // group counts as its own.
    Walk(const std::string& path, const std::string& what, const std::string& hint, uid_t owner,
         gid_t group)
        : path_(path), what_(what), hint_(hint), euid_(owner), egid_(group) {
        chain_.push_back(sys::open_at(AT_FDCWD, "/", O_PATH | O_DIRECTORY));
        check_dir(chain_.back().get(), "/", Role::on_the_way);
        todo_ = components(path);
    }

    // The state directory's fd; an invalid one where Missing::absent_ok met a missing name.
    UniqueFd run(Missing missing) {
        while (!todo_.empty()) {
            const std::string name = todo_.front();
            todo_.pop_front();
            if (name == "..") {
                if (chain_.size() > 1) chain_.pop_back(), names_.pop_back();
                continue;
            }
            if (!step(name, missing)) return UniqueFd();
        }
        check_dir(chain_.back().get(), shown(), Role::own);
        return std::move(chain_.back());
    }

private:
    std::string shown(const std::string& next = {}) const {
        std::string s;
        for (const std::string& n : names_) s += "/" + n;
        if (!next.empty()) s += "/" + next;
        return s.empty() ? "/" : s;
    }

    [[noreturn]] void refuse(const std::string& at, const std::string& problem,
                             const std::string& hint) const {
        if (at == path_) throw PlanError(cat(what_, " ", quote(path_), " ", problem), hint);
        throw PlanError(cat(what_, " ", quote(path_), ": ", quote(at), " ", problem), hint);
    }

    void check_dir(int fd, const std::string& at, Role role) const {
        const struct stat st = sys::fstat(fd, at);
        const std::string problem = dir_problem(st, euid_, egid_, role);
        if (problem.empty()) return;
        // The state directory's own mode is the caller's to fix.
        const bool chmod = role == Role::own && S_ISDIR(st.st_mode) && st.st_uid == euid_;
        refuse(at, problem, chmod ? cat("chmod go-w ", quote(at), ", or ", hint_) : hint_);
    }

    // NAME's fd in the last directory opened, not followed; -ENOENT where it is missing and
    // `missing` is absent_ok.
    int open_step(const std::string& name, Missing missing) const {
        const int dir = chain_.back().get();
        int fd = sys::try_open_at(dir, name, O_PATH | O_NOFOLLOW);
        if (fd == -ENOENT && missing == Missing::absent_ok) return fd;
        if (fd == -ENOENT && missing == Missing::create) {
            const int made = sys::try_mkdir_at(dir, name, 0700);
            if (made < 0 && made != -EEXIST)
                sys::fail(Syscall::mkdirat, -made, cat("mkdirat(", quote(shown(name)), ", 0700)"),
                          shown(name));
            fd = sys::try_open_at(dir, name, O_PATH | O_NOFOLLOW);
        }
        if (fd < 0)
            sys::fail(Syscall::open, -fd, cat("open(", quote(shown(name)), ", O_PATH|O_NOFOLLOW)"),
                      shown(name));
        return fd;
    }

    // False where NAME is missing (Missing::absent_ok).
    bool step(const std::string& name, Missing missing) {
        const int opened = open_step(name, missing);
        if (opened == -ENOENT) return false;
        UniqueFd fd(opened);
        const std::string at = shown(name);
        const struct stat st = sys::fstat(fd.get(), at);
        if (S_ISLNK(st.st_mode)) {
            follow(fd.get(), at, st);
            return true;
        }
        // The path's last directory is checked as the state directory itself.
        check_dir(fd.get(), at, todo_.empty() ? Role::own : Role::on_the_way);
        chain_.push_back(std::move(fd));
        names_.push_back(name);
        return true;
    }

    void follow(int link, const std::string& at, const struct stat& st) {
        const std::string problem = link_problem(st, euid_);
        if (!problem.empty()) refuse(at, problem, hint_);
        if (++links_ > kMaxLinks)
            sys::fail(Syscall::open, ELOOP, cat("open(", quote(path_), ")"), path_);
        const std::string text = sys::read_link_at(link, "");
        std::deque<std::string> parts = components(text);
        todo_.insert(todo_.begin(), parts.begin(), parts.end());
        if (!text.empty() && text[0] == '/') chain_.resize(1), names_.clear();
    }

    std::string path_, what_, hint_;
    uid_t euid_;
    gid_t egid_;
    std::vector<UniqueFd> chain_;
    std::vector<std::string> names_;
    std::deque<std::string> todo_;
    int links_ = 0;
};

}  // namespace

std::string dir_problem(const struct stat& st, uid_t euid, gid_t egid, Role role) {
    const mode_t mode = st.st_mode;
    if (!S_ISDIR(mode)) return "is not a directory";
    const bool writable = writable_by_another(st, euid, egid);
    if (role == Role::own) {
        if (st.st_uid != euid)
            return cat("belongs to uid ", st.st_uid, ", not to you (uid ", euid, ")");
        if (writable) return cat("is writable by ", writable_by(mode), " (", mode_text(mode), ")");
        return "";
    }
    if (st.st_uid != 0 && st.st_uid != euid) return cat("belongs to uid ", st.st_uid);
    if (writable && !(mode & S_ISVTX))
        return cat("is writable by ", writable_by(mode), " (", mode_text(mode), ") and not sticky");
    return "";
}

std::string link_problem(const struct stat& st, uid_t euid) {
    if (st.st_uid != 0 && st.st_uid != euid) return cat("is a symlink of uid ", st.st_uid);
    return "";
}

std::string regular_file_problem(mode_t mode) {
    const char* type = S_ISREG(mode)    ? nullptr
                       : S_ISDIR(mode)  ? "a directory"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISCHR(mode)  ? "a character device"
                       : S_ISBLK(mode)  ? "a block device"
                       : S_ISSOCK(mode) ? "a socket"
                       : S_ISLNK(mode)  ? "a symlink"
                                        : "of an unknown type";
    return type ? cat("not a regular file (", type, ")") : "";
}

UniqueFd open_state_dir(const std::string& path, Missing missing, const std::string& what,
                        const std::string& hint) {
    std::string abs = std::filesystem::absolute(path).string();
    while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
    try {
        Walk walk(abs, what, hint, ::geteuid(), ::getegid());
        return walk.run(missing);
    } catch (const SysError&) {
        std::throw_with_nested(PlanError(cat(what, " ", quote(abs)), hint));
    }
}

UniqueFd open_shared_dir(const std::string& path, const std::string& what,
                         const std::string& hint) {
    std::string abs = std::filesystem::absolute(path).string();
    while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
    struct stat st {};
    if (::stat(abs.c_str(), &st) != 0) {
        if (errno == ENOENT) return UniqueFd();
        throw PlanError(
            cat(what, " ", quote(abs), ": stat(", quote(abs), "): ", std::strerror(errno)), hint);
    }
    // Whose it is decides what else may be trusted on the way; the walk checks it again, by fd.
    try {
        Walk walk(abs, what, hint, st.st_uid, static_cast<gid_t>(st.st_uid));
        return walk.run(Missing::absent_ok);
    } catch (const SysError&) {
        std::throw_with_nested(PlanError(cat(what, " ", quote(abs)), hint));
    }
}

UniqueFd open_output_file(const std::string& path, mode_t mode) {
    constexpr int kCreate = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    for (int attempt = 0;; ++attempt) {
        const int fd = sys::try_open_at(AT_FDCWD, path, kCreate, mode);
        if (fd >= 0) return UniqueFd(fd);
        if (fd != -EEXIST || attempt == 8)
            sys::fail(Syscall::open, -fd, cat("open(", quote(path), ", O_WRONLY|O_CREAT|O_EXCL)"),
                      path);
        const int existing = sys::try_open_at(AT_FDCWD, path, O_PATH | O_NOFOLLOW);
        if (existing == -ENOENT) continue;  // removed since: make it
        if (existing < 0)
            sys::fail(Syscall::open, -existing, cat("open(", quote(path), ", O_PATH|O_NOFOLLOW)"),
                      path);
        const UniqueFd p(existing);
        const struct stat st = sys::fstat(p.get(), path);
        if (S_ISLNK(st.st_mode))  // what open(O_NOFOLLOW) answers
            sys::fail(Syscall::open, ELOOP, cat("open(", quote(path), ", O_WRONLY|O_NOFOLLOW)"),
                      path);
        if (const std::string problem = regular_file_problem(st.st_mode); !problem.empty())
            throw PlanError(problem);
        // The inode just checked, not the name again; written apart from the open that emptied
        // it (written_apart).
        const int t = sys::try_open_at(AT_FDCWD, cat("/proc/self/fd/", p.get()),
                                       O_WRONLY | O_TRUNC | O_NOCTTY);
        if (t < 0)
            sys::fail(Syscall::open, -t, cat("open(", quote(path), ", O_WRONLY|O_TRUNC)"), path);
        return written_apart(UniqueFd(t), O_WRONLY | O_NOCTTY, path);
    }
}

UniqueFd written_apart(UniqueFd truncated, int flags, const std::string& path) {
    const int again = flags & ~(O_TRUNC | O_CREAT | O_EXCL);
    const int w = sys::try_open_at(AT_FDCWD, cat("/proc/self/fd/", truncated.get()), again);
    if (w < 0)
        sys::fail(Syscall::open, -w, cat("open(", quote(path), ", ", sys::open_flags(again), ")"),
                  path);
    return UniqueFd(w);  // `truncated` closes here, while the file is still empty
}

}  // namespace gpubox::trusted_path
