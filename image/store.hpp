#pragma once
// The image store: content-addressed by manifest digest, names are small records pointing at a
// digest, so a re-pull reuses and `rmi` of one name keeps a digest another name still uses.
//
//   STORE/blobs/sha256/<hex>/rootfs        the unpacked root filesystem (never written by a run);
//                                          for a layered image an empty directory, where the
//                                          run mounts its layers stacked (overlayfs)
//   STORE/blobs/sha256/<hex>/config.json   the image config (OCI/Docker "config" object)
//   STORE/blobs/sha256/<hex>/rootfs.sqsh   a single-file image's (pull --squashfs, export): the
//                                          whole tree as one squashfs file, its rootfs empty
//   STORE/blobs/sha256/<hex>/info.json     size, layers; "squashfs": true for rootfs.sqsh;
//                                          "layer_digests": a layered image's
//                                          layers, bottom first (none: rootfs is the whole tree,
//                                          as every image before layers were shared, and a tar:)
//   STORE/layers/sha256/<hex>/tree         one layer blob's tree, as overlayfs stacks it (its
//                                          whiteouts 0/0 character devices, opaque directories
//                                          marked user.overlay.opaque), shared by every image
//                                          that has the layer; removed with the last of them
//   STORE/layers/sha256/<hex>/info.json    its size
//   STORE/names/<name>                     a record: {"digest": "sha256:<hex>", "remote": the
//                                          registry's digest where skopeo converted it}; a '/'
//                                          of the name ("lab/py") is a '%' in the file's name
//   STORE/squashfs/<key>/tree              a squashfs image unpacked once by unsquashfs for runs
//                                          where FUSE is not open to the caller (squashfs.hpp)
//   STORE/tmp/                             pulls in progress (renamed into place when complete)
//   STORE/lock                             flock() serializes writers
// A running sandbox holds flock(LOCK_SH) on its image's blobs/sha256/<hex> (hold_image).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "image/oci.hpp"  // Config

#include "common/unique_fd.hpp"

namespace gpubox::image {

struct Stored {
    std::string name, digest, source;  // digest: "sha256:<64 hex>" of the manifest
    std::string remote;  // the registry's manifest digest, where skopeo converted it (or "")
    std::filesystem::path rootfs;
    std::vector<std::filesystem::path> layers;  // a layered image's trees, bottom first
    std::filesystem::path squashfs;             // a single-file image's rootfs.sqsh (its real path)
    std::filesystem::path squashfs_read;        // the same as read (StoreView::read)
    Config config;
    std::uint64_t size_bytes = 0;
    std::vector<std::uint64_t> layer_sizes;  // each of `layers`' (its info.json; 0 unknown)
    std::int64_t pulled_unix = 0;
    bool site = false;  // from a site store (GPUBOX_IMAGES_RO): read-only, never written
};

// Where a store is read: `read` (a read-only mount of a site store, "/proc/self/fd/N", so that
// no read changes an access time there; the user's own store itself) and its `real` path, which
// Stored::rootfs names for the run.
struct StoreView {
    std::filesystem::path read, real;
    bool site = false;
};

// $GPUBOX_IMAGES, else $XDG_DATA_HOME/gpubox/images, else $HOME/.local/share/gpubox/images.
// Pure: takes the environment as a map (only those three keys and HOME are read).
std::filesystem::path store_root(const std::map<std::string, std::string>& env);

// GPUBOX_IMAGES_RO: the site stores, ':'-separated absolute paths (a relative one is
// ignored), looked in after the user's own, in order. Pure.
std::vector<std::filesystem::path> site_roots(const std::map<std::string, std::string>& env);

// The image stored under NAME, or nullopt when there is none (or NAME is not a valid name).
std::optional<Stored> find(const std::filesystem::path& store, std::string_view name);
std::optional<Stored> find(const StoreView& store, std::string_view name);
// Every named image, sorted by name.
std::vector<Stored> list(const std::filesystem::path& store);
std::vector<Stored> list(const StoreView& store);

}  // namespace gpubox::image

namespace gpubox::image {

// Writers (pull, rmi). Every change is a rename under STORE/lock, so readers never see half of
// one and a failed pull leaves nothing but its own temp directory, which it removes.
class StoreLock {
public:
    explicit StoreLock(const std::filesystem::path& store);  // flock(LOCK_EX), waits
    ~StoreLock();
    StoreLock(const StoreLock&) = delete;
    StoreLock& operator=(const StoreLock&) = delete;

private:
    int fd_ = -1;
};

// A new STORE/tmp/pull-XXXXXX (mode 0700), the store's directories made first.
std::filesystem::path make_temp_dir(const std::filesystem::path& store, const std::string& prefix);
// Moves `image_dir` (holding rootfs/, config.json, info.json) to STORE/blobs/sha256/<hex>;
// false when that digest is stored already (the caller removes `image_dir`). Hold the lock.
bool commit_image(const std::filesystem::path& store, const std::filesystem::path& image_dir,
                  const std::string& digest);
// Moves each STAGE/<hex> (tree/ and info.json, a pull's new layers) to STORE/layers/sha256/<hex>
// unless stored already (then it is removed). Hold the lock.
void commit_layers(const std::filesystem::path& store, const std::filesystem::path& stage);
// Whether STORE has every layer named (hex digests). Hold the lock.
bool has_layers(const std::filesystem::path& store, const std::vector<std::string>& hexes);
// The size of a stored layer (its info.json), 0 if unknown.
std::uint64_t layer_size(const std::filesystem::path& store, const std::string& hex);
// Pure: images' SHARED sizes (podman's): for each image, the bytes of its layers that another
// listed image (another name, even of the same digest) also uses; its unique size is
// size_bytes less that. A flat or squashfs image shares nothing.
std::vector<std::uint64_t> shared_sizes(const std::vector<Stored>& images);
// Points NAME at DIGEST (replacing what it named). Hold the lock.
void write_name(const std::filesystem::path& store, const std::string& name,
                const std::string& digest, const std::string& source, std::int64_t pulled_unix,
                const std::string& remote = "");
// Removes NAME, and its digest's tree when no other name points at it. False: no such name.
// Throws ImageInUse, changing nothing, when that tree would go while a run holds it.
bool remove_name(const std::filesystem::path& store, const std::string& name);
struct ImageInUse : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// `gpubox prune`: removes every image tree no name points at (unless a run holds it), every
// layer no image has, the trees unpacked for squashfs runs that no image or run uses, and
// pulls' and removals' leftovers in STORE/tmp whose process is gone.
struct Pruned {
    std::uint64_t images = 0, layers = 0, temps = 0, in_use = 0;
    std::uint64_t unpacked = 0, unpacked_in_use = 0;  // STORE/squashfs/<key>
};
Pruned prune(const std::filesystem::path& store);
// Removes STORE/tmp's leftovers of pulls whose process is gone ("pull-PID-..."), and with
// `removals` those of removals ("rm-..."; hold the lock). Returns how many.
std::uint64_t remove_stale_temps(const std::filesystem::path& store, bool removals);

// A run's hold on the image it runs: flock(LOCK_SH) on the digest's directory for as long as
// the returned fd (O_CLOEXEC) is open, so that rmi (LOCK_EX, never waiting) leaves it alone.
// Throws PlanError when rmi removed it between find() and the lock.
UniqueFd hold_image(const Stored& img);
// Removes a tree without following any symlink in it, read-only directories included.
void remove_tree(const std::filesystem::path& path);

// A run's shared flock on a store directory that rmi or prune remove only under an exclusive
// one; invalid where it was removed (renamed away) before the lock was had.
UniqueFd hold_shared(const std::filesystem::path& dir);

}  // namespace gpubox::image
