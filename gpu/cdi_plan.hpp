#pragma once
// CDI devices and --device /dev/PATH as mount ops: the container edits of the named devices
// (and of their specs) applied the way gpubox applies its own GPU injection. Hooks are never
// run: the verbs of NVIDIA's nvidia-cdi-hook are done natively, any other hook is refused.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cdi_spec.hpp"
#include "gpu/image.hpp"
#include "gpu/inventory.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::cdi {

// What one --device names: a CDI device (resolved) or a host node (/dev/PATH[:PERMS]).
struct Request {
    std::string text;  // as given
    Resolved cdi;      // a CDI device; else `node`
    std::string node, permissions;
};

// Pure: "--device" TEXT as a Request without its resolution: /dev/PATH[:PERMS] (PERMS of r, w,
// m) or VENDOR/CLASS=NAME. Throws UsageError for anything else.
Request parse_device_flag(const std::string& text);

struct Plan {
    std::vector<rootfs::MountOp> ops;
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<gpu::Node> nodes;      // for the device cgroup's check
    std::vector<std::string> summary;  // "nvidia.com/gpu=0 (/etc/cdi/nvidia.yaml): 3 nodes, ..."
    std::string compat_version;        // enable-cuda-compat's --host-driver-version, if asked
};

// The host's side, asked by the planner: a host path as a device node (whether a symlink is
// followed is the caller's choice).
struct Host {
    std::function<gpu::Node(const std::string& host_path)> node;
    // A host library's DT_SONAME ("" if none or not ELF), for update-ldcache: what ldconfig
    // would link it as.
    std::function<std::string(const std::string& host_path)> soname;
};

// The DT_SONAME of the ELF64 file open at `fd` ("" if none), reading only its headers, its
// dynamic section and that section's string table (each bounded).
std::string elf_soname(int fd);

// Pure: the ops for `requests`, each spec's own edits once. `image` gives the loader's cache
// and forward compatibility for update-ldcache and enable-cuda-compat. Throws PlanError (one
// line) for a node that is not the host's character device (or not the numbers the spec
// gives), a node or mount target that is not absolute, a mount type other than bind, and any
// hook that is not one of nvidia-cdi-hook's known verbs.
Plan plan_devices(const std::vector<Request>& requests, const Host& host,
                  const gpu::ImageInfo& image);

// Pure: the host driver version enable-cuda-compat names, if a hook of the requests asks for it
// ("" if none does).
std::string compat_request(const std::vector<Request>& requests);

}  // namespace gpubox::cdi
