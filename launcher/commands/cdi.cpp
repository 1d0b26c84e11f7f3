#include "launcher/commands/cdi.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <nlohmann/json.hpp>

#include "common/print.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/cdi_spec.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/image.hpp"
#include "gpu/inventory.hpp"
#include "preflight/preflight.hpp"

namespace gpubox::launcher {
namespace {

using json = nlohmann::ordered_json;

// YAML, block style, for what generate writes (output only): every string double-quoted as
// JSON quotes it, which is a valid YAML scalar.
void yaml(std::ostream& out, const json& j, int indent, bool in_list) {
    const std::string pad(static_cast<std::size_t>(indent), ' ');
    if (j.is_object()) {
        bool first = true;
        for (const auto& [k, v] : j.items()) {
            out << (first && in_list ? "" : pad) << k << ":";
            first = false;
            if ((v.is_object() || v.is_array()) && !v.empty()) {
                out << "\n";
                yaml(out, v, v.is_array() ? indent : indent + 2, false);
            } else {
                out << " " << (v.is_array() ? "[]" : v.is_object() ? "{}" : v.dump()) << "\n";
            }
        }
    } else if (j.is_array()) {
        for (const json& v : j) {
            out << pad << "- ";
            if (v.is_object()) yaml(out, v, indent + 2, true);
            else out << v.dump() << "\n";
        }
    } else {
        out << pad << j.dump() << "\n";
    }
}

// The path a host file has inside the sandbox: its path below the driver root.
std::string inside(const gpu::GpuInventory& inv, const std::string& host) {
    if (inv.driver_root == "/" || !starts_with(host, inv.driver_root + "/")) return host;
    return host.substr(inv.driver_root.size());
}

json node_json(const gpu::Node& n) {
    json j = {{"path", n.path}};
    if (n.host != n.path) j["hostPath"] = n.host;
    return j;
}

bool usable(const gpu::Node& n) { return n.exists && n.is_char; }

json mount_json(const std::string& host, const std::string& target) {
    return {{"hostPath", host},
            {"containerPath", target},
            {"options", {"ro", "nosuid", "nodev", "bind"}}};
}

// The spec's own edits: the shared nodes, the driver's libraries (each also at its sonames, a
// bind of the host's link, so a consumer that runs no hook still finds them), its tools and
// read-only files; with the host's nvidia-cdi-hook, its update-ldcache for other layouts.
json shared_edits(const gpu::GpuInventory& inv) {
    json e = {{"env", {"NVIDIA_VISIBLE_DEVICES=void"}},
              {"deviceNodes", json::array()},
              {"mounts", json::array()}};
    for (const char* n : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"})
        if (auto it = inv.shared_nodes.find(n); it != inv.shared_nodes.end() && usable(it->second))
            e["deviceNodes"].push_back(node_json(it->second));
    std::vector<std::string> dirs;
    for (const gpu::DriverLib& lib : inv.libs) {
        const std::string target = inside(inv, lib.host_path);
        const std::string dir = target.substr(0, target.rfind('/'));
        e["mounts"].push_back(mount_json(lib.host_path, target));
        for (const std::string& so : lib.sonames)
            e["mounts"].push_back(mount_json(lib.host_path, dir + "/" + so));
        if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    }
    for (const auto& [name, host] : inv.binaries)
        e["mounts"].push_back(mount_json(host, inside(inv, host)));
    for (const auto& x : inv.optional_paths)
        if (x.read_only) e["mounts"].push_back(mount_json(x.host, x.path));
    const gpu::Node hook = [&] {
        for (const char* d : {"/usr/bin", "/usr/local/bin", "/bin"}) {
            struct stat st {};
            const std::string p =
                (inv.driver_root == "/" ? "" : inv.driver_root) + d + "/nvidia-cdi-hook";
            if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return gpu::Node{p, p, true};
        }
        return gpu::Node{};
    }();
    // Without the hook, a library directory no loader searches by default leaves the libraries
    // unfound by consumers (gpubox run --gpu writes its own cache; a CDI consumer cannot).
    static const char* const plain[] = {"/usr/lib/x86_64-linux-gnu",
                                        "/lib/x86_64-linux-gnu",
                                        "/usr/lib64",
                                        "/lib64",
                                        "/usr/lib",
                                        "/lib"};
    for (const std::string& d : dirs)
        if (!hook.exists && std::find(std::begin(plain), std::end(plain), d) == std::end(plain))
            log::warn(cat("cdi generate: the driver's libraries are in ", d,
                          ", which no image's loader searches, and this host has no "
                          "nvidia-cdi-hook for an update-ldcache hook: consumers need "
                          "LD_LIBRARY_PATH=",
                          d, " (gpubox run --gpu needs nothing)"));
    if (hook.exists && !dirs.empty()) {
        json args = {"nvidia-cdi-hook", "update-ldcache"};
        for (const std::string& d : dirs) args.push_back("--folder"), args.push_back(d);
        e["hooks"] = {{{"hookName", "createContainer"}, {"path", hook.host}, {"args", args}}};
    }
    return e;
}

json device_json(const std::string& name, const std::vector<gpu::Node>& nodes) {
    json d = {{"name", name}, {"containerEdits", {{"deviceNodes", json::array()}}}};
    for (const gpu::Node& n : nodes) d["containerEdits"]["deviceNodes"].push_back(node_json(n));
    return d;
}

// Each usable NVIDIA GPU by index and UUID, each usable MIG device as GPU:GI:CI, and all.
json nvidia_spec(const gpu::GpuInventory& inv) {
    json devices = json::array();
    std::vector<gpu::Node> all;
    for (const gpu::Gpu& g : inv.gpus) {
        if (g.vendor != gpu::Vendor::nvidia || !g.problem.empty() || g.nodes.empty() ||
            !usable(g.nodes[0]))
            continue;
        devices.push_back(device_json(std::to_string(g.index), g.nodes));
        if (!g.uuid.empty()) devices.push_back(device_json(g.uuid, g.nodes));
        all.push_back(g.nodes[0]);
        for (const gpu::MigDevice& m : g.mig) {
            if (!m.problem.empty() || !usable(m.gi_node) || !usable(m.ci_node)) continue;
            devices.push_back(device_json(gpu::mig_id(g, m), {g.nodes[0], m.gi_node, m.ci_node}));
            all.push_back(m.gi_node), all.push_back(m.ci_node);
        }
    }
    if (!all.empty()) {
        std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.path < b.path; });
        all.erase(
            std::unique(all.begin(), all.end(), [](auto& a, auto& b) { return a.path == b.path; }),
            all.end());
        devices.push_back(device_json("all", all));
    }
    return {{"cdiVersion", ""},
            {"kind", "nvidia.com/gpu"},
            {"devices", devices},
            {"containerEdits", shared_edits(inv)}};
}

// AMD's (amd.com/gpu, with /dev/kfd for the spec) or Intel's (intel.com/gpu) GPUs: each by its
// place among that vendor's GPUs in PCI order and by PCI address, with its DRM nodes, and all.
json drm_spec(const gpu::GpuInventory& inv, gpu::Vendor v) {
    json devices = json::array(), edits = json::object();
    std::vector<gpu::Node> all;
    int index = 0;
    for (const gpu::Gpu& g : inv.gpus) {
        if (g.vendor != v || g.nodes.empty() ||
            !std::all_of(g.nodes.begin(), g.nodes.end(), usable))
            continue;
        devices.push_back(device_json(std::to_string(index++), g.nodes));
        devices.push_back(device_json(gpu::to_string(g.pci), g.nodes));
        all.insert(all.end(), g.nodes.begin(), g.nodes.end());
    }
    if (!all.empty()) devices.push_back(device_json("all", all));
    if (auto kfd = inv.shared_nodes.find("kfd");
        v == gpu::Vendor::amd && kfd != inv.shared_nodes.end() && usable(kfd->second))
        edits["deviceNodes"] = json::array({node_json(kfd->second)});
    json spec = {{"cdiVersion", ""},
                 {"kind", v == gpu::Vendor::amd ? "amd.com/gpu" : "intel.com/gpu"},
                 {"devices", devices}};
    if (!edits.empty()) spec["containerEdits"] = edits;
    return spec;
}

std::string render(const json& spec, const std::string& format) {
    if (format == "json") return spec.dump(2) + "\n";
    std::ostringstream out;
    out << "---\n";
    yaml(out, spec, 0, false);
    return out.str();
}

}  // namespace

int cdi_generate_command(const Options& o) {
    const gpu::GpuInventory inv = gpu::discover_gpus(o.driver_root, gpu::kCapDefault);
    // One spec per kind: NVIDIA's, and AMD's and Intel's where the host has such GPUs.
    std::vector<json> specs;
    for (json spec :
         {nvidia_spec(inv), drm_spec(inv, gpu::Vendor::amd), drm_spec(inv, gpu::Vendor::intel)})
        if (!spec["devices"].empty() && (o.cdi_kind.empty() || spec["kind"] == o.cdi_kind))
            specs.push_back(std::move(spec));
    if (specs.empty())
        throw PlanError(cat("cdi generate: no usable GPU", o.cdi_kind.empty() ? "" : " of ",
                            o.cdi_kind, " under ", quote(o.driver_root)),
                        "see 'gpubox list' and 'gpubox doctor'");
    if (!o.cdi_output.empty() && specs.size() > 1 && o.cdi_kind.empty())
        specs.resize(1);  // --output FILE: one spec, NVIDIA's unless --kind names another
    for (json& spec : specs) {
        // Its version as the CDI library decides it from its features, and its validity, by
        // the same code that reads specs.
        cdi::Spec parsed = cdi::parse_spec(spec.dump(), "(generated)");
        spec["cdiVersion"] = parsed.version = cdi::minimum_version(parsed);
        cdi::validate_spec(parsed);
        const std::string text = render(spec, o.cdi_format);
        if (o.cdi_output == "-") {
            print(text);
            continue;
        }
        std::string out = o.cdi_output;
        if (out.empty()) {
            const std::string dir = cdi::user_spec_dir();
            if (dir.empty())
                throw PlanError("cdi generate: no $XDG_CONFIG_HOME or $HOME to write to");
            for (std::string d : {dir.substr(0, dir.rfind('/')), dir})
                if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
                    throw SysError(errno, cat("mkdir(", quote(d), ")"));
            const std::string kind = spec["kind"];
            out = cat(dir, "/", kind.substr(0, kind.find('.')), ".", o.cdi_format);
        }
        // Never through a symlink planted at the name; a file of the user's own is replaced.
        UniqueFd fd = sys::open_at(AT_FDCWD, out, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
        sys::write_all(fd.get(), text, out);
        print(cat("gpubox: wrote ", quote(out), " (cdiVersion ", parsed.version, ", ",
                  spec["devices"].size(), " devices of ", spec["kind"].get<std::string>(), ")\n"));
    }
    return 0;
}

int cdi_list_command(const Options& o) {
    const std::vector<std::string> dirs = cdi::spec_dirs(o.cdi_spec_dirs);
    const cdi::SpecSet set = cdi::read_spec_dirs(dirs);
    print(cat("directories (later wins): ", join(dirs, " "), "\n"));
    for (const cdi::Spec& s : set.specs)
        for (const cdi::Device& d : s.devices)
            print(cat(s.kind, "=", d.name, "  ", s.path, " (cdiVersion ", s.version, ")\n"));
    for (const std::string& p : set.problems) print(cat("unusable: ", p, "\n"));
    return 0;
}

}  // namespace gpubox::launcher
