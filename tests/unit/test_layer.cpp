// The monitor's half of the layer: the GPU's entries, made in the late directory that init
// passes over, must be what init would have made in its layer, whatever the monitor's umask.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sys.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/view.hpp"
#include "tests/unit/in_child.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace gpubox;
using namespace gpubox::rootfs;

namespace {

struct Dirs : test::TempDir {
    Dirs() : TempDir("layer") {
        fs::create_directories(dir / "image/usr/lib/x86_64-linux-gnu");
        fs::create_directories(dir / "image/usr/bin");
        fs::create_directories(dir / "image/etc");
        fs::create_directories(dir / "late");
        fs::permissions(dir / "image/usr/lib", fs::perms(0750));
        fs::create_symlink("usr/lib", dir / "image/lib");  // merged /usr, as Debian has it
        std::ofstream(dir / "image/etc/ld.so.cache") << "the image's";
        std::ofstream(dir / "driver.so") << "host";
    }
};

std::string mode_of(const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) < 0) return "missing";
    std::ostringstream s;
    s << (S_ISDIR(st.st_mode)   ? "d"
          : S_ISLNK(st.st_mode) ? "l"
          : S_ISREG(st.st_mode) ? "f"
                                : "?")
      << std::oct << (st.st_mode & 07777);
    return s.str();
}

std::string list(const fs::path& top) {
    std::vector<std::string> lines;
    for (auto it = fs::recursive_directory_iterator(top); it != fs::recursive_directory_iterator();
         ++it)
        lines.push_back(it->path().lexically_relative(top).string() + " " + mode_of(it->path()) +
                        "\n");
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string& l : lines) out += l;
    return out;
}

}  // namespace

TEST_CASE("the monitor makes the GPU's entries in the late directory as init would") {
    Dirs d;
    PlanInputs in;
    in.root = {(d.dir / "image").string(), RootMode::overlay, 0};
    const MountPlan base = build_mount_plan(in);
    const std::string lib = "/usr/lib/x86_64-linux-gnu/";
    std::vector<MountOp> ops = place_device_ops(
        base, {BindDev{"/dev/null", "/dev/nvidia0", Need::required, makedev(1, 3)},
               Tmpfs{"/proc/driver", 0555, true, true, Place::kernel},
               MakeDir{"/proc/driver/nvidia", 0555},
               WriteFile{"/proc/driver/nvidia/params", "ModifyDeviceFiles: 0\n", 0444},
               Bind{d.dir.string(), "/proc/driver/nvidia/gpus/0000:3b:00.0", true, Need::required,
                    Place::image, SourceKind::dir},
               Bind{(d.dir / "driver.so").string(), lib + "libcuda.so.550", true, Need::required,
                    Place::image, SourceKind::file},
               Symlink{"libcuda.so.550", lib + "libcuda.so.1"},
               WriteFile{"/etc/ld.so.cache", "gpubox's", 0644},
               Bind{d.dir.string(), "/lib/firmware/nvidia/550", true, Need::optional, Place::image,
                    SourceKind::dir},
               Bind{(d.dir / "absent").string(), "/usr/bin/nvidia-absent", true, Need::optional,
                    Place::image, SourceKind::unknown}});
    const MountPlan full = with_device_ops(base, ops);
    UniqueFd image = sys::open_at(AT_FDCWD, (d.dir / "image").string(), O_PATH | O_DIRECTORY);
    UniqueFd late = sys::open_at(AT_FDCWD, (d.dir / "late").string(), O_PATH | O_DIRECTORY);
    const std::string image_before = list(d.dir / "image");

    const mode_t old = ::umask(077);  // a cautious user's: the entries' modes must not change
    const std::vector<bool> prepared =
        prepare_late_entries(full, base.user_from, ops.size(), image.get(), late.get());
    CHECK(::umask(old) == 077);  // and the monitor's own is back

    // Mount points, links and files only for image-place ops; /dev is gpubox's. The read-only
    // /proc/driver tmpfs becomes a directory at its own path, filled (its bind's mount point
    // included), for init to bind from the overlay. The firmware directory lands where the
    // image's /lib link leads, with the image's modes on the way; a missing optional source
    // gets no mount point.
    CHECK(list(d.dir / "late") ==
          "etc d755\n"
          "etc/ld.so.cache f644\n"
          "proc d755\n"
          "proc/driver d555\n"
          "proc/driver/nvidia d555\n"
          "proc/driver/nvidia/gpus d755\n"
          "proc/driver/nvidia/gpus/0000:3b:00.0 d755\n"
          "proc/driver/nvidia/params f444\n"
          "usr d755\n"
          "usr/lib d750\n"
          "usr/lib/firmware d755\n"
          "usr/lib/firmware/nvidia d755\n"
          "usr/lib/firmware/nvidia/550 d755\n"
          "usr/lib/x86_64-linux-gnu d755\n"
          "usr/lib/x86_64-linux-gnu/libcuda.so.1 l777\n"
          "usr/lib/x86_64-linux-gnu/libcuda.so.550 f644\n");
    CHECK(fs::read_symlink(d.dir / "late/usr/lib/x86_64-linux-gnu/libcuda.so.1") ==
          "libcuda.so.550");
    std::ifstream cache(d.dir / "late/etc/ld.so.cache");
    CHECK(std::string(std::istreambuf_iterator<char>(cache), {}) == "gpubox's");
    // Done here, so init skips them: the link and the files, and the tmpfs (bound from there).
    // Binds still mount at apply time.
    CHECK(prepared ==
          std::vector<bool>{false, true, true, true, false, false, true, true, false, false});
    CHECK(list(d.dir / "image") == image_before);
}

TEST_CASE("a kernel-place tmpfs is left to init where the image's own directory would merge in") {
    Dirs d;
    PlanInputs in;
    in.root = {(d.dir / "image").string(), RootMode::overlay, 0};
    const MountPlan base = build_mount_plan(in);
    const std::vector<MountOp> ops =
        place_device_ops(base, {Tmpfs{"/proc/driver", 0555, true, true, Place::kernel},
                                MakeDir{"/proc/driver/nvidia", 0555}});
    const MountPlan full = with_device_ops(base, ops);
    UniqueFd late = sys::open_at(AT_FDCWD, (d.dir / "late").string(), O_PATH | O_DIRECTORY);
    auto prepare = [&] {
        UniqueFd image = sys::open_at(AT_FDCWD, (d.dir / "image").string(), O_PATH | O_DIRECTORY);
        return prepare_late_entries(full, base.user_from, ops.size(), image.get(), late.get());
    };
    // A link (even to a directory), a file, or no /proc at all: the layer's directory hides it.
    fs::create_directories(d.dir / "elsewhere");
    fs::create_symlink("/elsewhere", d.dir / "image/proc");
    CHECK(prepare() == std::vector<bool>{true, true});
    fs::remove_all(d.dir / "late/proc");
    fs::remove(d.dir / "image/proc");
    fs::create_directories(d.dir / "image/proc");
    fs::permissions(d.dir / "image/proc", fs::perms(0555));
    std::ofstream(d.dir / "image/proc/driver") << "a file";
    CHECK(prepare() == std::vector<bool>{true, true});
    CHECK(mode_of(d.dir / "late/proc") == "d555");  // the image's mode on the way
    fs::remove_all(d.dir / "late/proc");
    // A directory would show through the overlay beside the layer's entries: init mounts a tmpfs.
    fs::permissions(d.dir / "image/proc", fs::perms(0755));
    fs::remove(d.dir / "image/proc/driver");
    fs::create_directories(d.dir / "image/proc/driver/nvidia/gpus/0000:99:00.0");
    CHECK(prepare() == std::vector<bool>{false, false});
    CHECK(list(d.dir / "late").empty());
}

TEST_CASE("a read-only root needs no layer where the image has every mount point, plainly") {
    test::TempDir d("bound");
    const fs::path image = d.dir / "image";
    for (const char* dir : {"proc", "sys", "dev", "tmp", "run", "data"})
        fs::create_directories(image / dir);
    PlanInputs in;
    in.root = {image.string(), RootMode::read_only, 0};
    const auto empty = [&](const PlanInputs& p) {
        const UniqueFd fd(::open(image.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        return layer_is_empty(build_mount_plan(p), fd.get());
    };
    CHECK(empty(in));
    // A --bind onto a directory the image has: still nothing to make.
    PlanInputs with_bind = in;
    with_bind.user_mounts = {UserMount{UserMount::Type::ro_bind, d.dir.string(), "/data"}};
    CHECK(empty(with_bind));
    // One the image lacks, a mount point where the image has a link, or a file where a
    // directory is needed: the layer makes them (an overlay root then).
    PlanInputs missing = in;
    missing.user_mounts = {UserMount{UserMount::Type::ro_bind, d.dir.string(), "/opt/data"}};
    CHECK_FALSE(empty(missing));
    fs::remove(image / "run");
    fs::create_symlink("tmp", image / "run");
    CHECK_FALSE(empty(in));
    fs::remove(image / "run");
    std::ofstream(image / "run") << "a file";
    CHECK_FALSE(empty(in));
    fs::remove(image / "run");
    CHECK_FALSE(empty(in));
}

// has_submounts' two routes, in a mount namespace of the test's own (a user namespace's: no
// privilege needed), on a tmpfs of its own with two more mounted below it, one in the other. A
// child process runs it; its result: which check failed (0: none; 77: no user namespaces here).
int compare_submount_routes(const std::string& top) noexcept {
    try {
        const std::string uids = "0 " + std::to_string(::getuid()) + " 1",
                          gids = "0 " + std::to_string(::getgid()) + " 1";
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 77;
        std::ofstream("/proc/self/setgroups") << "deny";
        std::ofstream("/proc/self/uid_map") << uids;
        std::ofstream("/proc/self/gid_map") << gids;
        if (::mount("none", top.c_str(), "tmpfs", 0, nullptr) != 0) return 2;
        for (const char* dir : {"/root", "/roo", "/other"}) fs::create_directories(top + dir);
        for (const char* dir : {"/root/sub", "/root/sub/deeper"}) {
            fs::create_directories(top + dir);
            if (::mount("none", (top + dir).c_str(), "tmpfs", 0, nullptr) != 0) return 3;
        }
        const std::pair<std::string, bool> cases[] = {
            {top, true},           {top + "/root", true},   {top + "/root/sub", true},
            {top + "/roo", false}, {top + "/other", false}, {top + "/root/sub/deeper", false}};
        int code = 10;
        for (const auto& [path, below] : cases) {
            ++code;
            if (has_submounts_in_mountinfo(path) != below || has_submounts(path) != below)
                return code;
            const std::optional<bool> listed = has_submounts_listed(path);
            // Two mounts at most below each: the kernel's list answers from 6.8.
            if (listed ? *listed != below : sys::kernel_at_least(6, 8)) return code + 20;
        }
        return 0;
    } catch (...) {
        return 4;
    }
}

TEST_CASE("has_submounts: the kernel's list of the mounts below one answers as mountinfo does") {
    test::TempDir d("submounts");
    const int status =
        test::exit_status_in_child([&] { return compare_submount_routes(d.dir.string()); });
    if (status == 77) {
        WARN("no user namespaces here: has_submounts' routes not compared");
        return;
    }
    CHECK(status == 0);
}
