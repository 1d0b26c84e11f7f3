#include <catch2/catch.hpp>

#include <sched.h>

#include <cerrno>

#include "launcher/stdio.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "isolate/id_map.hpp"
#include "isolate/namespaces.hpp"
#include "launcher/environment.hpp"

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

TEST_CASE("environment: clean defaults, later assignments win") {
    auto env = launcher::build_environment({{"A", "1"}, {"PATH", "/x"}, {"A", "2"}}, false, "xterm");
    CHECK(env == std::vector<std::string>{"PATH=/x", "HOME=/tmp", "LANG=C.UTF-8", "TERM=xterm", "A=2"});
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

TEST_CASE("quote escapes what could forge a line") {
    CHECK(quote("a\"b\n") == "\"a\\\"b\\x0a\"");
}

TEST_CASE("cat prints every piece as a stream would") {
    const std::string s = "str";
    std::uint64_t big = 18446744073709551615ull;
    CHECK(cat("a", s, std::string_view("v"), 'c', -42, 7u, big) == "astrvc-42718446744073709551615");
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
        p = plan_stdio({of(S_IFCHR, 1, true), of(S_IFCHR), of(S_IFDIR)}, {});  // a tty, /dev/null, a directory
        CHECK(p.relay == std::array<bool, 3>{false, true, true});
        CHECK(plan_stdio({closed, closed, closed}, {}).relay == std::array<bool, 3>{});
    }
    SECTION("a capped output is relayed whatever it is") {
        CHECK(plan_stdio({of(S_IFIFO), of(S_IFIFO), of(S_IFCHR, 1, true)}, {false, true, true}).relay ==
              std::array<bool, 3>{false, true, true});
    }
    SECTION(">file 2>&1 takes one relay, unless a cap counts them apart") {
        CHECK(plan_stdio({closed, of(S_IFREG, 5), of(S_IFREG, 5)}, {}).err_into_out);
        CHECK_FALSE(plan_stdio({closed, of(S_IFREG, 5), of(S_IFREG, 6)}, {}).err_into_out);
        CHECK_FALSE(plan_stdio({closed, of(S_IFREG, 5), of(S_IFREG, 5)}, {false, true, false}).err_into_out);
        CHECK_FALSE(plan_stdio({closed, of(S_IFIFO, 5), of(S_IFIFO, 5)}, {false, true, true}).err_into_out);
    }
}
