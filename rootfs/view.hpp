#pragma once
// ROOTFS as gpubox reads it on the host (preflight, `gpubox check`, GPU planning): through a
// read-only mount of its own, so that no read changes a timestamp in it. The kernel skips an
// access-time update on a read-only mount (touch_atime needs write access to the mount), and
// that covers what O_NOATIME cannot: files the caller does not own, directories listed and
// symlinks followed on the way.
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

// PATH opened O_PATH|O_DIRECTORY, to resolve paths inside it by fd; else a PlanError naming it
// as WHAT ("ROOTFS", "--driver-root") over the open's SysError.
UniqueFd open_directory(const std::string& path, const std::string& what);

// A read-only, recursive clone of PATH's mount tree (detached), made by a short-lived child in
// a user and mount namespace of its own and passed back over a socket. Where no user namespace
// can be had, PATH's own fd, with an info line saying that reads may then update access times.
UniqueFd open_read_only_view(const std::string& path, const std::string& what);
// The same of `dir`, PATH already opened by open_directory (borrowed): the clone is checked to
// be of that directory, and where none can be made, a copy of `dir` stands in. With `layers`
// (a layered image's trees, bottom first, image/store.hpp), their union stacked over `dir`
// (stack_layers) in that child's namespaces instead: no user namespace, no view, and the error
// says why.
UniqueFd read_only_view_of(int dir, const std::string& path, const std::string& what,
                           const std::vector<std::string>& layers = {});
UniqueFd open_read_only_view(const std::string& path, const std::string& what,
                             const std::vector<std::string>& layers);
// A pulled image's layer trees (bottom first, image/store.hpp), stacked read-only by overlayfs
// in userxattr mode (their whiteouts and opaque directories are overlayfs's own): a detached
// mount, nosuid, nodev. One layer alone is a read-only clone of its tree. Needs a user
// namespace's mount rights and a kernel that lets it mount overlayfs (5.11). The sandbox's init
// calls it too (launcher/sandbox/child_main.cpp).
UniqueFd stack_layers(const std::vector<std::string>& layers);

// Does ROOTFS have mounts below it (so that, unless --writable, it is bound read-only, and the
// directories that lack an entry gpubox adds get overlays of their own)? The monitor asks, from
// its mount tree, of which init's mount namespace is a copy (the go tells init): from the
// kernel's list of the mounts below the one that holds ROOTFS (Linux 6.8: listmount(),
// statmount(); ~2 us where there are none), else from /proc/self/mountinfo, which the
// kernel prints whole (~28 us for 23 mounts here, and it grows with every mount of the host).
bool has_submounts(const std::string& rootfs);
// Its two routes (a unit test holds them to the same answers): the kernel's list (nullopt where
// it cannot answer, or the mount that holds ROOTFS has more than a dozen below it), and
// mountinfo.
std::optional<bool> has_submounts_listed(const std::string& rootfs);
bool has_submounts_in_mountinfo(const std::string& rootfs);

// Is the root an overlay's that ROOTFS's mounts make a read-only bind instead (the modes with
// ROOTFS as a lower layer, and mounts below it)?
bool bound_instead(const RootSpec& root);

}  // namespace gpubox::rootfs
