#pragma once
#include "launcher/options.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o);
int list_command(const Options& o);
int doctor_command(const Options& o);

}  // namespace gpubox::launcher
