#include "gpu/proc_driver.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

bool is_version(const std::string& t) {
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

std::string trim(const std::string& s) {
    auto b = s.find_first_not_of(" \t\r\n");
    auto e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::optional<std::string> parse_driver_version(const std::string& text) {
    std::istringstream lines(text);
    std::string first;
    std::getline(lines, first);
    std::istringstream words(first);
    for (std::string w; words >> w;)
        if (is_version(w)) return w;
    return std::nullopt;
}

GpuInformation parse_gpu_information(const std::string& text, const std::string& path) {
    GpuInformation info;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
        if (key == "Model") info.model = value;
        else if (key == "GPU UUID") info.uuid = value;
        else if (key == "Bus Location") info.bus_location = value;
        else if (key == "Device Minor") {
            bool digits = !value.empty() && value.size() < 4 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || std::stoi(value) > 254)
                throw PlanError(cat(quote(path), ": invalid Device Minor ", quote(value)));
            info.device_minor = std::stoi(value);
        }
    }
    if (info.device_minor < 0) throw PlanError(cat(quote(path), ": no Device Minor"));
    if (info.bus_location.empty()) throw PlanError(cat(quote(path), ": no Bus Location"));
    return info;
}

std::string rewrite_params(const std::string& text) {
    std::istringstream in(text);
    std::string out;
    bool found = false;
    for (std::string line; std::getline(in, line);) {
        if (starts_with(line, "ModifyDeviceFiles:")) line = "ModifyDeviceFiles: 0", found = true;
        out += line + "\n";
    }
    if (!found) out += "ModifyDeviceFiles: 0\n";
    return out;
}

int parse_char_major(const std::string& proc_devices, const std::string& name) {
    std::istringstream in(proc_devices);
    for (std::string line; std::getline(in, line);) {
        if (starts_with(line, "Block devices")) break;
        std::istringstream w(line);
        int major = -1;
        std::string n;
        if (w >> major >> n && n == name) return major;
    }
    return -1;
}

std::map<std::string, int> parse_mig_minors(const std::string& text) {
    std::map<std::string, int> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream w(line);
        std::string name, number, rest;
        if (!(w >> name >> number) || (w >> rest) || number.size() > 9 ||
            !std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
            continue;
        out.emplace(name, std::stoi(number));
    }
    return out;
}

int parse_access_minor(const std::string& text) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!starts_with(line, "DeviceFileMinor:")) continue;
        std::istringstream w(line.substr(16));
        int minor = -1;
        return w >> minor && minor >= 0 ? minor : -1;
    }
    return -1;
}

}  // namespace gpubox::gpu
