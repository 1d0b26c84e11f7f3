// The mount executor. Invariants, stated once and kept by every apply_one():
//  - binds are recursive, so a bind never reveals what an over-mount hid on the host;
//  - every mount gets nosuid; all but BindDev get nodev;
//  - read-only is applied with mount_setattr(AT_RECURSIVE), so submounts are read-only too, and
//    mount_setattr only *sets* attributes, so flags the kernel locked stay as they were;
//  - targets are opened under the new root with open_in_root() and mounted by fd (move_mount),
//    never by a path string the kernel would resolve again;
//  - sources are opened O_PATH first, checked (char device and st_rdev for BindDev), and the
//    target is re-opened and re-checked after mounting.
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::rootfs {
namespace {

enum class Kind { dir, file };

// The mount point for `target`, as an O_PATH fd. In gpubox's own tmpfs it is created here; in
// the image it was made in the layer already; in proc/sysfs it must exist.
UniqueFd mount_point(int root, const std::string& target, Place place, Kind kind) {
    if (place == Place::gpubox) {
        UniqueFd parent = open_in_root(root, parent_of(target), O_PATH | O_DIRECTORY);
        const std::string name = base_name(target);
        if (kind == Kind::dir) sys::mkdir_at(parent.get(), name, 0755);
        else ::close(::openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    }
    UniqueFd fd = open_in_root(root, target, O_PATH);
    struct stat st = sys::fstat(fd.get(), target);
    if (kind == Kind::dir && !S_ISDIR(st.st_mode))
        sys::fail(cat("mount point ", quote(target), " in the new root"), ENOTDIR);
    if (kind == Kind::file && S_ISDIR(st.st_mode))
        sys::fail(cat("mount point ", quote(target), " in the new root"), EISDIR);
    return fd;
}

UniqueFd new_fs(const std::string& type, const std::vector<std::pair<std::string, std::string>>& opts,
                unsigned attrs) {
    UniqueFd fs = sys::fsopen(type);
    for (const auto& [k, v] : opts) {
        if (v.empty()) sys::fsconfig_flag(fs.get(), type, k);
        else sys::fsconfig_string(fs.get(), type, k, v);
    }
    sys::fsconfig_create(fs.get(), type);
    return sys::fsmount(fs.get(), type, attrs);
}

void attach(const UniqueFd& mnt, const std::string& what, int root, const std::string& target,
            Place place, Kind kind) {
    UniqueFd at = mount_point(root, target, place, kind);
    sys::move_mount(mnt.get(), what, at.get(), target);
}

std::string octal(mode_t m) { return cat(std::oct, m); }

// A bind of host `source` (already open) onto `target`, recursive, with `attrs` on every mount.
void bind_fd(int src, const std::string& source, int root, const std::string& target, Place place,
             std::uint64_t attrs) {
    struct stat before = sys::fstat(src, source);
    UniqueFd tree = sys::open_tree_clone(src, source, true);
    sys::mount_setattr(tree.get(), source, attrs, 0, true);
    attach(tree, source, root, target, place, S_ISDIR(before.st_mode) ? Kind::dir : Kind::file);
    struct stat after = sys::fstat(open_in_root(root, target, O_PATH).get(), target);
    if (after.st_dev != before.st_dev || after.st_ino != before.st_ino)
        sys::fail(cat("bind ", quote(source), " -> ", quote(target), ": target changed while mounting"),
                  EXDEV);
}

void apply_one(const Bind& b, int root) {
    int fd = ::open(b.source.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && b.need == Need::optional) {
        log::debug(cat("skipping optional ", quote(b.source), ": not found"));
        return;
    }
    if (fd < 0) sys::fail(cat("open(", quote(b.source), ", O_PATH)"), errno);
    UniqueFd src(fd);
    std::uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.read_only ? MOUNT_ATTR_RDONLY : 0);
    bind_fd(src.get(), b.source, root, b.target, b.place, attrs);
}

void apply_one(const BindDev& d, int root) {
    int fd = ::open(d.source.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && d.need == Need::optional) return;
    if (fd < 0) sys::fail(cat("open(", quote(d.source), ", O_PATH)"), errno);
    UniqueFd src(fd);
    struct stat st = sys::fstat(src.get(), d.source);
    auto check = [&](const struct stat& s, const char* when) {
        if (!S_ISCHR(s.st_mode) || (d.rdev && s.st_rdev != *d.rdev))
            sys::fail(cat("check ", quote(d.source), " ", when, ": not the expected character device",
                          d.rdev ? cat(" ", major(*d.rdev), ":", minor(*d.rdev)) : std::string()),
                      ENODEV);
    };
    check(st, "before mounting");
    UniqueFd tree = sys::open_tree_clone(src.get(), d.source, false);
    sys::mount_setattr(tree.get(), d.source, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0, false);
    attach(tree, d.source, root, d.target, d.place, Kind::file);
    check(sys::fstat(open_in_root(root, d.target, O_PATH).get(), d.target), "after mounting");
}

void apply_one(const Proc& p, int root) {
    UniqueFd m = new_fs("proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    attach(m, "proc", root, p.target, Place::image, Kind::dir);
}

void apply_one(const Sysfs& s, int root) {
    const unsigned attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    if (s.fresh) {
        attach(new_fs("sysfs", {}, attrs), "sysfs", root, s.target, Place::image, Kind::dir);
        return;
    }
    UniqueFd src = sys::open_at(AT_FDCWD, "/sys", O_PATH | O_DIRECTORY);
    bind_fd(src.get(), "/sys", root, s.target, Place::image, attrs);
}

void apply_one(const Tmpfs& t, int root) {
    std::vector<std::pair<std::string, std::string>> opts{{"mode", octal(t.mode)}};
    if (t.size_bytes) opts.emplace_back("size", std::to_string(t.size_bytes));
    unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (t.noexec ? MOUNT_ATTR_NOEXEC : 0) |
                     (t.read_only ? MOUNT_ATTR_RDONLY : 0);
    attach(new_fs("tmpfs", opts, attrs), "tmpfs", root, t.target, t.place, Kind::dir);
}

void apply_one(const Devpts& d, int root) {
    UniqueFd m = new_fs("devpts", {{"newinstance", ""}, {"ptmxmode", "0666"}, {"mode", "0620"}},
                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    attach(m, "devpts", root, d.target, Place::gpubox, Kind::dir);
}

void apply_one(const Symlink& s, int root) {
    UniqueFd parent = open_in_root(root, parent_of(s.path), O_PATH | O_DIRECTORY);
    sys::symlink_at(s.link_text, parent.get(), base_name(s.path));
}

void apply_one(const MaskPath& m, int root) {
    int fd = try_open_in_root(root, m.target, O_PATH | O_NOFOLLOW);
    if (fd == -ENOENT) return;  // nothing to hide
    if (fd < 0) sys::fail(cat("openat2(root, ", quote(m.target), ", RESOLVE_IN_ROOT)"), -fd);
    UniqueFd at(fd);
    if (S_ISDIR(sys::fstat(at.get(), m.target).st_mode)) {
        UniqueFd t = new_fs("tmpfs", {{"mode", "0555"}, {"size", "4096"}},
                            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        sys::move_mount(t.get(), "tmpfs", at.get(), m.target);
        return;
    }
    UniqueFd null = sys::open_at(AT_FDCWD, "/dev/null", O_PATH);
    struct stat st = sys::fstat(null.get(), "/dev/null");
    if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3))
        sys::fail("check \"/dev/null\": not the null device", ENODEV);
    UniqueFd tree = sys::open_tree_clone(null.get(), "/dev/null", false);
    sys::mount_setattr(tree.get(), "/dev/null", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0, false);
    sys::move_mount(tree.get(), "/dev/null", at.get(), m.target);
}

void apply_one(const RemountRo& r, int root) {
    int fd = try_open_in_root(root, r.target, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT) return;
    if (fd < 0) sys::fail(cat("openat2(root, ", quote(r.target), ", RESOLVE_IN_ROOT)"), -fd);
    UniqueFd at(fd);
    UniqueFd tree = sys::open_tree_clone(at.get(), r.target, true);
    sys::mount_setattr(tree.get(), r.target,
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 0, true);
    sys::move_mount(tree.get(), r.target, at.get(), r.target);
}

void apply_one(const WriteFile& w, int root) {
    UniqueFd parent = open_in_root(root, parent_of(w.target), O_PATH | O_DIRECTORY);
    UniqueFd f = sys::open_at(parent.get(), base_name(w.target),
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, w.mode);
    sys::write_all(f.get(), w.content, w.target);
    sys::fchmod(f.get(), w.mode, w.target);
}

void apply_one(const MakeDir& d, int root) {
    UniqueFd parent = open_in_root(root, parent_of(d.target), O_PATH | O_DIRECTORY);
    sys::mkdir_at(parent.get(), base_name(d.target), d.mode);
}

bool done_in_layer(const MountOp& op, RootMode mode) {
    if (mode == RootMode::writable || !creates_entry(op)) return false;
    return std::visit(
        [](const auto& o) {
            if constexpr (requires { o.place; }) return o.place == Place::image;
            else return false;
        },
        op);
}

}  // namespace

void apply_mount_plan(const MountPlan& plan, int root) {
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
        if (done_in_layer(plan.ops[i], plan.root.mode)) continue;
        try {
            log::debug(cat("mount step ", i + 1, "/", plan.ops.size(), ": ", to_string(plan.ops[i])));
            std::visit([&](const auto& op) { apply_one(op, root); }, plan.ops[i]);
        } catch (...) {
            std::throw_with_nested(SetupError(cat("mount step ", i + 1, "/", plan.ops.size(), " (",
                                                  to_string(plan.ops[i]), ")")));
        }
    }
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
