// Assembling the sandbox root. ROOTFS is never written: the overlay's upper (or, read-only, its
// top lower) layer is a tmpfs owned by gpubox, and every mount point or generated file that the
// image lacks is created there *before* the overlay is mounted, at the path the image's own
// symlinks lead to (resolved inside ROOTFS). A symlink or wrong-typed entry where gpubox needs a
// mount point is shadowed by a real one, so an image's `dev -> /home/victim` redirects nothing.
// The GPU's entries go to a layer of their own in the same tmpfs, just below, which the monitor
// fills while the child sets up: no directory is written by both.
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/entry.hpp"
#include "rootfs/layer_stack.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::rootfs {
namespace {

struct Canonical {
    std::vector<std::string> dirs;  // canonical components of the parent, relative to root
    std::vector<mode_t> modes;      // the image's mode for each, 0 where the image lacks it
    UniqueFd lower;                 // the parent in the image, if it exists there
    bool covered = false;           // the parent lies under another mount of the plan
};

// Mount targets of the plan that hide what the image has below them.
using Covered = std::vector<std::string>;

bool is_covered(const Covered& covered, const std::vector<std::string>& dirs) {
    std::string p;
    for (const auto& d : dirs) p += "/" + d;
    for (const std::string& c : covered)
        if (p == c) return true;
    return false;
}

// The usual case, in 1 + depth calls instead of 3 per component: a parent that the image has,
// spelled canonically (no symlink, no ".."), and not covered. nullopt sends the rest to the walk.
std::optional<Canonical> plain_parent(int image, const std::string& target,
                                      const Covered& covered) {
    Canonical out;
    for (std::string& c : split_path(parent_of(target))) {
        if (c == "..") return std::nullopt;
        out.dirs.push_back(std::move(c));
        if (is_covered(covered, out.dirs)) return std::nullopt;
    }
    const std::string rel = out.dirs.empty() ? "." : join(out.dirs, "/");
    const int fd = try_open_beneath(image, rel, O_PATH | O_DIRECTORY);
    if (fd < 0) return std::nullopt;  // a link on the way, a missing or odd component, no openat2
    out.lower = UniqueFd(fd);
    std::string prefix;
    for (std::size_t i = 0; i < out.dirs.size(); ++i) {
        prefix += (i ? "/" : "") + out.dirs[i];
        struct stat st {};
        if (!sys::lstat_at(image, prefix, st) || !S_ISDIR(st.st_mode))
            return std::nullopt;  // changed under us
        out.modes.push_back(st.st_mode & 07777);
    }
    return out;
}

// Resolve the parent directory of `target` inside the image, following its symlinks as if the
// image were "/", and return the canonical path the kernel will later resolve to.
Canonical canonical_parent(int image, const std::string& target, const Covered& covered) {
    if (auto plain = plain_parent(image, target, covered)) return std::move(*plain);
    ResolveHooks hooks;  // stop where the executor makes the rest, in gpubox's mount
    hooks.stop = [&](const std::vector<std::string>& parts) { return is_covered(covered, parts); };
    Resolved r = resolve_in_root(image, parent_of(target), ResolveMode::canonical, O_PATH, hooks);
    if (r.fd < 0 && r.fd != -ENOENT)
        sys::fail(cat("resolve(", quote(target), ") in ROOTFS"), -r.fd);
    Canonical out{std::move(r.parts), std::move(r.modes), UniqueFd(r.fd), r.stopped};
    return out;
}

// A file mount point is made in the layer without asking: over the image's own file it only
// shadows what the mount hides anyway, and it saves a lookup per bind.
bool image_has(const Canonical& c, const std::string& name, EntryKind kind) {
    if (!c.lower.valid() || kind != EntryKind::dir) return false;
    struct stat st {};
    if (!sys::lstat_at(c.lower.get(), name, st)) return false;
    return S_ISDIR(st.st_mode);
}

// gpubox's layer as it is being filled. ROOTFS is only read, so a directory's resolution holds
// for the whole plan: each parent is walked once and each layer directory made and opened once,
// however many entries share it (a driver's libraries and their links all do).
class Layer : public EntryTarget {
public:
    // The mount targets of `plan` hide what the image has below them.
    Layer(int image, int layer, const MountPlan& plan) : image_(image), dirs_(layer) {
        for (const MountOp& op : plan.ops)
            if (std::holds_alternative<Tmpfs>(op) || std::holds_alternative<Proc>(op) ||
                std::holds_alternative<Sysfs>(op) || std::holds_alternative<Bind>(op))
                covered_.push_back(target_of(op));
    }

    // Make `target` in the layer (mkdir -p of its canonical parent, then the entry; an entry
    // the layer holds already, from two plan entries for one path, is replaced). False where
    // the image already has it or another mount of the plan covers it.
    bool put(const std::string& target, const Entry& e) override {
        if (!lacks(target, e)) return false;
        const Canonical& c = parent(target);
        const std::string name = base_name(target);
        const int dir = dirs_.open(c.dirs, c.dirs.size(), c.modes);
        if (dir < 0)
            sys::fail(cat("mkdir -p ", quote("/" + join(c.dirs, "/")), " in gpubox's layer"), -dir);
        if (const int r = write_entry(dir, name, e, dirs_, true); r < 0)
            sys::fail(cat(entry_call(e.kind), "(", quote(target), ") in gpubox's layer"), -r);
        return true;
    }

    // Whether put() makes `target`: the image lacks it, and no other mount of the plan covers it.
    bool lacks(const std::string& target, const Entry& e) {
        const Canonical& c = parent(target);
        return !c.covered && !image_has(c, base_name(target), e.kind);
    }

    // The directories made get their exact modes (OwnDirs::seal): once every entry is in.
    void seal() { dirs_.seal(); }

private:
    const Canonical& parent(const std::string& target) {
        const std::string key = parent_of(target);
        auto it = parents_.find(key);
        if (it == parents_.end())
            it = parents_.emplace(key, canonical_parent(image_, target, covered_)).first;
        return it->second;
    }

    int image_;
    Covered covered_;
    std::map<std::string, Canonical> parents_;  // by the parent path the plan spells
    OwnDirs dirs_;                              // by canonical path in the layer
};

// False where a missing optional source needs no mount point; throws for any other failure. A
// device's source is looked at here: only the image's layer leaves out a missing one's entry.
bool source_usable(const Entry& e) {
    int err = e.source_err;
    struct stat st {};
    if (e.device) err = -sys::try_stat(*e.source, st);
    if (!err) return true;
    if (err == ENOENT && e.need == Need::optional) return false;
    sys::fail(cat("stat(", quote(*e.source), ")"), err);
}

bool prepare_entry(Layer& layer, const MountOp& op) {
    const std::optional<Entry> e = entry_of(op);
    return e && source_usable(*e) && layer.put(target_of(op), *e);
}

bool in_image(const MountOp& op) {
    const std::optional<Place> p = place_of(op);
    return p ? *p == Place::image
             : !std::holds_alternative<Devpts>(op);  // /proc and /sys are image mount points
}

// A read-only tmpfs that the plan puts in a kernel filesystem (/proc/driver), made instead as
// a directory at its own path in `dir` (the late layer), with every entry and mount point the
// plan puts in it. Init then clones that directory from the overlay before /proc covers it
// (clone_prepared_dirs) and attaches it read-only at the tmpfs's step: one bind instead of a
// superblock made and filled on its critical path. The overlay shows exactly these entries
// there, and the directories on the way as directories, unless the image has a directory of
// its own at that path, which would merge in: then this returns false and init mounts the
// tmpfs as planned.
bool prepare_tmpfs_dir(const MountPlan& full, std::size_t i, int image, int dir,
                       std::vector<bool>& prepared) {
    const Tmpfs& t = std::get<Tmpfs>(full.ops[i]);
    const auto parts = split_path(t.target);
    std::vector<mode_t> modes;  // the image's own, for the directories on the way that it has
    std::string rel;
    for (const std::string& part : parts) {
        rel += (rel.empty() ? "" : "/") + part;
        const int fd = try_open_beneath(image, rel, O_PATH | O_DIRECTORY);
        if (fd >= 0) {
            UniqueFd held(fd);
            modes.push_back(sys::fstat(fd, rel).st_mode & 07777);
            continue;
        }
        // Missing, or a link or a file that the layer's directory hides: nothing of the image's
        // shows through below. Anything else (no openat2) is no proof of that.
        if (fd != -ENOENT && fd != -ENOTDIR && fd != -ELOOP) return false;
        break;
    }
    if (modes.size() == parts.size()) return false;  // the image's directory would merge in
    modes.resize(parts.size());
    modes.back() = t.mode;
    OwnDirs dirs(dir);
    const int top = dirs.open(parts, parts.size(), modes);
    if (top < 0) sys::fail(cat("mkdir -p ", quote(t.target), " in gpubox's layer"), -top);
    fill_fresh_fs(full, i, top, prepared);
    dirs.seal();
    return true;
}

// Init's side of prepare_tmpfs_dir: the prepared directories, cloned read-only from the
// overlay (attached, so any kernel may clone it) before any mount covers them.
void clone_prepared_dirs(const MountPlan& plan, NewRoot& root) {
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
        const auto* t = std::get_if<Tmpfs>(&plan.ops[i]);
        if (!t || !root.prepared[i]) continue;
        const int fd = try_open_beneath(root.mnt.get(), t->target.substr(1),
                                        O_PATH | O_DIRECTORY | O_NOFOLLOW, RESOLVE_NO_XDEV);
        if (fd < 0)
            sys::fail(cat("openat2(overlay, ", quote(t->target), ", RESOLVE_NO_SYMLINKS)"), -fd);
        UniqueFd at(fd);
        root.trees.emplace(
            i, sys::open_tree_clone(fd, t->target, false,
                                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                        (t->noexec ? MOUNT_ATTR_NOEXEC : 0)));
    }
}

UniqueFd mount_gpubox_tmpfs(const RootSpec& root) {
    UniqueFd fs = sys::fsopen("tmpfs");
    if (root.tmpfs_size)
        sys::fsconfig_string(fs.get(), "tmpfs", "size", std::to_string(root.tmpfs_size));
    if (root.tmpfs_inodes)
        sys::fsconfig_string(fs.get(), "tmpfs", "nr_inodes", std::to_string(root.tmpfs_inodes));
    sys::fsconfig_string(fs.get(), "tmpfs", "source", "gpubox");  // what df and mountinfo show
    sys::fsconfig_string(fs.get(), "tmpfs", "mode", "0755");
    sys::fsconfig_create(fs.get(), "tmpfs");
    // Left detached while the overlay takes its upper layer from it: attached anywhere under
    // ROOTFS (always, when ROOTFS is "/"), overlayfs would refuse that layer as overlapping the
    // lower one. apply_mount_plan attaches it later, where nothing reaches its root.
    return sys::fsmount(fs.get(), "tmpfs", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

// Entries of ops [from, to) made in the layer; prepared[i] says which creates_entry() ops are done.
void prepare_entries(Layer& layer, const MountPlan& plan, std::size_t from, std::size_t to,
                     std::vector<bool>& prepared) {
    for (std::size_t i = from; i < to; ++i) {
        if (!in_image(plan.ops[i])) continue;
        try {
            prepared[i] = prepare_entry(layer, plan.ops[i]) && creates_entry(plan.ops[i]);
        } catch (...) {
            std::throw_with_nested(SetupError(step_name(plan, i) + ": mount point"));
        }
    }
}

NewRoot overlay_root(const MountPlan& plan, int rootfs, const RootDraft& draft,
                     const LatePlan* late) {
    const bool ro = plan.root.mode == RootMode::read_only;
    const RootLayer& layer = draft.layer;
    NewRoot out{{}, true, draft.prepared};
    const MountPlan* full = &plan;
    if (late) {  // inserted at user_from; the monitor made their entries in layer.late
        full = &late->full;
        std::vector<bool> done = late->prepared;
        done.resize(late->full.ops.size() - plan.ops.size());
        out.prepared.insert(out.prepared.begin() + static_cast<std::ptrdiff_t>(plan.user_from),
                            done.begin(), done.end());
    }
    const LayerStack stack = plan_layer_stack(plan.root.mode, layer, {&rootfs, 1});
    UniqueFd fs = sys::fsopen("overlay");
    sys::fsconfig_string(fs.get(), "overlay", "source", "gpubox");
    sys::fsconfig_string(fs.get(), "overlay", "lowerdir", join(stack.lower, ":"));
    if (!stack.upper.empty()) {
        sys::fsconfig_string(fs.get(), "overlay", "upperdir", stack.upper);
        sys::fsconfig_string(fs.get(), "overlay", "workdir", stack.work);
        sys::fsconfig_flag(fs.get(), "overlay", "userxattr");
    }
    sys::fsconfig_create(fs.get(), "overlay");
    UniqueFd mnt = sys::fsmount(
        fs.get(), "overlay", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0));
    sys::move_mount(mnt.get(), "overlay", rootfs, plan.root.rootfs);
    out.mnt = std::move(mnt);
    out.tmpfs_attached = draft.tmpfs_attached;
    clone_prepared_dirs(*full, out);
    return out;
}

UniqueFd bind_root(const MountPlan& plan, int rootfs, bool read_only) {
    UniqueFd mnt = sys::open_tree_clone(
        rootfs, plan.root.rootfs, true,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0));
    sys::move_mount(mnt.get(), plan.root.rootfs, rootfs, plan.root.rootfs);
    return mnt;
}

// A tmpfs-upper overlay of directory `dir` of the bound root, mounted over it. Its root is the
// upper directory, gpubox's own (with the image directory's mode), so entries are made in it
// without a copy-up of the image's directory, which a root-owned image would refuse.
UniqueFd overlay_dir(int root, int tmpfs, int n_dir, const std::string& dir) {
    UniqueFd lower = open_in_root(root, dir, O_PATH | O_DIRECTORY);
    const std::string n = std::to_string(n_dir);
    sys::mkdir_at(tmpfs, "upper" + n, 0755);
    sys::mkdir_at(tmpfs, "work" + n, 0700);
    UniqueFd upper = sys::open_at(tmpfs, "upper" + n, O_RDONLY | O_DIRECTORY);
    UniqueFd work = sys::open_at(tmpfs, "work" + n, O_PATH | O_DIRECTORY);
    sys::fchmod(upper.get(), sys::fstat(lower.get(), dir).st_mode & 07777, dir);
    UniqueFd fs = sys::fsopen("overlay");
    sys::fsconfig_string(fs.get(), "overlay", "source", "gpubox");
    sys::fsconfig_string(fs.get(), "overlay", "lowerdir", cat("/proc/self/fd/", lower.get()));
    sys::fsconfig_string(fs.get(), "overlay", "upperdir", cat("/proc/self/fd/", upper.get()));
    sys::fsconfig_string(fs.get(), "overlay", "workdir", cat("/proc/self/fd/", work.get()));
    sys::fsconfig_flag(fs.get(), "overlay", "userxattr");
    sys::fsconfig_create(fs.get(), "overlay");
    UniqueFd mnt = sys::fsmount(fs.get(), "overlay", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    sys::move_mount(mnt.get(), "overlay", lower.get(), dir);
    return mnt;
}

}  // namespace

// A bound ROOTFS (one with mounts below it, such as the host's "/": no overlay of the whole can
// be had in a user namespace) gets gpubox's entries in overlays of just the directories that
// lack one: the nearest existing directory above each missing target of an image-place op. They are mounted before any op, since an overlay would hide whatever the plan
// had already mounted below its lower directory. One that cannot be had (mounts below that
// directory, or it is ROOTFS's top) is left out, and the op fails or is skipped as it would have.
std::vector<UniqueFd> overlay_missing_dirs(const MountPlan& plan, int root, int tmpfs) {
    std::vector<std::string> dirs;
    for (const MountOp& op : plan.ops) {
        // Ops with a Place make their target; /proc, /sys and the masks need theirs to exist.
        if (place_of(op) != Place::image) continue;
        int fd = try_open_in_root(root, target_of(op), O_PATH | O_NOFOLLOW);
        UniqueFd held(fd);
        if (fd != -ENOENT) continue;
        std::string dir = parent_of(target_of(op));
        while (dir != "/" && (fd = try_open_in_root(root, dir, O_PATH | O_DIRECTORY)) == -ENOENT)
            dir = parent_of(dir);
        held.reset(fd);
        if (dir != "/" && fd >= 0 && std::find(dirs.begin(), dirs.end(), dir) == dirs.end())
            dirs.push_back(dir);
    }
    std::sort(dirs.begin(), dirs.end());  // each before the directories below it
    std::vector<UniqueFd> out;
    for (std::size_t n = 0; n < dirs.size(); ++n) {  // n: also for an overlay that then failed
        const std::string& d = dirs[n];
        try {
            out.push_back(overlay_dir(root, tmpfs, static_cast<int>(n), d));
            log::info(cat("ROOTFS is bound: ", quote(d),
                          " gets an overlay of its own for gpubox's entries"));
        } catch (const SysError& e) {
            log::info(cat("ROOTFS is bound, and ", quote(d), " cannot be overlaid: ", e.what()));
        }
    }
    return out;
}

bool layer_is_empty(const MountPlan& plan, int rootfs) {
    Layer probe(rootfs, -1, plan);  // a directory of its own never opened: nothing is made
    for (const MountOp& op : plan.ops)
        if (const std::optional<Entry> e = in_image(op) ? entry_of(op) : std::nullopt;
            e && source_usable(*e) && probe.lacks(target_of(op), *e))
            return false;
    return true;
}

bool attach_gpubox_tmpfs(int tmpfs, int root) {
    for (const char* name : {"proc", "dev", "sys", "tmp", "run"}) {
        const int fd = sys::try_open_at(root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
        if (fd < 0) continue;
        UniqueFd at(fd);
        sys::move_mount(tmpfs, "gpubox's tmpfs", at.get(), cat("/", name));
        return true;
    }
    return false;
}

RootLayer open_root_layer(const MountPlan& plan, bool late_ops, bool bound) {
    RootLayer l;
    try {
        l.tmpfs = mount_gpubox_tmpfs(plan.root);
        if (plan.root.mode == RootMode::writable || bound) return l;
        sys::mkdir_at(l.tmpfs.get(), "upper", 0755);
        sys::mkdir_at(l.tmpfs.get(), "work", 0700);
        l.upper = sys::open_at(l.tmpfs.get(), "upper", O_PATH | O_DIRECTORY);
        l.work = sys::open_at(l.tmpfs.get(), "work", O_PATH | O_DIRECTORY);
        if (late_ops) {
            sys::mkdir_at(l.tmpfs.get(), "late", 0755);
            l.late = sys::open_at(l.tmpfs.get(), "late", O_PATH | O_DIRECTORY);
        }
        return l;
    } catch (...) {
        std::throw_with_nested(
            SetupError(cat("root (", to_string(plan.root), "): gpubox's tmpfs")));
    }
}

RootDraft draft_root(const MountPlan& plan, int rootfs, RootLayer layer) {
    RootDraft d{std::move(layer)};
    if (!d.layer.upper.valid()) return d;  // a bound root: no layer to fill
    try {
        // The overlay will cover the whole of ROOTFS: any directory of the image hides the tmpfs.
        // A tmpfs root covers ROOTFS itself and has none of its entries (work: an empty dir).
        const bool fresh = plan.root.mode == RootMode::tmpfs;
        if (fresh) sys::move_mount(d.layer.tmpfs.get(), "gpubox's tmpfs", rootfs, "ROOTFS");
        d.tmpfs_attached = fresh || attach_gpubox_tmpfs(d.layer.tmpfs.get(), rootfs);
        sys::fchmod_at(d.layer.tmpfs.get(), "upper",  // made by open_root_layer, no link
                       sys::fstat(rootfs, plan.root.rootfs).st_mode & 07777);
        d.prepared.assign(plan.ops.size(), false);
        Layer entries(fresh ? d.layer.work.get() : rootfs, d.layer.upper.get(), plan);
        prepare_entries(entries, plan, 0, plan.ops.size(), d.prepared);
        entries.seal();
        return d;
    } catch (const SetupError&) {
        throw;
    } catch (...) {
        std::throw_with_nested(SetupError(cat("root (", to_string(plan.root), ")")));
    }
}

NewRoot assemble_root(const MountPlan& plan, int rootfs, RootDraft draft, const LatePlan* late) {
    try {
        NewRoot root;
        if (plan.root.mode == RootMode::tmpfs) {  // no overlay: the layer's directory is the root
            UniqueFd mnt = sys::open_tree_clone(draft.layer.upper.get(), "gpubox's root", false,
                                                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
            sys::move_mount(mnt.get(), "gpubox's root", rootfs, plan.root.rootfs);
            root = {std::move(mnt), true, draft.prepared, {}, {}, draft.tmpfs_attached};
        } else if (draft.layer.upper.valid()) {
            root = overlay_root(plan, rootfs, draft, late);
        } else {
            const bool writable = plan.root.mode == RootMode::writable;
            if (!writable)
                log::info(cat("ROOTFS ", quote(plan.root.rootfs),
                              " bound read-only and recursively instead of an overlay (it has "
                              "mounts below it, or every mount point): writes only in tmpfs"));
            root = {bind_root(plan, rootfs, !writable), false, {}};
        }
        root.tmpfs = std::move(draft.layer.tmpfs);
        return root;
    } catch (const SetupError&) {
        throw;
    } catch (...) {
        std::throw_with_nested(SetupError(cat("root (", to_string(plan.root), ")")));
    }
}

std::vector<bool> prepare_late_entries(const MountPlan& full, std::size_t at, std::size_t n,
                                       int rootfs, int dir) {
    // The plan's modes are exact: the monitor's umask (the user's) must not trim them, as the
    // child's umask(0) does not. The monitor is single-threaded; its umask is back on return.
    struct Umask {
        mode_t old = sys::set_umask(0);
        ~Umask() { sys::set_umask(old); }
    } umask0;
    Layer entries(rootfs, dir, full);
    std::vector<bool> prepared(full.ops.size());
    prepare_entries(entries, full, at, at + n, prepared);
    entries.seal();
    for (std::size_t i = at; i < at + n; ++i)
        if (const auto* t = std::get_if<Tmpfs>(&full.ops[i]);
            t && t->place == Place::kernel && t->read_only) {
            try {
                prepared[i] = prepare_tmpfs_dir(full, i, rootfs, dir, prepared);
            } catch (...) {
                std::throw_with_nested(
                    SetupError(step_name(full, i) + ": its contents in gpubox's layer"));
            }
        }
    return {prepared.begin() + static_cast<std::ptrdiff_t>(at),
            prepared.begin() + static_cast<std::ptrdiff_t>(at + n)};
}

}  // namespace gpubox::rootfs
