#include "isolate/usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "common/unique_fd.hpp"

namespace gpubox::isolate {
namespace {

// One read of a proc file (init calls this often); `cap` bytes at most.
std::string slurp(int dirfd, const char* name, std::size_t cap = 4096) {
    UniqueFd fd(::openat(dirfd, name, O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return {};
    std::string out(cap, '\0');
    std::size_t got = 0;
    for (ssize_t n; got < cap && (n = ::read(fd.get(), out.data() + got, cap - got)) > 0;) got += static_cast<std::size_t>(n);
    out.resize(got);
    return out;
}

bool to_u64(const std::string& s, std::uint64_t& v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end || errno || s[0] == '-') return false;
    v = x;
    return true;
}

// The number after "Key:" at the start of a line, times `unit` ("123 kB" lines: 1024).
std::optional<std::uint64_t> field(const std::string& text, const std::string& key, std::uint64_t unit) {
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
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(t.tv_nsec);
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
    out.ignores_sigchld = (ign >> (17 - 1)) & 1;  // SIGCHLD is 17 on every Linux architecture gpubox runs on
    out.threads = static_cast<std::uint32_t>(*threads);
    out.anon_bytes = anon.value_or(0);  // kernel threads and zombies have no Rss lines
    out.shmem_bytes = shmem.value_or(0);
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

std::uint64_t CpuLedger::update(const std::vector<ProcSample>& now, std::uint64_t pids_made, std::uint64_t interval_ns) {
    static const std::uint64_t tick_ns = 1000000000ULL / static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    std::map<pid_t, ProcSample> cur;
    for (const ProcSample& p : now) cur.emplace(p.pid, p);
    auto same = [](const std::map<pid_t, ProcSample>& m, pid_t pid, const ProcSample& p) {
        auto it = m.find(pid);
        return it != m.end() && it->second.start == p.start ? &it->second : nullptr;
    };
    std::uint64_t seen_new = 0;  // pids (processes and threads) seen for the first time
    for (const auto& [pid, p] : cur) {
        const ProcSample* before = same(last_, pid, p);
        seen_new += !before ? p.threads : p.threads > before->threads ? p.threads - before->threads : 0;
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
    for (auto it = parents_.begin(); it != parents_.end();) {
        auto p = cur.find(it->first);
        if (p == cur.end()) {
            it = parents_.erase(it);
            continue;
        }
        Parent& parent = it->second;
        const std::uint64_t grew = p->second.children_ns - std::min(p->second.children_ns, parent.children_first);
        if (parent.owed > grew + tick_ns && parent.owed - grew > parent.charged) {
            lost += parent.owed - grew - parent.charged;
            parent.charged = parent.owed - grew;
            parent.reaps = true;
        }
        reaping_ = reaping_ || parent.reaps;
        ++it;
    }
    std::uint64_t live = 0;
    for (const auto& [pid, p] : cur) live += p.self_ns + p.children_ns;
    if (reaping_ && pids_made > seen_new) {
        std::uint64_t before = 0;
        for (const auto& [pid, p] : last_) before += p.self_ns + p.children_ns;
        const std::uint64_t capacity = std::uint64_t{cpus_} * interval_ns, known = live - std::min(live, before) + lost;
        lost += std::min((pids_made - seen_new) * interval_ns, capacity - std::min(capacity, known));
    }
    charged_ += lost;
    last_ = std::move(cur);
    // A waited-for child's time moves from its own entry to its parent's cutime, never down.
    total_ = std::max(total_, live + charged_);
    return total_;
}

Usage Sampler::sample() {
    static const std::uint64_t ns_per_tick = 1000000000ULL / static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    Usage u;
    const std::uint64_t t = now_ns();
    const auto last_pid = parse_last_pid(slurp(proc_, "loadavg", 256));
    std::vector<ProcSample> procs;
    std::map<ino_t, std::pair<std::uint64_t, pid_t>> memfds;  // held open: bytes, one holder
    std::vector<std::pair<pid_t, std::uint64_t>> sharers;     // RssShmem, where there is some
    int dfd = ::openat(proc_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = dfd < 0 ? nullptr : ::fdopendir(dfd);
    if (!d && dfd >= 0) ::close(dfd);
    for (dirent* e; d && (e = ::readdir(d));) {
        ProcSample p;
        std::uint64_t pid = 0;
        if (!to_u64(e->d_name, pid)) continue;
        UniqueFd dir(::openat(proc_, e->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!dir.valid() || !parse_proc_stat(slurp(dir.get(), "stat"), ns_per_tick, p) ||
            !parse_proc_status(slurp(dir.get(), "status"), p))
            continue;  // gone meanwhile
        p.pid = static_cast<pid_t>(pid);
        std::istringstream(slurp(dir.get(), "schedstat", 128)) >> p.exact_ns;  // absent without CONFIG_SCHED_INFO: 0
        if (pid == 1) {  // init is gpubox's: only the orphans it reaped count
            procs.push_back({p.pid, 0, p.start, 0, 0, p.children_ns, p.threads, false, 0, 0});
            continue;
        }
        u.memory_bytes += p.anon_bytes + p.shmem_bytes;
        if (p.shmem_bytes) sharers.emplace_back(p.pid, p.shmem_bytes);
        ++u.processes;
        procs.push_back(p);
        // memfds held open: their pages show in no Rss unless mapped.
        int fds = ::openat(dir.get(), "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR* fd_dir = fds < 0 ? nullptr : ::fdopendir(fds);
        if (!fd_dir && fds >= 0) ::close(fds);
        for (dirent* f; fd_dir && (f = ::readdir(fd_dir));) {
            char link[64];
            const std::string rel = std::string("fd/") + f->d_name;
            const ssize_t n = ::readlinkat(dir.get(), rel.c_str(), link, sizeof link - 1);
            struct stat st {};
            if (n < 7 || std::strncmp(link, "/memfd:", 7) != 0 || ::fstatat(dir.get(), rel.c_str(), &st, 0) < 0) continue;
            memfds.emplace(st.st_ino, std::make_pair(static_cast<std::uint64_t>(st.st_blocks) * 512, p.pid));
        }
        if (fd_dir) ::closedir(fd_dir);
    }
    if (d) ::closedir(d);
    // A memfd its holder maps is in that Pss_Shmem already.
    std::map<pid_t, std::set<ino_t>> mapped;
    for (const auto& [ino, held] : memfds) {
        auto it = mapped.find(held.second);
        if (it == mapped.end()) {
            std::set<ino_t> inos;
            UniqueFd dir(::openat(proc_, std::to_string(held.second).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
            std::istringstream maps(dir.valid() ? slurp(dir.get(), "maps", 1 << 20) : std::string());
            for (std::string line; std::getline(maps, line);) {
                std::istringstream f(line);
                std::string addr, perms, off, dev;
                unsigned long long inode = 0;
                if (f >> addr >> perms >> off >> dev >> inode && inode) inos.insert(static_cast<ino_t>(inode));
            }
            it = mapped.emplace(held.second, std::move(inos)).first;
        }
        if (!it->second.count(ino)) u.memory_bytes += held.first;
    }
    struct statfs fs {};
    if (tmpfs_ >= 0 && ::fstatfs(tmpfs_, &fs) == 0)
        u.memory_bytes += static_cast<std::uint64_t>(fs.f_blocks - fs.f_bfree) * static_cast<std::uint64_t>(fs.f_bsize);
    u.memory_bytes += parse_unattached_sysv(slurp(proc_, "sysvipc/shm", 1 << 20));
    // Over the limit with memory that several processes may share: weigh each one's share.
    if (limit_ && u.memory_bytes > limit_ && sharers.size() > 1)
        for (const auto& [pid, rss_shmem] : sharers) {
            UniqueFd dir(::openat(proc_, std::to_string(pid).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
            const auto pss = dir.valid() ? parse_pss_shmem(slurp(dir.get(), "smaps_rollup")) : std::nullopt;
            if (pss && *pss < rss_shmem) u.memory_bytes -= rss_shmem - *pss;
        }
    const std::uint64_t made = last_pid && last_pid_ && *last_pid >= *last_pid_ ? *last_pid - *last_pid_ : 0;
    u.cpu_ns = ledger_.update(procs, made, last_ns_ ? t - last_ns_ : 0);
    last_pid_ = last_pid;
    last_ns_ = t;
    return u;
}

}  // namespace gpubox::isolate
