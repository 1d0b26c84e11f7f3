#pragma once
// Kernel memory the pass cannot see, found by walking each process of the sandbox off the pass
// (#31): its epoll watches (through its fds) and its mappings (its maps).
//
// Epoll watches. A watch (an epitem and its eppoll_entry, 200 bytes of slab measured on Linux
// 6.18) lives while its target FILE does, not the fd it was added through: one file dup'ed to
// each fd number in turn gives an epoll up to RLIMIT_NOFILE watches on it, and N files up to N
// times that, with a handful of fds open. Only fs.epoll.max_user_watches (4 % of the host's
// memory, per user, host-wide) caps them, so they are counted: /proc/PID/fdinfo/<epoll fd>
// lists one "tfd:" line per watch.
//
// Mappings. Each is a vm_area_struct (192 bytes of slab, and its share of the maple tree's
// nodes), up to vm.max_map_count (65530) a process, whether or not a page backs it: one
// PROT_NONE reservation with every other page made readable holds 65530 of them, 15 MiB of
// kernel memory, and no resident page or page table the pass would see (measured: 1.2 million
// across 20 processes held 231 MiB under --memory-limit 64M, unkilled). Counted: a line of
// /proc/PID/maps each, kVmaBytes a mapping.
//
// Finding the epoll fds means reading every fd of every process, and the mappings every line
// of every maps: O(open fds + mappings), which the pass must never be (a crowd of sleepers
// holding thousands of fds each would put the next pass off). So the walk is apart, its total
// published as it grows, and cut short once the total alone fills the room the last pass left
// under the limit. The pass adds the larger of the last whole walk's total and the current one's
// so far. How far it lags: a walk costs about a microsecond per open fd and per mapping (and
// the fd charge kills past limit / 12 KiB fds, the count past limit / kVmaBytes mappings) plus
// reading the watches counted, and the sandbox adds watches and mappings meanwhile only as fast
// as the kernel makes them. Reading an fd's link leaves a /proc dentry and inode behind (about
// 0.9 KiB, reclaimable) until its process exits.
//
// Reading a watch costs about what making one does (0.8 us against 0.9, Linux 6.18: its fdinfo
// line is formatted, in a buffer doubled and formatted again until it fits), and the workload
// may get more CPU than the walk (under autogroups it is a session of its own, as heavy as the
// monitor's). So a walk reads first what grew: it lists every source (each process's mappings,
// each of its epoll fds) before reading any, reads those new since the last walk or grown in it
// first, and while it goes on charges each source read at its new count and every other at the
// last walk's (Tally): a source that grows is charged as soon as it is read again, not once the
// walk is done. While a walk finds more than kGrowthBytes more, the next follows 10 ms after it,
// whatever it cost; a sandbox that holds still has its walks cost at most half a CPU.
//
// Neither helps where the walk gets a fraction of the workload's CPU: under autogroups the
// workload is a session of its own, as heavy as the monitor's, which the monitor shares with
// whatever else runs in the session gpubox was started from. Measured on the 2-CPU VM, 1.5
// million watches made as fast as one process can, --memory-limit 64M, eight busy loops in
// gpubox's session: the walk ran 0.17 s of CPU in 1.2 s, and all of them were made (300 MiB
// held) before the kill. So a walk that finds more than kGrowthBytes more, and a quarter of the
// room or more, puts the session of each process that grew at nice 19 (hold_below();
// docs/limits.md): with four busy loops there, 54-83 MiB held (before, 207-300).
//
// Socket buffers of a step's task. The task shares the host's network namespace with the step's
// other tasks (multi-node ranks), where a dump lists every socket of the host: the walk collects
// the inodes of the task's sockets (each fd's link, "socket:[N]", read anyway) and charges what
// those hold, from one dump of each family and protocol in the monitor's (the same) namespace,
// with the bounds of isolate/sock_usage.hpp (count_host_sockets()). Only a step's task: a
// sandbox with a network namespace of its own is counted whole at each pass.
//
// Who walks: a sandbox with few open fds (kInlineFds, as the pass counted them), whose walks are
// cheap (kInlineNs), is walked by the monitor's own thread, after a pass, as often as a thread
// would: a walk of a few fds and mappings costs less than a thread's wakeups (a sleeping
// sandbox's monitor spent a quarter of its CPU in one) and a run shorter than a pass never
// starts one. Past either, a thread of its own walks from then on, 10 ms apart while there are
// watches, 100 ms while there are none, and at most half a CPU but while what it counts grows
// (above); like the monitor's own walk, not again while every pass since its last was quiet.
// Dear means two walks in a row (kDearWalks): a first walk is the dearest (cold caches, the
// stack it first touches). In a CI run on a loaded VM the first walk of a sleeper (two fds, few
// mappings) alone took over 1 ms, and a thread walked it for the rest of the run, listing its
// /proc ten times a second (the monitor's idle second: 46 directory listings where 8 are made).
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/unique_fd.hpp"
#include "isolate/sock_usage.hpp"

namespace gpubox::isolate {

constexpr std::uint64_t kWatchBytes = 256;  // one watch's slab (200 bytes) and its share of a page
constexpr std::uint64_t kVmaBytes = 256;    // one mapping's vm_area_struct and maple tree share
constexpr std::uint64_t kInlineFds = 64;    // up to this many open fds, no thread: see above
constexpr std::uint64_t kInlineNs = 1'000'000;  // and walks of at most this much CPU,
constexpr unsigned kDearWalks = 2;              // not this many dearer ones in a row

// Pure: the watches an epoll's fdinfo lists (its "tfd:" lines).
std::uint64_t count_watches(std::string_view fdinfo);
// Pure: the lines of a text (a maps file's mappings).
std::uint64_t count_lines(std::string_view text);

// A walk grew by more than this (the next follows at once): 4096 watches or mappings.
constexpr std::uint64_t kGrowthBytes = 1ULL << 20;

// Pure: what each source a walk reads (a process's mappings, one of its epoll fds) held at the
// last walk, and the charge of a walk under way: the last total, with each source read so far
// at its new count.
class Tally {
public:
    using Key = std::uint64_t;
    static Key key(pid_t pid, int fd) {  // fd -1: the process's mappings
        return (static_cast<Key>(static_cast<std::uint32_t>(pid)) << 32) |
               static_cast<std::uint32_t>(fd + 1);
    }
    static pid_t pid_of(Key k) { return static_cast<pid_t>(k >> 32); }
    static int fd_of(Key k) { return static_cast<int>(k & 0xffffffffU) - 1; }
    // The sources a walk found, in the order to read them: new since the last walk or grown in
    // it first, each group in the order found.
    void order(std::vector<Key>& keys) const;
    // Source `k` read this walk at `bytes` (each once a walk); returns the charge now.
    std::uint64_t read(Key k, std::uint64_t bytes);
    // The walk is over. `whole`: every source was read, and one not read is gone; else (cut
    // short) one not read keeps its last count.
    void end(bool whole);
    std::uint64_t charge() const { return charge_; }      // the last total until a source is read
    std::uint64_t grown() const { return grown_bytes_; }  // the last walk's growth, new sources too
    std::uint64_t growing() const { return growing_; }    // this walk's so far
    std::vector<pid_t> growing_pids() const;              // whose sources grew this walk so far

private:
    std::unordered_map<Key, std::uint64_t> last_, now_;
    std::unordered_set<Key> grew_;          // read at the last walk, and more than before (or new)
    std::unordered_set<Key> growing_keys_;  // read this walk, and more than before (or new)
    std::uint64_t charge_ = 0, grown_bytes_ = 0, growing_ = 0;
};

class KernelWalk {
public:
    // `proc`: an fd of the sandbox's /proc (outlives this); `root`: step mode's task init, whose
    // tree alone is counted (0: every process but pid 1, gpubox's init). No walk yet: on_pass().
    // `inline_ns`: kInlineNs but in tests.
    KernelWalk(int proc, pid_t root, std::uint64_t inline_ns = kInlineNs)
        : proc_(proc), root_(root), inline_ns_(inline_ns) {}
    ~KernelWalk();
    KernelWalk(const KernelWalk&) = delete;
    KernelWalk& operator=(const KernelWalk&) = delete;
    // What the watches and mappings are charged: the larger of the last whole walk's total and
    // this one's so far.
    std::uint64_t bytes() const;
    // The room under the limit the last pass left: a cycle whose count fills it stops there.
    void set_room(std::uint64_t bytes) { room_.store(bytes, std::memory_order_relaxed); }
    // A step's task: count its sockets' buffers too, through `diag` (a NETLINK_SOCK_DIAG socket
    // of the monitor's network namespace, which the task shares). Before the first on_pass().
    void count_host_sockets(UniqueFd diag, SockBounds bounds);
    // After each pass that holds the sandbox to its limit, with the open fds it counted: a walk
    // here where they are few and the last is old enough, else the thread, from now on.
    // `listed`: the pass's own listing of the sandbox's /proc (its pids, as it read them), walked
    // instead of listing it again (nullptr: listed here). `quiet`: the pass found that nothing of
    // the sandbox ran, came or went since the pass before (Usage::quiet); while every pass since
    // the last walk was, the walk would find what it found then, and is not made again.
    void on_pass(std::uint64_t fds, const std::vector<std::string>* listed = nullptr,
                 bool quiet = false);

private:
    struct Walked {
        std::uint64_t bytes = 0;    // watches and mappings, charged
        std::uint64_t watches = 0;  // of which epoll watches
        std::uint64_t grown = 0;    // more than the walk before found (Tally::grown)
    };
    void run();
    std::uint64_t pause_ns(const Walked& w, std::uint64_t ran) const;
    Walked cycle(const std::vector<std::string>* listed);  // one walk over its processes
    Tally tally_;                   // cycle()'s, one walk at a time (the caller's or the thread's)
    std::uint64_t sock_bytes_ = 0;  // cycle()'s last count of a step's task's sockets
    void hold_below(const std::vector<pid_t>& pids);  // their sessions below the monitor
    std::string own_group_;                           // the monitor's autogroup ("/autogroup-N")
    std::unordered_set<std::string> held_;            // autogroups hold_below() set to nice 19
    int proc_;
    pid_t root_;
    std::uint64_t inline_ns_;
    UniqueFd diag_;  // count_host_sockets()'s, with:
    std::optional<SocketMeter> sockets_;
    std::atomic<std::uint64_t> whole_{0}, partial_{0}, room_{~0ULL};
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<bool> stop_{false};
    std::uint64_t next_ns_ = 0;      // on_pass() walks again from then (monotonic), if no thread
    std::uint64_t last_ran_ = 0;     // the CPU on_pass()'s last walk took
    unsigned dear_ = 0;              // on_pass()'s last walks in a row of more than inline_ns_
    std::atomic<bool> stale_{true};  // a pass since the last walk began was not quiet (or none yet)
    std::thread thread_;             // not joinable until a pass saw more than kInlineFds
};

}  // namespace gpubox::isolate
