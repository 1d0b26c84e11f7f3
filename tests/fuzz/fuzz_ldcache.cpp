// libFuzzer: parse_ldcache must reject or accept any bytes without reading out of bounds, and
// whatever it accepts must survive a render/parse round trip. find_ldcache reads the same bytes
// by binary search: never out of bounds either, and never an entry the full parse would not give.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/ldcache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpubox::gpu;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const std::vector<std::string> prefixes = {"lib", "libc.so", "libcuda.so", "libnvidia-ml.so"};
    std::vector<LdCacheEntry> found;
    try {
        found = find_ldcache(bytes, prefixes);
    } catch (const LdCacheError&) {}
    try {
        auto entries = parse_ldcache(bytes);
        for (const LdCacheEntry& e : found)
            if (std::find(entries.begin(), entries.end(), e) == entries.end()) __builtin_trap();
        std::vector<LdCacheEntry> plain;
        for (auto& e : entries)
            if (!(e.hwcap & kLdHwcapExtension)) plain.push_back(e);
        auto again = parse_ldcache(render_ldcache(plain));
        if (again.size() != plain.size()) __builtin_trap();
    } catch (const LdCacheError&) {}
    return 0;
}
