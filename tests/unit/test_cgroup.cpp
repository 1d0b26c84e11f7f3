#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "isolate/cgroup_plan.hpp"
#include "common/companion.hpp"
#include "isolate/cgroup.hpp"
#include "launcher/cli/cli.hpp"
#include "throw_count.hpp"

using namespace gpubox;
using namespace gpubox::isolate;

TEST_CASE("--cgroup takes auto, off, systemd or an absolute directory") {
    auto run = [](const std::string& v) {
        return launcher::parse_command_line({"run", "--cgroup", v, "rfs", "true"}).cgroup;
    };
    CHECK(launcher::parse_command_line({"run", "rfs", "true"}).cgroup.mode == CgroupMode::auto_);
    CHECK(run("auto").mode == CgroupMode::auto_);
    CHECK(run("off").mode == CgroupMode::off);
    CHECK(run("systemd").mode == CgroupMode::systemd);
    const CgroupRequest p = run("/sys/fs/cgroup/user.slice/box");
    CHECK(p.mode == CgroupMode::path);
    CHECK(p.path == "/sys/fs/cgroup/user.slice/box");
    REQUIRE_THROWS_WITH(run("relative/dir"),
                        "--cgroup: expected auto, off, systemd or an absolute cgroup "
                        "directory, got \"relative/dir\"");
    REQUIRE_THROWS_AS(run(""), UsageError);
    REQUIRE_THROWS_AS(run("PATH"), UsageError);  // the table's name for the path mode is no word
    for (CgroupMode m : {CgroupMode::auto_, CgroupMode::off, CgroupMode::systemd})
        CHECK(run(std::string(to_string(m))).mode == m);
}

TEST_CASE("routes: auto tries our own cgroup, then a systemd scope") {
    using R = CgroupRoute;
    CHECK(plan_cgroup_routes(CgroupMode::auto_) == std::vector<R>{R::own, R::systemd_scope});
    CHECK(plan_cgroup_routes(CgroupMode::off).empty());
    CHECK(plan_cgroup_routes(CgroupMode::systemd) == std::vector<R>{R::systemd_scope});
    CHECK(plan_cgroup_routes(CgroupMode::path) == std::vector<R>{R::given});
}

TEST_CASE("auto keeps the cgroup that enforces more of what was asked") {
    Limits l;
    l.memory_bytes = 64 << 20, l.pids = 10;
    const CgroupCaps none, bare{true, false, false}, mem{true, true, false}, all{true, true, true};
    CHECK(cgroup_score(none, l) == 0);
    CHECK(cgroup_score(bare, l) == 1);
    CHECK(cgroup_score(mem, l) == 3);
    CHECK(cgroup_score(all, l) == 5);
    CHECK_FALSE(cgroup_covers(mem, l));
    CHECK(cgroup_covers(all, l));
    // Root on a hybrid host: a usable own cgroup without controllers covers a CPU limit alone,
    // so auto stops there and starts no scope.
    Limits cpu_only;
    cpu_only.cpu_seconds = 1;
    CHECK(cgroup_covers(bare, cpu_only));
    CHECK(cgroup_score(all, cpu_only) == cgroup_score(bare, cpu_only));
    CHECK_FALSE(cgroup_covers(none, cpu_only));
}

TEST_CASE("a run looks for a cgroup only where one would enforce a limit, or is asked for") {
    using M = CgroupMode;
    Limits none, wall, rl, cpu, mem, pids, unlimited;
    wall.wall_seconds = 5, rl.fsize_bytes = 1 << 20, rl.stdout_bytes = 100;
    cpu.cpu_seconds = 1, mem.memory_bytes = 64 << 20, pids.pids = 8, unlimited.pids = 0;
    // a timer, rlimits and the relay's caps: nothing a cgroup does better
    for (const Limits& l : {none, wall, rl, unlimited})
        CHECK_FALSE(cgroup_wanted(l, M::auto_, false, false, true));
    CHECK(cgroup_wanted(cpu, M::auto_, false, false, true));
    CHECK(cgroup_wanted(mem, M::auto_, false, false, true));
    // processes: RLIMIT_NPROC in the sandbox's user namespace counts them, but not for the
    // host's root, nor before Linux 5.14
    CHECK_FALSE(cgroup_wanted(pids, M::auto_, false, false, true));
    CHECK(cgroup_wanted(pids, M::auto_, false, true, true));
    CHECK(cgroup_wanted(pids, M::auto_, false, false, false));
    CHECK_FALSE(cgroup_wanted(unlimited, M::auto_, false, true, false));
    // asked for: --cgroup systemd or PATH with any limit, --require-cgroup always; off never
    CHECK(cgroup_wanted(wall, M::systemd, false, false, true));
    CHECK(cgroup_wanted(wall, M::path, false, false, true));
    CHECK_FALSE(cgroup_wanted(none, M::path, false, false, true));
    CHECK(cgroup_wanted(none, M::auto_, true, false, true));
    CHECK_FALSE(cgroup_wanted(mem, M::off, false, false, true));
}

TEST_CASE("the cgroup2 mount point from mountinfo") {
    const std::string hybrid =
        "25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "28 25 0:25 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
        "29 28 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
        "30 28 0:27 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory\n";
    CHECK(parse_cgroup2_mount(hybrid) == "/sys/fs/cgroup/unified");
    CHECK(parse_cgroup2_mount(
              "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - "
              "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n") == "/sys/fs/cgroup");
    CHECK(parse_cgroup2_mount("35 24 0:30 / /mnt/cg\\040two rw - cgroup2 none rw\n") ==
          "/mnt/cg two");
    // An optional field before the separator, and no cgroup2 at all.
    CHECK(parse_cgroup2_mount("40 1 0:5 / /x rw shared:1 master:2 - cgroup2 x rw\n") == "/x");
    CHECK(parse_cgroup2_mount("28 25 0:25 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n") == std::nullopt);
    CHECK(parse_cgroup2_mount("") == std::nullopt);
}

TEST_CASE("our cgroup v2 path from /proc/self/cgroup") {
    CHECK(parse_proc_cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                            "gpubox-7-00c0ffee.scope\n") ==
          "/user.slice/user-1000.slice/user@1000.service/app.slice/gpubox-7-00c0ffee.scope");
    CHECK(parse_proc_cgroup("9:name=systemd:/\n4:memory:/x\n0::/\n") == "/");
    CHECK(parse_proc_cgroup("4:memory:/x\n1:cpu:/\n") == std::nullopt);  // cgroup v1 only
    CHECK(parse_proc_cgroup("0::relative\n") == std::nullopt);
}

TEST_CASE("the nearest cgroup two share (cgroup v2's check on moving a process)") {
    CHECK(common_cgroup("/sys/fs/cgroup/a/run", "/sys/fs/cgroup/b") == "/sys/fs/cgroup");
    CHECK(common_cgroup("/sys/fs/cgroup/a/run", "/sys/fs/cgroup/a") == "/sys/fs/cgroup/a");
    CHECK(common_cgroup("/sys/fs/cgroup/a", "/sys/fs/cgroup/a/x/y") == "/sys/fs/cgroup/a");
    CHECK(common_cgroup("/sys/fs/cgroup/ab", "/sys/fs/cgroup/a") ==
          "/sys/fs/cgroup");  // whole names
    CHECK(common_cgroup("/c/a/", "/c//a/b") == "/c/a");
    CHECK(common_cgroup("/x", "/y") == "/");
}

TEST_CASE("scope unit names, and recognising the scope's cgroup") {
    CHECK(scope_unit_name(1234, 0xc0ffee) == "gpubox-1234-00c0ffee.scope");
    CHECK(scope_unit_name(1, 0xffffffffu) == "gpubox-1-ffffffff.scope");
    const std::string unit = "gpubox-7-00c0ffee.scope";
    CHECK(cgroup_is_unit(
        "/user.slice/user-1000.slice/user@1000.service/app.slice/gpubox-7-00c0ffee.scope", unit));
    CHECK_FALSE(cgroup_is_unit("/system.slice/gpubox-vmtest.service", unit));
    CHECK_FALSE(cgroup_is_unit("/a/xgpubox-7-00c0ffee.scope", unit));
    CHECK_FALSE(cgroup_is_unit("gpubox-7-00c0ffee.scope", unit));
}

TEST_CASE("subtree_control gets only the controllers the scope was given") {
    const std::vector<std::string> want{"cpu", "memory", "pids"};
    CHECK(plan_subtree_control("cpu memory pids\n", want) ==
          std::vector<std::string>{"+cpu", "+memory", "+pids"});
    CHECK(plan_subtree_control("memory pids\n", want) ==
          std::vector<std::string>{"+memory", "+pids"});
    CHECK(plan_subtree_control("cpuset io memory\n", want) == std::vector<std::string>{"+memory"});
    CHECK(plan_subtree_control("", want).empty());
}

TEST_CASE("doctor's fix for each reason a route was passed over") {
    using R = CgroupRoute;
    const std::string no_bus =
        "systemd scope \"gpubox-1-00000001.scope\": connect to the user bus: no bus socket "
        "\"/run/user/1000/bus\" (no systemd user manager for uid 1000)";
    CHECK(cgroup_fix(R::systemd_scope, no_bus, 1000) ==
          "loginctl enable-linger \"$(id -un)\" (or log in), so that user@1000.service runs, and "
          "install "
          "dbus-user-session for its D-Bus");
    CHECK(cgroup_fix(R::systemd_scope,
                     "connect to the system bus: no bus socket \"/run/dbus/system_bus_socket\"",
                     0) == "start systemd's D-Bus system bus (dbus.service)");
    CHECK_THAT(cgroup_fix(R::systemd_scope,
                          "dlopen(\"libsystemd.so.0\"): libsystemd.so.0: cannot open", 1000),
               Catch::StartsWith("install libsystemd0"));
    CHECK_THAT(
        cgroup_fix(R::systemd_scope,
                   "\"/opt/gpubox/bin/gpubox-scope\" exited with status 127: /opt/gpubox/bin/"
                   "gpubox-scope: error while loading shared libraries: libsystemd.so.0: "
                   "cannot open shared object file",
                   1000),
        Catch::StartsWith("install libsystemd0"));
    CHECK_THAT(
        cgroup_fix(R::systemd_scope,
                   "systemd scope \"x\": find gpubox's sd-bus helper: no helper gpubox-scope "
                   "(looked for /a/gpubox-scope and /a/../libexec/gpubox/gpubox-scope)",
                   1000),
        Catch::StartsWith("install gpubox-scope"));
    CHECK_THAT(
        cgroup_fix(R::systemd_scope,
                   "find gpubox's sd-bus helper: helper \"/a/gpubox-scope\": writable by its "
                   "group or by anyone (mode 0777)",
                   1000),
        Catch::Contains("chmod go-w"));
    CHECK_THAT(
        cgroup_fix(R::systemd_scope,
                   "systemd scope \"x\": controllers not delegated to \"/sys/fs/cgroup/a\": memory",
                   1000),
        Catch::Contains("Delegate=cpu cpuset io memory pids"));
    CHECK_THAT(
        cgroup_fix(R::own,
                   "own cgroup /sys/fs/cgroup/unified: controllers not delegated (cgroup/unified)",
                   0),
        Catch::Contains("systemd.unified_cgroup_hierarchy=1"));
    CHECK_THAT(cgroup_fix(R::own, "no cgroup v2 hierarchy is mounted", 1000),
               Catch::Contains("cgroup v2"));
    CHECK_THAT(
        cgroup_fix(R::own, "own cgroup \"/sys/fs/cgroup/x\" (not delegated to this user): mkdirat",
                   1000),
        Catch::Contains("Delegate=yes"));
    CHECK_THAT(cgroup_cpu_fix(), Catch::Contains("user@.service.d/delegate.conf"));
}

TEST_CASE("a companion (gpubox-scope) is looked for beside gpubox, then in ../libexec/gpubox") {
    CHECK(companion::candidates("/usr/bin/gpubox", "gpubox-scope") ==
          std::vector<std::string>{"/usr/bin/gpubox-scope",
                                   "/usr/bin/../libexec/gpubox/gpubox-scope"});
    CHECK(companion::candidates("/gpubox", "gpubox-scope") ==
          std::vector<std::string>{"/gpubox-scope", "/../libexec/gpubox/gpubox-scope"});
}

TEST_CASE("a companion runs only when nobody but root or gpubox's owner can change it") {
    struct stat st {};
    st.st_mode = S_IFREG | 0755;
    st.st_uid = 1000;
    CHECK(companion::problem(st, 1000).empty());
    st.st_uid = 0;
    CHECK(companion::problem(st, 1000).empty());
    st.st_uid = 1001;
    CHECK_THAT(companion::problem(st, 1000), Catch::StartsWith("owned by uid 1001"));
    st.st_uid = 0;
    st.st_mode = S_IFREG | 0775;
    CHECK(companion::problem(st, 1000) == "writable by its group or by anyone (mode 0775)");
    st.st_mode = S_IFREG | 0757;
    CHECK_THAT(companion::problem(st, 1000), Catch::StartsWith("writable"));
    st.st_mode = S_IFREG | 0644;
    CHECK_THAT(companion::problem(st, 1000), Catch::StartsWith("not executable"));
    st.st_mode = S_IFDIR | 0755;
    CHECK(companion::problem(st, 1000) == "not a regular file");
}

TEST_CASE("a sandbox cgroup's name gives its monitor's pid, and nothing else does") {
    using gpubox::isolate::sandbox_cgroup_pid;
    CHECK(sandbox_cgroup_pid("gpubox-1234") == 1234);
    CHECK_FALSE(sandbox_cgroup_pid("gpubox-"));
    CHECK_FALSE(sandbox_cgroup_pid("gpubox-0"));
    CHECK_FALSE(sandbox_cgroup_pid("gpubox-12a"));
    CHECK_FALSE(
        sandbox_cgroup_pid("gpubox-1234-0a1b2c3d.scope"));  // a systemd scope: systemd collects it
    CHECK_FALSE(sandbox_cgroup_pid("gpubox-12345678901"));  // no pid has 11 digits
    CHECK_FALSE(sandbox_cgroup_pid("other-1234"));
}

// Each run with a CPU, memory or process limit searches for a cgroup; on a host that offers
// none (no delegation, no systemd user manager) the search must find that without throwing:
// the first exception a static gpubox throws costs it milliseconds. Tried in a child, as an
// unprivileged user (uid 65534 where the tests run as root) with no user bus.
TEST_CASE("the cgroup search throws nothing where no cgroup is to be had") {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::geteuid() == 0 &&
            (::setresgid(65534, 65534, 65534) || ::setresuid(65534, 65534, 65534)))
            ::_exit(100);
        ::setenv("XDG_RUNTIME_DIR", "/nonexistent-gpubox-test", 1);
        ::unsetenv("DBUS_SESSION_BUS_ADDRESS");
        Limits l;
        l.memory_bytes = 64 << 20, l.pids = 64, l.cpu_seconds = 1;
        const long before = throws_so_far();
        long after = -1;
        try {
            Cgroup cg = setup_cgroup(l, {});
            after = throws_so_far();
            remove_cgroup(cg);
        } catch (...) {
            ::_exit(101);
        }
        ::_exit(static_cast<int>(std::min(after - before, 99L)));
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // exceptions thrown by the search (100, 101: set-up)
}
