#pragma once
// Plain data: what the command line asked for. Defaults live here; logic lives elsewhere.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isolate/cgroup_plan.hpp"
#include "isolate/limits.hpp"
#include "preflight/mode.hpp"
#include "rootfs/mount_op.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::launcher {

enum class Command { help, version, man, run, list, doctor, rootfs_create, check };

struct Options {
    Command command = Command::help;
    int verbosity = 0;  // -v info, -vv debug
    bool quiet = false;      // --quiet: no warnings, no limit-kill line
    std::string help_topic;  // help: "" for gpubox --help, else the command (run, list, ...)

    // run
    std::string rootfs;
    std::vector<std::string> argv;
    bool share_net = false;
    bool root = false;
    bool print_plan = false;
    rootfs::RootMode root_mode = rootfs::RootMode::overlay;
    std::vector<rootfs::UserMount> mounts;
    std::string workdir = "/";
    std::string hostname = "gpubox";
    std::vector<std::pair<std::string, std::string>> env;  // --env-file and --env, in order
    bool bare_env = false;  // exactly `env`, without gpubox's PATH, HOME, LANG, TERM (isolate mode)
    bool seccomp = true;
    std::string seccomp_bpf;  // a raw BPF profile replacing the default
    std::uint64_t tmpfs_size = 0;

    // Limits and the verdict
    isolate::Limits limits;
    std::string meta;                  // --meta FILE
    std::string meta_format = "json";  // or "isolate"
    isolate::CgroupRequest cgroup;     // --cgroup auto (default), off, systemd or PATH

    // GPUs (run, list, doctor)
    std::string gpu = "none";
    bool gpu_given = false;  // a second --gpu merges with the first
    unsigned gpu_caps = 3;  // compute,utility (gpu::kCapDefault)
    std::string driver_root = "/";
    bool json = false;
    bool gpu_share = false;   // --gpu-share: --gpu auto leases GPUs shared (LOCK_SH)
    double gpu_wait = 0;      // --gpu-wait SEC: how long --gpu auto waits for free GPUs

    // Scheduler signals
    double kill_after = 5;         // --kill-after SEC: grace after SIGTERM/INT/HUP, then kill
    bool die_with_parent = false;  // --die-with-parent

    // Preflight (run, check): what the image needs against what the node has
    preflight::Mode preflight = preflight::Mode::warn;  // run --preflight
    std::vector<std::string> requirements;                 // check --require EXPR (validated)
    std::string check_target;                           // check IMAGE|ROOTFS; argv: its CMD

    // rootfs create
    std::string create_dir;
    std::string busybox = "/bin/busybox";
};

}  // namespace gpubox::launcher
