#include "rootfs/view.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

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

// Overlayfs refuses a lower layer with locked mounts below it ("failed to clone lowerpath"):
// cloning it alone would reveal what those mounts hide.
bool has_submounts(const std::string& rootfs) {
    char real[PATH_MAX];
    if (!::realpath(rootfs.c_str(), real)) return false;
    const std::string dir = std::string(real) == "/" ? "/" : std::string(real) + "/";
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
        if (starts_with(mp, dir) && mp != "/") return true;  // strictly below ROOTFS
    }
    return false;
}

bool bound_instead(const RootSpec& root) {
    return (root.mode == RootMode::overlay || root.mode == RootMode::read_only) &&
           has_submounts(root.rootfs);
}

}  // namespace gpubox::rootfs
