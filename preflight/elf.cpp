#include "preflight/elf.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace gpubox::preflight {
namespace {

constexpr std::uint32_t kShtNote = 7;
constexpr std::uint32_t kNtGnuPropertyType0 = 5;
constexpr std::uint32_t kGnuPropertyX86Isa1Needed = 0xc0008002;
constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
constexpr std::uint16_t kFatbinPtx = 1, kFatbinSass = 2;

template <typename T>
std::optional<T> get(std::string_view b, std::uint64_t off) {
    if (off > b.size() || b.size() - off < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}

std::optional<std::string_view> slice(std::string_view b, std::uint64_t off, std::uint64_t len) {
    if (off > b.size() || b.size() - off < len) return std::nullopt;
    return b.substr(off, len);
}

struct Note {
    std::uint32_t type;
    std::string_view name, desc;
};

// The notes of a note section: each descriptor, and the next note, start at a multiple of
// `align` (4, or 8 for GNU property notes in 64-bit objects) from the section's start.
std::vector<Note> notes(std::string_view s, std::uint64_t align) {
    std::vector<Note> out;
    auto up = [&](std::uint64_t n) { return (n + align - 1) / align * align; };
    for (std::uint64_t off = 0;;) {
        const auto namesz = get<std::uint32_t>(s, off), descsz = get<std::uint32_t>(s, off + 4);
        const auto type = get<std::uint32_t>(s, off + 8);
        if (!namesz || !descsz || !type) break;
        const std::uint64_t desc_off = up(off + 12 + *namesz);
        const auto name = slice(s, off + 12, *namesz);
        const auto desc = slice(s, desc_off, *descsz);
        if (!name || !desc) break;
        std::string_view n = *name;
        while (!n.empty() && n.back() == '\0') n.remove_suffix(1);
        out.push_back({*type, n, *desc});
        off = up(desc_off + *descsz);
    }
    return out;
}

std::uint64_t section_align(std::string_view b, std::string_view name) {
    // Notes in 64-bit objects use 4-byte alignment except GNU property notes (8).
    return name == ".note.gnu.property" && is_elf64le(b) ? 8 : 4;
}

}  // namespace

bool is_elf64le(std::string_view b) {
    return b.size() >= 64 &&
           b.substr(0, 4) ==
               "\x7f"
               "ELF" &&
           b[4] == 2 && b[5] == 1;
}

std::optional<std::string_view> find_section(std::string_view b, std::string_view name,
                                             std::uint32_t type) {
    if (!is_elf64le(b)) return std::nullopt;
    const auto shoff = get<std::uint64_t>(b, 0x28);
    const auto shentsize = get<std::uint16_t>(b, 0x3a), shnum = get<std::uint16_t>(b, 0x3c);
    const auto shstrndx = get<std::uint16_t>(b, 0x3e);
    if (!shoff || !shentsize || *shentsize < 64 || !shnum || !shstrndx || *shstrndx >= *shnum)
        return std::nullopt;
    auto header = [&](std::uint64_t i) { return *shoff + i * *shentsize; };
    const auto stroff = get<std::uint64_t>(b, header(*shstrndx) + 24);
    const auto strsize = get<std::uint64_t>(b, header(*shstrndx) + 32);
    if (!stroff || !strsize) return std::nullopt;
    const auto strtab = slice(b, *stroff, *strsize);
    if (!strtab) return std::nullopt;
    for (std::uint64_t i = 0; i < *shnum; ++i) {
        const auto nameoff = get<std::uint32_t>(b, header(i));
        const auto stype = get<std::uint32_t>(b, header(i) + 4);
        const auto off = get<std::uint64_t>(b, header(i) + 24);
        const auto size = get<std::uint64_t>(b, header(i) + 32);
        if (!nameoff || !stype || !off || !size || *nameoff >= strtab->size()) return std::nullopt;
        const std::string_view rest = strtab->substr(*nameoff);
        if (rest.substr(0, rest.find('\0')) != name || (type && *stype != type)) continue;
        return slice(b, *off, *size);
    }
    return std::nullopt;
}

int x86_isa_needed(std::string_view b) {
    const auto s = find_section(b, ".note.gnu.property", kShtNote);
    if (!s) return 0;
    int level = 0;
    for (const Note& n : notes(*s, section_align(b, ".note.gnu.property"))) {
        if (n.type != kNtGnuPropertyType0 || n.name != "GNU") continue;
        for (std::uint64_t off = 0;;) {
            const auto ptype = get<std::uint32_t>(n.desc, off),
                       size = get<std::uint32_t>(n.desc, off + 4);
            if (!ptype || !size) break;
            if (*ptype == kGnuPropertyX86Isa1Needed && *size >= 4)
                if (const auto bits = get<std::uint32_t>(n.desc, off + 8))
                    for (int bit = 0; bit < 4; ++bit)
                        if (*bits & (1u << bit)) level = std::max(level, bit + 1);
            off += 8 + (*size + 7) / 8 * 8;
        }
    }
    return level;
}

FatbinTargets parse_fatbin(std::string_view s) {
    FatbinTargets t;
    for (std::uint64_t pos = 0; pos + 4 <= s.size();) {
        const auto magic = get<std::uint32_t>(s, pos);
        if (*magic != kFatbinMagic) break;  // the section's padding
        const auto header = get<std::uint16_t>(s, pos + 6);
        const auto size = get<std::uint64_t>(s, pos + 8);
        if (!header || !size || *header < 16 || *header > s.size() - pos ||
            *size > s.size() - pos - *header) {
            t.malformed = true;
            break;
        }
        const std::uint64_t end = pos + *header + *size;
        for (std::uint64_t e = pos + *header; e + 32 <= end;) {
            const auto kind = get<std::uint16_t>(s, e);
            const auto ehs = get<std::uint32_t>(s, e + 4), arch = get<std::uint32_t>(s, e + 28);
            const auto psize = get<std::uint64_t>(s, e + 8);
            if (!ehs || *ehs < 32 || *ehs > end - e || !psize || *psize > end - e - *ehs) {
                t.malformed = true;
                break;
            }
            if (*kind == kFatbinSass) t.sass.push_back(static_cast<int>(*arch));
            if (*kind == kFatbinPtx) t.ptx.push_back(static_cast<int>(*arch));
            e += *ehs + *psize;
        }
        pos = end;
    }
    for (auto* v : {&t.sass, &t.ptx}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    return t;
}

std::optional<CompatNote> parse_compat_note(std::string_view b, std::string& problem) {
    const auto s = find_section(b, ".note.cuda.fwd_compatibility", kShtNote);
    if (!s) return std::nullopt;
    for (const Note& n : notes(*s, 4)) {
        if (n.name != "NVIDIA Corporation") continue;
        std::string_view desc = n.desc;
        while (!desc.empty() && desc.back() == '\0') desc.remove_suffix(1);
        const auto j = nlohmann::json::parse(desc, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            problem = "its .note.cuda.fwd_compatibility is not JSON";
            return std::nullopt;
        }
        CompatNote note;
        // Go's encoding/json matches keys case-insensitively: "CUDA version", "CUDA Version".
        for (const auto& item : j.items()) {
            std::string k = item.key();
            std::transform(k.begin(), k.end(), k.begin(),
                           [](unsigned char c) { return std::tolower(c); });
            const nlohmann::json& value = item.value();
            if (k == "cuda version" && value.is_string()) note.cuda = value.get<std::string>();
            std::vector<int>* list = k == "driver"   ? &note.drivers
                                     : k == "device" ? &note.devices
                                                     : nullptr;
            if (list && value.is_array())
                for (const auto& x : value)
                    if (x.is_number_integer()) list->push_back(x.get<int>());
        }
        return note;
    }
    return std::nullopt;
}

}  // namespace gpubox::preflight
