// --gpu slurm, env and auto: the spec kinds, gres.conf, Slurm's variables, selection by device
// minor, the device cgroup's name, GPU leases on a temp directory, the terminated verdict.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/lease.hpp"
#include "gpu/slurm.hpp"
#include "launcher/monitor/verdict.hpp"
#include "temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::gpu;
using K = GpuSpec::Kind;

namespace {

// Four NVIDIA GPUs whose minors are out of PCI order, as the simulated host's: index -> minor.
GpuInventory four() {
    GpuInventory inv;
    const int minors[] = {2, 0, 3, 1};
    for (int i = 0; i < 4; ++i) {
        Gpu g{Vendor::nvidia};
        g.index = i, g.minor = minors[i], g.uuid = "GPU-" + std::to_string(i);
        g.pci = *parse_pci_address("0000:" + std::to_string(30 + i) + ":00.0");
        inv.gpus.push_back(g);
    }
    return inv;
}

std::vector<int> indices(const std::vector<Gpu>& gs) {
    std::vector<int> out;
    for (const Gpu& g : gs) out.push_back(g.index);
    return out;
}

}  // namespace

TEST_CASE("--gpu slurm, env and auto[:N] parse as kinds of their own") {
    CHECK(parse_gpu_spec("slurm").kind == K::slurm);
    CHECK(parse_gpu_spec("env").kind == K::env);
    CHECK(parse_gpu_spec("auto").kind == K::lease);
    CHECK(parse_gpu_spec("auto").count == 1);
    CHECK(parse_gpu_spec("auto:3").count == 3);
    for (const char* bad : {"auto:", "auto:0", "auto:x", "auto:1000", "auto:-1"})
        CHECK_THROWS_AS(parse_gpu_spec(bad), UsageError);
}

TEST_CASE("NVIDIA_VISIBLE_DEVICES as the container toolkit reads it") {
    CHECK(from_visible_devices("all").kind == K::all);
    CHECK(from_visible_devices("none").kind == K::none);
    CHECK(from_visible_devices("void").kind == K::none);
    CHECK(from_visible_devices("").kind == K::none);
    const GpuSpec s = from_visible_devices("1,GPU-3");
    CHECK(s.kind == K::list);
    CHECK(s.items == std::vector<std::string>{"1", "GPU-3"});
    CHECK_THROWS_WITH(from_visible_devices(std::nullopt),
                      "--gpu env: NVIDIA_VISIBLE_DEVICES is not set");
    CHECK_THROWS_AS(from_visible_devices("slurm"), PlanError);
    CHECK_THROWS_AS(from_visible_devices("0,,1"), PlanError);
}

TEST_CASE("hostlists expand as Slurm's do") {
    CHECK(expand_hostlist("/dev/nvidia[0-3]") ==
          std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3"});
    CHECK(expand_hostlist("node[01-02,7],login") ==
          std::vector<std::string>{"node01", "node02", "node7", "login"});
    CHECK(expand_hostlist("/dev/nvidia2,/dev/nvidia0") ==
          std::vector<std::string>{"/dev/nvidia2", "/dev/nvidia0"});
    CHECK_THROWS_AS(expand_hostlist("n[3-1]"), UsageError);
    CHECK_THROWS_AS(expand_hostlist("n[1-2"), UsageError);
}

TEST_CASE("gres.conf: this node's GPU files, in order; AutoDetect=nvml") {
    const std::string conf =
        "# comment\n"
        "NodeName=gpu[01-02] Name=gpu Type=a100 File=/dev/nvidia[2-3]\n"
        "NodeName=gpu01 Name=gpu File=/dev/nvidia0  # trailing\n"
        "NodeName=other Name=gpu File=/dev/nvidia9\n"
        "Name=mps Count=100\n";
    const GresGpus g = parse_gres_conf(conf, "gpu01");
    CHECK(g.files == std::vector<std::string>{"/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia0"});
    CHECK_FALSE(g.nvml);
    CHECK(parse_gres_conf("AutoDetect=nvml\n", "gpu01").nvml);
    CHECK(parse_gres_conf("NodeName=x AutoDetect=nvml\n", "gpu01").nvml == false);
}

TEST_CASE("per-task GPU binding: the task's GPUs are those its device cgroup allows") {
    GresGpus g;
    g.read = true;
    g.files = {"/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia0", "/dev/nvidia1"};
    auto only = [](std::vector<std::string> ok) {
        return
            [ok](const std::string& f) { return std::find(ok.begin(), ok.end(), f) != ok.end(); };
    };
    // Slurm 22.05 under ConstrainDevices=yes: every task's SLURM_STEP_GPUS is the step's first.
    CHECK(bound_to_task("0", g, only({"/dev/nvidia3"})) == "1");
    CHECK(bound_to_task("2,3", g, only({"/dev/nvidia2", "/dev/nvidia3"})) == "0,1");
    // Allowed as written (ConstrainDevices=no, or the first task): unchanged.
    CHECK(bound_to_task("1", g, only({"/dev/nvidia2", "/dev/nvidia3"})) == "1");
    CHECK(bound_to_task("3", g, [](const std::string&) { return true; }) == "3");
    // Not as many allowed as asked for: unchanged, and the device check says why.
    CHECK(bound_to_task("0", g, only({"/dev/nvidia3", "/dev/nvidia0"})) == "0");
    CHECK(bound_to_task("0", g, only({})) == "0");
    GresGpus nvml;
    nvml.nvml = true;
    CHECK(bound_to_task("0", nvml, only({})) == "0");
    CHECK(node_gpus(g).minors == std::vector<int>{2, 3, 0, 1});
    CHECK_THROWS_AS(node_gpus(nvml), PlanError);
}

TEST_CASE("Slurm's variables: indices into slurmd's GPU list") {
    GresGpus none;
    CHECK_THROWS_WITH(from_slurm({}, none),
                      "--gpu slurm: not in a Slurm allocation (SLURM_JOB_ID is not set)");
    CHECK_THROWS_WITH(from_slurm({"7", std::nullopt, std::nullopt}, none),
                      "--gpu slurm: Slurm job 7 has no GPU on this node (neither SLURM_STEP_GPUS "
                      "nor SLURM_JOB_GPUS is set)");
    // No gres.conf to read: File=/dev/nvidia[0-N], an index is a minor. The step's win.
    GpuSpec s = from_slurm({"7", std::string("1,3"), std::string("0,1,2,3")}, none);
    CHECK(s.kind == K::minors);
    CHECK(s.minors == std::vector<int>{1, 3});
    CHECK(s.source == "--gpu slurm: SLURM_STEP_GPUS=1,3");
    CHECK(from_slurm({"7", std::nullopt, std::string("2")}, none).minors == std::vector<int>{2});
    // gres.conf lists files out of minor order: Slurm's index is the position in that list.
    GresGpus odd;
    odd.files = {"/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia0"};
    CHECK(from_slurm({"7", std::string("0,2"), std::nullopt}, odd).minors ==
          std::vector<int>{2, 0});
    CHECK_THROWS_WITH(from_slurm({"7", std::string("3"), std::nullopt}, odd),
                      "--gpu slurm: SLURM_STEP_GPUS=3: index 3 is past gres.conf's 3 GPU files");
    // AutoDetect=nvml: NVML's order, which is PCI bus order: nvidia-smi's index.
    GresGpus nvml;
    nvml.nvml = true;
    GpuSpec n = from_slurm({"7", std::string("1"), std::nullopt}, nvml);
    CHECK(n.kind == K::list);
    CHECK(n.items == std::vector<std::string>{"1"});
    CHECK_THROWS_AS(from_slurm({"7", std::string("a"), std::nullopt}, none), PlanError);
}

TEST_CASE("selection by device minor") {
    const GpuInventory inv = four();
    GpuSpec s{K::minors, {}, {1, 2}, 1, "--gpu slurm: SLURM_STEP_GPUS=1,2"};
    CHECK(indices(select_gpus(inv, s)) ==
          std::vector<int>{0, 3});  // minor 2 is GPU 0, minor 1 GPU 3
    CHECK(scope_for(s) == Scope::nvidia);
    s.minors = {5};
    CHECK_THROWS_WITH(select_gpus(inv, s),
                      "--gpu slurm: SLURM_STEP_GPUS=1,2 names /dev/nvidia5, which is no GPU of "
                      "this host; GPUs: 0 (/dev/nvidia2), "
                      "1 (/dev/nvidia0), 2 (/dev/nvidia3), 3 (/dev/nvidia1)");
    CHECK_THROWS_AS(select_gpus(inv, parse_gpu_spec("slurm")), PlanError);  // unresolved
}

TEST_CASE("gres.conf MultipleFiles=: a MIG device by its GPU's node and capability nodes") {
    // As Slurm's AutoDetect and sites write them for MIG: the GPU's node, then the GPU and
    // compute instances' capability nodes.
    const GresGpus g = parse_gres_conf(
        "Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,"
        "/dev/nvidia-caps/nvidia-cap22\n"
        "Name=gpu Type=2g.20gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap[12-13]\n"
        "Name=gpu File=/dev/nvidia2\n",
        "gpu01");
    REQUIRE(g.files.size() == 3);
    CHECK(g.files[1] == "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13");
    const GpuSpec s = from_slurm({"7", std::string("0,1,2"), std::nullopt}, g);
    CHECK(s.minors == std::vector<int>{0, 0, 2});
    CHECK(s.caps == std::vector<std::vector<int>>{{21, 22}, {12, 13}, {}});
    GpuInventory inv = four();  // GPU 1 is minor 0: MIG devices 1:1:0 (caps 12, 13), 1:2:0
    inv.gpus[1].mig_instances = 2;
    inv.gpus[1].mig = {MigDevice{.gi = 1, .ci = 0, .gi_minor = 12, .ci_minor = 13},
                       MigDevice{.gi = 2, .ci = 0, .gi_minor = 21, .ci_minor = 22}};
    const std::vector<Gpu> sel = select_gpus(inv, s);
    REQUIRE(sel.size() == 2);
    CHECK((sel[0].whole && sel[0].index == 0 && sel[0].mig.empty()));
    CHECK((!sel[1].whole && sel[1].index == 1 && sel[1].mig.size() == 2));
    GpuSpec bad = s;
    bad.caps[0] = {21, 23};
    CHECK_THROWS_WITH(
        select_gpus(inv, bad),
        Catch::StartsWith("--gpu slurm: SLURM_STEP_GPUS=0,1,2 names MIG capabilities "
                          "nvidia-cap21,23 of GPU 1 (0000:31:00.0), which are no MIG "
                          "device of it; its MIG devices: 1:1:0 (nvidia-cap12,13), "));
}

TEST_CASE("the device cgroup named in /proc/self/cgroup") {
    CHECK(device_cgroup_of("6:freezer:/\n5:devices:/slurm/uid_0/job_3/step_0\n0::/\n") ==
          "5:devices:/slurm/uid_0/job_3/step_0");
    CHECK(device_cgroup_of("0::/user.slice/user-1000.slice\n") == "0::/user.slice/user-1000.slice");
    CHECK(device_cgroup_of("") == "?");
}

TEST_CASE("/proc/locks: flock holders, waiters skipped") {
    const auto l = parse_proc_locks(
        "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 99 00:1a:5678 0 EOF\n"
        "2: FLOCK  ADVISORY  READ 42 fd:01:77 0 EOF\n"
        "3: POSIX  ADVISORY  WRITE 7 00:1a:1 0 EOF\n");
    REQUIRE(l.size() == 2);
    CHECK((l[0].pid == 1234 && !l[0].shared && l[0].dev_major == 0 && l[0].dev_minor == 0x1a &&
           l[0].inode == 5678));
    CHECK((l[1].pid == 42 && l[1].shared && l[1].dev_major == 0xfd && l[1].dev_minor == 1 &&
           l[1].inode == 77));
}

TEST_CASE("GPU leases: exclusive and shared, hostile lock files") {
    test::TempDir tmp("lease");
    const std::string dir = (tmp.dir / "leases").string();
    ::setenv("GPUBOX_LEASE_DIR", dir.c_str(), 1);
    const GpuInventory inv = four();
    CHECK(lease_name(inv.gpus[0]) == "nvidia-GPU-0.lock");
    {
        Lease a = take_lease(inv, {3, false, 0});
        CHECK(a.items == std::vector<std::string>{"0", "1", "2"});
        struct stat st {};
        REQUIRE(::stat(dir.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 01777);
        CHECK(take_lease(inv, {1, false, 0}).items ==
              std::vector<std::string>{"3"});  // locks are per open file: one process will do
        CHECK_THROWS_AS(take_lease(inv, {2, false, 0}), PlanError);
        CHECK(take_lease(inv, {1, true, 0}).items ==
              std::vector<std::string>{"3"});  // a sharer skips exclusive holders
        CHECK_THROWS_AS(take_lease(inv, {2, true, 0}), PlanError);
    }
    {
        Lease s1 = take_lease(inv, {4, true, 0});
        Lease s2 = take_lease(inv, {4, true, 0});
        CHECK(s2.items.size() == 4);
        CHECK_THROWS_WITH(
            take_lease(inv, {1, false, 0}),
            Catch::Contains("only 0 of 4 GPUs free") && Catch::Contains("shared, pid"));
    }
    CHECK(take_lease(inv, {4, false, 0}).items.size() == 4);  // all released
    // A symlink and a FIFO where lock files should be: those GPUs are unusable, never followed.
    std::filesystem::remove(dir + "/nvidia-GPU-0.lock");
    std::filesystem::create_symlink("/etc/passwd", dir + "/nvidia-GPU-0.lock");
    std::filesystem::remove(dir + "/nvidia-GPU-1.lock");
    REQUIRE(::mkfifo((dir + "/nvidia-GPU-1.lock").c_str(), 0666) == 0);
    CHECK(take_lease(inv, {2, false, 0}).items == std::vector<std::string>{"2", "3"});
    CHECK_THROWS_WITH(take_lease(inv, {3, false, 0}),
                      Catch::Contains("nvidia-GPU-0.lock is a symlink") &&
                          Catch::Contains("nvidia-GPU-1.lock is not a regular file"));
    ::unsetenv("GPUBOX_LEASE_DIR");
}

TEST_CASE("GPU leases: a GPU in MIG mode is leased by its MIG devices, one sandbox each") {
    test::TempDir tmp("lease-mig");
    const std::string dir = (tmp.dir / "leases").string();
    ::setenv("GPUBOX_LEASE_DIR", dir.c_str(), 1);
    GpuInventory inv = four();
    inv.gpus[1].mig_instances = 2;
    inv.gpus[1].mig = {MigDevice{.gi = 1, .ci = 0}, MigDevice{.gi = 2, .ci = 0}};
    CHECK(lease_name(inv.gpus[1], inv.gpus[1].mig[1]) == "nvidia-GPU-1-gi2-ci0.lock");
    {
        Lease a = take_lease(inv, {3, false, 0});
        CHECK(a.items == std::vector<std::string>{"0", "1:1:0", "1:2:0"});
        CHECK(take_lease(inv, {2, false, 0}).items == std::vector<std::string>{"2", "3"});
        CHECK_THROWS_WITH(take_lease(inv, {3, false, 0}),
                          Catch::Contains("only 2 of 5 GPUs and MIG devices free"));
        CHECK_THAT(describe_leases(inv), Catch::Contains("\n1:2:0  exclusive  pid "));
    }
    ::unsetenv("GPUBOX_LEASE_DIR");
}

TEST_CASE("a world-writable lease directory without the sticky bit is refused") {
    test::TempDir tmp("lease-dir");
    const std::string dir = (tmp.dir / "d").string();
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    REQUIRE(::chmod(dir.c_str(), 0777) == 0);
    CHECK_THROWS_WITH(open_lease_dir(dir, true), Catch::Contains("writable by all but not sticky"));
    std::filesystem::create_symlink(dir, (tmp.dir / "link").string());
    CHECK_THROWS_AS(open_lease_dir((tmp.dir / "link").string(), true), PlanError);
}

TEST_CASE("the verdict of a run ended from outside") {
    using namespace gpubox::launcher;
    RunOutcome o;
    o.have_status = true;
    o.status = 7 << 8;  // exited 7
    o.terminated_by = SIGTERM;
    Verdict v = judge(o, {});
    CHECK(v.status == "RE");
    CHECK(v.terminated == "SIGTERM");
    CHECK(v.message == "exited with code 7 (terminated: SIGTERM sent to gpubox, forwarded)");
    o.killed_for = KillReason::kill_after, o.kill_after = 2;
    v = judge(o, {});
    CHECK(
        (v.status == "SG" && v.killed && v.signal == SIGKILL && v.gpubox_exit == 137 && !v.limit));
    CHECK(v.message ==
          "terminated: SIGTERM sent to gpubox; the sandbox was killed after --kill-after 2.000 s");
    CHECK(render_meta_json(v, o, {}, {}).find("\"terminated\": \"SIGTERM\"") != std::string::npos);
    o.killed_for = KillReason::parent_died, o.terminated_by = 0;
    CHECK(judge(o, {}).terminated == "parent_died");
    CHECK(render_meta_json(judge(RunOutcome{}, {}), RunOutcome{}, {}, {})
              .find("\"terminated\": null") != std::string::npos);
}

TEST_CASE("a GpuSpec reads back as --gpu takes it") {
    for (const char* text :
         {"none", "all", "slurm", "env", "auto", "auto:3", "0", "3,GPU-abc,0000:3b:00.0"}) {
        const GpuSpec spec = parse_gpu_spec(text);
        CHECK(to_string(spec) == text);
        CHECK(to_string(parse_gpu_spec(to_string(spec))) == text);
    }
    CHECK(to_string(GpuSpec{K::minors, {}, {1, 12}, 1, "SLURM_STEP_GPUS=1,12"}) == "1,12");
}
