#pragma once
#include "gpu/cdi_plan.hpp"
#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

// run --device: the specs read, the devices resolved and planned for ROOTFS, read through
// `root`, its read-only view (rootfs/view.hpp), so that planning changes no timestamp in it.
cdi::Plan plan_cdi_devices(const Options& o, int root);

}  // namespace gpubox::launcher
