// libFuzzer: the preflight's readers of image files (ELF sections, GNU property notes, CUDA fat
// binaries, NVIDIA's compat note) take any bytes, since an image is untrusted, and never read
// out of bounds; and NVIDIA_REQUIRE_* expressions of any text evaluate without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "preflight/elf.hpp"
#include "preflight/require.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpubox::preflight;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    (void)x86_isa_needed(bytes);
    if (const auto s = find_section(bytes, ".nv_fatbin")) (void)parse_fatbin(*s);
    (void)parse_fatbin(bytes);
    std::string problem;
    (void)parse_compat_note(bytes, problem);
    (void)evaluate_requirement(std::string(bytes.substr(0, 256)),
                               {"12.4", "550.54.14", "8.0", "tesla", true});
    return 0;
}
