// libFuzzer: the CDI spec reader (JSON and YAML), its validation and version rules, on arbitrary
// text; and the MIG capability files' parsers.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "gpu/cdi_spec.hpp"
#include "gpu/proc_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpubox;
    const std::string text(reinterpret_cast<const char*>(data), size);
    (void)gpu::parse_mig_minors(text);
    (void)gpu::parse_access_minor(text);
    (void)cdi::parse_qualified(text);
    try {
        cdi::Spec s = cdi::parse_spec(text, "fuzz");
        const std::string v = cdi::minimum_version(s);
        if (v < "0.3.0" || v > "1.1.0") __builtin_trap();
        cdi::validate_spec(s);
        for (const cdi::Device& d : s.devices)
            if (!cdi::check_device_name(d.name).empty()) __builtin_trap();  // validated above
    } catch (const PlanError&) {}
    return 0;
}
