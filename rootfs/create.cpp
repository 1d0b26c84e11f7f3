#include "rootfs/create.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"

namespace fs = std::filesystem;

namespace gpubox::rootfs {
namespace {

#if defined(__x86_64__)
constexpr const char* kLoader = "/lib64/ld-linux-x86-64.so.2";
constexpr const char* kTriplet = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr const char* kLoader = "/lib/ld-linux-aarch64.so.1";
constexpr const char* kTriplet = "aarch64-linux-gnu";
#else
#error "gpubox rootfs create: unsupported architecture"
#endif

const char* const kGlibc[] = {"libc.so.6",  "libm.so.6",      "libdl.so.2",    "libpthread.so.0",
                              "librt.so.1", "libresolv.so.2", "libgcc_s.so.1", "libstdc++.so.6"};

// `busybox --list`, run with an empty environment and no inherited fds but the pipe.
std::vector<std::string> busybox_applets(const std::string& busybox) {
    UniqueFd rd, wr;
    sys::pipe(rd, wr);
    const pid_t pid = sys::fork(busybox + " --list");
    if (pid == 0) {  // async-signal-safe calls only until execve: nothing here may throw
        ::dup2(wr.get(), STDOUT_FILENO);
        ::close_range(3, ~0U, 0);
        char* const argv[] = {const_cast<char*>(busybox.c_str()), const_cast<char*>("--list"),
                              nullptr};
        char* const envp[] = {nullptr};
        ::execve(busybox.c_str(), argv, envp);
        ::_exit(127);
    }
    wr.reset();
    std::string out;
    try {
        out = sys::read_all(rd.get(), busybox + " --list");
    } catch (...) {
        sys::kill_and_reap(pid);  // no zombie left behind by a failed read
        throw;
    }
    const int status = sys::wait_status(pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw SetupError(
            cat(quote(busybox), " --list failed; install busybox-static or pass --busybox"));
    std::vector<std::string> applets;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line.find('/') == std::string::npos) applets.push_back(line);
    return applets;
}

void write_text(const fs::path& p, const std::string& text) {
    std::ofstream f(p);
    f << text;
    if (!f) throw SetupError(cat("write ", quote(p.string()), " failed"));
}

void copy_lib(const fs::path& from, const fs::path& to_dir) {
    fs::copy_file(from, to_dir / from.filename(), fs::copy_options::overwrite_existing);
    fs::permissions(to_dir / from.filename(), fs::perms(0755));
}

// An empty directory that is there already is filled only if it is the caller's own and
// nobody else may write it: another user who made it first could change the image afterwards
// (common/trusted_path.hpp, the rule for a state directory itself). A new one is made.
void refuse_foreign_dir(const std::string& dir) {
    const UniqueFd fd = sys::open_at(AT_FDCWD, dir, O_PATH | O_DIRECTORY);
    const std::string problem = trusted_path::dir_problem(sys::fstat(fd.get(), dir), ::geteuid(),
                                                          ::getegid(), trusted_path::Role::own);
    if (!problem.empty())
        throw PlanError(cat("rootfs create: ", quote(dir), " ", problem),
                        "name a new directory (gpubox makes it), or one only you can write");
}

}  // namespace

void create_rootfs(const CreateOptions& opt) {
    const fs::path root(opt.dir);
    std::error_code ec;
    if (fs::exists(root, ec) && !(fs::is_directory(root) && fs::is_empty(root)))
        throw UsageError(
            cat("rootfs create: ", quote(opt.dir), " exists and is not an empty directory"));
    if (!ec && fs::exists(root, ec)) refuse_foreign_dir(opt.dir);
    if (sys::try_faccessat(opt.busybox, X_OK) != 0)
        throw PlanError(cat("rootfs create: no busybox at ", quote(opt.busybox)),
                        "install Debian's busybox-static, or pass --busybox PATH");
    try {
        for (const char* d : {"usr/bin", "usr/sbin", "usr/lib", "etc", "proc", "sys", "dev", "tmp",
                              "run", "root", "home", "var/tmp"})
            fs::create_directories(root / d);
        fs::create_symlink("usr/bin", root / "bin");
        fs::create_symlink("usr/sbin", root / "sbin");
        fs::create_symlink("usr/lib", root / "lib");
        fs::permissions(root / "tmp", fs::perms(01777));
        fs::copy_file(opt.busybox, root / "usr/bin/busybox");
        fs::permissions(root / "usr/bin/busybox", fs::perms(0755));
        for (const std::string& a : busybox_applets(opt.busybox))
            if (a != "busybox" && !fs::exists(fs::symlink_status(root / "usr/bin" / a)))
                fs::create_symlink("busybox", root / "usr/bin" / a);
        if (opt.with_glibc) {
            const fs::path libdir = root / "usr/lib" / kTriplet;
            fs::create_directories(libdir);
            const fs::path loader(kLoader);
            fs::create_directories(root / loader.parent_path().relative_path());
            copy_lib(fs::canonical(loader), root / loader.parent_path().relative_path());
            if (fs::canonical(loader).filename() != loader.filename())
                fs::rename(
                    root / loader.parent_path().relative_path() / fs::canonical(loader).filename(),
                    root / loader.relative_path());
            for (const char* lib : kGlibc)
                for (const char* dir : {"/lib/", "/usr/lib/"}) {
                    fs::path p = fs::path(dir) / kTriplet / lib;
                    if (fs::exists(p)) {
                        fs::copy_file(fs::canonical(p), libdir / lib,
                                      fs::copy_options::overwrite_existing);
                        break;
                    }
                }
        }
        const uid_t uid = ::getuid();
        const gid_t gid = ::getgid();
        std::string passwd = "root:x:0:0:root:/root:/bin/sh\n";
        std::string group = "root:x:0:\n";
        if (uid != 0) passwd += cat("user:x:", uid, ":", gid, ":gpubox user:/tmp:/bin/sh\n");
        if (gid != 0) group += cat("user:x:", gid, ":\n");
        passwd += "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
        group += "nogroup:x:65534:\n";
        write_text(root / "etc/passwd", passwd);
        write_text(root / "etc/group", group);
        write_text(root / "etc/os-release", "NAME=\"gpubox minimal rootfs\"\nID=gpubox\n");
        write_text(root / "etc/hosts", "127.0.0.1 localhost\n::1 localhost\n");
    } catch (const fs::filesystem_error& e) {
        throw SetupError(cat("rootfs create: ", e.what()));
    }
}

}  // namespace gpubox::rootfs
