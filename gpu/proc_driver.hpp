#pragma once
// Parsers for the NVIDIA driver's text files. Pure: text in, values out.
#include <map>
#include <optional>
#include <string>

namespace gpubox::gpu {

// "/sys/module/nvidia/version" ("550.54.14\n") or the first line of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu ..."): the first token that is
// all digits and dots with at least one dot.
std::optional<std::string> parse_driver_version(const std::string& text);

struct GpuInformation {  // /proc/driver/nvidia/gpus/<bus>/information
    std::string model, uuid, bus_location;
    int device_minor = -1;
};
// Throws PlanError naming `path` when Device Minor or Bus Location is missing or malformed.
GpuInformation parse_gpu_information(const std::string& text, const std::string& path);

// The params file with "ModifyDeviceFiles: 0", so the driver never tries to create or chmod
// device nodes inside the sandbox.
std::string rewrite_params(const std::string& text);

// The major number /proc/devices gives a character driver ("195 nvidia"), or -1.
int parse_char_major(const std::string& proc_devices, const std::string& name);

// /proc/driver/nvidia-caps/mig-minors ("config 1", "gpu0/gi1/ci0/access 13", ...): each
// capability's name and the minor of its /dev/nvidia-caps/nvidia-cap<N>. Lines that are not
// "NAME NUMBER" are skipped.
std::map<std::string, int> parse_mig_minors(const std::string& text);
// The minor an `access` file names ("DeviceFileMinor: 13"), or -1.
int parse_access_minor(const std::string& text);

}  // namespace gpubox::gpu
