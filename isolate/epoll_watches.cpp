#include "isolate/epoll_watches.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>
#include <vector>

#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/unique_fd.hpp"
#include "isolate/usage.hpp"

namespace gpubox::isolate {
namespace {

// The names in a directory opened as `fd` (consumed), numbers only.
std::vector<std::string> numbers_in(int fd) {
    std::vector<std::string> out;
    DIR* d = ::fdopendir(fd);
    if (!d) {
        ::close(fd);
        return out;
    }
    while (const dirent* e = ::readdir(d))
        if (std::isdigit(static_cast<unsigned char>(e->d_name[0]))) out.emplace_back(e->d_name);
    ::closedir(d);
    return out;
}

// The watches an epoll's fdinfo lists, read in chunks however long it is (a line per watch):
// the monitor holds no copy of it.
std::uint64_t watches_in(int dir, const std::string& name) {
    const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const UniqueFd own(fd);
    std::uint64_t n = 0;
    char buf[65536];
    // Each chunk after the last one's 4 bytes (a line's start may span two; "\ntfd:" is 5, so
    // none is counted twice), behind a byte that starts no line; the first behind a newline.
    std::string text = "\n";
    for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;) {
        text.append(buf, static_cast<std::size_t>(got));
        n += count_watches(text);
        text = "-" + text.substr(text.size() - 4);
    }
    return n;
}

std::uint64_t thread_cpu_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL +
           static_cast<std::uint64_t>(t.tv_nsec);
}

}  // namespace

std::uint64_t count_watches(std::string_view fdinfo) {
    std::uint64_t n = fdinfo.substr(0, 4) == "tfd:" ? 1 : 0;
    for (std::size_t at = 0; (at = fdinfo.find("\ntfd:", at)) != std::string_view::npos; ++at) ++n;
    return n;
}

EpollWatches::~EpollWatches() {
    if (!thread_.joinable()) return;
    {
        const std::lock_guard<std::mutex> lock(mu_);  // not between its test and its wait
        stop_.store(true, std::memory_order_relaxed);
    }
    cv_.notify_all();
    thread_.join();
}

std::uint64_t EpollWatches::bytes() const {
    return std::max(whole_.load(std::memory_order_relaxed),
                    partial_.load(std::memory_order_relaxed)) *
           kWatchBytes;
}

std::uint64_t EpollWatches::cycle() {
    std::vector<std::string> pids;
    if (root_)
        for (pid_t pid : task_tree(proc_, root_)) pids.push_back(std::to_string(pid));
    else
        for (std::string& name : sys::try_list_dir(proc_, ".").value_or(std::vector<std::string>{}))
            if (name != "1" && std::isdigit(static_cast<unsigned char>(name[0])))
                pids.push_back(std::move(name));
    std::uint64_t watches = 0;
    constexpr std::string_view kEpoll = "anon_inode:[eventpoll]";
    char link[64];
    for (const std::string& pid : pids) {
        const int dir = ::openat(proc_, pid.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) continue;  // gone meanwhile
        const UniqueFd own(dir);
        for (const std::string& fd :
             numbers_in(::openat(dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC))) {
            const ssize_t n = ::readlinkat(dir, ("fd/" + fd).c_str(), link, sizeof link);
            if (n < 0 || std::string_view(link, static_cast<std::size_t>(n)) != kEpoll) continue;
            watches += watches_in(dir, "fdinfo/" + fd);
            partial_.store(watches, std::memory_order_relaxed);
            if (watches * kWatchBytes > room_.load(std::memory_order_relaxed)) return watches;
        }
        if (stop_.load(std::memory_order_relaxed)) break;
    }
    return watches;
}

// At most half a CPU (as long again as the cycle ran); 10 ms apart while there are watches,
// 100 ms while there are none.
std::uint64_t EpollWatches::pause_ns(std::uint64_t found, std::uint64_t ran) const {
    return std::max<std::uint64_t>(ran, found ? 10'000'000 : 100'000'000);
}

void EpollWatches::on_pass(std::uint64_t fds) {
    if (thread_.joinable()) return;
    if (fds > kInlineFds) {
        thread_ = std::thread([this] { run(); });
        return;
    }
    const std::uint64_t now = sys::monotonic_ns();
    if (now < next_ns_) return;
    const std::uint64_t c0 = thread_cpu_ns(), found = cycle();
    whole_.store(found, std::memory_order_relaxed);
    partial_.store(0, std::memory_order_relaxed);
    next_ns_ = now + pause_ns(found, thread_cpu_ns() - c0);
}

void EpollWatches::run() {
    for (;;) {
        const std::uint64_t c0 = thread_cpu_ns();
        const std::uint64_t found = cycle();
        whole_.store(found, std::memory_order_relaxed);
        partial_.store(0, std::memory_order_relaxed);
        const auto pause = std::chrono::nanoseconds(pause_ns(found, thread_cpu_ns() - c0));
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, pause, [this] { return stop_.load(std::memory_order_relaxed); }))
            return;
    }
}

}  // namespace gpubox::isolate
