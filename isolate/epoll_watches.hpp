#pragma once
// The sandbox's epoll watches, counted off the monitor's pass (#31). A watch (an epitem and its
// eppoll_entry, 200 bytes of slab measured on Linux 6.18) lives while its target FILE does, not
// the fd it was added through: one file dup'ed to each fd number in turn gives an epoll up to
// RLIMIT_NOFILE watches on it, and N files up to N times that, with a handful of fds open. Only
// fs.epoll.max_user_watches (4 % of the host's memory, per user, host-wide) caps them, so they are
// counted: /proc/PID/fdinfo/<epoll fd> lists one "tfd:" line per watch.
//
// Finding the epoll fds means reading every fd of every process: O(open fds), which the pass must
// never be (a crowd of sleepers holding thousands of fds each would put the next pass off). So a
// thread of its own does it, in a loop: every fd's link read, each epoll's fdinfo read whole, the
// count published as it grows, and a cycle cut short once the count alone fills the room the
// last pass left under the limit. The pass adds the larger of the last whole cycle's count and
// the current one's so far. How far it lags: a cycle costs about a microsecond per open fd (and
// the fd charge kills past limit / 12 KiB of them) plus reading the watches counted, and the
// sandbox can add watches meanwhile only as fast as the kernel makes them. Reading an fd's link
// leaves a /proc dentry and inode behind (about 0.9 KiB, reclaimable) until its process exits.
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>

namespace gpubox::isolate {

constexpr std::uint64_t kWatchBytes = 256;  // one watch's slab (200 bytes) and its share of a page

// Pure: the watches an epoll's fdinfo lists (its "tfd:" lines).
std::uint64_t count_watches(std::string_view fdinfo);

class EpollWatches {
public:
    // `proc`: an fd of the sandbox's /proc (outlives this); `root`: step mode's task init, whose
    // tree alone is counted (0: every process but pid 1, gpubox's init).
    EpollWatches(int proc, pid_t root);
    ~EpollWatches();
    EpollWatches(const EpollWatches&) = delete;
    EpollWatches& operator=(const EpollWatches&) = delete;
    // What the watches are charged: the larger of the last whole cycle's count and this one's.
    std::uint64_t bytes() const;
    // The room under the limit the last pass left: a cycle whose count fills it stops there.
    void set_room(std::uint64_t bytes) { room_.store(bytes, std::memory_order_relaxed); }

private:
    void run();
    std::uint64_t cycle();  // one walk over the sandbox's fds: the watches found
    int proc_;
    pid_t root_;
    std::atomic<std::uint64_t> whole_{0}, partial_{0}, room_{~0ULL};
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace gpubox::isolate
