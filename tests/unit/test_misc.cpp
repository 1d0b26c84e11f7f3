#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "launcher/monitor/stdio.hpp"
#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "isolate/id_map.hpp"
#include "isolate/namespaces.hpp"
#include "isolate/spawn.hpp"
#include "launcher/monitor/environment.hpp"
#include "temp_dir.hpp"

using namespace gpubox;

TEST_CASE("namespaces: all by default, net only when not shared") {
    CHECK(isolate::to_string(isolate::plan_namespaces(false)) == "user,mnt,pid,ipc,uts,cgroup,net");
    CHECK((isolate::plan_namespaces(true).flags & CLONE_NEWNET) == 0);
}

TEST_CASE("id maps: init is root of the outer namespace, the workload sees the caller") {
    auto m = isolate::plan_id_maps(1000, 100, false);
    CHECK(m.outer_uid_map == "0 1000 1\n");
    CHECK(m.outer_gid_map == "0 100 1\n");
    CHECK(m.nested);
    CHECK(m.inner_uid_map == "1000 0 1\n");
    CHECK(m.inner_gid_map == "100 0 1\n");
    CHECK_FALSE(isolate::plan_id_maps(1000, 100, true).nested);
}

namespace {

struct Shared {
    pid_t wrote = 0;  // the child's pid, as it wrote it in our memory
    int depth = 0;    // how deep its recursion went
};

[[noreturn]] void write_then_exec(void* arg) {
    static_cast<Shared*>(arg)->wrote = ::getpid();
    ::execl("/bin/true", "true", static_cast<char*>(nullptr));
    ::_exit(127);
}

[[noreturn]] void exit_seven(void*) { ::_exit(7); }

// 1 KiB a frame, written (not a tail call): deep enough, it meets the stack's guard page.
int recurse(Shared* s) {
    volatile char frame[1024];
    frame[0] = static_cast<char>(++s->depth);
    return s->depth < (1 << 20) ? recurse(s) + frame[0] : 0;
}
[[noreturn]] void overflow(void* arg) {
    ::signal(SIGSEGV, SIG_DFL);  // Catch's handler is ours, in our memory (a caller has none)
    recurse(static_cast<Shared*>(arg));
    ::_exit(0);
}

std::uintptr_t child_stack = 0;  // where note_stack's frame was: written in our memory
[[noreturn]] void note_stack(void*) {
    volatile char here = 0;
    child_stack = reinterpret_cast<std::uintptr_t>(&here);
    ::_exit(0);
}

}  // namespace

TEST_CASE("spawn_until_exec: the child shares our memory, and we go on once it has exec'd") {
    Shared s;
    const pid_t pid = isolate::spawn_until_exec(write_then_exec, &s);
    CHECK(s.wrote == pid);  // written in our memory, before we went on
    const int status = sys::wait_status(pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // it ran /bin/true
}

TEST_CASE("spawn_until_exec: a child that exits without exec lets us go on too") {
    const int status = sys::wait_status(isolate::spawn_until_exec(exit_seven, nullptr));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("spawn_until_exec: a child past its stack meets the guard page, not our memory") {
    Shared s;
    const int status = sys::wait_status(isolate::spawn_until_exec(overflow, &s));
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGSEGV);
    CHECK(s.depth > 64);   // it had its 256 KiB: more than 64 frames of 1 KiB
    CHECK(s.depth < 512);  // and no more
}

TEST_CASE("spawn_until_exec: one stack for every call, kept mapped after the child") {
    // Unmapping it after each child cost 0.2-0.3 ms a run on the development VM.
    REQUIRE(WEXITSTATUS(sys::wait_status(isolate::spawn_until_exec(note_stack, nullptr))) == 0);
    const std::uintptr_t first = child_stack;
    unsigned char resident = 0;
    const auto page = static_cast<std::uintptr_t>(::getpagesize());
    // Still mapped: mincore fails with ENOMEM where nothing is.
    CHECK(::mincore(reinterpret_cast<void*>(first & ~(page - 1)), page, &resident) == 0);
    REQUIRE(WEXITSTATUS(sys::wait_status(isolate::spawn_until_exec(note_stack, nullptr))) == 0);
    CHECK(child_stack == first);  // the same frame, on the same stack
}

TEST_CASE("environment: clean defaults, later assignments win") {
    auto env =
        launcher::build_environment({{"A", "1"}, {"PATH", "/x"}, {"A", "2"}}, false, "xterm");
    CHECK(env ==
          std::vector<std::string>{"PATH=/x", "HOME=/tmp", "LANG=C.UTF-8", "TERM=xterm", "A=2"});
    CHECK(launcher::build_environment({}, true, nullptr)[1] == "HOME=/root");
}

TEST_CASE("exec candidates follow the sandbox's PATH") {
    using launcher::plan_exec_candidates;
    CHECK(plan_exec_candidates("ls", {"PATH=/a:/b"}) == std::vector<std::string>{"/a/ls", "/b/ls"});
    CHECK(plan_exec_candidates("./x", {"PATH=/a"}) == std::vector<std::string>{"./x"});
    CHECK(plan_exec_candidates("ls", {"PATH=/a::"}) ==
          std::vector<std::string>{"/a/ls", "./ls", "./ls"});
}

TEST_CASE("describe walks nested errors; hints name the setting") {
    std::exception_ptr e;
    try {
        try {
            throw SysError(ENOSPC, "clone3(0x7e020000)");
        } catch (...) {
            std::throw_with_nested(SetupError("spawn"));
        }
    } catch (...) {
        e = std::current_exception();
    }
    CHECK(describe(e) == "spawn: clone3(0x7e020000): No space left on device");
    CHECK(hint_for(e).find("user.max_user_namespaces") != std::string::npos);
}

namespace {

std::string hint_of(const SysError& s) { return hint_for(std::make_exception_ptr(s)); }

}  // namespace

TEST_CASE("hints match the syscall, errno and path, not the message's words") {
    // The same failures worded three ways: the hint is the same, as it is keyed on values.
    for (const char* words : {"clone3(0x7e020000)", "made up words", ""}) {
        CHECK_THAT(hint_of(SysError(Syscall::clone3, ENOSPC, words)),
                   Catch::Matchers::Contains("user.max_user_namespaces"));
        CHECK_THAT(hint_of(SysError(Syscall::unshare, EPERM, words)),
                   Catch::Matchers::Contains("apparmor_restrict_unprivileged_userns"));
        CHECK_THAT(hint_of(SysError(Syscall::write, EPERM, words, "/proc/42/uid_map")),
                   Catch::Matchers::Contains("apparmor_restrict_unprivileged_userns"));
        CHECK_THAT(hint_of(SysError(Syscall::fsopen, EPERM, words, "proc")),
                   Catch::Matchers::Contains("fresh /proc"));
        CHECK_THAT(hint_of(SysError(Syscall::fsconfig, EPERM, words, "sysfs")),
                   Catch::Matchers::Contains("drop --share-net"));
        CHECK_THAT(hint_of(SysError(Syscall::fsmount, ENOSPC, words, "tmpfs")),
                   Catch::Matchers::Contains("fs.mount-max"));
        CHECK_THAT(hint_of(SysError(Syscall::fsconfig, EINVAL, words, "overlay")),
                   Catch::Matchers::Contains("overlayfs refused"));
        CHECK_THAT(hint_of(SysError(Syscall::seccomp, EINVAL, words)),
                   Catch::Matchers::Contains("CONFIG_SECCOMP_FILTER"));
        CHECK_THAT(hint_of(SysError(Syscall::openat2, ENOENT, words, "/dev/nvidia-uvm")),
                   Catch::Matchers::Contains("nvidia-modprobe"));
    }
    // Another errno, call or path: no hint.
    CHECK(hint_of(SysError(Syscall::clone3, ENOMEM, "clone3(0x7e020000)")).empty());
    CHECK(hint_of(SysError(Syscall::fsopen, EPERM, "fsopen(\"tmpfs\")", "tmpfs")).empty());
    CHECK(hint_of(SysError(Syscall::openat2, ENOENT, "x", "/dev/nvidia0")).empty());
    CHECK(hint_of(SysError(Syscall::mount_setattr, ENOSPC, "mount_setattr(\"/\")", "/")).empty());
    // A message naming the call, where the value says otherwise, gets none.
    CHECK(hint_of(SysError(Syscall::read, EPERM, "clone3(0x7e020000)")).empty());
}

TEST_CASE("a SysError given only its text reads the call and path from it") {
    const SysError s(ENOENT, "open_tree(\"/dev/nvidia-uvm\", OPEN_TREE_CLONE)");
    CHECK(s.call == Syscall::open_tree);
    CHECK(s.path == "/dev/nvidia-uvm");
    CHECK(SysError(EPERM, "fsopen(\"a\\\"b\")").path == "a\"b");
    CHECK(SysError(EPERM, "check \"/x\": not the device").call == Syscall::unknown);
    CHECK(SysError(EPERM, "pidfd_open(7)").path.empty());
}

TEST_CASE("every Syscall has one name, and the name gives it back") {
    for (int i = static_cast<int>(Syscall::open); i <= static_cast<int>(Syscall::tcsetattr); ++i) {
        const auto call = static_cast<Syscall>(i);
        CHECK(to_string(call) != "?");
        CHECK(syscall_from_name(to_string(call)) == call);
    }
    CHECK(syscall_from_name("no_such_call") == Syscall::unknown);
}

TEST_CASE("quote escapes what could forge a line") { CHECK(quote("a\"b\n") == "\"a\\\"b\\x0a\""); }

TEST_CASE("cat prints every piece as a stream would") {
    const std::string s = "str";
    std::uint64_t big = 18446744073709551615ull;
    CHECK(cat("a", s, std::string_view("v"), 'c', -42, 7u, big) ==
          "astrvc-42718446744073709551615");
    CHECK(cat(static_cast<unsigned char>('x'), true) == "x1");  // through the stream, as before
    CHECK(cat("0x", std::hex, 255) == "0xff");
    CHECK(cat() == "");
}

TEST_CASE("plan_stdio: the workload never holds an fd of a host file") {
    using gpubox::launcher::plan_stdio;
    using gpubox::launcher::StdioFd;
    auto of = [](mode_t mode, ino_t ino = 1, bool tty = false) {
        struct stat st {};
        st.st_mode = mode, st.st_dev = 7, st.st_ino = ino;
        return StdioFd{st, tty};
    };
    const StdioFd closed{};
    SECTION("pipes, sockets and terminals pass; files and other devices are relayed") {
        auto p = plan_stdio({of(S_IFREG | 0444), of(S_IFIFO), of(S_IFSOCK)}, {});
        CHECK(p.relay == std::array<bool, 3>{true, false, false});
        p = plan_stdio({of(S_IFCHR, 1, true), of(S_IFCHR), of(S_IFDIR)},
                       {});  // a tty, /dev/null, a directory
        CHECK(p.relay == std::array<bool, 3>{false, true, true});
        CHECK(plan_stdio({closed, closed, closed}, {}).relay == std::array<bool, 3>{});
    }
    SECTION("a capped output is relayed whatever it is") {
        CHECK(plan_stdio({of(S_IFIFO), of(S_IFIFO), of(S_IFCHR, 1, true)}, {false, true, true})
                  .relay == std::array<bool, 3>{false, true, true});
    }
    SECTION(">file 2>&1 takes one relay, unless a cap counts them apart") {
        CHECK(plan_stdio({closed, of(S_IFREG, 5), of(S_IFREG, 5)}, {}).err_into_out);
        CHECK_FALSE(plan_stdio({closed, of(S_IFREG, 5), of(S_IFREG, 6)}, {}).err_into_out);
        CHECK_FALSE(plan_stdio({closed, of(S_IFREG, 5), of(S_IFREG, 5)}, {false, true, false})
                        .err_into_out);
        CHECK_FALSE(
            plan_stdio({closed, of(S_IFIFO, 5), of(S_IFIFO, 5)}, {false, true, true}).err_into_out);
    }
}

TEST_CASE("sys_host: a failure is a SysError naming call and path, or a value for try_*") {
    test::TempDir tmp("sys-host");
    const std::string dir = tmp.dir.string();
    sys::mkdir(dir + "/d", 0755);
    try {
        sys::mkdir(dir + "/d", 0755);
        FAIL("a second mkdir succeeded");
    } catch (const SysError& e) {
        CHECK(e.call == Syscall::mkdir);
        CHECK(e.err() == EEXIST);
        CHECK(e.path == dir + "/d");
    }
    const UniqueFd root = sys::open_at(AT_FDCWD, dir, O_PATH | O_DIRECTORY);
    {
        UniqueFd f = sys::open_at(root.get(), "f", O_WRONLY | O_CREAT, 0600);
        sys::pwrite_all(f.get(), "hello", 0, "f");
    }
    std::vector<std::string> names = sys::list_dir(root.get(), ".");
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"d", "f"});
    CHECK(sys::try_read_at(root.get(), "f", 3) == "hel");
    CHECK(sys::try_read_at(root.get(), "missing").empty());
    CHECK_FALSE(sys::try_list_dir(root.get(), "missing"));
    CHECK_THROWS_AS(sys::list_dir(root.get(), "missing"), SysError);
    CHECK(sys::try_rmdir(dir + "/missing") == -ENOENT);
    sys::remove_dir_at(root.get(), "d");
    CHECK(sys::try_list_dir(root.get(), ".")->size() == 1);
}
