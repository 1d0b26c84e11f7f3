#include <catch2/catch.hpp>

#include <fcntl.h>

#include <algorithm>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "isolate/kernel_walk.hpp"
#include "isolate/limits.hpp"
#include "isolate/seccomp.hpp"
#include "isolate/tree_clock.hpp"
#include "isolate/usage.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/monitor/meta_isolate.hpp"
#include "launcher/monitor/verdict.hpp"

using namespace gpubox;
using namespace gpubox::isolate;
using namespace gpubox::launcher;

namespace {
std::string mech(const LimitPlan& p, const std::string& name) {
    for (auto& [n, how] : p.mechanisms)
        if (to_string(n) == name) return how;
    return "";
}
bool has_rlimit(const LimitPlan& p, int r) {
    return std::any_of(p.rlimits.begin(), p.rlimits.end(),
                       [&](auto& op) { return op.resource == r; });
}
Limits autograder() {
    Limits l;
    l.wall_seconds = 5, l.cpu_seconds = 2, l.memory_bytes = 256 << 20, l.pids = 64;
    return l;
}
}  // namespace

TEST_CASE("limits without a cgroup: rlimits, sampling, and mechanisms that say so") {
    LimitPlan p = plan_limits(autograder(), {}, {});
    CHECK(has_rlimit(p, RLIMIT_NPROC));
    CHECK(has_rlimit(p, RLIMIT_CPU));
    CHECK(has_rlimit(p, RLIMIT_CORE));
    // Never by default: both refuse address space that is never touched (JITs, CUDA), and a
    // refused allocation would be graded as the program's crash instead of ML.
    CHECK_FALSE(has_rlimit(p, RLIMIT_AS));
    CHECK_FALSE(has_rlimit(p, RLIMIT_DATA));
    CHECK(p.sample_usage);
    CHECK(p.sample_ms == 5);
    CHECK(p.ipc.rmid_forced);
    CHECK(mech(p, "pids") == "RLIMIT_NPROC in the sandbox's user namespace");
    CHECK(mech(p, "memory").find("read by the monitor every 5 ms") != std::string::npos);
    // What the monitor cannot see is impossible or capped by the sandbox's own knobs.
    CHECK(p.refuse_memfd);
    CHECK(p.ipc.msg_queues * p.ipc.msg_queue_bytes * 64 <= (256u << 20) / 8);  // L / 8
    Limits small;
    small.memory_bytes = 64 << 20;
    const LimitPlan s = plan_limits(small, {}, {});
    CHECK(s.ipc.msg_queues == 8);  // 1 MiB of 1-byte messages a queue, L / 8 in all
    CHECK(s.ipc.msg_queues * s.ipc.msg_queue_bytes * 64 <= (64u << 20) / 8);
    small.memory_bytes = 1 << 20;
    CHECK(plan_limits(small, {}, {}).ipc.msg_queues == 1);
    CHECK(has_rlimit(p, RLIMIT_NOFILE));
    CHECK(tmpfs_inodes(64u << 20) == 8192);
    // inotify and fanotify: the user namespace's caps, an 8 MiB queue per 64 MiB of the limit.
    CHECK(p.ipc.notify_groups == 4);
    CHECK(notify_groups(64u << 20) == 1);
    CHECK(notify_groups(1u << 20) == 1);
    CHECK(p.ipc.notify_marks == tmpfs_inodes(256u << 20) / 2);
    CHECK(mech(p, "memory")
              .find("each open fd charged 12 KiB, epoll watches and mappings counted; vmsplice "
                    "refused") != std::string::npos);
    CHECK(mech(p, "kill") == "SIGKILL to the pid namespace's init");
}

TEST_CASE("defaults that protect the host: a pids cap, one tmpfs budget, SysV within it") {
    LimitPlan p = plan_limits({}, {}, {.tmpfs_size = 1ULL << 30});
    auto nproc = std::find_if(p.rlimits.begin(), p.rlimits.end(),
                              [](auto& op) { return op.resource == RLIMIT_NPROC; });
    REQUIRE(nproc != p.rlimits.end());
    CHECK(nproc->value == kDefaultPids);
    CHECK(mech(p, "pids").find("the default, 4096") != std::string::npos);
    CHECK(p.ipc.shm_bytes == 1ULL << 30);
    CHECK_FALSE(p.sample_usage);  // no limit asked: nothing to measure
    Limits unlimited;
    unlimited.pids = 0;
    CHECK_FALSE(has_rlimit(plan_limits(unlimited, {}, {}), RLIMIT_NPROC));
    CHECK_FALSE(unlimited.any());
    CHECK(plan_tmpfs_size(32 << 20, 64 << 20, 8ULL << 30) == 32u << 20);  // --tmpfs-size wins
    CHECK(plan_tmpfs_size(0, 64 << 20, 8ULL << 30) == 64u << 20);         // else the memory limit
    CHECK(plan_tmpfs_size(0, std::nullopt, 8ULL << 30) ==
          2ULL << 30);  // else a quarter of MemAvailable
    CHECK(parse_mem_available("MemTotal:       24000000 kB\nMemAvailable:    8000000 kB\n") ==
          8000000ULL * 1024);
    CHECK_FALSE(parse_mem_available("MemTotal: 1 kB\n"));
}

TEST_CASE("limits with a delegated cgroup use its controllers") {
    LimitPlan p = plan_limits(autograder(), {true, true, true}, {});
    CHECK_FALSE(has_rlimit(p, RLIMIT_NPROC));
    CHECK_FALSE(has_rlimit(p, RLIMIT_DATA));
    CHECK(mech(p, "memory") == "cgroup memory.max (swap off)");
    CHECK(mech(p, "pids") == "cgroup pids.max");
    CHECK(mech(p, "cpu_time").find("cgroup cpu.stat") != std::string::npos);
    CHECK(mech(p, "kill") == "cgroup.kill");
    CHECK_FALSE(p.sample_usage);
}

TEST_CASE("a workload that may crowd the monitor runs below it from its start") {
    // autograder(): 64 processes, measured by the monitor. On 2 CPUs, more than 4 a CPU.
    LimitPlan p = plan_limits(autograder(), {}, {.cpus = 2});
    CHECK(p.idle_policy);
    CHECK(has_rlimit(p, RLIMIT_NICE));  // and cannot leave SCHED_IDLE
    CHECK(mech(p, "cpu_time").find("SCHED_IDLE") != std::string::npos);
    Limits few = autograder();
    few.pids = 8;  // a crowd of at most 4 a CPU: keeps its policy
    CHECK_FALSE(plan_limits(few, {}, {.cpus = 2}).idle_policy);
    CHECK(plan_limits(few, {}, {}).idle_policy);
    Limits unlimited = autograder();
    unlimited.pids = 0;
    CHECK(plan_limits(unlimited, {}, {.cpus = 64}).idle_policy);
    // The cgroup measures: the monitor reads nothing, nothing to be crowded out of.
    CHECK_FALSE(plan_limits(autograder(), {true, true, true}, {.cpus = 2}).idle_policy);
    Limits wall;
    wall.wall_seconds = 1;  // a timer only
    CHECK_FALSE(plan_limits(wall, {}, {.cpus = 2}).idle_policy);
}

TEST_CASE("where a new session is an autogroup, a crowd may not make sessions") {
    // Each autogroup weighs as much as the monitor, whatever its tasks' policy.
    const LimitPlan p = plan_limits(autograder(), {}, {.cpus = 2, .autogroups = true});
    CHECK(p.refuse_setsid);
    CHECK(mech(p, "cpu_time").find("setsid() refused") != std::string::npos);
    CHECK_FALSE(plan_limits(autograder(), {}, {.cpus = 2}).refuse_setsid);
    Limits few = autograder();
    few.pids = 8;  // no crowd: sessions as usual
    CHECK_FALSE(plan_limits(few, {}, {.cpus = 2, .autogroups = true}).refuse_setsid);
}

TEST_CASE("a crowd takes turns where it shares the monitor's run queue, not between autogroups") {
    CHECK(plan_limits(autograder(), {}, {.cpus = 2}).take_turns);  // a child cpu cgroup
    CHECK_FALSE(plan_limits(autograder(), {}, {.cpus = 2, .autogroups = true}).take_turns);
    Limits few = autograder();
    few.pids = 8;  // no crowd
    CHECK_FALSE(plan_limits(few, {}, {.cpus = 2}).take_turns);
    CHECK_FALSE(plan_limits(autograder(), {true, true, true}, {.cpus = 2}).take_turns);
}

TEST_CASE("limits a host cannot keep without a cgroup are refused, with the reason and a hint") {
    Limits mem;
    mem.memory_bytes = 64 << 20;
    // The host's network namespace: socket buffers there cannot be counted.
    try {
        plan_limits(mem, {}, {.share_net = true, .no_cgroup = "no cgroup v2 is mounted"});
        FAIL("--memory-limit with --share-net planned without a cgroup");
    } catch (const gpubox::PlanError& e) {
        CHECK(std::string(e.what()) ==
              "--memory-limit with --share-net needs a cgroup with the memory controller (no "
              "cgroup v2 is mounted): without one, the sandbox's socket buffers in the host's "
              "network namespace could not be counted");
        CHECK(e.hint.find("drop --share-net") == 0);
    }
    CHECK_NOTHROW(plan_limits(mem, {true, true, true}, {.share_net = true}));
    CHECK_NOTHROW(plan_limits(mem, {}, {.share_net = true, .step_task = true}));  // a step's task
    CHECK_NOTHROW(plan_limits(mem, {}, {}));  // its own network namespace: counted
    Limits cpu;
    cpu.cpu_seconds = 1;
    CHECK_NOTHROW(plan_limits(cpu, {}, {.share_net = true}));  // no memory limit: no sockets
    // --require-cgroup: exact memory accounting or nothing.
    CHECK_THROWS_AS(plan_limits(cpu, {true, false, true}, {.require_cgroup = true}),
                    gpubox::PlanError);
    CHECK_THROWS_WITH(plan_limits(cpu, {}, {.require_cgroup = true}),
                      "--require-cgroup: no cgroup v2 with the memory controller for the sandbox "
                      "(none to be had); 'gpubox doctor' says what to change");
    CHECK_NOTHROW(plan_limits(cpu, {true, true, true}, {.require_cgroup = true}));
}

TEST_CASE("autogroup_applies: the root cpu task group, with autogroups on") {
    using gpubox::isolate::autogroup_applies;
    const std::string v1_root = "4:memory:/x\n2:cpu,cpuacct:/\n0::/user.slice\n";
    const std::string v1_child = "2:cpu,cpuacct:/ci-job\n0::/\n";
    CHECK(autogroup_applies(true, v1_root, ""));
    CHECK_FALSE(autogroup_applies(false, v1_root, ""));
    CHECK_FALSE(autogroup_applies(true, v1_child, ""));
    // cgroup v2 only: below the root, in the root task group unless cpu is enabled there.
    CHECK(autogroup_applies(true, "0::/\n", "cpu memory pids"));
    CHECK_FALSE(
        autogroup_applies(true, "0::/user.slice/session-1.scope\n", "cpuset cpu io memory"));
    CHECK(autogroup_applies(true, "0::/user.slice/session-1.scope\n", "memory pids"));
    CHECK_FALSE(autogroup_applies(true, "garbage\n", ""));  // unknown: the policy stays
}

TEST_CASE("honest mechanisms on old kernels and for the host's root") {
    Limits l;
    l.pids = 10;
    CHECK(mech(plan_limits(l, {}, {.nproc_per_userns = false}), "pids").find("Linux < 5.14") !=
          std::string::npos);
    CHECK(mech(plan_limits(l, {}, {.caller_root = true}), "pids").find("NOT enforced") !=
          std::string::npos);
    auto nproc = plan_limits(l, {}, {.root_inside = true}).rlimits;
    CHECK(std::find_if(nproc.begin(), nproc.end(), [](auto& op) {
              return op.resource == RLIMIT_NPROC;
          })->value == 11);
}

TEST_CASE("the CPU limit's mechanism: the kernel's counter where it is lent, else the sum") {
    Limits l;
    l.cpu_seconds = 1;
    const LimitPlan counted = plan_limits(l, {}, {.tree_clock = true});
    CHECK(counted.tree_clock);
    CHECK(mech(counted, "cpu_time")
              .find("a child the kernel reaps is charged what the kernel's "
                    "count of the workload's CPU (a task-clock perf counter") != std::string::npos);
    const LimitPlan summed = plan_limits(l, {}, {});
    CHECK_FALSE(summed.tree_clock);
    CHECK(mech(summed, "cpu_time").rfind("sum over the sandbox's processes", 0) == 0);
    // The monitor's fallback where the kernel then refuses the counter says the same.
    CHECK(sampled_cpu_mechanism(counted, false) == mech(summed, "cpu_time"));
    // With a cgroup the cgroup counts; nothing is sampled.
    CHECK_FALSE(plan_limits(l, {true, true, true}, {.tree_clock = true}).tree_clock);
    // A workload that may make no other process (isolate's default: -p absent) leaves no child
    // for the kernel to reap: no counter (whose first open after a quiet second costs the run an
    // RCU grace period), and the mechanism says why.
    l.pids = 1;
    const LimitPlan lone = plan_limits(l, {}, {.tree_clock = true});
    CHECK_FALSE(lone.tree_clock);
    CHECK(mech(lone, "cpu_time").find("; one process, no child for the kernel to reap") !=
          std::string::npos);
    CHECK(mech(lone, "cpu_time").find("a child the kernel reaps") == std::string::npos);
    // ... but the host's root, whom the kernel exempts from RLIMIT_NPROC, may fork all the same.
    CHECK(plan_limits(l, {}, {.caller_root = true, .tree_clock = true}).tree_clock);
    l.pids = 2;
    CHECK(plan_limits(l, {}, {.tree_clock = true}).tree_clock);
    // kernel.perf_event_paranoid: 2 (upstream's default) and below lend one; Debian's 3 does not.
    CHECK(tree_clock_lent("2\n", false));
    CHECK(tree_clock_lent("-1\n", false));
    CHECK_FALSE(tree_clock_lent("3\n", false));
    CHECK_FALSE(tree_clock_lent("", false));
    CHECK(tree_clock_lent("4\n", true));  // the host's root: CAP_PERFMON
}

// CPU time of this process so far, in ns.
std::uint64_t own_cpu_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL +
           static_cast<std::uint64_t>(t.tv_nsec);
}

// A child's CPU (user + system) from its wait4 rusage, in ns.
std::uint64_t rusage_ns(const rusage& ru) {
    const auto ns = [](const timeval& t) {
        return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL +
               static_cast<std::uint64_t>(t.tv_usec) * 1000ULL;
    };
    return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// The counter's count; nullopt where it is refused here, as it must be where
// kernel.perf_event_paranoid lends none (EACCES) and in a container whose filter refuses
// perf_event_open (Docker's and podman's default profiles: EPERM).
std::optional<std::uint64_t> count_if_lent(const TreeClock& clock) {
    if (!tree_clock_lent_here(::geteuid() == 0) || clock.error() == EPERM) {
        CHECK_FALSE(clock.valid());
        CHECK((clock.error() == EACCES || clock.error() == EPERM));
        return std::nullopt;
    }
    REQUIRE(clock.valid());
    const std::optional<std::uint64_t> counted = clock.read();
    REQUIRE(counted);
    return counted;
}

TEST_CASE("the tree clock counts from the workload's execve, its children included") {
    int go[2], pre[2];
    REQUIRE(::pipe2(go, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(pre, O_CLOEXEC) == 0);
    const pid_t child = ::fork();
    if (child == 0) {  // init's part: CPU of its own, then the exec the counter starts at
        char byte;
        if (::read(go[0], &byte, 1) != 1) ::_exit(1);
        const std::uint64_t start = own_cpu_ns();
        while (own_cpu_ns() - start < 50'000'000) {}
        const std::uint64_t before = own_cpu_ns();
        if (::write(pre[1], &before, sizeof before) != sizeof before) ::_exit(1);
        // Two subshells, each a process the counter's copy follows; each waited for, so that
        // wait4's rusage below holds them too.
        ::execl("/bin/sh", "sh", "-c",
                "(i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done); "
                "(i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done)",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(go[0]), ::close(pre[1]);
    const TreeClock clock = TreeClock::attach(child);
    REQUIRE(::write(go[1], "g", 1) == 1);
    ::close(go[1]);
    std::uint64_t before = 0;
    REQUIRE(::read(pre[0], &before, sizeof before) == sizeof before);
    ::close(pre[0]);
    int status = 0;
    rusage ru{};
    REQUIRE(::wait4(child, &status, 0, &ru) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    const std::optional<std::uint64_t> counted = count_if_lent(clock);
    if (!counted) return;
    // The child's whole time (its own and its waited-for subshells'), less what it ran before
    // its execve: what the counter holds, within 10 %, less the execve's own teardown of the
    // image before it, which comes before the counter is enabled (this test's own image: under
    // ASan, with its shadow's page tables, ~13 ms).
    const std::uint64_t all = rusage_ns(ru), after = all - before;
    INFO("counted " << *counted << " ns; the child's " << all << " ns, " << before
                    << " before its exec");
    CHECK(before >= 50'000'000);
    CHECK(*counted + 40'000'000 < all);  // its 50 ms before the exec are not the workload's
    CHECK(*counted + 20'000'000 >= after * 9 / 10);
    CHECK(*counted <= after + after / 10 + 2'000'000);
}

TEST_CASE("init's own counter, handed over, counts its workload from its execve, not init") {
    // As a run has it (launcher/sandbox/child_main.cpp's send_meters): init opens the counter on
    // itself, sends it and closes its own, then forks the workload, which execs.
    UniqueFd here, there;
    sys::socketpair(here, there);
    int report[2];
    REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
    const pid_t init = ::fork();
    if (init == 0) {
        here.reset(), ::close(report[0]);
        TreeClock c = TreeClock::attach(0);
        const int err = c.error();
        sys::send_frame(there.get(), std::to_string(err), c.take().get(), "test");
        const std::uint64_t start = own_cpu_ns();  // init's own: never the workload's
        while (own_cpu_ns() - start < 100'000'000) {}
        const pid_t workload = ::fork();
        if (workload == 0) {
            ::execl("/bin/sh", "sh", "-c", "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done",
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        int status = 0;
        rusage ru{};
        if (::wait4(workload, &status, 0, &ru) != workload || status != 0) ::_exit(1);
        const std::uint64_t used = rusage_ns(ru);
        ::_exit(::write(report[1], &used, sizeof used) == sizeof used ? 0 : 1);
    }
    there.reset(), ::close(report[1]);
    std::string bytes;
    UniqueFd fd;
    REQUIRE(sys::recv_frame(here.get(), bytes, fd, "test"));
    const TreeClock clock = TreeClock::adopt(std::move(fd), std::stoi(bytes));
    std::uint64_t used = 0;
    REQUIRE(::read(report[0], &used, sizeof used) == sizeof used);
    ::close(report[0]);
    int status = 0;
    REQUIRE(::waitpid(init, &status, 0) == init);
    CHECK(status == 0);
    const std::optional<std::uint64_t> counted = count_if_lent(clock);
    if (!counted) return;
    INFO("counted " << *counted << " ns; the workload used " << used << " ns");
    CHECK(used >= 10'000'000);
    CHECK(*counted + 20'000'000 >= used * 9 / 10);    // the workload's, after its execve
    CHECK(*counted <= used + used / 10 + 2'000'000);  // and not init's 100 ms
}

TEST_CASE("usage parsers: stat with a hostile comm, status, smaps_rollup") {
    ProcSample p;
    REQUIRE(parse_proc_stat("42 (a) b) c) R 7 42 42 0 -1 4194560 10 0 0 0 7 3 2 1 20 0 1 0 12345 0",
                            10, p));
    CHECK(p.ppid == 7);
    CHECK(p.state == 'R');  // (named::start_time and exec's check of the workload read these)
    CHECK(p.self_ns == 100);
    CHECK(p.children_ns == 30);
    CHECK(p.start == 12345);
    CHECK_FALSE(parse_proc_stat("42 (no close", 10, p));
    CHECK_FALSE(parse_proc_stat("42 (x) R 1", 10, p));
    REQUIRE(parse_proc_status(
        "Name:\tsh\nThreads:\t4\nSigIgn:\t0000000000010000\nRssAnon:\t  100 kB\nRssShmem:\t 7 kB\n",
        p));
    CHECK(p.threads == 4);
    CHECK(p.ignores_sigchld);  // bit 16: signal 17
    CHECK(p.anon_bytes == 100 * 1024);
    CHECK(p.shmem_bytes == 7 * 1024);
    REQUIRE(parse_proc_status("Threads:\t1\nSigIgn:\t0000000000000004\n",
                              p));  // a zombie: no Rss lines
    CHECK_FALSE(p.ignores_sigchld);
    CHECK(p.anon_bytes == 0);
    CHECK_FALSE(parse_proc_status("Name: x\n", p));
    CHECK(parse_pss("Rss: 10 kB\nPss_Anon: 3 kB\nPss_File: 5 kB\nPss_Shmem:  2048 kB\n") ==
          (3u + 2048u) * 1024);
    CHECK_FALSE(parse_pss("Rss: 10 kB\n"));
    // The whole line: threads (20) and sigignore (33, decimal: SIGCHLD is bit 16).
    REQUIRE(
        parse_proc_stat("9 (x) S 1 9 9 0 -1 0 0 0 0 0 1 1 0 0 20 0 3 0 77 0 0 0 0 0 0 0 0 0 0 "
                        "65536 0 0",
                        10, p));
    CHECK(p.threads == 3);
    CHECK(p.ignores_sigchld);
    CHECK(p.start == 77);
    CHECK(p.state == 'S');
    REQUIRE(parse_proc_stat("2 (sleep) Z 1 2 2 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0", 10, p));
    CHECK(p.state == 'Z');
    CHECK(p.ppid == 1);
}

namespace {
ProcSample proc(pid_t pid, pid_t ppid, std::uint64_t self, std::uint64_t children = 0,
                bool ign = false, std::uint64_t start = 1) {
    ProcSample p;
    p.pid = pid, p.ppid = ppid, p.self_ns = self, p.children_ns = children, p.ignores_sigchld = ign,
    p.start = start;
    return p;
}
constexpr std::uint64_t ms = 1000000;
}  // namespace

TEST_CASE("the kernel's count bounds what is charged for children it reaps, nothing else") {
    // Nothing charged: the exact sum, whatever the count says (it holds stolen time, and ends
    // each process before its exit's teardown).
    CHECK(bounded(1'100, 1'000, 1'000) == 1'000);
    CHECK(bounded(900, 1'000, 1'000) == 1'000);
    // Children the kernel reaps, charged an upper bound: no more than the count says...
    CHECK(bounded(1'300, 1'000, 2'000) == 1'300);
    // ...never less than the exact sum, never more than the bound.
    CHECK(bounded(800, 1'000, 2'000) == 1'000);
    CHECK(bounded(2'500, 1'000, 2'000) == 2'000);
    // Without a count: the bound.
    CHECK(bounded(std::nullopt, 1'000, 2'000) == 2'000);
}

TEST_CASE("CPU ledger: every process counts, waited for or reaped by the kernel") {
    CpuLedger l(2);
    CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms)}, 0, 0) == 100 * ms);
    SECTION("a child its parent waits for moves into the parent's cutime: counted once") {
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 110 * ms), proc(3, 2, 50 * ms)}, 1, 10 * ms) ==
              160 * ms);
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 120 * ms, 60 * ms)}, 0, 10 * ms) == 180 * ms);
        CHECK(l.charged_ns() == 0);
        CHECK_FALSE(l.reaping_seen());
    }
    SECTION("a child the kernel reaped is kept, plus the interval it may have run unseen") {
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms, 0, true), proc(3, 2, 50 * ms)}, 1,
                       10 * ms) == 150 * ms);
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms, 0, true)}, 0, 10 * ms) == 160 * ms);
        CHECK(l.charged_ns() == 60 * ms);
        CHECK(l.reaping_seen());
        // Then pids made and never seen are charged the interval each, at most the CPUs' capacity.
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms, 0, true)}, 1, 10 * ms) == 170 * ms);
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms, 0, true)}, 50, 10 * ms) == 190 * ms);
    }
    SECTION("SA_NOCLDWAIT, invisible in SigIgn, shows as a cutime that did not grow") {
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms), proc(3, 2, 50 * ms)}, 1, 10 * ms) ==
              150 * ms);
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms)}, 0, 10 * ms) == 150 * ms);
        CHECK(l.reaping_seen());
        // From then on its children are charged as a SIGCHLD-ignoring parent's.
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms), proc(4, 2, 20 * ms)}, 1, 10 * ms) ==
              170 * ms);
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms)}, 0, 10 * ms) == 180 * ms);
    }
    SECTION("a child shorter than a clock tick is weighed to the ns (schedstat)") {
        ProcSample c = proc(3, 2, 0);
        c.exact_ns = 4 * ms;
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms), c}, 1, 10 * ms) == 100 * ms);
        c.pid = 4, c.exact_ns = 9 * ms;
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms), c}, 1, 10 * ms) ==
              100 * ms);  // 3 vanished: 4 ms owed
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms)}, 0, 10 * ms) ==
              113 * ms);  // 13 ms > a tick
    }
    SECTION("a waited child's time within a tick of what it was seen using is no loss") {
        ProcSample c = proc(3, 2, 0);
        c.exact_ns = 9 * ms;
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms), c}, 1, 10 * ms) == 100 * ms);
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms, 0)}, 0, 10 * ms) ==
              100 * ms);  // cutime shows 0 ticks
        CHECK_FALSE(l.reaping_seen());
    }
    SECTION("orphans go to init, whose cutime counts") {
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms), proc(3, 2, 50 * ms)}, 1, 10 * ms) ==
              150 * ms);
        CHECK(l.update({proc(1, 0, 0, 170 * ms)}, 0, 10 * ms) ==
              170 * ms);  // 2 and then 3 reaped by init
        CHECK(l.charged_ns() == 0);
    }
    SECTION("a reused pid is a new process") {
        CHECK(l.update({proc(1, 0, 0, 100 * ms), proc(2, 1, 5 * ms, 0, false, 99)}, 1, 10 * ms) ==
              105 * ms);
        CHECK(l.charged_ns() == 0);
    }
    SECTION(
        "without a sign of the kernel reaping, unseen pids cost nothing (a shell's waited "
        "children)") {
        CHECK(l.update({proc(1, 0, 0), proc(2, 1, 100 * ms, 30 * ms)}, 40, 10 * ms) == 130 * ms);
        CHECK(l.charged_ns() == 0);
    }
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
        o.killed_for = KillReason::cpu_time;
        auto v = judge(o, l);
        CHECK(v.status == "TO");
        CHECK(v.limit == LimitName::cpu_time);
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
        o.killed_for = KillReason::stdout_;
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
    o.have_status = true, o.status = SIGKILL, o.killed_for = KillReason::wall_time,
    o.wall_seconds = 5.0012, o.cpu_seconds = 0.25;
    Verdict v = judge(o, l);
    // isolate's order for a run it killed: the verdict, killed, then the statistics (isolate.c:
    // err() then box_exit()); its message, which CMS reads for "wall".
    std::string iso = render_meta_isolate(v, o, l);
    CHECK(iso ==
          "status:TO\nmessage:Time limit exceeded (wall "
          "clock)\nkilled:1\ntime:0.250\ntime-wall:5.001\n"
          "max-rss:0\ncsw-voluntary:0\ncsw-forced:0\ncg-mem:0\n");
    std::string js = render_meta_json(v, o, l, {{LimitName::wall_time, "monitor timer"}});
    CHECK(js.find("\"status\": \"TO\"") != std::string::npos);
    CHECK(js.find("\"mechanism\": \"monitor timer\"") != std::string::npos);
    CHECK(js.find("\"exit_code\": null") != std::string::npos);
}

TEST_CASE("isolate's vocabulary for gpubox's verdicts") {
    Limits l = autograder();
    RunOutcome o;
    o.have_status = true, o.cpu_seconds = 0.0669, o.wall_seconds = 0.2481, o.max_rss_kb = 1000;
    o.memory_peak_bytes = 300 << 20;
    SECTION("a memory kill is SIGKILL with cg-oom-killed, never ML") {
        o.status = SIGKILL, o.killed_for = KillReason::memory;
        const Verdict v = judge(o, l);
        CHECK(v.status == "ML");
        CHECK(isolate_status(v) == "SG");
        CHECK(render_meta_isolate(v, o, l) ==
              "time:0.066\ntime-wall:0.248\nmax-rss:1000\ncsw-voluntary:0\ncsw-forced:0\ncg-mem:"
              "307200\n"
              "cg-oom-killed:1\nexitsig:9\nstatus:SG\nmessage:Caught fatal signal 9\n");
        CHECK(render_meta_json(v, o, l, {}).find("\"isolate_status\": \"SG\"") !=
              std::string::npos);
    }
    SECTION("an output kill is SIGXFSZ") {
        l.stdout_bytes = 10;
        o.status = SIGKILL, o.killed_for = KillReason::stdout_;
        const Verdict v = judge(o, l);
        CHECK(v.status == "OL");
        CHECK(isolate_status(v) == "SG");
        const std::string iso = render_meta_isolate(v, o, l);
        CHECK(iso.find("exitsig:25\nstatus:SG\nmessage:Caught fatal signal 25\n") !=
              std::string::npos);
        CHECK(iso.find("killed") == std::string::npos);
    }
    SECTION("a normal exit writes no status and no message") {
        o.status = 0;
        CHECK(render_meta_isolate(judge(o, l), o, l) ==
              "time:0.066\ntime-wall:0.248\nmax-rss:1000\ncsw-voluntary:0\ncsw-forced:0\ncg-mem:"
              "307200\nexitcode:0\n");
    }
    SECTION("a run that ended past its CPU limit is TO, as isolate checks after the exit") {
        o.status = 0, o.cpu_seconds = 2.5;
        const std::string iso = render_meta_isolate(judge(o, l), o, l);
        CHECK(iso.find("status:TO\nmessage:Time limit exceeded\n") != std::string::npos);
        CHECK(iso.find("exitcode") == std::string::npos);
    }
    SECTION(
        "without a cgroup peak, cg-mem is max-rss; without rusage, max-rss is the sampled peak") {
        o.status = 0, o.memory_peak_bytes.reset();
        CHECK(render_meta_isolate(judge(o, l), o, l)
                  .find("max-rss:1000\ncsw-voluntary:0\ncsw-forced:0\ncg-mem:1000\n") !=
              std::string::npos);
        o.memory_peak_bytes = 2048 * 1024, o.max_rss_kb = 0;
        CHECK(render_meta_isolate(judge(o, l), o, l).find("max-rss:2048\n") != std::string::npos);
    }
    SECTION("exec failure is the program's exit status 127, as isolate's child reports it") {
        o.setup_failed = true, o.setup_code = 127, o.message = "execve: not found";
        const IsolateResult r = isolate_result(judge(o, l), o, l);
        CHECK(r.status == "RE");
        CHECK(*r.exitcode == 127);
    }
    SECTION("gpubox's own failure is XX") {
        o.setup_failed = true, o.setup_code = 125, o.message = "mount step 3/9: boom";
        CHECK(render_meta_isolate(judge(o, l), o, l)
                  .find("status:XX\nmessage:mount step 3/9: boom\n") == 0);
    }
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

TEST_CASE("limit names and meta formats: one table each, names give the value back") {
    for (int i = 0; i <= static_cast<int>(LimitName::kill); ++i) {
        const auto name = static_cast<LimitName>(i);
        CHECK(to_string(name) != "?");
        CHECK(limit_from_name(to_string(name)) == name);
    }
    CHECK(to_string(LimitName::stdout_) == "stdout");
    CHECK_FALSE(limit_from_name("stdout_"));
    CHECK(parse_meta_format("isolate") == MetaFormat::isolate);
    CHECK(to_string(parse_meta_format("json")) == "json");
    CHECK_THROWS_WITH(parse_meta_format("xml"),
                      "--meta-format: expected json or isolate, got \"xml\"");
    CHECK(limit_of(KillReason::stderr_) == LimitName::stderr_);
    CHECK_FALSE(limit_of(KillReason::parent_died));
}

static void* nothing(void*) { return nullptr; }

// In a child under limits_filter(memory, setsid): 0 if each call fails as asked (memfd_create,
// vmsplice, clone3: ENOSYS; a thread with an fd table of its own: EPERM; setsid: EPERM) or works
// where not asked, and threads, fork and everything else work either way.
static int filtered(bool memory, bool setsid) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        gpubox::isolate::install(gpubox::isolate::limits_filter(memory, setsid));
        const auto refused = [](long rc, int err) { return rc < 0 && errno == err; };
        bool ok = refused(::syscall(SYS_memfd_create, "x", 0), ENOSYS) == memory;
        ok = ok && refused(::syscall(SYS_vmsplice, 0, nullptr, 0, 0), ENOSYS) == memory;
        ok = ok && refused(::syscall(SYS_clone3, nullptr, 0), ENOSYS) == memory;  // else EINVAL
        ok = ok && refused(::unshare(CLONE_FILES), EPERM) == memory;
        if (memory)  // a thread without CLONE_FILES (its own fd table): refused before it exists
            ok = ok && refused(::syscall(SYS_clone, CLONE_VM | CLONE_SIGHAND | CLONE_THREAD,
                                         nullptr, nullptr, nullptr, 0),
                               EPERM);
        pthread_t t;  // threads (libc falls back to clone, CLONE_FILES) and fork as before
        ok = ok && ::pthread_create(&t, nullptr, nothing, nullptr) == 0 &&
             ::pthread_join(t, nullptr) == 0 && ::unshare(0) == 0;
        const pid_t forked = ::fork();
        if (forked == 0) ::_exit(0);
        ok = ok && forked > 0 && ::waitpid(forked, nullptr, 0) == forked;
        const pid_t s = ::setsid();  // a forked child leads no group: setsid() works unless refused
        ok = ok && (setsid ? refused(s, EPERM) : s == ::getpid());
        const int fd = ::open("/dev/null", O_RDONLY);  // everything else as before
        ::_exit(ok && fd >= 0 && ::getpid() > 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST_CASE("the limits' filter refuses the memory forms and setsid, each as asked") {
    CHECK(gpubox::isolate::limits_filter(false, false).empty());
    CHECK(filtered(true, false) == 0);
    CHECK(filtered(false, true) == 0);
    CHECK(filtered(true, true) == 0);
}

TEST_CASE("task_tree: a process and its descendants, from a /proc, itself first") {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    if (child == 0) {  // a child with a grandchild: both below this test's process
        if (::fork() == 0) {
            ::close(ready[0]);
            ::close(ready[1]);
            ::pause();
            ::_exit(0);
        }
        ::close(ready[0]);
        ::close(ready[1]);  // the grandchild exists now
        ::pause();
        ::_exit(0);
    }
    ::close(ready[1]);
    char byte;
    REQUIRE(::read(ready[0], &byte, 1) == 0);
    ::close(ready[0]);
    const int proc = ::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    const std::vector<pid_t> tree = gpubox::isolate::task_tree(proc, ::getpid());
    const std::vector<pid_t> below = gpubox::isolate::task_tree(proc, child);
    ::close(proc);
    ::kill(child, SIGKILL);  // (the grandchild is orphaned: kill it through the tree)
    if (below.size() == 2) ::kill(below[1], SIGKILL);
    ::waitpid(child, nullptr, 0);
    CHECK(tree.front() == ::getpid());
    CHECK(std::count(tree.begin(), tree.end(), child) == 1);
    REQUIRE(below.size() == 2);
    CHECK(below[0] == child);
    CHECK(std::count(tree.begin(), tree.end(), below[1]) == 1);
}

TEST_CASE("a process that has not run since the last pass holds what it held then") {
    using gpubox::isolate::holds_as_before;
    using gpubox::isolate::ProcSample;
    ProcSample was;
    was.pid = 7, was.start = 100, was.threads = 1, was.state = 'S', was.exact_ns = 5000,
    was.rss_pages = 300;
    CHECK(holds_as_before(was, was));
    auto differs = [&](auto change) {
        ProcSample p = was;
        change(p);
        return !holds_as_before(p, was);
    };
    CHECK(differs([](ProcSample& p) { p.exact_ns += 1; }));   // it ran, a nanosecond
    CHECK(differs([](ProcSample& p) { p.rss_pages += 1; }));  // a page faulted in from outside
    CHECK(differs([](ProcSample& p) { p.rss_pages -= 1; }));
    CHECK(differs([](ProcSample& p) { p.threads = 2; }));   // schedstat: the main thread only
    CHECK(differs([](ProcSample& p) { p.state = 'R'; }));   // running now
    CHECK(differs([](ProcSample& p) { p.start += 1; }));    // another process, the same pid
    CHECK(differs([](ProcSample& p) { p.exact_ns = 0; }));  // no schedstat: nothing to tell by
}

TEST_CASE(
    "kernel memory held through open files and mappings: the fd charge, epoll watches and mappings "
    "counted") {
    CHECK(fd_charge(0) == 0);
    CHECK(fd_charge(1000) == 1000 * kFdBytes);
    CHECK(kFdBytes >= 9728);  // a pipe past the per-user soft limit, 2 slots filled (Linux 6.18)
    CHECK(count_watches("") == 0);
    CHECK(count_watches("pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\n") == 0);
    CHECK(count_watches("pos:\t0\nflags:\t02\ntfd:        5 events:       19 data: 0  pos:0 "
                        "ino:406 sdev:f\ntfd:      200 events:       19 data: 0  pos:0 "
                        "ino:406 sdev:f\n") == 2);
    CHECK(count_watches("tfd: 3 events: 1\n") == 1);
    CHECK(count_lines("") == 0);
    CHECK(count_lines("55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 42 /bin/x\n"
                      "7ffd2c1e9000-7ffd2c20a000 rw-p 00000000 00:00 0 [stack]\n") == 2);

    // A child with 1000 watches on one timerfd through 2 fds (each fd number in turn), and its
    // open fds as stat gives them (Linux >= 6.2).
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(ready[0]);
        const int t = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), ep = ::epoll_create1(0);
        bool ok = t >= 0 && ep >= 0;
        for (int k = 100; ok && k < 1100; ++k) {
            epoll_event ev{EPOLLIN, {}};
            ok =
                ::dup2(t, k) == k && ::epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev) == 0 && ::close(k) == 0;
        }
        if (ok) ::close(ready[1]);  // EOF: the watches are made
        ::pause();
        ::_exit(0);
    }
    ::close(ready[1]);
    char byte;
    const bool made = ::read(ready[0], &byte, 1) == 0;
    ::close(ready[0]);
    const int proc = ::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat fd_dir {};
    const bool counted = ::fstatat(proc, (std::to_string(child) + "/fd").c_str(), &fd_dir, 0) == 0;
    std::uint64_t before = 1, walked_here = 0, bytes = 0;
    // its mappings, each charged too (a paused child: they stay as they are)
    const std::uint64_t maps =
        count_lines(gpubox::sys::try_read_at(proc, std::to_string(child) + "/maps", 1 << 20)) *
        kVmaBytes;
    {
        KernelWalk watches(proc, child);
        before = watches.bytes();  // nothing walked before a pass
        watches.on_pass(5);        // a few open fds: walked by the caller, at once
        walked_here = watches.bytes();
    }
    {
        KernelWalk watches(proc, child);
        watches.on_pass(kInlineFds + 1);  // more: a thread of its own walks them
        for (int i = 0; i < 1000 && (bytes = watches.bytes()) < 1000 * kWatchBytes + maps; ++i)
            ::usleep(10000);  // its first cycle, at most 10 s on a loaded machine
    }
    CHECK(before == 0);
    CHECK(maps > 0);
    CHECK(walked_here == 1000 * kWatchBytes + maps);
    ::close(proc);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    REQUIRE(made);
    CHECK(bytes == 1000 * kWatchBytes + maps);
    REQUIRE(counted);
    CHECK(fd_dir.st_size >= 4);  // 0, 1, 2, the timerfd and the epoll: what it inherited too
    CHECK(fd_dir.st_size <= 64);
}

TEST_CASE("a walk's tally: what grew is read first, and charged as soon as it is read") {
    Tally t;
    const Tally::Key maps = Tally::key(7, -1), a = Tally::key(7, 3), b = Tally::key(7, 4),
                     c = Tally::key(9, 3);
    CHECK(maps != a);
    CHECK(a != c);
    std::vector<Tally::Key> found{maps, a, b};
    t.order(found);  // nothing known: every source new, in the order found
    CHECK(found == std::vector<Tally::Key>{maps, a, b});
    CHECK(t.read(maps, 100) == 100);
    CHECK(t.read(a, 1000) == 1100);
    CHECK(t.read(b, 0) == 1100);
    t.end(true);
    CHECK(t.charge() == 1100);
    CHECK(t.grown() == 1100);  // new sources count as grown

    // The next walk: maps and a grew at the last (from nothing), and c is new: all three read
    // before b, which held nothing.
    found = {b, maps, a, c};
    t.order(found);
    CHECK(found == std::vector<Tally::Key>{maps, a, c, b});
    CHECK(t.charge() == 1100);  // before any read: the last total
    CHECK(t.read(maps, 100) == 1100);
    CHECK(t.read(a, 5000) == 5100);  // charged as soon as read, the rest at their last counts
    CHECK(t.read(c, 200) == 5300);
    t.end(false);  // cut short: b keeps its count
    CHECK(t.charge() == 5300);
    CHECK(t.grown() == 4200);

    // A whole walk where a shrank and the process of c is gone: gone sources drop.
    found = {maps, a, b};
    t.order(found);
    CHECK(found == std::vector<Tally::Key>{a, maps, b});  // a grew at the last walk, maps not
    CHECK(t.read(a, 10) == 5300 - 5000 + 10);
    CHECK(t.read(maps, 100) == 310);
    CHECK(t.read(b, 0) == 310);
    t.end(true);
    CHECK(t.charge() == 110);  // c no longer charged
    CHECK(t.grown() == 0);
    found = {b, maps, a};
    t.order(found);  // nothing grew: the order found
    CHECK(found == std::vector<Tally::Key>{b, maps, a});
}

// A paused child that makes 100 more mappings each time grow() asks (every other page of a new
// PROT_NONE mapping made readable), for the walk to count.
class MappingChild {
public:
    MappingChild() {
        REQUIRE(::pipe(go_) == 0);
        REQUIRE(::pipe(done_) == 0);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid > 0) {
            ::close(go_[0]);
            ::close(done_[1]);
            return;
        }
        ::close(go_[1]);
        ::close(done_[0]);
        const long page = ::sysconf(_SC_PAGESIZE);
        for (char c; ::read(go_[0], &c, 1) == 1;) {
            auto* m = static_cast<char*>(
                ::mmap(nullptr, 200 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
            for (int i = 0; m != MAP_FAILED && i < 200; i += 2)
                ::mprotect(m + i * page, static_cast<std::size_t>(page), PROT_READ);
            if (::write(done_[1], "1", 1) != 1) break;
        }
        ::_exit(0);
    }
    ~MappingChild() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        ::close(go_[1]);
        ::close(done_[0]);
    }
    MappingChild(const MappingChild&) = delete;
    MappingChild& operator=(const MappingChild&) = delete;
    bool grow() {
        char byte = 1;
        return ::write(go_[1], &byte, 1) == 1 && ::read(done_[0], &byte, 1) == 1;
    }
    pid_t pid = -1;

private:
    int go_[2]{}, done_[2]{};
};

TEST_CASE("the walk takes the pass's listing, and is not made again while every pass was quiet") {
    MappingChild child;
    const UniqueFd proc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
    const std::vector<std::string> listed{std::to_string(child.pid)};
    KernelWalk walk(proc.get(), child.pid);
    walk.on_pass(5, &listed, false);  // the pass's listing: this child's maps
    const std::uint64_t first = walk.bytes();
    const bool grown = child.grow();
    ::usleep(150000);                // past the pause between walks (100 ms without watches)
    walk.on_pass(5, &listed, true);  // quiet since the walk: not walked again
    const std::uint64_t quiet = walk.bytes();
    walk.on_pass(5, &listed, false);  // not quiet: walked, the mappings counted
    const std::uint64_t after = walk.bytes();
    REQUIRE(grown);
    CHECK(first > 0);
    CHECK(quiet == first);
    CHECK(after >= first + 100 * kVmaBytes);
}

TEST_CASE("a thread's walk is not made again while every pass was quiet either") {
    MappingChild child;
    const UniqueFd proc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
    std::uint64_t first = 0, quiet = 0, after = 0;
    bool grown = false;
    {
        KernelWalk walk(proc.get(), child.pid);
        walk.on_pass(kInlineFds + 1, nullptr, false);  // many fds: a thread walks from now on
        for (int i = 0; i < 1000 && (first = walk.bytes()) == 0; ++i)
            ::usleep(10000);  // its first walk, at most 10 s on a loaded machine
        grown = child.grow();
        for (int i = 0; i < 30; ++i) {  // 300 ms of quiet passes: three of its pauses
            walk.on_pass(kInlineFds + 1, nullptr, true);
            ::usleep(10000);
        }
        quiet = walk.bytes();
        walk.on_pass(kInlineFds + 1, nullptr, false);  // not quiet: walked, the mappings counted
        for (int i = 0; i < 1000 && (after = walk.bytes()) < first + 100 * kVmaBytes; ++i)
            ::usleep(10000);
    }
    REQUIRE(grown);
    CHECK(first > 0);
    CHECK(quiet == first);
    CHECK(after >= first + 100 * kVmaBytes);
}

TEST_CASE("one dear walk stays the monitor's; the second in a row moves the walk to a thread") {
    MappingChild child;
    const UniqueFd proc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
    std::uint64_t first = 0, second = 0, third = 0;
    bool grown = false;
    {
        KernelWalk walk(proc.get(), child.pid, 0);  // every walk dear (it takes more than 0 ns)
        walk.on_pass(5);                            // dear once: walked here, at once
        first = walk.bytes();
        grown = child.grow();
        ::usleep(150000);  // past the pause between walks (100 ms without watches)
        walk.on_pass(5);   // dear once before: still walked here, at once
        second = walk.bytes();
        grown = grown && child.grow();
        walk.on_pass(5);  // twice in a row: a thread walks from now on, with no pass to ask it
        for (int i = 0; i < 1000 && (third = walk.bytes()) < second + 100 * kVmaBytes; ++i)
            ::usleep(10000);  // at most 10 s on a loaded machine
    }
    REQUIRE(grown);
    CHECK(first > 0);
    CHECK(second >= first + 100 * kVmaBytes);
    CHECK(third >= second + 100 * kVmaBytes);
}

TEST_CASE("kept /proc files: read afresh each time, gone with their process, pruned") {
    const UniqueFd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(proc.valid());
    int go[2];
    REQUIRE(::pipe(go) == 0);
    const pid_t child = ::fork();
    if (child == 0) {  // sleeps (S), then spins (R) once told
        char c;
        ::close(go[1]);
        if (::read(go[0], &c, 1) == 1)
            for (;;) {}
        ::_exit(0);
    }
    ::close(go[0]);
    gpubox::isolate::KeptFiles kept(proc.get());
    const std::string stat = std::to_string(child) + "/stat";
    gpubox::isolate::ProcSample p;
    // The same kept file, read twice: the kernel writes it afresh (the state changes).
    for (int i = 0; i < 200 && p.state != 'S'; ++i, ::usleep(1000))
        REQUIRE(gpubox::isolate::parse_proc_stat(kept.read(stat), 10000000, p));
    CHECK(p.state == 'S');
    REQUIRE(::write(go[1], "x", 1) == 1);
    for (int i = 0; i < 2000 && p.state != 'R'; ++i, ::usleep(1000))
        REQUIRE(gpubox::isolate::parse_proc_stat(kept.read(stat), 10000000, p));
    CHECK(p.state == 'R');
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    CHECK(kept.read(stat).empty());  // gone: ESRCH, and its path names nothing now
    kept.end_pass();
    CHECK(kept.read("self/stat").size() > 0);
    ::close(go[1]);
}
