#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "rootfs/entry.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

struct NewRoot {
    UniqueFd mnt;                // the new root's mount
    bool writable_layer;         // the root is gpubox's overlay (mount points may be made in it)
    std::vector<bool> prepared;  // by op index: entries already made in the overlay's layers
    // By op index: a read-only tmpfs whose contents were made in a layer at its own path (see
    // prepare_late_entries), cloned from the overlay before anything covered that path; it is
    // attached at its step in place of the tmpfs.
    std::map<std::size_t, UniqueFd> trees;
    // gpubox's one tmpfs (see RootSpec::tmpfs_size): the writable tmpfs ops' directories, and
    // a bound root's overlay layers, are made in it. Attached already where the overlay root
    // needed it so (see attach_gpubox_tmpfs).
    UniqueFd tmpfs;
    bool tmpfs_attached = false;
};

// Kernels before about 6.5 (Debian 12's 6.1, RHEL 9's 5.14, Ubuntu 22.04's 5.15) take no
// overlay layer from a detached mount ("failed to clone upperpath") and clone no directory of
// one. So gpubox's tmpfs is attached before any overlay is made, over a directory of `root`
// that nothing will reach: the image's /proc (else /dev, /sys, /tmp, /run), which the plan
// covers with a mount of its own, or which the overlay root covers with all of ROOTFS. False
// where `root` has none of them: it stays detached, which newer kernels accept.
bool attach_gpubox_tmpfs(int tmpfs, int root);

// Child side, first thing after the id maps: gpubox's one tmpfs, detached, which becomes
// NewRoot::tmpfs; when the root will be an overlay, it also holds the overlay's upper directory
// (read-only root: its top lower one)
// and, with `late_ops`, a `late` directory for the entries of the ops planned while the sandbox
// sets up (the GPU's): the monitor fills it through an fd (prepare_late_entries) while the
// child goes on, and it becomes the layer just below. All but `tmpfs` empty where the root is bound
// instead: --writable, or a ROOTFS with mounts below it (the host's "/", say), which cannot be
// an overlay's lower layer in a user namespace.
struct RootLayer {
    UniqueFd tmpfs, upper, work, late;
    // --overlay DIR: DIR/upper and DIR/work, opened in the sandbox's mount namespace (overlayfs
    // takes no layer from another one). The overlay's upper layer then; `upper` (gpubox's
    // entries) becomes its top lower layer, so that DIR keeps only the workload's writes.
    UniqueFd kept_upper, kept_work;
};

RootLayer open_root_layer(const MountPlan& plan, bool late_ops, bool bound);

// A bound ROOTFS (see rootfs/view.hpp's has_submounts) gets gpubox's entries in overlays of
// just the directories of `root` that lack one, their layers in gpubox's tmpfs (attached); the
// overlays' mounts.
std::vector<UniqueFd> overlay_missing_dirs(const MountPlan& plan, int root, int tmpfs);

// Monitor side, for a read-only root: would gpubox's layer hold nothing (ROOTFS, an O_PATH fd,
// has every mount point the plan needs)? Then a read-only bind of ROOTFS shows what the overlay
// would, without the overlay's superblock and teardown (0.1-0.5 ms a run). Throws where init's
// pre-pass would (a required bind's source missing, a broken link on the way).
bool layer_is_empty(const MountPlan& plan, int rootfs);

// The late ops as the child receives them (launcher/sandbox/channel.hpp's DevicePlan): the plan grown
// by them (inserted at plan.user_from), and prepared[i] for late op i: its entry is made in
// RootLayer::late already.
struct LatePlan {
    MountPlan full;
    std::vector<bool> prepared;
};

// Child side, step one: the layer with the plan's own entries (image-place entries of an
// overlay root); nothing is mounted over ROOTFS yet, so the late ops may still join.
struct RootDraft {
    RootLayer layer;
    std::vector<bool> prepared;  // by op index of `plan`: entries made in the layer
    bool tmpfs_attached = false;
};
RootDraft draft_root(const MountPlan& plan, int rootfs, RootLayer layer);

// Child side, step two: assemble the new root over `rootfs` (an O_PATH fd of ROOTFS) from the
// draft, as the plan's root mode says. With `late`, its plan is the one to apply.
NewRoot assemble_root(const MountPlan& plan, int rootfs, RootDraft draft, const LatePlan* late);

// Monitor side: the entries of ops full.ops[at, at + n) made in `dir` (a RootLayer's late
// directory, passed over from the child) as the child would make them in its layer, ROOTFS
// (`rootfs`) resolved the same way. Which of the n are done, in NewRoot::prepared's sense; for
// a read-only tmpfs in /proc, that its contents are made there (see NewRoot::trees).
std::vector<bool> prepare_late_entries(const MountPlan& full, std::size_t at, std::size_t n,
                                       int rootfs, int dir);

// Apply every op under the new root, in plan order; failures are wrapped as "mount step i/n (op)".
void apply_mount_plan(const MountPlan& plan, const NewRoot& root);

// pivot_root into `root` and detach the old root.
void enter_root(int root);

}  // namespace gpubox::rootfs
