// gpubox rootfs create: a minimal busybox ROOTFS.

#include "common/print.hpp"
#include "common/text.hpp"
#include "launcher/commands/commands.hpp"
#include "rootfs/create.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o) {
    rootfs::create_rootfs({o.create_dir, o.busybox, true});
    print(cat("gpubox: created rootfs ", quote(o.create_dir), "\n"));
    return 0;
}

}  // namespace gpubox::launcher
