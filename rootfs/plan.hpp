#pragma once
#include <string>
#include <vector>

#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

struct UserMount {  // --bind / --ro-bind / --tmpfs, in command-line order
    enum class Type { bind, ro_bind, tmpfs } type;
    std::string source;  // host path (bind) ; unused for tmpfs
    std::string target;  // container path, already normalized
};

struct PlanInputs {
    RootSpec root;
    bool new_pid_ns = true;
    bool new_net_ns = true;
    bool sysfs = true, run_tmpfs = true;  // /sys and /run (isolate's box has neither)
    std::uint64_t shm_size = 0;           // > 0: /dev/shm a tmpfs of its own of this size
    std::vector<MountOp> device_ops;      // from the GPU planner, applied after the base set
    std::vector<UserMount> user_mounts;   // applied last, so users can override
};

// Pure: the ordered, validated plan. Throws PlanError for impossible requests.
MountPlan build_mount_plan(const PlanInputs& in);

// Pure: device ops placed as build_mount_plan places them, after `plan`'s ops before user_from
// (the base set), each in the filesystem its target lies in. For ops planned after the rest of
// the plan (the GPU's, while the sandbox sets up): inserted at user_from, they give the plan
// build_mount_plan would have built with them.
std::vector<MountOp> place_device_ops(const MountPlan& plan, std::vector<MountOp> ops);
// Pure: `plan` grown by such placed ops, inserted at user_from.
MountPlan with_device_ops(MountPlan plan, std::vector<MountOp> placed);

// The target of an op (every op has one), and the op's one-line rendering for logs and
// --print-plan; "mount step i/n (op)", as errors and logs name op i.
const std::string& target_of(const MountOp& op);
std::string to_string(const MountOp& op);
std::string step_name(const MountPlan& plan, std::size_t i);
std::string to_string(const RootSpec& root);
std::string tmpfs_text(const RootSpec& root);  // "gpubox's tmpfs: size=… (one budget: …)"

}  // namespace gpubox::rootfs
