// libFuzzer: the /proc/driver/nvidia and PCI address parsers, and gpubox-nvml's report, on
// arbitrary text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "gpu/nvml_report.hpp"
#include "gpu/pci.hpp"
#include "gpu/proc_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpubox::gpu;
    const std::string text(reinterpret_cast<const char*>(data), size);
    (void)parse_driver_version(text);
    (void)rewrite_params(text);
    (void)parse_char_major(text, "nvidia-uvm");
    if (auto a = parse_pci_address(text)) {
        if (parse_pci_address(to_string(*a)) != a) __builtin_trap();  // canonical form round-trips
    }
    try {
        auto info = parse_gpu_information(text, "fuzz");
        if (info.device_minor < 0 || info.device_minor > 254) __builtin_trap();
    } catch (const gpubox::PlanError&) {}
    try {  // a report is believed whole or not at all, and within its bounds
        const NvmlReport r = parse_nvml_report(text);
        if (r.gpus.size() > 64 || r.driver_version.empty()) __builtin_trap();
        for (const NvmlGpu& g : r.gpus)
            for (const NvmlMig& m : g.mig)
                if (m.gi < 0 || m.gi > 14 || m.ci < 0 || m.ci > 7 || m.uuid.rfind("MIG-", 0) != 0)
                    __builtin_trap();
    } catch (const gpubox::PlanError&) {}
    return 0;
}
