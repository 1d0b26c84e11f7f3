// Named sandboxes' pure parts (launcher/monitor/named.hpp): names, the registry entry's text,
// and the command lines of run --name, ps and exec.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/monitor/named.hpp"

using namespace gpubox;
using namespace gpubox::launcher;

TEST_CASE("named: what may name a sandbox") {
    CHECK(named::name_problem("train") == "");
    CHECK(named::name_problem("job-1.v2_x") == "");
    CHECK(named::name_problem(std::string(64, 'a')) == "");
    CHECK(named::name_problem(std::string(65, 'a')) == "is longer than 64 characters");
    CHECK(named::name_problem("") == "is empty");
    CHECK(named::name_problem("a/b") == "contains '/'");
    CHECK(named::name_problem("..") == "starts with '.'");
    CHECK(named::name_problem("../x") == "starts with '.'");
    CHECK(named::name_problem(".lock") == "starts with '.'");
    CHECK(named::name_problem("-rf") == "starts with '-'");
    CHECK(named::name_problem("a b") == "has a character other than A-Z a-z 0-9 _ . -");
    CHECK(named::name_problem("a\nb") == "has a character other than A-Z a-z 0-9 _ . -");
}

TEST_CASE("named: an entry's text, back and forth") {
    named::Entry e;
    e.name = "train", e.pid = 4242, e.start = 123456789, e.monitor = 4240, e.started = 1700000000;
    e.rootfs = "lab/py", e.gpus = "0,1", e.limits = "memory=64M,wall=10s";
    e.seccomp = "/home/u/filter.bpf", e.refuse_memfd = true, e.nested = false, e.own_net = false;
    e.cgroup = "/sys/fs/cgroup/user.slice/gpubox-4240";
    e.rlimits = {{7, 1024}, {6, 64}};
    e.workdir = "/data";
    e.env = {"PATH=/usr/bin:/bin", "A=b=c", "EMPTY=", "BAD=line1\nline2"};
    const named::Entry back = named::parse(named::render(e));
    CHECK(back.name == e.name);
    CHECK(back.pid == 4242);
    CHECK(back.start == 123456789);
    CHECK(back.monitor == 4240);
    CHECK(back.started == 1700000000);
    CHECK(back.rootfs == "lab/py");
    CHECK(back.gpus == "0,1");
    CHECK(back.limits == "memory=64M,wall=10s");
    CHECK(back.seccomp == "/home/u/filter.bpf");
    CHECK(back.refuse_memfd);
    CHECK_FALSE(back.nested);
    CHECK_FALSE(back.own_net);
    CHECK(back.cgroup == e.cgroup);
    CHECK(back.rlimits == e.rlimits);
    CHECK(back.workdir == "/data");
    // A value with a newline would start a line of its own: left out, never misread.
    CHECK(back.env == std::vector<std::string>{"PATH=/usr/bin:/bin", "A=b=c", "EMPTY="});
    named::Entry odd = named::parse("name=x\nrootfs=a\nb=c\npid=-3\nstart=99999999999999999999\n");
    CHECK(odd.pid == 0);
    CHECK(odd.start == 0);
    e.rootfs = "two\nlines";
    CHECK(named::parse(named::render(e)).rootfs == "two lines");
}

TEST_CASE("named: run --name, ps, exec on the command line") {
    Options o = parse_command_line({"run", "--name", "train", "./rootfs", "sleep", "9"});
    CHECK(o.name == "train");
    CHECK_THROWS_AS(parse_command_line({"run", "--name", "", "./rootfs", "true"}), UsageError);
    o = parse_command_line({"ps", "--json"});
    CHECK(o.command == Command::ps);
    CHECK(o.json);
    CHECK_THROWS_AS(parse_command_line({"ps", "extra"}), UsageError);
    o = parse_command_line(
        {"exec", "-it", "--env", "A=b", "--workdir", "/tmp", "train", "--", "sh", "-c", "x"});
    CHECK(o.command == Command::exec);
    CHECK(o.name == "train");
    CHECK(o.argv == std::vector<std::string>{"sh", "-c", "x"});
    CHECK(o.workdir == "/tmp");
    CHECK(o.workdir_given);
    REQUIRE(o.env.size() == 1);
    CHECK(o.env[0].first == "A");
    o = parse_command_line({"exec", "train", "ls", "-l"});  // CMD's own flags stay CMD's
    CHECK(o.argv == std::vector<std::string>{"ls", "-l"});
    CHECK_THROWS_AS(parse_command_line({"exec"}), UsageError);
    CHECK_THROWS_AS(parse_command_line({"exec", "train"}), UsageError);
    CHECK_THROWS_AS(parse_command_line({"exec", "--gpu", "0", "train", "true"}), UsageError);
}

TEST_CASE("named: ps's LIMITS, the limits that apply and how") {
    isolate::Limits l;
    isolate::LimitPlan p;
    // None given: the default pids limit still applies.
    p.mechanisms = {{isolate::LimitName::pids, "RLIMIT_NPROC in the sandbox's user namespace"}};
    CHECK(named::limits_summary(l, p) == "pids 4096 (rlimit)");
    l.memory_bytes = 256ull << 20, l.cpu_seconds = 2, l.wall_seconds = 10, l.pids = 64;
    p.mechanisms = {{isolate::LimitName::memory, "cgroup memory.max (swap off)"},
                    {isolate::LimitName::cpu_time, ""},
                    {isolate::LimitName::pids, "cgroup pids.max"},
                    {isolate::LimitName::wall_time, "monitor timer (CLOCK_MONOTONIC)"}};
    CHECK(named::limits_summary(l, p) ==
          "mem 256M (cgroup), cpu 2s (monitor), wall 10s (monitor), pids 64 (cgroup)");
    l = {};
    l.pids = 0;  // --pids-limit unlimited
    CHECK(named::limits_summary(l, p) == "-");
    p.mechanisms = {{isolate::LimitName::pids, "RLIMIT_NPROC (NOT enforced: ...)"}};
    l.pids.reset();
    CHECK(named::limits_summary(l, p) == "pids 4096 (not enforced)");
}
