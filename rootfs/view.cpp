#include "rootfs/view.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string_view>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::rootfs {
namespace {

constexpr const char* kWhat = "read-only view";

// The child: the directory `dir` names, cloned with its submounts in a mount namespace of its
// own (whose user namespace lets it clone), made read-only, and sent back. It never returns.
[[noreturn]] void make_view(int dir, int sock, const std::vector<std::string>* layers) noexcept {
    int err = 0;
    try {
        sys::fchdir(dir, "ROOTFS");  // the namespace's copy of it becomes our cwd
        sys::unshare(CLONE_NEWUSER | CLONE_NEWNS);
        const UniqueFd view =
            layers ? stack_layers(*layers)
                   : sys::open_tree_attr(AT_FDCWD, "ROOTFS", true, MOUNT_ATTR_RDONLY);
        sys::send_frame(sock, "v", view.get(), kWhat);
        sys::exit_now(0);
    } catch (const SysError& e) {
        err = e.err();
    } catch (...) {
        err = EIO;
    }
    try {
        sys::send_frame(sock, cat("e", err), -1, kWhat);
    } catch (...) {}
    sys::exit_now(1);
}

}  // namespace

UniqueFd stack_layers(const std::vector<std::string>& layers) {
    constexpr unsigned kAttrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    std::vector<UniqueFd> fds;
    for (const std::string& l : layers)
        fds.push_back(sys::open_at(AT_FDCWD, l, O_PATH | O_DIRECTORY | O_NOFOLLOW));
    if (fds.size() == 1) return sys::open_tree_attr(fds[0].get(), layers[0], true, kAttrs);
    // 6.5 takes each layer on its own; one lowerdir string is capped at 255 bytes by fsconfig
    // (the pull stores an image of more layers than fit there as one tree on such a kernel).
    const bool one_by_one = sys::kernel_at_least(6, 5);
    UniqueFd fs = sys::fsopen("overlay");
    sys::fsconfig_string(fs.get(), "overlay", "source", "gpubox-image");
    std::string lower;
    for (auto it = fds.rbegin(); it != fds.rend(); ++it) {  // the top layer first
        const std::string dir = cat("/proc/self/fd/", it->get());
        if (one_by_one) sys::fsconfig_string(fs.get(), "overlay", "lowerdir+", dir);
        else lower += (lower.empty() ? "" : ":") + dir;
    }
    if (!one_by_one) sys::fsconfig_string(fs.get(), "overlay", "lowerdir", lower);
    sys::fsconfig_flag(fs.get(), "overlay", "userxattr");
    sys::fsconfig_create(fs.get(), "overlay");
    return sys::fsmount(fs.get(), "overlay", kAttrs);
}

UniqueFd open_directory(const std::string& path, const std::string& what) {
    try {
        return sys::open_at(AT_FDCWD, path, O_PATH | O_DIRECTORY);
    } catch (...) {
        std::throw_with_nested(
            PlanError(cat(what, " ", quote(path), " is not a usable directory")));
    }
}

UniqueFd open_read_only_view(const std::string& path, const std::string& what) {
    const UniqueFd dir = open_directory(path, what);
    return read_only_view_of(dir.get(), path, what);
}

UniqueFd open_read_only_view(const std::string& path, const std::string& what,
                             const std::vector<std::string>& layers) {
    const UniqueFd dir = open_directory(path, what);
    return read_only_view_of(dir.get(), path, what, layers);
}

UniqueFd read_only_view_of(int dir, const std::string& path, const std::string& what,
                           const std::vector<std::string>& layers) {
    UniqueFd mine, theirs;
    sys::socketpair(mine, theirs);
    const pid_t pid = sys::fork(cat("a read-only view of ", what));
    if (pid == 0) make_view(dir, theirs.get(), layers.empty() ? nullptr : &layers);
    theirs.reset();
    std::string reply;
    UniqueFd view;
    try {
        if (!sys::recv_frame(mine.get(), reply, view, kWhat)) reply = cat("e", EIO);
    } catch (...) {
        sys::kill_and_reap(pid);
        throw;
    }
    sys::wait_status(pid);
    const struct stat a = sys::fstat(dir, path);
    if (view.valid() && !layers.empty()) return view;  // a union of its own: nothing to compare
    if (view.valid()) {
        const struct stat b = sys::fstat(view.get(), path);
        if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) return view;
        sys::fail(cat("open_tree(", quote(path), "): ", what, " was replaced meanwhile"), ESTALE);
    }
    const int err = reply.size() > 1 && reply[0] == 'e' ? std::atoi(reply.c_str() + 1) : EIO;
    if (!layers.empty())
        sys::fail(cat("mount(overlay of ", what, "'s ", layers.size(), " layers)"), err);
    log::info(cat(what, " ", quote(path), " is read in place (no read-only mount of it: ",
                  std::strerror(err), "): reading it may update its files' access times"));
    return sys::dup_cloexec(dir);
}

namespace {

// Linux 6.8's calls for reading the mount tree a mount at a time (uapi <linux/mount.h>, newer
// than the headers gpubox builds against): statx()'s unique mount id, listmount(), statmount().
constexpr long kStatmount = 457, kListmount = 458;  // the same numbers on every architecture
constexpr unsigned kStatxMntIdUnique = 0x4000;
constexpr std::uint64_t kStatmountMntPoint = 0x10;
struct MntIdReq {
    std::uint32_t size = sizeof(MntIdReq), spare = 0;
    std::uint64_t mnt_id = 0, param = 0;
};
struct Statmount {  // the fixed part; the strings follow it
    std::uint32_t size, mnt_opts;
    std::uint64_t mask;
    std::uint32_t sb_dev_major, sb_dev_minor;
    std::uint64_t sb_magic;
    std::uint32_t sb_flags, fs_type;
    std::uint64_t mnt_id, mnt_parent_id;
    std::uint32_t mnt_id_old, mnt_parent_id_old;
    std::uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
    std::uint32_t mnt_root, mnt_point;
    std::uint64_t spare2[50];
};

// A mount with more mounts below it than this is answered from mountinfo: one statmount() a
// mount (~1.8 us here) costs more than the kernel printing every mount once (~28 us for 23).
constexpr std::size_t kListedMounts = 12;

// has_submounts() from the kernel's list of the mounts below the one that holds `below` (ROOTFS
// resolved, a trailing slash: below_of()), at any depth; nullopt where the kernel cannot list
// them (before 6.8, or a seccomp filter that refuses the calls) or there are many.
std::optional<bool> listed_submounts(const std::string& below) {
    struct statx sx {};
    if (::statx(AT_FDCWD, below.c_str(), AT_STATX_DONT_SYNC, kStatxMntIdUnique, &sx) != 0 ||
        !(sx.stx_mask & kStatxMntIdUnique))
        return std::nullopt;
    MntIdReq req;
    req.mnt_id = sx.stx_mnt_id;
    std::uint64_t mounts[kListedMounts + 1];
    const long n = ::syscall(kListmount, &req, mounts, std::size(mounts), 0);
    if (n < 0 || static_cast<std::size_t>(n) > kListedMounts) return std::nullopt;
    alignas(Statmount) char buf[sizeof(Statmount) + PATH_MAX + 1];
    for (long i = 0; i < n; ++i) {
        MntIdReq q;
        q.mnt_id = mounts[i], q.param = kStatmountMntPoint;
        // ENOENT: unmounted meanwhile; EPERM: out of our root's reach (mountinfo skips it too).
        if (::syscall(kStatmount, &q, buf, sizeof buf - 1, 0) != 0) {
            if (errno == ENOENT || errno == EPERM) continue;
            return std::nullopt;
        }
        const auto* sm = reinterpret_cast<const Statmount*>(buf);
        if (!(sm->mask & kStatmountMntPoint) || sizeof(Statmount) + sm->mnt_point >= sizeof buf - 1)
            return std::nullopt;
        buf[sizeof buf - 1] = '\0';
        const std::string_view mp(buf + sizeof(Statmount) + sm->mnt_point);
        if (starts_with(mp, below) && mp != "/") return true;  // strictly below ROOTFS
    }
    return false;
}

// ROOTFS resolved, and with a trailing slash: the prefix of the mount points strictly below it.
std::optional<std::string> below_of(const std::string& rootfs) {
    char real[PATH_MAX];
    if (!::realpath(rootfs.c_str(), real)) return std::nullopt;
    return std::string(real) == "/" ? "/" : std::string(real) + "/";
}

// has_submounts() from mountinfo, for `below` as below_of() makes it.
bool mountinfo_has_below(const std::string& below) {
    std::string info = sys::read_file("/proc/self/mountinfo", 16 << 20);
    std::size_t pos = 0;
    while ((pos = info.find('\n', pos)) != std::string::npos) {
        std::size_t start = ++pos;
        // "id parent major:minor root mountpoint ...": the fifth field.
        int field = 0;
        std::size_t i = start;
        while (i < info.size() && info[i] != '\n' && field < 4)
            if (info[i++] == ' ') ++field;
        std::size_t end = info.find(' ', i);
        if (end == std::string::npos) break;
        const std::string mp = info.substr(i, end - i);
        if (starts_with(mp, below) && mp != "/") return true;  // strictly below ROOTFS
    }
    return false;
}

}  // namespace

// Overlayfs refuses a lower layer with locked mounts below it ("failed to clone lowerpath"):
// cloning it alone would reveal what those mounts hide.
bool has_submounts(const std::string& rootfs) {
    const std::optional<std::string> below = below_of(rootfs);
    if (!below) return false;
    if (std::optional<bool> listed = listed_submounts(*below)) return *listed;
    return mountinfo_has_below(*below);
}

std::optional<bool> has_submounts_listed(const std::string& rootfs) {
    const std::optional<std::string> below = below_of(rootfs);
    return below ? listed_submounts(*below) : false;
}

bool has_submounts_in_mountinfo(const std::string& rootfs) {
    const std::optional<std::string> below = below_of(rootfs);
    return below && mountinfo_has_below(*below);
}

bool bound_instead(const RootSpec& root) {
    return (root.mode == RootMode::overlay || root.mode == RootMode::read_only) &&
           has_submounts(root.rootfs);
}

}  // namespace gpubox::rootfs
