// The RDMA planner (gpu/rdma.hpp): which /dev/infiniband nodes a job gets, where the sysfs
// entries libibverbs reads appear, and the facts read from a simulated host with an HCA.
#include <catch2/catch.hpp>

#include <sys/sysmacros.h>

#include <algorithm>
#include <variant>

#include "common/error.hpp"
#include "gpu/rdma.hpp"
#include "rootfs/plan.hpp"
#include "tests/fixtures/fake_host.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::gpu;

namespace {

Node char_node(const std::string& path, unsigned major, unsigned minor) {
    return Node{path, path, true, true, makedev(major, minor), false};
}

// A host with one HCA: uverbs0, rdma_cm, and the management nodes umad0 and issm0.
RdmaHost one_hca(bool simulated) {
    RdmaHost h;
    h.simulated = simulated;
    const std::string r = simulated ? "/srv/host" : "";
    h.nodes = {
        char_node("/dev/infiniband/issm0", 231, 64), char_node("/dev/infiniband/rdma_cm", 10, 58),
        char_node("/dev/infiniband/umad0", 231, 0), char_node("/dev/infiniband/uverbs0", 231, 192)};
    for (Node& n : h.nodes) n.host = r + n.path;
    h.classes = {{"/sys/class/infiniband", r + "/sys/class/infiniband"},
                 {"/sys/class/infiniband_verbs", r + "/sys/class/infiniband_verbs"}};
    h.devices = {{"mlx5_0", "uverbs0", "/sys/devices/pci0000:00/0000:5e:00.0",
                  r + "/sys/devices/pci0000:00/0000:5e:00.0"}};
    return h;
}

std::vector<std::string> bound(const RdmaPlan& p) {  // "SOURCE -> TARGET" of every bind
    std::vector<std::string> out;
    for (const rootfs::MountOp& op : p.ops) {
        if (const auto* b = std::get_if<rootfs::Bind>(&op))
            out.push_back(b->source + " -> " + b->target);
        if (const auto* d = std::get_if<rootfs::BindDev>(&op))
            out.push_back("dev " + d->source + " -> " + d->target);
    }
    return out;
}

}  // namespace

TEST_CASE("rdma: verbs and rdma_cm are handed in, umad and issm are not") {
    const RdmaPlan p = plan_rdma(one_hca(false), {});
    std::vector<std::string> nodes;
    for (const Node& n : p.nodes) nodes.push_back(n.path);
    CHECK(nodes == std::vector<std::string>{"/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"});
    CHECK(std::count_if(p.summary.begin(), p.summary.end(),
                        [](auto& s) { return s.find("left out /dev/infiniband/") == 0; }) == 2);
    for (const rootfs::MountOp& op : p.ops)
        if (const auto* d = std::get_if<rootfs::BindDev>(&op))
            CHECK(d->rdev ==
                  (d->target == "/dev/infiniband/rdma_cm" ? makedev(10, 58) : makedev(231, 192)));
}

TEST_CASE(
    "rdma: on the host, with a private network namespace, the host's sysfs entries are bound over "
    "the sandbox's") {
    const RdmaPlan p = plan_rdma(one_hca(false), {.fresh_sysfs = true});
    CHECK(bound(p) ==
          std::vector<std::string>{
              "dev /dev/infiniband/rdma_cm -> /dev/infiniband/rdma_cm",
              "dev /dev/infiniband/uverbs0 -> /dev/infiniband/uverbs0",
              "/sys/class/infiniband -> /sys/class/infiniband",
              "/sys/class/infiniband_verbs -> /sys/class/infiniband_verbs",
              "/sys/devices/pci0000:00/0000:5e:00.0 -> /sys/devices/pci0000:00/0000:5e:00.0"});
    CHECK(p.env.empty());
    // Placed by the mount planner: in the sandbox's sysfs, read-only.
    rootfs::PlanInputs in;
    in.root = {"/srv/rootfs", rootfs::RootMode::overlay, 1 << 20};
    in.device_ops = p.ops;
    const rootfs::MountPlan plan = rootfs::build_mount_plan(in);
    int in_sysfs = 0;
    for (const rootfs::MountOp& op : plan.ops)
        if (const auto* b = std::get_if<rootfs::Bind>(&op)) {
            CHECK(b->read_only);
            in_sysfs += b->place == rootfs::Place::kernel;
        }
    CHECK(in_sysfs == 3);
}

TEST_CASE("rdma: with the host's network, the host's /sys is the sandbox's: nodes only") {
    const RdmaPlan p = plan_rdma(one_hca(false), {.fresh_sysfs = false});
    CHECK(bound(p).size() == 2);
}

TEST_CASE("rdma: a simulated host's entries appear under /run/gpubox/sys, and SYSFS_PATH says so") {
    const RdmaPlan p = plan_rdma(one_hca(true), {.fresh_sysfs = false});
    CHECK(bound(p) ==
          std::vector<std::string>{
              "dev /srv/host/dev/infiniband/rdma_cm -> /dev/infiniband/rdma_cm",
              "dev /srv/host/dev/infiniband/uverbs0 -> /dev/infiniband/uverbs0",
              "/srv/host/sys/class/infiniband -> /run/gpubox/sys/class/infiniband",
              "/srv/host/sys/class/infiniband_verbs -> /run/gpubox/sys/class/infiniband_verbs",
              "/srv/host/sys/devices/pci0000:00/0000:5e:00.0 -> "
              "/run/gpubox/sys/devices/pci0000:00/0000:5e:00.0"});
    CHECK(p.env ==
          std::vector<std::pair<std::string, std::string>>{{"SYSFS_PATH", "/run/gpubox/sys"}});
}

TEST_CASE(
    "rdma: --rdma without a device, or without /sys, is an error; step mode's request is not") {
    RdmaHost none;
    CHECK_THROWS_WITH(plan_rdma(none, {}),
                      Catch::Contains("--rdma: no RDMA device (uverbs*) in /dev/infiniband"));
    CHECK(plan_rdma(none, {.required = false}).ops.empty());
    RdmaHost cm_only = one_hca(false);  // the RDMA core without an HCA
    cm_only.nodes = {char_node("/dev/infiniband/rdma_cm", 10, 258)};
    CHECK_THROWS_WITH(plan_rdma(cm_only, {}), Catch::Contains("no RDMA device"));
    CHECK(plan_rdma(cm_only, {.required = false}).ops.empty());
    RdmaHost not_char = one_hca(false);
    for (Node& n : not_char.nodes) n.is_char = false;
    CHECK_THROWS_AS(plan_rdma(not_char, {}), PlanError);
    CHECK_THROWS_WITH(plan_rdma(one_hca(false), {.sysfs = false}), Catch::Contains("no /sys"));
    CHECK(plan_rdma(one_hca(false), {.required = false, .sysfs = false}).ops.size() == 2);
}

TEST_CASE("rdma: the facts of a simulated host with two HCAs") {
    test::TempDir t("rdmahost");
    test::FakeHost(t.dir.string(), false)
        .hca("0000:5e:00.0", "mlx5_0", 0)
        .hca("0000:5f:00.0", "mlx5_1", 1);
    const RdmaHost h = read_rdma_host(t.dir.string());
    CHECK(h.simulated);
    std::vector<std::string> nodes;
    for (const Node& n : h.nodes) nodes.push_back(n.path);
    CHECK(nodes == std::vector<std::string>{"/dev/infiniband/rdma_cm", "/dev/infiniband/umad0",
                                            "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"});
    REQUIRE(h.classes.size() == 2);
    CHECK(h.classes[1].second == t.dir.string() + "/sys/class/infiniband_verbs");
    REQUIRE(h.devices.size() == 2);
    CHECK(h.devices[1].name == "mlx5_1");
    CHECK(h.devices[1].uverbs == "uverbs1");
    CHECK(h.devices[1].sysfs_dir == "/sys/devices/pci0000:00/0000:5f:00.0");
    CHECK(h.devices[1].sysfs_host == t.dir.string() + "/sys/devices/pci0000:00/0000:5f:00.0");
    // Unprivileged, the fixture's nodes are plain files: nothing to hand in.
    CHECK_THROWS_WITH(plan_rdma(h, {}), Catch::Contains("no RDMA device"));
}

TEST_CASE("rdma: a host without RDMA has no facts") {
    test::TempDir t("nordma");
    const RdmaHost h = read_rdma_host(t.dir.string());
    CHECK(h.nodes.empty());
    CHECK(h.classes.empty());
    CHECK(h.devices.empty());
}
