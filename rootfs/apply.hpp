#pragma once
#include "common/unique_fd.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

// Child side. Assemble the new root over `rootfs` (an O_PATH fd of ROOTFS) as the plan's root
// mode says, realising image-place entries in gpubox's layer first; returns the new root's mount.
UniqueFd assemble_root(const MountPlan& plan, int rootfs);

// Apply every op under `root`, in plan order; failures are wrapped as "mount step i/n (op)".
void apply_mount_plan(const MountPlan& plan, int root);

// pivot_root into `root` and detach the old root.
void enter_root(int root);

}  // namespace gpubox::rootfs
