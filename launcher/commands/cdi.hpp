#pragma once
// gpubox cdi generate / cdi list (run's --device: launcher/monitor/cdi_devices.hpp).
#include <string>

#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

int cdi_generate_command(const Options& o);
int cdi_list_command(const Options& o);

}  // namespace gpubox::launcher
