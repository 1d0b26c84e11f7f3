#pragma once
// Step mode's plan (launcher/monitor/step.hpp is its rendezvous): whether a run joins its step's
// sandbox, and the options a step's task runs with.
#include <optional>
#include <string>

#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

// Step mode's options: the host's network and name, the wire-up's variables (--env wins),
// PMIx's server directory bound read-write, PMI_FD kept open, and the submit directory (the
// caller's working directory) bound at its own path and made the working directory.
Options step_options(const Options& given);

// --gpu slurm under per-task binding (gpu/slurm.hpp), in step mode: the step's shared sandbox
// holds the node's GPUs (gres.conf's), so that a peer's GPU stays openable where the device
// cgroup allows it (CUDA IPC, NCCL peer-to-peer), and this task's own GPUs are its CUDA devices
// 0..n: CUDA_VISIBLE_DEVICES names them by UUID (--env wins). Else `o` is unchanged.
void bind_task_gpus(Options& o);

// What a task asks of its step's sandbox, for step::join to compare with the sandbox's maker's:
// ROOTFS, the root's mode, --overlay, the binds and tmpfs mounts, the GPUs, --device, --rdma,
// --shm-size and the seccomp filter, one "WHAT\tVALUE" line each.
std::string step_asks(const Options& o);

// Whether this run joins its step's sandbox: --step, --no-step, else the environment; the key
// that names the step's sandbox on this node, or nullopt.
std::optional<std::string> decide_step(const Options& o);

}  // namespace gpubox::launcher
