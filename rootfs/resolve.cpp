#include "rootfs/resolve.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::rootfs {

// A live mapping, as the SIGBUS handler sees it; its MappedFile holds its slot.
struct MappingGuard {
    const char* data;
    std::size_t size;
    volatile sig_atomic_t shrunk;
};

namespace {

constexpr int kMaxHops = 40;

// The slots of the live mappings: a handful at most are alive at once.
MappingGuard g_live[8];
struct sigaction g_previous_sigbus;
std::uintptr_t g_page_mask;

void on_sigbus(int, siginfo_t* si, void*) {
    const char* at = static_cast<const char*>(si->si_addr);
    for (MappingGuard& m : g_live) {
        if (!m.data || at < m.data || at >= m.data + m.size) continue;
        void* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(at) & g_page_mask);
        if (::mmap(page, ~g_page_mask + 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) break;
        m.shrunk = 1;
        return;  // the read is retried, on zeros
    }
    ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);  // not ours: the fault repeats, as if never caught
}

MappingGuard* track(const char* data, std::size_t size) {
    static const bool installed = [] {
        g_page_mask = ~(static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE)) - 1);
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        return ::sigaction(SIGBUS, &sa, &g_previous_sigbus) == 0;
    }();
    for (MappingGuard& m : g_live) {
        if (!installed || m.data) continue;
        m.size = size;
        m.shrunk = 0;
        m.data = data;
        return &m;
    }
    return nullptr;
}

std::string relative(const std::string& path) {
    std::string rel = path;
    while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
    return rel.empty() ? "." : rel;
}

// One step of the fallback walk: `stack` holds the directories from root to the current one,
// so ".." pops (and stops at root, as RESOLVE_IN_ROOT does).
int walk(int root, const std::string& path, int flags) {
    std::deque<std::string> todo;
    for (auto& c : split_path("/" + path)) todo.push_back(c);
    std::vector<UniqueFd> stack;
    stack.emplace_back(::openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!stack.back().valid()) return -errno;
    int hops = 0;
    while (!todo.empty()) {
        std::string c = todo.front();
        todo.pop_front();
        if (c == "..") {
            if (stack.size() > 1) stack.pop_back();
            continue;
        }
        const bool last = todo.empty();
        int cur = stack.back().get();
        struct stat st {};
        if (::fstatat(cur, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT && last && (flags & O_CREAT)) {
                int fd = ::openat(cur, c.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0644);
                return fd < 0 ? -errno : fd;
            }
            return -errno;
        }
        if (S_ISLNK(st.st_mode) && (!last || !(flags & O_NOFOLLOW))) {
            if (++hops > kMaxHops) return -ELOOP;
            char buf[4096];
            ssize_t n = ::readlinkat(cur, c.c_str(), buf, sizeof buf - 1);
            if (n < 0) return -errno;
            std::string target(buf, static_cast<std::size_t>(n));
            auto parts = split_path("/" + target);
            for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_front(*it);
            if (!target.empty() && target.front() == '/') stack.resize(1);
            continue;
        }
        if (last) {
            int fd = ::openat(cur, c.c_str(), (flags | O_NOFOLLOW | O_CLOEXEC) & ~O_CREAT);
            return fd < 0 ? -errno : fd;
        }
        if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
        UniqueFd next(::openat(cur, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!next.valid()) return -errno;
        stack.push_back(std::move(next));
    }
    int fd = ::openat(stack.back().get(), ".", (flags & ~O_CREAT) | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

}  // namespace

int walk_in_root(int root, const std::string& path, int flags) { return walk(root, path, flags); }

int try_open_in_root(int root, const std::string& path, int flags) {
    int fd = sys::try_openat2(root, relative(path), static_cast<std::uint64_t>(flags),
                              RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
                              (flags & O_CREAT) ? 0644 : 0);
    // Refused (an old kernel, an outer seccomp filter), or still racing mounts after the
    // retries: the walk has the same semantics, one component at a time.
    if (fd == -ENOSYS || fd == -EPERM || fd == -EINVAL || fd == -EAGAIN) return walk(root, relative(path), flags);
    return fd;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        this->~MappedFile();
        data_ = o.data_, size_ = o.size_, guard_ = o.guard_;
        o.data_ = nullptr, o.size_ = 0, o.guard_ = nullptr;
    }
    return *this;
}

MappedFile::~MappedFile() {
    if (guard_) guard_->data = nullptr;
    if (size_) ::munmap(const_cast<char*>(data_), size_);
}

bool MappedFile::truncated() const { return guard_ && guard_->shrunk; }

int try_open_beneath(int dir, const std::string& rel, int flags, std::uint64_t resolve) {
    return sys::try_openat2(dir, rel, static_cast<std::uint64_t>(flags),
                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | resolve);
}

std::optional<MappedFile> map_regular_in_root(int root, const std::string& path, std::size_t limit) {
    int fd = try_open_in_root(root, path, O_RDONLY | O_NONBLOCK);  // a FIFO must not block the open
    if (fd < 0) return std::nullopt;
    UniqueFd f(fd);
    struct stat st {};
    if (::fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > limit) return std::nullopt;
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size == 0) return MappedFile();
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return std::nullopt;
    MappingGuard* guard = track(static_cast<const char*>(p), size);
    MappedFile out(static_cast<const char*>(p), size, guard);
    if (!guard) return std::nullopt;  // unguarded: as good as unreadable
    return out;
}

UniqueFd open_in_root(int root, const std::string& path, int flags) {
    int fd = try_open_in_root(root, path, flags);
    if (fd < 0) sys::fail(cat("openat2(root, ", quote(path), ", RESOLVE_IN_ROOT)"), -fd);
    return UniqueFd(fd);
}

}  // namespace gpubox::rootfs
