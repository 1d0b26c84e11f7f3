#pragma once
// The few ELF facts the preflight reads from an image's files, from their bytes (a mapped
// file): 64-bit little-endian objects only (x86-64, aarch64), every offset bounds-checked. Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpubox::preflight {

bool is_elf64le(std::string_view bytes);

// The contents of the section called `name`, or nullopt (none, or not inside the file).
// `type`: only a section of that sh_type (0: any).
std::optional<std::string_view> find_section(std::string_view bytes, std::string_view name,
                                             std::uint32_t type = 0);

// The x86-64 ISA level (1 = baseline .. 4 = x86-64-v4) that GNU_PROPERTY_X86_ISA_1_NEEDED in
// .note.gnu.property declares (the highest bit set), 0 when the file declares none.
int x86_isa_needed(std::string_view bytes);

// A CUDA fat binary's targets (.nv_fatbin: 0xBA55ED50 containers of entries, each SASS (an ELF
// cubin) or PTX for one architecture: sm_XY is XY).
struct FatbinTargets {
    std::vector<int> sass, ptx;  // sorted, unique
    bool malformed = false;      // a header that points outside the section: what was read stays
};
FatbinTargets parse_fatbin(std::string_view section);

// .note.cuda.fwd_compatibility of a CUDA forward-compatibility libcuda, as NVIDIA's
// enable-cuda-compat hook reads it: a note named "NVIDIA Corporation" whose descriptor is JSON,
// {"format":1,"CUDA version":"12.9","driver":[535,550,...],"device":[1,2,7,...]}.
struct CompatNote {
    std::string cuda;          // the CUDA version this libcuda supports
    std::vector<int> drivers;  // host driver branches (majors) it may run on
    std::vector<int> devices;  // NVML brand numbers of the GPUs it supports
};
// nullopt where there is no such note; `problem` says why a present one was not usable.
std::optional<CompatNote> parse_compat_note(std::string_view bytes, std::string& problem);

}  // namespace gpubox::preflight
