#include "isolate/usage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/unique_fd.hpp"

namespace gpubox::isolate {
namespace {

bool to_u64(const std::string& s, std::uint64_t& v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end || errno || s[0] == '-') return false;
    v = x;
    return true;
}

// The number after "Key:" at the start of a line, times `unit` ("123 kB" lines: 1024).
std::optional<std::uint64_t> field(const std::string& text, const std::string& key,
                                   std::uint64_t unit) {
    const std::string k = key + ":";
    std::size_t at = text.compare(0, k.size(), k) == 0 ? 0 : text.find("\n" + k);
    if (at == std::string::npos) return std::nullopt;
    at = text.find(':', at) + 1;
    std::istringstream in(text.substr(at, 64));
    std::uint64_t v = 0;
    if (!(in >> v)) return std::nullopt;
    return v * unit;
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
    std::istringstream in(stat.substr(close + 1));
    // After ')': state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17) ... starttime(22).
    std::string f;
    std::uint64_t v[23] = {};
    for (int i = 3; i <= 22; ++i) {
        if (!(in >> f)) return false;
        if (i == 3) continue;
        if (!to_u64(f, v[i])) {
            if (i == 4 || (i >= 14 && i <= 17) || i == 22) return false;  // the fields used here
            v[i] = 0;
        }
    }
    out.ppid = static_cast<pid_t>(v[4]);
    out.self_ns = (v[14] + v[15]) * ns_per_tick;
    out.children_ns = (v[16] + v[17]) * ns_per_tick;
    out.start = v[22];
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
    return true;
}

std::optional<std::uint64_t> parse_pss_shmem(const std::string& smaps_rollup) {
    return field(smaps_rollup, "Pss_Shmem", 1024);
}

std::uint64_t parse_unattached_sysv(const std::string& text) {
    // key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime rss swap
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);  // the header
    std::uint64_t sum = 0;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string col[15];
        int n = 0;
        while (n < 15 && f >> col[n]) ++n;
        std::uint64_t nattch = 0, rss = 0;
        if (n == 15 && to_u64(col[6], nattch) && to_u64(col[14], rss) && nattch == 0) sum += rss;
    }
    return sum;
}

std::optional<std::uint64_t> parse_last_pid(const std::string& loadavg) {
    std::istringstream in(loadavg);
    std::string f;
    for (int i = 0; i < 5; ++i)
        if (!(in >> f)) return std::nullopt;
    std::uint64_t v = 0;
    if (!to_u64(f, v)) return std::nullopt;
    return v;
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
    std::map<ino_t, std::pair<std::uint64_t, pid_t>> memfds;  // held open: bytes, one holder
    std::vector<std::pair<pid_t, std::uint64_t>> sharers;     // RssShmem, where there is some
};

UniqueFd open_pid_dir(int proc, const std::string& pid) {
    const int fd = sys::try_open_at(proc, pid, O_PATH | O_DIRECTORY);
    return fd < 0 ? UniqueFd() : UniqueFd(fd);
}

// memfds held open by the process of `dir`: their pages show in no Rss unless mapped.
void add_memfds(int dir, pid_t pid, Scan& scan) {
    for (const std::string& fd :
         sys::try_list_dir(dir, "fd").value_or(std::vector<std::string>{})) {
        const std::string rel = "fd/" + fd;
        std::string link;
        struct stat st {};
        if (sys::try_read_link_at(dir, rel, link) < 0 || link.compare(0, 7, "/memfd:") != 0 ||
            !sys::try_stat_at(dir, rel, st))
            continue;
        scan.memfds.emplace(st.st_ino,
                            std::make_pair(static_cast<std::uint64_t>(st.st_blocks) * 512, pid));
    }
}

// One process of the sandbox's /proc, by its directory's name; gone meanwhile is no error.
void add_process(int proc, const std::string& name, Scan& scan) {
    ProcSample p;
    std::uint64_t pid = 0;
    if (!to_u64(name, pid)) return;
    const UniqueFd dir = open_pid_dir(proc, name);
    if (!dir.valid() ||
        !parse_proc_stat(sys::try_read_at(dir.get(), "stat"), sys::ns_per_clock_tick(), p) ||
        !parse_proc_status(sys::try_read_at(dir.get(), "status"), p))
        return;  // gone meanwhile
    p.pid = static_cast<pid_t>(pid);
    std::istringstream(sys::try_read_at(dir.get(), "schedstat", 128)) >>
        p.exact_ns;  // absent without CONFIG_SCHED_INFO: 0
    if (pid == 1) {  // init is gpubox's: only the orphans it reaped count
        scan.procs.push_back({p.pid, 0, p.start, 0, 0, p.children_ns, p.threads, false, 0, 0});
        return;
    }
    scan.usage.memory_bytes += p.anon_bytes + p.shmem_bytes;
    scan.usage.rss_peak_bytes = std::max(scan.usage.rss_peak_bytes, p.hwm_bytes);
    if (p.shmem_bytes) scan.sharers.emplace_back(p.pid, p.shmem_bytes);
    ++scan.usage.processes;
    scan.procs.push_back(p);
    add_memfds(dir.get(), p.pid, scan);
}

// The inodes process `pid` maps.
std::set<ino_t> mapped_inodes(int proc, pid_t pid) {
    std::set<ino_t> inos;
    const UniqueFd dir = open_pid_dir(proc, std::to_string(pid));
    std::istringstream maps(dir.valid() ? sys::try_read_at(dir.get(), "maps", 1 << 20)
                                        : std::string());
    for (std::string line; std::getline(maps, line);) {
        std::istringstream f(line);
        std::string addr, perms, off, dev;
        unsigned long long inode = 0;
        if (f >> addr >> perms >> off >> dev >> inode && inode)
            inos.insert(static_cast<ino_t>(inode));
    }
    return inos;
}

// The memfds no holder maps: a memfd its holder maps is in that Pss_Shmem already.
std::uint64_t unmapped_memfd_bytes(int proc, const Scan& scan) {
    std::uint64_t bytes = 0;
    std::map<pid_t, std::set<ino_t>> mapped;
    for (const auto& [ino, held] : scan.memfds) {
        auto it = mapped.find(held.second);
        if (it == mapped.end())
            it = mapped.emplace(held.second, mapped_inodes(proc, held.second)).first;
        if (!it->second.count(ino)) bytes += held.first;
    }
    return bytes;
}

// Over the limit with memory that several processes may share: weigh each one's share.
std::uint64_t shared_overcount(int proc, const Scan& scan) {
    std::uint64_t over = 0;
    for (const auto& [pid, rss_shmem] : scan.sharers) {
        const UniqueFd dir = open_pid_dir(proc, std::to_string(pid));
        const auto pss = dir.valid() ? parse_pss_shmem(sys::try_read_at(dir.get(), "smaps_rollup"))
                                     : std::nullopt;
        if (pss && *pss < rss_shmem) over += rss_shmem - *pss;
    }
    return over;
}

}  // namespace

Usage Sampler::sample() {
    const std::uint64_t t = now_ns();
    const auto last_pid = parse_last_pid(sys::try_read_at(proc_, "loadavg", 256));
    Scan scan;
    for (const std::string& name :
         sys::try_list_dir(proc_, ".").value_or(std::vector<std::string>{}))
        add_process(proc_, name, scan);
    Usage& u = scan.usage;
    u.memory_bytes += unmapped_memfd_bytes(proc_, scan);
    if (const auto fs = tmpfs_ >= 0 ? sys::try_fstatfs(tmpfs_) : std::nullopt)
        u.memory_bytes += static_cast<std::uint64_t>(fs->f_blocks - fs->f_bfree) *
                          static_cast<std::uint64_t>(fs->f_bsize);
    u.memory_bytes += parse_unattached_sysv(sys::try_read_at(proc_, "sysvipc/shm", 1 << 20));
    if (limit_ && u.memory_bytes > limit_ && scan.sharers.size() > 1)
        u.memory_bytes -= shared_overcount(proc_, scan);
    const std::uint64_t made =
        last_pid && last_pid_ && *last_pid >= *last_pid_ ? *last_pid - *last_pid_ : 0;
    u.cpu_ns = ledger_.update(scan.procs, made, last_ns_ ? t - last_ns_ : 0);
    last_pid_ = last_pid;
    last_ns_ = t;
    return u;
}

}  // namespace gpubox::isolate
