#include "launcher/monitor/fuse_root.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/squashfs.hpp"
#include "rootfs/view.hpp"

namespace gpubox::launcher {
namespace {

constexpr const char* kWhat = "the FUSE mount";

// The child: in init's namespaces, /dev/fuse opened and mounted over ROOTFS, the device sent
// back. It never returns.
[[noreturn]] void mount_in(int userns, int mntns, const std::string& rootfs, int sock) noexcept {
    int err = EIO;
    try {
        sys::setns(userns, CLONE_NEWUSER, "the sandbox's user namespace");
        sys::setns(mntns, CLONE_NEWNS, "the sandbox's mount namespace");
        const UniqueFd dev = sys::open_at(AT_FDCWD, "/dev/fuse", O_RDWR);
        const UniqueFd fs = sys::fsopen("fuse");
        sys::fsconfig_string(fs.get(), "fuse", "source", "gpubox-squashfs");
        sys::fsconfig_string(fs.get(), "fuse", "fd", std::to_string(dev.get()));
        sys::fsconfig_string(fs.get(), "fuse", "rootmode", "40000");
        sys::fsconfig_string(fs.get(), "fuse", "user_id", "0");  // init's 0: the caller
        sys::fsconfig_string(fs.get(), "fuse", "group_id", "0");
        sys::fsconfig_flag(fs.get(), "fuse", "default_permissions");
        sys::fsconfig_create(fs.get(), "fuse");
        const UniqueFd mnt = sys::fsmount(fs.get(), "fuse",
                                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        const UniqueFd target = sys::open_at(AT_FDCWD, rootfs, O_PATH | O_DIRECTORY | O_NOFOLLOW);
        sys::move_mount(mnt.get(), "squashfuse", target.get(), rootfs);
        sys::send_frame(sock, "v", dev.get(), kWhat);
        sys::exit_now(0);
    } catch (const SysError& e) {
        err = e.err();
    } catch (...) {}
    try {
        sys::send_frame(sock, cat("e", err), -1, kWhat);
    } catch (...) {}
    sys::exit_now(1);
}

UniqueFd mount_device(pid_t init, const std::string& rootfs) {
    const UniqueFd userns = sys::open_at(AT_FDCWD, cat("/proc/", init, "/ns/user"), O_RDONLY);
    const UniqueFd mntns = sys::open_at(AT_FDCWD, cat("/proc/", init, "/ns/mnt"), O_RDONLY);
    UniqueFd mine, theirs;
    sys::socketpair(mine, theirs);
    const pid_t pid = sys::fork(kWhat);
    if (pid == 0) mount_in(userns.get(), mntns.get(), rootfs, theirs.get());
    theirs.reset();
    std::string reply;
    UniqueFd dev;
    try {
        if (!sys::recv_frame(mine.get(), reply, dev, kWhat)) reply = cat("e", EIO);
    } catch (...) {
        sys::kill_and_reap(pid);
        throw;
    }
    sys::wait_status(pid);
    if (dev.valid()) return dev;
    const int err = reply.size() > 1 && reply[0] == 'e' ? std::atoi(reply.c_str() + 1) : EIO;
    sys::fail(cat("mount(fuse over ", quote(rootfs), ")"), err);
}

}  // namespace

FuseDaemon::~FuseDaemon() {
    if (pid > 0) sys::kill_and_reap(pid);
}

void mount_fuse_root(pid_t init, const std::string& rootfs, const std::string& file,
                     FuseDaemon& daemon) {
    try {
        const UniqueFd dev = mount_device(init, rootfs);
        const std::filesystem::path f(file);
        const UniqueFd dir =
            rootfs::open_read_only_view(f.parent_path().string(), "the squashfs file's directory");
        daemon.pid = image::spawn_squashfuse(dir.get(), f.filename().string(), dev.get());
    } catch (...) {
        std::throw_with_nested(SetupError(cat("squashfuse of ", quote(file))));
    }
}

}  // namespace gpubox::launcher
