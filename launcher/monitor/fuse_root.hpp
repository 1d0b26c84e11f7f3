#pragma once
// A squashfs image's root, mounted without unpacking: squashfuse (Debian's package) serves the
// file through FUSE in the sandbox's user namespace. The monitor does it between clone() and
// Go: a short-lived child enters init's user and mount namespaces (as their owner it may),
// opens /dev/fuse there (FUSE takes only a device opened in the mount's own user namespace),
// mounts it over ROOTFS (read-only, nosuid, nodev) and hands the device back; squashfuse then
// serves it from the monitor's own namespaces with a cleared environment, the device its stdin
// ("/dev/fd/0"; squashfuse_ll, the package's low-level daemon). The workload cannot see it (another pid namespace), signal or trace it; the
// mount goes with the sandbox's mount namespace, which ends squashfuse's session, and the
// monitor kills and reaps it when the run ends anyway (FuseDaemon's destructor). Needs
// /dev/fuse open to the caller (image/squashfs.hpp's fuse_problem; else runs unpack).
#include <sys/types.h>

#include <string>

namespace gpubox::launcher {

struct FuseDaemon {
    pid_t pid = -1;
    FuseDaemon() = default;
    FuseDaemon(const FuseDaemon&) = delete;
    FuseDaemon& operator=(const FuseDaemon&) = delete;
    ~FuseDaemon();
};

// Mounts `file` over `rootfs` in init's mount namespace and starts squashfuse on it (above).
// SetupError naming the step that failed.
void mount_fuse_root(pid_t init, const std::string& rootfs, const std::string& file,
                     FuseDaemon& daemon);

}  // namespace gpubox::launcher
