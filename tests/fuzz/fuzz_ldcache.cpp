// libFuzzer: parse_ldcache must reject or accept any bytes without reading out of bounds, and
// whatever it accepts must survive a render/parse round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/ldcache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpubox::gpu;
    try {
        auto entries = parse_ldcache(std::string_view(reinterpret_cast<const char*>(data), size));
        std::vector<LdCacheEntry> plain;
        for (auto& e : entries)
            if (!(e.hwcap & kLdHwcapExtension)) plain.push_back(e);
        auto again = parse_ldcache(render_ldcache(plain));
        if (again.size() != plain.size()) __builtin_trap();
    } catch (const LdCacheError&) {
    }
    return 0;
}
