#pragma once
#include "launcher/options.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o);
int list_command(const Options& o);
int doctor_command(const Options& o);
// launcher/check.cpp: gpubox check, and gpubox run's preflight (warns, or throws PlanError).
int check_command(const Options& o);
// `root`: ROOTFS's read-only view (rootfs/view.hpp), borrowed.
void run_preflight(const Options& o, int root);

}  // namespace gpubox::launcher
