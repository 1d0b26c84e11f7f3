#include "launcher/cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <functional>
#include <sstream>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::launcher {
namespace {

struct Flag {
    const char* name;
    bool takes_arg;
    const char* help;
    std::function<void(Options&, const std::string&)> apply;
};

void add_mount(Options& o, rootfs::UserMount::Type type, const std::string& spec, const char* what) {
    rootfs::UserMount m{type, "", ""};
    if (type == rootfs::UserMount::Type::tmpfs) {
        m.target = rootfs::normalize_container_path(spec, what);
    } else {
        auto [src, dst] = parse_bind_spec(spec, what);
        m.source = src;
        m.target = rootfs::normalize_container_path(dst, what);
    }
    o.mounts.push_back(m);
}

const std::vector<Flag>& run_flags() {
    using T = rootfs::UserMount::Type;
    static const std::vector<Flag> flags = {
        {"--share-net", false, "keep the host network (default: new net namespace, only lo)",
         [](Options& o, const std::string&) { o.share_net = true; }},
        {"--root", false, "map the caller to uid/gid 0 inside (default: caller's own ids)",
         [](Options& o, const std::string&) { o.root = true; }},
        {"--bind", true, "SRC:DST  bind host SRC read-write at DST",
         [](Options& o, const std::string& v) { add_mount(o, T::bind, v, "--bind"); }},
        {"--ro-bind", true, "SRC:DST  bind host SRC read-only at DST",
         [](Options& o, const std::string& v) { add_mount(o, T::ro_bind, v, "--ro-bind"); }},
        {"--tmpfs", true, "DST  a fresh tmpfs at DST",
         [](Options& o, const std::string& v) { add_mount(o, T::tmpfs, v, "--tmpfs"); }},
        {"--tmpfs-size", true, "SIZE  one budget for every writable tmpfs place and the root's layer (default: the memory limit, else 1/4 of MemAvailable)",
         [](Options& o, const std::string& v) { o.tmpfs_size = parse_size(v, "--tmpfs-size"); }},
        {"--workdir", true, "DIR  working directory inside (default /)",
         [](Options& o, const std::string& v) { o.workdir = rootfs::normalize_container_path(v, "--workdir"); }},
        {"--hostname", true, "NAME  hostname inside (default gpubox)",
         [](Options& o, const std::string& v) {
             if (v.empty() || v.size() > 64 || v.find_first_of("/\n\t ") != std::string::npos)
                 throw UsageError(cat("--hostname: invalid name ", quote(v)));
             o.hostname = v;
         }},
        {"--env", true, "K=V  set a variable in the workload's (otherwise clean) environment",
         [](Options& o, const std::string& v) { o.env.push_back(parse_env_assignment(v, "--env")); }},
        {"--env-file", true, "FILE  K=V lines (# comments) added to the environment",
         [](Options& o, const std::string& v) {
             std::string content;
             try {
                 content = sys::read_file(v);
             } catch (const SysError& e) {
                 throw UsageError(cat("--env-file: ", e.op, ": ", e.code().message()));
             }
             for (auto& kv : parse_env_file(content, v)) o.env.push_back(kv);
         }},
        {"--writable", false, "ROOTFS read-write: writes reach the disk (default: tmpfs overlay)",
         [](Options& o, const std::string&) { o.root_mode = rootfs::RootMode::writable; }},
        {"--read-only", false, "ROOTFS read-only with no overlay upper layer",
         [](Options& o, const std::string&) { o.root_mode = rootfs::RootMode::read_only; }},
        {"--no-seccomp", false, "do not install a seccomp filter",
         [](Options& o, const std::string&) { o.seccomp = false; }},
        {"--seccomp-bpf", true, "FILE  install this raw BPF program instead of the default filter",
         [](Options& o, const std::string& v) { o.seccomp_bpf = v; }},
        {"--gpu", true, "SPEC  GPUs to give the sandbox: none (default), all, a comma list of "
                        "indices, GPU-<uuid>s and PCI addresses, slurm (the Slurm step's), env "
                        "(NVIDIA_VISIBLE_DEVICES), or auto[:N] (N GPUs no other gpubox holds)",
         [](Options& o, const std::string& v) { gpu::parse_gpu_spec(v), o.gpu = v; }},
        {"--gpu-share", false, "with --gpu auto: share the GPUs with other --gpu-share sandboxes",
         [](Options& o, const std::string&) { o.gpu_share = true; }},
        {"--gpu-wait", true, "SEC  with --gpu auto: wait up to SEC seconds for free GPUs (default 0)",
         [](Options& o, const std::string& v) { o.gpu_wait = parse_seconds(v, "--gpu-wait"); }},
        {"--kill-after", true, "SEC  after SIGTERM, SIGINT or SIGHUP (forwarded), kill the sandbox after SEC seconds (default 5)",
         [](Options& o, const std::string& v) { o.kill_after = parse_seconds(v, "--kill-after"); }},
        {"--die-with-parent", false, "kill the sandbox, and exit, when gpubox's parent dies",
         [](Options& o, const std::string&) { o.die_with_parent = true; }},
        {"--gpu-caps", true, "LIST  driver capabilities: compute,utility (default), graphics, video, "
                             "display, ngx, all",
         [](Options& o, const std::string& v) { o.gpu_caps = gpu::parse_capabilities(v); }},
        {"--driver-root", true, "DIR  where the host's driver lives (default /); every host path is read below it",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
        {"--wall-time-limit", true, "SEC  kill the sandbox after SEC seconds of wall-clock time",
         [](Options& o, const std::string& v) { o.limits.wall_seconds = parse_seconds(v, "--wall-time-limit"); }},
        {"--time-limit", true, "SEC  kill the sandbox after SEC seconds of CPU time (all its processes)",
         [](Options& o, const std::string& v) { o.limits.cpu_seconds = parse_seconds(v, "--time-limit"); }},
        {"--memory-limit", true, "SIZE  resident memory of the whole sandbox (status ML)",
         [](Options& o, const std::string& v) { o.limits.memory_bytes = parse_size(v, "--memory-limit"); }},
        {"--pids-limit", true, "N  processes and threads in the sandbox (default 4096; 'unlimited' lifts it)",
         [](Options& o, const std::string& v) { o.limits.pids = v == "unlimited" ? 0 : parse_count(v, "--pids-limit"); }},
        {"--fsize-limit", true, "SIZE  largest file the workload may write (RLIMIT_FSIZE)",
         [](Options& o, const std::string& v) { o.limits.fsize_bytes = parse_size(v, "--fsize-limit"); }},
        {"--nofile-limit", true, "N  open files per process (RLIMIT_NOFILE)",
         [](Options& o, const std::string& v) { o.limits.nofile = parse_count(v, "--nofile-limit"); }},
        {"--stack-limit", true, "SIZE  stack size (RLIMIT_STACK)",
         [](Options& o, const std::string& v) { o.limits.stack_bytes = parse_size(v, "--stack-limit"); }},
        {"--as-limit", true, "SIZE  address space per process (RLIMIT_AS; breaks JITs and CUDA)",
         [](Options& o, const std::string& v) { o.limits.as_bytes = parse_size(v, "--as-limit"); }},
        {"--stdout-limit", true, "SIZE  bytes the sandbox may write to stdout (status OL)",
         [](Options& o, const std::string& v) { o.limits.stdout_bytes = parse_size(v, "--stdout-limit"); }},
        {"--stderr-limit", true, "SIZE  bytes the sandbox may write to stderr (status OL)",
         [](Options& o, const std::string& v) { o.limits.stderr_bytes = parse_size(v, "--stderr-limit"); }},
        {"--meta", true, "FILE  write the verdict (JSON) to FILE, even when setup fails",
         [](Options& o, const std::string& v) { o.meta = v; }},
        {"--meta-format", true, "FMT  json (default) or isolate (key:value lines)",
         [](Options& o, const std::string& v) {
             if (v != "json" && v != "isolate") throw UsageError(cat("--meta-format: expected json or isolate, got ", quote(v)));
             o.meta_format = v;
         }},
        {"--cgroup", true,
         "MODE  auto (default: a cgroup v2 we may write, else a systemd scope), off, systemd, or a "
         "delegated cgroup directory to make the sandbox's below",
         [](Options& o, const std::string& v) { o.cgroup = isolate::parse_cgroup_request(v); }},
        {"--print-plan", false, "print namespaces, id maps, mounts and seccomp policy; run nothing",
         [](Options& o, const std::string&) { o.print_plan = true; }},
        {"-v", false, "more output (-v info, -vv debug: every mount step)",
         [](Options& o, const std::string&) { ++o.verbosity; }},
        {"-vv", false, nullptr, [](Options& o, const std::string&) { o.verbosity += 2; }},
    };
    return flags;
}

const Flag* find_flag(const std::string& name) {
    for (const Flag& f : run_flags())
        if (name == f.name) return &f;
    return nullptr;
}

void parse_run(Options& o, const std::vector<std::string>& args, std::size_t i) {
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a.size() < 2 || a[0] != '-') break;
        std::string name = a, value;
        const bool inline_value = a.rfind("--", 0) == 0 && a.find('=') != std::string::npos;
        if (inline_value) name = a.substr(0, a.find('=')), value = a.substr(a.find('=') + 1);
        const Flag* f = find_flag(name);
        if (!f) throw UsageError(cat("run: unknown option ", quote(a), " (see gpubox --help)"));
        if (f->takes_arg && !inline_value) {
            if (i + 1 >= args.size()) throw UsageError(cat("run: ", name, " needs a value"));
            value = args[++i];
        } else if (!f->takes_arg && inline_value) {
            throw UsageError(cat("run: ", name, " takes no value"));
        }
        f->apply(o, value);
    }
    if (i >= args.size()) throw UsageError("run: missing ROOTFS (usage: gpubox run [OPTIONS] ROOTFS [--] CMD [ARGS...])");
    o.rootfs = args[i++];
    if (i < args.size() && args[i] == "--") ++i;
    o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    if (o.argv.empty()) throw UsageError("run: missing CMD (usage: gpubox run [OPTIONS] ROOTFS [--] CMD [ARGS...])");
    if (!o.seccomp_bpf.empty() && !o.seccomp)
        throw UsageError("run: --seccomp-bpf and --no-seccomp contradict each other");
}

void parse_rootfs(Options& o, const std::vector<std::string>& args, std::size_t i) {
    if (i >= args.size() || args[i] != "create")
        throw UsageError("rootfs: usage: gpubox rootfs create [--busybox PATH] DIR");
    o.command = Command::rootfs_create;
    for (++i; i < args.size(); ++i) {
        if (args[i] == "--busybox" && i + 1 < args.size()) o.busybox = args[++i];
        else if (!args[i].empty() && args[i][0] == '-') throw UsageError(cat("rootfs create: unknown option ", quote(args[i])));
        else if (o.create_dir.empty()) o.create_dir = args[i];
        else throw UsageError("rootfs create: one DIR only");
    }
    if (o.create_dir.empty()) throw UsageError("rootfs create: missing DIR");
}

// list and doctor take --driver-root; list also --json.
void parse_host_command(Options& o, const std::vector<std::string>& args, std::size_t i) {
    for (; i < args.size(); ++i) {
        if (args[i] == "--json" && o.command == Command::list) o.json = true;
        else if (args[i] == "--driver-root" && i + 1 < args.size()) o.driver_root = args[++i];
        else if (starts_with(args[i], "--driver-root=")) o.driver_root = args[i].substr(14);
        else throw UsageError(cat(args[0], ": unexpected argument ", quote(args[i])));
    }
}

}  // namespace

double parse_seconds(const std::string& text, const std::string& what) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !(v > 0) || v > 1e7)
        throw UsageError(cat(what, ": expected a positive number of seconds, got ", quote(text)));
    return v;
}

std::uint64_t parse_count(const std::string& text, const std::string& what) {
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos || std::stoull(text) == 0)
        throw UsageError(cat(what, ": expected a positive integer, got ", quote(text)));
    return std::stoull(text);
}

std::string find_meta_path(const std::vector<std::string>& args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") break;
        if (args[i] == "--meta" && i + 1 < args.size()) return args[i + 1];
        if (starts_with(args[i], "--meta=")) return args[i].substr(7);
    }
    return {};
}

std::uint64_t parse_size(const std::string& text, const std::string& what) {
    std::size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == 0 || i > 15) throw UsageError(cat(what, ": invalid size ", quote(text), " (e.g. 4096, 64K, 256M, 2G)"));
    std::uint64_t n = std::stoull(text.substr(0, i));
    std::string suffix = text.substr(i);
    std::uint64_t mult = 1;
    if (suffix == "" || suffix == "B") mult = 1;
    else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ULL << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ULL << 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ULL << 30;
    else throw UsageError(cat(what, ": invalid size ", quote(text), " (e.g. 4096, 64K, 256M, 2G)"));
    if (n == 0) throw UsageError(cat(what, ": size must be positive"));
    return n * mult;
}

std::pair<std::string, std::string> parse_bind_spec(const std::string& spec, const std::string& what) {
    auto pos = spec.find(':');
    std::string src = spec.substr(0, pos);
    std::string dst = pos == std::string::npos ? src : spec.substr(pos + 1);
    if (src.empty() || dst.empty() || dst.find(':') != std::string::npos)
        throw UsageError(cat(what, ": expected SRC:DST, got ", quote(spec)));
    if (src.find('\0') != std::string::npos) throw UsageError(cat(what, ": path contains NUL"));
    return {src, dst};
}

std::pair<std::string, std::string> parse_env_assignment(const std::string& text, const std::string& what) {
    auto pos = text.find('=');
    if (pos == 0 || pos == std::string::npos)
        throw UsageError(cat(what, ": expected NAME=VALUE, got ", quote(text)));
    std::string name = text.substr(0, pos);
    bool ok = !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) throw UsageError(cat(what, ": invalid variable name ", quote(name)));
    return {name, text.substr(pos + 1)};
}

std::vector<std::pair<std::string, std::string>> parse_env_file(const std::string& content,
                                                                const std::string& path) {
    std::vector<std::pair<std::string, std::string>> out;
    std::istringstream in(content);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
        ++n;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        out.push_back(parse_env_assignment(line.substr(first), cat("--env-file ", quote(path), " line ", n)));
    }
    return out;
}

Options parse_command_line(const std::vector<std::string>& args) {
    Options o;
    if (args.empty()) throw UsageError("missing command (try gpubox --help)");
    const std::string& cmd = args[0];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") o.command = Command::help;
    else if (cmd == "--version" || cmd == "version") o.command = Command::version;
    else if (cmd == "run") o.command = Command::run, parse_run(o, args, 1);
    else if (cmd == "rootfs") parse_rootfs(o, args, 1);
    else if (cmd == "list") o.command = Command::list, parse_host_command(o, args, 1);
    else if (cmd == "doctor") o.command = Command::doctor, parse_host_command(o, args, 1);
    else throw UsageError(cat("unknown command ", quote(cmd), " (try gpubox --help)"));
    return o;
}

std::string usage_text() {
    std::ostringstream out;
    out << "gpubox: unprivileged container sandbox with per-GPU isolation\n\n"
           "usage:\n"
           "  gpubox run [OPTIONS] ROOTFS [--] CMD [ARGS...]\n"
           "  gpubox rootfs create [--busybox PATH] DIR\n"
           "  gpubox list [--json] [--driver-root DIR]\n"
           "  gpubox doctor [--driver-root DIR]\n"
           "  gpubox isolate [ISOLATE OPTIONS] --init|--run|--cleanup  (isolate 2.x's CLI; or a symlink named isolate)\n"
           "  gpubox --help | --version\n\n"
           "run options:\n";
    for (const Flag& f : run_flags())
        if (f.help) out << "  " << f.name << (f.takes_arg ? " " : "") << "  " << f.help << "\n";
    out << "\nexit status: the command's own; 128+N if it died of signal N; 125 gpubox failed;\n"
           "126 CMD cannot be executed; 127 CMD not found\n";
    return out.str();
}

std::string version_text() { return "gpubox " GPUBOX_VERSION "\n"; }

}  // namespace gpubox::launcher
