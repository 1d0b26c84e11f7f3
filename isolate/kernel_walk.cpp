#include "isolate/kernel_walk.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
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

// The lines of a /proc file below `dir`, read in chunks however long it is (a maps file: a line
// per mapping, 65530 of them 4-6 MiB of text): the monitor holds no copy of it.
std::uint64_t lines_in(int dir, const char* name) {
    const int fd = ::openat(dir, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const UniqueFd own(fd);
    std::uint64_t n = 0;
    char buf[65536];
    for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;)
        n += count_lines(std::string_view(buf, static_cast<std::size_t>(got)));
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

KernelWalk::~KernelWalk() {
    if (!thread_.joinable()) return;
    {
        const std::lock_guard<std::mutex> lock(mu_);  // not between its test and its wait
        stop_.store(true, std::memory_order_relaxed);
    }
    cv_.notify_all();
    thread_.join();
}

std::uint64_t count_lines(std::string_view text) {
    return static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

void Tally::order(std::vector<Key>& keys) const {
    std::stable_partition(keys.begin(), keys.end(),
                          [&](Key k) { return !last_.contains(k) || grew_.contains(k); });
}

std::uint64_t Tally::read(Key k, std::uint64_t bytes) {
    const auto was = last_.find(k);
    const std::uint64_t before = was == last_.end() ? 0 : was->second;
    now_[k] = bytes;
    charge_ = charge_ - std::min(charge_, before) + bytes;
    if (bytes > before) growing_ += bytes - before, growing_keys_.insert(k);
    return charge_;
}

std::vector<pid_t> Tally::growing_pids() const {
    std::vector<pid_t> pids;
    for (const Key k : growing_keys_) pids.push_back(pid_of(k));
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    return pids;
}

void Tally::end(bool whole) {
    std::unordered_set<Key> grew = std::move(growing_keys_);
    growing_keys_.clear();
    if (whole) {
        last_ = std::move(now_);
        charge_ = 0;  // (what was not read is gone)
        for (const auto& [k, bytes] : last_) charge_ += bytes;
    } else {
        for (const Key k : grew_)  // grown before and not read since: still read first
            if (!now_.contains(k)) grew.insert(k);
        for (const auto& [k, bytes] : now_) last_[k] = bytes;
    }
    now_.clear();
    grew_ = std::move(grew);
    grown_bytes_ = growing_;
    growing_ = 0;
}

std::uint64_t KernelWalk::bytes() const {
    return std::max(whole_.load(std::memory_order_relaxed),
                    partial_.load(std::memory_order_relaxed));
}

KernelWalk::Walked KernelWalk::cycle(const std::vector<std::string>* listed) {
    std::vector<std::string> pids;
    if (listed)
        pids = *listed;  // the pass's: task_tree()'s in step mode, else every pid, init's too
    else if (root_)
        for (pid_t pid : task_tree(proc_, root_)) pids.push_back(std::to_string(pid));
    else pids = sys::try_list_dir(proc_, ".").value_or(std::vector<std::string>{});
    // (init, pid 1, is gpubox's; in step mode the task's init, root_, is the workload's)
    std::erase_if(pids, [&](const std::string& name) {
        return (!root_ && name == "1") || !std::isdigit(static_cast<unsigned char>(name[0]));
    });
    // Every source first (a link read per fd), then each read, what grew first (Tally).
    constexpr std::string_view kEpoll = "anon_inode:[eventpoll]", kSocket = "socket:[";
    char link[64];
    Inodes socks;  // a step's task's sockets (count_host_sockets())
    std::vector<Tally::Key> sources;
    for (const std::string& name : pids) {
        const int dir = ::openat(proc_, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) continue;  // gone meanwhile
        const UniqueFd own(dir);
        const auto pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
        sources.push_back(Tally::key(pid, -1));
        for (const std::string& fd :
             numbers_in(::openat(dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC))) {
            const ssize_t n = ::readlinkat(dir, ("fd/" + fd).c_str(), link, sizeof link);
            const std::string_view what(link, n < 0 ? 0 : static_cast<std::size_t>(n));
            if (sockets_ && what.substr(0, kSocket.size()) == kSocket)
                socks.insert(
                    static_cast<std::uint32_t>(std::strtoul(link + kSocket.size(), nullptr, 10)));
            if (what == kEpoll)
                sources.push_back(
                    Tally::key(pid, static_cast<int>(std::strtol(fd.c_str(), nullptr, 10))));
        }
        if (stop_.load(std::memory_order_relaxed)) break;
    }
    tally_.order(sources);
    Walked w;
    bool cut = false;
    bool held = false;  // hold_below() made this walk
    for (const Tally::Key k : sources) {
        const pid_t pid = Tally::pid_of(k);
        const int fd = Tally::fd_of(k);
        std::uint64_t bytes = 0;
        if (fd < 0) {
            bytes = lines_in(proc_, (std::to_string(pid) + "/maps").c_str()) * kVmaBytes;
        } else {
            const std::uint64_t watches =
                watches_in(proc_, std::to_string(pid) + "/fdinfo/" + std::to_string(fd));
            w.watches += watches;
            bytes = watches * kWatchBytes;
        }
        // Published as it grows; once it alone fills the room, the walk stops there.
        const std::uint64_t charge = tally_.read(k, bytes) + sock_bytes_;
        partial_.store(charge, std::memory_order_relaxed);
        const std::uint64_t room = room_.load(std::memory_order_relaxed);
        // Grown by more than kGrowthBytes so far, to a quarter of the room or more: the sessions
        // of those that grew go below the monitor now, before the walk goes on (a step's task's
        // session is the step's: not there).
        if (!held && !root_ && tally_.growing() > kGrowthBytes && charge > room / 4) {
            hold_below(tally_.growing_pids());
            held = true;
        }
        if (charge > room || stop_.load(std::memory_order_relaxed)) {
            cut = true;
            break;
        }
    }
    tally_.end(!cut);
    if (sockets_ && !cut) sock_bytes_ = sockets_->sample_of(socks);
    w.bytes = tally_.charge() + sock_bytes_;
    w.grown = tally_.grown();
    partial_.store(w.bytes, std::memory_order_relaxed);
    return w;
}

// Each process's session (an autogroup where autogroups apply: gpubox's init started the
// workload in a session of its own, and where a crowd may form refuses it new ones) to nice 19,
// but the monitor's own. The kernel takes one such change a tenth of a second host-wide from a
// caller without CAP_SYS_ADMIN (EAGAIN): the next walk that finds growth tries again. Elsewhere
// (a child cpu cgroup, where the workload's SCHED_IDLE already puts it below the monitor) the
// autogroup's nice is kept and unused. Only sessions made in the sandbox are written: init's is
// the monitor's, and nothing else in the sandbox can be in a session from outside it.
void KernelWalk::hold_below(const std::vector<pid_t>& pids) {
    if (own_group_.empty()) {
        const std::string own = sys::try_read_at(AT_FDCWD, "/proc/self/autogroup", 128);
        own_group_ = own.substr(0, own.find(' '));  // "/autogroup-N nice 0": "/autogroup-N"
        if (own_group_.empty()) own_group_ = "-";   // (none: every group is another's)
    }
    for (const pid_t pid : pids) {
        const std::string path = std::to_string(pid) + "/autogroup";
        const std::string now = sys::try_read_at(proc_, path, 128);
        const std::string group = now.substr(0, now.find(' '));
        if (group.empty() || group == own_group_ || held_.contains(group)) continue;
        const int fd = ::openat(proc_, path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        const UniqueFd own(fd);
        if (::write(fd, "19", 2) == 2) held_.insert(group);
    }
}

void KernelWalk::count_host_sockets(UniqueFd diag, SockBounds bounds) {
    diag_ = std::move(diag);
    sockets_.emplace(diag_.get(), bounds);
}

// 10 ms after a walk that found more than kGrowthBytes more; else at most half a CPU (as long
// again as the walk ran), 10 ms apart while there are watches, 100 ms while there are none.
std::uint64_t KernelWalk::pause_ns(const Walked& w, std::uint64_t ran) const {
    if (w.grown > kGrowthBytes) return 10'000'000;
    return std::max<std::uint64_t>(ran, w.watches ? 10'000'000 : 100'000'000);
}

void KernelWalk::on_pass(std::uint64_t fds, const std::vector<std::string>* listed, bool quiet) {
    if (!quiet) stale_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) return;
    if (fds > kInlineFds || dear_ >= kDearWalks) {
        thread_ = std::thread([this] { run(); });
        return;
    }
    const std::uint64_t now = sys::monotonic_ns();
    if (now < next_ns_ || !stale_.load(std::memory_order_relaxed)) return;
    // (a process that runs during the walk makes the next pass not quiet)
    stale_.store(false, std::memory_order_relaxed);
    const std::uint64_t c0 = thread_cpu_ns();
    const Walked w = cycle(listed);
    whole_.store(w.bytes, std::memory_order_relaxed);
    partial_.store(0, std::memory_order_relaxed);
    last_ran_ = thread_cpu_ns() - c0;
    dear_ = last_ran_ > inline_ns_ ? dear_ + 1 : 0;
    next_ns_ = now + pause_ns(w, last_ran_);
}

// Walks as on_pass() would, but for the pause: while every pass since its last walk began was
// quiet, the walk would find what it found then, and an idle sandbox's thread only waits.
void KernelWalk::run() {
    Walked w;
    for (;;) {
        std::uint64_t ran = 0;
        if (stale_.exchange(false, std::memory_order_relaxed)) {
            const std::uint64_t c0 = thread_cpu_ns();
            w = cycle(nullptr);
            whole_.store(w.bytes, std::memory_order_relaxed);
            partial_.store(0, std::memory_order_relaxed);
            ran = thread_cpu_ns() - c0;
        }
        const auto pause = std::chrono::nanoseconds(pause_ns(w, ran));
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, pause, [this] { return stop_.load(std::memory_order_relaxed); }))
            return;
    }
}

}  // namespace gpubox::isolate
