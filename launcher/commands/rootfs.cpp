// gpubox rootfs create: a minimal busybox ROOTFS.
#include <iostream>

#include "common/text.hpp"
#include "launcher/commands/commands.hpp"
#include "rootfs/create.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o) {
    rootfs::create_rootfs({o.create_dir, o.busybox, true});
    std::cout << "gpubox: created rootfs " << quote(o.create_dir) << "\n";
    return 0;
}

}  // namespace gpubox::launcher
