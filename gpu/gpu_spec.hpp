#pragma once
#include <optional>
#include <string>
#include <vector>

#include "gpu/inventory.hpp"

namespace gpubox::gpu {

// --gpu: "none" (default), "all", or a comma list of NVIDIA indices, "GPU-<uuid>" and PCI
// addresses (any vendor), as nvidia-container-cli --device takes them. Or where the GPUs are
// named elsewhere: "slurm" (the Slurm step's, see gpu/slurm.hpp), "env" (NVIDIA_VISIBLE_DEVICES),
// "auto[:N]" (N GPUs leased from those no other gpubox holds, see gpu/lease.hpp). Those three
// are resolved into one of the others (minors: NVIDIA device minors, /dev/nvidia<N>) before
// selection.
struct GpuSpec {
    enum class Kind { none, all, list, minors, slurm, env, lease } kind = Kind::none;
    std::vector<std::string> items;  // list
    std::vector<int> minors;         // minors
    int count = 1;                   // lease: how many
    std::string source;  // where a resolved spec came from, for messages ("SLURM_STEP_GPUS=1,3")
    // minors: for each, the MIG capability minors Slurm's gres.conf MultipleFiles= gave with it
    // (/dev/nvidia-caps/nvidia-cap<N>), which name one MIG device of that GPU; empty (or
    // shorter than minors): whole GPUs.
    std::vector<std::vector<int>> caps;
    // Step mode under per-task binding: the node's GPUs, of which a device cgroup may refuse
    // those not the task's own (the kernel's check then; the task's own were checked).
    bool peers = false;
};

// Pure. Throws UsageError for a malformed item.
GpuSpec parse_gpu_spec(const std::string& text);
// Pure: the spec as --gpu takes it ("none", "0,GPU-abc", "auto:2"); parse_gpu_spec's inverse.
std::string to_string(const GpuSpec& spec);
// Pure: NVIDIA_VISIBLE_DEVICES as the NVIDIA container toolkit reads it: "all", "none" and
// "void" (no GPU; gpubox gives no driver files either way), or a comma list of indices and
// UUIDs. Unset is a PlanError: --gpu env asked for what it names.
GpuSpec from_visible_devices(const std::optional<std::string>& value);

// Pure: the GPUs of `inv` the spec names, in inventory order, without duplicates. Throws
// PlanError listing the host's GPUs, on one line, when an item matches none.
std::vector<Gpu> select_gpus(const GpuInventory& inv, const GpuSpec& spec);

// Pure: the discovery scope that can satisfy the spec (indices and UUIDs name NVIDIA GPUs only).
Scope scope_for(const GpuSpec& spec);
// Pure: whether the spec names a MIG device by NVML's own UUID (MIG-<uuid>), which only NVML
// can resolve (launcher/monitor/nvml.hpp adds its facts to the inventory first).
bool names_mig_uuid(const GpuSpec& spec);
// Pure: the NVIDIA indices the spec names, when it names GPUs by index only (else empty): all
// that discovery need inspect (discover_gpus's `only`).
std::vector<int> indices_only(const GpuSpec& spec);

// `gpubox list`'s table: a header, then one row per GPU ("0  0000:3b:00.0  nvidia  Tesla T4
// GPU-...  /dev/nvidia2"), columns aligned, "-" for what a GPU lacks, a problem after its nodes;
// under a GPU, a row per MIG device ("1:1:0 ... MIG 1g.10gb 9984MiB GI 1 CI 0  MIG-<uuid> ...",
// its profile, memory and MIG-<uuid> where NVML gave them, else the toolkit's name), and a
// last line saying why NVML's facts are unknown, where they are.
std::string describe_gpus(const GpuInventory& inv);
// Pure: the device cgroup named in /proc/self/cgroup's text: cgroup v1's devices line
// ("5:devices:/slurm/uid_0/job_7/step_0"), else the v2 line ("0::/user.slice/...").
std::string device_cgroup_of(const std::string& proc_self_cgroup);
// "GPU 0 (0000:3b:00.0)": how messages about one NVIDIA GPU name it.
std::string gpu_label(const Gpu& g);
// "GPU 0 (0000:3b:00.0): <its problem>", for the planner's error and `gpubox doctor`.
std::string describe_problem(const Gpu& g);

}  // namespace gpubox::gpu
