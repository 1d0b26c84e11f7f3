#pragma once
// One owner for entries. What each op needs at its target before it is applied (a mount point,
// or the entry that is the whole op), decided in one place, entry_of(), and made through one
// interface, EntryTarget, whatever the target: gpubox's layer (the child's pre-pass, the
// monitor's late layer: layer.cpp), a filesystem still detached or a directory standing in for
// one (FreshFs, here), the live root during apply (apply.cpp).
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

enum class EntryKind { dir, file, symlink, content };

struct Entry {
    EntryKind kind = EntryKind::dir;
    mode_t mode = 0755;     // dir, content; a file mount point is always 0644
    std::string_view text;  // symlink: the link's text; content: the file's bytes
    bool is_op = false;     // Symlink, WriteFile, MakeDir: made, the op is done (no mount follows)
    // Binds: the host source, and where the entry's kind needed a look at it (a bind the planner
    // knows nothing of), stat's errno: 0, or the source is missing or unreadable.
    const std::string* source = nullptr;
    Need need = Need::required;
    int source_err = 0;
    bool device = false;  // BindDev: a char device's mount point, its source not looked at
};

// The entry `op` needs at its target; nullopt where it needs the target to exist (masks,
// remounts). Exhaustive over MountOp: a new op kind does not compile until it is handled here.
std::optional<Entry> entry_of(const MountOp& op);

// Where entries are made. put() makes `e` at container path `target` (as this target spells
// it), or returns false where this target does not take it (another place then makes it).
class EntryTarget {
public:
    virtual ~EntryTarget() = default;
    virtual bool put(const std::string& target, const Entry& e) = 0;
};

// Directories made below the root of a filesystem gpubox owns and nothing else can reach (its
// layer, a tmpfs not yet attached), held open by their path below it: a run of entries in one
// directory makes and opens it once, and no lookup there can meet a link gpubox did not make.
// Each is made writable by its owner (mode | 0700) and gets its exact mode from seal(): the
// monitor fills the late layer as the user, whom a 0555 directory (an image's /usr/lib64 or
// /usr/bin on RHEL, /proc/driver/nvidia) would shut out, where init, root in its namespace,
// is let by.
class OwnDirs {
public:
    explicit OwnDirs(int top) : top_(top) {}
    // The directory parts[0..n) below the top, each made where missing with modes[i] (0, or no
    // modes: 0755). An fd valid while this lives, or -errno.
    int open(const std::vector<std::string>& parts, std::size_t n,
             const std::vector<mode_t>& modes = {});
    // mkdir `name` in `dir` (the top or one of these), to have `mode` once sealed. 0, or
    // -errno for a failure other than EEXIST (an existing one is kept as it is).
    int make(int dir, const std::string& name, mode_t mode);
    // Every directory made here gets its exact mode: call once nothing more goes in.
    void seal();

private:
    struct Pending {
        int dir;
        std::string name;
        mode_t mode;
    };
    int top_;
    std::map<std::string, UniqueFd> dirs_;
    std::vector<Pending> pending_;
};

// Make `e` as `name` in `dir`, a directory of gpubox's own (see OwnDirs), by fd and following
// no link. An existing directory or file mount point is kept; an existing link or file is
// replaced where `replace`, else left (-EEXIST). 0 or -errno.
int write_entry(int dir, const std::string& name, const Entry& e, OwnDirs& dirs, bool replace);
// The syscall that write_entry's failure for `kind` names.
const char* entry_call(EntryKind kind);

// The later ops whose targets lie in the filesystem op i mounts, with no mount in between
// holding them.
std::vector<std::size_t> contents_of(const MountPlan& plan, std::size_t i);

// Fill `top`, the root of the fresh filesystem op i mounts (or a directory standing in for one),
// with the entries and mount points of the later ops that lie in it, by fd and following no
// link; done[j] is set for each entry made (a mount is still to do at its own step).
void fill_fresh_fs(const MountPlan& plan, std::size_t i, int top, std::vector<bool>& done);

// Whether a bind's mount point must be a directory: the plan's SourceKind where it says, else a
// stat() of the source. Returns 0, or stat's errno (the source is missing or unreadable).
int bind_source_is_dir(const Bind& b, bool& dir);

}  // namespace gpubox::rootfs
