#include "isolate/namespaces.hpp"

#include <sched.h>

#include <utility>

namespace gpubox::isolate {

NamespaceSet plan_namespaces(bool share_net) {
    NamespaceSet ns;
    ns.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
               CLONE_NEWCGROUP | (share_net ? 0 : CLONE_NEWNET);
    return ns;
}

std::string to_string(const NamespaceSet& ns) {
    static const std::pair<int, const char*> names[] = {
        {CLONE_NEWUSER, "user"}, {CLONE_NEWNS, "mnt"},  {CLONE_NEWPID, "pid"},
        {CLONE_NEWIPC, "ipc"},   {CLONE_NEWUTS, "uts"}, {CLONE_NEWCGROUP, "cgroup"},
        {CLONE_NEWNET, "net"}};
    std::string out;
    for (auto [flag, name] : names)
        if (ns.flags & flag) out += (out.empty() ? "" : ",") + std::string(name);
    return out;
}

}  // namespace gpubox::isolate
