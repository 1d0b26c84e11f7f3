#include "gpu/proc_driver.hpp"

#include <algorithm>
#include <cctype>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

bool is_version(std::string_view t) {
    if (t.empty() || !std::isdigit(static_cast<unsigned char>(t.front())) ||
        !std::isdigit(static_cast<unsigned char>(t.back())))
        return false;
    bool dot = false;
    for (std::size_t i = 0; i < t.size(); ++i) {
        if (t[i] == '.') {
            if (t[i - 1] == '.') return false;
            dot = true;
        } else if (!std::isdigit(static_cast<unsigned char>(t[i]))) {
            return false;
        }
    }
    return dot;
}

std::string trim(std::string_view s) {
    auto b = s.find_first_not_of(" \t\r\n");
    auto e = s.find_last_not_of(" \t\r\n");
    return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

}  // namespace

// The kernel's files, split by common/text.hpp, not by a stream: a run's first stream sets up
// the C++ locale, ~0.4 ms (docs/design.md).
std::optional<std::string> parse_driver_version(const std::string& text) {
    const std::vector<std::string_view> lines = split_lines(text);
    if (lines.empty()) return std::nullopt;
    for (std::string_view w : split_words(lines.front()))
        if (is_version(w)) return std::string(w);
    return std::nullopt;
}

GpuInformation parse_gpu_information(const std::string& text, const std::string& path) {
    GpuInformation info;
    for (std::string_view line : split_lines(text)) {
        auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
        if (key == "Model") info.model = value;
        else if (key == "GPU UUID") info.uuid = value;
        else if (key == "Bus Location") info.bus_location = value;
        else if (key == "Device Minor") {
            const auto minor = value.size() < 4 ? parse_whole<int>(value) : std::nullopt;
            if (!minor || *minor > 254)
                throw PlanError(cat(quote(path), ": invalid Device Minor ", quote(value)));
            info.device_minor = *minor;
        }
    }
    if (info.device_minor < 0) throw PlanError(cat(quote(path), ": no Device Minor"));
    if (info.bus_location.empty()) throw PlanError(cat(quote(path), ": no Bus Location"));
    return info;
}

std::string rewrite_params(const std::string& text) {
    std::string out;
    bool found = false;
    for (std::string_view line : split_lines(text)) {
        if (starts_with(line, "ModifyDeviceFiles:")) line = "ModifyDeviceFiles: 0", found = true;
        (out += line) += '\n';
    }
    if (!found) out += "ModifyDeviceFiles: 0\n";
    return out;
}

int parse_char_major(const std::string& proc_devices, const std::string& name) {
    for (std::string_view line : split_lines(proc_devices)) {
        if (starts_with(line, "Block devices")) break;
        const std::vector<std::string_view> w = split_words(line);
        if (w.size() >= 2 && w[1] == name)
            if (const auto major = parse_whole<int>(w[0])) return *major;
    }
    return -1;
}

std::map<std::string, int> parse_mig_minors(const std::string& text) {
    std::map<std::string, int> out;
    for (std::string_view line : split_lines(text)) {
        const std::vector<std::string_view> w = split_words(line);
        if (w.size() != 2 || w[1].size() > 9) continue;
        if (const auto number = parse_whole<int>(w[1])) out.emplace(std::string(w[0]), *number);
    }
    return out;
}

int parse_access_minor(const std::string& text) {
    for (std::string_view line : split_lines(text)) {
        if (!starts_with(line, "DeviceFileMinor:")) continue;
        const std::vector<std::string_view> w = split_words(line.substr(16));
        const auto minor = w.empty() ? std::nullopt : parse_whole<int>(w.front());
        return minor.value_or(-1);
    }
    return -1;
}

}  // namespace gpubox::gpu
