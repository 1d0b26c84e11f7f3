#pragma once
// The sandbox's resource use without a cgroup, read by the monitor, outside the sandbox, from the
// sandbox's own /proc (an fd of the proc instance init mounted, sent before anything of the
// workload ran: it lists exactly the sandbox's processes). The monitor is in the user namespace
// that owns the sandbox's, so it reads every entry, dumpable or not, and its reading is none of
// the workload's CPU. The parsers and the CPU ledger are pure.
//
// A pass costs O(processes): /proc/PID/stat for CPU; with a memory limit, /proc/PID/status too.
// Memory: the sum of what the workload can hold, each counted where the kernel shows it:
//  - resident private and shared memory per process (RssAnon + RssShmem), and its page tables
//    (VmPTE). Where that sum is over the limit and several processes may share pages (forked
//    workers' copy-on-write memory, a shared segment), by proportional share instead (Pss_Anon +
//    Pss_Shmem, from smaps_rollup: a page-table walk, so only then): shared pages count once;
//  - gpubox's tmpfs (every writable tmpfs place is one filesystem), from statfs;
//  - kernel memory held through open files: each open fd of each process charged kFdBytes (see
//    fd_charge), its count the size /proc/PID/fd stats at (Linux >= 6.2: no fd is read).
// Shared memory no process maps is made impossible instead of searched for (isolate/limits.hpp):
// memfd_create() is refused and a SysV segment dies with its last attach (shm_rmid_forced).
// A tmpfs file that is also mapped counts twice: conservative, never less than the truth.
//
// CPU: per process, its own time (dead threads included) and its waited-for children's
// (cutime). A child the kernel reaps by itself (its parent ignores SIGCHLD or set
// SA_NOCLDWAIT) adds its time to nobody's: see CpuLedger.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.hpp"
#include "isolate/sock_usage.hpp"
#include "isolate/tree_clock.hpp"

namespace gpubox::isolate {

struct Usage {
    std::uint64_t cpu_ns = 0;        // every process of the sandbox but init; dead ones included
    std::uint64_t memory_bytes = 0;  // as above
    std::uint32_t processes = 0;
    std::uint64_t rss_peak_bytes = 0;  // the largest VmHWM among them (the program's max-rss)
    std::uint32_t tasks = 0;           // their threads, all runnable perhaps
    bool partial = false;              // the pass stopped early: cpu_ns is already over the limit
    std::uint64_t socket_bytes = 0;    // socket buffers, in memory_bytes too (sock_usage.hpp)
    // For the report alone (memory_peak_kb): of memory_bytes, what several processes' resident
    // sets count more than once (forked workers' copy-on-write pages), known from their
    // proportional shares (Sampler::shared_pages). memory_bytes keeps them: the kill is
    // decided on it, and by the shares themselves only over the limit.
    std::uint64_t counted_twice = 0;
    std::uint64_t fds = 0;        // their open fds (read with their memory)
    std::vector<pid_t> runnable;  // those whose main thread is runnable (stat's R)
    // Read with memory: no process but init ran since the last pass, or came or went (each held
    // as before: holds_as_before), so nothing of the sandbox can have changed since then. Such a
    // pass reads no more than each process's stat and schedstat: init's stat, the tmpfs and the
    // sockets are as the last pass read them.
    bool quiet = false;
};

// One process, from /proc/<pid>/stat and /proc/<pid>/status.
struct ProcSample {
    pid_t pid = 0, ppid = 0;
    std::uint64_t start = 0;        // start time, in ticks: tells a reused pid from the old one
    std::uint64_t self_ns = 0;      // utime + stime, in whole clock ticks (10 ms)
    std::uint64_t exact_ns = 0;     // its main thread's run time to the ns (/proc/<pid>/schedstat)
    std::uint64_t children_ns = 0;  // cutime + cstime: summed in ns by the kernel, shown in ticks
    std::uint32_t threads = 1;
    bool ignores_sigchld = false;                   // SIG_IGN: the kernel reaps its children
    std::uint64_t anon_bytes = 0, shmem_bytes = 0;  // RssAnon, RssShmem
    std::uint64_t pte_bytes = 0;                    // VmPTE: its page tables
    std::uint64_t hwm_bytes = 0;                    // VmHWM: its peak resident set since its execve
    char state = 0;                                 // R, S, D, Z...: stat's third field
    std::uint64_t fds = 0;                          // its open fds (stat of /proc/<pid>/fd)
    std::uint64_t rss_pages = 0;                    // its resident set, in pages (stat's rss)
};

// What one open fd may hold of the kernel's memory that no count here sees, at most: a pipe past
// the per-user soft limit (fs.pipe-user-pages-soft), its 2 one-page slots filled, with its file,
// inode, dentry, pipe_inode_info and slot array, measured 9.4-9.7 KiB (Linux 6.18). An fd of any
// other kind holds less (an eventfd, timerfd, epoll, signalfd or pidfd 0.5-1.7 KiB, a unix socket
// 3.6 KiB before its buffers, counted apart; a regular file's struct file 0.3 KiB), a dup'ed one 8
// bytes. Pipe data below the soft limit (64 MiB per user, host-wide) is not charged: it is the
// bound's constant term. vmsplice, whose one slot can pin a whole 2 MiB huge page, is refused.
constexpr std::uint64_t kFdBytes = 12 << 10;
// Pure: what `fds` open fds are charged.
constexpr std::uint64_t fd_charge(std::uint64_t fds) { return fds * kFdBytes; }

// Pure: `s` as a whole decimal number (no sign, nothing after it).
bool to_u64(std::string_view s, std::uint64_t& v);
// Pure parsers. `stat` may have spaces and parentheses in its comm field (parsed after the
// last ')'); it gives the threads and whether SIGCHLD is ignored too (status says the same).
// Both false/nullopt on text that does not parse.
bool parse_proc_stat(const std::string& stat, std::uint64_t ns_per_tick, ProcSample& out);
bool parse_proc_status(const std::string& status, ProcSample& out);
// Pure. Whether process `p` holds the memory and fds it was read to hold at `was` (a pass
// reuses them instead of reading its status again): the same process, single-threaded, not
// runnable, its main thread's run time to the ns (schedstat) and its resident pages (stat)
// unchanged. Only a process's own running changes its mappings and fds; a page another process
// faults into it (process_vm_writev, /proc/PID/mem) shows in its resident pages.
bool holds_as_before(const ProcSample& p, const ProcSample& was);
// Sends `sig` to process `pid` of the sandbox through its directory in the sandbox's /proc
// (`proc`), used as a pidfd: whatever that pid names now is the sandbox's. Whether it was sent.
bool signal_process(int proc, pid_t pid, int sig);
// /proc/<pid>/smaps_rollup -> Pss_Anon + Pss_Shmem in bytes: its share of what it holds.
std::optional<std::uint64_t> parse_pss(const std::string& smaps_rollup);

// Pure. A sandbox's CPU time from what a pass read: `exact`, the sum over its live processes
// (their own time and their waited-for children's, a lower bound: a child the kernel reaps is in
// no one's); `charged`, the CpuLedger's total, that sum plus an upper bound for each such child;
// and `counted`, the kernel's perf count of the workload (isolate/tree_clock.hpp), if any. The
// count is close to the truth, not exact: it ends each process's count before its exit frees
// its memory (~50 us a process on Linux 6.18), and it holds the time the hypervisor stole from a
// vCPU while the workload ran on it, which the other two do not (5-6 % on the development VM
// beside other tests, 18 % once in a CI run). So it is held between the two: where nothing is charged, the exact sum
// alone, the count changing nothing; where the ledger charges, no more than the count says.
std::uint64_t bounded(std::optional<std::uint64_t> counted, std::uint64_t exact,
                      std::uint64_t charged);

// CPU time across samples. Live processes are summed (own + waited children). A child the
// kernel reaps by itself adds its time to nobody's, so:
//  - a parent that ignores SIGCHLD (SigIgn) reaps every child that way: each of its children
//    that vanished is charged what it had used when last seen, plus the sampling interval, the
//    most it can have run unseen since;
//  - any other parent's cutime must grow, over the run, by at least what its vanished children
//    had used when last seen (to the ns); where it grew by more than a clock tick less, the
//    parent reaps by SA_NOCLDWAIT (invisible in /proc): the difference is charged, and from then
//    on its children are charged as above;
//  - once the kernel is known to reap in the sandbox, each pid allocated and never seen (a
//    process that lived between two samples) is charged the interval, at most the capacity
//    the CPUs had left in it.
// Each charge is an upper bound: nothing runs for longer than the wall time it existed for.
class CpuLedger {
public:
    explicit CpuLedger(unsigned cpus) : cpus_(cpus ? cpus : 1) {}
    // `now`: every process but init; `pids_made`: pids allocated since the last update;
    // `interval_ns`: wall time since the last update. Returns the total so far.
    std::uint64_t update(const std::vector<ProcSample>& now, std::uint64_t pids_made,
                         std::uint64_t interval_ns);
    std::uint64_t charged_ns() const { return charged_; }  // the bounds' share of the total
    bool reaping_seen() const { return reaping_; }

private:
    struct Parent {
        std::uint64_t start = 0, children_first = 0;  // its cutime when first seen
        std::uint64_t owed = 0;     // what its vanished children had used when last seen
        std::uint64_t charged = 0;  // what was charged for it by the balance
        bool reaps = false;         // the kernel reaps its children
    };
    // The balance of parents whose cutime grew by less than their vanished children had used
    // (SA_NOCLDWAIT, which /proc does not show): what is charged for them now.
    std::uint64_t settle_parents(const std::map<pid_t, ProcSample>& cur);
    unsigned cpus_;
    std::map<pid_t, ProcSample> last_;
    std::map<pid_t, Parent> parents_;
    std::uint64_t charged_ = 0;
    std::uint64_t total_ = 0;
    bool reaping_ = false;
};

// Files of the sandbox's /proc that every pass reads again, kept open between passes: a read at
// offset 0 has the kernel write a /proc file afresh, so a pass over a small sandbox costs one
// pread a file, not an open, a read and a close. A kept file of a process that is gone reads
// ESRCH, even where its pid names another process by now: it is then opened again by its path.
// At most kMax are kept (the monitor's own fds are few); past them, each is opened every time.
class KeptFiles {
public:
    explicit KeptFiles(int dir) : dir_(dir) {}
    // Up to `cap` bytes of `name` (below the directory); empty where it cannot be read.
    std::string read(const std::string& name, std::size_t cap = 4096);
    // `name` stays open though this pass did not read it (a quiet pass: see Usage::quiet).
    void keep(const std::string& name);
    // The pass is over: the files it did not read (nor keep) are closed (their processes are gone).
    void end_pass();

private:
    struct File {
        UniqueFd fd;
        std::uint64_t pass = 0;  // the last pass that read it
    };
    static constexpr std::size_t kMax = 64;
    int dir_;
    std::uint64_t pass_ = 1;
    std::map<std::string, File> files_;
};

// Reads the sandbox's /proc (an fd of it) and gpubox's tmpfs (an fd of it, or -1), from the
// monitor. `memory_limit`: the limit the samples are held against (0: memory is not read).
class Sampler {
public:
    Sampler(int proc_fd, int tmpfs_fd, unsigned cpus, std::uint64_t memory_limit)
        : proc_(proc_fd), tmpfs_(tmpfs_fd), kept_(proc_fd), limit_(memory_limit), ledger_(cpus) {}
    // One pass. A pass whose processes so far already used more than `cpu_stop_ns` of CPU stops
    // there (Usage::partial): a fork bomb's thousand processes need not all be read to kill it.
    // `memory`: read memory even without a memory limit (the last pass: the program's peak).
    Usage sample(std::uint64_t cpu_stop_ns = 0, bool memory = false);
    // A sandbox of at most this many processes is small: a pass over it is made of schedstat
    // alone while nothing ran (nothing_ran; their stat, schedstat and status stay open), and
    // costs too little for the monitor to time.
    static constexpr std::size_t kQuietMax = 16;
    // The sandbox's epoll watches' and mappings' memory, counted apart by a walk
    // (isolate/kernel_walk.hpp): added to each pass's memory from now on.
    void set_walk_bytes(std::uint64_t bytes) { walk_bytes_ = bytes; }
    // The sandbox's socket buffers, through a sock_diag socket of its network namespace, and
    // its sockstat and sockstat6 as init opened them (readable after init is gone; invalid:
    // opened here, now, while init may still live): else the last pass, after init's exit, could
    // not tell what is in use, and would dump every kind, TCP's a walk of the whole host's hash
    // table (a run shorter than a pass: init gone before the monitor took its meters).
    void set_sockets(int diag, SockBounds bounds, UniqueFd sockstat = {}, UniqueFd sockstat6 = {}) {
        sockets_.emplace(diag, bounds);
        sockstat_ = std::move(sockstat), sockstat6_ = std::move(sockstat6);
        sock_stat(false);
    }
    // Between passes (the monitor's, every few ms): the last pass's memory with its unix socket
    // buffers read again, which fill at memcpy's speed, several times the rate passes are paced
    // for. Cheap: the sandbox's sockstat, and one dump where it has sockets. 0 without a meter.
    std::uint64_t resample_sockets();
    // The last pass's Usage::counted_twice (for resample_sockets' memory).
    std::uint64_t counted_twice() const { return counted_twice_; }
    // At least this long between two reads of the shares for the report alone (shared_pages),
    // and at least 50 times what the last one took (200 times where no new peak asks for it):
    // a read is a walk of each process's page tables (smaps_rollup), ~2 ms for a PyTorch job's
    // 5 processes on a real GPU.
    static constexpr std::uint64_t kShareGapNs = 250000000;
    // The sandbox had sockets (its sock_diag one aside, or TCP or UDP in use) when last read.
    bool has_sockets() const { return has_sockets_; }
    // Step mode: only `root`'s tree (task_tree) is the sandbox measured, `root` in init's place;
    // the pids made between passes are nobody's to charge (other tasks make them too).
    void set_root(pid_t root) { root_ = root; }
    // The kernel's count of the workload's CPU (isolate/tree_clock.hpp) bounds what the ledger
    // charges for children the kernel reaps: see bounded(). A pass with a CPU stop reads it at
    // its start and every kClockEvery processes.
    void set_clock(const TreeClock* clock) { clock_ = clock; }
    static constexpr std::size_t kClockEvery = 64;
    // Others may join the sandbox (run --name: gpubox exec enters it from outside): a quiet
    // pass lists its /proc all the same (see sample()).
    void set_joinable() { joinable_ = true; }
    // The sandbox's pid namespace is empty: its init was reaped, which the kernel allows only
    // once every other process of it is gone. A pass then lists no /proc (it would find no pid)
    // and reads what outlives the processes: the tmpfs, the socket buffers, the kernel's count.
    void set_ended() { ended_ = true; }
    // SIGKILL to every process of the sandbox but its init, each through its /proc directory
    // (pidfd_send_signal: no pid can be reused meanwhile), best effort. Killing init kills them
    // too, but only once init has run: among a crowd of runnable tasks that may take seconds,
    // in which the crowd runs on.
    void kill_all() const;
    // The kernel reaps children in the sandbox: their CPU is charged by the interval between
    // passes (CpuLedger), so passes must come at their period, not later.
    bool reaping() const { return ledger_.reaping_seen(); }
    // The pids the last pass listed (step mode: the task's tree), for a walk to take instead of
    // listing /proc again (KernelWalk::on_pass).
    const std::vector<std::string>& listed() const { return names_; }

private:
    int proc_, tmpfs_;
    KeptFiles kept_;  // stat, status, schedstat and sockstat, read every pass
    std::uint64_t limit_;
    CpuLedger ledger_;
    std::uint64_t last_pid_ = 0;  // the largest pid seen, the pids made since are new ones
    std::uint64_t last_ns_ = 0;
    std::optional<SocketMeter> sockets_;
    std::uint64_t without_sockets_ = 0;  // the last pass's memory but its socket buffers
    std::uint64_t tmpfs_bytes_ = 0, socket_bytes_ = 0;  // the last pass's (a quiet one reuses)
    bool has_sockets_ = false;
    UniqueFd sockstat_, sockstat6_;  // init's, where it sent them
    SockStat sock_stat(bool v6);     // the sandbox's sockstat (v6: and, if any, sockstat6)
    // Whether nothing of the sandbox ran since the last pass, by its processes' schedstat alone
    // (one pread each, no stat): the pids listed are the last pass's, each but init was then
    // single-threaded and not runnable, and none's main thread has run since (its run time to
    // the ns). Then no process can have changed another either (process_vm_writev, /proc/PID/mem:
    // the writer runs), nor forked, nor reaped: each is as the last pass read it. For at most
    // kQuietMax processes (a sandbox that large is rarely quiet; the check is one more read).
    bool nothing_ran(const std::vector<std::string>& names, const std::string& init_name);
    std::vector<std::string> pids();  // the pids in the sandbox's /proc, through listing_
    UniqueFd listing_;  // the sandbox's /proc, open to be listed (proc_ is an O_PATH fd)
    std::vector<std::string> names_;              // the last pass's pids
    std::unordered_map<pid_t, ProcSample> last_;  // the last whole pass's samples
    pid_t root_ = 0;  // step mode: the task's init; 0: the whole pid namespace, init pid 1
    std::uint64_t walk_bytes_ = 0;
    // The processes' shares as last read (by_share): what they held by their resident sets then
    // (resident_since), the shares' sum, and the largest pid then (0: never read).
    struct Shares {
        std::uint64_t resident = 0, by_share = 0, max_pid = 0;
    };
    Shares shares_;
    std::uint64_t shares_due_ = 0, refresh_due_ = 0;  // when shared_pages may read them again
    std::uint64_t report_peak_ = 0;    // the most of the processes' memory the report was given
    std::uint64_t counted_twice_ = 0;  // the last pass's Usage::counted_twice
    std::uint64_t shared_pages(const std::vector<ProcSample>& procs, std::uint64_t max_pid,
                               std::uint64_t resident, std::uint64_t t, pid_t init);
    // The processes' memory by share, read now (at most `resident`) and kept in shares_.
    std::uint64_t read_shares(const std::vector<ProcSample>& procs, std::uint64_t max_pid,
                              std::uint64_t resident, pid_t init);
    bool joinable_ = false;
    bool ended_ = false;
    const TreeClock* clock_ = nullptr;
    bool last_quiet_ = false;  // the last pass was quiet (and whole)
};

// Step mode: the processes of a pid namespace's /proc (`proc`, an fd of it) that descend from
// `root` (a joined task's init, as that namespace numbers it; a subreaper, so its workload's
// orphans stay below it), `root` first: one task's processes among its step's.
std::vector<pid_t> task_tree(int proc, pid_t root);

}  // namespace gpubox::isolate
