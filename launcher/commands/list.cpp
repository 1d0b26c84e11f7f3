// gpubox list: the node's GPUs, as text or JSON.
#include <nlohmann/json.hpp>

#include "common/print.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/inventory.hpp"
#include "gpu/lease.hpp"
#include "launcher/commands/commands.hpp"
#include "launcher/monitor/nvml.hpp"

namespace gpubox::launcher {
namespace {

nlohmann::json mig_json(const gpu::Gpu& g) {
    nlohmann::json out = nlohmann::json::array();
    for (const gpu::MigDevice& m : g.mig)
        out.push_back(
            {{"id", gpu::mig_id(g, m)},
             {"name", gpu::mig_name(g, m)},
             {"gi", m.gi},
             {"ci", m.ci},
             {"uuid", m.uuid.empty() ? nlohmann::json() : nlohmann::json(m.uuid)},
             {"profile", m.profile.empty() ? nlohmann::json() : nlohmann::json(m.profile)},
             {"memory_bytes", m.memory ? nlohmann::json(m.memory) : nlohmann::json()},
             {"nodes", {m.gi_node.path, m.ci_node.path}},
             {"problem", m.problem.empty() ? nlohmann::json() : nlohmann::json(m.problem)}});
    return out;
}

nlohmann::json to_json(const gpu::GpuInventory& inv) {
    nlohmann::json j;
    j["driver_root"] = inv.driver_root;
    j["driver_version"] =
        inv.nvidia_version ? nlohmann::json(*inv.nvidia_version) : nlohmann::json();
    j["gpus"] = nlohmann::json::array();
    for (const gpu::Gpu& g : inv.gpus) {
        nlohmann::json n = {{"vendor", gpu::to_string(g.vendor)},
                            {"pci", gpu::to_string(g.pci)},
                            {"model", g.model},
                            {"uuid", g.uuid},
                            {"nodes", nlohmann::json::array()}};
        n["class"] =
            g.pci_class ? nlohmann::json(cat("0x", std::hex, g.pci_class)) : nlohmann::json();
        n["index"] = g.index >= 0 ? nlohmann::json(g.index) : nlohmann::json();
        n["minor"] = g.minor >= 0 ? nlohmann::json(g.minor) : nlohmann::json();
        for (const gpu::Node& d : g.nodes) n["nodes"].push_back(d.path);
        n["problem"] = g.problem.empty() ? nlohmann::json() : nlohmann::json(g.problem);
        if (g.vendor == gpu::Vendor::nvidia) {
            n["mig_instances"] = g.mig_instances;
            const auto mode = [](int m) {
                return m < 0 ? nlohmann::json() : nlohmann::json(m ? "enabled" : "disabled");
            };
            n["mig_mode"] = mode(g.mig_mode), n["mig_mode_pending"] = mode(g.mig_pending);
        }
        if (!g.mig.empty()) n["mig"] = mig_json(g);
        j["gpus"].push_back(n);
    }
    j["unplaced"] = inv.unplaced;
    // Whether NVML's facts (MIG mode, MIG-<uuid>, profile, memory) are in, else why not.
    j["nvml"] = inv.nvml                   ? nlohmann::json(true)
                : inv.nvml_problem.empty() ? nlohmann::json()
                                           : nlohmann::json(inv.nvml_problem);
    return j;
}

}  // namespace

int list_command(const Options& o) {
    gpu::GpuInventory inv = gpu::discover_gpus(o.driver_root, gpu::kCapDefault);
    add_nvml_facts(inv, o.driver_root);
    if (o.json) {
        print(to_json(inv).dump(2) + "\n");
        return 0;
    }
    if (!inv.nvidia_version && inv.gpus.empty() && inv.unplaced.empty()) {
        print(cat("no GPU driver on this host (no /proc/driver/nvidia/version under ",
                  quote(o.driver_root), ", no AMD or Intel GPU): no GPU to list; ",
                  "'gpubox doctor' checks the host\n"));
        return 0;
    }
    print(cat("driver: ", inv.nvidia_version ? *inv.nvidia_version : "none", "\n"));
    print(gpu::describe_gpus(inv));
    if (const std::string leases = gpu::describe_leases(inv); !leases.empty())
        print("\n" + leases);  // --gpu auto
    return 0;
}

}  // namespace gpubox::launcher
