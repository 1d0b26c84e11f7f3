#include "isolate/id_map.hpp"

#include <sched.h>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::isolate {

IdMaps plan_id_maps(uid_t uid, gid_t gid, bool root_inside) {
    IdMaps m;
    m.outer_uid_map = cat("0 ", uid, " 1\n");
    m.outer_gid_map = cat("0 ", gid, " 1\n");
    m.nested = !root_inside;
    if (m.nested) {
        m.inner_uid_map = cat(uid, " 0 1\n");
        m.inner_gid_map = cat(gid, " 0 1\n");
    }
    return m;
}

void write_outer_id_maps(pid_t pid, const IdMaps& maps) {
    const std::string dir = cat("/proc/", pid, "/");
    // setgroups must be denied before an unprivileged gid_map write is accepted.
    sys::write_file(dir + "setgroups", "deny");
    sys::write_file(dir + "uid_map", maps.outer_uid_map);
    sys::write_file(dir + "gid_map", maps.outer_gid_map);
}

void enter_nested_userns(const IdMaps& maps) {
    if (!maps.nested) return;
    try {
        sys::unshare(CLONE_NEWUSER);
        sys::write_file("/proc/self/setgroups", "deny");
        sys::write_file("/proc/self/uid_map", maps.inner_uid_map);
        sys::write_file("/proc/self/gid_map", maps.inner_gid_map);
    } catch (...) {
        std::throw_with_nested(SetupError("nested user namespace"));
    }
}

}  // namespace gpubox::isolate
