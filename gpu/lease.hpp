#pragma once
// --gpu auto[:N]: GPU leases without a scheduler. Each GPU has a lock file in one host-wide
// directory that every user may write (sticky, like /tmp); a sandbox holds flock() on the files
// of its GPUs from its monitor (never inside the sandbox: O_CLOEXEC, taken after clone()) until
// the monitor exits, which the kernel ends even on SIGKILL. LOCK_EX for a GPU of one's own,
// LOCK_SH with --gpu-share. Leases are cooperative: they keep gpubox sandboxes apart, not
// other users of /dev/nvidia*, and a hostile user of the directory (who can make a lock file
// unusable, hold a lock forever, or, owning the directory, remove others' files) can only deny
// or spoil GPU leases, which any user with access to the device nodes can do by using the GPU.
#include <sys/types.h>

#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "gpu/inventory.hpp"

namespace gpubox::gpu {

struct LeaseRequest {
    int count = 1;
    bool shared = false;      // --gpu-share
    double wait_seconds = 0;  // --gpu-wait: how long to wait for enough free GPUs
};

struct Lease {
    std::string dir;
    // The leased NVIDIA GPUs and MIG devices, as --gpu names them ("2", "1:1:0"): a GPU in MIG
    // mode is leased by its MIG devices, each its own unit, so concurrent runs get a slice each.
    std::vector<std::string> items;
    std::vector<UniqueFd> locks;  // held until the monitor exits
};

// Pure: the lock file of a GPU, "nvidia-<uuid>.lock" (else its PCI address), only [A-Za-z0-9._-].
std::string lease_name(const Gpu& g);
// Pure: a MIG device's, "nvidia-<uuid>-gi<GI>-ci<CI>.lock".
std::string lease_name(const Gpu& g, const MigDevice& m);

// One line of /proc/locks (flock locks only; waiters are skipped).
struct LockLine {
    pid_t pid = 0;
    bool shared = false;
    unsigned dev_major = 0, dev_minor = 0;
    unsigned long inode = 0;
};
// Pure.
std::vector<LockLine> parse_proc_locks(const std::string& text);

// $GPUBOX_LEASE_DIR, else /run/gpubox/leases where it is a directory we may write (an admin's),
// else /tmp/gpubox-leases.
std::string lease_dir_path();
// The lease directory, made (mode 1777) if it is missing and `create`; refused (PlanError) when
// it is a symlink, not a directory, or writable by others without the sticky bit. Empty when
// missing and !create.
UniqueFd open_lease_dir(const std::string& path, bool create);

// Leases `r.count` NVIDIA GPUs (or MIG devices) of `inv`, waiting up to r.wait_seconds for them. PlanError,
// naming who holds what, when there are not enough.
Lease take_lease(const GpuInventory& inv, const LeaseRequest& r);

// `gpubox list`: who holds which GPU ("" when nobody holds any).
std::string describe_leases(const GpuInventory& inv);

}  // namespace gpubox::gpu
