#pragma once
// gpubox cdi generate / cdi list, and run's --device: CDI specs read from the spec directories
// (gpu/cdi_spec.hpp) and planned as mount ops (gpu/cdi_plan.hpp).
#include <string>

#include "gpu/cdi_plan.hpp"
#include "launcher/options.hpp"

namespace gpubox::launcher {

int cdi_generate_command(const Options& o);
int cdi_list_command(const Options& o);

// run --device: the specs read, the devices resolved and planned for ROOTFS, read through
// `root`, its read-only view (rootfs/view.hpp), so that planning changes no timestamp in it.
cdi::Plan plan_cdi_devices(const Options& o, int root);

}  // namespace gpubox::launcher
