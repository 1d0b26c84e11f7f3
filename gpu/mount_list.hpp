#pragma once
#include <string>
#include <vector>

#include "gpu/image.hpp"
#include "gpu/inventory.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::gpu {

struct GpuPlan {
    std::vector<rootfs::MountOp> ops;
    std::vector<std::string> summary;   // "index 0 -> 0000:3b:00.0 -> /dev/nvidia2 -> GPU-..."
    std::vector<std::string> warnings;  // what will not work inside, though the plan is whole
};

// Pure: the mounts that give the sandbox exactly `selected`. Throws PlanError (with a hint) when
// the host cannot serve the request: no driver, a module/library version mismatch, a missing or
// wrong device node.
GpuPlan plan_gpu_mounts(const GpuInventory& inv, const std::vector<Gpu>& selected, unsigned caps,
                        const ImageInfo& image);

}  // namespace gpubox::gpu
