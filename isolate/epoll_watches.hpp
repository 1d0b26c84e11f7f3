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
//
// A sandbox with few open fds (kInlineFds, as the pass counted them) is walked by the monitor's
// own thread instead, after a pass, as often as the thread would: a walk of a few fds costs less
// than a thread's wakeups (a sleeping sandbox's monitor spent a quarter of its CPU in that thread)
// and a run shorter than a pass never starts one. The first pass with more starts the thread,
// which walks from then on.
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>

namespace gpubox::isolate {

constexpr std::uint64_t kWatchBytes = 256;  // one watch's slab (200 bytes) and its share of a page
constexpr std::uint64_t kInlineFds = 64;    // up to this many open fds, no thread: see above

// Pure: the watches an epoll's fdinfo lists (its "tfd:" lines).
std::uint64_t count_watches(std::string_view fdinfo);

class EpollWatches {
public:
    // `proc`: an fd of the sandbox's /proc (outlives this); `root`: step mode's task init, whose
    // tree alone is counted (0: every process but pid 1, gpubox's init). No walk yet: on_pass().
    EpollWatches(int proc, pid_t root) : proc_(proc), root_(root) {}
    ~EpollWatches();
    EpollWatches(const EpollWatches&) = delete;
    EpollWatches& operator=(const EpollWatches&) = delete;
    // What the watches are charged: the larger of the last whole cycle's count and this one's.
    std::uint64_t bytes() const;
    // The room under the limit the last pass left: a cycle whose count fills it stops there.
    void set_room(std::uint64_t bytes) { room_.store(bytes, std::memory_order_relaxed); }
    // After each pass that holds the sandbox to its limit, with the open fds it counted: a walk
    // here where they are few and the last is old enough, else the thread, from now on.
    void on_pass(std::uint64_t fds);

private:
    void run();
    std::uint64_t pause_ns(std::uint64_t found, std::uint64_t ran) const;
    std::uint64_t cycle();  // one walk over the sandbox's fds: the watches found
    int proc_;
    pid_t root_;
    std::atomic<std::uint64_t> whole_{0}, partial_{0}, room_{~0ULL};
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<bool> stop_{false};
    std::uint64_t next_ns_ = 0;  // on_pass() walks again from then (monotonic), if no thread
    std::thread thread_;         // not joinable until a pass saw more than kInlineFds
};

}  // namespace gpubox::isolate
