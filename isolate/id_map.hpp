#pragma once
#include <sys/types.h>

#include <string>

namespace gpubox::isolate {

// Two user namespaces. The outer one maps the caller to 0, which the sandbox's init needs to
// mount proc, sysfs and a new devpts instance. Unless --root is given, the workload then enters
// a nested user namespace that maps the caller's own ids back, so it sees its real uid/gid and
// holds no capability over the outer namespace's mounts (the pattern bwrap uses).
struct IdMaps {
    std::string outer_uid_map, outer_gid_map;  // written by the monitor into /proc/<init>/
    bool nested = true;
    std::string inner_uid_map, inner_gid_map;  // written by the workload into /proc/self/
};

IdMaps plan_id_maps(uid_t uid, gid_t gid, bool root_inside);

// Child side: write the inner maps after unshare(CLONE_NEWUSER) (setgroups "deny" first).
void enter_nested_userns(const IdMaps& maps);

// Monitor side: write the outer maps for `pid`.
void write_outer_id_maps(pid_t pid, const IdMaps& maps);

}  // namespace gpubox::isolate
