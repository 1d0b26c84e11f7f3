#include "gpu/pci.hpp"

#include <cstdio>
#include <algorithm>
#include <cctype>

namespace gpubox::gpu {
namespace {

// Parse 1..max_digits hex digits at text[i], advancing i.
bool hex_field(const std::string& t, std::size_t& i, int max_digits, std::uint64_t& out) {
    std::size_t start = i;
    out = 0;
    while (i < t.size() && std::isxdigit(static_cast<unsigned char>(t[i])) &&
           static_cast<int>(i - start) < max_digits) {
        char c = static_cast<char>(std::tolower(static_cast<unsigned char>(t[i])));
        out = out * 16 + static_cast<std::uint64_t>(
                             std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : c - 'a' + 10);
        ++i;
    }
    return i > start;
}

}  // namespace

std::optional<PciAddress> parse_pci_address(const std::string& t) {
    const bool has_domain = std::count(t.begin(), t.end(), ':') == 2;
    std::size_t i = 0;
    std::uint64_t domain = 0, bus = 0, dev = 0, fn = 0;
    if (has_domain && (!hex_field(t, i, 8, domain) || i >= t.size() || t[i++] != ':'))
        return std::nullopt;
    if (!hex_field(t, i, 2, bus) || i >= t.size() || t[i++] != ':') return std::nullopt;
    if (!hex_field(t, i, 2, dev) || i >= t.size() || t[i++] != '.') return std::nullopt;
    if (!hex_field(t, i, 1, fn) || i != t.size()) return std::nullopt;
    if (dev >= 0x20 || fn >= 8) return std::nullopt;
    return PciAddress{static_cast<std::uint32_t>(domain), static_cast<std::uint8_t>(bus),
                      static_cast<std::uint8_t>(dev), static_cast<std::uint8_t>(fn)};
}

std::string to_string(const PciAddress& a) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", a.domain, a.bus, a.device, a.function);
    return buf;
}

}  // namespace gpubox::gpu
