#pragma once
#include <string>

namespace gpubox::rootfs {

struct CreateOptions {
    std::string dir;                       // must not exist, or be an empty directory
    std::string busybox = "/bin/busybox";  // a static busybox (Debian: busybox-static)
    bool with_glibc = true;                // copy the host's glibc so dynamic programs run
};

// Build a minimal, working rootfs offline: busybox with its applets, the host's dynamic loader
// and core glibc libraries in the Debian multiarch layout, /etc/passwd and /etc/group naming the
// caller, and the mount points gpubox uses. Throws on any failure.
void create_rootfs(const CreateOptions& opt);

}  // namespace gpubox::rootfs
