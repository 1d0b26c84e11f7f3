#pragma once
// What the component cases share: a temp tree (a ROOTFS, a bind source, a victim directory
// beside them), a snapshot of it, and the executor run in a forked child's own user and mount
// namespace, with its outcome (its error text, or "ok") and every mount it added.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rootfs/mount_op.hpp"

namespace gpubox::component {

class Tree {
public:
    Tree();
    ~Tree();  // removes all of it (read-only directories included)
    Tree(const Tree&) = delete;
    Tree& operator=(const Tree&) = delete;
    std::string path(const std::string& rel) const { return top_ + "/" + rel; }
    const std::string& top() const { return top_; }

private:
    std::string top_;
};

// Every entry below `dir`, never following a link: type, mode, size or link text, contents.
std::map<std::string, std::string> snapshot(const std::string& dir);

struct Outcome {
    std::string error;                    // describe() of what the executor threw; "" if none
    std::vector<std::string> new_mounts;  // mount points it added, as the child's mountinfo says
    std::set<std::string> root_entries;   // what the new root's directory lists (no . or ..)
};

// In a forked child: unshare(CLONE_NEWUSER | CLONE_NEWNS), map its uid to 0, make the mounts
// private, then assemble the root and apply `plan`, as the sandbox's init does. With
// `no_openat2`, a seccomp filter first makes openat2 fail with ENOSYS (as an outer sandbox's
// might), so the resolver's own walk does every lookup.
Outcome apply_in_userns(const rootfs::MountPlan& plan, bool no_openat2);

// A plan of `ops` over ROOTFS `rootfs` (an overlay root, as gpubox's default).
rootfs::MountPlan plan_over(const std::string& rootfs, std::vector<rootfs::MountOp> ops,
                            rootfs::RootMode mode = rootfs::RootMode::overlay);

}  // namespace gpubox::component
