#include <catch2/catch.hpp>

#include <sched.h>

#include <cerrno>

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
