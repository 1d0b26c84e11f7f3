#include "common/mapped_file.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>

namespace gpubox {

// A live mapping, as the SIGBUS handler sees it; its MappedFile holds its slot.
struct MappingGuard {
    const char* data;
    std::size_t size;
    volatile sig_atomic_t shrunk;
};

namespace {

// The slots of the live mappings: a handful at most are alive at once.
MappingGuard g_live[8];
struct sigaction g_previous_sigbus;
std::uintptr_t g_page_mask;

// Async-signal-safe: mmap and sigaction only. A fault in a guarded mapping gets a page of zeros
// and the read is retried; any other one restores the previous disposition, so the fault
// repeats as if it had never been caught.
void on_sigbus(int, siginfo_t* si, void*) {
    const char* at = static_cast<const char*>(si->si_addr);
    for (MappingGuard& m : g_live) {
        if (!m.data || at < m.data || at >= m.data + m.size) continue;
        void* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(at) & g_page_mask);
        if (::mmap(page, ~g_page_mask + 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                   0) == MAP_FAILED)
            break;
        m.shrunk = 1;
        return;
    }
    ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
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

}  // namespace

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

std::optional<MappedFile> map_regular(const UniqueFd& file, std::size_t limit) {
    struct stat st {};
    if (::fstat(file.get(), &st) < 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_size) > limit)
        return std::nullopt;
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size == 0) return MappedFile();
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.get(), 0);
    if (p == MAP_FAILED) return std::nullopt;
    MappingGuard* guard = track(static_cast<const char*>(p), size);
    MappedFile out(static_cast<const char*>(p), size, guard);
    if (!guard) return std::nullopt;  // unguarded: as good as unreadable (out unmaps it)
    return out;
}

}  // namespace gpubox
