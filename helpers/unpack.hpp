#pragma once
// Unpacking image layers into a root filesystem, as an ordinary user, by fd (gpubox-unpack).
// Every path is resolved inside the tree being built (openat2 RESOLVE_IN_ROOT), so neither a
// symlink in a layer nor one already in the tree leads a write out of it; ".." members are
// skipped. Device nodes, setuid/setgid bits and security.capability xattrs are dropped and
// counted; ownership is the caller's. Directories stay u+rwx while layers land (a read-only
// directory must still take its files) and get their own modes back in finish().
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "image/limits.hpp"

struct archive;  // libarchive's, kept out of this header
struct archive_entry;

namespace gpubox::image {

struct UnpackCounts {
    std::uint64_t layers = 0, bytes_read = 0, bytes_written = 0;
    std::uint64_t devices = 0, setid = 0, caps = 0, unsafe = 0;
};

class Unpacker {
public:
    // `overlay`: the tree holds one layer, to be stacked under overlayfs with others (the
    // store's layers, image/store.hpp): a whiteout is made as overlayfs's (a 0/0 character
    // device, which the kernel lets anyone make), an opaque marker as its user.overlay.opaque
    // xattr (read by overlayfs's userxattr mode), instead of removing lower entries. A hard link
    // can then only name a file of its own layer (one to a lower layer is skipped, counted).
    Unpacker(const std::string& rootfs, const UnpackLimits& limits, bool overlay = false);
    // One layer blob (tar, tar+gzip or tar+zstd). `digest` "sha256:<hex>" is checked against
    // what was read, the whole blob, before the next layer; "" computes it only. Returns it.
    std::string layer(int blob_fd, const std::string& what, const std::string& digest,
                      const std::function<void(std::uint64_t)>& progress);
    void finish();  // the directories' own modes, deepest first
    const UnpackCounts& counts() const { return counts_; }
    // Counts and budget go on from `prev` (one Unpacker per layer tree, one budget per pull).
    void carry_from(const Unpacker& prev);
    // Overlay mode: the layers below this one (O_PATH fds of their trees, the nearest first),
    // where a hard link to a lower layer's file finds what to copy.
    void set_lowers(std::vector<UniqueFd> lowers) { lowers_ = std::move(lowers); }

private:
    void apply(::archive* a, ::archive_entry* e);
    void charge(std::uint64_t bytes);  // throws where a limit or the free space says no
    void ensure_space(std::uint64_t need);
    void create(::archive* a, ::archive_entry* e, const std::string& path);
    void mark_opaque(const std::string& dir);
    bool copy_from_lower(int parent, const std::string& base, const std::string& member);
    unsigned lower_mode(const std::string& dir) const;
    UniqueFd parent_of(const std::string& path, bool create);
    UniqueFd root_;
    bool overlay_ = false;
    std::vector<UniqueFd> lowers_;
    std::set<std::string> added_;            // paths this layer created (opaque markers)
    std::map<std::string, unsigned> modes_;  // directory -> its final mode
    UnpackCounts counts_;
    UnpackBudget budget_;
    std::uint64_t space_left_ = 0;  // free space past the reserve, as last measured
};

// sha256 of everything left on `fd`, as "sha256:<hex>".
std::string sha256_fd(int fd, const std::string& what);

}  // namespace gpubox::image
