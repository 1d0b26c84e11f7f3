#include "rootfs/resolve.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>

#include <cerrno>
#include <deque>
#include <vector>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::rootfs {
namespace {

std::string relative(const std::string& path) {
    std::string rel = path;
    while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
    return rel.empty() ? "." : rel;
}

// One resolution. `stack_` holds the directories from the root to the current one, one per
// component of out_.parts that exists; past a missing component (canonical mode only) the parts
// run ahead of it.
class Walk {
public:
    Walk(int root, ResolveMode mode, int flags, const ResolveHooks& hooks)
        : root_(root), mode_(mode), flags_(flags), hooks_(hooks) {}

    Resolved run(const std::string& path) {
        for (auto& c : split_path("/" + path)) todo_.push_back(std::move(c));
        const int top = sys::try_open_at(root_, ".", O_PATH | O_DIRECTORY);
        if (top < 0) return end(top);
        stack_.emplace_back(top);
        while (!todo_.empty()) {
            std::string c = std::move(todo_.front());
            todo_.pop_front();
            if (c == "..") {
                up();
                continue;
            }
            if (const int r = next(c, todo_.empty()); r != 0) return end(r);
        }
        return finish();
    }

private:
    static constexpr int kDone = 1;  // next(): out_.fd is set

    int cur() const { return stack_.back().get(); }
    bool missing() const { return stack_.size() <= out_.parts.size(); }

    void up() {  // ".." at the root stays there, as RESOLVE_IN_ROOT does
        if (out_.parts.empty()) return;
        if (!missing()) stack_.pop_back();
        out_.parts.pop_back();
        out_.modes.pop_back();
    }

    void lexical(const std::string& c) {
        out_.parts.push_back(c);
        out_.modes.push_back(0);
    }

    bool stop_at(const std::string& c) {
        if (mode_ != ResolveMode::canonical || !hooks_.stop) return false;
        lexical(c);
        if (hooks_.stop(out_.parts)) return out_.stopped = true;
        up();
        return false;
    }

    // 0 to go on, kDone, or -errno.
    int next(const std::string& c, bool last) {
        if (stop_at(c)) return kDone;
        if (missing()) {
            lexical(c);
            return 0;
        }
        struct stat st {};
        int err = sys::try_lstat_at(cur(), c, st);
        if (err == -ENOENT) {
            if (mode_ == ResolveMode::canonical) {
                lexical(c);
                return 0;
            }
            if (mode_ == ResolveMode::follow && !(last && (flags_ & O_CREAT))) return err;
            if (mode_ == ResolveMode::follow) return open_last(c, flags_, 0644);
            hooks_.make(cur(), c, last);
            err = sys::try_lstat_at(cur(), c, st);
        }
        if (err < 0) return err;
        if (S_ISLNK(st.st_mode) && (!last || !(flags_ & O_NOFOLLOW))) return follow_link(c);
        if (last && mode_ != ResolveMode::canonical) return open_last(c, flags_ & ~O_CREAT, 0);
        if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
        const int fd = sys::try_open_at(cur(), c, O_PATH | O_DIRECTORY | O_NOFOLLOW);
        if (fd < 0) return fd;
        stack_.emplace_back(fd);
        out_.parts.push_back(c);
        out_.modes.push_back(st.st_mode & 07777);
        return 0;
    }

    int open_last(const std::string& c, int flags, mode_t mode) {
        out_.fd = sys::try_open_at(cur(), c, flags | O_NOFOLLOW, mode);
        return out_.fd < 0 ? out_.fd : kDone;
    }

    int follow_link(const std::string& c) {
        if (++hops_ > kMaxSymlinkHops) return -ELOOP;
        std::string text;
        if (const int err = sys::try_read_link_at(cur(), c, text); err < 0) return err;
        const auto parts = split_path("/" + text);
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo_.push_front(*it);
        if (!text.empty() && text.front() == '/') {
            stack_.resize(1);
            out_.parts.clear();
            out_.modes.clear();
        }
        return 0;
    }

    Resolved end(int r) {
        if (r < 0) out_.fd = r;
        return std::move(out_);
    }

    // The path ended on a directory (the root, a "..", or every component in canonical mode).
    Resolved finish() {
        if (mode_ == ResolveMode::canonical)
            out_.fd = missing() ? -ENOENT : stack_.back().release();
        else out_.fd = sys::try_open_at(cur(), ".", flags_ & ~O_CREAT);
        return std::move(out_);
    }

    int root_;
    ResolveMode mode_;
    int flags_;
    const ResolveHooks& hooks_;
    std::deque<std::string> todo_;
    std::vector<UniqueFd> stack_;
    Resolved out_;
    int hops_ = 0;
};

}  // namespace

Resolved resolve_in_root(int root, const std::string& path, ResolveMode mode, int flags,
                         const ResolveHooks& hooks) {
    return Walk(root, mode, flags, hooks).run(path);
}

int walk_in_root(int root, const std::string& path, int flags) {
    return resolve_in_root(root, path, ResolveMode::follow, flags).fd;
}

int try_open_in_root(int root, const std::string& path, int flags) {
    int fd =
        sys::try_openat2(root, relative(path), static_cast<std::uint64_t>(flags),
                         RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, (flags & O_CREAT) ? 0644 : 0);
    // Refused (an old kernel, an outer seccomp filter), or still racing mounts after the
    // retries: the walk has the same semantics, one component at a time.
    if (fd == -ENOSYS || fd == -EPERM || fd == -EINVAL || fd == -EAGAIN)
        return walk_in_root(root, path, flags);
    return fd;
}

int try_open_beneath(int dir, const std::string& rel, int flags, std::uint64_t resolve) {
    return sys::try_openat2(
        dir, rel, static_cast<std::uint64_t>(flags),
        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | resolve);
}

std::optional<MappedFile> map_regular_in_root(int root, const std::string& path,
                                              std::size_t limit) {
    // O_NONBLOCK: a FIFO must not block the open.
    const int fd = try_open_in_root(root, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    return map_regular(UniqueFd(fd), limit);
}

UniqueFd open_in_root(int root, const std::string& path, int flags) {
    int fd = try_open_in_root(root, path, flags);
    if (fd < 0) sys::fail(cat("openat2(root, ", quote(path), ", RESOLVE_IN_ROOT)"), -fd);
    return UniqueFd(fd);
}

}  // namespace gpubox::rootfs
