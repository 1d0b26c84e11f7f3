#pragma once
// What a GPU is, from what the host says about it without a driver call: its PCI device id
// (sysfs) gives the chip, hence the compute capability; its model name (the driver's
// /proc/driver/nvidia/gpus/<bus>/information) gives the brand, as NVML names brands. Pure.
#include <optional>
#include <string>

namespace gpubox::preflight {

struct ComputeCapability {
    int major = 0, minor = 0;
    int sm() const { return major * 10 + minor; }  // 8.6 -> 86, as sm_86 names it
    std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// By chip family: NVIDIA numbers the device ids of one chip in one block (0x20xx GA100,
// 0x23xx GH100, ...). nullopt for an id outside every known block: a chip newer than this
// table, or not a GPU that CUDA runs on.
std::optional<ComputeCapability> compute_capability_of(unsigned pci_device_id);

// NVML's brand name for a model name ("Tesla T4" -> "tesla", "NVIDIA RTX A6000" -> "nvidiartx",
// "NVIDIA GeForce RTX 4090" -> "geforce", "NVIDIA H100 80GB HBM3" -> "nvidia"), and its
// number in nvmlBrandType_t, which .note.cuda.fwd_compatibility's "device" list uses.
std::string brand_of(const std::string& model);
int brand_number(const std::string& brand);

// Forward compatibility runs on data-center and professional GPUs, not on GeForce, TITAN, NVS
// or GRID ones: the brands of NVIDIA's compat libraries' "device" lists (1, 2, 7-14).
bool brand_supports_forward_compat(const std::string& brand);

}  // namespace gpubox::preflight
