#include "launcher/cli/cli.hpp"

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
#include "launcher/cli/cli_flags.hpp"
#include "launcher/cli/cli_habits.hpp"
#include "preflight/require.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::launcher {
namespace {

struct CommandInfo {
    const char* name;
    const char* synopsis;
    const char* summary;
    const Flags& flags;
};

const std::vector<CommandInfo>& commands() {
    static const std::vector<CommandInfo> table = {
        {"run", "[OPTIONS] ROOTFS|IMAGE [--] CMD [ARGS...]",
         "Run CMD in a new sandbox whose root is ROOTFS (a directory; never written: writes go to "
         "a tmpfs "
         "layer discarded at exit), or a pulled IMAGE (its Env, WorkingDir and Entrypoint apply; "
         "with no "
         "CMD its Cmd runs; a directory of that name wins). Options stop at ROOTFS, so CMD keeps "
         "its own flags. A SIZE takes a "
         "unit: B, K, M or G (1K = 1024 bytes); a bare number is an error.",
         run_flags()},
        {"list", "[--json] [--driver-root DIR]",
         "List the host's GPUs: index, PCI address, vendor, model, UUID and device nodes, and "
         "each MIG device under its GPU (GPU:GI:CI, its profile, memory and MIG-<uuid> as the "
         "driver's NVML gives them, else MIG-GPU-<uuid>/GI/CI; its nodes).",
         list_flags()},
        {"doctor", "[--driver-root DIR]",
         "Check that this host can run sandboxes (user namespaces, AppArmor, kernel, GPU driver, "
         "nodes, "
         "libraries) and print the fix for each problem. Exits 1 when it found one.",
         doctor_flags()},
        {"pull", "[OPTIONS] SOURCE",
         "Store an image for this user and print its name. SOURCE: "
         "docker://HOST[:PORT]/REPO[:TAG|@DIGEST], "
         "docker-archive:FILE, oci-archive:FILE, oci:DIR[:TAG] or tar:FILE (a root filesystem). "
         "Layers are "
         "checked against their digests; device nodes, setuid/setgid bits and file capabilities "
         "are dropped. "
         "Store: $GPUBOX_IMAGES, else $XDG_DATA_HOME/gpubox/images. Needs skopeo.",
         pull_flags()},
        {"images", "[--json]", "List the pulled images: name, digest, size, when pulled.",
         images_flags()},
        {"rmi", "NAME...",
         "Remove pulled images (an image's files go with the last name for them, its layers "
         "with the last image that has them).",
         no_flags()},
        {"export", "[--overlay DIR] IMAGE|FILE.sqsh NAME|FILE.sqsh",
         "Make a new image of IMAGE (with the writes a run kept in DIR): NAME stores it as one "
         "squashfs file in your store, FILE.sqsh (a new file) writes it there. Needs "
         "squashfs-tools.",
         export_flags()},
        {"prune", "",
         "Remove what no image name uses: image trees left without a name, layers no image "
         "has, and leftovers of pulls that were killed. Never what a running sandbox holds.",
         no_flags()},
        {"ps", "[--json]",
         "List the caller's running named sandboxes (run --name): name, init's pid, image or "
         "ROOTFS, GPUs, limits, uptime. Another user's are never listed.",
         ps_flags()},
        {"exec", "[OPTIONS] NAME [--] CMD [ARGS...]",
         "Run CMD in the caller's running sandbox NAME: in its namespaces and root, as its "
         "workload (the same user namespace, seccomp filter and rlimits, no capability, in its "
         "cgroup and counted in its limits), with the workload's environment and --env; killed "
         "when the sandbox ends. Exits with CMD's status. Only the sandbox's owner can.",
         exec_flags()},
        {"check",
         "[--gpu SPEC] [--driver-root DIR] [--require EXPR]... [--json] IMAGE|ROOTFS [CMD]",
         "Say whether the image can run on this node, before it is queued or started: one line per "
         "finding (what the image needs, what the node has, which file says so): NVIDIA_REQUIRE_*, "
         "its CUDA runtime against the driver, its forward-compatibility libraries, its CUDA "
         "objects' "
         "fat binaries against each GPU, and CMD's x86-64 level against the CPU. Exits 0 when it "
         "fits, "
         "1 when it does not, 125 on gpubox's own error.",
         check_flags()},
        {"cdi generate", "[--format yaml|json] [--output FILE] [--kind KIND] [--driver-root DIR]",
         "Write a CDI spec (Container Device Interface) for this host's GPUs, as an ordinary "
         "user: each NVIDIA GPU by index, UUID and all, and each MIG device (GPU:GI:CI); AMD and "
         "Intel GPUs (amd.com/gpu, intel.com/gpu) by index among their vendor's, PCI address "
         "and all; from the discovery run uses. Its cdiVersion is the lowest its "
         "features need, as the CDI library decides, so older consumers (podman 4.3: CDI 0.5) "
         "accept it. Default output: $XDG_CONFIG_HOME/cdi/{nvidia,amd,intel}.yaml (~/.config/cdi).",
         cdi_generate_flags()},
        {"cdi list", "[--cdi-spec-dir DIR]...",
         "List the CDI devices every spec directory offers (/etc/cdi, /var/run/cdi, then "
         "$XDG_CONFIG_HOME/cdi; a later directory's device wins), and specs that cannot be used.",
         cdi_list_flags()},
        {"rootfs create", "[--busybox PATH] DIR",
         "Make a minimal ROOTFS in DIR, offline: busybox and the host's glibc.", create_flags()},
        {"isolate", "[ISOLATE OPTIONS] --init | --run [--] PROG [ARGS...] | --cleanup",
         "isolate 2.x's command line, for judges built for isolate (also when gpubox is invoked "
         "through a "
         "link named isolate): boxes under $XDG_RUNTIME_DIR/gpubox/isolate, isolate's units, meta "
         "files and "
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
void check_bind_value(const std::string& name, const std::string& v,
                      const std::vector<std::string>& args, std::size_t next) {
    if (v.find(':') != std::string::npos) return;
    if (next + 2 < args.size() && !args[next].empty() && args[next][0] == '/' &&
        args[next].find(':') == std::string::npos)
        throw UsageError(cat("run: ", name, " takes one argument SRC:DST: did you mean ", name, " ",
                             v, ":", args[next], "?"));
    throw UsageError(cat("run: ", name, " ", v, ": no destination: did you mean ", name, " ", v,
                         ":", v, "? (binds are recursive: mounts below ", v, " come too)"));
}

// An option `arg` (named `name`) that `cmd` does not take; docker's habits get what they meant.
[[noreturn]] void unknown_option(const std::string& cmd, const std::string& arg,
                                 const std::string& name, const std::string& next) {
    const std::string habit = cmd == "run" ? docker_habit(name, next) : "";
    if (!habit.empty())
        throw UsageError(cat(cmd, ": unknown option ", quote(arg), " (docker's): ", habit));
    throw UsageError(cat(cmd, ": unknown option ", quote(arg), " (see gpubox --help)"));
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
        const auto f =
            std::find_if(table.begin(), table.end(), [&](const Flag& x) { return name == x.name; });
        if (f == table.end()) unknown_option(cmd, a, name, i + 1 < args.size() ? args[i + 1] : "");
        if (f->arg && !inline_value) {
            if (i + 1 >= args.size()) throw UsageError(cat(cmd, ": ", name, " needs a value"));
            value = args[++i];
        } else if (!f->arg && inline_value) {
            throw UsageError(cat(cmd, ": ", name, " takes no value"));
        }
        if (name == "--bind" || name == "--ro-bind") check_bind_value(name, value, args, i + 1);
        if (cmd == "run" && name == "-v" && i + 1 < args.size())
            if (const std::string m = verbose_as_volume(args[i + 1]); !m.empty())
                throw UsageError(m);
        f->apply(o, value);
    }
    return i;
}

void parse_run(Options& o, const std::vector<std::string>& args, std::size_t i) {
    i = parse_flags(o, "run", run_flags(), args, i);
    if (o.command == Command::help) return;
    if (i >= args.size())
        throw UsageError(
            "run: missing ROOTFS (usage: gpubox run [OPTIONS] ROOTFS [--] CMD [ARGS...])");
    o.rootfs = args[i++];
    if (i < args.size() && args[i] == "--") {
        ++i;
    } else {
        std::vector<std::pair<std::string, bool>> names;
        for (const Flag& f : run_flags()) names.emplace_back(f.name, f.arg != nullptr);
        const std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i),
                                            args.end());
        if (const std::string m = option_after_rootfs(o.rootfs, rest, names); !m.empty())
            throw UsageError(m);
    }
    o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i),
                  args.end());  // none: an image's own
    if (!o.seccomp_bpf.empty() && !o.seccomp)
        throw UsageError("run: --seccomp-bpf and --no-seccomp contradict each other");
    if (!o.overlay.empty() && o.root_mode != rootfs::RootMode::overlay)
        throw UsageError(
            cat("run: --overlay and ",
                o.root_mode == rootfs::RootMode::writable ? "--writable" : "--read-only",
                " contradict each other (--overlay keeps the writes in DIR and never "
                "writes ROOTFS; choose one)"));
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
    const Flags& table = o.command == Command::pull     ? pull_flags()
                         : o.command == Command::images ? images_flags()
                                                        : no_flags();
    std::size_t i = parse_flags(o, cmd, table, args, 1);
    if (o.command == Command::help) return;
    const std::vector<std::string> operands(
        args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
    if (o.command == Command::pull) {
        if (operands.size() != 1)
            throw UsageError("pull: expected one SOURCE (usage: gpubox pull [OPTIONS] SOURCE)");
        o.pull.source = operands[0];
    } else if (o.command == Command::images || o.command == Command::prune) {
        if (!operands.empty())
            throw UsageError(cat(cmd, ": unexpected argument ", quote(operands[0])));
    } else {
        if (operands.empty()) throw UsageError("rmi: expected NAME... (gpubox images lists them)");
        o.image_names = operands;
    }
}

// export [--overlay DIR] IMAGE NAME|FILE.sqsh
void parse_export(Options& o, const std::vector<std::string>& args) {
    const std::size_t i = parse_flags(o, "export", export_flags(), args, 1);
    if (o.command == Command::help) return;
    if (args.size() != i + 2)
        throw UsageError(
            "export: expected IMAGE and NAME|FILE.sqsh (usage: gpubox export [--overlay DIR] "
            "IMAGE NAME|FILE.sqsh)");
    o.exp.image = args[i], o.exp.target = args[i + 1];
}

void parse_check(Options& o, const std::vector<std::string>& args) {
    std::size_t i = parse_flags(o, "check", check_flags(), args, 1);
    if (o.command == Command::help) return;
    if (i >= args.size())
        throw UsageError(
            "check: missing IMAGE|ROOTFS (usage: gpubox check [OPTIONS] IMAGE|ROOTFS [CMD])");
    o.check_target = args[i++];
    o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    if (o.argv.size() > 1)
        throw UsageError(cat("check: unexpected argument ", quote(o.argv[1]), " (one CMD)"));
}

// ps [--json]; exec [OPTIONS] NAME [--] CMD [ARGS...]
void parse_named(Options& o, const std::vector<std::string>& args) {
    const bool ps = o.command == Command::ps;
    std::size_t i = parse_flags(o, args[0], ps ? ps_flags() : exec_flags(), args, 1);
    if (o.command == Command::help) return;
    if (ps) {
        if (i < args.size()) throw UsageError(cat("ps: unexpected argument ", quote(args[i])));
        return;
    }
    const char* usage = " (usage: gpubox exec [OPTIONS] NAME [--] CMD [ARGS...])";
    if (i >= args.size()) throw UsageError(cat("exec: missing NAME", usage));
    o.name = args[i++];
    if (i < args.size() && args[i] == "--") ++i;
    if (i >= args.size()) throw UsageError(cat("exec: missing CMD", usage));
    o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
}

void parse_cdi(Options& o, const std::vector<std::string>& args) {
    const std::string sub = args.size() > 1 ? args[1] : "";
    if (sub == "--help" || sub == "-h") {
        o.command = Command::help, o.help_topic = "cdi generate";
        return;
    }
    if (sub != "generate" && sub != "list")
        throw UsageError("cdi: usage: gpubox cdi generate|list [OPTIONS]");
    o.command = sub == "generate" ? Command::cdi_generate : Command::cdi_list;
    const std::string name = "cdi " + sub;
    const std::size_t i =
        parse_flags(o, name, sub == "generate" ? cdi_generate_flags() : cdi_list_flags(), args, 2);
    if (i < args.size()) throw UsageError(cat(name, ": unexpected argument ", quote(args[i])));
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
    else if (cmd == "help")
        o.command = Command::help, o.help_topic = args.size() > 1 ? args[1] : "";
    else if (cmd == "--version" || cmd == "version") o.command = Command::version;
    else if (cmd == "--man") o.command = Command::man;  // hidden: gpubox(1), made at build time
    else if (cmd == "run") o.command = Command::run, parse_run(o, args, 1);
    else if (cmd == "rootfs") parse_rootfs(o, args, 1);
    else if (cmd == "list") o.command = Command::list, parse_host_command(o, args);
    else if (cmd == "doctor") o.command = Command::doctor, parse_host_command(o, args);
    else if (cmd == "pull") o.command = Command::pull, parse_image_command(o, args);
    else if (cmd == "images") o.command = Command::images, parse_image_command(o, args);
    else if (cmd == "rmi") o.command = Command::rmi, parse_image_command(o, args);
    else if (cmd == "prune") o.command = Command::prune, parse_image_command(o, args);
    else if (cmd == "check") o.command = Command::check, parse_check(o, args);
    else if (cmd == "export") o.command = Command::export_image, parse_export(o, args);
    else if (cmd == "cdi") parse_cdi(o, args);
    else if (cmd == "ps") o.command = Command::ps, parse_named(o, args);
    else if (cmd == "exec") o.command = Command::exec, parse_named(o, args);
    else throw UsageError(cat("unknown command ", quote(cmd), " (try gpubox --help)"));
    if (o.help_topic == "rootfs") o.help_topic = "rootfs create";
    if (o.help_topic == "cdi") o.help_topic = "cdi generate";
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
