#pragma once
#include <string>

namespace gpubox::isolate {

struct NamespaceSet {
    int flags = 0;  // CLONE_NEW* for the sandbox's clone
};

// Pure: user, mount, pid, ipc, uts and cgroup always; net unless the host network is shared.
NamespaceSet plan_namespaces(bool share_net);

// "user,mnt,pid,ipc,uts,cgroup,net"
std::string to_string(const NamespaceSet& ns);

}  // namespace gpubox::isolate
