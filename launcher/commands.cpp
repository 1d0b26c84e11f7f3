#include "launcher/commands.hpp"

#include <iostream>

#include "common/text.hpp"
#include "rootfs/create.hpp"

namespace gpubox::launcher {

int create_rootfs_command(const Options& o) {
    rootfs::create_rootfs({o.create_dir, o.busybox, true});
    std::cout << "gpubox: created rootfs " << quote(o.create_dir) << "\n";
    return 0;
}

int list_command(const Options&) { return 0; }
int doctor_command(const Options&) { return 0; }

}  // namespace gpubox::launcher
