#include <fcntl.h>

#include <sstream>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "isolate/namespaces.hpp"
#include "launcher/monitor/run.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/view.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::launcher {

std::string render_plan(const RunPlan& plan) {
    const ChildSpec& s = plan.spec;
    std::ostringstream out;
    out << "namespaces: " << isolate::to_string(isolate::NamespaceSet{plan.ns_flags}) << "\n";
    out << "uid_map (init): " << s.ids.outer_uid_map;
    out << "gid_map (init): " << s.ids.outer_gid_map;
    if (s.ids.nested) {
        out << "uid_map (workload, nested user namespace): " << s.ids.inner_uid_map;
        out << "gid_map (workload, nested user namespace): " << s.ids.inner_gid_map;
    } else {
        out << "workload: uid 0 / gid 0 (--root), no capabilities\n";
    }
    out << "setgroups: deny\n";
    out << "hostname: " << s.hostname << "\n";
    out << "network: " << (s.new_net ? "new namespace, lo up" : "host (--share-net)") << "\n";
    for (const std::string& g : plan.gpu_summary) out << "gpu: " << g << "\n";
    const UniqueFd image(sys::try_open_at(AT_FDCWD, s.plan.root.rootfs, O_PATH | O_DIRECTORY));
    switch (bound_root(plan, image.get())) {
        case BoundRoot::submounts:
            out << "root rbind " << s.plan.root.rootfs
                << " read-only (it has mounts below it, which a user namespace "
                << "cannot overlay; a directory that lacks an entry gpubox adds gets an overlay "
                   "of its own)\n";
            break;
        case BoundRoot::complete:
            out << "root rbind " << s.plan.root.rootfs
                << " read-only (it has every mount point gpubox needs: no overlay)\n";
            break;
        case BoundRoot::no: out << rootfs::to_string(s.plan.root) << "\n";
    }
    out << rootfs::tmpfs_text(s.plan.root) << "\n";
    for (std::size_t i = 0; i < s.plan.ops.size(); ++i)
        out << "mount " << i + 1 << "/" << s.plan.ops.size() << ": "
            << rootfs::to_string(s.plan.ops[i]) << "\n";
    out << "pivot_root: new root, old root detached\n";
    out << "workdir: " << s.workdir << "\n";
    for (const std::string& e : s.env) out << "env: " << e << "\n";
    out << "command: " << join(s.argv, " ") << "\n";
    out << "privileges: all capability sets empty (incl. bounding, ambient), no_new_privs, new "
           "session\n";
    out << "seccomp: " << plan.seccomp_text;
    for (const auto& [name, how] : plan.limits.mechanisms)
        out << "limit " << name << ": " << how << "\n";
    return out.str();
}

}  // namespace gpubox::launcher
