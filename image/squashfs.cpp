#include "image/squashfs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/store.hpp"
#include "image/tool.hpp"

namespace fs = std::filesystem;

namespace gpubox::image {
namespace {

// The tool's own last words for a failure line: its stderr's last non-empty line.
std::string last_line(const ToolResult& r) {
    std::string t = r.err.empty() ? r.out : r.err;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    const auto nl = t.rfind('\n');
    t = nl == std::string::npos ? t : t.substr(nl + 1);
    return t.empty() ? r.failure() : cat(t, " (", r.failure(), ")");
}

// f() with `dir` as gpubox's working directory, which the tools it starts inherit: a read-only
// mount (a view, which no read changes, not even an access time) or a detached one that no
// path names. gpubox is one thread where it does; its own cwd comes back after.
template <class F>
auto in_dir(int dir, const std::string& dir_name, F&& f) {
    if (dir == AT_FDCWD) return f();
    const UniqueFd here = sys::open_at(AT_FDCWD, ".", O_PATH | O_DIRECTORY);
    if (::fchdir(dir) != 0) sys::fail(cat("fchdir(", quote(dir_name), ")"), errno);
    try {
        auto r = f();
        if (::fchdir(here.get()) != 0) sys::fail("fchdir(the working directory)", errno);
        return r;
    } catch (...) {
        [[maybe_unused]] int ignored = ::fchdir(here.get());
        throw;
    }
}

ToolResult run_in(int dir, const std::string& dir_name, const std::string& tool,
                  const std::vector<std::string>& argv) {
    return in_dir(dir, dir_name, [&] { return run_tool({tool, {}}, argv, {}, false); });
}

}  // namespace

std::string find_system_tool(const std::string& name, const std::string& package) {
    for (const char* dir : {"/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/"})
        if (::access((dir + name).c_str(), X_OK) == 0) return dir + name;
    throw PlanError(cat(name, " is not installed (gpubox's single-file images need it)"),
                    cat("install it: apt install ", package, " (Debian, Ubuntu), dnf install ",
                        package, " (Fedora, RHEL)"));
}

bool is_squashfs_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    // O_NOATIME: reading the magic changes nothing, not even the access time. Only the file's
    // owner may ask for that; another's file is told by its name (and checked by unsquashfs
    // through a read-only mount before it is used).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOATIME);
    if (fd < 0) return errno == EPERM && (path.ends_with(".sqsh") || path.ends_with(".squashfs"));
    const UniqueFd own(fd);
    char magic[4] = {};
    return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
           ::pread(fd, magic, sizeof magic, 0) == 4 && std::memcmp(magic, "hsqs", 4) == 0;
}

void check_squashfs(int dir, const std::string& file) {
    const ToolResult r = run_in(dir, file, find_system_tool("unsquashfs", "squashfs-tools"),
                                {"unsquashfs", "-s", file});
    if (!r.ok()) throw PlanError(cat(quote(file), " is not a squashfs file: ", last_line(r)));
}

void make_squashfs(int src, const std::string& src_name, const std::string& out) {
    const ToolResult r =
        run_in(src, src_name, find_system_tool("mksquashfs", "squashfs-tools"),
               {"mksquashfs", ".", out, "-noappend", "-all-root", "-no-xattrs", "-quiet",
                "-no-progress", "-comp", "zstd", "-Xcompression-level", "3"});
    if (!r.ok()) {
        ::unlink(out.c_str());
        throw PlanError(cat("mksquashfs of ", src_name, ": ", last_line(r)));
    }
    try {
        check_squashfs(AT_FDCWD, out);
    } catch (...) {
        ::unlink(out.c_str());
        throw;
    }
}

std::string file_digest(const std::string& file) {
    const ToolResult r = run_tool({find_system_tool("sha256sum", "coreutils"), {}},
                                  {"sha256sum", "--", file}, {}, false);
    const std::string hex = r.out.substr(0, 64);
    if (!r.ok() || hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != hex.npos)
        throw PlanError(cat("sha256sum ", quote(file), ": ", last_line(r)));
    return "sha256:" + hex;
}

std::string file_key(const std::string& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) sys::fail(cat("stat(", quote(file), ")"), errno);
    return cat("f", st.st_dev, "-", st.st_ino, "-", st.st_size, "-", st.st_ctim.tv_sec,
               st.st_ctim.tv_nsec);
}

fs::path unpacked_tree(const fs::path& store, int dir_fd, const std::string& file,
                       const std::string& key) {
    const fs::path dir = store / "squashfs" / key;
    const fs::path tree = dir / "tree";
    struct stat st {};
    if (::lstat(tree.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return tree;
    check_squashfs(dir_fd, file);
    const fs::path tmp = make_temp_dir(store, cat("pull-", ::getpid(), "-sqsh"));
    try {
        const ToolResult r = run_in(dir_fd, file, find_system_tool("unsquashfs", "squashfs-tools"),
                                    {"unsquashfs", "-no-xattrs", "-quiet", "-no-progress", "-d",
                                     (tmp / "tree").string(), file});
        if (!r.ok()) throw PlanError(cat("unsquashfs ", quote(file), ": ", last_line(r)));
        StoreLock lock(store);
        if (const int e = sys::try_mkdir_at(AT_FDCWD, (store / "squashfs").string(), 0700);
            e < 0 && e != -EEXIST)
            sys::fail(cat("mkdir(", quote((store / "squashfs").string()), ")"), -e);
        if (::lstat(dir.c_str(), &st) != 0 && ::rename(tmp.c_str(), dir.c_str()) != 0)
            sys::fail(cat("rename(", quote(tmp.string()), " -> ", quote(dir.string()), ")"), errno);
    } catch (...) {
        remove_tree(tmp);
        throw;
    }
    std::error_code ec;
    if (fs::exists(tmp, ec)) remove_tree(tmp);
    return tree;
}

UniqueFd hold_unpacked(const fs::path& store, int dir_fd, const std::string& file,
                       const std::string& key, fs::path& tree) {
    for (;;) {
        tree = unpacked_tree(store, dir_fd, file, key);
        if (UniqueFd fd = hold_shared(tree.parent_path()); fd.valid()) return fd;  // else pruned
    }
}

pid_t spawn_squashfuse(int dir, const std::string& file, int fuse) {
    const std::string tool = find_system_tool("squashfuse_ll", "squashfuse");
    const UniqueFd null = sys::open_at(AT_FDCWD, "/dev/null", O_RDWR);
    return in_dir(dir, file, [&] {
        return companion::spawn({tool, {}}, {"squashfuse_ll", "-f", file, "/dev/fd/0"}, {},
                                {fuse, null.get(), 2});
    });
}

std::string fuse_problem() {
    const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fd >= 0) return ::close(fd), "";
    const int err = errno;
    struct stat st {};
    char mode[64] = "";
    if (::stat("/dev/fuse", &st) == 0)
        std::snprintf(mode, sizeof mode, " (mode 0%o, owner uid %u)", st.st_mode & 07777,
                      static_cast<unsigned>(st.st_uid));
    return cat("open(\"/dev/fuse\"): ", std::strerror(err), mode);
}

}  // namespace gpubox::image
