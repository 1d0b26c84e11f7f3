#include "isolate/usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/unique_fd.hpp"

namespace gpubox::isolate {

bool to_u64(std::string_view s, std::uint64_t& v) {
    const auto n = parse_whole<std::uint64_t>(s);
    if (n) v = *n;
    return n.has_value();
}

namespace {

// The leading decimal number of `s` after any blanks ("  123 kB"), if any.
std::optional<std::uint64_t> leading_u64(std::string_view s) {
    const auto at = s.find_first_not_of(" \t");
    if (at == std::string_view::npos) return std::nullopt;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data() + at, s.data() + s.size(), v);
    if (ec != std::errc()) return std::nullopt;
    return v;
}

// The number after "Key:" at the start of a line, times `unit` ("123 kB" lines: 1024).
std::optional<std::uint64_t> field(const std::string& text, const std::string& key,
                                   std::uint64_t unit) {
    const std::string k = key + ":";
    std::size_t at = text.compare(0, k.size(), k) == 0 ? 0 : text.find("\n" + k);
    if (at == std::string::npos) return std::nullopt;
    at = text.find(':', at) + 1;
    const auto v = leading_u64(std::string_view(text).substr(at, 64));
    if (!v) return std::nullopt;
    return *v * unit;
}

// A /proc file in one read (what the parsers need fits in 4 KiB): a pass reads thousands.
std::string read_proc(int proc, const std::string& name, std::size_t cap = 4096) {
    const int fd = sys::try_open_at(proc, name, O_RDONLY);
    if (fd < 0) return {};
    const UniqueFd own(fd);
    std::string out(cap, '\0');
    const ssize_t n = ::read(fd, out.data(), cap);
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
}

std::uint64_t now_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);  // cannot fail for CLOCK_MONOTONIC
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL +
           static_cast<std::uint64_t>(t.tv_nsec);
}

}  // namespace

bool parse_proc_stat(const std::string& stat, std::uint64_t ns_per_tick, ProcSample& out) {
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return false;
    std::string_view rest = std::string_view(stat).substr(close + 1);
    // After ')': state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17) ...
    // num_threads(20) ... starttime(22) ... sigignore(33, decimal; older kernels' text may end
    // before it).
    std::uint64_t v[34] = {};
    char state = 0;
    int i = 3;
    for (; i <= 33; ++i) {
        const auto from = rest.find_first_not_of(" \n");
        if (from == std::string_view::npos) break;
        rest.remove_prefix(from);
        const std::string_view f = rest.substr(0, rest.find_first_of(" \n"));
        rest.remove_prefix(f.size());
        if (i == 3) {
            state = f[0];
            continue;
        }
        if (!to_u64(f, v[i])) {
            if (i == 4 || (i >= 14 && i <= 17) || i == 22) return false;  // the fields used here
            v[i] = 0;
        }
    }
    if (i <= 22) return false;
    out.state = state;
    out.ppid = static_cast<pid_t>(v[4]);
    out.self_ns = (v[14] + v[15]) * ns_per_tick;
    out.children_ns = (v[16] + v[17]) * ns_per_tick;
    if (v[20]) out.threads = static_cast<std::uint32_t>(v[20]);
    out.start = v[22];
    out.rss_pages = v[24];
    if (i > 33) out.ignores_sigchld = (v[33] >> (17 - 1)) & 1;  // SIGCHLD: 17
    return true;
}

bool parse_proc_status(const std::string& status, ProcSample& out) {
    const auto anon = field(status, "RssAnon", 1024);
    const auto shmem = field(status, "RssShmem", 1024);
    const auto threads = field(status, "Threads", 1);
    // SigIgn is a hex mask: bit N-1 is signal N.
    const auto at = status.find("\nSigIgn:");
    if (at == std::string::npos || !threads) return false;
    const unsigned long long ign = std::strtoull(status.c_str() + at + 8, nullptr, 16);
    out.ignores_sigchld =
        (ign >> (17 - 1)) & 1;  // SIGCHLD is 17 on every Linux architecture gpubox runs on
    out.threads = static_cast<std::uint32_t>(*threads);
    out.anon_bytes = anon.value_or(0);  // kernel threads and zombies have no Rss lines
    out.shmem_bytes = shmem.value_or(0);
    out.hwm_bytes = field(status, "VmHWM", 1024).value_or(0);
    out.pte_bytes = field(status, "VmPTE", 1024).value_or(0);
    return true;
}

std::optional<std::uint64_t> parse_pss(const std::string& smaps_rollup) {
    const auto anon = field(smaps_rollup, "Pss_Anon", 1024),
               shmem = field(smaps_rollup, "Pss_Shmem", 1024);
    if (!anon || !shmem) return std::nullopt;
    return *anon + *shmem;
}

std::uint64_t CpuLedger::settle_parents(const std::map<pid_t, ProcSample>& cur) {
    const std::uint64_t tick_ns = sys::ns_per_clock_tick();
    std::uint64_t lost = 0;
    for (auto it = parents_.begin(); it != parents_.end();) {
        auto p = cur.find(it->first);
        if (p == cur.end()) {
            it = parents_.erase(it);
            continue;
        }
        Parent& parent = it->second;
        const std::uint64_t grew =
            p->second.children_ns - std::min(p->second.children_ns, parent.children_first);
        if (parent.owed > grew + tick_ns && parent.owed - grew > parent.charged) {
            lost += parent.owed - grew - parent.charged;
            parent.charged = parent.owed - grew;
            parent.reaps = true;
        }
        reaping_ = reaping_ || parent.reaps;
        ++it;
    }
    return lost;
}

std::uint64_t CpuLedger::update(const std::vector<ProcSample>& now, std::uint64_t pids_made,
                                std::uint64_t interval_ns) {
    std::map<pid_t, ProcSample> cur;
    for (const ProcSample& p : now) cur.emplace(p.pid, p);
    auto same = [](const std::map<pid_t, ProcSample>& m, pid_t pid, const ProcSample& p) {
        auto it = m.find(pid);
        return it != m.end() && it->second.start == p.start ? &it->second : nullptr;
    };
    std::uint64_t seen_new = 0;  // pids (processes and threads) seen for the first time
    for (const auto& [pid, p] : cur) {
        const ProcSample* before = same(last_, pid, p);
        seen_new += !before                       ? p.threads
                    : p.threads > before->threads ? p.threads - before->threads
                                                  : 0;
        Parent& parent = parents_[pid];
        if (parent.start != p.start) parent = {p.start, p.children_ns};  // new, or a reused pid
        if (p.ignores_sigchld) parent.reaps = true;
    }
    std::uint64_t lost = 0;
    for (const auto& [pid, v] : last_) {
        if (same(cur, pid, v)) continue;
        const auto pc = cur.find(v.ppid), pl = last_.find(v.ppid);
        if (pc == cur.end() || pl == last_.end() || pc->second.start != pl->second.start)
            continue;  // its parent is gone too: the grandparent's cutime holds what that waited for
        Parent& parent = parents_[v.ppid];  // made above, for every current process
        const std::uint64_t used = std::max(v.self_ns, v.exact_ns) + v.children_ns;
        if (parent.reaps) lost += used + interval_ns;
        else parent.owed += used;
    }
    lost += settle_parents(cur);
    std::uint64_t live = 0;
    for (const auto& [pid, p] : cur) live += p.self_ns + p.children_ns;
    if (reaping_ && pids_made > seen_new) {
        std::uint64_t before = 0;
        for (const auto& [pid, p] : last_) before += p.self_ns + p.children_ns;
        const std::uint64_t capacity = std::uint64_t{cpus_} * interval_ns,
                            known = live - std::min(live, before) + lost;
        lost +=
            std::min((pids_made - seen_new) * interval_ns, capacity - std::min(capacity, known));
    }
    charged_ += lost;
    last_ = std::move(cur);
    // A waited-for child's time moves from its own entry to its parent's cutime, never down.
    total_ = std::max(total_, live + charged_);
    return total_;
}

namespace {

// What one pass over the sandbox's /proc found.
struct Scan {
    Usage usage;
    std::vector<ProcSample> procs;
    std::uint64_t max_pid = 0;
    std::uint64_t live_cpu = 0;  // the CPU of the processes read so far
    std::uint64_t fd_bytes = 0;  // what their open fds are charged (fd_charge)
    std::uint32_t held = 0;      // processes but init that held as before (holds_as_before)
};

// Its open fds: the size the kernel gives its fd directory (Linux >= 6.2), O(1) per process
// whatever it holds open; 0 where unreadable (gone meanwhile) or on an older kernel.
std::uint64_t open_fds(int proc, const std::string& name) {
    struct stat st {};
    if (::fstatat(proc, (name + "/fd").c_str(), &st, 0) < 0) return 0;
    return static_cast<std::uint64_t>(st.st_size);
}

// One process of the sandbox's /proc, by its directory's name; gone meanwhile is no error.
// `memory`: read its status too. Each file by its path from the proc fd: two or three files, no
// directory fd.
}  // namespace

std::uint64_t bounded(std::optional<std::uint64_t> counted, std::uint64_t exact,
                      std::uint64_t charged) {
    const std::uint64_t hi = std::max(exact, charged);
    return counted ? std::clamp(*counted, exact, hi) : hi;
}

bool holds_as_before(const ProcSample& p, const ProcSample& was) {
    return p.start == was.start && p.threads == 1 && was.threads == 1 && p.state != 'R' &&
           p.exact_ns != 0 && p.exact_ns == was.exact_ns && p.rss_pages == was.rss_pages;
}

namespace {

// What process `p` (not init) holds and used, added to the pass.
void count(Scan& scan, const ProcSample& p) {
    scan.usage.memory_bytes += p.anon_bytes + p.shmem_bytes + p.pte_bytes;
    scan.fd_bytes += fd_charge(p.fds);
    scan.usage.fds += p.fds;
    scan.usage.rss_peak_bytes = std::max(scan.usage.rss_peak_bytes, p.hwm_bytes);
    ++scan.usage.processes;
    scan.live_cpu += p.self_ns + p.children_ns;
    scan.procs.push_back(p);
}

void add_process(int proc, KeptFiles& files, const std::string& name, bool memory, Scan& scan,
                 pid_t init, const std::unordered_map<pid_t, ProcSample>& last) {
    ProcSample p;
    std::uint64_t pid = 0;
    if (!to_u64(name, pid)) return;
    scan.max_pid = std::max(scan.max_pid, pid);
    if (!parse_proc_stat(files.read(name + "/stat"), sys::ns_per_clock_tick(), p))
        return;  // gone meanwhile
    p.pid = static_cast<pid_t>(pid);
    scan.usage.tasks += p.threads;
    if (pid ==
        static_cast<std::uint64_t>(
            init)) {  // init is gpubox's: only the orphans it reaped count, and its stat has them
        scan.procs.push_back({p.pid, 0, p.start, 0, 0, p.children_ns, p.threads, false, 0, 0, 0});
        scan.live_cpu += p.children_ns;
        return;
    }
    if (p.state == 'R') scan.usage.runnable.push_back(p.pid);
    // stat's times are whole clock ticks: a thousand processes of 6 ms each would show none.
    // schedstat has the main thread's to the ns (absent without CONFIG_SCHED_INFO: 0).
    p.exact_ns = leading_u64(files.read(name + "/schedstat", 128)).value_or(0);
    // Memory: a process that has not run since the last pass keeps what it was read to hold, and
    // its status, the costliest file of a pass (most of an idle sandbox's), is not read again.
    if (const auto was = last.find(p.pid);
        memory && was != last.end() && holds_as_before(p, was->second)) {
        const ProcSample& w = was->second;
        p.ignores_sigchld = w.ignores_sigchld, p.anon_bytes = w.anon_bytes;
        p.shmem_bytes = w.shmem_bytes, p.pte_bytes = w.pte_bytes, p.hwm_bytes = w.hwm_bytes;
        p.fds = w.fds;
        ++scan.held;
    } else if (memory) {
        if (!parse_proc_status(files.read(name + "/status"), p)) return;
        p.fds = open_fds(proc, name);
    }
    p.self_ns = std::max(p.self_ns, p.exact_ns);
    count(scan, p);
}

// Over the limit with memory that several processes may share (forked workers' copy-on-write
// pages, a shared segment): what each one holds counted by its share instead, so that a page
// several map counts once.
std::uint64_t by_share(int proc, const std::vector<ProcSample>& procs, pid_t init) {
    std::uint64_t sum = 0;
    for (const ProcSample& p : procs) {
        if (p.pid == init) continue;
        // Unreadable: it exited since its status was read (the monitor may read every process
        // of the sandbox, whatever it does to its credentials), and its memory went with it.
        const auto pss = parse_pss(read_proc(proc, cat(p.pid, "/smaps_rollup")));
        sum += std::min(pss.value_or(0), p.anon_bytes + p.shmem_bytes) + p.pte_bytes;
    }
    return sum;
}

// What the processes of the last share read (pid <= max_pid; init aside) hold now by their
// resident sets and page tables, as by_share counts them; whether any process came since; and
// the most one process holds, which all their shares together hold at least (each of its pages
// counts once in the sum of shares).
struct Since {
    std::uint64_t known = 0, largest = 0;
    bool fresh = false;
};
Since resident_since(const std::vector<ProcSample>& procs, pid_t init, std::uint64_t max_pid) {
    Since s;
    for (const ProcSample& p : procs) {
        if (p.pid == init) continue;
        const std::uint64_t held = p.anon_bytes + p.shmem_bytes + p.pte_bytes;
        s.largest = std::max(s.largest, held);
        if (static_cast<std::uint64_t>(p.pid) > max_pid) s.fresh = true;
        else s.known += held;
    }
    return s;
}

}  // namespace

std::string KeptFiles::read(const std::string& name, std::size_t cap) {
    std::string out(cap, '\0');
    if (const auto it = files_.find(name); it != files_.end()) {
        const ssize_t n = ::pread(it->second.fd.get(), out.data(), cap, 0);
        if (n > 0) {
            it->second.pass = pass_;
            out.resize(static_cast<std::size_t>(n));
            return out;
        }
        files_.erase(it);  // ESRCH: its process is gone, and the path may name another now
    }
    const int fd = sys::try_open_at(dir_, name, O_RDONLY);
    if (fd < 0) return {};
    UniqueFd own(fd);
    const ssize_t n = ::pread(fd, out.data(), cap, 0);
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (n > 0 && files_.size() < kMax) files_.emplace(name, File{std::move(own), pass_});
    return out;
}

void KeptFiles::keep(const std::string& name) {
    if (const auto it = files_.find(name); it != files_.end()) it->second.pass = pass_;
}

void KeptFiles::end_pass() {
    std::erase_if(files_, [&](const auto& f) { return f.second.pass != pass_; });
    ++pass_;
}

std::vector<pid_t> task_tree(int proc, pid_t root) {
    std::multimap<pid_t, pid_t> children;
    for (const std::string& name :
         sys::try_list_dir(proc, ".").value_or(std::vector<std::string>{})) {
        std::uint64_t pid = 0;
        ProcSample p;
        if (to_u64(name, pid) &&
            parse_proc_stat(read_proc(proc, name + "/stat"), sys::ns_per_clock_tick(), p))
            children.emplace(p.ppid, static_cast<pid_t>(pid));
    }
    std::vector<pid_t> tree{root};
    for (std::size_t i = 0; i < tree.size(); ++i) {
        const auto [from, to] = children.equal_range(tree[i]);
        for (auto it = from; it != to; ++it) tree.push_back(it->second);
    }
    return tree;
}

bool signal_process(int proc, pid_t pid, int sig) {
    const int fd = sys::try_open_at(proc, std::to_string(pid), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return false;  // gone meanwhile
    const UniqueFd own(fd);
    return ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) == 0;
}

void Sampler::kill_all() const {
    for (const std::string& name :
         sys::try_list_dir(proc_, ".").value_or(std::vector<std::string>{})) {
        std::uint64_t pid = 0;
        if (name != "1" && to_u64(name, pid))
            signal_process(proc_, static_cast<pid_t>(pid), SIGKILL);
    }
}

SockStat Sampler::sock_stat(bool v6) {  // init's network namespace is the sandbox's
    const std::string net = cat(root_ ? root_ : 1, "/net/");
    auto read = [&](const UniqueFd& sent, const std::string& name) {
        if (!sent.valid()) return kept_.read(net + name);
        std::string out(4096, '\0');
        const ssize_t n = ::pread(sent.get(), out.data(), out.size(), 0);
        out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        return out;
    };
    const std::string v4 = read(sockstat_, "sockstat");
    const SockStat stat = parse_sockstat(v4, "TCP6: inuse 0\nUDP6: inuse 0\n");
    has_sockets_ = stat.any();
    return v6 && stat.any() ? parse_sockstat(v4, read(sockstat6_, "sockstat6")) : stat;
}

std::uint64_t Sampler::resample_sockets() {
    if (!sockets_) return 0;
    const SockStat stat = sock_stat(false);
    return without_sockets_ + (stat.any() ? sockets_->sample(stat, false) : 0);
}

// Where a /proc directory's listing of processes starts: the offset after its own entries
// (FIRST_PROCESS_ENTRY, 256, then "self" and "thread-self"), from which the kernel lists pid N
// at kFirstPidOffset + N. Listing from there skips generating some sixty names a pass discards.
constexpr off_t kFirstPidOffset = 256 + 2;

// Listed each pass through one fd kept open: no open, fstat, two fcntls and close a pass (a
// third of an idle sandbox's pass), and from its first pid on (kFirstPidOffset); from its start
// where that lists nothing or not init first (another kernel's layout; or init is gone).
std::vector<std::string> Sampler::pids() {
    std::vector<std::string> out;
    if (!listing_.valid()) {
        const int fd = sys::try_open_at(proc_, ".", O_RDONLY | O_DIRECTORY);
        if (fd < 0) return out;
        listing_ = UniqueFd(fd);
    }
    auto list_from = [&](off_t at) {
        out.clear();
        if (::lseek(listing_.get(), at, SEEK_SET) < 0) return;
        alignas(dirent64) char buf[32768];
        for (ssize_t n; (n = ::getdents64(listing_.get(), buf, sizeof buf)) > 0;) {
            for (ssize_t i = 0; i < n;) {
                const auto* d = reinterpret_cast<const dirent64*>(buf + i);
                if (std::isdigit(static_cast<unsigned char>(d->d_name[0])))
                    out.emplace_back(d->d_name);
                i += d->d_reclen;
            }
            // The kernel fills the buffer while it has entries: room left for a longest one
            // (a 255-byte name) means the listing is over, and no call is needed to say so.
            if (static_cast<std::size_t>(n) + sizeof(dirent64) + 256 <= sizeof buf) break;
        }
    };
    list_from(kFirstPidOffset);
    if (out.empty() || out.front() != "1") list_from(0);
    return out;
}

bool Sampler::nothing_ran(const std::vector<std::string>& names, const std::string& init_name) {
    if (names.size() != last_.size() || names.size() > kQuietMax) return false;
    for (const std::string& name : names) {
        if (name == init_name) continue;
        std::uint64_t pid = 0;
        const auto was = to_u64(name, pid) ? last_.find(static_cast<pid_t>(pid)) : last_.end();
        if (was == last_.end() || was->second.threads != 1 || was->second.state == 'R' ||
            !was->second.exact_ns)
            return false;
        // A pid reused since names a new process, whose run time would have to match to the ns.
        if (leading_u64(kept_.read(name + "/schedstat", 128)) != was->second.exact_ns) return false;
    }
    return true;
}

std::uint64_t Sampler::read_shares(const std::vector<ProcSample>& procs, std::uint64_t max_pid,
                                   std::uint64_t resident, pid_t init) {
    const std::uint64_t once = std::min(resident, by_share(proc_, procs, init));
    shares_ = {resident_since(procs, init, max_pid).known, once, max_pid};
    return once;
}

// Several processes' resident sets, summed as they are, count a page each one maps once each:
// forked workers' copy-on-write memory (a PyTorch job's 4 DataLoader workers on a real GPU:
// resident 2.6 GiB, 0.68 GiB by share). Their shares (by_share) are a walk of every process's
// page tables: over the limit, the kill's count, they are read every pass (sample()). Below it
// they matter to the report alone (memory_peak_kb), and are estimated from their last read:
// their sum then, plus what those processes' resident sets grew since (new pages are one
// process's), a process made since counted as sharing all it holds (a fork's pages are its
// parent's), and never below the most one process holds (where sharers exit, the others'
// shares grow back). They are read again where that estimate would be a new peak or a process
// came, at most every kShareGapNs and 50 times what a read takes; and, while some pages are
// shared, as often, but at most every 200 times what a read takes (0.5 % of a CPU): pages stop
// being shared without any resident set growing (a write to a copy-on-write page: Python's
// reference counts in forked workers). Missed: a peak shorter than those gaps, as passes miss
// what comes and goes between two of them. Returns what of `resident` is counted more than once.
std::uint64_t Sampler::shared_pages(const std::vector<ProcSample>& procs, std::uint64_t max_pid,
                                    std::uint64_t resident, std::uint64_t t, pid_t init) {
    std::uint64_t once = resident;
    bool fresh = true;
    if (shares_.max_pid) {
        const Since now = resident_since(procs, init, shares_.max_pid);
        const std::uint64_t grew = now.known - std::min(now.known, shares_.resident);
        once = std::min(resident, std::max(shares_.by_share + grew, now.largest));
        fresh = now.fresh;
    }
    if (((once > report_peak_ || fresh) && t >= shares_due_) ||
        (once < resident && t >= refresh_due_)) {
        const std::uint64_t t0 = now_ns();
        once = read_shares(procs, max_pid, resident, init);
        const std::uint64_t t1 = now_ns();
        shares_due_ = t1 + std::max(kShareGapNs, 50 * (t1 - t0));
        refresh_due_ = t1 + std::max(kShareGapNs, 200 * (t1 - t0));
    }
    report_peak_ = std::max(report_peak_, once);
    return resident - once;
}

Usage Sampler::sample(std::uint64_t cpu_stop_ns, bool memory) {
    const std::uint64_t t = now_ns();
    Scan scan;
    std::vector<std::string>& names = names_;
    const pid_t init = root_ ? root_ : 1;
    const std::string init_name = std::to_string(init);
    const bool mem = limit_ != 0 || memory;
    // After a quiet pass, its pids are still all there are where nothing ran since: a process is
    // made by another's fork, and one that went fails its schedstat's read. Not where others may
    // join (a step's tasks, gpubox exec), whose processes come from outside. No listing then.
    const bool after_quiet = mem && last_quiet_ && !root_ && !joinable_;
    const bool same = !ended_ && after_quiet && nothing_ran(names, init_name);
    last_quiet_ = false;
    if (ended_) {  // nothing left to list (set_ended)
        names.clear();
    } else if (root_) {  // a step's task: its tree
        names.clear();
        for (pid_t pid : task_tree(proc_, root_)) names.push_back(std::to_string(pid));
    } else if (!same) {
        names = pids();
    }
    // With the kernel's counter (set_clock), read at the start and every kClockEvery processes.
    std::optional<std::uint64_t> clock = clock_ ? clock_->read() : std::nullopt;
    std::size_t since_read = 0;
    auto over = [&] {
        if (!cpu_stop_ns) return false;
        if (clock_ && ++since_read % kClockEvery == 0) clock = clock_->read();
        const std::uint64_t used =
            bounded(clock, scan.live_cpu, scan.live_cpu + ledger_.charged_ns());
        if (used <= cpu_stop_ns) return false;
        scan.usage.cpu_ns = used;  // over already, the rest unread
        scan.usage.partial = true;
        return true;
    };
    bool init_listed = false;
    // (Where after_quiet found something ran, the new listing would find it so again.)
    if (same || (mem && !after_quiet && nothing_ran(names, init_name))) {  // no stat read
        for (const std::string& name : names) {
            if (name == init_name) {
                init_listed = true;
                continue;
            }
            std::uint64_t pid = 0;
            to_u64(name, pid);
            const ProcSample& p = last_.at(static_cast<pid_t>(pid));
            scan.max_pid = std::max(scan.max_pid, pid);
            scan.usage.tasks += p.threads;
            kept_.keep(name + "/stat");
            count(scan, p);
            ++scan.held;
        }
    } else {
        for (const std::string& name : names) {
            // Init is read last, where the others tell whether it can have changed.
            if (name == init_name) {
                init_listed = true;
                continue;
            }
            add_process(proc_, kept_, name, mem, scan, init, last_);
            if (over()) return scan.usage;
        }
    }
    Usage& u = scan.usage;
    // Quiet: every process but init held as before, none came or went (so init reaped none, and
    // its stat, which holds only the orphans it reaped, is as it was); nothing of the sandbox ran,
    // so neither its tmpfs nor its sockets can have changed either.
    const auto init_was = last_.find(init);
    u.quiet = mem && init_listed && init_was != last_.end() && scan.held == u.processes &&
              scan.procs.size() + 1 == last_.size();
    if (u.quiet) {
        scan.procs.push_back(init_was->second);
        scan.live_cpu += init_was->second.children_ns;
        kept_.keep(init_name + "/stat");
    } else if (init_listed) {
        add_process(proc_, kept_, init_name, mem, scan, init, last_);
    }
    if (over()) return scan.usage;
    // Held through open files (by no process: no share of it is another's).
    const std::uint64_t files = scan.fd_bytes + walk_bytes_;
    if (scan.procs.size() <= 2) {  // init and one more: nothing shared between processes
        shares_ = {};
        report_peak_ = std::max(report_peak_, u.memory_bytes);
    } else if (limit_ && u.memory_bytes + files > limit_) {  // the kill's count: by share
        u.memory_bytes = read_shares(scan.procs, scan.max_pid, u.memory_bytes, init);
        report_peak_ = std::max(report_peak_, u.memory_bytes);
    } else if (mem) {
        u.counted_twice = shared_pages(scan.procs, scan.max_pid, u.memory_bytes, t, init);
    }
    counted_twice_ = u.counted_twice;
    u.memory_bytes += files;
    if (mem && tmpfs_ >= 0 && !u.quiet)
        if (const auto fs = sys::try_fstatfs(tmpfs_))
            tmpfs_bytes_ = static_cast<std::uint64_t>(fs->f_blocks - fs->f_bfree) *
                           static_cast<std::uint64_t>(fs->f_bsize);
    if (mem && tmpfs_ >= 0) u.memory_bytes += tmpfs_bytes_;
    if (mem && sockets_) {
        if (!u.quiet) {
            const SockStat stat = sock_stat(true);
            socket_bytes_ = stat.any() ? sockets_->sample(stat) : 0;
        } else {
            kept_.keep(cat(init, "/net/sockstat"));
            kept_.keep(cat(init, "/net/sockstat6"));
        }
        u.socket_bytes = socket_bytes_;
        without_sockets_ = u.memory_bytes;
        u.memory_bytes += u.socket_bytes;
    }
    // Pids are handed out in turn: those past the largest seen last time were made since (a
    // lower bound: the newest may have died unseen, and threads take pids too).
    const std::uint64_t made =
        !root_ && last_pid_ && scan.max_pid > last_pid_ ? scan.max_pid - last_pid_ : 0;
    const std::uint64_t charged = ledger_.update(scan.procs, made, last_ns_ ? t - last_ns_ : 0);
    u.cpu_ns = bounded(clock_ ? clock_->read() : std::nullopt, scan.live_cpu, charged);
    last_pid_ = std::max(last_pid_, scan.max_pid);
    last_ns_ = t;
    last_.clear();  // kept where this pass read memory: only then does it hold what was read
    if (mem)
        for (const ProcSample& p : scan.procs) last_.emplace(p.pid, p);
    kept_.end_pass();
    last_quiet_ = u.quiet;
    return u;
}

}  // namespace gpubox::isolate
