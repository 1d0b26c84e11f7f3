#include "image/oci.hpp"

#include <sys/utsname.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/text.hpp"

namespace gpubox::image {
namespace {

using Json = nlohmann::json;

Json parse_json(const std::string& text, const char* what) {
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw std::runtime_error(cat(what, ": not a JSON object"));
    return j;
}

Descriptor parse_descriptor(const Json& j, const std::string& what) {
    if (!j.is_object()) throw std::runtime_error(cat(what, ": not an object"));
    Descriptor d;
    d.media_type = j.value("mediaType", "");
    if (!j.contains("digest") || !j["digest"].is_string() ||
        !valid_digest(j["digest"].get<std::string>()))
        throw std::runtime_error(cat(what, ": missing or unsupported digest (only sha256 is)"));
    d.digest = j["digest"].get<std::string>();
    if (!j.contains("size") || !j["size"].is_number_unsigned())
        throw std::runtime_error(cat(what, ": missing size"));
    d.size = j["size"].get<std::uint64_t>();
    return d;
}

std::vector<std::string> strings(const Json& c, const char* key) {
    std::vector<std::string> out;
    if (!c.contains(key) || c[key].is_null()) return out;
    if (!c[key].is_array())
        throw std::runtime_error(cat("image config: ", key, " is not a list of strings"));
    for (const Json& v : c[key]) {
        if (!v.is_string())
            throw std::runtime_error(cat("image config: ", key, " is not a list of strings"));
        out.push_back(v.get<std::string>());
    }
    return out;
}

std::string string_field(const Json& c, const char* key, const char* what) {
    if (!c.contains(key) || c[key].is_null()) return "";
    if (!c[key].is_string()) throw std::runtime_error(cat(what, ": ", key, " is not a string"));
    return c[key].get<std::string>();
}

}  // namespace

bool valid_digest(const std::string& d) {
    if (d.size() != 71 || d.compare(0, 7, "sha256:") != 0) return false;
    for (std::size_t i = 7; i < d.size(); ++i)
        if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f'))) return false;
    return true;
}

bool is_index(const std::string& text) {
    const Json j = Json::parse(text, nullptr, false);
    return j.is_object() && j.contains("manifests") && j["manifests"].is_array();
}

std::string pick_platform(const std::string& text, const std::string& os, const std::string& arch,
                          const std::string& variant) {
    if (!is_index(text) || os.empty() || arch.empty()) return "";
    std::string found;
    int matches = 0;
    const Json index = Json::parse(text);
    for (const Json& m : index["manifests"]) {
        if (!m.is_object() || !m.contains("platform") || !m["platform"].is_object()) continue;
        const Json& p = m["platform"];
        const auto field = [&](const char* k) {
            return p.contains(k) && p[k].is_string() ? p[k].get<std::string>() : std::string();
        };
        if (field("os") != os || field("architecture") != arch) continue;
        if (!variant.empty() && field("variant") != variant) continue;
        ++matches;
        found =
            m.contains("digest") && m["digest"].is_string() ? m["digest"].get<std::string>() : "";
    }
    // Several for one OS/ARCH: skopeo's variant preference decides; leave it to skopeo copy.
    return matches == 1 && valid_digest(found) ? found : "";
}

std::string host_architecture() {
    struct utsname u {};
    if (::uname(&u) != 0) return "";
    static const std::pair<const char*, const char*> names[] = {{"x86_64", "amd64"},
                                                                {"aarch64", "arm64"},
                                                                {"ppc64le", "ppc64le"},
                                                                {"s390x", "s390x"},
                                                                {"riscv64", "riscv64"}};
    for (const auto& [machine, oci] : names)
        if (std::string(u.machine) == machine) return oci;
    return "";
}

Descriptor parse_index(const std::string& text) {
    const Json j = parse_json(text, "index.json");
    if (!j.contains("manifests") || !j["manifests"].is_array() || j["manifests"].size() != 1)
        throw std::runtime_error("index.json: expected exactly one manifest");
    return parse_descriptor(j["manifests"][0], "index.json manifest");
}

Manifest parse_manifest(const std::string& text) {
    const Json j = parse_json(text, "manifest");
    if (j.value("schemaVersion", 0) != 2)
        throw std::runtime_error("manifest: schemaVersion is not 2");
    if (j.contains("manifests"))
        throw std::runtime_error("manifest: an index, not an image manifest");
    if (!j.contains("layers") || !j["layers"].is_array())
        throw std::runtime_error("manifest: no layers");
    Manifest m;
    m.config = parse_descriptor(j.value("config", Json()), "manifest config");
    for (std::size_t i = 0; i < j["layers"].size(); ++i) {
        m.layers.push_back(parse_descriptor(j["layers"][i], cat("manifest layer ", i + 1)));
        if (m.layers.back().media_type.find("encrypted") != std::string::npos)
            throw std::runtime_error(
                cat("manifest layer ", i + 1, ": encrypted layers are not supported"));
    }
    return m;
}

Config parse_config(const std::string& text) {
    const Json j = parse_json(text, "image config");
    Config c;
    c.os = string_field(j, "os", "image config");
    c.architecture = string_field(j, "architecture", "image config");
    const Json& cfg =
        j.contains("config") && j["config"].is_object() ? j["config"] : Json::object();
    c.env = strings(cfg, "Env");
    c.entrypoint = strings(cfg, "Entrypoint");
    c.cmd = strings(cfg, "Cmd");
    c.working_dir = string_field(cfg, "WorkingDir", "image config");
    c.user = string_field(cfg, "User", "image config");
    return c;
}

std::string render_config(const Config& c) {
    Json cfg = Json::object();
    if (!c.env.empty()) cfg["Env"] = c.env;
    if (!c.entrypoint.empty()) cfg["Entrypoint"] = c.entrypoint;
    if (!c.cmd.empty()) cfg["Cmd"] = c.cmd;
    if (!c.working_dir.empty()) cfg["WorkingDir"] = c.working_dir;
    if (!c.user.empty()) cfg["User"] = c.user;
    Json j = {{"os", c.os}, {"architecture", c.architecture}, {"config", cfg}};
    return j.dump(2) + "\n";
}

}  // namespace gpubox::image
