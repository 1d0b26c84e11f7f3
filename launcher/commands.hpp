#pragma once
#include "launcher/options.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o);
int list_command(const Options& o);
int doctor_command(const Options& o);
// launcher/check.cpp: gpubox check, and gpubox run's preflight (warns, or throws PlanError).
int check_command(const Options& o);
void run_preflight(const Options& o);

}  // namespace gpubox::launcher
