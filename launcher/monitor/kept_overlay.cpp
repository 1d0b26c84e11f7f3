#include "launcher/monitor/kept_overlay.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/view.hpp"

namespace gpubox::launcher {
namespace {

constexpr const char* kLocalHint =
    "choose a DIR on a local filesystem (ext4, xfs, btrfs or tmpfs: /tmp, /var/tmp, a node's "
    "local scratch); overlayfs takes no upper layer from NFS or another overlay";

// DIR/name: made (mode `mode`) where missing, then opened and checked as DIR's own.
UniqueFd open_layer_dir(int dir, const std::string& path, const char* name, mode_t mode) {
    const int made = sys::try_mkdir_at(dir, name, mode);
    if (made < 0 && made != -EEXIST) sys::fail(cat("mkdir(", quote(path + "/" + name), ")"), -made);
    UniqueFd fd = sys::open_at(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    if (made == 0)
        sys::fchmod(sys::open_at(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW).get(), mode,
                    path + "/" + name);  // the umask's no business
    const std::string problem = trusted_path::dir_problem(sys::fstat(fd.get(), name), ::geteuid(),
                                                          ::getegid(), trusted_path::Role::own);
    if (!problem.empty())
        throw PlanError(
            cat("--overlay ", quote(path), ": ", quote(path + "/" + name), " ", problem),
            cat("DIR and its upper and work directories are yours alone (rm -rf ", quote(path),
                " starts afresh)"));
    return fd;
}

// DIR below ROOTFS (or ROOTFS itself) would have the sandbox write ROOTFS. `dir`: DIR as the
// kernel resolved it, or before it exists, its existing part resolved (nothing made yet).
void check_outside(const std::string& dir, const std::string& path, const std::string& rootfs) {
    const UniqueFd root = sys::open_at(AT_FDCWD, rootfs, O_PATH | O_DIRECTORY);
    const std::string r = sys::read_fd_link(root.get());
    if (dir == r || starts_with(dir, r == "/" ? r : r + "/"))
        throw PlanError(cat("--overlay ", quote(path), " lies inside ROOTFS ", quote(rootfs),
                            ", which gpubox never writes"),
                        "choose a DIR outside ROOTFS");
}

// DIR/origin: "origin\n", written anew (replacing what it said) by a rename in DIR.
void write_origin(int dir, const std::string& path, const std::string& origin) {
    const std::string tmp = cat("origin.", ::getpid());
    ::unlinkat(dir, tmp.c_str(), 0);
    const UniqueFd fd =
        sys::open_at(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    sys::write_all(fd.get(), origin + "\n", path + "/" + tmp);
    sys::rename_at(dir, tmp, "origin");
}

}  // namespace

std::string read_origin(int dir) {
    const int fd = sys::try_open_at(dir, "origin", O_RDONLY | O_NOFOLLOW);
    if (fd == -ENOENT) return "";
    if (fd < 0) sys::fail("open(\"DIR/origin\")", -fd);
    const UniqueFd own(fd);
    std::string s = sys::read_all(fd, "DIR/origin", 4096);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

void check_origin(const std::string& dir, const std::string& recorded, const std::string& origin,
                  const char* force_hint) {
    if (recorded.empty() || recorded == origin) return;
    throw PlanError(cat("--overlay ", quote(dir), " was made over ", recorded, ", not ", origin),
                    cat("its files would shadow this one's (and what it deleted stays deleted): "
                        "give this run another DIR",
                        force_hint));
}

// Filesystems whose dentries revalidate (network and FUSE ones): overlayfs refuses them as an
// upper layer ("not supported as upperdir"), as it refuses another overlay.
std::string upper_fs_problem(long f_type) {
    switch (static_cast<unsigned long>(f_type)) {
        case 0x0bd00bd0: return "Lustre";
        case 0x6969: return "NFS";
        case 0x794c7630: return "another overlay";
        case 0xff534d42:
        case 0xfe534d42: return "SMB/CIFS";
        case 0x65735546: return "FUSE";
        case 0x01021997: return "9p";
        default: return "";
    }
}

KeptOverlay open_kept_overlay(const std::string& dir, const std::string& rootfs,
                              const std::string& origin, bool force) {
    KeptOverlay k;
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(dir).lexically_normal();
    check_outside(std::filesystem::weakly_canonical(abs, ec).string(), abs.string(), rootfs);
    UniqueFd at = trusted_path::open_state_dir(
        dir, trusted_path::Missing::create, "--overlay",
        "--overlay takes a directory of your own (gpubox makes a missing one, mode 0700)");
    k.dir = sys::read_fd_link(at.get());
    if (const auto fs = sys::try_fstatfs(at.get()))
        if (const std::string what = upper_fs_problem(fs->f_type); !what.empty())
            throw PlanError(cat("--overlay ", quote(k.dir), ": on ", what,
                                ", which overlayfs refuses as an upper layer"),
                            kLocalHint);
    check_outside(k.dir, k.dir, rootfs);  // again, by the fd: nothing was replaced on the way
    if (rootfs::has_submounts(rootfs))
        throw PlanError(cat("--overlay: ROOTFS ", quote(rootfs),
                            " has mounts below it, which overlayfs cannot take as a lower layer "
                            "in a user namespace"),
                        "run a ROOTFS without mounts below it");
    k.lock = sys::open_at(at.get(), ".", O_RDONLY | O_DIRECTORY);
    if (!sys::flock_exclusive(k.lock.get(), false, k.dir))
        throw PlanError(cat("--overlay ", quote(k.dir), ": in use by another gpubox run"),
                        "overlayfs cannot share an upper layer between two sandboxes: wait for "
                        "that run to end, or give this one another DIR");
    const std::string made_over =
        origin.empty()
            ? cat("ROOTFS ", quote(sys::read_fd_link(sys::open_at(AT_FDCWD, rootfs, O_PATH).get())))
            : origin;
    const std::string recorded = read_origin(at.get());
    if (!force) check_origin(k.dir, recorded, made_over, ", or --force-overlay to reuse it");
    if (recorded != made_over) write_origin(at.get(), k.dir, made_over);
    k.upper = open_layer_dir(at.get(), k.dir, "upper", 0755);
    k.work = open_layer_dir(at.get(), k.dir, "work", 0700);
    return k;
}

void open_up_kept_overlay(const KeptOverlay& k) {
    if (!k.work.valid()) return;
    try {
        sys::fchmod_at(k.work.get(), "work", 0700);
    } catch (const SysError&) {}  // none made (the run failed first), or not ours to fix
}

}  // namespace gpubox::launcher
