#pragma once
// What NVML knows of MIG and /proc does not: each GPU's MIG mode, and each MIG device's own
// UUID (MIG-<uuid>), profile and memory. gpubox-nvml (helpers/nvml.cpp) asks the host's
// libnvidia-ml and prints it as lines; this reads them (pure) and adds them to an inventory.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/inventory.hpp"

namespace gpubox::gpu {

struct NvmlMig {
    int gi = -1, ci = -1;
    std::uint64_t memory = 0;  // bytes, its GPU instance's
    std::string uuid;          // "MIG-<uuid>"
    std::string name;          // "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    std::string profile;       // "1g.10gb", from the name ("" where it names none)
};

struct NvmlGpu {
    PciAddress pci;
    std::string uuid;
    int mig_mode = -1, mig_pending = -1;  // 1 enabled, 0 disabled, -1 not supported
    std::vector<NvmlMig> mig;
};

struct NvmlReport {
    std::string driver_version;
    std::vector<NvmlGpu> gpus;
};

// The helper's output:
//   nvml DRIVER_VERSION
//   gpu BUS_ID UUID CURRENT PENDING        (MIG modes 0/1, or - where not supported)
//   mig GI CI MEMORY_BYTES MIG_UUID NAME...  (of the gpu line above it)
// Lines of other kinds are skipped (a newer helper may say more). Throws PlanError naming the
// line for anything malformed: a helper that prints garbage is not believed at all.
NvmlReport parse_nvml_report(const std::string& text);

// Adds the report to `inv`: each NVIDIA GPU matched by PCI address (and UUID, where both
// have one) gets its MIG mode, each of its MIG devices (matched by GI and CI) its UUID,
// profile and memory. Sets inv.nvml.
void apply_nvml_report(GpuInventory& inv, const NvmlReport& report);

// "MIG 1g.10gb" from an NVML MIG device name, "" where it names no profile.
std::string mig_profile_of(const std::string& name);

}  // namespace gpubox::gpu
