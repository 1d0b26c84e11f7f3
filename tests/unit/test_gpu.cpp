// Discovery, selection and the GPU mount planner against FakeHost trees (no privileges: nodes
// are plain files here, so tests that plan mounts mark them as the driver's devices).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/image.hpp"
#include "gpu/inventory.hpp"
#include "gpu/mount_list.hpp"
#include "gpu/proc_driver.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/view.hpp"
#include "rootfs/wire.hpp"
#include "tests/fixtures/fake_host.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace gpubox;
using namespace gpubox::gpu;

namespace {

struct Host : test::TempDir {
    test::FakeHost fake;
    Host() : TempDir("fakehost"), fake(dir.string(), false) {
        fake.standard(4, "550.54.14", "535.104.05", {"", "", "", "", "", "", "", "", "/bin/true"});
    }
};

// What the real host would have: the driver's character devices.
GpuInventory as_real(GpuInventory inv) {
    for (Gpu& g : inv.gpus)
        for (Node& n : g.nodes) {
            n.is_char = true, n.host = inv.driver_root + n.path;
            if (g.vendor == Vendor::nvidia) n.rdev = makedev(195, static_cast<unsigned>(g.minor));
        }
    const std::map<std::string, dev_t> rdev = {{"nvidiactl", makedev(195, 255)},
                                               {"nvidia-modeset", makedev(195, 254)},
                                               {"nvidia-uvm", makedev(508, 0)},
                                               {"nvidia-uvm-tools", makedev(508, 1)}};
    for (auto& [name, n] : inv.shared_nodes) {
        n.is_char = n.exists, n.host = inv.driver_root + n.path;
        if (rdev.count(name)) n.rdev = rdev.at(name);
    }
    return inv;
}

std::vector<std::string> texts(const GpuPlan& p) {
    std::vector<std::string> out;
    for (const auto& op : p.ops) out.push_back(rootfs::to_string(op));
    return out;
}

// `gpubox list`'s table as cells: its columns are set apart by two spaces or more.
std::vector<std::vector<std::string>> table(const std::string& text) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::vector<std::string> cells;
        for (std::size_t at = 0; at < line.size();) {
            std::size_t gap = line.find("  ", at);
            cells.push_back(
                line.substr(at, gap == std::string::npos ? std::string::npos : gap - at));
            if (gap == std::string::npos) break;
            at = line.find_first_not_of(' ', gap);
        }
        rows.push_back(cells);
    }
    return rows;
}

bool has(const std::vector<std::string>& v, const std::string& needle) {
    return std::any_of(v.begin(), v.end(),
                       [&](auto& s) { return s.find(needle) != std::string::npos; });
}

}  // namespace

TEST_CASE("discovery: GPUs in PCI order, minors from procfs, non-GPU functions left out") {
    Host h;
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    CHECK(inv.nvidia_version == "550.54.14");
    REQUIRE(inv.gpus.size() == 6);  // 4 NVIDIA + AMD + Intel; no audio, NVSwitch or bridge
    CHECK(inv.gpus[0].index == 0);
    CHECK(to_string(inv.gpus[0].pci) == "0000:3b:00.0");
    CHECK(inv.gpus[0].minor == 2);
    CHECK(inv.gpus[0].nodes[0].path == "/dev/nvidia2");
    CHECK(inv.gpus[0].pci_class == 0x030200);  // 3D controller
    CHECK(inv.gpus[1].pci_class == 0x030000);  // VGA
    CHECK(inv.gpus[3].minor == 1);
    CHECK(inv.gpus[4].vendor == Vendor::intel);  // other vendors follow, in PCI order
    CHECK(inv.gpus[4].index == -1);
    CHECK(inv.gpus[4].nodes.size() == 2);
    CHECK(inv.gpus[5].vendor == Vendor::amd);
}

TEST_CASE("discovery scope: indices and UUIDs need only the NVIDIA driver's listing") {
    CHECK(scope_for(parse_gpu_spec("0,3")) == Scope::nvidia);
    CHECK(scope_for(parse_gpu_spec("GPU-000000a2-1111-2222-3333-444400000012")) == Scope::nvidia);
    CHECK(scope_for(parse_gpu_spec("0,af:00.0")) == Scope::all);
    CHECK(scope_for(parse_gpu_spec("all")) == Scope::all);
    Host h;
    GpuInventory full = discover_gpus(h.dir.string(), kCapDefault);
    GpuInventory nv = discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia);
    REQUIRE(nv.gpus.size() == 4);  // no AMD or Intel GPU, no PCI class
    for (std::size_t i = 0; i < nv.gpus.size(); ++i) {
        CHECK(nv.gpus[i].index == full.gpus[i].index);
        CHECK(nv.gpus[i].pci == full.gpus[i].pci);
        CHECK(nv.gpus[i].minor == full.gpus[i].minor);
        CHECK(nv.gpus[i].nodes[0].host == full.gpus[i].nodes[0].host);
        CHECK(nv.gpus[i].pci_class == 0);
    }
    CHECK(nv.libs.size() == full.libs.size());
    CHECK(nv.shared_nodes.at("nvidiactl").host == h.dir.string() + "/dev/nvidiactl");
}

TEST_CASE(
    "discovery by index reads only the GPUs asked for, and numbers them as a full read does") {
    CHECK(indices_only(parse_gpu_spec("3,0")) == std::vector<int>{3, 0});
    CHECK(indices_only(parse_gpu_spec("0,GPU-000000a2-1111-2222-3333-444400000012")).empty());
    CHECK(indices_only(parse_gpu_spec("all")).empty());
    Host h;
    const GpuInventory full = discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia);
    // Information files a full read finds unusable, for GPUs not asked for: never read.
    const fs::path gpus = h.dir / "proc/driver/nvidia/gpus";
    for (const char* bus : {"0000:5e:00.0", "0000:86:00.0"}) {
        fs::copy_file(gpus / bus / "information", h.dir / bus);
        std::ofstream(gpus / bus / "information") << "not the driver's\n";
    }
    const GpuInventory broken = discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia);
    REQUIRE(broken.gpus.size() == 4);
    CHECK(broken.gpus[1].problem ==
          "\"/proc/driver/nvidia/gpus/0000:5e:00.0/information\": no Device Minor");
    CHECK(broken.gpus[3].problem.empty());
    const GpuInventory some = discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia, {3, 0});
    REQUIRE(some.gpus.size() == full.gpus.size());
    for (std::size_t i = 0; i < full.gpus.size(); ++i) {
        CHECK(some.gpus[i].index == full.gpus[i].index);
        CHECK(some.gpus[i].pci == full.gpus[i].pci);
    }
    for (std::size_t i : {0u, 3u}) {  // inspected as a full read inspects them
        CHECK(some.gpus[i].uuid == full.gpus[i].uuid);
        CHECK(some.gpus[i].minor == full.gpus[i].minor);
        REQUIRE(some.gpus[i].nodes.size() == 1);
        CHECK(some.gpus[i].nodes[0].host == full.gpus[i].nodes[0].host);
    }
    CHECK(some.gpus[1].uuid.empty());  // listed only
    CHECK(some.gpus[1].nodes.empty());
    CHECK(select_gpus(some, parse_gpu_spec("3"))[0].minor == 1);
    // An information file that disagrees with its directory's name: the full read decides.
    for (const char* bus : {"0000:5e:00.0", "0000:86:00.0"})
        fs::copy_file(h.dir / bus, gpus / bus / "information",
                      fs::copy_options::overwrite_existing);
    const fs::path info = gpus / "0000:3b:00.0/information";
    std::string text;
    {
        std::ifstream in(info);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::string was = "Bus Location: \t 0000:3b:00.0";
    text.replace(text.find(was), was.size(), "Bus Location: \t 0000:ff:00.0");
    std::ofstream(info) << text;
    const GpuInventory moved = discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia, {0});
    CHECK(to_string(moved.gpus[0].pci) == "0000:5e:00.0");
    CHECK(to_string(moved.gpus[3].pci) == "0000:ff:00.0");
    CHECK(moved.gpus[3].minor == 2);
}

TEST_CASE(
    "discovery: a GPU the driver lists but does not describe keeps its index, and cannot be "
    "selected") {
    Host h;
    const GpuInventory before = discover_gpus(h.dir.string(), kCapDefault);
    h.fake.remove(
        "/proc/driver/nvidia/gpus/0000:3b:00.0/information");  // GPU 0 (unreadable, fallen off the bus)
    for (const auto& [scope, only] : {std::pair{Scope::all, std::vector<int>{}},
                                      {Scope::nvidia, {}},
                                      {Scope::nvidia, {0}},
                                      {Scope::nvidia, {1}}}) {
        const auto asked = [&](int i) {
            return only.empty() || std::find(only.begin(), only.end(), i) != only.end();
        };
        INFO("scope " << (scope == Scope::all ? "all" : "nvidia")
                      << (only.empty() ? "" : cat(", index ", only[0])));
        GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapDefault, scope, only));
        REQUIRE(inv.gpus.size() >= 4);
        for (std::size_t i = 0; i < 4; ++i) {  // the same numbering as before, as nvidia-smi's
            CHECK(inv.gpus[i].index == before.gpus[i].index);
            CHECK(inv.gpus[i].pci == before.gpus[i].pci);
        }
        CHECK(inv.gpus[0].nodes.empty());
        CHECK(inv.gpus[0].pci_class == (scope == Scope::all ? 0x030200u : 0u));
        CHECK(inv.gpus[1].problem.empty());
        if (!asked(0)) {  // listed by its directory's name alone
            CHECK(inv.gpus[0].problem.empty());
        } else try {
                CHECK(inv.gpus[0].problem ==
                      "\"/proc/driver/nvidia/gpus/0000:3b:00.0/information\" cannot be read");
                plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")), kCapDefault,
                                {"/usr/lib/x86_64-linux-gnu", {}});
                FAIL("GPU 0 was planned");
            } catch (const PlanError& e) {
                CHECK(std::string(e.what()) ==
                      "GPU 0 (0000:3b:00.0): \"/proc/driver/nvidia/gpus/0000:3b:00.0/information\" "
                      "cannot be read");
            }
        if (!asked(1)) continue;
        const GpuPlan p = plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("1")), kCapDefault,
                                          {"/usr/lib/x86_64-linux-gnu", {}});
        CHECK(has(texts(p), "-> /dev/nvidia" + std::to_string(before.gpus[1].minor) +
                                " "));  // index 1 is still GPU 1
    }
    CHECK(table(describe_gpus(discover_gpus(h.dir.string(), kCapDefault)))[1] ==
          std::vector<std::string>{
              "0", "0000:3b:00.0", "nvidia", "-", "-",
              "- (\"/proc/driver/nvidia/gpus/0000:3b:00.0/information\" cannot be read)"});
}

TEST_CASE(
    "discovery: a driver entry with no PCI address makes indices uncertain, and fails nothing "
    "else") {
    Host h;
    const GpuInventory before = discover_gpus(h.dir.string(), kCapDefault);
    const fs::path odd = h.dir / "proc/driver/nvidia/gpus/odd";
    fs::create_directories(odd);
    std::string why = "\"/proc/driver/nvidia/gpus/odd\" is not named by a PCI address, and ";
    SECTION("its information cannot be read") {
        why += "\"/proc/driver/nvidia/gpus/odd/information\" cannot be read";
    }
    SECTION("its Bus Location is not a PCI address either") {
        std::ifstream in(h.dir / "proc/driver/nvidia/gpus/0000:3b:00.0/information");
        std::string text(std::istreambuf_iterator<char>(in), {});
        const std::string was = "Bus Location: \t 0000:3b:00.0";
        text.replace(text.find(was), was.size(), "Bus Location: \t zz:00");
        std::ofstream(odd / "information") << text;
        why += "its Bus Location \"zz:00\" is not one";
    }
    for (const auto& [scope, only] :
         {std::pair{Scope::all, std::vector<int>{}}, {Scope::nvidia, {}}, {Scope::nvidia, {0}}}) {
        INFO("scope " << (scope == Scope::all ? "all" : "nvidia")
                      << (only.empty() ? "" : ", index 0"));
        const GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault, scope, only);
        CHECK(inv.unplaced == std::vector<std::string>{why});
        REQUIRE(inv.gpus.size() >= 4);
        for (std::size_t i = 0; i < 4; ++i) CHECK(inv.gpus[i].pci == before.gpus[i].pci);
        for (const char* spec : {"0", "2,GPU-000000a1", "all"})
            CHECK_THROWS_WITH(
                select_gpus(inv, parse_gpu_spec(spec)),
                Catch::Matchers::EndsWith(
                    "the driver lists a GPU that cannot be placed in PCI order: " + why));
        const std::vector<Gpu> by_uuid = select_gpus(inv, parse_gpu_spec(before.gpus[1].uuid));
        REQUIRE(by_uuid.size() == 1);
        CHECK(by_uuid[0].pci == before.gpus[1].pci);
        CHECK(select_gpus(inv, parse_gpu_spec("0000:86:00.0")).size() == 1);
        CHECK(table(describe_gpus(inv)).back() ==
              std::vector<std::string>{"?", "?", "nvidia", "-", "-", "- (" + why + ")"});
    }
}

TEST_CASE("discovery: only libraries of the kernel module's version, for the capabilities asked") {
    Host h;
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    std::vector<std::string> files;
    for (const DriverLib& l : inv.libs) files.push_back(l.file);
    CHECK(files == std::vector<std::string>{"libcuda.so.550.54.14", "libnvidia-ml.so.550.54.14",
                                            "libnvidia-opencl.so.550.54.14",
                                            "libnvidia-ptxjitcompiler.so.550.54.14"});
    CHECK(inv.stale_versions == std::vector<std::string>{"535.104.05"});
    auto cuda = std::find_if(inv.libs.begin(), inv.libs.end(),
                             [](auto& l) { return l.file == "libcuda.so.550.54.14"; });
    CHECK(cuda->host_path == (h.dir / "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14").string());
    GpuInventory video = discover_gpus(h.dir.string(), kCapVideo | kCapGraphics);
    bool encode = false, glx = false, gtk = false;
    for (auto& l : video.libs)
        encode |= l.file.find("encode") != std::string::npos,
            glx |= l.file.find("GLX") != std::string::npos,
            gtk |= l.file.find("gtk") != std::string::npos;
    CHECK(encode);
    CHECK(glx);
    CHECK_FALSE(gtk);
}

TEST_CASE("discovery: an absolute symlink under the driver root stays inside it") {
    Host h;
    fs::remove(h.dir / "sys/module/nvidia/version");
    fs::create_symlink("/proc/driver/nvidia/version", h.dir / "sys/module/nvidia/version");
    CHECK(discover_gpus(h.dir.string(), kCapDefault).nvidia_version == "550.54.14");
}

TEST_CASE(
    "discovery: a GPU's /proc directory named through a link is bound from inside the driver "
    "root") {
    Host h;
    const fs::path gpus = h.dir / "proc/driver/nvidia/gpus";
    fs::rename(gpus / "0000:3b:00.0", h.dir / "gpu-3b");
    fs::create_symlink("/gpu-3b",
                       gpus / "0000:3b:00.0");  // absolute: inside the driver root, not on the host
    for (const std::vector<int>& only : {std::vector<int>{}, {0}}) {
        GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia, only));
        const auto t = texts(plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")),
                                             kCapDefault, {"/usr/lib/x86_64-linux-gnu", {}}));
        CHECK(has(t, "ro-bind " + fs::canonical(h.dir).string() +
                         "/gpu-3b -> /proc/driver/nvidia/gpus/0000:3b:00.0"));
    }
}

TEST_CASE("discovery: absolute, chained and escaping soname links resolve inside the driver root") {
    Host h;
    const fs::path lib = h.dir / "usr/lib/x86_64-linux-gnu";
    fs::remove(lib / "libnvidia-ml.so.1");  // absolute: found by the full resolution, in the root
    fs::create_symlink("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14",
                       lib / "libnvidia-ml.so.1");
    fs::remove(lib / "libcuda.so");  // a link to a link
    fs::create_symlink("libcuda.so.1", lib / "libcuda.so");
    // Points at a decoy outside the driver root: read as if the root were "/", it is missing.
    const fs::path decoy = h.dir.string() + "-decoy";
    fs::create_directory(decoy);
    fs::copy_file(lib / "libnvidia-ptxjitcompiler.so.550.54.14",
                  decoy / "libnvidia-ptxjitcompiler.so.550.54.14");
    fs::remove(lib / "libnvidia-ptxjitcompiler.so.1");
    fs::create_symlink(decoy / "libnvidia-ptxjitcompiler.so.550.54.14",
                       lib / "libnvidia-ptxjitcompiler.so.1");
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    fs::remove_all(decoy);
    std::map<std::string, DriverLib> by_file;
    for (const DriverLib& l : inv.libs) by_file[l.file] = l;
    REQUIRE(by_file.count("libnvidia-ml.so.550.54.14"));
    CHECK(by_file["libnvidia-ml.so.550.54.14"].host_path ==
          (lib / "libnvidia-ml.so.550.54.14").string());
    REQUIRE(by_file.count("libcuda.so.550.54.14"));
    const auto& cuda = by_file["libcuda.so.550.54.14"].sonames;
    CHECK(std::count(cuda.begin(), cuda.end(), "libcuda.so") == 1);
    CHECK(std::count(cuda.begin(), cuda.end(), "libcuda.so.1") == 1);
    CHECK_FALSE(by_file.count("libnvidia-ptxjitcompiler.so.550.54.14"));
    for (const DriverLib& l : inv.libs) CHECK(l.host_path.rfind(h.dir.string() + "/", 0) == 0);
}

TEST_CASE(
    "discovery: host paths are real paths, through a linked library directory and a linked driver "
    "root") {
    Host h;
    const fs::path real = fs::canonical(h.dir);
    // The cache still names /usr/lib/x86_64-linux-gnu, which is now a link to a directory.
    fs::rename(h.dir / "usr/lib/x86_64-linux-gnu", h.dir / "libs");
    fs::create_symlink("../../libs", h.dir / "usr/lib/x86_64-linux-gnu");
    const fs::path link = h.dir.string() + "-link";
    fs::create_directory_symlink(h.dir, link);
    GpuInventory inv = discover_gpus(link.string(), kCapDefault);
    fs::remove(link);
    REQUIRE_FALSE(inv.libs.empty());
    for (const DriverLib& l : inv.libs) CHECK(l.host_path == (real / "libs" / l.file).string());
    auto smi = std::find_if(inv.binaries.begin(), inv.binaries.end(),
                            [](auto& b) { return b.first == "nvidia-smi"; });
    REQUIRE(smi != inv.binaries.end());
    CHECK(smi->second == (real / "usr/bin/nvidia-smi").string());
    REQUIRE(inv.shared_nodes.count("nvidiactl"));
    CHECK(inv.shared_nodes.at("nvidiactl").host == (real / "dev/nvidiactl").string());
}

TEST_CASE("discovery: a tool must be a regular file; a directory of that name is passed over") {
    Host h;
    fs::create_directories(h.dir / "usr/local/bin");
    fs::rename(h.dir / "usr/bin/nvidia-smi", h.dir / "usr/local/bin/nvidia-smi");
    fs::create_directory(h.dir / "usr/bin/nvidia-smi");
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    auto smi = std::find_if(inv.binaries.begin(), inv.binaries.end(),
                            [](auto& b) { return b.first == "nvidia-smi"; });
    REQUIRE(smi != inv.binaries.end());
    CHECK(smi->second == (h.dir / "usr/local/bin/nvidia-smi").string());
}

TEST_CASE(
    "discovery: a driver under a prefix: its tools from beside its libraries, never a wrapper "
    "script") {
    test::TempDir t("prefixhost");
    test::FakeHost::Artifacts a{"", "", "", "", "", "", "", "", "/bin/true"};
    a.prefix = "/usr/local/nvidia";
    test::FakeHost(t.dir.string(), false).standard(2, "550.54.14", "535.104.05", a);
    REQUIRE(fs::exists(t.dir / "usr/bin/nvidia-smi"));  // the host's script of that name
    GpuInventory inv = discover_gpus(t.dir.string(), kCapDefault);
    REQUIRE_FALSE(inv.libs.empty());
    for (const DriverLib& l : inv.libs)
        CHECK(l.host_path == (t.dir / "usr/local/nvidia/lib64" / l.file).string());
    std::vector<std::string> names;
    for (const auto& [name, host] : inv.binaries) {
        names.push_back(name);
        CHECK(host == (t.dir / "usr/local/nvidia/bin" / name).string());
    }
    CHECK(names ==
          std::vector<std::string>{"nvidia-smi", "nvidia-debugdump", "nvidia-cuda-mps-control"});
    // Without the real tools, the scripts on the PATH are still no tools.
    fs::remove_all(t.dir / "usr/local/nvidia/bin");
    CHECK(discover_gpus(t.dir.string(), kCapDefault).binaries.empty());
}

TEST_CASE("discovery and image inspection never block on a FIFO where a file should be") {
    Host h;
    fs::remove(h.dir / "etc/ld.so.cache");
    REQUIRE(::mkfifo((h.dir / "etc/ld.so.cache").c_str(), 0644) == 0);
    fs::remove(h.dir / "sys/module/nvidia/version");
    REQUIRE(::mkfifo((h.dir / "sys/module/nvidia/version").c_str(), 0644) == 0);
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    CHECK(inv.nvidia_version == "550.54.14");  // from /proc/driver/nvidia/version instead
    CHECK(inv.ldcache_problem == "no /etc/ld.so.cache under the driver root");
    // The same FIFO as an image's cache: no cache of its own, gpubox writes a new one.
    fs::create_directories(h.dir / "usr/lib/x86_64-linux-gnu");
    const UniqueFd root = rootfs::open_directory(h.dir.string(), "ROOTFS");
    ImageInfo image = inspect_image(root.get());
    CHECK(image.ldcache.empty());
    CHECK(image.libdir == "/usr/lib/x86_64-linux-gnu");
}

TEST_CASE("selection by index, list, UUID, PCI address, all and none") {
    Host h;
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    auto minors = [&](const std::string& spec) {
        std::vector<int> out;
        for (const Gpu& g : select_gpus(inv, parse_gpu_spec(spec))) out.push_back(g.minor);
        return out;
    };
    CHECK(minors("0") == std::vector<int>{2});
    CHECK(minors("3,1") == std::vector<int>{0, 1});
    CHECK(minors("gpu-000000a2-1111-2222-3333-444400000012") == std::vector<int>{3});
    CHECK(minors("GPU-000000A2") == std::vector<int>{3});  // a unique prefix, as CUDA takes one
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("GPU-000000a")),
                      "--gpu GPU-000000a: names GPUs 0, 1, 2, 3; give more of the UUID");
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("GPU-000000a2-1111-2222-3333-4444000000120")),
                      Catch::Matchers::Contains("no such GPU"));
    CHECK(minors("af:00.0") == std::vector<int>{1});
    CHECK(minors("00000000:5E:00.0") == std::vector<int>{0});
    CHECK(minors("all").size() == 6);
    CHECK(minors("none").empty());
    CHECK(select_gpus(inv, parse_gpu_spec("0000:c1:00.0"))[0].vendor == Vendor::amd);
    // Each GPU by what the item could have been: index, PCI address and model, or UUID.
    CHECK_THROWS_WITH(
        select_gpus(inv, parse_gpu_spec("7")),
        Catch::Matchers::StartsWith("--gpu 7: no such GPU; GPUs on this host: 0 (0000:3b:00.0 "
                                    "Tesla T4), 1 (0000:5e:00.0 ") &&
            Catch::Matchers::EndsWith(
                ", 3 (0000:af:00.0 NVIDIA RTX A6000), 0000:00:02.0 (intel), 0000:c1:00.0 (amd)"));
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("GPU-ffff")),
                      Catch::Matchers::StartsWith(
                          "--gpu GPU-ffff: no such GPU; GPUs on this host: 0 "
                          "(GPU-000000a0-1111-2222-3333-444400000010), 1 (GPU-000000a1-"));
    CHECK_THROWS_WITH(select_gpus(GpuInventory{}, parse_gpu_spec("0")),
                      "--gpu 0: no such GPU; GPUs on this host: none");
    CHECK_THROWS_AS(parse_gpu_spec("first"), UsageError);
    CHECK_THROWS_AS(parse_gpu_spec("0,"), UsageError);
}

TEST_CASE("GPU plan: exactly the selected GPU's node and procfs entry, driver files, cache") {
    Host h;
    GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapDefault));
    ImageInfo image{choose_libdir(true),
                    {{kLdFlagsNative, "libcuda.so.1", "/opt/old/libcuda.so.1", 0},
                     {kLdFlagsNative, "libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", 0}}};
    GpuPlan p = plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")), kCapDefault, image);
    auto t = texts(p);
    CHECK(has(t, "bind-dev " + h.dir.string() + "/dev/nvidia2 -> /dev/nvidia2 [195:2]"));
    CHECK_FALSE(has(t, "-> /dev/nvidia0"));
    CHECK(has(t, "-> /dev/nvidiactl [195:255]"));
    CHECK(has(t, "-> /dev/nvidia-uvm [508:0]"));
    CHECK(has(t, "-> /dev/nvidia-uvm-tools [508:1]"));
    CHECK_FALSE(has(t, "nvidia-modeset"));
    CHECK(has(t, "tmpfs /proc/driver "));
    CHECK(has(t, "-> /proc/driver/nvidia/gpus/0000:3b:00.0"));
    CHECK_FALSE(has(t, "gpus/0000:5e:00.0"));
    CHECK(has(t, "-> /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14"));
    CHECK(has(t, "symlink /usr/lib/x86_64-linux-gnu/libcuda.so.1 -> libcuda.so.550.54.14"));
    CHECK(has(t, "symlink /usr/lib/x86_64-linux-gnu/libnvidia-ml.so -> libnvidia-ml.so.1"));
    CHECK(has(t,
              "symlink /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1 -> "
              "libnvidia-ptxjitcompiler.so.550.54.14"));
    CHECK_FALSE(has(
        t,
        "symlink /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so "));  // nobody uses that name
    CHECK(has(t, "-> /usr/bin/nvidia-smi"));
    CHECK(has(t, "/run/nvidia-persistenced/socket (optional)"));
    CHECK_FALSE(has(t, "535.104.05"));
    for (const auto& op : p.ops) {
        if (auto* w = std::get_if<rootfs::WriteFile>(&op);
            w && w->target == "/proc/driver/nvidia/params")
            CHECK(w->content.find("ModifyDeviceFiles: 0") != std::string::npos);
        if (auto* w = std::get_if<rootfs::WriteFile>(&op); w && w->target == "/etc/ld.so.cache") {
            auto entries = parse_ldcache(w->content);
            auto cuda = std::find_if(entries.begin(), entries.end(),
                                     [](auto& e) { return e.key == "libcuda.so.1"; });
            REQUIRE(cuda != entries.end());
            CHECK(cuda->value ==
                  "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14");  // the host's wins
            CHECK(std::count_if(entries.begin(), entries.end(),
                                [](auto& e) { return e.key == "libcuda.so.1"; }) == 1);
            CHECK(std::any_of(entries.begin(), entries.end(),
                              [](auto& e) { return e.key == "libz.so.1"; }));
        }
    }
    CHECK(p.summary ==
          std::vector<std::string>{"index 0 -> 0000:3b:00.0 -> /dev/nvidia2 -> "
                                   "GPU-000000a0-1111-2222-3333-444400000010 (Tesla T4)"});
}

TEST_CASE("GPU plan: capabilities choose the nodes; RHEL layout gets lib64") {
    Host h;
    GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapUtility | kCapDisplay));
    auto t = texts(plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("1")),
                                   kCapUtility | kCapDisplay, ImageInfo{choose_libdir(false), {}}));
    CHECK_FALSE(has(t, "nvidia-uvm"));
    CHECK(has(t, "-> /dev/nvidia-modeset [195:254]"));
    CHECK(has(t, "-> /usr/lib64/libnvidia-ml.so.550.54.14"));
    CHECK_FALSE(has(t, "libcuda"));
}

TEST_CASE("GPU plan: the loaders' config files come with their capabilities") {
    Host h;
    const std::string host = fs::canonical(h.dir).string();
    auto plan = [&](unsigned caps) {
        GpuInventory inv = as_real(discover_gpus(h.dir.string(), caps));
        return plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")), caps,
                               {"/usr/lib/x86_64-linux-gnu", {}});
    };
    auto icd = [](const GpuPlan& p) -> std::optional<std::string> {
        for (const auto& op : p.ops)
            if (auto* w = std::get_if<rootfs::WriteFile>(&op);
                w && w->target == "/etc/OpenCL/vendors/nvidia.icd")
                return w->content;
        return std::nullopt;
    };
    // compute: OpenCL's ICD loader is told the soname the plan links and ld.so.cache lists.
    const GpuPlan compute = plan(kCapDefault);
    CHECK(icd(compute) == "libnvidia-opencl.so.1\n");
    CHECK(has(texts(compute),
              "symlink /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 -> "
              "libnvidia-opencl.so.550.54.14"));
    CHECK_FALSE(has(texts(compute), "vulkan"));
    // The persistenced socket stays connectable; the firmware is read-only.
    const auto steps = texts(compute);
    auto step = [&](const std::string& s) { return std::count(steps.begin(), steps.end(), s); };
    CHECK(step("bind " + host +
               "/run/nvidia-persistenced/socket -> /run/nvidia-persistenced/socket (optional)") ==
          1);
    CHECK(step("ro-bind " + host +
               "/lib/firmware/nvidia/550.54.14 -> /lib/firmware/nvidia/550.54.14 (optional)") == 1);
    CHECK_FALSE(has(texts(compute), "glvnd"));
    // graphics (and display, which implies it): the host's Vulkan ICD and EGL vendor files,
    // read-only at the same paths; the ones this host lacks are not planned at all.
    for (unsigned caps : {unsigned{kCapGraphics}, kCapUtility | kCapDisplay}) {
        const auto t = texts(plan(caps));
        CHECK(has(t, "ro-bind " + host +
                         "/usr/share/vulkan/icd.d/nvidia_icd.json -> "
                         "/usr/share/vulkan/icd.d/nvidia_icd.json (optional)"));
        CHECK(has(t, "ro-bind " + host +
                         "/usr/share/glvnd/egl_vendor.d/10_nvidia.json -> "
                         "/usr/share/glvnd/egl_vendor.d/10_nvidia.json (optional)"));
        CHECK_FALSE(has(t, "/etc/vulkan"));
        CHECK_FALSE(has(t, "OpenCL"));  // no compute, no libnvidia-opencl
    }
    // A host without libnvidia-opencl: no ICD file that would name a library that is not there.
    h.fake.remove("/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1")
        .remove("/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.550.54.14");
    CHECK_FALSE(icd(plan(kCapDefault)));
}

// The real host's MIG capability nodes: character devices of nvidia-caps (241).
GpuInventory mig_real(GpuInventory inv) {
    inv = as_real(std::move(inv));
    for (Gpu& g : inv.gpus)
        for (MigDevice& m : g.mig)
            for (auto [n, minor] : {std::pair{&m.gi_node, m.gi_minor}, {&m.ci_node, m.ci_minor}})
                n->is_char = n->exists, n->rdev = makedev(241, static_cast<unsigned>(minor));
    return inv;
}

TEST_CASE("mig-minors and access files parse as the driver writes them") {
    const auto m = parse_mig_minors(
        "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access "
        "4\nbroken\ngpu1/gi2/ci7/access "
        "x\ntoo many 3\n");
    CHECK(m ==
          std::map<std::string, int>{
              {"config", 1}, {"monitor", 2}, {"gpu0/gi0/access", 3}, {"gpu0/gi0/ci0/access", 4}});
    CHECK(parse_access_minor("DeviceFileMinor: 13\nDeviceFileMode: 292\n") == 13);
    CHECK(parse_access_minor("DeviceFileMode: 292\n") == -1);
    CHECK(test::FakeHost::mig_minor(0, 1, -1) == 12);  // as on a real host: gpu0/gi1/access 12
}

TEST_CASE("discovery: MIG devices from the capability directories, nodes from mig-minors") {
    Host h;
    h.fake.mig(0, 1, 2).mig(0, 2, 1).mig(2, 0);  // GPU 1 (minor 0): 1:1:0 1:1:1 1:2:0; GPU 0: none
    for (const std::vector<int>& only : {std::vector<int>{}, {1}}) {
        GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault, Scope::nvidia, only);
        const Gpu& g = inv.gpus[1];
        CHECK(g.mig_instances == 2);
        REQUIRE(g.mig.size() == 3);
        CHECK(mig_id(g, g.mig[1]) == "1:1:1");
        CHECK(mig_name(g, g.mig[2]) == "MIG-GPU-000000a1-1111-2222-3333-444400000011/2/0");
        CHECK(g.mig[1].gi_minor == 12);
        CHECK(g.mig[1].ci_minor == 14);
        CHECK(g.mig[1].gi_node.path == "/dev/nvidia-caps/nvidia-cap12");
        CHECK(g.mig[1].ci_access == "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci1/access");
        CHECK(g.mig[1].ci_access_host == h.dir.string() + g.mig[1].ci_access);
        CHECK(g.mig[1].problem.empty());
        CHECK_FALSE(g.mig[1].gi_node.is_char);  // plain files here: never taken for the nodes
        if (only.empty()) CHECK((inv.gpus[0].mig_dir && inv.gpus[0].mig.empty()));
    }
    // mig-minors that does not list a device: the device has a problem, the rest do not.
    h.fake.file("/proc/driver/nvidia-caps/mig-minors",
                "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n");
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    CHECK(inv.gpus[1].mig[0].problem.empty());
    CHECK(inv.gpus[1].mig[1].problem ==
          "/proc/driver/nvidia-caps/mig-minors lists no gpu0/gi1/ci1/access");
}

TEST_CASE("selection of MIG devices: GPU:GI:CI, MIG-GPU-<uuid>/GI/CI; MIG-<uuid> needs NVML") {
    Host h;
    h.fake.mig(0, 1, 2).mig(0, 2, 1);
    const GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    std::vector<Gpu> sel = select_gpus(inv, parse_gpu_spec("1:1:1"));
    REQUIRE(sel.size() == 1);
    CHECK_FALSE(sel[0].whole);
    REQUIRE(sel[0].mig.size() == 1);
    CHECK(mig_id(sel[0], sel[0].mig[0]) == "1:1:1");
    sel =
        select_gpus(inv, parse_gpu_spec("MIG-GPU-000000A1-1111-2222-3333-444400000011/2/0,1:1:0"));
    REQUIRE(sel.size() == 1);
    CHECK(sel[0].mig.size() == 2);
    sel = select_gpus(inv, parse_gpu_spec("1"));  // the whole GPU, none of its MIG devices
    CHECK((sel[0].whole && sel[0].mig.empty()));
    CHECK(select_gpus(inv, parse_gpu_spec("all"))[1].mig.size() == 3);
    CHECK(nodes_of(select_gpus(inv, parse_gpu_spec("1:2:0"))[0]).size() == 3);
    CHECK(scope_for(parse_gpu_spec("1:2:0")) == Scope::nvidia);
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("1:3:0")),
                      "--gpu 1:3:0: GPU 1 (0000:5e:00.0) has no MIG device GI 3 CI 0; its MIG "
                      "devices: 1:1:0, 1:1:1, 1:2:0");
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("0:1:0")),
                      Catch::Matchers::StartsWith("--gpu 0:1:0: GPU 0 (0000:3b:00.0) has no MIG "
                                                  "device GI 1 CI 0; its MIG devices: none"));
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("9:1:0")),
                      Catch::Matchers::StartsWith("--gpu 9:1:0: no such GPU"));
    CHECK_THROWS_WITH(select_gpus(inv, parse_gpu_spec("MIG-5f0c2d1e-aaaa-bbbb-cccc-0123456789ab")),
                      "--gpu MIG-5f0c2d1e-aaaa-bbbb-cccc-0123456789ab: only NVML knows MIG "
                      "devices' own UUIDs, and it could not be asked: not tried");
    CHECK_THROWS_AS(parse_gpu_spec("1:1"), UsageError);
    CHECK_THROWS_AS(parse_gpu_spec("1:1:x"), UsageError);
}

TEST_CASE("GPU plan: a MIG device gets the GPU's node, its two capability nodes and access files") {
    Host h;
    h.fake.mig(0, 1, 2).mig(0, 2, 1);
    const GpuInventory inv = mig_real(discover_gpus(h.dir.string(), kCapDefault));
    const ImageInfo image{"/usr/lib/x86_64-linux-gnu", {}};
    const GpuPlan p =
        plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("1:1:1")), kCapDefault, image);
    const auto t = texts(p);
    CHECK(has(t, "-> /dev/nvidia0 [195:0]"));
    CHECK(has(t, "-> /dev/nvidia-caps/nvidia-cap12 [241:12]"));
    CHECK(has(t, "-> /dev/nvidia-caps/nvidia-cap14 [241:14]"));
    CHECK_FALSE(has(t, "nvidia-cap13"));  // 1:1:0's compute instance
    CHECK_FALSE(has(t, "gi2"));
    CHECK(has(t, "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/access"));
    CHECK(has(t, "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci1/access"));
    CHECK_FALSE(has(t, "ci0/access"));
    CHECK(p.warnings.empty());
    CHECK(p.summary ==
          std::vector<std::string>{
              "MIG 1:1:1 -> 0000:5e:00.0 -> /dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 "
              "/dev/nvidia-caps/nvidia-cap14 -> "
              "MIG-GPU-000000a1-1111-2222-3333-444400000011/1/1"});
    // Two compute instances of one GPU instance share its access file: bound once.
    const auto both = texts(
        plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("1:1:0,1:1:1")), kCapDefault, image));
    CHECK(std::count_if(both.begin(), both.end(), [](const std::string& s) {
              return s.find("gi1/access") != std::string::npos;
          }) == 1);
    // The whole GPU: its node, a warning that CUDA needs its MIG devices.
    const GpuPlan whole =
        plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("1")), kCapDefault, image);
    CHECK_FALSE(has(texts(whole), "nvidia-caps"));
    CHECK(whole.warnings ==
          std::vector<std::string>{"GPU 1 (0000:5e:00.0) is in MIG mode (2 GPU instances): CUDA "
                                   "runs only on MIG devices, so it will find none; give them by "
                                   "--gpu GPU:GI:CI (see 'gpubox list'); nvidia-smi still works"});
    // A capability node that is not the driver's (plain file, wrong numbers): refused.
    const GpuInventory fake = as_real(discover_gpus(h.dir.string(), kCapDefault));
    CHECK_THROWS_WITH(
        plan_gpu_mounts(fake, select_gpus(fake, parse_gpu_spec("1:2:0")), kCapDefault, image),
        "host device node \"/dev/nvidia-caps/nvidia-cap21\" is not the expected character device");
    CHECK(table(describe_gpus(inv))[3] ==
          std::vector<std::string>{"1:1:0", "0000:5e:00.0", "nvidia", "MIG GI 1 CI 0",
                                   "MIG-GPU-000000a1-1111-2222-3333-444400000011/1/0",
                                   "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 "
                                   "/dev/nvidia-caps/nvidia-cap13"});
}

TEST_CASE("GPU plan: AMD and Intel GPUs get their DRM nodes and by-path links") {
    Host h;
    GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapDefault));
    auto t = texts(
        plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0000:c1:00.0")), kCapDefault, {}));
    CHECK(has(t, "-> /dev/kfd"));
    CHECK(has(t, "-> /dev/dri/card1"));
    CHECK(has(t, "-> /dev/dri/renderD129"));
    CHECK(has(t, "symlink /dev/dri/by-path/pci-0000:c1:00.0-render -> ../renderD129"));
    CHECK_FALSE(has(t, "renderD128"));
    CHECK_FALSE(has(t, "nvidia"));
}

namespace {
// Discovery and planning of --gpu 0 on this host; `real`: its nodes count as the driver's devices.
GpuPlan plan_gpu0(const Host& h, bool real = true) {
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    if (real) inv = as_real(std::move(inv));
    return plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")), kCapDefault, {});
}
}  // namespace

TEST_CASE("GPU plan: broken hosts are clear errors") {
    Host h;
    using Catch::Matchers::Contains;
    SECTION("no /dev/nvidia-uvm") {
        h.fake.remove("/dev/nvidia-uvm");
        try {
            plan_gpu0(h);
            FAIL("no error");
        } catch (const PlanError& e) {
            CHECK(std::string(e.what()) == "host device node \"/dev/nvidia-uvm\" is missing");
            CHECK(e.hint.find("nvidia-modprobe") != std::string::npos);
        }
    }
    SECTION("a node that is not the driver's device") {
        CHECK_THROWS_WITH(plan_gpu0(h, false),
                          Contains("not the expected character device"));  // plain files
    }
    SECTION("module and libraries disagree") {
        h.fake.file("/sys/module/nvidia/version", "560.28.03\n");
        CHECK_THROWS_WITH(plan_gpu0(h), Contains("version mismatch: kernel module 560.28.03, "
                                                 "user-space libraries 535.104.05, 550.54.14"));
    }
    SECTION("no driver at all") {
        h.fake.remove("/sys/module/nvidia").remove("/proc/driver/nvidia/version");
        CHECK_THROWS_WITH(plan_gpu0(h), Contains("no NVIDIA kernel module"));
    }
    SECTION("a corrupt ld.so.cache") {
        h.fake.file("/etc/ld.so.cache", "glibc-ld.so.cache1.1 truncated");
        CHECK_THROWS_WITH(plan_gpu0(h), Contains("cannot find the NVIDIA driver libraries"));
    }
}

TEST_CASE("GPU ops placed after the rest of the plan land as if planned with it") {
    Host h;
    GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapDefault));
    rootfs::PlanInputs in;
    in.root = {"/img", rootfs::RootMode::overlay, 0};
    in.user_mounts = {{rootfs::UserMount::Type::tmpfs, "", "/scratch"}};
    const rootfs::MountPlan base = rootfs::build_mount_plan(in);
    in.device_ops = plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")), kCapDefault,
                                    ImageInfo{choose_libdir(true), {}})
                        .ops;
    const rootfs::MountPlan full = rootfs::build_mount_plan(in);
    const rootfs::MountPlan late =
        rootfs::with_device_ops(base, rootfs::place_device_ops(base, in.device_ops));
    // Every field, places included: what init builds from the monitor's ops, and --print-plan's plan.
    CHECK(rootfs::encode_ops(late.ops) == rootfs::encode_ops(full.ops));
    CHECK(late.user_from == full.user_from);
}

TEST_CASE("GPU ops fit the mount planner: /dev nodes in gpubox's tmpfs, libraries in the image") {
    Host h;
    GpuInventory inv = as_real(discover_gpus(h.dir.string(), kCapDefault));
    rootfs::PlanInputs in;
    in.root = {"/img", rootfs::RootMode::overlay, 0};
    in.device_ops = plan_gpu_mounts(inv, select_gpus(inv, parse_gpu_spec("0")), kCapDefault,
                                    ImageInfo{choose_libdir(true), {}})
                        .ops;
    rootfs::MountPlan plan = rootfs::build_mount_plan(in);
    for (const auto& op : plan.ops) {
        if (auto* d = std::get_if<rootfs::BindDev>(&op)) CHECK(d->place == rootfs::Place::gpubox);
        if (auto* s = std::get_if<rootfs::Symlink>(&op);
            s && s->path.find("libcuda") != std::string::npos)
            CHECK(s->place == rootfs::Place::image);
        if (auto* t = std::get_if<rootfs::Tmpfs>(&op); t && t->target == "/proc/driver")
            CHECK(t->place == rootfs::Place::kernel);
    }
    in.root.mode = rootfs::RootMode::writable;
    CHECK_THROWS_WITH(rootfs::build_mount_plan(in),
                      Catch::Matchers::Contains("never writes into ROOTFS"));
}

TEST_CASE("gpubox list: a header and one row per GPU, columns aligned whatever their widths") {
    Host h;
    const std::string text = describe_gpus(discover_gpus(h.dir.string(), kCapDefault));
    const auto rows = table(text);
    REQUIRE(rows.size() == 7);  // the header, 4 NVIDIA GPUs, the AMD and the Intel one
    CHECK(rows[0] == std::vector<std::string>{"INDEX", "PCI", "VENDOR", "MODEL", "UUID", "NODES"});
    CHECK(rows[1] == std::vector<std::string>{"0", "0000:3b:00.0", "nvidia", "Tesla T4",
                                              "GPU-000000a0-1111-2222-3333-444400000010",
                                              "/dev/nvidia2"});
    CHECK(rows[6] == std::vector<std::string>{"-", "0000:c1:00.0", "amd", "-", "-",
                                              "/dev/dri/card1 /dev/dri/renderD129"});
    // Every cell starts where its column's name does.
    std::istringstream in(text);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    for (std::size_t r = 1; r < rows.size(); ++r) {
        std::size_t at = 0;
        for (std::size_t c = 0; c < rows[r].size(); ++c) {
            const std::size_t col = lines[0].find(rows[0][c]);
            INFO("row " << r << " column " << rows[0][c]);
            CHECK(lines[r].compare(col, rows[r][c].size(), rows[r][c]) == 0);
            CHECK(lines[r].find(rows[r][c], at) == col);
            at = col + rows[r][c].size();
        }
    }
}
