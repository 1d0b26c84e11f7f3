#pragma once
// One file per command: rootfs.cpp, list.cpp, doctor.cpp, check.cpp (and image.hpp, cdi.hpp).
#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o);
int list_command(const Options& o);
int doctor_command(const Options& o);
int check_command(const Options& o);
int ps_command(const Options& o);  // ps.cpp: the caller's named sandboxes

}  // namespace gpubox::launcher
