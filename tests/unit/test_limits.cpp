#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>

#include "common/error.hpp"
#include "isolate/limits.hpp"
#include "isolate/usage.hpp"
#include "launcher/cli.hpp"
#include "launcher/verdict.hpp"

using namespace gpubox;
using namespace gpubox::isolate;
using namespace gpubox::launcher;

namespace {
std::string mech(const LimitPlan& p, const std::string& name) {
    for (auto& [n, how] : p.mechanisms)
        if (n == name) return how;
    return "";
}
bool has_rlimit(const LimitPlan& p, int r) {
    return std::any_of(p.rlimits.begin(), p.rlimits.end(), [&](auto& op) { return op.resource == r; });
}
Limits autograder() {
    Limits l;
    l.wall_seconds = 5, l.cpu_seconds = 2, l.memory_bytes = 256 << 20, l.pids = 64;
    return l;
}
}  // namespace

TEST_CASE("limits without a cgroup: rlimits, sampling, and mechanisms that say so") {
    LimitPlan p = plan_limits(autograder(), {}, true, false, false);
    CHECK(has_rlimit(p, RLIMIT_NPROC));
    CHECK(has_rlimit(p, RLIMIT_DATA));
    CHECK(has_rlimit(p, RLIMIT_CPU));
    CHECK(has_rlimit(p, RLIMIT_CORE));
    CHECK_FALSE(has_rlimit(p, RLIMIT_AS));  // never by default: it breaks JITs and CUDA
    CHECK(p.sample_usage);
    CHECK(p.sample_ms == 20);
    CHECK(mech(p, "pids") == "RLIMIT_NPROC in the sandbox's user namespace");
    CHECK(mech(p, "memory").find("sampled every 20 ms") != std::string::npos);
    CHECK(mech(p, "kill") == "SIGKILL to the pid namespace's init");
    auto data = std::find_if(p.rlimits.begin(), p.rlimits.end(), [](auto& op) { return op.resource == RLIMIT_DATA; });
    CHECK(data->value == 512u << 20);
}

TEST_CASE("limits with a delegated cgroup use its controllers") {
    LimitPlan p = plan_limits(autograder(), {true, true, true}, true, false, false);
    CHECK_FALSE(has_rlimit(p, RLIMIT_NPROC));
    CHECK_FALSE(has_rlimit(p, RLIMIT_DATA));
    CHECK(mech(p, "memory") == "cgroup memory.max (swap off)");
    CHECK(mech(p, "pids") == "cgroup pids.max");
    CHECK(mech(p, "cpu_time").find("cgroup cpu.stat") != std::string::npos);
    CHECK(mech(p, "kill") == "cgroup.kill");
    CHECK_FALSE(p.sample_usage);
}

TEST_CASE("honest mechanisms on old kernels and for the host's root") {
    Limits l;
    l.pids = 10;
    CHECK(mech(plan_limits(l, {}, false, false, false), "pids").find("Linux < 5.14") != std::string::npos);
    CHECK(mech(plan_limits(l, {}, true, false, true), "pids").find("NOT enforced") != std::string::npos);
    auto nproc = plan_limits(l, {}, true, true, false).rlimits;
    CHECK(std::find_if(nproc.begin(), nproc.end(), [](auto& op) { return op.resource == RLIMIT_NPROC; })->value == 11);
}

TEST_CASE("usage parsers: stat with a hostile comm, statm") {
    CHECK(parse_stat_ticks("42 (a) b) c) R 1 42 42 0 -1 4194560 10 0 0 0 7 3 2 1 20 0 1 0") == 13u);
    CHECK_FALSE(parse_stat_ticks("42 (no close"));
    CHECK_FALSE(parse_stat_ticks("42 (x) R 1"));
    CHECK(parse_statm_anon_pages("1000 300 100 10 0 200 0\n") == 200u);
}

TEST_CASE("verdicts") {
    Limits l = autograder();
    RunOutcome o;
    o.have_status = true;
    SECTION("OK") {
        o.status = 0;
        auto v = judge(o, l);
        CHECK(v.status == "OK");
        CHECK(v.gpubox_exit == 0);
    }
    SECTION("RE") {
        o.status = 3 << 8;
        auto v = judge(o, l);
        CHECK(v.status == "RE");
        CHECK(*v.exit_code == 3);
        CHECK(v.gpubox_exit == 3);
    }
    SECTION("SG") {
        o.status = SIGSEGV;
        auto v = judge(o, l);
        CHECK(v.status == "SG");
        CHECK(v.message == "killed by signal 11 (SEGV)");
        CHECK(v.gpubox_exit == 139);
    }
    SECTION("TO by the monitor") {
        o.killed_for = "cpu_time";
        auto v = judge(o, l);
        CHECK(v.status == "TO");
        CHECK(v.limit == "cpu_time");
        CHECK(v.killed);
        CHECK(v.gpubox_exit == 137);
        CHECK(v.message == "killed: CPU time limit 2.000 s exceeded");
    }
    SECTION("ML when a process failed at the memory limit") {
        o.status = 1 << 8;
        o.max_rss_kb = 300 * 1024;
        CHECK(judge(o, l).status == "ML");
    }
    SECTION("ML from the OOM killer") {
        o.status = SIGKILL;
        o.oom_killed = true;
        CHECK(judge(o, l).status == "ML");
    }
    SECTION("OL") {
        l.stdout_bytes = 10;
        o.killed_for = "stdout";
        CHECK(judge(o, l).status == "OL");
    }
    SECTION("XX") {
        o.setup_failed = true, o.setup_code = 127, o.message = "execve: not found";
        auto v = judge(o, l);
        CHECK(v.status == "XX");
        CHECK(v.gpubox_exit == 127);
    }
}

TEST_CASE("meta renderings") {
    Limits l = autograder();
    RunOutcome o;
    o.have_status = true, o.status = SIGKILL, o.killed_for = "wall_time", o.wall_seconds = 5.0012, o.cpu_seconds = 0.25;
    Verdict v = judge(o, l);
    std::string iso = render_meta_isolate(v, o);
    CHECK(iso.find("time:0.250\ntime-wall:5.001\n") == 0);
    CHECK(iso.find("exitsig:9\nkilled:1\nstatus:TO\nmessage:killed: wall-clock limit 5.000 s exceeded\n") != std::string::npos);
    std::string js = render_meta_json(v, o, l, {{"wall_time", "monitor timer"}});
    CHECK(js.find("\"status\": \"TO\"") != std::string::npos);
    CHECK(js.find("\"mechanism\": \"monitor timer\"") != std::string::npos);
    CHECK(js.find("\"exit_code\": null") != std::string::npos);
}

TEST_CASE("limit option values") {
    CHECK(parse_seconds("0.5", "x") == 0.5);
    CHECK_THROWS_AS(parse_seconds("-1", "x"), UsageError);
    CHECK_THROWS_AS(parse_seconds("1s", "x"), UsageError);
    CHECK(parse_count("64", "x") == 64);
    CHECK_THROWS_AS(parse_count("0", "x"), UsageError);
    CHECK(find_meta_path({"run", "--bogus", "--meta", "m.json", "r"}) == "m.json");
    CHECK(find_meta_path({"run", "--meta=x", "r"}) == "x");
    CHECK(find_meta_path({"run", "r", "--", "--meta", "no"}) == "");
}
