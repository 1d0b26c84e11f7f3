#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <fstream>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "launcher/ioi/box_tree.hpp"
#include "launcher/ioi/box.hpp"
#include "launcher/ioi/cli.hpp"
#include "launcher/ioi/plan.hpp"
#include "temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::launcher;
using namespace gpubox::ioi;
using rootfs::UserMount;

namespace {

IsolateArgs parse(std::vector<std::string> args) { return parse_isolate_command_line(args); }

IsolateHost host(std::vector<std::string> missing = {"/lib64"}) {
    IsolateHost h;
    h.exists = [missing](const std::string& p) {
        return std::find(missing.begin(), missing.end(), p) == missing.end();
    };
    h.environ = {{"HOME", "/home/judge"}, {"PATH", "/usr/bin"}, {"SECRET", "x"}};
    h.uid = 1000, h.gid = 1000;
    return h;
}

const BoxPaths kBox = box_paths("/run/user/1000/gpubox/isolate", 7);

IsolateRun plan(std::vector<std::string> args, const IsolateHost& h = host()) {
    return plan_isolate_run(parse(std::move(args)), kBox, h);
}

std::string text(const UserMount& m) {
    const char* t = m.type == UserMount::Type::bind      ? "bind "
                    : m.type == UserMount::Type::ro_bind ? "ro-bind "
                                                         : "tmpfs ";
    return t + (m.source.empty() ? "" : m.source + " -> ") + m.target;
}

std::vector<std::string> mounts(const IsolateRun& r) {
    std::vector<std::string> out;
    for (const UserMount& m : r.options.mounts) out.push_back(text(m));
    return out;
}

}  // namespace

TEST_CASE("isolate CLI: getopt's grammar") {
    IsolateArgs a = parse({"-b", "3", "-sv", "-t1.5", "--wall-time=4", "--mem", "65536", "--run",
                           "--", "./a", "-t", "9"});
    CHECK(a.mode == IsolateMode::run);
    CHECK(a.box_id == 3);
    CHECK(a.silent == 1);
    CHECK(a.verbose == 1);
    CHECK(a.time == 1.5);
    CHECK(a.wall_time == 4);
    CHECK(a.mem_kb == 65536);
    CHECK(a.argv == std::vector<std::string>{"./a", "-t", "9"});
    SECTION("long options by unique prefix, -p with and without a value") {
        CHECK(parse({"--box=2", "--init"}).box_id == 2);
        CHECK(parse({"--init"}).processes == 1u);
        CHECK_FALSE(parse({"-p", "--init"}).processes.has_value());
        CHECK(parse({"-p20", "--init"}).processes == 20u);
        CHECK(parse({"--processes=5", "--init"}).processes == 5u);
        CHECK_THROWS_WITH(parse({"--s", "--init"}), "isolate: option '--s' is ambiguous");
    }
    SECTION("isolate's usage errors") {
        CHECK_THROWS_WITH(parse({}), "Please specify an isolate command (e.g. --init, --run).");
        CHECK_THROWS_WITH(parse({"--init", "--run"}), "Only one command is allowed.");
        CHECK_THROWS_WITH(parse({"--run"}), "--run mode requires a command to run");
        CHECK_THROWS_WITH(parse({"--init", "x"}), "--init mode takes no parameters");
        CHECK_THROWS_WITH(parse({"-b", "x1", "--init"}), "Invalid numeric parameter: x1");
        CHECK_THROWS_WITH(parse({"-b", "99999999999", "--init"}),
                          "Numeric parameter out of range: 99999999999");
        CHECK_THROWS_WITH(parse({"--cg-mem=1000", "--run", "x"}),
                          "Options related to control groups require --cg to be set.");
        CHECK_THROWS_WITH(parse({"--bogus", "--init"}), "isolate: unrecognized option '--bogus'");
        CHECK_THROWS_WITH(parse({"-d", "x:frob", "--init"}),
                          "Invalid directory rule 'x:frob': Unknown option 'frob'");
        CHECK_THROWS_WITH(parse({"-E=x", "--init"}), "Invalid environment specified: =x");
    }
    SECTION("stderr and stderr-to-stdout exclude each other, the last one wins") {
        CHECK(parse({"-r", "e", "--stderr-to-stdout", "--init"}).stderr_file.empty());
        CHECK_FALSE(parse({"--stderr-to-stdout", "-r", "e", "--init"}).stderr_to_stdout);
    }
}

TEST_CASE("isolate directory rules, as rules.c keeps them") {
    std::vector<DirRule> r = isolate_default_dir_rules();
    REQUIRE(r.size() == 9);
    CHECK(r[0].inside == "box");
    CHECK(*r[0].outside == "./box");
    CHECK(r[0].flags == (kDirRw | kDirDefault));
    CHECK(add_isolate_dir_rule(r, "/usr=/opt/usr:rw") == "");  // replaced where it stands
    CHECK(r.size() == 9);
    CHECK(*r[8].outside == "/opt/usr");
    CHECK(add_isolate_dir_rule(r, "etc") == "");
    CHECK(*r.back().outside == "/etc");
    CHECK(add_isolate_dir_rule(r, "etc=") == "");
    CHECK_FALSE(r.back().outside.has_value());
    CHECK(add_isolate_dir_rule(r, "a/../b") == "Invalid path");
    CHECK(add_isolate_dir_rule(r, "x=rel") == "Right-hand side must start with '/' or './'");
    CHECK(add_isolate_dir_rule(r, "x:fs") == "Missing filesystem name");
    CHECK(add_isolate_dir_rule(r, "x=ext4:fs") == "This filesystem is not supported");
    CHECK(add_isolate_dir_rule(r, "x=y:tmp") ==
          "Temporary directory mounts do not have a right-hand side");
    CHECK(add_isolate_dir_rule(r, "x=proc:fs:tmp") ==
          "Flags 'fs' and 'tmp' are mutually exclusive");
}

TEST_CASE("plan_isolate_run: isolate's default rules on an empty root") {
    IsolateRun r = plan({"--run", "--", "./prog"});
    const Options& o = r.options;
    CHECK(o.rootfs == "/run/user/1000/gpubox/isolate/7/root");
    CHECK(o.root_mode == rootfs::RootMode::tmpfs);  // a fresh tmpfs, as isolate's own box root
    CHECK(o.workdir == "/box");
    CHECK(o.argv == std::vector<std::string>{"./prog"});
    CHECK(o.meta.empty());  // isolate mode writes its own
    // /dev, /dev/shm, /proc and /tmp are gpubox's own; /lib64 is `maybe` and missing here.
    CHECK(mounts(r) == std::vector<std::string>{"bind /run/user/1000/gpubox/isolate/7/box -> /box",
                                                "ro-bind /bin -> /bin", "ro-bind /lib -> /lib",
                                                "ro-bind /usr -> /usr"});
    CHECK(mounts(plan({"--run", "x"}, host({}))).size() == 5);  // with /lib64
    CHECK(o.bare_env);
    CHECK(o.env == std::vector<std::pair<std::string, std::string>>{{"LIBC_FATAL_STDERR_", "1"}});
    // isolate's box: no /sys, no /run; stderr isolate's alone (no "gpubox: killed: ..." line).
    CHECK_FALSE(o.sysfs);
    CHECK_FALSE(o.run_tmpfs);
    CHECK(o.quiet);
    CHECK(plan({"--dir=sys=sysfs:fs", "--run", "x"}).options.sysfs);  // a rule asks for it
    SECTION("isolate's defaults: one process, 1024 files, unlimited stack") {
        CHECK(*o.limits.pids == 1);
        CHECK(*o.limits.nofile == 1024);
        CHECK(*o.limits.stack_bytes == RLIM_INFINITY);
        CHECK_FALSE(o.limits.cpu_seconds);
        CHECK_FALSE(o.limits.memory_bytes);
    }
    SECTION("-D drops the defaults; user rules stay in order") {
        IsolateRun d = plan({"-D", "--dir=box=./box:rw", "--dir=/data=/srv/data",
                             "--dir=scratch:tmp", "--run", "x"});
        CHECK(mounts(d) ==
              std::vector<std::string>{"bind /run/user/1000/gpubox/isolate/7/box -> /box",
                                       "ro-bind /srv/data -> /data", "tmpfs /scratch"});
    }
}

TEST_CASE("plan_isolate_run: limits in isolate's units") {
    IsolateRun r =
        plan({"--cg", "-t", "1",   "-x", "1.5",  "-w", "3", "-m", "65536",   "--cg-mem=131072",
              "-p20", "-f", "100", "-k", "8192", "-n", "0", "-o", "out.txt", "--run",
              "x"});
    const isolate::Limits& l = r.options.limits;
    CHECK(*l.cpu_seconds == 1.5);              // killed past both -t and -x
    CHECK(*r.report_limits.cpu_seconds == 1);  // but judged against -t
    CHECK(*l.wall_seconds == 3);
    CHECK(*l.as_bytes == 65536ull * 1024);
    CHECK(*l.memory_bytes == 131072ull * 1024);
    CHECK(*l.pids == 20);
    CHECK(*l.fsize_bytes == 102400);
    CHECK(*l.stdout_bytes == 102400);  // -o reaches its file through the relay
    CHECK_FALSE(l.stderr_bytes);
    CHECK(*l.stack_bytes == 8192 * 1024);
    CHECK_FALSE(l.nofile);
    CHECK_FALSE(
        plan({"-p", "--run", "x"}).options.limits.pids);  // any number: gpubox's default cap
}

TEST_CASE("plan_isolate_run: redirections open in bound host directories") {
    IsolateRun r =
        plan({"-i", "in.txt", "-o", "/box/sub/out.txt", "-r", "/dev/null", "--run", "x"});
    CHECK(r.redirect[0].host_dir == kBox.box);
    CHECK(r.redirect[0].rel == "in.txt");
    CHECK(r.redirect[1].rel == "sub/out.txt");
    CHECK(r.redirect[2].host_dir == "/dev");
    CHECK(r.redirect[2].rel == "null");
    CHECK_THROWS_WITH(plan({"-o", "/usr/x", "--run", "x"}),
                      "open(\"/usr/x\"): Read-only file system");
    CHECK_THROWS_AS(plan({"-i", "/etc/passwd", "--run", "x"}), PlanError);
    CHECK(plan({"-i", "/usr/share/dict", "--run", "x"}).redirect[0].host_dir == "/usr");
}

TEST_CASE("plan_isolate_run: what gpubox cannot honour unprivileged is an error") {
    CHECK_THROWS_WITH(plan({"--dir=/data=/srv:noexec", "--run", "x"}), Catch::Contains("noexec"));
    CHECK_THROWS_WITH(plan({"--dir=/dev2=/dev:dev", "--run", "x"}),
                      Catch::Contains("device access needs root"));
    CHECK_THROWS_WITH(plan({"--dir=/x=sysfs:fs", "--run", "x"}),
                      Catch::Contains("only at its own place"));
    CHECK_THROWS_WITH(plan({"--as-uid=0", "--as-gid=0", "--run", "x"}),
                      Catch::Contains("cannot act on behalf"));
    CHECK_THROWS_WITH(plan({"--as-uid=1000", "--run", "x"}),
                      "--as-uid and --as-gid must be used either both or none");
    CHECK_NOTHROW(plan({"--as-uid=1000", "--as-gid=1000", "--run", "x"}));
    CHECK_THROWS_WITH(plan({"--core=100", "--run", "x"}), Catch::Contains("core"));
    CHECK(unsupported_isolate_request(parse({"-q", "10,10", "--init"}), 1, 1).find("quota") !=
          std::string::npos);
    CHECK_NOTHROW(plan({"--dir=/data=/srv:norec:maybe", "--dir=/dev:dev:norec", "--run", "x"}));
}

TEST_CASE("isolate environment rules") {
    const std::vector<std::pair<std::string, std::string>> env = {
        {"HOME", "/h"}, {"PATH", "/usr/bin"}, {"X", "1"}};
    using Env = std::vector<std::pair<std::string, std::string>>;
    CHECK(plan_isolate_env(parse({"-E", "HOME", "-E", "Y=2", "-E", "NOPE", "--init"}), env) ==
          Env{{"LIBC_FATAL_STDERR_", "1"}, {"HOME", "/h"}, {"Y", "2"}});
    CHECK(plan_isolate_env(parse({"-e", "-E", "X=", "-E", "LIBC_FATAL_STDERR_=", "--init"}), env) ==
          Env{{"HOME", "/h"}, {"PATH", "/usr/bin"}});
    CHECK(isolate_workdir(parse({"-c", "sub", "--init"})) == "/box/sub");
    CHECK(isolate_workdir(parse({"-c", "/tmp", "--init"})) == "/tmp");
}

TEST_CASE("isolate boxes live in a root of the caller's own") {
    CHECK(isolate_boxes_root("/srv/boxes", "/run/user/5", 5) == "/srv/boxes");
    CHECK(isolate_boxes_root(nullptr, "/run/user/5", 5) == "/run/user/5/gpubox/isolate");
    CHECK(isolate_boxes_root("", "", 65534) == "/tmp/gpubox-isolate-65534");
    CHECK(box_paths("/r", 3).box == "/r/3/box");
}

TEST_CASE("sweep_special_files: only files and directories are left, the program's modes kept") {
    test::TempDir t("box-tree");
    const std::string box = t.dir.string() + "/box";
    for (const char* d : {"", "/a", "/a/b", "/c"}) sys::mkdir_at(AT_FDCWD, box + d, 0755);
    std::ofstream(box + "/a/b/out.txt") << "4";
    for (const char* l : {"/top", "/a/res", "/a/b/res", "/c/res"})
        sys::symlink_at("/etc/passwd", AT_FDCWD, box + l);
    REQUIRE(::mkfifo((box + "/a/b/fifo").c_str(), 0600) == 0);
    sys::fchmod_at(AT_FDCWD, box + "/a/b", 0);
    sys::fchmod_at(AT_FDCWD, box + "/a", 0311);
    sys::fchmod_at(AT_FDCWD, box + "/c", 0);
    const UniqueFd top = sys::open_at(AT_FDCWD, t.dir.string(), O_PATH | O_DIRECTORY);
    sweep_special_files(top.get(), "box");
    CHECK((sys::stat(box + "/a").st_mode & 07777) == 0311);
    CHECK((sys::stat(box + "/a/b").st_mode & 07777) == 0);
    CHECK((sys::stat(box + "/c").st_mode & 07777) == 0);
    for (const char* d : {"/a", "/a/b", "/c"}) sys::fchmod_at(AT_FDCWD, box + d, 0755);
    struct stat st {};
    for (const char* gone : {"/top", "/a/res", "/a/b/res", "/a/b/fifo", "/c/res"})
        CHECK(sys::try_lstat_at(AT_FDCWD, box + gone, st) == -ENOENT);
    CHECK(sys::try_read_at(AT_FDCWD, box + "/a/b/out.txt") == "4");
}

TEST_CASE("remove_box_tree: every mode, a missing name, a file") {
    test::TempDir t("box-tree");
    const std::string dir = t.dir.string();
    for (const char* d : {"/0", "/0/box", "/0/box/x", "/0/root"})
        sys::mkdir_at(AT_FDCWD, dir + d, 0755);
    std::ofstream(dir + "/0/box/x/f") << "x";
    sys::symlink_at("/", AT_FDCWD, dir + "/0/box/x/root");
    sys::fchmod_at(AT_FDCWD, dir + "/0/box/x", 0);
    sys::fchmod_at(AT_FDCWD, dir + "/0/box", 0500);
    std::ofstream(dir + "/1") << "a file";
    const UniqueFd top = sys::open_at(AT_FDCWD, dir, O_PATH | O_DIRECTORY);
    remove_box_tree(top.get(), "0");
    remove_box_tree(top.get(), "1");
    remove_box_tree(top.get(), "2");
    CHECK(sys::list_dir(top.get(), ".").empty());
}
