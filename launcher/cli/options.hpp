#pragma once
// Plain data: what the command line asked for. Defaults live here; logic lives elsewhere.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_spec.hpp"
#include "image/pull.hpp"
#include "isolate/cgroup_plan.hpp"
#include "isolate/limits.hpp"
#include "preflight/mode.hpp"
#include "rootfs/mount_op.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::launcher {

// --meta-format: the one table of names is in cli_values.cpp.
enum class MetaFormat { json, isolate };

enum class Command {
    help,
    version,
    man,
    run,
    list,
    doctor,
    rootfs_create,
    pull,
    images,
    rmi,
    prune,
    check,
    cdi_generate,
    cdi_list,
    ps,
    exec,
    export_image
};

struct Options {
    Command command = Command::help;
    int verbosity = 0;       // -v info, -vv debug
    bool quiet = false;      // --quiet: no warnings, no limit-kill line
    std::string help_topic;  // help: "" for gpubox --help, else the command (run, list, ...)

    // run
    std::string rootfs;
    std::vector<std::string> image_layers;  // run IMAGE: a layered image's trees, bottom first
    std::vector<std::string> argv;
    bool share_net = false;
    bool root = false;
    bool print_plan = false;
    rootfs::RootMode root_mode = rootfs::RootMode::overlay;
    // --overlay DIR: the root's writes kept in DIR (launcher/monitor/kept_overlay.hpp)
    std::string overlay;
    bool force_overlay = false;  // --force-overlay: DIR made over another image or ROOTFS
    std::string origin;    // what DIR records it was made over: "image sha256:<hex>" (run IMAGE),
                           // `squashfs file "PATH"` (run FILE.sqsh); "": `ROOTFS "PATH"`
    std::string squashfs;  // a squashfs image's file, which squashfuse serves over ROOTFS
    std::vector<rootfs::UserMount> mounts;
    std::string workdir = "/";
    bool workdir_given = false;  // an image's WorkingDir is the default only
    std::string hostname = "gpubox";
    std::vector<std::pair<std::string, std::string>> env;  // --env-file and --env, in order
    bool bare_env = false;  // exactly `env`, without gpubox's PATH, HOME, LANG, TERM (isolate mode)
    // /sys and /run: isolate's box has neither, so isolate mode mounts them only where a --dir
    // rule asks for them.
    bool sysfs = true, run_tmpfs = true;
    bool seccomp = true;
    std::string seccomp_bpf;  // a raw BPF profile replacing the default
    std::uint64_t tmpfs_size = 0;
    // Multi-rank jobs (launcher/monitor/step.hpp): --step 1, --no-step 0, -1 decided by the environment
    int step = -1;
    int preserve_fds = 0;        // --preserve-fds N: fds 3..N+2 stay open into the workload
    std::uint64_t shm_size = 0;  // --shm-size: /dev/shm a tmpfs of its own of this size
    std::vector<int> keep_fds;   // and these (PMI_FD, in step mode)

    // Limits and the verdict
    isolate::Limits limits;
    std::string meta;                           // --meta FILE
    MetaFormat meta_format = MetaFormat::json;  // --meta-format
    isolate::CgroupRequest cgroup;              // --cgroup auto (default), off, systemd or PATH
    bool require_cgroup = false;  // --require-cgroup: exact limits (a cgroup v2 with memory) or 125

    // GPUs (run, list, doctor)
    gpu::GpuSpec gpu;             // --gpu, parsed once here; none by default
    bool gpu_given = false;       // a second --gpu merges with the first
    unsigned gpu_caps = 3;        // compute,utility (gpu::kCapDefault)
    bool gpu_caps_given = false;  // an image's NVIDIA_DRIVER_CAPABILITIES is the default only
    std::string driver_root = "/";
    bool json = false;
    bool gpu_share = false;            // --gpu-share: --gpu auto leases GPUs shared (LOCK_SH)
    double gpu_wait = 0;               // --gpu-wait SEC: how long --gpu auto waits for free GPUs
    std::vector<std::string> devices;  // --device (and --gpu VENDOR/CLASS=NAME), in order
    std::vector<std::string> cdi_spec_dirs;  // --cdi-spec-dir: replaces the default directories
    bool rdma = false;  // --rdma: the host's /dev/infiniband verbs nodes and their sysfs entries
    bool rdma_if_any = false;  // step mode: the same where the host has any (no error without)
    std::string cdi_format = "yaml";  // cdi generate --format
    std::string cdi_output;           // cdi generate --output ("": the user's spec dir)
    std::string cdi_kind;             // cdi generate --kind ("": every kind the host has)

    // Scheduler signals
    double kill_after = 5;         // --kill-after SEC: grace after SIGTERM/INT/HUP, then kill
    bool die_with_parent = false;  // --die-with-parent

    // pull, images, rmi, prune (image/)
    struct Pull {
        std::string source, name, cert_dir, creds, authfile, platform;
        bool insecure = false, flat = false, squashfs = false;
        std::uint64_t max_size = image::kDefaultMaxSize;  // --max-size
    } pull;
    std::vector<std::string> image_names;  // rmi
    // export IMAGE [--overlay DIR] NAME|FILE.sqsh (launcher/commands/image.cpp)
    struct Export {
        std::string image, overlay, target;
    } exp;
    // Preflight (run, check): what the image needs against what the node has
    preflight::Mode preflight = preflight::Mode::warn;  // run --preflight
    std::vector<std::string> requirements;              // check --require EXPR (validated)
    std::string check_target;                           // check IMAGE|ROOTFS; argv: its CMD

    // Named sandboxes (launcher/monitor/named.hpp): run --name NAME, exec NAME
    std::string name;
    std::string named_image;  // ps's IMAGE: what run was given (an image's name, or ROOTFS)

    // rootfs create
    std::string create_dir;
    std::string busybox = "/bin/busybox";
};

}  // namespace gpubox::launcher
