#include "rootfs/entry.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "common/sys.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::rootfs {
namespace {

// One overload per op kind and no catch-all, so std::visit fails to compile for a new kind.
struct EntryOf {
    std::optional<Entry> operator()(const Bind& b) const {
        bool dir = false;
        const int err = bind_source_is_dir(b, dir);
        return Entry{.kind = dir ? EntryKind::dir : EntryKind::file,
                     .source = &b.source,
                     .need = b.need,
                     .source_err = err};
    }
    std::optional<Entry> operator()(const BindDev& d) const {
        return Entry{.kind = EntryKind::file, .source = &d.source, .need = d.need, .device = true};
    }
    std::optional<Entry> operator()(const Proc&) const { return Entry{}; }
    std::optional<Entry> operator()(const Sysfs&) const { return Entry{}; }
    std::optional<Entry> operator()(const Tmpfs&) const { return Entry{}; }
    std::optional<Entry> operator()(const Devpts&) const { return Entry{}; }
    std::optional<Entry> operator()(const Symlink& s) const {
        return Entry{.kind = EntryKind::symlink, .mode = 0, .text = s.link_text, .is_op = true};
    }
    std::optional<Entry> operator()(const WriteFile& w) const {
        return Entry{.kind = EntryKind::content, .mode = w.mode, .text = w.content, .is_op = true};
    }
    std::optional<Entry> operator()(const MakeDir& m) const {
        return Entry{.kind = EntryKind::dir, .mode = m.mode, .is_op = true};
    }
    std::optional<Entry> operator()(const MaskPath&) const { return std::nullopt; }
    std::optional<Entry> operator()(const RemountRo&) const { return std::nullopt; }
};

int write_content(int dir, const std::string& name, const Entry& e, bool replace) {
    const int fd = sys::try_open_at(
        dir, name, O_WRONLY | O_CREAT | O_NOFOLLOW | (replace ? O_TRUNC : O_EXCL), e.mode);
    if (fd < 0) return fd;
    UniqueFd f(fd);
    sys::write_all(fd, e.text, name);
    // The layer's file may be there already with another mode; a new one has its mode from
    // openat, since every filler runs with umask 0 (init's, and the monitor's while it fills).
    if (replace) sys::fchmod(fd, e.mode, name);
    return 0;
}

// A fresh filesystem, still detached (or a layer directory that stands in for one), filled
// with the mount points and entries the plan puts in it, by fd and without following any link:
// cheaper than making them through the new root later, and the filesystem appears complete.
// put() returns false where that is not possible (the op is then applied the usual way).
class FreshFs : public EntryTarget {
public:
    explicit FreshFs(int top) : dirs_(top) {}

    bool put(const std::string& rel, const Entry& e) override {
        const auto parts = split_path("/" + rel);
        if (parts.empty()) return false;
        const int dir = dirs_.open(parts, parts.size() - 1);
        return dir >= 0 && write_entry(dir, parts.back(), e, dirs_, false) == 0;
    }

    void seal() { dirs_.seal(); }

private:
    OwnDirs dirs_;
};

}  // namespace

std::optional<Entry> entry_of(const MountOp& op) { return std::visit(EntryOf{}, op); }

int write_entry(int dir, const std::string& name, const Entry& e, OwnDirs& dirs, bool replace) {
    switch (e.kind) {
        case EntryKind::dir: return dirs.make(dir, name, e.mode);
        case EntryKind::file: {
            const int r = sys::try_mknod_file_at(dir, name, 0644);
            return r == -EEXIST ? 0 : r;
        }
        case EntryKind::symlink: {
            const std::string text(e.text);
            int r = sys::try_symlink_at(text, dir, name);
            if (r != -EEXIST || !replace) return r;
            if ((r = sys::try_unlink_at(dir, name)) < 0) return r;
            return sys::try_symlink_at(text, dir, name);
        }
        case EntryKind::content: return write_content(dir, name, e, replace);
    }
    return -EINVAL;
}

const char* entry_call(EntryKind kind) {
    switch (kind) {
        case EntryKind::dir: return "mkdirat";
        case EntryKind::file: return "mknodat";
        case EntryKind::symlink: return "symlinkat";
        case EntryKind::content: return "openat";
    }
    return "?";
}

int OwnDirs::open(const std::vector<std::string>& parts, std::size_t n,
                  const std::vector<mode_t>& modes) {
    int dir = top_;
    std::string key;
    for (std::size_t i = 0; i < n; ++i) {
        key += "/" + parts[i];
        auto it = dirs_.find(key);
        if (it == dirs_.end()) {
            const int r = make(dir, parts[i], i < modes.size() && modes[i] ? modes[i] : 0755);
            if (r < 0) return r;
            const int next = sys::try_open_at(dir, parts[i], O_PATH | O_DIRECTORY | O_NOFOLLOW);
            if (next < 0) return next;
            it = dirs_.emplace(key, UniqueFd(next)).first;
        }
        dir = it->second.get();
    }
    return dir;
}

int OwnDirs::make(int dir, const std::string& name, mode_t mode) {
    if (const int r = sys::try_mkdir_at(dir, name, mode | 0700); r < 0) return r == -EEXIST ? 0 : r;
    if ((mode & 0700) != 0700) pending_.push_back({dir, name, mode});
    return 0;
}

void OwnDirs::seal() {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it)
        sys::fchmod_at(it->dir, it->name, it->mode);
    pending_.clear();
}

// One pass: only a mount inside that filesystem, or over it, can hold one.
std::vector<std::size_t> contents_of(const MountPlan& plan, std::size_t i) {
    const std::string& fs = target_of(plan.ops[i]);
    std::vector<const std::string*> mounts;
    std::vector<std::size_t> out;
    for (std::size_t j = i + 1; j < plan.ops.size(); ++j) {
        const std::string& t = target_of(plan.ops[j]);
        const bool held = std::any_of(mounts.begin(), mounts.end(), [&](const std::string* m) {
            return *m != t && is_within(t, *m);
        });
        if (t != fs && is_within(t, fs) && !held) out.push_back(j);
        if (!creates_entry(plan.ops[j]) && (is_within(t, fs) || is_within(fs, t)))
            mounts.push_back(&t);
    }
    return out;
}

void fill_fresh_fs(const MountPlan& plan, std::size_t i, int top, std::vector<bool>& done) {
    const std::size_t skip = target_of(plan.ops[i]).size() + 1;
    FreshFs fs(top);
    for (std::size_t j : contents_of(plan, i)) {
        if (done[j]) continue;
        // A bind whose source cannot be looked at gets no mount point: it reports that itself.
        const std::optional<Entry> e = entry_of(plan.ops[j]);
        if (e && !e->source_err)
            done[j] = fs.put(target_of(plan.ops[j]).substr(skip), *e) && e->is_op;
    }
    fs.seal();
}

int bind_source_is_dir(const Bind& b, bool& dir) {
    if (b.kind != SourceKind::unknown) {
        dir = b.kind == SourceKind::dir;
        return 0;
    }
    struct stat st {};
    if (const int r = sys::try_stat(b.source, st); r < 0) return -r;
    dir = S_ISDIR(st.st_mode);
    return 0;
}

}  // namespace gpubox::rootfs
