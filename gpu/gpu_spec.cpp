#include "gpu/gpu_spec.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

bool is_index(const std::string& s) {
    return !s.empty() && s.size() < 4 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
    });
}

bool is_uuid(const std::string& s) {
    return s.size() > 4 && (s.compare(0, 4, "GPU-") == 0 || s.compare(0, 4, "gpu-") == 0);
}

// A UUID may be abbreviated to its first characters, as CUDA_VISIBLE_DEVICES allows, where
// that names one GPU (select_gpus refuses a prefix that names more).
bool uuid_starts_with(const std::string& uuid, const std::string& prefix) {
    return uuid.size() >= prefix.size() &&
           std::equal(prefix.begin(), prefix.end(), uuid.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

// A MIG device: "GPU:GI:CI" (nvidia-smi's numbers), "MIG-GPU-<uuid>/<gi>/<ci>" (the container
// toolkit's), or "MIG-<uuid>" (NVML's, which only NVML can resolve).
struct MigItem {
    std::string gpu;  // the GPU's index or UUID
    int gi = -1, ci = -1;
};

bool all_digits(const std::string& s) {
    return !s.empty() && s.size() < 4 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<MigItem> parse_mig_item(const std::string& item) {
    const bool toolkit = item.compare(0, 8, "MIG-GPU-") == 0;
    const char sep = toolkit ? '/' : ':';
    const auto b = item.rfind(sep), a = b == std::string::npos ? b : item.rfind(sep, b - 1);
    if (a == std::string::npos || a == 0) return std::nullopt;
    MigItem m{item.substr(toolkit ? 4 : 0, a - (toolkit ? 4 : 0))};
    const std::string gi = item.substr(a + 1, b - a - 1), ci = item.substr(b + 1);
    if (!all_digits(gi) || !all_digits(ci) || (toolkit ? !is_uuid(m.gpu) : !is_index(m.gpu)))
        return std::nullopt;
    m.gi = std::stoi(gi), m.ci = std::stoi(ci);
    return m;
}

bool is_mig_uuid(const std::string& s) { return s.size() > 4 && s.compare(0, 4, "MIG-") == 0; }

bool matches(const Gpu& g, const std::string& item) {
    if (is_index(item)) return g.vendor == Vendor::nvidia && g.index == std::stoi(item);
    if (is_uuid(item)) return uuid_starts_with(g.uuid, item);
    auto pci = parse_pci_address(item);
    return pci && *pci == g.pci;
}

// Indices count GPUs in PCI order, and `all` means every one: neither holds while the driver
// lists a GPU that cannot be placed in that order. A UUID or a PCI address still names one.
void require_placed(const GpuInventory& inv, const std::string& item) {
    if (inv.unplaced.empty()) return;
    throw PlanError(
        cat("--gpu ", item,
            ": the driver lists a GPU that cannot be placed in PCI order: ", inv.unplaced.front()),
        kUnplacedHint);
}

// The host's GPUs on one line, for the error of a --gpu item that names none: each NVIDIA GPU
// by index with what the item could have been compared with (its UUID for a UUID, else its PCI
// address and model), the others by PCI address. The full table is `gpubox list`'s.
std::string brief_gpus(const GpuInventory& inv, bool by_uuid) {
    std::vector<std::string> out;
    for (const Gpu& g : inv.gpus) {
        if (g.vendor != Vendor::nvidia)
            out.push_back(cat(to_string(g.pci), " (", to_string(g.vendor), ")"));
        else if (by_uuid && !g.uuid.empty()) out.push_back(cat(g.index, " (", g.uuid, ")"));
        else
            out.push_back(
                cat(g.index, " (", to_string(g.pci), g.model.empty() ? "" : " ", g.model, ")"));
    }
    for (const std::string& why : inv.unplaced) out.push_back(cat("? (", why, ")"));
    return out.empty() ? "none" : join(out, ", ");
}

std::string join_ints(const std::vector<int>& v, const char* sep) {
    std::string out;
    for (int x : v) out += cat(out.empty() ? "" : sep, x);
    return out;
}

bool same_uuid(const std::string& a, const std::string& b) {
    return a.size() == b.size() && uuid_starts_with(a, b);
}

std::string mig_list(const Gpu& g) {
    std::vector<std::string> ids;
    for (const MigDevice& m : g.mig) ids.push_back(mig_id(g, m));
    return ids.empty() ? "none" : join(ids, ", ");
}

// The MIG device NVML calls `item` (MIG-<uuid>): its GPU's and its positions.
std::pair<std::size_t, std::size_t> find_mig_uuid(const GpuInventory& inv,
                                                  const std::string& item) {
    std::vector<std::string> have;
    for (std::size_t i = 0; i < inv.gpus.size(); ++i)
        for (std::size_t j = 0; j < inv.gpus[i].mig.size(); ++j) {
            const MigDevice& m = inv.gpus[i].mig[j];
            if (m.uuid.empty()) continue;
            if (same_uuid(m.uuid, item)) {
                if (!m.problem.empty())
                    throw PlanError(cat(gpu_label(inv.gpus[i]), " MIG device ",
                                        mig_id(inv.gpus[i], m), ": ", m.problem),
                                    "see 'gpubox doctor'; nvidia-smi mig -lgi and -lci list them");
                return {i, j};
            }
            have.push_back(cat(mig_id(inv.gpus[i], m), " (", m.uuid, ")"));
        }
    if (!inv.nvml)
        throw PlanError(cat("--gpu ", item,
                            ": only NVML knows MIG devices' own UUIDs, and it "
                            "could not be asked: ",
                            inv.nvml_problem.empty() ? "not tried" : inv.nvml_problem),
                        "name it GPU:GI:CI or MIG-GPU-<uuid>/GI/CI, as 'gpubox list' shows");
    throw PlanError(cat("--gpu ", item, ": no MIG device has that UUID; MIG devices on this host: ",
                        have.empty() ? "none" : join(have, ", ")),
                    "'gpubox list' shows every MIG device");
}

// The MIG device `item` names: the positions of its GPU in `inv` and of it in the GPU's list.
std::pair<std::size_t, std::size_t> find_mig(const GpuInventory& inv, const std::string& item) {
    const std::optional<MigItem> m = parse_mig_item(item);
    if (!m) return find_mig_uuid(inv, item);
    const bool by_index = is_index(m->gpu);
    if (by_index) require_placed(inv, item);
    for (std::size_t i = 0; i < inv.gpus.size(); ++i) {
        const Gpu& g = inv.gpus[i];
        if (g.vendor != Vendor::nvidia ||
            !(by_index ? g.index == std::stoi(m->gpu) : same_uuid(g.uuid, m->gpu)))
            continue;
        for (std::size_t j = 0; j < g.mig.size(); ++j) {
            if (g.mig[j].gi != m->gi || g.mig[j].ci != m->ci) continue;
            if (!g.mig[j].problem.empty())
                throw PlanError(
                    cat(gpu_label(g), " MIG device ", mig_id(g, g.mig[j]), ": ", g.mig[j].problem),
                    "see 'gpubox doctor'; nvidia-smi mig -lgi and -lci list them");
            return {i, j};
        }
        throw PlanError(cat("--gpu ", item, ": ", gpu_label(g), " has no MIG device GI ", m->gi,
                            " CI ", m->ci, "; its MIG devices: ", mig_list(g)),
                        g.mig_instances ? "'gpubox list' shows every MIG device"
                                        : "it is not in MIG mode, or has no GPU instance yet: "
                                          "nvidia-smi mig -cgi PROFILE -C makes one");
    }
    throw PlanError(
        cat("--gpu ", item, ": no such GPU; GPUs on this host: ", brief_gpus(inv, !by_index)),
        "'gpubox list' shows every GPU and MIG device");
}

}  // namespace

GpuSpec parse_gpu_spec(const std::string& text) {
    GpuSpec spec;
    if (text == "none") return spec;
    using K = GpuSpec::Kind;
    for (const auto& [name, kind] :
         {std::pair{"all", K::all}, {"slurm", K::slurm}, {"env", K::env}})
        if (text == name) {
            spec.kind = kind;
            return spec;
        }
    if (text == "auto" || text.rfind("auto:", 0) == 0) {
        spec.kind = GpuSpec::Kind::lease;
        const std::string n = text == "auto" ? "1" : text.substr(5);
        if (n.empty() || n.size() > 3 ||
            !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
            std::stoi(n) < 1)
            throw UsageError(
                cat("--gpu ", text, ": expected auto or auto:N with N a count of GPUs (1-999)"));
        spec.count = std::stoi(n);
        return spec;
    }
    spec.kind = GpuSpec::Kind::list;
    const std::string items = text + ",";  // "0," has an empty item
    for (std::string_view piece : split_at(items, ',')) {
        const std::string item(piece);
        if (item.empty()) throw UsageError(cat("--gpu: empty item in ", quote(text)));
        if (!is_index(item) && !is_uuid(item) && !parse_pci_address(item) &&
            !parse_mig_item(item) && !is_mig_uuid(item))
            throw UsageError(cat("--gpu: ", quote(item),
                                 " is not an index, a GPU-<uuid>, a PCI address, a MIG device "
                                 "(GPU:GI:CI, MIG-GPU-<uuid>/GI/CI), 'all' or 'none'"));
        spec.items.push_back(item);
    }
    if (spec.items.empty()) throw UsageError("--gpu: empty list");
    return spec;
}

std::string to_string(const GpuSpec& spec) {
    using K = GpuSpec::Kind;
    switch (spec.kind) {
        case K::none: return "none";
        case K::all: return "all";
        case K::list: return join(spec.items, ",");
        case K::minors: return join_ints(spec.minors, ",");
        case K::slurm: return "slurm";
        case K::env: return "env";
        case K::lease: return spec.count == 1 ? "auto" : cat("auto:", spec.count);
    }
    return "none";
}

GpuSpec from_visible_devices(const std::optional<std::string>& value) {
    if (!value)
        throw PlanError("--gpu env: NVIDIA_VISIBLE_DEVICES is not set",
                        "set it to all, none, or a comma list of indices or GPU-<uuid>s");
    if (*value == "void" || value->empty()) return parse_gpu_spec("none");
    GpuSpec spec;
    try {
        spec = parse_gpu_spec(*value);
    } catch (const UsageError& e) {
        throw PlanError(cat("--gpu env: NVIDIA_VISIBLE_DEVICES=", *value, ": ", e.what()));
    }
    if (spec.kind != GpuSpec::Kind::none && spec.kind != GpuSpec::Kind::all &&
        spec.kind != GpuSpec::Kind::list)
        throw PlanError(cat("--gpu env: NVIDIA_VISIBLE_DEVICES=", *value, " names no GPU"),
                        "use all, none, void, or a comma list of indices or GPU-<uuid>s");
    spec.source = "NVIDIA_VISIBLE_DEVICES=" + *value;
    return spec;
}

Scope scope_for(const GpuSpec& spec) {
    if (spec.kind == GpuSpec::Kind::all) return Scope::all;
    for (const std::string& item : spec.items)
        if (!is_index(item) && !is_uuid(item) && !parse_mig_item(item)) return Scope::all;
    return Scope::nvidia;
}

bool names_mig_uuid(const GpuSpec& spec) {
    if (spec.kind != GpuSpec::Kind::list) return false;
    return std::any_of(spec.items.begin(), spec.items.end(), [](const std::string& item) {
        return is_mig_uuid(item) && !parse_mig_item(item);
    });
}

std::vector<int> indices_only(const GpuSpec& spec) {
    std::vector<int> out;
    if (spec.kind != GpuSpec::Kind::list) return out;
    for (const std::string& item : spec.items) {
        if (!is_index(item)) return {};
        out.push_back(std::stoi(item));
    }
    return out;
}

// The MIG device of `g` whose two capability nodes are among `caps`.
const MigDevice& mig_by_caps(const Gpu& g, const std::vector<int>& caps, const GpuSpec& spec) {
    const auto in = [&](int minor) {
        return std::find(caps.begin(), caps.end(), minor) != caps.end();
    };
    for (const MigDevice& m : g.mig)
        if (in(m.gi_minor) && in(m.ci_minor)) {
            if (!m.problem.empty())
                throw PlanError(cat(gpu_label(g), " MIG device ", mig_id(g, m), ": ", m.problem));
            return m;
        }
    std::vector<std::string> have;
    for (const MigDevice& m : g.mig)
        have.push_back(cat(mig_id(g, m), " (nvidia-cap", m.gi_minor, ",", m.ci_minor, ")"));
    throw PlanError(cat(spec.source, " names MIG capabilities nvidia-cap", join_ints(caps, ","),
                        " of ", gpu_label(g), ", which are no MIG device of it; its MIG devices: ",
                        have.empty() ? "none" : join(have, ", ")),
                    "gres.conf's MultipleFiles= must list the GPU's node and the GPU and compute "
                    "instances' capability nodes, as 'gpubox list' shows them");
}

// The NVIDIA GPUs whose device minors the spec names (/dev/nvidia<minor>), in inventory order,
// each whole or, with capability minors, as the MIG devices they name.
std::vector<Gpu> select_by_minor(const GpuInventory& inv, const GpuSpec& spec) {
    std::vector<Gpu> out;
    for (std::size_t k = 0; k < spec.minors.size(); ++k) {
        const int m = spec.minors[k];
        auto it = std::find_if(inv.gpus.begin(), inv.gpus.end(), [m](const Gpu& g) {
            return g.vendor == Vendor::nvidia && g.minor == m;
        });
        if (it == inv.gpus.end()) {
            std::vector<std::string> have;
            for (const Gpu& g : inv.gpus)
                if (g.vendor == Vendor::nvidia)
                    have.push_back(cat(g.index, " (/dev/nvidia", g.minor, ")"));
            throw PlanError(
                cat(spec.source, " names /dev/nvidia", m, ", which is no GPU of this host; GPUs: ",
                    have.empty() ? "none" : join(have, ", ")),
                "Slurm counts GPUs by gres.conf's File= order (device minors for "
                "/dev/nvidia[0-N]); see 'gpubox list'");
        }
        if (!it->problem.empty()) throw PlanError(describe_problem(*it), kGpuProblemHint);
        auto have =
            std::find_if(out.begin(), out.end(), [&](const Gpu& g) { return g.minor == m; });
        if (have == out.end()) {
            out.push_back(*it), have = out.end() - 1;
            have->mig.clear(), have->whole = false;
        }
        if (k >= spec.caps.size() || spec.caps[k].empty()) {
            have->whole = true;
            continue;
        }
        const MigDevice& d = mig_by_caps(*it, spec.caps[k], spec);
        if (std::none_of(have->mig.begin(), have->mig.end(),
                         [&](const MigDevice& x) { return x.gi == d.gi && x.ci == d.ci; }))
            have->mig.push_back(d);
    }
    std::sort(out.begin(), out.end(), [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
    return out;
}

std::vector<Gpu> select_gpus(const GpuInventory& inv, const GpuSpec& spec) {
    if (spec.kind == GpuSpec::Kind::none) return {};
    if (spec.kind == GpuSpec::Kind::minors) return select_by_minor(inv, spec);
    if (spec.kind != GpuSpec::Kind::all && spec.kind != GpuSpec::Kind::list)
        throw PlanError("--gpu: internal error: an unresolved spec reached selection");
    if (spec.kind == GpuSpec::Kind::all) {
        require_placed(inv, "all");
        if (inv.gpus.empty())
            throw PlanError("--gpu all: this host has no GPU",
                            "see 'gpubox list' and 'gpubox doctor'");
        // Every GPU, and every MIG device that can be given, as the container toolkit's "all".
        std::vector<Gpu> out = inv.gpus;
        for (Gpu& g : out)
            g.mig.erase(std::remove_if(g.mig.begin(), g.mig.end(),
                                       [](const MigDevice& m) { return !m.problem.empty(); }),
                        g.mig.end());
        return out;
    }
    std::vector<bool> chosen(inv.gpus.size(), false);
    std::vector<std::vector<bool>> mig(inv.gpus.size());
    for (std::size_t i = 0; i < inv.gpus.size(); ++i) mig[i].resize(inv.gpus[i].mig.size());
    for (const std::string& item : spec.items) {
        if (parse_mig_item(item) || is_mig_uuid(item)) {
            const auto [i, j] = find_mig(inv, item);
            mig[i][j] = true;
            continue;
        }
        if (is_index(item)) require_placed(inv, item);
        std::vector<std::string> hits;
        for (std::size_t i = 0; i < inv.gpus.size(); ++i)
            if (matches(inv.gpus[i], item))
                chosen[i] = true, hits.push_back(std::to_string(inv.gpus[i].index));
        if (hits.size() > 1)
            throw PlanError(
                cat("--gpu ", item, ": names GPUs ", join(hits, ", "), "; give more of the UUID"));
        if (hits.empty())
            throw PlanError(cat("--gpu ", item, ": no such GPU; GPUs on this host: ",
                                brief_gpus(inv, is_uuid(item))),
                            "indices count NVIDIA GPUs in PCI bus order, as nvidia-smi does; "
                            "'gpubox list' shows every detail");
    }
    std::vector<Gpu> out;
    for (std::size_t i = 0; i < inv.gpus.size(); ++i) {
        const bool some = std::find(mig[i].begin(), mig[i].end(), true) != mig[i].end();
        if (!chosen[i] && !some) continue;
        Gpu g = inv.gpus[i];
        g.whole = chosen[i], g.mig.clear();
        for (std::size_t j = 0; j < mig[i].size(); ++j)
            if (mig[i][j]) g.mig.push_back(inv.gpus[i].mig[j]);
        out.push_back(std::move(g));
    }
    return out;
}

std::string device_cgroup_of(const std::string& text) {
    std::string v2;
    for (std::string_view line : split_lines(text)) {
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string_view::npos || b == std::string_view::npos) continue;
        for (std::string_view c : split_at(line.substr(a + 1, b - a - 1), ','))
            if (c == "devices") return std::string(line);
        if (b == a + 1) v2 = line;
    }
    return v2.empty() ? "?" : v2;
}

std::string gpu_label(const Gpu& g) { return cat("GPU ", g.index, " (", to_string(g.pci), ")"); }

std::string describe_problem(const Gpu& g) { return cat(gpu_label(g), ": ", g.problem); }

std::string describe_gpus(const GpuInventory& inv) {
    std::vector<std::vector<std::string>> rows = {
        {"INDEX", "PCI", "VENDOR", "MODEL", "UUID", "NODES"}};
    auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
    for (const Gpu& g : inv.gpus) {
        std::vector<std::string> nodes;
        for (const Node& n : g.nodes) nodes.push_back(n.path);
        std::string last = or_dash(join(nodes, " "));
        if (g.mig_instances > 0) last += cat(" (MIG mode: ", g.mig_instances, " GPU instances)");
        if (!g.problem.empty()) last += " (" + g.problem + ")";
        rows.push_back({g.index >= 0 ? std::to_string(g.index) : "-", to_string(g.pci),
                        to_string(g.vendor), or_dash(g.model), or_dash(g.uuid), last});
        // Its MIG devices, each under the GPU: GPU:GI:CI, and the toolkit's name.
        for (const MigDevice& m : g.mig) {
            std::string caps = cat(g.nodes.empty() ? "-" : g.nodes[0].path, " ",
                                   or_dash(m.gi_node.path), " ", or_dash(m.ci_node.path));
            if (!m.problem.empty()) caps += " (" + m.problem + ")";
            const std::string what = m.uuid.empty()
                                         ? std::string("MIG")
                                         : cat("MIG ", or_dash(m.profile), " ",
                                               m.memory ? cat(m.memory >> 20, "MiB") : "-");
            rows.push_back({mig_id(g, m), to_string(g.pci), "nvidia",
                            cat(what, " GI ", m.gi, " CI ", m.ci),
                            m.uuid.empty() ? mig_name(g, m) : m.uuid, caps});
        }
    }
    for (const std::string& why : inv.unplaced)
        rows.push_back({"?", "?", "nvidia", "-", "-", "- (" + why + ")"});
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& r : rows)
        for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    std::ostringstream out;
    for (const auto& r : rows) {
        for (std::size_t i = 0; i + 1 < r.size(); ++i)
            out << r[i] << std::string(width[i] - r[i].size() + 2, ' ');
        out << r.back() << "\n";
    }
    const bool any_mig = std::any_of(inv.gpus.begin(), inv.gpus.end(),
                                     [](const Gpu& g) { return g.mig_dir || !g.mig.empty(); });
    if (any_mig && !inv.nvml)
        out << "MIG profiles, memory and MIG-<uuid>s unknown: "
            << (inv.nvml_problem.empty() ? "NVML not asked" : inv.nvml_problem) << "\n";
    return out.str();
}

}  // namespace gpubox::gpu
