// The mount executor. Invariants, stated once and kept by every apply_one():
//  - binds are recursive (a file has nothing below it), so a bind never reveals what an
//    over-mount hid on the host;
//  - every mount gets nosuid; all but BindDev get nodev;
//  - read-only is applied with mount_setattr(AT_RECURSIVE), so submounts are read-only too, and
//    mount_setattr only *sets* attributes, so flags the kernel locked stay as they were;
//  - targets are opened under the new root with open_in_root() and mounted by fd (move_mount),
//    never by a path string the kernel would resolve again; a file mount point may instead be
//    named in its directory, opened so, by a last component that move_mount() never follows;
//  - a source is cloned (open_tree) and checked on the clone (char device and st_rdev for
//    BindDev), and the clone is attached to the very dentry the target fd names: what was
//    checked is what gets mounted, and no path is resolved again in between.
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <cerrno>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/entry.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::rootfs {
namespace {

// The new root and the filesystems gpubox mounted in it: the only places where a missing mount
// point may be created. A host bind or a --writable ROOTFS is never written to.
struct Ctx {
    int root;
    std::vector<dev_t> own;
    int stashed = 0;
    // gpubox's one tmpfs (NewRoot::tmpfs). Older kernels clone no part of a detached mount: it
    // is attached before the plan (attach_gpubox_tmpfs), or where that found no place, at the
    // first writable tmpfs op's target, where that op's own directory of it then covers it.
    int tmpfs = -1;
    bool tmpfs_attached = false;
    // A bound ROOTFS: the overlays of its directories that take gpubox's entries (see
    // overlay_missing_dirs), their upper layers in gpubox's tmpfs.
    std::vector<UniqueFd> overlays;
    // Directories of file mount points, by the path the plan spells, held while a run of binds
    // goes into them (a driver's libraries share one). Any other mount may cover one of them:
    // move_onto() empties the cache.
    std::map<std::string, UniqueFd> dirs;
    // Directories of file sources (a driver's libraries, its tools, /dev), likewise: each bind
    // then looks up one name instead of walking the host path. Emptied with `dirs`, as a mount
    // over a directory could cover one of them (a source inside ROOTFS).
    std::map<std::string, UniqueFd> sources;
    EntryTarget* live = nullptr;  // the live root, where the ops that are an entry are made
    void own_mount(int mnt) { own.push_back(sys::fstat(mnt, "new mount").st_dev); }
};

// Directory `dir` from `held`, opened by `open` (an fd or -errno) the first time: fd or -errno.
template <typename Open>
int held_dir(std::map<std::string, UniqueFd>& held, const std::string& dir, Open open) {
    if (auto it = held.find(dir); it != held.end()) return it->second.get();
    const int fd = open();
    return fd < 0 ? fd : held.emplace(dir, UniqueFd(fd)).first->second.get();
}

// A clone of host file `source`, opened from its held directory; where the directory cannot be
// opened, from the path, which then fails with the error to report (or ENOENT for an optional
// source whose directory is missing).
int clone_file_source(Ctx& c, const std::string& source, std::uint64_t attrs) {
    const std::string name = base_name(source);
    if (source.empty() || source.front() != '/' || !is_plain_name(name))
        return sys::try_open_tree_attr(AT_FDCWD, source, false, attrs);
    const int dir = held_dir(c.sources, parent_of(source), [&] {
        return sys::try_open_at(AT_FDCWD, parent_of(source), O_PATH | O_DIRECTORY);
    });
    return sys::try_open_tree_attr(dir < 0 ? AT_FDCWD : dir, dir < 0 ? source : name, false, attrs);
}

void require_owned(const Ctx& c, int dir, const std::string& path) {
    const dev_t dev = sys::fstat(dir, path).st_dev;
    if (std::find(c.own.begin(), c.own.end(), dev) == c.own.end())
        sys::fail(
            cat("create ", quote(path), " (its directory is not on a filesystem gpubox mounted)"),
            EPERM);
}

// A missing entry `name` in `dir`, on one of gpubox's own filesystems: a directory, or the
// empty file a file mount point is.
void make_owned(const Ctx& c, int dir, const std::string& name, bool is_dir) {
    require_owned(c, dir, name);
    if (is_dir) sys::mkdir_at(dir, name, 0755);
    else sys::mknod_file_at(dir, name, 0644);
}

// mkdir -p of a mount point under the root: its links are followed inside the root
// (resolve_in_root's create mode), each missing entry made on a filesystem gpubox mounted.
void make_mount_point(const Ctx& c, const std::string& path, const Entry& e) {
    const bool dir = e.kind == EntryKind::dir;
    // Usually only the last component is missing (a node in gpubox's /dev): make it on its
    // parent without walking from the root. A symlink there takes the full walk below.
    if (int fd = try_open_in_root(c.root, parent_of(path), O_PATH | O_DIRECTORY); fd >= 0) {
        UniqueFd parent(fd);
        struct stat st {};
        if (!sys::lstat_at(fd, base_name(path), st)) return make_owned(c, fd, base_name(path), dir);
        if (!S_ISLNK(st.st_mode)) return;
    }
    ResolveHooks hooks;
    hooks.make = [&](int at, const std::string& name, bool last) {
        make_owned(c, at, name, !last || dir);
    };
    const Resolved r = resolve_in_root(c.root, path, ResolveMode::create, O_PATH, hooks);
    if (r.fd < 0) sys::fail(cat("resolve(", quote(path), ")"), -r.fd);
    UniqueFd made(r.fd);
}

// The mount point for `target`, as an O_PATH fd, made as `e` says if missing. Its kind is left
// to move_mount() to check (see attach).
UniqueFd mount_point(const Ctx& c, const std::string& target, const Entry& e, int flags = O_PATH) {
    int raw = try_open_in_root(c.root, target, flags);
    if (raw == -ENOENT) {
        c.live->put(target, e);  // LiveRoot: make_mount_point()
        raw = try_open_in_root(c.root, target, flags);
    }
    if (raw < 0) sys::fail(cat("openat2(root, ", quote(target), ", RESOLVE_IN_ROOT)"), -raw);
    return UniqueFd(raw);
}

UniqueFd new_fs(const std::string& type,
                const std::vector<std::pair<std::string, std::string>>& opts, unsigned attrs) {
    UniqueFd fs = sys::fsopen(type);
    for (const auto& [k, v] : opts) {
        if (v.empty()) sys::fsconfig_flag(fs.get(), type, k);
        else sys::fsconfig_string(fs.get(), type, k, v);
    }
    sys::fsconfig_create(fs.get(), type);
    return sys::fsmount(fs.get(), type, attrs);
}

// move_mount() refuses a directory over a non-directory and the reverse, with EINVAL: the
// kernel keeps that invariant, and this only names it when it fires.
void explain_kinds(int mnt, const std::string& what, int at, const std::string& target) {
    const bool from_dir = S_ISDIR(sys::fstat(mnt, what).st_mode),
               to_dir = S_ISDIR(sys::fstat(at, target).st_mode);
    if (from_dir != to_dir)
        sys::fail(cat("mount point ", quote(target), " in the new root"),
                  from_dir ? ENOTDIR : EISDIR);
}

// A file mount point that is there and is no symlink, reached from its (cached) directory: one
// lookup instead of a walk from the root, and no fd of its own. Anything else, or a refusal,
// is left to the full resolution, which creates, follows and explains.
bool attach_in_dir(Ctx& c, int mnt, const std::string& target) {
    const std::string name = base_name(target);
    if (!is_plain_name(name)) return false;
    const int dir = held_dir(c.dirs, parent_of(target), [&] {
        return try_open_in_root(c.root, parent_of(target), O_PATH | O_DIRECTORY);
    });
    struct stat st {};
    if (dir < 0 || sys::try_lstat_at(dir, name, st) < 0 || S_ISLNK(st.st_mode) ||
        S_ISDIR(st.st_mode))
        return false;
    return sys::try_move_mount_at(mnt, dir, name) == 0;
}

// Every mount onto a resolved target goes through here: it may cover a held directory.
void move_onto(Ctx& c, int mnt, const std::string& what, int at, const std::string& target) {
    c.dirs.clear();
    c.sources.clear();
    sys::move_mount(mnt, what, at, target);
}

// Mount `mnt` at `target`, whose mount point, where missing, is made as `e` says.
void attach(Ctx& c, const UniqueFd& mnt, const std::string& what, const std::string& target,
            const Entry& e, bool owned) {
    if (e.kind == EntryKind::file && !owned && attach_in_dir(c, mnt.get(), target)) return;
    UniqueFd at = mount_point(c, target, e);
    try {
        move_onto(c, mnt.get(), what, at.get(), target);
    } catch (const SysError& err) {
        if (err.err() == EINVAL) explain_kinds(mnt.get(), what, at.get(), target);
        throw;
    }
    if (owned) c.own_mount(mnt.get());
}

// A bind of `source` (already open) onto `target`, recursive, with `attrs` on every mount.
void bind_fd(Ctx& c, int src, const std::string& source, const std::string& target,
             std::uint64_t attrs, const Entry& e) {
    attach(c, sys::open_tree_clone(src, source, true, attrs), source, target, e, false);
}

void apply_one(const Bind& b, Ctx& c, const Entry& e) {
    // Cloned from the host path, a file by its name in its held directory: the tree's root is
    // what the path named. Nothing can be mounted below a file, so a file the planner knows of
    // is cloned alone (no walk of its mount's submounts).
    const std::uint64_t attrs =
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.read_only ? MOUNT_ATTR_RDONLY : 0);
    const bool file = b.kind == SourceKind::file;
    const int fd = file ? clone_file_source(c, b.source, attrs)
                        : sys::try_open_tree_attr(AT_FDCWD, b.source, true, attrs);
    if (fd == -ENOENT && b.need == Need::optional) {
        log::debug(cat("skipping optional ", quote(b.source), ": not found"));
        return;
    }
    if (fd < 0)
        sys::fail(
            cat("open_tree(", quote(b.source), ", OPEN_TREE_CLONE", file ? ")" : "|AT_RECURSIVE)"),
            -fd);
    UniqueFd tree(fd);
    Entry at = e;  // a source stat() could not look at, which the clone then could: its kind
    if (e.source_err)
        at.kind = S_ISDIR(sys::fstat(fd, b.source).st_mode) ? EntryKind::dir : EntryKind::file;
    attach(c, tree, b.source, b.target, at, false);
}

void apply_one(const BindDev& d, Ctx& c, const Entry& e) {
    // Checked on the cloned tree itself: what is checked is what gets mounted.
    int fd = clone_file_source(c, d.source, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    if (fd == -ENOENT && d.need == Need::optional) return;
    if (fd < 0) sys::fail(cat("open_tree(", quote(d.source), ", OPEN_TREE_CLONE)"), -fd);
    UniqueFd tree(fd);
    struct stat st = sys::fstat(tree.get(), d.source);
    if (!S_ISCHR(st.st_mode) || (d.rdev && st.st_rdev != *d.rdev))
        sys::fail(cat("check ", quote(d.source), ": not the expected character device",
                      d.rdev ? cat(" ", major(*d.rdev), ":", minor(*d.rdev)) : std::string()),
                  ENODEV);
    attach(c, tree, d.source, d.target, e, false);
}

void apply_one(const Proc& p, Ctx& c, const Entry& e) {
    UniqueFd m = new_fs("proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    attach(c, m, "proc", p.target, e, false);
}

void apply_one(const Sysfs& s, Ctx& c, const Entry& e) {
    const unsigned attrs =
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    if (s.fresh) {
        attach(c, new_fs("sysfs", {}, attrs), "sysfs", s.target, e, false);
        return;
    }
    UniqueFd src = sys::open_at(AT_FDCWD, "/sys", O_PATH | O_DIRECTORY);
    bind_fd(c, src.get(), "/sys", s.target, attrs, e);
}

// Not cat(std::oct, m): a stream, whose locale init sets up in init's first use (~0.4 ms).
std::string octal(mode_t m) {
    char buf[12];
    return {buf, std::to_chars(buf, buf + sizeof buf, m, 8).ptr};
}

// A directory of gpubox's tmpfs for writable tmpfs op i, filled, then bound at its target.
void apply_tmpfs_dir(const MountPlan& plan, std::size_t i, Ctx& c, std::vector<bool>& done,
                     const Entry& e) {
    const Tmpfs& t = std::get<Tmpfs>(plan.ops[i]);
    const std::string name = cat("tmpfs", i);
    // Made with its mode (init's umask is 0; init, root of the user namespace that owns the
    // tmpfs, fills it whatever the mode), and opened once: nothing else writes gpubox's tmpfs,
    // so the one fd serves the filling and the clone.
    sys::mkdir_at(c.tmpfs, name, t.mode);
    if (t.mode & (S_ISUID | S_ISGID)) sys::fchmod_at(c.tmpfs, name, t.mode);  // mkdir drops them
    UniqueFd dir = sys::open_at(c.tmpfs, name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    fill_fresh_fs(plan, i, dir.get(), done);
    if (!c.tmpfs_attached) {
        UniqueFd at = mount_point(c, t.target, e);
        move_onto(c, c.tmpfs, "gpubox's tmpfs", at.get(), t.target);
        c.own_mount(c.tmpfs);
        c.tmpfs_attached = true;
    }
    UniqueFd tree = sys::open_tree_clone(
        dir.get(), t.target, false,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (t.noexec ? MOUNT_ATTR_NOEXEC : 0));
    // On gpubox's tmpfs, whose device own_mount() has noted already: no fstat of the clone.
    attach(c, tree, "gpubox's tmpfs", t.target, e, false);
}

// Op i is a tmpfs. Writable: a directory of gpubox's tmpfs. Read-only: mounted, filled while
// detached (marking the entries it made as done), sealed, then attached.
void apply_tmpfs(const MountPlan& plan, std::size_t i, Ctx& c, std::vector<bool>& done,
                 const Entry& e) {
    const Tmpfs& t = std::get<Tmpfs>(plan.ops[i]);
    if (!t.read_only && !t.size) return apply_tmpfs_dir(plan, i, c, done, e);
    std::vector<std::pair<std::string, std::string>> opts{{"mode", octal(t.mode)}};
    if (t.size) opts.emplace_back("size", cat(t.size));
    UniqueFd mnt = new_fs(
        "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (t.noexec ? MOUNT_ATTR_NOEXEC : 0));
    fill_fresh_fs(plan, i, mnt.get(), done);
    if (t.read_only) sys::mount_setattr(mnt.get(), t.target, MOUNT_ATTR_RDONLY, 0, false);
    attach(c, mnt, "tmpfs", t.target, e, true);
}

void apply_one(const Devpts& d, Ctx& c, const Entry& e) {
    UniqueFd m = new_fs("devpts", {{"newinstance", ""}, {"ptmxmode", "0666"}, {"mode", "0620"}},
                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    attach(c, m, "devpts", d.target, e, false);
}

UniqueFd owned_parent(Ctx& c, const std::string& path) {
    UniqueFd parent = mount_point(c, parent_of(path), Entry{}, O_PATH | O_DIRECTORY);
    require_owned(c, parent.get(), path);
    return parent;
}

// A parent directory on one of gpubox's filesystems, made if missing; nullopt where the path
// lies in a read-only ROOTFS (bound, not an overlay).
std::optional<UniqueFd> parent_if_owned(Ctx& c, const std::string& path) {
    try {
        return owned_parent(c, path);
    } catch (const SysError& e) {
        if (e.err() != EPERM) throw;
        return std::nullopt;
    }
}

// The live root as an EntryTarget, for the ops that are an entry (Symlink, WriteFile, MakeDir):
// made in its directory where that is on a filesystem gpubox mounted (made if missing). Where
// the image has an entry there (a bound ROOTFS's overlay; an overlay root's layer shadows it
// instead), a link is replaced by a rename, which copies nothing up, and a file is covered by
// a bind of gpubox's copy. Where the directory is a read-only ROOTFS, the op is skipped with a
// warning: the links and generated files help the image's loaders find the driver, which still
// loads from the image's library directory, and sonames resolve through the ld.so.cache too.
class LiveRoot : public EntryTarget {
public:
    explicit LiveRoot(Ctx& c) : c_(c) {}

    bool put(const std::string& target, const Entry& e) override {
        if (!e.is_op) {
            make_mount_point(c_, target, e);
            return true;
        }
        if (e.kind == EntryKind::content) return put_content(target, e);
        const std::string name = base_name(target);
        if (e.kind == EntryKind::dir) {
            sys::mkdir_at(owned_parent(c_, target).get(), name, e.mode);
            return true;
        }
        std::optional<UniqueFd> parent = parent_if_owned(c_, target);
        if (!parent) return skip(target, e);
        struct stat st {};
        const std::string text(e.text);
        if (!sys::lstat_at(parent->get(), name, st)) {
            sys::symlink_at(text, parent->get(), name);
            return true;
        }
        if (S_ISLNK(st.st_mode) && sys::read_link_at(parent->get(), name) == text) return true;
        sys::symlink_at(text, parent->get(), ".gpubox-" + name);
        sys::rename_at(parent->get(), ".gpubox-" + name, name);
        return true;
    }

private:
    // A read-only ROOTFS: an identical link may already be there.
    bool skip(const std::string& target, const Entry& e) {
        std::string have;
        const std::string name = base_name(target);
        if (int fd = try_open_in_root(c_.root, parent_of(target), O_PATH | O_DIRECTORY); fd >= 0) {
            UniqueFd dir(fd);
            struct stat st {};
            if (e.kind == EntryKind::symlink && sys::lstat_at(fd, name, st) && S_ISLNK(st.st_mode))
                have = sys::read_link_at(fd, name);
        }
        if (e.kind != EntryKind::symlink || have != e.text)
            log::warn(cat("cannot create ", quote(target), " in a read-only ROOTFS; skipped"));
        return false;
    }

    bool put_content(const std::string& target, const Entry& e) {
        const int fd = try_open_in_root(c_.root, target, O_PATH);
        if (fd == -ENOENT) {
            std::optional<UniqueFd> parent = parent_if_owned(c_, target);
            return parent ? write_into(parent->get(), target, e) : skip(target, e);
        }
        if (fd < 0) sys::fail(cat("openat2(root, ", quote(target), ", RESOLVE_IN_ROOT)"), -fd);
        UniqueFd have(fd);
        // The image has one: written in gpubox's /run tmpfs and bound over it, so that nothing
        // of the image is copied up or written.
        const std::string stash = cat("/run/.gpubox/", c_.stashed++, "-", base_name(target));
        write_into(owned_parent(c_, stash).get(), stash, e);
        UniqueFd src = open_in_root(c_.root, stash, O_PATH);
        bind_fd(c_, src.get(), stash, target,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                Entry{.kind = EntryKind::file});
        return true;
    }

    static bool write_into(int dir, const std::string& path, const Entry& e) {
        UniqueFd f =
            sys::open_at(dir, base_name(path), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, e.mode);
        sys::write_all(f.get(), e.text, path);
        sys::fchmod(f.get(), e.mode, path);
        return true;
    }

    Ctx& c_;
};

// The ops that are an entry: made through the live root (LiveRoot).
void apply_one(const Symlink& s, Ctx& c, const Entry& e) { c.live->put(s.path, e); }
void apply_one(const WriteFile& w, Ctx& c, const Entry& e) { c.live->put(w.target, e); }
void apply_one(const MakeDir& d, Ctx& c, const Entry& e) { c.live->put(d.target, e); }

void apply_one(const MaskPath& m, Ctx& c, const Entry&) {
    int fd = try_open_in_root(c.root, m.target, O_PATH | O_NOFOLLOW);
    if (fd == -ENOENT) return;  // nothing to hide
    if (fd < 0) sys::fail(cat("openat2(root, ", quote(m.target), ", RESOLVE_IN_ROOT)"), -fd);
    UniqueFd at(fd);
    if (S_ISDIR(sys::fstat(at.get(), m.target).st_mode)) {
        UniqueFd t =
            new_fs("tmpfs", {{"mode", "0555"}, {"size", "4096"}},
                   MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        move_onto(c, t.get(), "tmpfs", at.get(), m.target);
        return;
    }
    // Checked on the clone itself, as BindDev's are: what is checked is what gets mounted.
    const int null = sys::try_open_tree_attr(
        AT_FDCWD, "/dev/null", false, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    if (null < 0) sys::fail("open_tree(\"/dev/null\", OPEN_TREE_CLONE)", -null);
    UniqueFd tree(null);
    struct stat st = sys::fstat(tree.get(), "/dev/null");
    if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3))
        sys::fail("check \"/dev/null\": not the null device", ENODEV);
    move_onto(c, tree.get(), "/dev/null", at.get(), m.target);
}

void apply_one(const RemountRo& r, Ctx& c, const Entry&) {
    int fd = try_open_in_root(c.root, r.target, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT) return;
    if (fd < 0) sys::fail(cat("openat2(root, ", quote(r.target), ", RESOLVE_IN_ROOT)"), -fd);
    UniqueFd at(fd);
    UniqueFd tree = sys::open_tree_clone(
        at.get(), r.target, true,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    move_onto(c, tree.get(), r.target, at.get(), r.target);
}

// Op i at its step, with the entry it needs (entry_of); `tree`: its contents, made in gpubox's
// layer (NewRoot::trees), attached in place of a tmpfs.
void apply_step(const MountPlan& plan, std::size_t i, Ctx& c, std::vector<bool>& done,
                const UniqueFd* tree) {
    const Entry e = entry_of(plan.ops[i]).value_or(Entry{});
    if (tree) return attach(c, *tree, "gpubox's layer", target_of(plan.ops[i]), e, false);
    std::visit(
        [&](const auto& op) {
            if constexpr (std::is_same_v<std::decay_t<decltype(op)>, Tmpfs>)
                apply_tmpfs(plan, i, c, done, e);
            else apply_one(op, c, e);
        },
        plan.ops[i]);
}

}  // namespace

void apply_mount_plan(const MountPlan& plan, const NewRoot& root) {
    Ctx c{root.mnt.get(), {}};
    LiveRoot live(c);
    c.live = &live;
    c.tmpfs = root.tmpfs.get();
    c.tmpfs_attached = root.tmpfs_attached;
    // A bound root: before its directories' overlays take their layers from the tmpfs.
    if (!root.writable_layer && !c.tmpfs_attached)
        c.tmpfs_attached = attach_gpubox_tmpfs(c.tmpfs, c.root);
    if (c.tmpfs_attached) c.own_mount(c.tmpfs);
    if (root.writable_layer) c.own_mount(c.root);  // the overlay (tmpfs-backed)
    else if (plan.root.mode != RootMode::writable)
        for (UniqueFd& o : overlay_missing_dirs(plan, c.root, c.tmpfs))
            c.own_mount(o.get()), c.overlays.push_back(std::move(o));
    std::vector<bool> done = root.prepared;  // entries made already, in a layer or a fresh fs
    done.resize(plan.ops.size());
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
        const auto tree = root.trees.find(i);
        if (done[i] && tree == root.trees.end()) continue;
        try {
            if (log::level() >= log::Level::debug) log::debug(step_name(plan, i));
            apply_step(plan, i, c, done, tree == root.trees.end() ? nullptr : &tree->second);
        } catch (...) {
            std::throw_with_nested(SetupError(step_name(plan, i)));
        }
    }
    for (const UniqueFd& o : c.overlays)  // as read-only as the bound root around them
        sys::mount_setattr(o.get(), "overlay", MOUNT_ATTR_RDONLY, 0, false);
}

void enter_root(int root) {
    try {
        sys::fchdir(root, "new root");
        sys::pivot_root_here();
        sys::umount_detach(".");
        sys::chdir("/");
    } catch (...) {
        std::throw_with_nested(SetupError("pivot_root into the new root"));
    }
}

}  // namespace gpubox::rootfs
