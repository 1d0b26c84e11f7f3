#pragma once
// RDMA devices (InfiniBand, RoCE) for multi-node jobs: the host's /dev/infiniband nodes that
// verbs and the connection manager open, and the sysfs entries libibverbs reads to find them.
// read_rdma_host gathers the facts (below a root: "/" or a simulated host's tree); plan_rdma
// turns them into mount ops, pure, so that `run --rdma` and step mode share it.
#include <string>
#include <utility>
#include <vector>

#include "gpu/inventory.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::gpu {

struct RdmaDevice {    // one verbs device: /sys/class/infiniband_verbs/uverbsN
    std::string name;  // its HCA, "mlx5_0" (uverbsN/ibdev)
    std::string uverbs;
    std::string sysfs_dir;   // container path of the device it belongs to (a PCI function's
                             // directory below /sys/devices), "" where it does not resolve there
    std::string sysfs_host;  // that directory's real host path
};

struct RdmaHost {
    bool simulated = false;   // read below a root other than "/"
    std::vector<Node> nodes;  // every entry of /dev/infiniband, as found
    // /sys/class/infiniband and /sys/class/infiniband_verbs where present: container path and
    // real host path.
    std::vector<std::pair<std::string, std::string>> classes;
    std::vector<RdmaDevice> devices;
};

// Never throws for what a host lacks: a host without RDMA has no nodes and no classes.
RdmaHost read_rdma_host(const std::string& root);

struct RdmaRequest {
    bool required = true;     // --rdma: no device is an error; step mode: nothing to do
    bool sysfs = true;        // the sandbox mounts /sys
    bool fresh_sysfs = true;  // ... a sysfs of its own network namespace (not the host's)
};

struct RdmaPlan {
    std::vector<Node> nodes;  // handed in, for the device cgroup check
    std::vector<rootfs::MountOp> ops;
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<std::string> summary;
};

// Where a simulated host's sysfs entries appear in the sandbox (SYSFS_PATH points libibverbs
// there): the kernel's sysfs has no directory to mount them on.
inline constexpr const char* kSimulatedSysfs = "/run/gpubox/sys";

RdmaPlan plan_rdma(const RdmaHost& host, const RdmaRequest& request);

}  // namespace gpubox::gpu
