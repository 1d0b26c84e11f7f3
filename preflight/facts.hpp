#pragma once
// What the preflight knows about the node and the image: plain data, gathered by
// discover_host_facts and discover_image_facts (discover.hpp), judged by plan_findings
// (findings.hpp).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "preflight/device.hpp"
#include "preflight/elf.hpp"
#include "preflight/version.hpp"

namespace gpubox::preflight {

struct GpuFacts {
    int index = -1;
    std::string bus, uuid, model, brand;
    unsigned device_id = 0;               // 0: sysfs did not say
    std::optional<ComputeCapability> cc;  // from the device id
    std::string info_file, id_file;       // the files that said so
    std::string label() const;            // "GPU 1 (0000:5e:00.0, NVIDIA RTX A6000)"
};

struct HostFacts {
    std::optional<std::string> driver;  // kernel module version
    std::string driver_file;
    DriverCuda cuda;                             // from the driver version
    std::vector<GpuFacts> gpus;                  // the selected NVIDIA GPUs
    bool gpus_asked = false;                     // --gpu named any (else arch and brand hold)
    std::string cpu_flags, cpu_model, cpu_file;  // the first CPU's, from DRIVER_ROOT/proc/cpuinfo
};

struct ObjectFacts {                      // one ELF file of the image
    std::string path;                     // inside the image
    int isa = 0;                          // x86-64 level it declares needing (0: none)
    std::optional<FatbinTargets> fatbin;  // its .nv_fatbin, when it has one
};

struct CompatFacts {  // /usr/local/cuda/compat
    std::string dir = "/usr/local/cuda/compat";
    std::vector<std::string> libcuda;  // libcuda.so.X.Y[.Z] files there
    std::string version;               // the X.Y.Z of the only one
    std::optional<CompatNote> note;
    std::string note_problem;
    std::vector<std::string> files;  // every lib*.so.* regular file there
};

struct ImageFacts {
    std::string rootfs;
    std::map<std::string, std::string> env;
    std::string cudart, cudart_file;    // highest libcudart.so.X.Y.Z and where
    std::string toolkit, toolkit_file;  // cuda/version.json's "cuda" version
    std::optional<CompatFacts> compat;
    std::optional<ObjectFacts> command;  // the workload's binary
    std::string command_problem;         // why it was not read
    std::vector<ObjectFacts> objects;    // scanned CUDA objects (gpubox check)
    bool scanned = false;                // objects were looked for
    std::size_t scanned_files = 0;
    std::string scan_stopped;  // why the scan ended early ("" if it did not)
};

}  // namespace gpubox::preflight
