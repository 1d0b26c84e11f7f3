#include "gpu/slurm.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

bool all_digits(const std::string& s) {
    return !s.empty() && s.size() < 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Top-level commas (outside brackets) separate names.
std::vector<std::string> split_top(const std::string& text) {
    std::vector<std::string> out(1);
    int depth = 0;
    for (char c : text) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ',' && depth == 0) out.emplace_back();
        else out.back() += c;
    }
    return out;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The device minor a gres.conf File= names: its trailing digits, as slurmd's
// _init_gres_device() reads them.
std::optional<int> trailing_number(const std::string& file) {
    std::size_t i = file.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(file[i - 1]))) --i;
    if (i == file.size() || file.size() - i > 6) return std::nullopt;
    return std::stoi(file.substr(i));
}

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
}

// One device of slurmd's list, by its gres.conf names: File=/dev/nvidia<N>, or MultipleFiles=
// with the GPU's node and a MIG device's capability nodes (/dev/nvidia-caps/nvidia-cap<N>).
void add_gres_device(GpuSpec& spec, const std::string& files) {
    std::optional<int> gpu;
    std::vector<int> caps;
    for (std::string_view piece : split_at(files, ',')) {
        const std::string f(piece);
        const auto n = trailing_number(f);
        const std::string base = f.substr(f.rfind('/') + 1);
        if (n && starts_with(base, "nvidia-cap")) caps.push_back(*n);
        else if (n && starts_with(base, "nvidia") && !gpu) gpu = n;
    }
    if (!gpu)
        throw PlanError(cat(spec.source, ": gres.conf's ",
                            files.find(',') == std::string::npos ? "File=" : "MultipleFiles=",
                            files, " names no /dev/nvidia<N>"));
    spec.caps.resize(spec.minors.size());
    spec.minors.push_back(*gpu);
    spec.caps.push_back(caps);
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& text) {
    std::vector<std::string> out;
    for (const std::string& name : split_top(text)) {
        const auto open = name.find('['), close = name.find(']');
        if (open == std::string::npos && close == std::string::npos) {
            if (!name.empty()) out.push_back(name);
            continue;
        }
        if (open == std::string::npos || close == std::string::npos || close < open)
            throw UsageError(cat("hostlist ", quote(text), ": unbalanced brackets"));
        const std::string pre = name.substr(0, open), post = name.substr(close + 1);
        const std::string list = name.substr(open + 1, close - open - 1) + ",";
        for (std::string_view piece : split_at(list, ',')) {
            const std::string r(piece);
            const auto dash = r.find('-');
            const std::string a = r.substr(0, dash),
                              b = dash == std::string::npos ? a : r.substr(dash + 1);
            if (!all_digits(a) || !all_digits(b) || std::stol(b) < std::stol(a) ||
                std::stol(b) - std::stol(a) > 4096)
                throw UsageError(cat("hostlist ", quote(text), ": bad range ", quote(r)));
            for (long i = std::stol(a); i <= std::stol(b); ++i) {
                std::string n = std::to_string(i);
                if (n.size() < a.size()) n.insert(0, a.size() - n.size(), '0');  // node[01-10]
                out.push_back(pre + n + post);
            }
        }
    }
    return out;
}

GresGpus parse_gres_conf(const std::string& text, const std::string& node) {
    GresGpus g;
    g.read = true;
    for (std::string_view line : split_lines(text)) {
        line = line.substr(0, line.find('#'));
        std::string name, file, multiple, nodes, autodetect;
        for (std::string_view word : split_words(line)) {
            const std::string w(word);
            const auto eq = w.find('=');
            if (eq == std::string::npos) continue;
            const std::string key = lower(w.substr(0, eq)), value = w.substr(eq + 1);
            if (key == "name") name = value;
            else if (key == "file") file = value;
            else if (key == "multiplefiles") multiple = value;
            else if (key == "nodename") nodes = value;
            else if (key == "autodetect") autodetect = lower(value);
        }
        if (!nodes.empty()) {
            const std::vector<std::string> list = expand_hostlist(nodes);
            if (std::find(list.begin(), list.end(), node) == list.end()) continue;
        }
        if (!autodetect.empty()) g.nvml = autodetect == "nvml";
        if (name != "gpu") continue;
        if (!multiple.empty()) g.files.push_back(join(expand_hostlist(multiple), ","));
        if (file.empty()) continue;
        for (std::string& f : expand_hostlist(file)) g.files.push_back(std::move(f));
    }
    return g;
}

GpuSpec from_slurm(const SlurmEnv& env, const GresGpus& gres) {
    if (!env.job_id)
        throw PlanError("--gpu slurm: not in a Slurm allocation (SLURM_JOB_ID is not set)",
                        "run it in an sbatch script or with srun");
    const bool step = env.step_gpus.has_value();
    const std::string var = step ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS";
    const std::optional<std::string>& value = step ? env.step_gpus : env.job_gpus;
    if (!value || value->empty())
        throw PlanError(
            cat("--gpu slurm: Slurm job ", *env.job_id,
                " has no GPU on this node (neither SLURM_STEP_GPUS nor SLURM_JOB_GPUS is set)"),
            "ask Slurm for GPUs: --gres=gpu:N or --gpus=N");
    GpuSpec spec;
    spec.source = cat("--gpu slurm: ", var, "=", *value);
    spec.kind = gres.nvml ? GpuSpec::Kind::list : GpuSpec::Kind::minors;
    const std::string items = *value + ",";  // "0," has an empty item
    for (std::string_view piece : split_at(items, ',')) {
        const std::string item(piece);
        if (!all_digits(item))
            throw PlanError(cat(spec.source, ": ", quote(item), " is not a GPU index"));
        const int i = std::stoi(item);
        if (gres.nvml) {
            spec.items.push_back(item);  // NVML's order: PCI bus order, nvidia-smi's index
        } else if (gres.files.empty()) {
            spec.minors.push_back(
                i);  // no gres.conf to read: File=/dev/nvidia[0-N], the usual form
        } else {
            if (static_cast<std::size_t>(i) >= gres.files.size())
                throw PlanError(cat(spec.source, ": index ", i, " is past gres.conf's ",
                                    gres.files.size(), " GPU files"));
            add_gres_device(spec, gres.files[static_cast<std::size_t>(i)]);
        }
    }
    return spec;
}

std::string bound_to_task(const std::string& value, const GresGpus& gres,
                          const std::function<bool(const std::string&)>& allowed) {
    if (gres.nvml || gres.files.empty()) return value;
    auto first_file = [&](std::size_t i) {
        return gres.files[i].substr(0, gres.files[i].find(','));
    };
    std::vector<std::string> mine;
    for (std::size_t i = 0; i < gres.files.size(); ++i)
        if (allowed(first_file(i))) mine.push_back(std::to_string(i));
    std::size_t asked = 0;
    bool refused = false;
    const std::string items = value + ",";
    for (std::string_view piece : split_at(items, ',')) {
        const std::string item(piece);
        if (!all_digits(item)) return value;  // from_slurm says what is wrong with it
        ++asked;
        const auto i = static_cast<std::size_t>(std::stoul(item));
        refused = refused || (i < gres.files.size() && !allowed(first_file(i)));
    }
    if (!refused || mine.size() != asked) return value;
    return join(mine, ",");
}

GpuSpec node_gpus(const GresGpus& gres) {
    if (gres.nvml || gres.files.empty())
        throw PlanError(
            "--gpu slurm: per-task GPU binding in step mode needs gres.conf's File= list of this "
            "node's GPUs",
            "name the GPUs in gres.conf (File=/dev/nvidia[0-3]), or ask for --gres=gpu:N without a "
            "per-task binding");
    GpuSpec spec;
    spec.kind = GpuSpec::Kind::minors;
    spec.source = "--gpu slurm: the node's GPUs (gres.conf), each task's own its CUDA devices";
    for (const std::string& f : gres.files) add_gres_device(spec, f);
    return spec;
}

GresGpus read_gres_conf() {
    std::string conf = env("SLURM_CONF").value_or("/etc/slurm/slurm.conf");
    conf = conf.substr(0, conf.rfind('/') + 1) + "gres.conf";
    std::string node = env("SLURMD_NODENAME").value_or("");
    if (node.empty()) node = sys::node_name();
    try {
        return parse_gres_conf(sys::read_file(conf, 1 << 20), node);
    } catch (const SysError&) {
        return {};  // unreadable: Slurm's usual File=/dev/nvidia[0-N], an index is a minor
    } catch (const UsageError& err) {
        throw PlanError(cat("--gpu slurm: ", conf, ": ", err.what()));
    }
}

bool per_task_binding() { return env("SLURMD_TRES_BIND").value_or("").rfind("gpu:", 0) == 0; }

GpuSpec resolve_gpu_spec(const GpuSpec& spec) {
    if (spec.kind == GpuSpec::Kind::env) return from_visible_devices(env("NVIDIA_VISIBLE_DEVICES"));
    if (spec.kind != GpuSpec::Kind::slurm) return spec;
    const SlurmEnv e{env("SLURM_JOB_ID"), env("SLURM_STEP_GPUS"), env("SLURM_JOB_GPUS")};
    const GresGpus gres = e.job_id ? read_gres_conf() : GresGpus{};
    if (e.step_gpus && per_task_binding()) {
        // The kernel's device-cgroup check, as check_node_access makes it (gpu/slurm.hpp).
        const std::string bound = bound_to_task(*e.step_gpus, gres, [](const std::string& node) {
            return sys::try_faccessat(node, R_OK | W_OK) != -EPERM;
        });
        if (bound != *e.step_gpus) {
            GpuSpec s = from_slurm({e.job_id, bound, e.job_gpus}, gres);
            s.source = cat("--gpu slurm: SLURM_STEP_GPUS=", *e.step_gpus,
                           ", bound per task: the device cgroup's ", bound);
            return s;
        }
    }
    return from_slurm(e, gres);
}

}  // namespace gpubox::gpu
