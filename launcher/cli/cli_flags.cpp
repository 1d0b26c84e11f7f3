#include "launcher/cli/cli_flags.hpp"

#include <cstdlib>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/cdi_spec.hpp"
#include "gpu/gpu_spec.hpp"
#include "launcher/cli/cli_values.hpp"
#include "preflight/require.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::launcher {
namespace {

void add_mount(Options& o, rootfs::UserMount::Type type, const std::string& spec,
               const char* what) {
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
    if (cdi::parse_qualified(v)) return o.devices.push_back(v);  // a CDI device, as --device
    const gpu::GpuSpec spec = gpu::parse_gpu_spec(v);
    o.gpu = o.gpu_given ? merge_gpu_specs(o.gpu, spec) : spec;
    o.gpu_given = true;
}

}  // namespace

const Flags& run_flags() {
    using T = rootfs::UserMount::Type;
    static const Flags flags = {
        {"--share-net", nullptr,
         "keep the host network (default: a new network namespace with only lo, up)",
         [](Options& o, const std::string&) { o.share_net = true; }},
        {"--root", nullptr,
         "the caller is uid/gid 0 inside (default: the caller's own ids); never any capability",
         [](Options& o, const std::string&) { o.root = true; }},
        {"--bind", "SRC:DST",
         "bind host SRC read-write at DST, recursively (mounts below SRC come too)",
         [](Options& o, const std::string& v) { add_mount(o, T::bind, v, "--bind"); }},
        {"--ro-bind", "SRC:DST", "bind host SRC read-only at DST, recursively",
         [](Options& o, const std::string& v) { add_mount(o, T::ro_bind, v, "--ro-bind"); }},
        {"--tmpfs", "DST", "a fresh tmpfs at DST",
         [](Options& o, const std::string& v) { add_mount(o, T::tmpfs, v, "--tmpfs"); }},
        {"--tmpfs-size", "SIZE",
         "one budget for every writable tmpfs place and the root's layer (default: the memory "
         "limit, else 1/4 of MemAvailable)",
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
        {"--env", "K=V",
         "set a variable in the workload's (otherwise clean: PATH, HOME, LANG, TERM) environment; "
         "--env NAME passes the caller's value, if it has one",
         [](Options& o, const std::string& v) {
             if (v.find('=') == std::string::npos) {
                 const char* value = std::getenv(v.c_str());
                 auto kv = parse_env_assignment(v + "=", "--env");
                 if (value) o.env.emplace_back(kv.first, value);
                 return;
             }
             o.env.push_back(parse_env_assignment(v, "--env"));
         }},
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
        {"--writable", nullptr,
         "ROOTFS read-write: writes reach the disk (default: a tmpfs layer discarded at exit)",
         [](Options& o, const std::string&) { set_root_mode(o, rootfs::RootMode::writable); }},
        {"--read-only", nullptr,
         "ROOTFS read-only with no writable layer (only the tmpfs mounts take writes)",
         [](Options& o, const std::string&) { set_root_mode(o, rootfs::RootMode::read_only); }},
        {"--overlay", "DIR",
         "keep the sandbox's writes to its root in DIR (yours; made 0700 if missing) and find "
         "them again next time: an overlay upper layer over ROOTFS or IMAGE, which stay unwritten; "
         "one run at a time per DIR, on a local filesystem",
         [](Options& o, const std::string& v) {
             if (v.empty()) throw UsageError("run: --overlay needs a directory");
             o.overlay = v;
         }},
        {"--force-overlay", nullptr,
         "reuse --overlay's DIR over another image or ROOTFS than the one it was made over "
         "(its files then shadow the new image's: what it deleted stays deleted)",
         [](Options& o, const std::string&) { o.force_overlay = true; }},
        {"--no-seccomp", nullptr, "do not install a seccomp filter",
         [](Options& o, const std::string&) { o.seccomp = false; }},
        {"--seccomp-bpf", "FILE", "install this raw BPF program instead of the default filter",
         [](Options& o, const std::string& v) { o.seccomp_bpf = v; }},
        {"--gpu", "SPEC",
         "GPUs to give the sandbox: none (default), all, a comma list of indices, GPU-<uuid>s "
         "(or a unique prefix), PCI addresses and MIG devices (GPU:GI:CI, "
         "MIG-GPU-<uuid>/GI/CI or NVML's MIG-<uuid>, see 'gpubox list') (repeated: the union), "
         "slurm (the Slurm "
         "step's), env (NVIDIA_VISIBLE_DEVICES), or auto[:N] (N GPUs or MIG devices no other "
         "gpubox holds)",
         set_gpu},
        {"--device", "DEV",
         "give a device: a CDI device VENDOR/CLASS=NAME (e.g. nvidia.com/gpu=0) from the spec "
         "directories (see 'gpubox cdi list'), its spec's mounts, environment and nvidia-cdi-hook "
         "work done by gpubox (no hook is run), or a host character device /dev/PATH[:PERMS] "
         "(PERMS: some of rwm; without w, access is checked for reading only) (repeatable)",
         [](Options& o, const std::string& v) { o.devices.push_back(v); }},
        {"--rdma", nullptr,
         "give the host's RDMA devices (InfiniBand, RoCE): /dev/infiniband's uverbs* and rdma_cm "
         "and the sysfs entries libibverbs reads; RLIMIT_MEMLOCK stays as it is",
         [](Options& o, const std::string&) { o.rdma = true; }},
        {"--cdi-spec-dir", "DIR",
         "read CDI specs from DIR instead of /etc/cdi, /var/run/cdi and $XDG_CONFIG_HOME/cdi "
         "(repeatable; later directories win)",
         [](Options& o, const std::string& v) { o.cdi_spec_dirs.push_back(v); }},
        {"--gpu-share", nullptr, "with --gpu auto: share the GPUs with other --gpu-share sandboxes",
         [](Options& o, const std::string&) { o.gpu_share = true; }},
        {"--gpu-wait", "SEC", "with --gpu auto: wait up to SEC seconds for free GPUs (default 0)",
         [](Options& o, const std::string& v) { o.gpu_wait = parse_seconds(v, "--gpu-wait"); }},
        {"--kill-after", "SEC",
         "after SIGTERM, SIGINT or SIGHUP (forwarded), kill the sandbox after SEC seconds (default "
         "5)",
         [](Options& o, const std::string& v) { o.kill_after = parse_seconds(v, "--kill-after"); }},
        {"--die-with-parent", nullptr, "kill the sandbox, and exit, when gpubox's parent dies",
         [](Options& o, const std::string&) { o.die_with_parent = true; }},
        // Multi-rank jobs (launcher/monitor/step.hpp)
        {"--step", nullptr,
         "join the sandbox of this job step's tasks on this node, made by the first (default "
         "in a step whose node runs more than one of its tasks, or with PMIX_RANK, PMI_FD or "
         "PMI_RANK set)",
         [](Options& o, const std::string&) { o.step = 1; }},
        {"--no-step", nullptr,
         "a private sandbox even in a multi-task step (warns that ranks "
         "will not find each other)",
         [](Options& o, const std::string&) { o.step = 0; }},
        {"--shm-size", "SIZE",
         "/dev/shm a tmpfs of its own of SIZE (default: part of --tmpfs-size's one budget)",
         [](Options& o, const std::string& v) { o.shm_size = parse_size(v, "--shm-size"); }},
        {"--preserve-fds", "N", "keep fds 3 to N+2 open into the workload (default 0)",
         [](Options& o, const std::string& v) {
             const std::uint64_t n = v == "0" ? 0 : parse_count(v, "--preserve-fds");
             if (n > 1000) throw UsageError(cat("--preserve-fds: at most 1000, got ", quote(v)));
             o.preserve_fds = static_cast<int>(n);
         }},
        {"--gpu-caps", "LIST",
         "driver capabilities: compute,utility (default), graphics, video, display, ngx, all",
         [](Options& o, const std::string& v) {
             o.gpu_caps = gpu::parse_capabilities(v), o.gpu_caps_given = true;
         }},
        {"--driver-root", "DIR",
         "where the host's driver lives (default /); every host GPU path is read below it",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
        {"--preflight", "MODE",
         "check the image against the node before starting: warn (default: one line "
         "per misfit), enforce (exit 125 before anything starts), off",
         [](Options& o, const std::string& v) { o.preflight = preflight::parse_mode(v); }},
        {"--wall-time-limit", "SEC",
         "kill the sandbox after SEC seconds of wall-clock time (status TO)",
         [](Options& o, const std::string& v) {
             o.limits.wall_seconds = parse_seconds(v, "--wall-time-limit");
         }},
        {"--time-limit", "SEC",
         "kill the sandbox after SEC seconds of CPU time, all its processes (status TO)",
         [](Options& o, const std::string& v) {
             o.limits.cpu_seconds = parse_seconds(v, "--time-limit");
         }},
        {"--memory-limit", "SIZE", "memory the whole sandbox holds (status ML)",
         [](Options& o, const std::string& v) {
             o.limits.memory_bytes = parse_size(v, "--memory-limit");
         }},
        {"--pids-limit", "N",
         "processes and threads in the sandbox (default 4096; 'unlimited' lifts it)",
         [](Options& o, const std::string& v) {
             o.limits.pids = v == "unlimited" ? 0 : parse_count(v, "--pids-limit");
         }},
        {"--fsize-limit", "SIZE", "largest file the workload may write (RLIMIT_FSIZE)",
         [](Options& o, const std::string& v) {
             o.limits.fsize_bytes = parse_size(v, "--fsize-limit");
         }},
        {"--nofile-limit", "N", "open files per process (RLIMIT_NOFILE)",
         [](Options& o, const std::string& v) {
             o.limits.nofile = parse_count(v, "--nofile-limit");
         }},
        {"--stack-limit", "SIZE", "stack size (RLIMIT_STACK)",
         [](Options& o, const std::string& v) {
             o.limits.stack_bytes = parse_size(v, "--stack-limit");
         }},
        {"--as-limit", "SIZE", "address space per process (RLIMIT_AS; breaks JITs and CUDA)",
         [](Options& o, const std::string& v) { o.limits.as_bytes = parse_size(v, "--as-limit"); }},
        {"--stdout-limit", "SIZE", "bytes the sandbox may write to stdout (status OL)",
         [](Options& o, const std::string& v) {
             o.limits.stdout_bytes = parse_size(v, "--stdout-limit");
         }},
        {"--stderr-limit", "SIZE", "bytes the sandbox may write to stderr (status OL)",
         [](Options& o, const std::string& v) {
             o.limits.stderr_bytes = parse_size(v, "--stderr-limit");
         }},
        {"--meta", "FILE", "write the verdict to FILE, even when setup fails",
         [](Options& o, const std::string& v) { o.meta = v; }},
        {"--meta-format", "FMT", "json (default) or isolate (key:value lines)",
         [](Options& o, const std::string& v) { o.meta_format = parse_meta_format(v); }},
        {"--cgroup", "MODE",
         "auto (default: a cgroup v2 we may write, else a systemd scope), off, systemd, or a "
         "delegated cgroup "
         "directory to make the sandbox's below",
         [](Options& o, const std::string& v) { o.cgroup = isolate::parse_cgroup_request(v); }},
        {"--require-cgroup", nullptr,
         "refuse to run (exit 125) without a cgroup v2 with the memory controller: exact limits "
         "or none",
         [](Options& o, const std::string&) { o.require_cgroup = true; }},
        {"--name", "NAME",
         "name the sandbox, so that 'gpubox ps' lists it and 'gpubox exec NAME CMD' runs CMD in "
         "it (unique among the caller's running sandboxes)",
         [](Options& o, const std::string& v) {
             if (v.empty()) throw UsageError("run: --name \"\": the name is empty");
             o.name = v;
         }},
        {"--print-plan", nullptr,
         "print namespaces, id maps, mounts, limits and the seccomp policy; run nothing",
         [](Options& o, const std::string&) { o.print_plan = true; }},
        {"--quiet", nullptr,
         "no warnings, and no line when a limit ends the run (errors still print)",
         [](Options& o, const std::string&) { o.quiet = true; }},
        {"-v", nullptr, "more output (-v info, -vv debug: every mount step)",
         [](Options& o, const std::string&) { ++o.verbosity; }},
        {"-vv", nullptr, nullptr, [](Options& o, const std::string&) { o.verbosity += 2; }},
    };
    return flags;
}

const Flags& list_flags() {
    static const Flags flags = {
        {"--json", nullptr,
         "machine-readable output: driver version, and per GPU its index, PCI address, UUID, "
         "model, minor, nodes, problem",
         [](Options& o, const std::string&) { o.json = true; }},
        {"--driver-root", "DIR", "read every host GPU path below DIR (default /)",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
    };
    return flags;
}

const Flags& cdi_generate_flags() {
    static const Flags flags = {
        {"--format", "FMT", "yaml (default) or json",
         [](Options& o, const std::string& v) {
             if (v != "yaml" && v != "json")
                 throw UsageError(cat("--format ", quote(v), ": expected yaml or json"));
             o.cdi_format = v;
         }},
        {"--output", "FILE",
         "write the spec to FILE (- for standard output; default: nvidia.yaml, amd.yaml and "
         "intel.yaml, or .json, in $XDG_CONFIG_HOME/cdi, for the kinds the host has; with FILE, "
         "nvidia.com/gpu's unless --kind names another)",
         [](Options& o, const std::string& v) { o.cdi_output = v; }},
        {"--kind", "KIND", "only the spec of KIND: nvidia.com/gpu, amd.com/gpu or intel.com/gpu",
         [](Options& o, const std::string& v) {
             if (v != "nvidia.com/gpu" && v != "amd.com/gpu" && v != "intel.com/gpu")
                 throw UsageError(cat("--kind ", quote(v),
                                      ": expected nvidia.com/gpu, amd.com/gpu or intel.com/gpu"));
             o.cdi_kind = v;
         }},
        {"--driver-root", "DIR", "read every host GPU path below DIR (default /)",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
    };
    return flags;
}

const Flags& cdi_list_flags() {
    static const Flags flags = {
        {"--cdi-spec-dir", "DIR", "read CDI specs from DIR instead of the default directories",
         [](Options& o, const std::string& v) { o.cdi_spec_dirs.push_back(v); }},
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
        {"--gpu", "SPEC",
         "the GPUs to check against, as run's --gpu (default none: the driver alone)",
         [](Options& o, const std::string& v) { set_gpu(o, v); }},
        {"--driver-root", "DIR", "read every host GPU path and /proc/cpuinfo below DIR (default /)",
         [](Options& o, const std::string& v) { o.driver_root = v; }},
        {"--require", "EXPR", "an NVIDIA_REQUIRE_* expression to hold as well (repeatable)",
         [](Options& o, const std::string& v) {
             preflight::validate_requirement(v, "--require");
             o.requirements.push_back(v);
         }},
        {"--env", "K=V", "the image's environment (NVIDIA_REQUIRE_*, CUDA_VERSION, PATH)",
         [](Options& o, const std::string& v) {
             o.env.push_back(parse_env_assignment(v, "--env"));
         }},
        {"--json", nullptr,
         "machine-readable output: fits, and per finding its check, result, needs, "
         "has, file, detail",
         [](Options& o, const std::string&) { o.json = true; }},
    };
    return flags;
}

const Flags& create_flags() {
    static const Flags flags = {
        {"--busybox", "PATH",
         "the static busybox to install (default /bin/busybox, from busybox-static)",
         [](Options& o, const std::string& v) { o.busybox = v; }},
    };
    return flags;
}

const Flags& pull_flags() {
    static const Flags flags = {
        {"--name", "NAME",
         "store the image as NAME (default: REPO's last part:TAG, or the archive's base name)",
         [](Options& o, const std::string& v) { o.pull.name = v; }},
        {"--insecure", nullptr,
         "allow plain HTTP, and HTTPS without certificate checks, for this registry",
         [](Options& o, const std::string&) { o.pull.insecure = true; }},
        {"--cert-dir", "DIR",
         "CA certificates (*.crt) for the registry (default "
         "~/.config/containers/certs.d/HOST:PORT)",
         [](Options& o, const std::string& v) { o.pull.cert_dir = v; }},
        {"--creds", "USER:PASS",
         "registry credentials (default: containers/auth.json, ~/.docker/config.json)",
         [](Options& o, const std::string& v) { o.pull.creds = v; }},
        {"--authfile", "FILE", "a containers-auth.json(5) file with the registry's credentials",
         [](Options& o, const std::string& v) { o.pull.authfile = v; }},
        {"--platform", "OS/ARCH",
         "the image to take from a multi-platform index (default: this host's)",
         [](Options& o, const std::string& v) { o.pull.platform = v; }},
        {"--max-size", "SIZE",
         "the most the image may unpack to, every file's declared size (default 32G); a layer "
         "may also expand at most 100 times its compressed size, and a pull leaves 1 % of the "
         "store's filesystem (at most 1 GiB) free",
         [](Options& o, const std::string& v) { o.pull.max_size = parse_size(v, "--max-size"); }},
        {"--quiet", nullptr,
         "print the image's name alone: no progress, no summary (errors still print)",
         [](Options& o, const std::string&) { o.quiet = true; }},
        {"--flat", nullptr,
         "store the image as one tree, sharing no layer (for a kernel or filesystem where "
         "overlayfs cannot stack layers in a user namespace)",
         [](Options& o, const std::string&) { o.pull.flat = true; }},
        {"--squashfs", nullptr,
         "store the image as one squashfs file (mksquashfs), which runs mount without "
         "unpacking (squashfuse) where /dev/fuse is open to you (docs/images.md)",
         [](Options& o, const std::string&) { o.pull.squashfs = true; }},
    };
    return flags;
}

const Flags& export_flags() {
    static const Flags flags = {
        {"--overlay", "DIR",
         "the image with the writes a run kept in DIR (run --overlay DIR): whiteouts and opaque "
         "directories applied",
         [](Options& o, const std::string& v) {
             if (v.empty()) throw UsageError("export: --overlay needs a directory");
             o.exp.overlay = v;
         }},
    };
    return flags;
}

const Flags& images_flags() {
    static const Flags flags = {
        {"--json", nullptr,
         "machine-readable output: name, digest, source, size, pulled time, rootfs, squashfs "
         "file",
         [](Options& o, const std::string&) { o.json = true; }},
    };
    return flags;
}

// Named sandboxes: ps, and exec, whose flags are run's own where they mean the same.
const Flags& ps_flags() {
    static const Flags flags = {
        {"--json", nullptr,
         "machine-readable output: name, pid, image, gpus, limits, cgroup, started, uptime_s",
         [](Options& o, const std::string&) { o.json = true; }},
    };
    return flags;
}

const Flags& exec_flags() {
    static const Flags flags = [] {
        Flags f;
        for (const Flag& r : run_flags())
            for (const char* name : {"--env", "--env-file", "--workdir", "--quiet", "-v", "-vv"})
                if (std::string(r.name) == name) f.push_back(r);
        for (Flag& x : f) {  // the same flags, said of CMD
            if (std::string(x.name) == "--workdir")
                x.help = "working directory inside (default: the workload's)";
            if (std::string(x.name) == "--env")
                x.help =
                    "set a variable in CMD's environment, the workload's otherwise; --env "
                    "NAME passes the caller's value, if it has one";
        }
        // docker's and podman's habit: a pty comes anyway where stdin and stdout are terminals.
        for (const char* name : {"-i", "-t", "-it", "-ti", "--interactive", "--tty"})
            f.push_back({name, nullptr,
                         std::string(name) == "-it"
                             ? "accepted for docker's habit: CMD gets a pty of its own where "
                               "stdin and stdout are terminals, as run's workload does"
                             : nullptr,
                         [](Options&, const std::string&) {}});
        return f;
    }();
    return flags;
}

// isolate's own options are parsed by launcher/ioi/cli.cpp; listed by `gpubox isolate --help`.
const Flags& isolate_flags() {
    static const Flags none;
    return none;
}

const Flags& no_flags() {
    static const Flags none;
    return none;
}

}  // namespace gpubox::launcher
