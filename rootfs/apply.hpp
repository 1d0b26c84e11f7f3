#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

struct NewRoot {
    UniqueFd mnt;         // the new root's mount
    bool writable_layer;  // the root is gpubox's overlay (mount points may be made in it)
    std::vector<bool> prepared;  // by op index: entries already made in the overlay's layer
};

// Child side. Assemble the new root over `rootfs` (an O_PATH fd of ROOTFS) as the plan's root
// mode says, realising image-place entries in gpubox's layer first. A ROOTFS with mounts below
// it (the host's "/", say) cannot be an overlay's lower layer in a user namespace; it is then
// bound read-only and recursively instead, and writes go only to gpubox's tmpfs mounts.
//
// `late`, when set, supplies ops planned while the sandbox sets up (the GPU's): it is called once
// the plan's own entries are in the layer, before the overlay is mounted, and returns the plan
// grown by those ops, inserted at plan.user_from. Their entries go into the layer as well, and
// the returned plan is the one to apply.
using LateOps = std::function<const MountPlan&()>;
NewRoot assemble_root(const MountPlan& plan, int rootfs, const LateOps& late = {});

// Apply every op under the new root, in plan order; failures are wrapped as "mount step i/n (op)".
void apply_mount_plan(const MountPlan& plan, const NewRoot& root);

// Whether a bind's mount point must be a directory: the plan's SourceKind where it says, else a
// stat() of the source. Returns 0, or stat's errno (the source is missing or unreadable).
int bind_source_is_dir(const Bind& b, bool& dir);

// Directories made below the root of a filesystem gpubox owns and nothing else can reach (its
// layer, a tmpfs not yet attached), held open by their path below it: a run of entries in one
// directory makes and opens it once, and no lookup there can meet a link gpubox did not make.
class OwnDirs {
public:
    explicit OwnDirs(int top) : top_(top) {}
    // The directory parts[0..n) below the top, each made where missing with modes[i] (0, or no
    // modes: 0755). An fd valid while this lives, or -errno.
    int open(const std::vector<std::string>& parts, std::size_t n, const std::vector<mode_t>& modes = {});

private:
    int top_;
    std::map<std::string, UniqueFd> dirs_;
};

// pivot_root into `root` and detach the old root.
void enter_root(int root);

}  // namespace gpubox::rootfs
