#pragma once
// CDI (Container Device Interface) specs: parsed, validated and versioned as the CDI library
// (github.com/cncf-tags/container-device-interface, pkg/cdi and specs-go) does, and the
// directories they are read from. Pure, but for read_spec_dirs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpubox::cdi {

struct DeviceNode {
    std::string path, host_path, type, permissions;  // host_path "": the same as path
    std::optional<std::int64_t> major, minor;
    std::optional<std::uint32_t> file_mode, uid, gid;
};

struct Mount {
    std::string host_path, container_path, type;
    std::vector<std::string> options;
};

struct Hook {
    std::string hook_name, path;
    std::vector<std::string> args, env;
    std::optional<int> timeout;
};

struct Edits {
    std::vector<std::string> env;  // KEY=VALUE
    std::vector<DeviceNode> device_nodes;
    std::vector<Mount> mounts;
    std::vector<Hook> hooks;
    std::vector<std::uint32_t> additional_gids;
    bool intel_rdt = false, intel_rdt_v110 = false, net_devices = false;
    bool empty() const;
};

struct Device {
    std::string name;
    bool annotations = false;
    Edits edits;
};

struct Spec {
    std::string version, kind;
    bool annotations = false;
    std::vector<Device> devices;
    Edits edits;
    std::string path;  // the file it was read from, for messages
    int priority = 0;  // its directory's place in the search order (higher wins)
};

// The spec versions the CDI library knows, oldest first, and the oldest it accepts.
const std::vector<std::string>& known_versions();

// Pure: a spec from a file's text, JSON or YAML (YAML is a superset of JSON, as the library
// reads both with one YAML parser). Throws PlanError naming `path` for text that is no spec
// (a field of the wrong type, unknown top-level fields are ignored as the library ignores them).
Spec parse_spec(const std::string& text, const std::string& path);

// Pure: the checks of the CDI library's spec validation: a known cdiVersion that is at least
// what the spec's features need, a valid kind (vendor/class), at least one device, valid and
// unique device names, no device without edits, and valid edits (KEY=VALUE environment, device
// nodes with a path and a known type, mounts with both paths, hooks with a known name and a
// path). Throws PlanError naming the spec's path.
void validate_spec(const Spec& spec);

// Pure: the lowest cdiVersion whose features the spec uses, as specs-go's
// MinimumRequiredVersion decides it (0.3.0 at least).
std::string minimum_version(const Spec& spec);

// Pure: the CDI library's name rules. "" when valid, else why not.
std::string check_vendor_or_class(const std::string& name);
std::string check_device_name(const std::string& name);

// "vendor.com/class=name" -> kind and name; nullopt when it is not a qualified device name.
struct QualifiedName {
    std::string kind, name;
};
std::optional<QualifiedName> parse_qualified(const std::string& text);

// The spec directories, lowest priority first: /etc/cdi, /var/run/cdi, then the caller's own
// ($XDG_CONFIG_HOME/cdi, else ~/.config/cdi), or the --cdi-spec-dir ones when given.
std::vector<std::string> spec_dirs(const std::vector<std::string>& given);
// The caller's own spec directory (where `gpubox cdi generate` writes by default).
std::string user_spec_dir();

struct SpecSet {
    std::vector<Spec> specs;
    std::vector<std::string> problems;  // files that could not be used, and why (one line each)
};
// Every *.json, *.yaml and *.yml in `dirs` (regular files of at most 4 MiB, opened without
// following a symlink in the last component), parsed and validated; a file that fails is
// recorded in problems, as the library records a spec error and goes on.
SpecSet read_spec_dirs(const std::vector<std::string>& dirs);

// The device `name` names among `set`: its spec and device. A device of a higher-priority
// directory overrides one of a lower; two of the same priority conflict. PlanError, listing what
// the set offers of that kind, when none.
struct Resolved {
    const Spec* spec = nullptr;
    const Device* device = nullptr;
};
Resolved resolve_device(const SpecSet& set, const std::string& qualified, const std::string& flag);

}  // namespace gpubox::cdi
