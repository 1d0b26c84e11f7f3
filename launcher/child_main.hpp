#pragma once
#include <sched.h>

#include <string>
#include <vector>

#include "isolate/id_map.hpp"
#include "isolate/limits.hpp"
#include "isolate/seccomp.hpp"
#include "launcher/pty.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::launcher {

// Everything the sandbox needs, decided and validated by the monitor before clone(). The child
// parses nothing and looks nothing up by name: it can only fail where the kernel refuses.
struct ChildSpec {
    rootfs::MountPlan plan;
    isolate::IdMaps ids;
    bool seccomp = true;     // the filter arrives on seccomp_fd, compiled while we set up
    std::string hostname;
    bool new_net = true;
    std::vector<std::string> argv;
    std::vector<std::string> env;             // "K=V"
    std::vector<std::string> exec_candidates;  // argv[0] with a slash, else PATH entries + argv[0]
    std::string workdir;
    std::vector<isolate::RlimitOp> rlimits;
    isolate::IpcLimits ipc;
    int sample_ms = 0;       // > 0: init reports the sandbox's CPU and memory use this often
    std::uint64_t sampled_memory_limit = 0;  // the memory limit init's samples enforce, if they do
    int stdin_fd = -1;       // read end of the monitor's stdin relay (see launcher/stdio.hpp)
    int stdout_fd = -1;      // write ends of the monitor's output relays (may be one pipe)
    int stderr_fd = -1;
    int rootfs_fd = -1;      // O_PATH of ROOTFS, opened by the monitor
    int parent_pidfd = -1;   // the monitor, for die-with-parent
    int go_fd = -1;          // read end: the monitor wrote the id maps
    int report_fd = -1;      // write end: framed messages to the monitor
    int seccomp_fd = -1;     // read end: the BPF program, length-prefixed
    int device_fd = -1;      // socket: our layer's late directory goes out, the GPU's mount ops come back (or -1)
    cpu_set_t cpus{};        // with device_fd: the user's CPUs, restored once the ops arrive
    std::vector<int> monitor_fds;  // the monitor's pipe ends: closed first, so EOF means death
    pty::PtySpec pty;        // with the caller at a terminal: the workload makes a pty of its own
};

// The sandbox's init (pid 1): set up, fork the workload, reap, forward signals, report.
[[noreturn]] void sandbox_init(const ChildSpec& spec) noexcept;

// Signals the monitor forwards to the sandbox, and init to the workload.
const std::vector<int>& forwarded_signals();

}  // namespace gpubox::launcher
