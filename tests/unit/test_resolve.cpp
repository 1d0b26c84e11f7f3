// open_in_root against a tree of hostile symlinks, through openat2 and through the fallback walk
// (forced by a seccomp filter that makes openat2 ENOSYS, as an outer sandbox might).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/resolve.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace gpubox;

namespace {

struct TempTree : test::TempDir {
    TempTree() : TempDir("resolve") {
        fs::create_directories(dir / "root/dir/sub");
        std::ofstream(dir / "root/file") << "in";
        std::ofstream(dir / "outside") << "out";
        fs::create_symlink("../file", dir / "root/dir/up");
        fs::create_symlink("/file", dir / "root/dir/abs");
        fs::create_symlink("../../../../outside", dir / "root/escape");
        fs::create_symlink("/../../outside", dir / "root/escape_abs");
        fs::create_symlink("b", dir / "root/a");
        fs::create_symlink("a", dir / "root/b");
        fs::create_symlink("/proc/self/root/outside", dir / "root/magic");
        fs::create_symlink("dir", dir / "root/dirlink");
    }
};

// What the entry resolves to: "file", "sub" (the directory), or an errno name.
std::string resolve(int root, const std::string& p, bool fallback) {
    int fd = fallback ? rootfs::walk_in_root(root, p, O_RDONLY)
                      : rootfs::try_open_in_root(root, p, O_RDONLY);
    if (fd < 0)
        return fd == -ENOENT  ? "ENOENT"
               : fd == -ELOOP ? "ELOOP"
               : fd == -EXDEV ? "EXDEV"
                              : "E" + std::to_string(-fd);
    char buf[8] = {};
    ssize_t n = ::read(fd, buf, 7);
    ::close(fd);
    return n < 0 ? "dir" : std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

TEST_CASE("open_in_root never leaves the root") {
    TempTree t;
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    auto [path, expect] = GENERATE(table<std::string, std::string>({{"/file", "in"},
                                                                    {"dir/up", "in"},
                                                                    {"dir/abs", "in"},
                                                                    {"escape", "ENOENT"},
                                                                    {"escape_abs", "ENOENT"},
                                                                    {"a", "ELOOP"},
                                                                    {"/../../file", "in"},
                                                                    {"dirlink/sub", "dir"},
                                                                    {"/dirlink/../file", "in"}}));
    for (bool fallback : {false, true}) {
        INFO(path << (fallback ? " (walk)" : " (openat2)"));
        CHECK(resolve(root.get(), path, fallback) == expect);
    }
}

TEST_CASE("a \"..\" that races a mount elsewhere on the host still resolves") {
    // openat2(RESOLVE_IN_ROOT) answers EAGAIN where a mount or a rename anywhere on the host
    // raced a "..": on a node that starts sandboxes side by side, that is all the time.
    TempTree t;
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    pid_t churn = ::fork();
    REQUIRE(churn >= 0);
    if (churn == 0) {  // another sandbox's mounts, as fast as they come, until killed
        try {
            if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(1);
            for (;;) {
                UniqueFd fs = sys::fsopen("tmpfs");
                sys::fsconfig_create(fs.get(), "tmpfs");
                sys::fsmount(fs.get(), "tmpfs",
                             0);  // made and dropped: two changes to the mount table
            }
        } catch (...) {
            ::_exit(2);
        }
    }
    int wrong = 0;
    for (int i = 0; i < 20000; ++i)
        wrong += resolve(root.get(), "dir/sub/../../file", false) != "in";
    int status = 0;
    ::kill(churn, SIGKILL);
    REQUIRE(::waitpid(churn, &status, 0) == churn);
    REQUIRE(WIFSIGNALED(status));  // it churned all along
    CHECK(wrong == 0);
}

TEST_CASE("magic links are refused by openat2 and not followed out by the walk") {
    TempTree t;
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    CHECK(resolve(root.get(), "magic", false) != "out");
    CHECK(resolve(root.get(), "magic", true) != "out");
}

TEST_CASE("map_regular_in_root maps regular files only, resolved inside the root") {
    TempTree t;
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    REQUIRE(::mkfifo((t.dir / "root/fifo").c_str(), 0644) == 0);
    std::ofstream(t.dir / "root/empty").flush();
    auto mapped = [&](const std::string& p, std::size_t limit = 100) {
        const auto m = rootfs::map_regular_in_root(root.get(), p, limit);
        return m ? "[" + std::string(m->bytes()) + "]" : std::string("none");
    };
    CHECK(mapped("/file") == "[in]");
    CHECK(mapped("dir/abs") == "[in]");  // "/file" in the root, not the host's
    CHECK(mapped("escape") == "none");
    CHECK(mapped("fifo") == "none");  // and it returns: nothing opens it for reading
    CHECK(mapped("dir") == "none");
    CHECK(mapped("missing") == "none");
    CHECK(mapped("empty") == "[]");
    CHECK(mapped("/file", 1) == "none");  // over the limit
    rootfs::MappedFile a = *rootfs::map_regular_in_root(root.get(), "/file", 100), b;
    b = std::move(a);
    CHECK(a.bytes().empty());
    CHECK(b.bytes() == "in");
}

TEST_CASE("a mapped file that shrinks reads as zeros past its new end, and says so") {
    TempTree t;
    const long page = ::sysconf(_SC_PAGESIZE);
    std::ofstream(t.dir / "root/cache") << std::string(3 * static_cast<std::size_t>(page), 'x');
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    auto whole = rootfs::map_regular_in_root(root.get(), "/file", 100);
    auto m = rootfs::map_regular_in_root(root.get(), "/cache", 1 << 20);
    REQUIRE(m);
    REQUIRE(::truncate((t.dir / "root/cache").c_str(), page) == 0);  // as a rewrite in place would
    const std::string_view bytes = m->bytes();  // read whole: no SIGBUS ends the test
    CHECK(std::count(bytes.begin(), bytes.end(), 'x') == page);
    CHECK(std::count(bytes.begin(), bytes.end(), '\0') == 2 * page);
    CHECK(m->truncated());
    CHECK_FALSE(whole->truncated());

    // Elsewhere, SIGBUS keeps its effect: a mapping gpubox does not guard still kills.
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        try {
            std::ofstream(t.dir / "other") << std::string(2 * static_cast<std::size_t>(page), 'y');
            UniqueFd fd = sys::open_at(AT_FDCWD, (t.dir / "other").string(), O_RDONLY);
            auto* p = static_cast<volatile const char*>(
                ::mmap(nullptr, 2 * page, PROT_READ, MAP_PRIVATE, fd.get(), 0));
            if (::ftruncate(sys::open_at(AT_FDCWD, (t.dir / "other").string(), O_WRONLY).get(),
                            0) != 0)
                ::_exit(2);
            ::dup2(sys::open_at(AT_FDCWD, "/dev/null", O_WRONLY).get(),
                   STDERR_FILENO);            // ASan's report, if any
            ::_exit(p[page] == 'y' ? 3 : 4);  // faults: the file has no page there any more
        } catch (...) {
            ::_exit(5);  // never back into the test runner
        }
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
#if defined(__SANITIZE_ADDRESS__)
    CHECK(
        (WIFEXITED(status) && WEXITSTATUS(status) == 1));  // the disposition before: ASan's report
#else
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGBUS);
#endif
}

TEST_CASE("open_in_root falls back when an outer seccomp filter answers ENOSYS for openat2") {
    TempTree t;
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (seccomp_load(ctx) != 0) ::_exit(2);
        int root = ::open((t.dir / "root").c_str(), O_PATH | O_DIRECTORY);
        bool ok =
            resolve(root, "dir/abs", false) == "in" && resolve(root, "escape", false) == "ENOENT";
        ::_exit(ok ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

// The modes of the one in-root walk, on the same hostile tree: canonical (the layer's parents),
// create (the executor's mount points), and the one hop limit the kernel also keeps.
namespace {

std::string joined(const rootfs::Resolved& r) {
    std::string out;
    for (std::size_t i = 0; i < r.parts.size(); ++i)
        out += "/" + r.parts[i] + (r.modes[i] ? "" : "?");  // "?": missing in the root
    return out.empty() ? "/" : out;
}

}  // namespace

TEST_CASE("resolve_in_root, canonical: the path the kernel will reach, missing parts as spelled") {
    TempTree t;
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    using rootfs::ResolveMode;
    const auto canonical = [&](const std::string& p, const rootfs::ResolveHooks& hooks = {}) {
        rootfs::Resolved r =
            rootfs::resolve_in_root(root.get(), p, ResolveMode::canonical, O_PATH, hooks);
        UniqueFd held(r.fd);
        return joined(r) +
               (r.fd >= 0         ? " fd"
                : r.fd == -ENOENT ? ""
                                  : " E" + std::to_string(-r.fd)) +
               (r.stopped ? " stopped" : "");
    };
    CHECK(canonical("dirlink/sub") == "/dir/sub fd");
    CHECK(canonical("dirlink/sub/new/more") == "/dir/sub/new?/more?");
    CHECK(canonical("dir/sub/../../dirlink") == "/dir fd");
    CHECK(canonical("escape") == "/outside?");  // inside the root, never the host's
    CHECK(canonical("escape_abs") == "/outside?");
    CHECK(canonical("new/../dir") == "/dir fd");  // ".." past a missing part, lexically
    CHECK(canonical("a/x") == "/ E40");           // the loop: ELOOP
    CHECK(canonical("file/x") == "/ E20");        // ENOTDIR
    rootfs::ResolveHooks stop;
    stop.stop = [](const std::vector<std::string>& parts) {
        return parts.size() == 1 && parts[0] == "dir";
    };
    CHECK(canonical("dirlink/sub", stop) == "/dir? stopped");
}

TEST_CASE("resolve_in_root, create: missing parts made where the root's links lead, inside it") {
    TempTree t;
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    std::vector<std::string> made;
    rootfs::ResolveHooks hooks;
    hooks.make = [&](int dir, const std::string& name, bool last) {
        made.push_back(name + (last ? "" : "/"));
        if (last) sys::mknod_file_at(dir, name, 0644);
        else sys::mkdir_at(dir, name, 0755);
    };
    const auto create = [&](const std::string& p) {
        made.clear();
        rootfs::Resolved r =
            rootfs::resolve_in_root(root.get(), p, rootfs::ResolveMode::create, O_PATH, hooks);
        UniqueFd held(r.fd);
        return r.fd >= 0 ? join(made, " ") : "E" + std::to_string(-r.fd);
    };
    CHECK(create("dirlink/new/leaf") == "new/ leaf");
    CHECK(fs::is_regular_file(t.dir / "root/dir/new/leaf"));
    CHECK(create("dirlink/new/leaf").empty());  // there now: nothing more made
    CHECK(create("escape") == "outside");       // the host's file is not touched
    CHECK(fs::is_regular_file(t.dir / "root/outside"));
    std::string host;
    std::getline(std::ifstream(t.dir / "outside"), host);
    CHECK(host == "out");
    CHECK(create("a/x") == "E40");
    CHECK(made.empty());
}

TEST_CASE("the walk gives up after kMaxSymlinkHops links, exactly where openat2 does") {
    TempTree t;
    // l0 -> l1 -> ... -> l40 -> file: from l1, kMaxSymlinkHops links; from l0, one more.
    for (int i = 0; i < rootfs::kMaxSymlinkHops; ++i)
        fs::create_symlink("l" + std::to_string(i + 1), t.dir / ("root/l" + std::to_string(i)));
    fs::create_symlink("file", t.dir / ("root/l" + std::to_string(rootfs::kMaxSymlinkHops)));
    UniqueFd root = sys::open_at(AT_FDCWD, (t.dir / "root").string(), O_PATH | O_DIRECTORY);
    for (bool fallback : {false, true}) {
        INFO("fallback walk: " << fallback);
        CHECK(resolve(root.get(), "l1", fallback) == "in");
        CHECK(resolve(root.get(), "l0", fallback) == "ELOOP");
    }
}
