#pragma once
// Reading the facts: the host's below its driver root, the image's inside its root, every path
// resolved inside that root by fd. Files only: no driver call, no helper process, nothing of
// the image is run.
#include <map>
#include <string>
#include <vector>

#include "gpu/gpu_spec.hpp"
#include "preflight/facts.hpp"

namespace gpubox::preflight {

// The driver version (/sys/module/nvidia/version, else /proc/driver/nvidia/version), the GPUs
// `spec` selects from the driver's listing (/proc/driver/nvidia/gpus/<bus>/information; only
// the named ones' files for indices) with each one's PCI device id (sysfs), and with `cpu` the
// first CPU's flags (proc/cpuinfo). Throws PlanError for a spec that selects no GPU. Without
// `driver` and without a GPU asked, the driver's version is not read (a run without --gpu).
HostFacts discover_host_facts(const std::string& driver_root, const gpu::GpuSpec& spec, bool cpu,
                              bool driver = true);

struct ImageScan {
    std::string command;        // argv[0] ("" for none): resolved through the image's PATH
    std::string workdir = "/";  // where a relative path ("./a.out") starts
    bool objects = false;       // scan libraries for fat binaries (gpubox check)
    double budget_seconds = 5;  // the scan's bound
    bool cuda = true;           // the CUDA runtime, toolkit and compat directory (--gpu, check)
};
// The CUDA runtime (libcudart.so.X.Y.Z beside the sonames the image's ld.so.cache lists, and
// in /usr/local/cuda/lib64), cuda/version.json, the compat directory and its libcuda's note,
// the command's ELF facts, and with `objects` every library the image's ld.so.cache lists.
// `root`: ROOTFS's read-only view (rootfs/view.hpp); `rootfs` its path, for the report.
ImageFacts discover_image_facts(int root, const std::string& rootfs,
                                const std::map<std::string, std::string>& env,
                                const ImageScan& scan);

// Just the compat directory (the run's GPU planner: forward compatibility).
std::optional<CompatFacts> discover_compat(int rootfd);

}  // namespace gpubox::preflight
