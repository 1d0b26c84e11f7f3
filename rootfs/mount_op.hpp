#pragma once
// The mount plan as data. Targets are container paths (absolute, normalized, validated by the
// planner) resolved under the new root at apply time; sources are host paths.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gpubox::rootfs {

enum class Need { required, optional };  // optional swallows ENOENT on the *source* only

// Where a target lives, which decides how a missing mount point is made:
//  image:   in ROOTFS; a missing (or symlinked) mount point is made in gpubox's layer before the
//           overlay is assembled, never in ROOTFS.
//  gpubox:  inside a tmpfs gpubox mounted earlier in the plan; made on the fly.
//  kernel:  inside proc/sysfs; must already exist.
enum class Place { image, gpubox, kernel };

// What a bind's source is, where the planner already knows (discovery opened it). It only
// decides what kind of mount point to make, sparing the sandbox a stat() per bind: move_mount()
// itself refuses a directory over a non-directory and the reverse (EINVAL), so a source that
// changed kind since fails the run; it is never mounted.
enum class SourceKind { unknown, dir, file };

struct Bind {
    std::string source, target;
    bool read_only = true;
    Need need = Need::required;
    Place place = Place::image;
    SourceKind kind = SourceKind::unknown;
};
struct BindDev {  // the only op without MS_NODEV; source must be a char device
    std::string source, target;
    Need need = Need::required;
    std::optional<dev_t> rdev;  // expected device number, checked before and after mounting
    Place place = Place::gpubox;
};
struct Proc {
    std::string target = "/proc";
};
struct Sysfs {
    std::string target = "/sys";
    bool fresh = true;
};  // !fresh: ro rbind of host /sys
// Writable: a directory of gpubox's one tmpfs (RootSpec::tmpfs_size caps all of them together),
// bound here. Read-only: a small tmpfs of its own, filled while detached, then sealed (/dev,
// /proc/driver): the workload cannot write to it at all.
struct Tmpfs {
    std::string target;
    mode_t mode = 0755;
    bool noexec = false;
    bool read_only = false;
    Place place = Place::image;
    std::uint64_t size = 0;  // > 0: a tmpfs of its own, of this size (--shm-size)
};
struct Devpts {
    std::string target = "/dev/pts";
};
struct Symlink {
    std::string link_text, path;
    Place place = Place::gpubox;
};
struct MaskPath {
    std::string target;
};  // /dev/null over a file, empty ro tmpfs over a dir
struct RemountRo {
    std::string target;
};                  // bind onto itself, read-only, recursively
struct WriteFile {  // a generated file inside a gpubox tmpfs
    std::string target, content;
    mode_t mode = 0444;
    Place place = Place::gpubox;
};
struct MakeDir {  // inside a gpubox tmpfs
    std::string target;
    mode_t mode = 0755;
    Place place = Place::gpubox;
};

using MountOp = std::variant<Bind, BindDev, Proc, Sysfs, Tmpfs, Devpts, Symlink, MaskPath,
                             RemountRo, WriteFile, MakeDir>;

// tmpfs: a directory of gpubox's tmpfs is the root, nothing of ROOTFS in it (isolate mode: a
// box's root, every directory of which a rule mounts, as isolate's own tmpfs root). An overlay
// over an empty ROOTFS would show the same, for 0.2-0.5 ms more a run (bench/README.md). No
// GPU's late entries (they are made in a layer of the overlay's): isolate mode takes no GPU.
enum class RootMode { overlay, read_only, writable, tmpfs };

struct RootSpec {
    std::string rootfs;  // host path, for messages; the child gets an fd
    RootMode mode = RootMode::overlay;
    // Size of gpubox's one tmpfs, the budget of everything the workload can write in memory:
    // the overlay's upper layer, /tmp, /run, /dev/shm, --tmpfs mounts, a bound root's overlays.
    std::uint64_t tmpfs_size = 0;
    // --overlay DIR (absolute; overlay mode only): the overlay's upper and work directories are
    // DIR/upper and DIR/work, kept across runs; gpubox's own entries stay in its tmpfs, as the
    // layer just below.
    std::string overlay_dir;
    std::uint64_t tmpfs_inodes = 0;  // its nr_inodes (0: the kernel's default): inodes are memory
};

// Ops that create a file rather than mount one: in the image they are written into gpubox's
// overlay layer before the overlay is assembled.
inline bool creates_entry(const MountOp& op) {
    return std::holds_alternative<Symlink>(op) || std::holds_alternative<WriteFile>(op) ||
           std::holds_alternative<MakeDir>(op);
}

// The op's Place; nullopt for the ops that have none (/proc, /sys, devpts, masks, remounts).
inline std::optional<Place> place_of(const MountOp& op) {
    return std::visit(
        [](const auto& o) -> std::optional<Place> {
            if constexpr (requires { o.place; }) return o.place;
            else return std::nullopt;
        },
        op);
}

struct MountPlan {
    RootSpec root;
    std::vector<MountOp> ops;
    std::size_t user_from = 0;  // the first user mount; device (GPU) ops end there
};

}  // namespace gpubox::rootfs
