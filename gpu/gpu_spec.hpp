#pragma once
#include <string>
#include <vector>

#include "gpu/inventory.hpp"

namespace gpubox::gpu {

// --gpu: "none" (default), "all", or a comma list of NVIDIA indices, "GPU-<uuid>" and PCI
// addresses (any vendor), as nvidia-container-cli --device takes them.
struct GpuSpec {
    enum class Kind { none, all, list } kind = Kind::none;
    std::vector<std::string> items;
};

// Pure. Throws UsageError for a malformed item.
GpuSpec parse_gpu_spec(const std::string& text);

// Pure: the GPUs of `inv` the spec names, in inventory order, without duplicates. Throws
// PlanError listing the host's GPUs, on one line, when an item matches none.
std::vector<Gpu> select_gpus(const GpuInventory& inv, const GpuSpec& spec);

// Pure: the discovery scope that can satisfy the spec (indices and UUIDs name NVIDIA GPUs only).
Scope scope_for(const GpuSpec& spec);
// Pure: the NVIDIA indices the spec names, when it names GPUs by index only (else empty): all
// that discovery need inspect (discover_gpus's `only`).
std::vector<int> indices_only(const GpuSpec& spec);

// `gpubox list`'s table: a header, then one row per GPU ("0  0000:3b:00.0  nvidia  Tesla T4
// GPU-...  /dev/nvidia2"), columns aligned, "-" for what a GPU lacks, a problem after its nodes.
std::string describe_gpus(const GpuInventory& inv);
// "GPU 0 (0000:3b:00.0)": how messages about one NVIDIA GPU name it.
std::string gpu_label(const Gpu& g);
// "GPU 0 (0000:3b:00.0): <its problem>", for the planner's error and `gpubox doctor`.
std::string describe_problem(const Gpu& g);

}  // namespace gpubox::gpu
