#pragma once
// --gpu slurm: the GPUs Slurm gave the current step, as Slurm numbers them.
//
// Slurm 22.05's gres/gpu plugin (src/plugins/gres/common/gres_common.c, common_gres_set_env()
// called by gres_common_gpu_set_env() with use_dev_num=false) writes into SLURM_STEP_GPUS
// (srun) or SLURM_JOB_GPUS (the batch step) each allocated GPU's *index in slurmd's GPU list*,
// not the N of /dev/nvidiaN. That list is gres.conf's File= names in order, each hostlist
// expanded (common_node_config_load()); with AutoDetect=nvml it is what NVML found, sorted by
// its links matrix, which is NVML's order, i.e. PCI bus order (gres_gpu.c,
// _merge_system_gres_conf(): _sort_gpu_by_file, then _sort_gpu_by_links_order). So the index
// is a device minor only where gres.conf lists /dev/nvidia0, 1, 2... in that order
// (File=/dev/nvidia[0-3]), and nvidia-smi's index under AutoDetect=nvml.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_spec.hpp"

namespace gpubox::gpu {

// What slurmd's GPU list is, as far as gres.conf says it for one node.
struct GresGpus {
    bool read = false;  // a gres.conf was read
    bool nvml = false;  // AutoDetect=nvml: the list is in PCI bus order
    // File= names of Name=gpu records for this node, in order; a MultipleFiles= record (a MIG
    // device: the GPU's node and its capability nodes) is one entry, its names comma-separated.
    std::vector<std::string> files;
};

// Pure: "node[01-03,7]" -> node01 node02 node03 node7; top-level commas separate names. One
// bracket group per name. Throws UsageError on a malformed range.
std::vector<std::string> expand_hostlist(const std::string& text);
// Pure: gres.conf's Name=gpu records that apply to `node` (no NodeName=, or one naming it).
GresGpus parse_gres_conf(const std::string& text, const std::string& node);

struct SlurmEnv {
    std::optional<std::string> job_id, step_gpus, job_gpus;
};
// Pure: the GPUs of the step, as a resolved spec (minors, or indices under AutoDetect=nvml).
// Throws PlanError, one line, outside an allocation or with no GPU allocated.
GpuSpec from_slurm(const SlurmEnv& env, const GresGpus& gres);

// Pure. Per-task GPU binding (--gpus-per-task, --gpu-bind: SLURMD_TRES_BIND=gpu:...) under
// ConstrainDevices=yes: Slurm 22.05 writes every task's SLURM_STEP_GPUS as the step's first
// GPU(s), and fences each task to its own in a device cgroup of its own (seen on a real slurmd:
// tests/e2e/test_slurm_mpi.sh). Where the device cgroup refuses a GPU of `value` (`allowed` says,
// per gres.conf file) and lets the task open as many others of gres.conf's list, those are the
// task's: their indices, comma-separated. Else `value` as it is.
std::string bound_to_task(const std::string& value, const GresGpus& gres,
                          const std::function<bool(const std::string&)>& allowed);
// All of gres.conf's GPUs on this node (slurmd's list), as a resolved spec: the nodes a step's
// shared sandbox holds under per-task binding (each task's own are its CUDA_VISIBLE_DEVICES).
// Throws PlanError where gres.conf names none.
GpuSpec node_gpus(const GresGpus& gres);

// Reads: SLURM_JOB_ID, SLURM_STEP_GPUS, SLURM_JOB_GPUS, SLURMD_NODENAME, SLURM_CONF (gres.conf
// is beside slurm.conf, default /etc/slurm), then from_slurm. NVIDIA_VISIBLE_DEVICES for env.
// `spec` of another kind comes back as it is.
GpuSpec resolve_gpu_spec(const GpuSpec& spec);
// This node's gres.conf, as resolve_gpu_spec reads it (an unreadable one: not read).
GresGpus read_gres_conf();
// Whether Slurm bound GPUs per task (SLURMD_TRES_BIND=gpu:...).
bool per_task_binding();

}  // namespace gpubox::gpu
