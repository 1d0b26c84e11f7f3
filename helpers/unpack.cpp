#include "helpers/unpack.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/entry_plan.hpp"
#include "image/tree.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::image {
namespace {

std::string hex_digest(sha256_ctx& ctx) {
    std::uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    static const char* hex = "0123456789abcdef";
    std::string out = "sha256:";
    for (std::uint8_t b : d) out += hex[b >> 4], out += hex[b & 15];
    return out;
}

// libarchive reads the blob through this, so the digest covers exactly the bytes unpacked.
struct HashingSource {
    HashingSource(int f, std::string w, const std::function<void(std::uint64_t)>* p)
        : fd(f), what(std::move(w)), progress(p) {
        sha256_init(&ctx);
    }
    int fd;
    std::string what;
    const std::function<void(std::uint64_t)>* progress;
    sha256_ctx ctx;
    std::vector<char> buf = std::vector<char>(1 << 20);
    std::uint64_t total = 0;

    la_ssize_t next(const void** out) {
        ssize_t n;
        do n = ::read(fd, buf.data(), buf.size());
        while (n < 0 && errno == EINTR);
        if (n < 0) sys::fail(cat("read(", quote(what), ")"), errno);
        sha256_update(&ctx, static_cast<std::size_t>(n),
                      reinterpret_cast<const std::uint8_t*>(buf.data()));
        total += static_cast<std::uint64_t>(n);
        if (*progress) (*progress)(total);
        *out = buf.data();
        return n;
    }
};

la_ssize_t read_cb(struct archive* a, void* p, const void** out) {
    try {
        return static_cast<HashingSource*>(p)->next(out);
    } catch (const std::exception& e) {
        archive_set_error(a, EIO, "%s", e.what());
        return -1;
    }
}

using Archive = std::unique_ptr<struct archive, decltype(&archive_read_free)>;

void check(struct archive* a, int rc, const std::string& what) {
    if (rc < ARCHIVE_WARN)
        throw std::runtime_error(
            cat(what, ": ", archive_error_string(a) ? archive_error_string(a) : "unreadable"));
}

std::string base_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string dir_of(const std::string& path) {
    const auto s = path.rfind('/');
    return s == std::string::npos ? "" : path.substr(0, s);
}

void chmod_fd(int opath_fd, unsigned mode, const std::string& what) {
    const std::string proc = cat("/proc/self/fd/", opath_fd);
    if (::chmod(proc.c_str(), mode) != 0)
        sys::fail(cat("chmod(", quote(what), ", 0", std::oct, mode, ")"), errno);
}

void write_data(struct archive* a, int fd, const std::string& path, std::uint64_t size,
                UnpackCounts& counts) {
    const void* buf;
    std::size_t len;
    la_int64_t off;
    int rc;
    while ((rc = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
        std::size_t done = 0;
        while (done < len) {
            const ssize_t n = ::pwrite(fd, static_cast<const char*>(buf) + done, len - done,
                                       static_cast<off_t>(off) + static_cast<off_t>(done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) sys::fail(cat("pwrite(", quote(path), ")"), errno);
            done += static_cast<std::size_t>(n);
        }
        counts.bytes_written += len;
    }
    if (rc != ARCHIVE_EOF) check(a, rc == ARCHIVE_OK ? ARCHIVE_FATAL : rc, path);
    sys::ftruncate(fd, static_cast<off_t>(size), path);  // a sparse file's trailing hole
}

void copy_data(int from, int to, const std::string& what) {
    std::vector<char> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(from, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) sys::fail(cat("read(", quote(what), ")"), errno);
        if (n == 0) return;
        sys::write_all(to, std::string_view(buf.data(), static_cast<std::size_t>(n)), what);
    }
}

constexpr std::uint64_t kEntryBytes = 512;  // a tar header: what an entry costs at least

}  // namespace

std::string sha256_fd(int fd, const std::string& what) {
    sha256_ctx ctx;
    sha256_init(&ctx);
    std::vector<char> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) sys::fail(cat("read(", quote(what), ")"), errno);
        if (n == 0) break;
        sha256_update(&ctx, static_cast<std::size_t>(n),
                      reinterpret_cast<const std::uint8_t*>(buf.data()));
    }
    return hex_digest(ctx);
}

Unpacker::Unpacker(const std::string& rootfs, const UnpackLimits& limits, bool overlay)
    : root_(sys::open_at(AT_FDCWD, rootfs, O_PATH | O_DIRECTORY)),
      overlay_(overlay),
      budget_{limits} {}

void Unpacker::carry_from(const Unpacker& prev) {
    counts_ = prev.counts_;
    budget_ = prev.budget_;
}

// Free space for `need` more bytes past the reserve, measured again where what was left after
// the last measurement would not do (our own writes, and others', change it).
void Unpacker::ensure_space(std::uint64_t need) {
    if (need <= space_left_) return;
    struct statvfs s {};
    if (::fstatvfs(root_.get(), &s) != 0) sys::fail("fstatvfs(rootfs)", errno);
    const std::uint64_t avail = std::uint64_t{s.f_bavail} * s.f_frsize;
    const std::uint64_t size = std::uint64_t{s.f_blocks} * s.f_frsize;
    const std::uint64_t reserve = space_reserve(size);
    space_left_ = avail > reserve ? avail - reserve : 0;
    const std::string problem = space_problem(avail, size, need);
    if (!problem.empty()) throw std::runtime_error(problem);
}

// Each entry before it is written: against the limits, then the free space.
void Unpacker::charge(std::uint64_t bytes) {
    const std::string problem = budget_.charge(bytes);
    if (!problem.empty()) throw std::runtime_error(problem);
    ensure_space(bytes);
    space_left_ -= bytes;
}

std::string Unpacker::layer(int blob_fd, const std::string& what, const std::string& digest,
                            const std::function<void(std::uint64_t)>& progress) {
    HashingSource src(blob_fd, what, &progress);
    // A layer writes at least about what it weighs: that much must be free before it starts.
    const auto blob_size = static_cast<std::uint64_t>(sys::fstat(blob_fd, what).st_size);
    try {
        ensure_space(blob_size);
    } catch (...) {
        std::throw_with_nested(std::runtime_error(what));
    }
    budget_.start_layer(blob_size);
    Archive a(archive_read_new(), archive_read_free);
    archive_read_support_filter_all(a.get());
    archive_read_support_format_tar(a.get());
    archive_read_support_format_empty(a.get());
    check(a.get(), archive_read_open(a.get(), &src, nullptr, read_cb, nullptr), what);
    added_.clear();
    struct archive_entry* e;
    int rc;
    while ((rc = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
        const char* name = archive_entry_pathname(e);
        try {
            apply(a.get(), e);
        } catch (...) {
            std::throw_with_nested(std::runtime_error(cat(what, ": ", quote(name ? name : ""))));
        }
    }
    if (rc != ARCHIVE_EOF) check(a.get(), rc, what);
    const void* rest;
    while (src.next(&rest) > 0) {  // the digest covers the whole blob, padding included
    }
    const std::string got = hex_digest(src.ctx);
    if (!digest.empty() && got != digest)
        throw std::runtime_error(cat(what, ": digest mismatch: expected ", digest, ", read ", got));
    counts_.bytes_read += src.total;
    ++counts_.layers;
    return got;
}

void Unpacker::apply(struct archive* a, struct archive_entry* e) {
    const bool data = archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e);
    charge(kEntryBytes +
           (data ? static_cast<std::uint64_t>(std::max<la_int64_t>(archive_entry_size(e), 0)) : 0));
    const char* name = archive_entry_pathname(e);
    const EntryPlan plan = plan_entry(name ? name : "..");
    using K = EntryPlan::Kind;
    switch (plan.kind) {
        case K::unsafe: ++counts_.unsafe; return;
        case K::root: modes_[""] = archive_entry_mode(e) & 01777; return;
        case K::whiteout: {
            UniqueFd parent = parent_of(plan.path, overlay_);
            if (!parent.valid()) return;
            remove_at(parent.get(), base_of(plan.path));
            if (overlay_ && ::mknodat(parent.get(), base_of(plan.path).c_str(), S_IFCHR | 0,
                                      makedev(0, 0)) != 0)
                sys::fail(cat("mknodat(", quote(plan.path), ", S_IFCHR 0:0 (a whiteout))"), errno);
            return;
        }
        case K::opaque: {
            if (overlay_) return mark_opaque(plan.path);
            const int fd =
                rootfs::try_open_in_root(root_.get(), plan.path.empty() ? "." : plan.path,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
            if (fd >= 0) {
                UniqueFd dir(fd);
                remove_lower_entries(dir.get(), plan.path, added_);
            }
            return;
        }
        case K::create: create(a, e, plan.path); return;
    }
}

// overlayfs's opaque directory (userxattr mode): the lower layers' content of `dir` is hidden;
// the directory is made in this layer where it is not yet.
void Unpacker::mark_opaque(const std::string& dir) {
    UniqueFd d;
    if (dir.empty()) {
        d = sys::dup_cloexec(root_.get());
    } else {
        UniqueFd parent = parent_of(dir + "/x", true);
        if (!parent.valid()) {
            ++counts_.unsafe;
            return;
        }
        d = std::move(parent);
    }
    const std::string proc = cat("/proc/self/fd/", d.get());
    if (::setxattr(proc.c_str(), "user.overlay.opaque", "y", 1, 0) != 0)
        sys::fail(cat("setxattr(", quote(dir.empty() ? "/" : dir), ", user.overlay.opaque)"),
                  errno);
}

// The directory holding `path`, resolved in the root; missing ones are made (mode 0755, as tar
// does) when `create`, else an empty fd.
UniqueFd Unpacker::parent_of(const std::string& path, bool create) {
    const std::string dir = dir_of(path);
    int fd = rootfs::try_open_in_root(root_.get(), dir.empty() ? "." : dir, O_PATH | O_DIRECTORY);
    if (fd >= 0) return UniqueFd(fd);
    if (fd == -ENOTDIR || fd == -ELOOP || (fd == -ENOENT && !create)) return UniqueFd();
    if (fd != -ENOENT) sys::fail(cat("openat2(rootfs, ", quote(dir), ", RESOLVE_IN_ROOT)"), -fd);
    UniqueFd up = parent_of(dir, true);
    if (!up.valid()) return up;
    if (::mkdirat(up.get(), base_of(dir).c_str(), 0700) != 0) {
        // Something is there but does not resolve to a directory inside the image: a link
        // dangling inside it (it pointed out of the image) or at a file. Tar would write
        // through it; we skip the member (counted as unsafe).
        if (errno == EEXIST) return UniqueFd();
        sys::fail(cat("mkdirat(", quote(dir), ")"), errno);
    }
    modes_.emplace(dir, lower_mode(dir));
    return rootfs::open_in_root(root_.get(), dir, O_PATH | O_DIRECTORY);
}

namespace {

// Hard link targets are image paths too: resolved in the root, never a ".." or an absolute
// host path, and the final component itself is linked (no AT_SYMLINK_FOLLOW). False: a target
// that leaves the image, or that a link on its way makes unreachable (skipped, counted).
bool make_hardlink(int root, int parent, const std::string& base,
                   const std::string& target_member) {
    std::string target;
    if (!normalize_member(target_member, target) || target.empty()) return false;
    const std::string tdir = dir_of(target);
    const int fd = rootfs::try_open_in_root(root, tdir.empty() ? "." : tdir, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP) return false;
    if (fd < 0) sys::fail(cat("openat2(rootfs, ", quote(tdir), ", RESOLVE_IN_ROOT)"), -fd);
    UniqueFd tparent(fd);
    if (::linkat(tparent.get(), base_of(target).c_str(), parent, base.c_str(), 0) != 0)
        sys::fail(cat("linkat(", quote(target), " -> ", quote(base), ")"), errno);
    return true;
}

unsigned count_drops(struct archive_entry* e, unsigned mode, UnpackCounts& c) {
    const char* xname;
    const void* value;
    std::size_t size;
    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &xname, &value, &size) == ARCHIVE_OK)
        if (xname && std::strcmp(xname, "security.capability") == 0) ++c.caps;
    if (mode & (S_ISUID | S_ISGID)) ++c.setid;
    return mode & 01777;  // permission bits and sticky: setuid and setgid never land
}

}  // namespace

void Unpacker::create(struct archive* a, struct archive_entry* e, const std::string& path) {
    const unsigned type = archive_entry_filetype(e);
    const char* hardlink = archive_entry_hardlink(e);
    if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK)) {
        ++counts_.devices;
        return;
    }
    if (!hardlink && type == AE_IFSOCK) return;  // a socket in a tar is a leftover, never usable
    const unsigned mode = count_drops(e, archive_entry_mode(e) & 07777, counts_);
    UniqueFd parent = parent_of(path, true);
    if (!parent.valid()) {
        ++counts_.unsafe;
        return;
    }
    const std::string base = base_of(path);
    struct stat st {};
    const bool exists = sys::lstat_at(parent.get(), base, st);
    if (exists && !(type == AE_IFDIR && !hardlink && S_ISDIR(st.st_mode)))
        remove_at(parent.get(), base);
    added_.insert(path);
    if (hardlink) {
        if (overlay_ && copy_from_lower(parent.get(), base, hardlink)) return;
        if (!make_hardlink(root_.get(), parent.get(), base, hardlink)) ++counts_.unsafe;
        return;
    }
    switch (type) {
        case AE_IFDIR:
            if (!exists || !S_ISDIR(st.st_mode)) sys::mkdir_at(parent.get(), base, 0700);
            modes_[path] = mode;
            return;
        case AE_IFLNK:
            return sys::symlink_at(archive_entry_symlink(e) ? archive_entry_symlink(e) : "",
                                   parent.get(), base);
        case AE_IFIFO:
            if (::mknodat(parent.get(), base.c_str(), S_IFIFO | mode, 0) != 0)
                sys::fail(cat("mknodat(", quote(path), ", S_IFIFO)"), errno);
            return;
        case AE_IFREG: break;
        default: ++counts_.unsafe; return;
    }
    UniqueFd f = sys::open_at(parent.get(), base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    write_data(a, f.get(), path, static_cast<std::uint64_t>(archive_entry_size(e)), counts_);
    const struct timespec times[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)},
                                      {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
    ::futimens(f.get(), times);  // best effort: a wrong mtime breaks nothing
    sys::fchmod(f.get(), mode, path);
}

// A directory this layer makes without an entry of its own: in overlay mode it hides the lower
// layers' directory's attributes, so it takes their mode (else 0755, as tar makes it).
unsigned Unpacker::lower_mode(const std::string& dir) const {
    for (const UniqueFd& lower : lowers_) {
        const int fd = rootfs::try_open_in_root(lower.get(), dir, O_PATH | O_NOFOLLOW);
        if (fd < 0) continue;
        const UniqueFd d(fd);
        const struct stat st = sys::fstat(d.get(), dir);
        return S_ISDIR(st.st_mode) ? (st.st_mode & 01777) : 0755;
    }
    return 0755;
}

// A hard link to a file of a lower layer (a tree of its own here): the file's copy, found in
// the nearest lower layer that has it, as overlayfs would show it (a whiteout there ends the
// search). False where this layer has the target itself (then it is linked) or none has it.
bool Unpacker::copy_from_lower(int parent, const std::string& base, const std::string& member) {
    std::string target;
    if (!normalize_member(member, target) || target.empty()) return false;
    if (lowers_.empty()) return false;
    if (const int own = rootfs::try_open_in_root(root_.get(), target, O_PATH | O_NOFOLLOW);
        own >= 0) {
        ::close(own);
        return false;
    }
    for (const UniqueFd& lower : lowers_) {
        const int fd = rootfs::try_open_in_root(lower.get(), target, O_RDONLY | O_NOFOLLOW);
        if (fd < 0) continue;
        UniqueFd src(fd);
        const struct stat st = sys::fstat(src.get(), target);
        if (!S_ISREG(st.st_mode)) return false;  // a whiteout, or no file to link
        charge(static_cast<std::uint64_t>(st.st_size));
        UniqueFd dst = sys::open_at(parent, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        copy_data(src.get(), dst.get(), target);
        counts_.bytes_written += static_cast<std::uint64_t>(st.st_size);
        const struct timespec times[2] = {st.st_mtim, st.st_mtim};
        ::futimens(dst.get(), times);
        sys::fchmod(dst.get(), st.st_mode & 01777, target);
        return true;
    }
    return false;
}

void Unpacker::finish() {
    std::vector<std::pair<std::string, unsigned>> dirs(modes_.begin(), modes_.end());
    // Deepest first, the root last: a directory closed to us can no longer be walked through.
    const auto depth = [](const std::string& p) {
        return p.empty() ? -1L : std::count(p.begin(), p.end(), '/');
    };
    std::sort(dirs.begin(), dirs.end(),
              [&](const auto& x, const auto& y) { return depth(x.first) > depth(y.first); });
    for (const auto& [path, mode] : dirs) {
        const int fd = rootfs::try_open_in_root(root_.get(), path.empty() ? "." : path,
                                                O_PATH | O_DIRECTORY | O_NOFOLLOW);
        if (fd < 0) continue;  // whited out by a later layer, or a link replaced it
        UniqueFd d(fd);
        chmod_fd(d.get(), mode, path);
    }
}

}  // namespace gpubox::image
