// CDI specs: parsing (JSON and YAML), the CDI library's validation and version rules, hostile
// specs, spec directories, and the planner that turns container edits into mount ops.
#include <catch2/catch.hpp>

#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "gpu/cdi_plan.hpp"
#include "gpu/cdi_spec.hpp"
#include "rootfs/plan.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::cdi;

namespace {

std::string fixture(const std::string& name) {
    std::ifstream in(std::string(CDI_FIXTURES) + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    for (std::size_t at; (at = text.find("@HOST@")) != std::string::npos;)
        text.replace(at, 6, "/h");
    return text;
}

Spec valid(const std::string& text) {
    Spec s = parse_spec(text, "/etc/cdi/x.yaml");
    validate_spec(s);
    return s;
}

std::string error_of(const std::string& text) {
    try {
        valid(text);
    } catch (const PlanError& e) {
        return e.what();
    }
    return "";
}

// Every host path a character device of 195:<its digits>, but /h/dev/shm (a directory).
gpu::Node fake_node(const std::string& path) {
    gpu::Node n{path, path, true, path != "/h/dev/shm"};
    n.rdev = makedev(195, 0);
    return n;
}

std::vector<std::string> texts(const Plan& p) {
    std::vector<std::string> out;
    for (const auto& op : p.ops) out.push_back(rootfs::to_string(op));
    return out;
}

bool has(const std::vector<std::string>& v, const std::string& needle) {
    return std::any_of(v.begin(), v.end(),
                       [&](auto& s) { return s.find(needle) != std::string::npos; });
}

Plan plan_one(const Spec& spec, const std::string& device, const gpu::ImageInfo& image = {}) {
    Request r = parse_device_flag(spec.kind + "=" + device);
    r.cdi.spec = &spec;
    for (const Device& d : spec.devices)
        if (d.name == device) r.cdi.device = &d;
    REQUIRE(r.cdi.device);
    return plan_devices({r},
                        {fake_node,
                         [](const std::string& p) {
                             return p.find("libcuda.so.") != std::string::npos ? "libcuda.so.1"
                                                                               : "";
                         }},
                        image);
}

}  // namespace

TEST_CASE("CDI: the toolkit's YAML and JSON specs, AMD's and Intel's, parse and validate") {
    const Spec nv = valid(fixture("nvidia-toolkit.yaml"));
    CHECK(nv.version == "0.5.0");
    CHECK(nv.kind == "nvidia.com/gpu");
    CHECK(nv.devices.size() == 4);
    CHECK(nv.devices[2].name == "1:0");
    CHECK(nv.edits.hooks.size() == 4);
    CHECK(nv.edits.mounts[0].options.back() == "rprivate");
    CHECK(minimum_version(nv) == "0.5.0");  // names that start with a digit, hostPath
    CHECK(valid(fixture("nvidia-toolkit.json")).edits.hooks[0].args[1] == "hook");
    const Spec amd = valid(fixture("amd.json"));
    CHECK(amd.edits.device_nodes[0].major == 235);
    CHECK(valid(fixture("intel.yaml")).devices[0].edits.env[0] == "ZE_AFFINITY_MASK=0");
}

TEST_CASE("CDI: the minimum version, as specs-go decides it") {
    const std::string dev = "devices: [{name: gpu0, containerEdits: {env: [A=1]}}]\n";
    CHECK(minimum_version(valid("cdiVersion: 0.3.0\nkind: a.com/b\n" + dev)) == "0.3.0");
    CHECK(minimum_version(parse_spec("cdiVersion: 0.3.0\nkind: a.com/b\ndevices: [{name: g, "
                                     "containerEdits: {mounts: [{hostPath: /a, containerPath: /b, "
                                     "type: bind}]}}]\n",
                                     "x")) == "0.4.0");
    CHECK(minimum_version(parse_spec("kind: a.com/b\ndevices: [{name: \"0\"}]\n", "x")) == "0.5.0");
    CHECK(minimum_version(parse_spec("kind: a.com/b.c\n" + dev, "x")) == "0.6.0");
    CHECK(minimum_version(parse_spec("kind: a.com/b\nannotations: {x: y}\n" + dev, "x")) ==
          "0.6.0");
    CHECK(minimum_version(parse_spec("kind: a.com/b\ncontainerEdits: {additionalGids: [5]}\n" + dev,
                                     "x")) == "0.7.0");
    CHECK(minimum_version(parse_spec(
              "kind: a.com/b\ncontainerEdits: {netDevices: [{hostInterfaceName: e}]}\n" + dev,
              "x")) == "1.1.0");
}

TEST_CASE("CDI: hostile and broken specs are refused, naming the file") {
    const std::string dev = "devices: [{name: gpu0, containerEdits: {env: [A=1]}}]\n";
    CHECK(error_of("cdiVersion: 9.9.9\nkind: a.com/b\n" + dev) ==
          "CDI spec \"/etc/cdi/x.yaml\": invalid cdiVersion \"9.9.9\"");
    CHECK(error_of("cdiVersion: 0.3.0\nkind: a.com/b\ndevices: [{name: \"0\", containerEdits: "
                   "{env: [A=1]}}]\n") ==
          "CDI spec \"/etc/cdi/x.yaml\": cdiVersion 0.3.0 is too old for the features it uses: "
          "it must be at least 0.5.0");
    CHECK(error_of("cdiVersion: 0.5.0\nkind: nokind\n" + dev) ==
          "CDI spec \"/etc/cdi/x.yaml\": invalid kind \"nokind\": expected vendor/class");
    CHECK_THAT(error_of("cdiVersion: 0.5.0\nkind: 1a.com/b\n" + dev),
               Catch::Contains("invalid vendor"));
    CHECK(error_of("cdiVersion: 0.5.0\nkind: a.com/b\n") ==
          "CDI spec \"/etc/cdi/x.yaml\": no devices");
    CHECK(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, containerEdits: {env: "
                   "[A=1]}}, {name: g, containerEdits: {env: [A=1]}}]\n") ==
          "CDI spec \"/etc/cdi/x.yaml\": device \"g\" is defined twice");
    CHECK(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g}]\n") ==
          "CDI spec \"/etc/cdi/x.yaml\": device \"g\" has no edits");
    CHECK_THAT(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: \"g/../x\", "
                        "containerEdits: {env: [A=1]}}]\n"),
               Catch::Contains("invalid character '/'"));
    CHECK(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, containerEdits: {env: "
                   "[=1]}}]\n") ==
          "CDI spec \"/etc/cdi/x.yaml\": device \"g\": invalid environment variable \"=1\"");
    CHECK_THAT(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, containerEdits: "
                        "{deviceNodes: [{path: /dev/x, type: z}]}}]\n"),
               Catch::Contains("invalid type \"z\""));
    CHECK_THAT(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, containerEdits: "
                        "{hooks: [{hookName: whenever, path: /x}]}}]\n"),
               Catch::Contains("invalid hook name \"whenever\""));
    CHECK_THAT(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, containerEdits: "
                        "{deviceNodes: [{path: /dev/x, major: [1]}]}}]\n"),
               Catch::Contains("major: expected an integer"));
    CHECK_THAT(error_of("{\"cdiVersion\": "), Catch::Contains("not JSON or YAML"));
    CHECK_THAT(error_of("[1, 2]"), Catch::Contains("the top level: expected a mapping"));
    CHECK_THAT(error_of(std::string(5 << 20, '#')), Catch::Contains("larger than 4 MiB"));
    std::string deep;
    for (int i = 0; i < 200; ++i) deep += "[";
    CHECK_THAT(error_of(deep), Catch::Contains("not JSON or YAML"));
}

TEST_CASE("CDI: YAML's anchors, quoting and empty values, and an alias bomb refused") {
    // One edits block shared by an anchor: both devices get it; a quoted "0" stays a string.
    const Spec s = valid(
        "cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n"
        "- name: \"0\"\n  containerEdits: &edits\n    env: [\"A=1\"]\n"
        "- name: g1\n  containerEdits: *edits\n"
        "containerEdits:\n  hooks:\n");
    REQUIRE(s.devices.size() == 2);
    CHECK(s.devices[0].name == "0");
    CHECK(s.devices[1].edits.env == std::vector<std::string>{"A=1"});
    CHECK_THAT(error_of("cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: 0\n"),
               Catch::Contains("expected a string"));
    // Ten aliases of ten aliases, seven deep: 10^7 nodes from a few hundred bytes.
    std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 8; ++i) {
        bomb += cat("a", i, ": &a", i, " [");
        for (int j = 0; j < 10; ++j) bomb += cat(j ? ", " : "", "*a", i - 1);
        bomb += "]\n";
    }
    CHECK_THAT(error_of(bomb), Catch::Contains("aliases expand past"));
    std::string nested = "a: ";
    for (int i = 0; i < 100; ++i) nested += "[";
    for (int i = 0; i < 100; ++i) nested += "]";
    CHECK_THAT(error_of(nested + "\n"), Catch::Contains("nested too deeply"));
    CHECK_THAT(error_of("a: [1, 2\n"), Catch::Contains("line 2, column 1"));
}

TEST_CASE("CDI: qualified names and --device forms") {
    CHECK(parse_qualified("nvidia.com/gpu=0")->kind == "nvidia.com/gpu");
    CHECK(parse_qualified("nvidia.com/gpu=1:1:0")->name == "1:1:0");
    CHECK_FALSE(parse_qualified("nvidia.com/gpu"));
    CHECK_FALSE(parse_qualified("0"));
    CHECK_FALSE(parse_qualified("a.com/b=-x"));
    CHECK(parse_device_flag("/dev/fuse:rw").permissions == "rw");
    CHECK(parse_device_flag("/dev/fuse").permissions == "rwm");
    CHECK_THROWS_AS(parse_device_flag("/dev/fuse:x"), UsageError);
    CHECK_THROWS_AS(parse_device_flag("fuse"), UsageError);
}

TEST_CASE("CDI plan: the toolkit's edits, its hooks' work done natively") {
    const Spec nv = valid(fixture("nvidia-toolkit.yaml"));
    const Plan p = plan_one(nv, "0", {"/usr/lib/x86_64-linux-gnu", {}, {}});
    const auto t = texts(p);
    CHECK(has(t, "/h/dev/nvidia2 -> /dev/nvidia2"));
    CHECK(has(t, "/h/dev/nvidiactl -> /dev/nvidiactl"));
    CHECK(has(t, "/usr/lib/x86_64-linux-gnu/libcuda.so -> libcuda.so.1"));
    CHECK(has(t, "/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> libcuda.so.550.54.14"));  // soname
    CHECK(has(t, "/etc/ld.so.cache"));
    CHECK(p.env ==
          std::vector<std::pair<std::string, std::string>>{{"NVIDIA_VISIBLE_DEVICES", "void"}});
    CHECK(p.compat_version == "550.54.14");
    CHECK(p.nodes.size() == 4);
}

TEST_CASE("CDI plan: hostile edits are refused, one line each") {
    const auto plan_of = [](const std::string& edits) {
        static std::vector<Spec> keep;
        keep.push_back(
            valid("cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, "
                  "containerEdits: " +
                  edits + "}]\n"));
        return plan_one(keep.back(), "g");
    };
    CHECK_THROWS_WITH(plan_of("{mounts: [{hostPath: /etc, containerPath: /../../etc}]}"),
                      Catch::Contains("contains \"..\""));
    CHECK_THROWS_WITH(plan_of("{mounts: [{hostPath: /etc, containerPath: etc}]}"),
                      Catch::Contains("is not an absolute path"));
    CHECK_THROWS_WITH(plan_of("{mounts: [{hostPath: none, containerPath: /x, type: tmpfs}]}"),
                      Catch::Contains("type \"tmpfs\" is not supported"));
    CHECK_THROWS_WITH(plan_of("{deviceNodes: [{path: /dev/shm, hostPath: /h/dev/shm}]}"),
                      "--device a.com/b=g (/etc/cdi/x.yaml): \"/h/dev/shm\" is not a character "
                      "device");
    CHECK_THROWS_WITH(
        plan_of("{deviceNodes: [{path: /dev/x, hostPath: /h/x, major: 195, minor: 7}]}"),
        Catch::Contains("is 195:0, not the 195:7 the spec gives"));
    CHECK_THROWS_WITH(plan_of("{deviceNodes: [{path: /etc/shadow, hostPath: /h/x}]}"),
                      Catch::Contains("is not under /dev"));
    CHECK_THROWS_WITH(plan_of("{deviceNodes: [{path: /dev/sda, type: b}]}"),
                      Catch::Contains("character devices only"));
    CHECK_THROWS_WITH(plan_of("{hooks: [{hookName: createContainer, path: /bin/sh, args: [sh, -c, "
                              "id]}]}"),
                      "--device a.com/b=g (/etc/cdi/x.yaml): createContainer hook \"/bin/sh\": "
                      "gpubox runs no hook from a spec");
    CHECK_THROWS_WITH(
        plan_of("{hooks: [{hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, "
                "args: [nvidia-cdi-hook, run-anything]}]}"),
        Catch::Contains("(verb \"run-anything\" is not one gpubox knows)"));
    CHECK_THROWS_WITH(plan_of("{additionalGids: [0]}"), Catch::Contains("at least 0.7.0"));
}

TEST_CASE("CDI spec directories: later wins, same directory conflicts, bad files recorded") {
    test::TempDir tmp("cdi");
    const auto dir = [&](const std::string& name) {
        std::filesystem::create_directories(tmp.dir / name);
        return (tmp.dir / name).string();
    };
    const std::string low = dir("etc"), high = dir("run");
    const auto spec = [](const std::string& node) {
        return "cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: g, containerEdits: "
               "{deviceNodes: [{path: " +
               node + "}]}}]\n";
    };
    std::ofstream(low + "/a.yaml") << spec("/dev/low");
    std::ofstream(high + "/a.yaml") << spec("/dev/high");
    std::ofstream(high + "/broken.json") << "{";
    std::ofstream(high + "/ignored.txt") << "not a spec";
    std::filesystem::create_symlink("/etc/passwd", high + "/link.yaml");
    SpecSet set = read_spec_dirs({low, high, (tmp.dir / "missing").string()});
    CHECK(set.specs.size() == 2);
    CHECK(set.problems.size() == 2);  // broken.json, link.yaml (never followed)
    Resolved r = resolve_device(set, "a.com/b=g", "--device");
    CHECK(r.device->edits.device_nodes[0].path == "/dev/high");
    std::ofstream(high + "/b.yaml") << spec("/dev/other");
    set = read_spec_dirs({low, high});
    CHECK_THROWS_WITH(resolve_device(set, "a.com/b=g", "--device"),
                      Catch::Contains("defined by two specs of one directory"));
    CHECK_THROWS_WITH(
        resolve_device(set, "a.com/b=h", "--device"),
        Catch::StartsWith("--device a.com/b=h: no such CDI device; a.com/b offers g"));
}
