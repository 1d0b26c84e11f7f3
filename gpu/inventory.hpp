#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpu/pci.hpp"

namespace gpubox::gpu {

enum class Vendor { nvidia, amd, intel };
const char* to_string(Vendor v);

struct Node {          // a device node, at the same path on the host (under the driver
    std::string path;  // root) and in the sandbox, e.g. "/dev/nvidia2"
    std::string host;  // the real host path it resolved to ("" if missing)
    bool exists = false;
    bool is_char = false;
    dev_t rdev = 0;
    bool read_only = false;  // opened for reading only (MIG capability nodes, mode 0444)
};

// One MIG device: compute instance `ci` of GPU instance `gi`, as nvidia-smi numbers them. CUDA
// reaches it through two capabilities the driver guards by device nodes,
// /dev/nvidia-caps/nvidia-cap<N> (N from /proc/driver/nvidia-caps/mig-minors, major
// `nvidia-caps` in /proc/devices), and finds their minors in its `access` files under
// /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<gi>[/ci<ci>]/access.
struct MigDevice {
    int gi = -1, ci = -1;
    int gi_minor = -1, ci_minor = -1;  // the capability nodes' minors (-1: not in mig-minors)
    Node gi_node, ci_node;
    std::string gi_access, ci_access;            // procfs paths, in the sandbox as on the host
    std::string gi_access_host, ci_access_host;  // their real host paths
    std::string problem;                         // why it cannot be given ("": it can)
    // What only NVML knows (gpu/nvml_report.hpp), where it was asked: "MIG-<uuid>", the
    // profile ("1g.10gb") and its GPU instance's memory in bytes; empty, 0 otherwise.
    std::string uuid, profile;
    std::uint64_t memory = 0;
};

struct Gpu {
    Vendor vendor;
    int index = -1;  // NVIDIA: nvidia-smi's index (PCI bus order); others: -1
    PciAddress pci;
    std::string pci_name;    // the host's spelling (sysfs or procfs directory name)
    unsigned pci_class = 0;  // from sysfs; 0 where discovery did not scan it
    std::string model, uuid;
    int minor = -1;           // NVIDIA Device Minor: /dev/nvidia<minor>
    std::string proc_dir;     // NVIDIA: directory name under /proc/driver/nvidia/gpus
    std::string proc_host;    // NVIDIA: that directory's real host path (else a problem says why)
    std::vector<Node> nodes;  // this GPU's own nodes
    std::string problem;      // why it cannot be given to a sandbox ("": it can)
    // NVIDIA: its MIG GPU instances (capabilities/gpu<minor>/mig/gi<N>). With any, the GPU is
    // in MIG mode, and CUDA runs only on its MIG devices (`mig`, one per compute instance).
    int mig_instances = 0;
    bool mig_dir = false;  // capabilities/gpu<minor>/mig exists: the GPU is MIG-capable
    std::vector<MigDevice> mig;
    // NVML's MIG mode, current and pending a reset: 1 on, 0 off, -1 unknown or unsupported.
    int mig_mode = -1, mig_pending = -1;
    // As select_gpus gives it: the whole GPU was named (else only MIG devices were); `mig`
    // then holds the MIG devices the sandbox gets.
    bool whole = true;
};

// "1:2:0" (GPU index:GI:CI, as nvidia-smi numbers them) and the toolkit's name for it,
// "MIG-GPU-<uuid>/2/0".
std::string mig_id(const Gpu& g, const MigDevice& m);
std::string mig_name(const Gpu& g, const MigDevice& m);
// Every node the sandbox gets for `g` as selected: its own, and its MIG devices' two each.
std::vector<Node> nodes_of(const Gpu& g);

// The hint for a Gpu::problem.
inline constexpr const char* kGpuProblemHint =
    "the driver lists it but does not describe it; is it healthy? see nvidia-smi and Xid errors in "
    "the kernel log";
// The hint for an entry of GpuInventory::unplaced.
inline constexpr const char* kUnplacedHint =
    "GPU indices are uncertain until it is fixed: select GPUs by UUID or PCI address (see 'gpubox "
    "list')";

struct DriverLib {
    std::string file;                  // real file name, e.g. libcuda.so.550.54.14
    std::string host_path;             // where it is on the host (driver root included)
    std::vector<std::string> sonames;  // ld.so.cache keys that lead to it, e.g. libcuda.so.1
};

struct GpuInventory {
    std::string driver_root = "/";
    std::optional<std::string> nvidia_version;  // kernel module version
    std::vector<Gpu> gpus;                      // NVIDIA in index order, then AMD and Intel
    // Entries of the driver's GPU listing with no PCI address to order them by: why, for each.
    // They cannot be numbered, so while there is one, no index is certain (see select_gpus).
    std::vector<std::string> unplaced;
    std::vector<DriverLib> libs;              // version-matched, for the capabilities asked
    std::vector<std::string> stale_versions;  // driver versions of libraries left out
    std::string ldcache_problem;              // why the host's ld.so.cache could not be used
    std::vector<std::pair<std::string, std::string>> binaries;  // name, host path
    std::map<std::string, Node> shared_nodes;                   // nvidiactl, nvidia-uvm, ..., kfd
    std::string proc_version, proc_params, proc_registry;
    // Sockets, the MPS pipe directory, GSP firmware, loader configs: where they go, where they
    // are, what, and whether the sandbox may write to them (a socket must be connectable).
    struct Extra {
        std::string path, host;
        bool is_dir = false;
        bool read_only = true;
    };
    std::vector<Extra> optional_paths;
    // Whether NVML's facts were added (gpu/nvml_report.hpp), and if asked but not, why not.
    bool nvml = false;
    std::string nvml_problem;
};

// How much of the host a request needs to see. NVIDIA GPUs named by index or UUID need only
// the driver's own listing (/proc/driver/nvidia/gpus); other vendors, PCI addresses and
// `gpubox list` need a scan of every PCI function in sysfs, which on a large host costs more
// than the rest of discovery together.
enum class Scope { nvidia, all };

// Reads the host only below `driver_root` (resolving every path inside it, so an absolute
// symlink or an ld.so.cache path found there stays inside it). Never throws for what a host
// lacks: it records it, and the planner decides whether the request needs it. NVIDIA GPUs and
// their indices are the same in both scopes; Scope::nvidia leaves out the other vendors and
// the PCI class (0). With `only`, the NVIDIA GPUs of other indices are listed with their
// index and bus address alone (no model, UUID, minor or node): enough to select by index.
GpuInventory discover_gpus(const std::string& driver_root, unsigned caps, Scope scope = Scope::all,
                           const std::vector<int>& only = {});

// The names in directory PATH inside ROOT (by fd, never leaving it), sorted, without dot
// entries; empty when it cannot be opened (a host without that driver part).
std::vector<std::string> list_dir(int root, const std::string& path);

}  // namespace gpubox::gpu
