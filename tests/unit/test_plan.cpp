#include <catch2/catch.hpp>

#include <sys/sysmacros.h>

#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/wire.hpp"

using namespace gpubox;
using namespace gpubox::rootfs;

namespace {
std::string render(const MountPlan& plan) {
    std::string out = to_string(plan.root) + "\n" + tmpfs_text(plan.root) + "\n";
    for (const MountOp& op : plan.ops) out += to_string(op) + "\n";
    return out;
}
std::string golden(const std::string& name) {
    std::ifstream f(std::string(GOLDEN_DIR) + "/" + name);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}
PlanInputs base() {
    PlanInputs in;
    in.root = {"/images/debian", RootMode::overlay, 0};
    return in;
}
}  // namespace

TEST_CASE("default plan matches the golden file") {
    CHECK(render(build_mount_plan(base())) == golden("default.plan.txt"));
}

TEST_CASE("user mounts, tmpfs size and shared network match the golden file") {
    PlanInputs in = base();
    in.new_net_ns = false;
    in.root.tmpfs_size = 64ULL << 20;
    in.user_mounts = {{UserMount::Type::ro_bind, "/data", "/data"},
                      {UserMount::Type::bind, "/scratch", "/tmp/out"},
                      {UserMount::Type::tmpfs, "", "/cache"}};
    CHECK(render(build_mount_plan(in)) == golden("user-mounts.plan.txt"));
}

TEST_CASE("planner orders /dev tmpfs before device binds and /proc before its masks") {
    MountPlan p = build_mount_plan(base());
    // An op that went missing fails here, instead of comparing as -1 and passing.
    auto index = [&](const std::string& s) {
        std::size_t i = 0;
        while (i < p.ops.size() && to_string(p.ops[i]).find(s) == std::string::npos) ++i;
        INFO("op: " << s);
        REQUIRE(i < p.ops.size());
        return i;
    };
    CHECK(index("tmpfs /dev ") < index("bind-dev /dev/null"));
    CHECK(index("proc /proc") < index("mask /proc/kcore"));
    CHECK(index("bind-dev /dev/null") < index("devpts /dev/pts"));
}

TEST_CASE("isolate's box: the base set without /sys and /run") {
    PlanInputs in = base();
    in.sysfs = false, in.run_tmpfs = false;
    const std::string with = render(build_mount_plan(base()));
    const std::string without = render(build_mount_plan(in));
    CHECK(with.find("\nsysfs /sys ") != std::string::npos);
    CHECK(with.find("\ntmpfs /run ") != std::string::npos);
    CHECK(without.find("\nsysfs ") == std::string::npos);
    CHECK(without.find("\ntmpfs /run ") == std::string::npos);
    CHECK(build_mount_plan(in).ops.size() + 2 == build_mount_plan(base()).ops.size());
}

TEST_CASE("a tmpfs root: --print-plan says nothing of ROOTFS shows, the root is in the budget") {
    RootSpec root{"/boxes/7/root", RootMode::tmpfs, 1 << 20};
    CHECK(to_string(root) ==
          "root a directory of gpubox's tmpfs (nothing of ROOTFS; writes discarded)");
    CHECK(tmpfs_text(root) ==
          "gpubox's tmpfs: size=1M (one budget: the root, /tmp, /run, /dev/shm, --tmpfs)");
}

TEST_CASE("targets get their place: in the image, in gpubox's tmpfs, in a kernel fs") {
    PlanInputs in = base();
    in.user_mounts = {{UserMount::Type::bind, "/h", "/tmp/x"},
                      {UserMount::Type::bind, "/h", "/opt/x"}};
    MountPlan p = build_mount_plan(in);
    CHECK(std::get<Bind>(p.ops[p.ops.size() - 2]).place == Place::gpubox);
    CHECK(std::get<Bind>(p.ops.back()).place == Place::image);
}

TEST_CASE("impossible requests are PlanErrors") {
    PlanInputs in = base();
    in.user_mounts = {{UserMount::Type::bind, "/h", "/proc/sys/x"}};
    CHECK_THROWS_WITH(build_mount_plan(in), Catch::Matchers::Contains("kernel filesystem"));
    in.user_mounts = {{UserMount::Type::bind, "/h", "/"}};
    CHECK_THROWS_AS(build_mount_plan(in), PlanError);
    in = base();
    in.new_pid_ns = false;
    CHECK_THROWS_WITH(build_mount_plan(in), Catch::Matchers::Contains("pid namespace"));
}

TEST_CASE("--writable refuses device ops that would write into ROOTFS") {
    PlanInputs in = base();
    in.root.mode = RootMode::writable;
    in.device_ops = {Symlink{"libcuda.so.1", "/usr/lib/libcuda.so", Place::image}};
    CHECK_THROWS_WITH(build_mount_plan(in), Catch::Matchers::Contains("never writes into ROOTFS"));
    in.device_ops = {Symlink{"x", "/run/gpubox/x", Place::image}};  // lands in gpubox's /run tmpfs
    CHECK_NOTHROW(build_mount_plan(in));
}

TEST_CASE("mount ops survive the monitor-to-init wire format; damaged bytes are refused") {
    PlanInputs in = base();
    in.root.tmpfs_size = 1 << 20;
    in.user_mounts = {{UserMount::Type::ro_bind, "/data", "/data"}};
    in.device_ops = {BindDev{"/dev/nvidia2", "/dev/nvidia2", Need::required, makedev(195, 2)},
                     Tmpfs{"/proc/driver", 0555, true, false, Place::kernel},
                     MakeDir{"/proc/driver/nvidia", 0555},
                     WriteFile{"/proc/driver/nvidia/params", std::string("a\0b\n", 4), 0444},
                     Bind{"/usr/lib/libcuda.so.550", "/usr/lib/libcuda.so.550", true,
                          Need::optional, Place::image, SourceKind::file},
                     Symlink{"libcuda.so.550", "/usr/lib/libcuda.so.1", Place::image}};
    const MountPlan plan = build_mount_plan(in);
    const std::string bytes = encode_ops(plan.ops);
    const std::vector<MountOp> back = decode_ops(bytes);
    REQUIRE(back.size() == plan.ops.size());
    for (std::size_t i = 0; i < back.size(); ++i) {
        CHECK(back[i].index() == plan.ops[i].index());
        CHECK(to_string(back[i]) == to_string(plan.ops[i]));  // every field the plan text shows
    }
    CHECK(std::get<WriteFile>(back[back.size() - 4]).content == std::string("a\0b\n", 4));
    CHECK(std::get<BindDev>(back[back.size() - 7]).rdev == makedev(195, 2));
    CHECK(std::get<Bind>(back[back.size() - 3]).kind == SourceKind::file);
    CHECK(encode_ops(back) == bytes);  // and the fields it does not show
    // Each op's "made in the layer already" flag travels with it; none given reads as false.
    std::vector<bool> flags(plan.ops.size()), got{true};
    flags[1] = flags.back() = true;
    const std::string flagged = encode_ops(plan.ops, flags);
    CHECK(encode_ops(decode_ops(flagged, &got), got) == flagged);
    CHECK(got == flags);
    decode_ops(bytes, &got);
    CHECK(got == std::vector<bool>(plan.ops.size()));
    std::string bad_flag = flagged;
    bad_flag[bad_flag.size() - 8] = 2;  // the last op's flag
    CHECK_THROWS_AS(decode_ops(bad_flag), SetupError);
    for (std::size_t n = 0; n < bytes.size(); ++n)
        CHECK_THROWS_AS(decode_ops(std::string_view(bytes).substr(0, n)), SetupError);
    std::string bad = bytes;
    bad[8] = 99;  // the first op's type
    CHECK_THROWS_AS(decode_ops(bad), SetupError);
    CHECK_THROWS_AS(decode_ops(bytes + "x"), SetupError);
}
