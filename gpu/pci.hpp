#pragma once
#include <compare>
#include <cstdint>
#include <optional>
#include <string>

namespace gpubox::gpu {

// A PCI function address, compared as numbers: "0000:3b:00.0", "00000000:3B:00.0" and "3b:00.0"
// are the same device. Domains may exceed 16 bits (Intel VMD: "10000:01:00.0").
struct PciAddress {
    std::uint32_t domain = 0;
    std::uint8_t bus = 0, device = 0, function = 0;
    auto operator<=>(const PciAddress&) const = default;
};

// Pure: "[domain:]bus:device.function" in hex; nullopt for anything else (device < 0x20,
// function < 8, no trailing junk).
std::optional<PciAddress> parse_pci_address(const std::string& text);

// Linux's spelling: "%04x:%02x:%02x.%x".
std::string to_string(const PciAddress& a);

}  // namespace gpubox::gpu
