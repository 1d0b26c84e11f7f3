#pragma once
// Whether an image's CUDA forward-compatibility libraries are used, decided as NVIDIA's
// enable-cuda-compat hook decides (nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat),
// plus the GPU's brand, which the driver checks (forward compatibility on a GeForce GPU fails
// cuInit with error 804). Pure.
#include <optional>
#include <string>
#include <vector>

#include "preflight/facts.hpp"

namespace gpubox::preflight {

struct CompatDecision {
    bool present = false;  // the image has a compat libcuda
    bool use = false;
    std::string cuda;    // the CUDA version the sandbox gets when used
    std::string reason;  // why (not), one clause
};

// With the note: the host driver's branch must be in its "driver" list and the compat driver
// newer than the host's (and, ours, every GPU's brand in its "device" list). Without the note:
// the compat driver's major above the host's (libnvidia-container's rule). Never when older.
CompatDecision decide_compat(const std::optional<CompatFacts>& compat,
                             const std::optional<std::string>& host_driver,
                             const std::vector<std::string>& brands);

// The ld.so.cache overrides when used: (library stem "libcuda", container path of its file).
std::vector<std::pair<std::string, std::string>> compat_overrides(const CompatFacts& compat);

}  // namespace gpubox::preflight
