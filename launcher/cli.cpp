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
#include "preflight/require.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::launcher {
namespace {

struct Flag {
    const char* name;
    const char* arg;   // nullptr: a switch; else the value's metavariable, as --help shows it
    const char* help;  // nullptr: hidden (an alias)
    std::function<void(Options&, const std::string&)> apply;
};
using Flags = std::vector<Flag>;

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

void set_root_mode(Options& o, rootfs::RootMode mode) {
    if (o.root_mode != rootfs::RootMode::overlay && o.root_mode != mode)
        throw UsageError("run: --writable and --read-only contradict each other (choose one)");
    o.root_mode = mode;
}

void set_gpu(Options& o, const std::string& v) {
    const gpu::GpuSpec spec = gpu::parse_gpu_spec(v);
    o.gpu = o.gpu_given ? merge_gpu_specs(o.gpu, spec) : spec;
    o.gpu_given = true;
}

const Flags& run_flags() {
    using T = rootfs::UserMount::Type;
    static const Flags flags = {
        {"--share-net", nullptr, "keep the host network (default: a new network namespace with only lo, up)",
         [](Options& o, const std::string&) { o.share_net = true; }},
        {"--root", nullptr, "the caller is uid/gid 0 inside (default: the caller's own ids); never any capability",
         [](Options& o, const std::string&) { o.root = true; }},
        {"--bind", "SRC:DST", "bind host SRC read-write at DST, recursively (mounts below SRC come too)",
         [](Options& o, const std::string& v) { add_mount(o, T::bind, v, "--bind"); }},
        {"--ro-bind", "SRC:DST", "bind host SRC read-only at DST, recursively",
         [](Options& o, const std::string& v) { add_mount(o, T::ro_bind, v, "--ro-bind"); }},
        {"--tmpfs", "DST", "a fresh tmpfs at DST",
         [](Options& o, const std::string& v) { add_mount(o, T::tmpfs, v, "--tmpfs"); }},
        {"--tmpfs-size", "SIZE", "one budget for every writable tmpfs place and the root's layer (default: the memory limit, else 1/4 of MemAvailable)",
         [](Options& o, const std::string& v) { o.tmpfs_size = parse_size(v, "--tmpfs-size"); }},
        {"--workdir", "DIR", "working directory inside (default /)",
         [](Options& o, const std::string& v) {
             o.workdir = rootfs::normalize_container_path(v, "--workdir"), o.workdir_given = true;
         }},
        {"--hostname", "NAME", "hostname inside (default gpubox)",
         [](Options& o, const std::string& v) {
             if (v.empty() || v.size() > 64 || v.find_first_of("/\n\t ") != std::string::npos)
                 throw UsageError(cat("--hostname: invalid name ", quote(v)));
             o.hostname = v;
         }},
        {"--env", "K=V", "set a variable in the workload's (otherwise clean: PATH, HOME, LANG, TERM) environment",
         [](Options& o, const std::string& v) { o.env.push_back(parse_env_assignment(v, "--env")); }},
        {"--env-file", "FILE", "K=V lines (# comments) added to the environment",
         [](Options& o, const std::string& v) {
             std::string content;
             try {
                 content = sys::read_file(v);
             } catch (const SysError& e) {
                 throw UsageError(cat("--env-file: ", e.op, ": ", e.code().message()));
             }
             for (auto& kv : parse_env_file(content, v)) o.env.push_back(kv);
         }},
        {"--writable", nullptr, "ROOTFS read-write: writes reach the disk (default: a tmpfs layer discarded at exit)",
         [](Options& o, const std::string&) { set_root_mode(o, rootfs::RootMode::writable); }},
        {"--read-only", nullptr, "ROOTFS read-only with no writable layer (only the tmpfs mounts take writes)",
         [](Options& o, const std::string&) { set_root_mode(o, rootfs::RootMode::read_only); }},
        {"--no-seccomp", nullptr, "do not install a seccomp filter",
         [](Options& o, const std::string&) { o.seccomp = false; }},
        {"--seccomp-bpf", "FILE", "install this raw BPF program instead of the default filter",
         [](Options& o, const std::string& v) { o.seccomp_bpf = v; }},
        {"--gpu", "SPEC", "GPUs to give the sandbox: none (default), all, a comma list of indices, GPU-<uuid>s "
                          "(or a unique prefix) and PCI addresses (repeated: the union), slurm (the Slurm "
                          "step's), env (NVIDIA_VISIBLE_DEVICES), or auto[:N] (N GPUs no other gpubox holds)",
         set_gpu},
        {"--gpu-share", nullptr, "with --gpu auto: share the GPUs with other --gpu-share sandboxes",
         [](Options& o, const std::string&) { o.gpu_share = true; }},
        {"--gpu-wait", "SEC", "with --gpu auto: wait up to SEC seconds for free GPUs (default 0)",
         [](Options& o, const std::string& v) { o.gpu_wait = parse_seconds(v, "--gpu-wait"); }},
        {"--kill-after", "SEC", "after SIGTERM, SIGINT or SIGHUP (forwarded), kill the sandbox after SEC seconds (default 5)",
         [](Options& o, const std::string& v) { o.kill_after = parse_seconds(v, "--kill-after"); }},
        {"--die-with-parent", nullptr, "kill the sandbox, and exit, when gpubox's parent dies",
         [](Options& o, const std::string&) { o.die_with_parent = true; }},
        {"--gpu-caps", "LIST", "driver capabilities: compute,utility (default), graphics, video, display, ngx, all",
         [](Options& o, const std::string& v) { o.gpu_caps = gpu::parse_capabilities(v), o.gpu_caps_given = true; }},
        {"--driver-root", "DIR", "where the host's driver lives (default /); every host GPU path is read below it",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
        {"--preflight", "MODE", "check the image against the node before starting: warn (default: one line "
                                "per misfit), enforce (exit 125 before anything starts), off",
         [](Options& o, const std::string& v) { o.preflight = preflight::parse_mode(v); }},
        {"--wall-time-limit", "SEC", "kill the sandbox after SEC seconds of wall-clock time (status TO)",
         [](Options& o, const std::string& v) { o.limits.wall_seconds = parse_seconds(v, "--wall-time-limit"); }},
        {"--time-limit", "SEC", "kill the sandbox after SEC seconds of CPU time, all its processes (status TO)",
         [](Options& o, const std::string& v) { o.limits.cpu_seconds = parse_seconds(v, "--time-limit"); }},
        {"--memory-limit", "SIZE", "memory the whole sandbox holds (status ML)",
         [](Options& o, const std::string& v) { o.limits.memory_bytes = parse_size(v, "--memory-limit"); }},
        {"--pids-limit", "N", "processes and threads in the sandbox (default 4096; 'unlimited' lifts it)",
         [](Options& o, const std::string& v) { o.limits.pids = v == "unlimited" ? 0 : parse_count(v, "--pids-limit"); }},
        {"--fsize-limit", "SIZE", "largest file the workload may write (RLIMIT_FSIZE)",
         [](Options& o, const std::string& v) { o.limits.fsize_bytes = parse_size(v, "--fsize-limit"); }},
        {"--nofile-limit", "N", "open files per process (RLIMIT_NOFILE)",
         [](Options& o, const std::string& v) { o.limits.nofile = parse_count(v, "--nofile-limit"); }},
        {"--stack-limit", "SIZE", "stack size (RLIMIT_STACK)",
         [](Options& o, const std::string& v) { o.limits.stack_bytes = parse_size(v, "--stack-limit"); }},
        {"--as-limit", "SIZE", "address space per process (RLIMIT_AS; breaks JITs and CUDA)",
         [](Options& o, const std::string& v) { o.limits.as_bytes = parse_size(v, "--as-limit"); }},
        {"--stdout-limit", "SIZE", "bytes the sandbox may write to stdout (status OL)",
         [](Options& o, const std::string& v) { o.limits.stdout_bytes = parse_size(v, "--stdout-limit"); }},
        {"--stderr-limit", "SIZE", "bytes the sandbox may write to stderr (status OL)",
         [](Options& o, const std::string& v) { o.limits.stderr_bytes = parse_size(v, "--stderr-limit"); }},
        {"--meta", "FILE", "write the verdict to FILE, even when setup fails",
         [](Options& o, const std::string& v) { o.meta = v; }},
        {"--meta-format", "FMT", "json (default) or isolate (key:value lines)",
         [](Options& o, const std::string& v) { o.meta_format = parse_meta_format(v); }},
        {"--cgroup", "MODE",
         "auto (default: a cgroup v2 we may write, else a systemd scope), off, systemd, or a delegated cgroup "
         "directory to make the sandbox's below",
         [](Options& o, const std::string& v) { o.cgroup = isolate::parse_cgroup_request(v); }},
        {"--print-plan", nullptr, "print namespaces, id maps, mounts, limits and the seccomp policy; run nothing",
         [](Options& o, const std::string&) { o.print_plan = true; }},
        {"--quiet", nullptr, "no warnings, and no line when a limit ends the run (errors still print)",
         [](Options& o, const std::string&) { o.quiet = true; }},
        {"-v", nullptr, "more output (-v info, -vv debug: every mount step)",
         [](Options& o, const std::string&) { ++o.verbosity; }},
        {"-vv", nullptr, nullptr, [](Options& o, const std::string&) { o.verbosity += 2; }},
    };
    return flags;
}

const Flags& list_flags() {
    static const Flags flags = {
        {"--json", nullptr, "machine-readable output: driver version, and per GPU its index, PCI address, UUID, "
                            "model, minor, nodes, problem",
         [](Options& o, const std::string&) { o.json = true; }},
        {"--driver-root", "DIR", "read every host GPU path below DIR (default /)",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
    };
    return flags;
}

const Flags& doctor_flags() {
    static const Flags flags = {
        {"--driver-root", "DIR", "read every host GPU path below DIR (default /)",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
    };
    return flags;
}

const Flags& check_flags() {
    static const Flags flags = {
        {"--gpu", "SPEC", "the GPUs to check against, as run's --gpu (default none: the driver alone)",
         [](Options& o, const std::string& v) { set_gpu(o, v); }},
        {"--driver-root", "DIR", "read every host GPU path and /proc/cpuinfo below DIR (default /)",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
        {"--require", "EXPR", "an NVIDIA_REQUIRE_* expression to hold as well (repeatable)",
         [](Options& o, const std::string& v) {
             preflight::validate_requirement(v, "--require");
             o.requirements.push_back(v);
         }},
        {"--env", "K=V", "the image's environment (NVIDIA_REQUIRE_*, CUDA_VERSION, PATH)",
         [](Options& o, const std::string& v) { o.env.push_back(parse_env_assignment(v, "--env")); }},
        {"--json", nullptr, "machine-readable output: fits, and per finding its check, result, needs, "
                            "has, file, detail",
         [](Options& o, const std::string&) { o.json = true; }},
    };
    return flags;
}

const Flags& create_flags() {
    static const Flags flags = {
        {"--busybox", "PATH", "the static busybox to install (default /bin/busybox, from busybox-static)",
         [](Options& o, const std::string& v) { o.busybox = v; }},
    };
    return flags;
}

const Flags& pull_flags() {
    static const Flags flags = {
        {"--name", "NAME", "store the image as NAME (default: REPO's last part:TAG, or the archive's base name)",
         [](Options& o, const std::string& v) { o.pull.name = v; }},
        {"--insecure", nullptr, "allow plain HTTP, and HTTPS without certificate checks, for this registry",
         [](Options& o, const std::string&) { o.pull.insecure = true; }},
        {"--cert-dir", "DIR", "CA certificates (*.crt) for the registry (default ~/.config/containers/certs.d/HOST:PORT)",
         [](Options& o, const std::string& v) { o.pull.cert_dir = v; }},
        {"--creds", "USER:PASS", "registry credentials (default: containers/auth.json, ~/.docker/config.json)",
         [](Options& o, const std::string& v) { o.pull.creds = v; }},
        {"--authfile", "FILE", "a containers-auth.json(5) file with the registry's credentials",
         [](Options& o, const std::string& v) { o.pull.authfile = v; }},
        {"--platform", "OS/ARCH", "the image to take from a multi-platform index (default: this host's)",
         [](Options& o, const std::string& v) { o.pull.platform = v; }},
    };
    return flags;
}

const Flags& images_flags() {
    static const Flags flags = {
        {"--json", nullptr, "machine-readable output: name, digest, source, size, pulled time, rootfs",
         [](Options& o, const std::string&) { o.json = true; }},
    };
    return flags;
}

// isolate's own options are parsed by launcher/isolate_cli.cpp; listed by `gpubox isolate --help`.
const Flags& isolate_flags() {
    static const Flags none;
    return none;
}

const Flags& no_flags() {
    static const Flags none;
    return none;
}

struct CommandInfo {
    const char* name;
    const char* synopsis;
    const char* summary;
    const Flags& flags;
};

const std::vector<CommandInfo>& commands() {
    static const std::vector<CommandInfo> table = {
        {"run", "[OPTIONS] ROOTFS|IMAGE [--] CMD [ARGS...]",
         "Run CMD in a new sandbox whose root is ROOTFS (a directory; never written: writes go to a tmpfs "
         "layer discarded at exit), or a pulled IMAGE (its Env, WorkingDir and Entrypoint apply; with no "
         "CMD its Cmd runs; a directory of that name wins). Options stop at ROOTFS, so CMD keeps its own flags. A SIZE takes a "
         "unit: B, K, M or G (1K = 1024 bytes); a bare number is an error.",
         run_flags()},
        {"list", "[--json] [--driver-root DIR]",
         "List the host's GPUs: index, PCI address, vendor, model, UUID and device nodes.", list_flags()},
        {"doctor", "[--driver-root DIR]",
         "Check that this host can run sandboxes (user namespaces, AppArmor, kernel, GPU driver, nodes, "
         "libraries) and print the fix for each problem. Exits 1 when it found one.",
         doctor_flags()},
        {"pull", "[OPTIONS] SOURCE",
         "Store an image for this user and print its name. SOURCE: docker://HOST[:PORT]/REPO[:TAG|@DIGEST], "
         "docker-archive:FILE, oci-archive:FILE, oci:DIR[:TAG] or tar:FILE (a root filesystem). Layers are "
         "checked against their digests; device nodes, setuid/setgid bits and file capabilities are dropped. "
         "Store: $GPUBOX_IMAGES, else $XDG_DATA_HOME/gpubox/images. Needs skopeo.",
         pull_flags()},
        {"images", "[--json]", "List the pulled images: name, digest, size, when pulled.", images_flags()},
        {"rmi", "NAME...", "Remove pulled images (an image's files go with the last name for them).", no_flags()},
        {"check", "[--gpu SPEC] [--driver-root DIR] [--require EXPR]... [--json] IMAGE|ROOTFS [CMD]",
         "Say whether the image can run on this node, before it is queued or started: one line per "
         "finding (what the image needs, what the node has, which file says so): NVIDIA_REQUIRE_*, "
         "its CUDA runtime against the driver, its forward-compatibility libraries, its CUDA objects' "
         "fat binaries against each GPU, and CMD's x86-64 level against the CPU. Exits 0 when it fits, "
         "1 when it does not, 125 on gpubox's own error.",
         check_flags()},
        {"rootfs create", "[--busybox PATH] DIR",
         "Make a minimal ROOTFS in DIR, offline: busybox and the host's glibc.", create_flags()},
        {"isolate", "[ISOLATE OPTIONS] --init | --run [--] PROG [ARGS...] | --cleanup",
         "isolate 2.x's command line, for judges built for isolate (also when gpubox is invoked through a "
         "link named isolate): boxes under $XDG_RUNTIME_DIR/gpubox/isolate, isolate's units, meta files and "
         "exit codes. 'gpubox isolate --help' lists its options.",
         isolate_flags()},
    };
    return table;
}

const CommandInfo& command_info(const std::string& name) {
    for (const CommandInfo& c : commands())
        if (name == c.name) return c;
    throw UsageError(cat("help: unknown command ", quote(name), " (try gpubox --help)"));
}

// `--bind /tmp /mnt ROOTFS CMD`, bubblewrap's spelling, or `--bind /tmp` with no destination:
// either would parse as something else (a ROOTFS of /mnt; a silent /tmp:/tmp), so both are errors
// that say what was meant.
void check_bind_value(const std::string& name, const std::string& v, const std::vector<std::string>& args,
                      std::size_t next) {
    if (v.find(':') != std::string::npos) return;
    if (next + 2 < args.size() && !args[next].empty() && args[next][0] == '/' && args[next].find(':') == std::string::npos)
        throw UsageError(cat("run: ", name, " takes one argument SRC:DST: did you mean ", name, " ", v, ":", args[next], "?"));
    throw UsageError(cat("run: ", name, " ", v, ": no destination: did you mean ", name, " ", v, ":", v,
                         "? (binds are recursive: mounts below ", v, " come too)"));
}

// Parses the flags of `table` from args[i] on, up to the first operand (or "--", skipped).
// Returns the operand's index, or args.size() + 1 after -h/--help (which sets the help topic).
std::size_t parse_flags(Options& o, const std::string& cmd, const Flags& table,
                        const std::vector<std::string>& args, std::size_t i) {
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") return i + 1;
        if (a.size() < 2 || a[0] != '-') return i;
        if (a == "-h" || a == "--help") {
            o.command = Command::help, o.help_topic = cmd;
            return args.size() + 1;
        }
        std::string name = a, value;
        const bool inline_value = a.rfind("--", 0) == 0 && a.find('=') != std::string::npos;
        if (inline_value) name = a.substr(0, a.find('=')), value = a.substr(a.find('=') + 1);
        const auto f = std::find_if(table.begin(), table.end(), [&](const Flag& x) { return name == x.name; });
        if (f == table.end()) throw UsageError(cat(cmd, ": unknown option ", quote(a), " (see gpubox --help)"));
        if (f->arg && !inline_value) {
            if (i + 1 >= args.size()) throw UsageError(cat(cmd, ": ", name, " needs a value"));
            value = args[++i];
        } else if (!f->arg && inline_value) {
            throw UsageError(cat(cmd, ": ", name, " takes no value"));
        }
        if (name == "--bind" || name == "--ro-bind") check_bind_value(name, value, args, i + 1);
        f->apply(o, value);
    }
    return i;
}

void parse_run(Options& o, const std::vector<std::string>& args, std::size_t i) {
    i = parse_flags(o, "run", run_flags(), args, i);
    if (o.command == Command::help) return;
    if (i >= args.size()) throw UsageError("run: missing ROOTFS (usage: gpubox run [OPTIONS] ROOTFS [--] CMD [ARGS...])");
    o.rootfs = args[i++];
    if (i < args.size() && args[i] == "--") ++i;
    o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());  // none: an image's own
    if (!o.seccomp_bpf.empty() && !o.seccomp)
        throw UsageError("run: --seccomp-bpf and --no-seccomp contradict each other");
}

void parse_rootfs(Options& o, const std::vector<std::string>& args, std::size_t i) {
    if (i < args.size() && (args[i] == "--help" || args[i] == "-h")) {
        o.command = Command::help, o.help_topic = "rootfs create";
        return;
    }
    if (i >= args.size() || args[i] != "create")
        throw UsageError("rootfs: usage: gpubox rootfs create [--busybox PATH] DIR");
    o.command = Command::rootfs_create;
    for (++i; (i = parse_flags(o, "rootfs create", create_flags(), args, i)) < args.size(); ++i) {
        if (!o.create_dir.empty()) throw UsageError("rootfs create: one DIR only");
        o.create_dir = args[i];
    }
    if (o.command == Command::help) return;
    if (o.create_dir.empty()) throw UsageError("rootfs create: missing DIR");
}

// pull SOURCE, images, rmi NAME...
void parse_image_command(Options& o, const std::vector<std::string>& args) {
    const std::string& cmd = args[0];
    const Flags& table = o.command == Command::pull ? pull_flags() : o.command == Command::images ? images_flags() : no_flags();
    std::size_t i = parse_flags(o, cmd, table, args, 1);
    if (o.command == Command::help) return;
    const std::vector<std::string> operands(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
    if (o.command == Command::pull) {
        if (operands.size() != 1) throw UsageError("pull: expected one SOURCE (usage: gpubox pull [OPTIONS] SOURCE)");
        o.pull.source = operands[0];
    } else if (o.command == Command::images) {
        if (!operands.empty()) throw UsageError(cat("images: unexpected argument ", quote(operands[0])));
    } else {
        if (operands.empty()) throw UsageError("rmi: expected NAME... (gpubox images lists them)");
        o.image_names = operands;
    }
}

void parse_check(Options& o, const std::vector<std::string>& args) {
    std::size_t i = parse_flags(o, "check", check_flags(), args, 1);
    if (o.command == Command::help) return;
    if (i >= args.size()) throw UsageError("check: missing IMAGE|ROOTFS (usage: gpubox check [OPTIONS] IMAGE|ROOTFS [CMD])");
    o.check_target = args[i++];
    o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    if (o.argv.size() > 1) throw UsageError(cat("check: unexpected argument ", quote(o.argv[1]), " (one CMD)"));
}

// list and doctor take options only.
void parse_host_command(Options& o, const std::vector<std::string>& args) {
    const Flags& table = o.command == Command::list ? list_flags() : doctor_flags();
    const std::size_t i = parse_flags(o, args[0], table, args, 1);
    if (i < args.size()) throw UsageError(cat(args[0], ": unexpected argument ", quote(args[i])));
}

}  // namespace

Options parse_command_line(const std::vector<std::string>& args) {
    Options o;
    if (args.empty()) throw UsageError("missing command (try gpubox --help)");
    const std::string& cmd = args[0];
    if (cmd == "-h" || cmd == "--help") o.command = Command::help;
    else if (cmd == "help") o.command = Command::help, o.help_topic = args.size() > 1 ? args[1] : "";
    else if (cmd == "--version" || cmd == "version") o.command = Command::version;
    else if (cmd == "--man") o.command = Command::man;  // hidden: gpubox(1), made at build time
    else if (cmd == "run") o.command = Command::run, parse_run(o, args, 1);
    else if (cmd == "rootfs") parse_rootfs(o, args, 1);
    else if (cmd == "list") o.command = Command::list, parse_host_command(o, args);
    else if (cmd == "doctor") o.command = Command::doctor, parse_host_command(o, args);
    else if (cmd == "pull") o.command = Command::pull, parse_image_command(o, args);
    else if (cmd == "images") o.command = Command::images, parse_image_command(o, args);
    else if (cmd == "rmi") o.command = Command::rmi, parse_image_command(o, args);
    else if (cmd == "check") o.command = Command::check, parse_check(o, args);
    else throw UsageError(cat("unknown command ", quote(cmd), " (try gpubox --help)"));
    if (o.help_topic == "rootfs") o.help_topic = "rootfs create";
    if (!o.help_topic.empty()) command_info(o.help_topic);  // an unknown topic is an error
    return o;
}

std::vector<CommandDoc> command_docs() {
    std::vector<CommandDoc> docs;
    for (const CommandInfo& c : commands()) {
        CommandDoc d{c.name, c.synopsis, c.summary, {}};
        for (const Flag& f : c.flags)
            if (f.help) d.flags.push_back({f.name, f.arg ? f.arg : "", f.help});
        docs.push_back(std::move(d));
    }
    return docs;
}


std::string version_text() { return "gpubox " GPUBOX_VERSION "\n"; }

}  // namespace gpubox::launcher
