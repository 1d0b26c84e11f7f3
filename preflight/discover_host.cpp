// The host's facts, read below the driver root.
#include <fcntl.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/image.hpp"
#include "rootfs/view.hpp"
#include "gpu/pci.hpp"
#include "gpu/proc_driver.hpp"
#include "preflight/discover.hpp"
#include "preflight/files.hpp"

namespace gpubox::preflight {
namespace {

constexpr const char* kGpus = "/proc/driver/nvidia/gpus";

void read_driver(int root, HostFacts& h) {
    for (const char* file : {"/sys/module/nvidia/version", "/proc/driver/nvidia/version"}) {
        const auto text = read_in(root, file, 4096);
        if (!text) continue;
        if (const auto v = gpu::parse_driver_version(*text)) {
            h.driver = *v, h.driver_file = file;
            h.cuda = cuda_for_driver(*v);
            return;
        }
    }
}

// The driver's listing as a minimal inventory (index = PCI order), enough for select_gpus;
// each GPU's information file read only where `read_all` or its index is in `only`.
gpu::GpuInventory listing(int root, bool read_all, const std::vector<int>& only) {
    gpu::GpuInventory inv;
    for (const std::string& name : list_in(root, kGpus)) {
        gpu::Gpu g;
        g.vendor = gpu::Vendor::nvidia;
        if (const auto pci = gpu::parse_pci_address(name)) g.pci = *pci;
        else inv.unplaced.push_back(name);
        g.pci_name = g.proc_dir = name;
        inv.gpus.push_back(std::move(g));
    }
    std::sort(inv.gpus.begin(), inv.gpus.end(),
              [](const gpu::Gpu& a, const gpu::Gpu& b) { return a.pci < b.pci; });
    for (std::size_t i = 0; i < inv.gpus.size(); ++i) {
        gpu::Gpu& g = inv.gpus[i];
        g.index = static_cast<int>(i);
        if (!read_all && std::find(only.begin(), only.end(), g.index) == only.end()) continue;
        const std::string file = cat(kGpus, "/", g.proc_dir, "/information");
        const auto text = read_in(root, file);
        if (!text) continue;
        try {
            const gpu::GpuInformation info = gpu::parse_gpu_information(*text, file);
            g.model = info.model, g.uuid = info.uuid, g.minor = info.device_minor;
        } catch (const PlanError&) {
            // gpubox run reports an unreadable GPU itself; the preflight just knows less.
        }
    }
    return inv;
}

GpuFacts facts_of(int root, const gpu::Gpu& g) {
    GpuFacts f;
    f.index = g.index, f.bus = gpu::to_string(g.pci), f.uuid = g.uuid, f.model = g.model;
    f.brand = f.model.empty() ? "" : brand_of(f.model);
    f.info_file = cat(kGpus, "/", g.proc_dir, "/information");
    f.id_file = cat("/sys/bus/pci/devices/", g.pci_name, "/device");
    if (const auto id = read_in(root, f.id_file, 64)) {
        f.device_id = static_cast<unsigned>(std::strtoul(id->c_str(), nullptr, 16));
        f.cc = compute_capability_of(f.device_id);
    }
    return f;
}

void read_cpu(int root, HostFacts& h) {
    h.cpu_file = "/proc/cpuinfo";
    // The first CPU's block is all it needs: on a host with hundreds of CPUs, generating the
    // whole file costs milliseconds.
    const auto text = read_in(root, h.cpu_file, 16384);
    if (!text) return;
    for (std::size_t pos = 0; pos < text->size();) {
        std::size_t end = text->find('\n', pos);
        if (end == std::string::npos) end = text->size();
        const std::string line = text->substr(pos, end - pos);
        pos = end + 1;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string key = line.substr(0, line.find_first_of(" \t"));
        const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
        if (key == "model" && line.rfind("model name", 0) == 0 && h.cpu_model.empty())
            h.cpu_model = value;
        if (key == "flags") {
            h.cpu_flags = value;
            return;
        }
    }
}

}  // namespace

HostFacts discover_host_facts(const std::string& driver_root, const gpu::GpuSpec& spec, bool cpu,
                              bool driver) {
    HostFacts h;
    const bool none = spec.kind == gpu::GpuSpec::Kind::none;
    if (none && !driver && !cpu) return h;
    const UniqueFd root = rootfs::open_directory(driver_root, "--driver-root");
    if (driver || !none) read_driver(root.get(), h);
    if (cpu) read_cpu(root.get(), h);
    if (none) return h;
    h.gpus_asked = true;
    const std::vector<int> only = gpu::indices_only(spec);
    const gpu::GpuInventory inv = listing(root.get(), only.empty(), only);
    for (const gpu::Gpu& g : gpu::select_gpus(inv, spec)) h.gpus.push_back(facts_of(root.get(), g));
    return h;
}

}  // namespace gpubox::preflight
