#pragma once
// What the monitor hands the sandbox: the spec and the run's fds. Plain data.
#include <sched.h>

#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "isolate/id_map.hpp"
#include "isolate/limits.hpp"
#include "isolate/seccomp.hpp"
#include "launcher/sandbox/pty_open.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::launcher {

// Everything the sandbox needs, decided and validated by the monitor before clone(). The child
// parses nothing and looks nothing up by name: it can only fail where the kernel refuses.
struct ChildSpec {
    rootfs::MountPlan plan;
    isolate::IdMaps ids;
    bool seccomp = true;
    isolate::BpfProgram bpf;  // with seccomp: the default filter (built in) or --seccomp-bpf;
                              // in the child's copy of memory, installed last before exec
    std::string hostname;
    bool new_net = true;
    std::vector<std::string> argv;
    std::vector<std::string> env;              // "K=V"
    std::vector<std::string> exec_candidates;  // argv[0] with a slash, else PATH entries + argv[0]
    std::string workdir;
    std::vector<isolate::RlimitOp> rlimits;
    bool sched_idle =
        false;  // the workload runs under SCHED_IDLE (isolate::LimitPlan::idle_policy)
    isolate::IpcLimits ipc;
    bool meters = false;      // init sends its /proc and tmpfs (channel::Meter) for the monitor
    bool tree_clock = false;  // with them, the workload's CPU counter it opens on itself
    // net.unix.max_dgram_qlen init sets, and then the sock_diag meter it sends (0: neither; set
    // under a memory limit the monitor counts: isolate/sock_usage.hpp)
    std::uint32_t dgram_qlen = 0;
    isolate::BpfProgram limits_bpf;  // with limits: calls they refuse (isolate::LimitPlan)
    // The GPU's ops are planned by the monitor while init sets up: init sends its layer's late
    // directory and receives the whole plan (channel::DevicePlan) before it mounts the root.
    bool late_plan = false;
    cpu_set_t cpus{};     // with late_plan: the user's CPUs, restored once the plan arrives
    pty::PtySpec pty;     // with the caller at a terminal: the workload makes a pty of its own
    int image_hold = -1;  // the monitor's hold on a pulled image: init closes its copy
    std::vector<std::string> image_layers;  // a layered image's trees, stacked over ROOTFS
    bool fuse_root = false;  // a squashfs image, which the monitor mounted over ROOTFS
    bool send_view = false;  // init sends ROOTFS's read-only view (channel::RootView) first
    // Step mode (launcher/monitor/step.hpp): a step's init sets up the root, then runs no
    // workload but keeps the workloads' user namespace (its holder) and reaps; each task joins
    // it (join_main): enters init's namespaces (join_ns), and its workload the holder's.
    enum class Role { own, step_init, joined } role = Role::own;
    int join_ns = 0;
    // Named sandboxes (launcher/monitor/named.hpp): a named run's init turns dumpable once set
    // up, so that its owner's `gpubox exec` may enter it by pidfd (as a step's init does); an
    // exec's task (Role::joined) gives its workload the user namespace of the sandbox's
    // workload, pid 2 there, instead of a step's holder's.
    bool joinable = false;
    bool into_named = false;
    std::vector<int> keep_fds;  // open across exec, ascending: PMI_FD, --preserve-fds
};

// One side's ends of the run's channels. Every fd is owned once: after clone() each process
// closes the other side's copies (EOF on the control channel then means the other is gone).
struct Ends {
    UniqueFd control;  // typed frames: launcher/sandbox/channel.hpp
    UniqueFd stdin_relay, stdout_relay,
        stderr_relay;  // launcher/monitor/stdio.hpp; none: not relayed
    UniqueFd pty;      // the pty's master: launcher/monitor/pty.hpp
};
struct RunFds {
    Ends monitor, sandbox;
    UniqueFd rootfs;         // O_PATH of ROOTFS: init checks its own against it; the monitor
                             // makes the GPU's entries below it
    UniqueFd monitor_pidfd;  // the monitor, for init's die-with-parent
    UniqueFd kept_upper, kept_work;   // --overlay DIR: what init checks its own layers against
    UniqueFd join_init, join_holder;  // Role::joined: the pidfds of the sandbox's init and holder
};

}  // namespace gpubox::launcher
