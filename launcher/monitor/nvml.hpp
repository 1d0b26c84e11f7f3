#pragma once
// NVML's MIG facts (gpu/nvml_report.hpp) for list, doctor and --gpu MIG-<uuid>: asked of the
// host driver's libnvidia-ml through gpubox-nvml, never on a plain `run --gpu N`.
#include <string>

#include "gpu/inventory.hpp"

namespace gpubox::launcher {

// Adds them to `inv` (sets inv.nvml), or records in inv.nvml_problem, one line, why they are
// unknown: no libnvidia-ml of the driver's version, no helper, NVML failing. Never throws for
// what the host lacks; everything /proc gives still holds.
void add_nvml_facts(gpu::GpuInventory& inv, const std::string& driver_root);

}  // namespace gpubox::launcher
