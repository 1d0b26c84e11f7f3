#include "launcher/monitor/named.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"
#include "isolate/usage.hpp"

namespace gpubox::launcher::named {
namespace {

constexpr const char* kWhat = "sandbox registry";
constexpr const char* kHint =
    "set GPUBOX_SANDBOX_DIR to a directory of your own that only you can write, on this node";

std::string registry_path() {
    if (const char* d = std::getenv("GPUBOX_SANDBOX_DIR"); d && *d) return d;
    if (const char* r = std::getenv("XDG_RUNTIME_DIR"); r && *r == '/')
        return cat(r, "/gpubox/sandboxes");
    return cat("/tmp/gpubox-sandboxes-", ::getuid());
}

UniqueFd open_registry(trusted_path::Missing missing) {
    return trusted_path::open_state_dir(registry_path(), missing, kWhat, kHint);
}

std::string lock_file(const std::string& name) { return name + ".lock"; }
std::string entry_file(const std::string& name) { return name + ".sandbox"; }

// The lock file `name`, opened (never through a symlink: ELOOP), and a regular file of ours.
UniqueFd open_lock(int dir, const std::string& name, bool create) {
    const int fd = sys::try_open_at(
        dir, lock_file(name), O_RDWR | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0), 0600);
    if (fd == -ENOENT && !create) return {};
    if (fd < 0) sys::fail(cat("open(", quote(lock_file(name)), ")"), -fd);
    UniqueFd lock(fd);
    const struct stat st = sys::fstat(lock.get(), lock_file(name));
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
        throw PlanError(
            cat(kWhat, ": ", quote(lock_file(name)), " is not a regular file of the caller's own"),
            kHint);
    return lock;
}

// Whether `lock` is still the file under its name (a stale entry's remover unlinks it).
bool still_linked(int dir, const std::string& name, int lock) {
    const struct stat held = sys::fstat(lock, lock_file(name));
    struct stat now {};
    return sys::lstat_at(dir, lock_file(name), now) && now.st_ino == held.st_ino &&
           now.st_dev == held.st_dev;
}

// Both names go, the lock's last, while `lock` is held.
void remove_entry(int dir, const std::string& name) {
    sys::try_unlink_at(dir, entry_file(name));
    sys::try_unlink_at(dir, lock_file(name));
}

std::optional<Entry> read_entry(int dir, const std::string& name) {
    const int fd = sys::try_open_at(dir, entry_file(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    UniqueFd f(fd);
    const struct stat st = sys::fstat(f.get(), entry_file(name));
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return std::nullopt;
    Entry e = parse(sys::read_all(f.get(), entry_file(name), 1 << 16));
    if (e.name != name || e.pid <= 0) return std::nullopt;
    return e;
}

// A running sandbox's entry: its lock is held (by its monitor). A stale one is removed.
std::optional<Entry> live_entry(int dir, const std::string& name) {
    UniqueFd lock = open_lock(dir, name, false);
    if (!lock.valid()) return std::nullopt;
    if (sys::flock_try(lock.get(), false, lock_file(name))) {  // nobody holds it: stale
        if (still_linked(dir, name, lock.get())) remove_entry(dir, name);
        return std::nullopt;
    }
    return read_entry(dir, name);
}

std::string clean(std::string v) {
    for (char& c : v)
        if (c == '\n' || c == '\r') c = ' ';
    return v;
}

std::uint64_t to_u64(std::string_view s) { return parse_whole<std::uint64_t>(s).value_or(0); }

}  // namespace

std::string name_problem(const std::string& name) {
    if (name.empty()) return "is empty";
    if (name.size() > 64) return "is longer than 64 characters";
    if (name[0] == '.' || name[0] == '-') return cat("starts with '", name[0], "'");
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
            return c == '/' ? "contains '/'" : "has a character other than A-Z a-z 0-9 _ . -";
    return "";
}

std::string limits_summary(const isolate::Limits& l, const isolate::LimitPlan& plan) {
    using isolate::LimitName;
    auto how = [&](LimitName n) -> std::string {
        for (const auto& [name, mech] : plan.mechanisms)
            if (name == n)
                return mech.find("NOT enforced") != std::string::npos ? "not enforced"
                       : starts_with(mech, "cgroup")                  ? "cgroup"
                       : starts_with(mech, "RLIMIT")                  ? "rlimit"
                                                                      : "monitor";
        return "monitor";
    };
    auto secs = [](double s) {
        char b[32];
        std::snprintf(b, sizeof b, "%gs", s);
        return std::string(b);
    };
    std::vector<std::string> out;
    auto add = [&](const char* what, const std::string& v, LimitName n) {
        out.push_back(cat(what, " ", v, " (", how(n), ")"));
    };
    if (l.memory_bytes) add("mem", unit_size(*l.memory_bytes), LimitName::memory);
    if (l.cpu_seconds) add("cpu", secs(*l.cpu_seconds), LimitName::cpu_time);
    if (l.wall_seconds) add("wall", secs(*l.wall_seconds), LimitName::wall_time);
    const std::uint64_t pids = l.pids.value_or(isolate::kDefaultPids);
    if (pids) add("pids", std::to_string(pids), LimitName::pids);
    return out.empty() ? "-" : join(out, ", ");
}

std::string render(const Entry& e) {
    std::string rl;
    for (auto [r, v] : e.rlimits) rl += cat(rl.empty() ? "" : ",", r, ":", v);
    std::string env;
    for (const std::string& kv : e.env)
        if (kv.find('\n') == std::string::npos) env += cat("env=", kv, "\n");  // else left out
    return cat("name=", e.name, "\npid=", e.pid, "\nstart=", e.start, "\nmonitor=", e.monitor,
               "\nstarted=", e.started, "\nrootfs=", clean(e.rootfs), "\ngpus=", clean(e.gpus),
               "\nlimits=", clean(e.limits), "\nseccomp=", clean(e.seccomp),
               "\nrefuse_memfd=", e.refuse_memfd ? 1 : 0,
               "\nrefuse_setsid=", e.refuse_setsid ? 1 : 0, "\nnested=", e.nested ? 1 : 0,
               "\nown_net=", e.own_net ? 1 : 0, "\ncgroup=", clean(e.cgroup), "\nrlimits=", rl,
               "\nworkdir=", clean(e.workdir), "\n", env);
}

Entry parse(const std::string& text) {
    Entry e;
    for (std::string_view line : split_lines(text)) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        const std::string k(line.substr(0, eq)), v(line.substr(eq + 1));
        if (k == "name") e.name = v;
        else if (k == "pid") e.pid = static_cast<pid_t>(to_u64(v));
        else if (k == "start") e.start = to_u64(v);
        else if (k == "monitor") e.monitor = static_cast<pid_t>(to_u64(v));
        else if (k == "started") e.started = static_cast<std::int64_t>(to_u64(v));
        else if (k == "rootfs") e.rootfs = v;
        else if (k == "gpus") e.gpus = v;
        else if (k == "limits") e.limits = v;
        else if (k == "seccomp") e.seccomp = v;
        else if (k == "refuse_memfd") e.refuse_memfd = v == "1";
        else if (k == "refuse_setsid") e.refuse_setsid = v == "1";
        else if (k == "nested") e.nested = v == "1";
        else if (k == "own_net") e.own_net = v == "1";
        else if (k == "cgroup") e.cgroup = v;
        else if (k == "workdir") e.workdir = v;
        else if (k == "env") e.env.push_back(v);
        else if (k == "rlimits") {
            for (std::string_view item : split_at(v, ','))
                if (const auto c = item.find(':'); c != std::string::npos)
                    e.rlimits.emplace_back(static_cast<int>(to_u64(item.substr(0, c))),
                                           to_u64(item.substr(c + 1)));
        }
    }
    return e;
}

std::string render_json(const std::vector<Entry>& entries, std::int64_t now) {
    nlohmann::json out = nlohmann::json::array();
    for (const Entry& e : entries)
        out.push_back({{"name", e.name},
                       {"pid", e.pid},
                       {"image", e.rootfs},
                       {"gpus", e.gpus},
                       {"limits", e.limits},
                       {"cgroup", e.cgroup},
                       {"started", e.started},
                       {"uptime_s", now > e.started ? now - e.started : 0}});
    return out.dump(2) + "\n";
}

Claim& Claim::operator=(Claim&& o) noexcept {
    if (this != &o) {
        release();
        dir_ = std::move(o.dir_), lock_ = std::move(o.lock_), name_ = std::move(o.name_);
    }
    return *this;
}

Claim::~Claim() { release(); }

void Claim::release() noexcept {
    if (!lock_.valid()) return;
    remove_entry(dir_.get(), name_);
    lock_.reset();
    dir_.reset();
}

void Claim::publish(const Entry& e) {
    if (!lock_.valid()) return;
    const std::string tmp = "." + name_ + ".tmp";
    sys::try_unlink_at(dir_.get(), tmp);
    UniqueFd f = sys::open_at(dir_.get(), tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    sys::write_all(f.get(), render(e), tmp);
    sys::rename_at(dir_.get(), tmp, entry_file(name_));
}

Claim claim(const std::string& name) {
    if (const std::string p = name_problem(name); !p.empty())
        throw PlanError(cat("run: --name ", quote(name), ": the name ", p),
                        "a name is 1 to 64 of A-Z a-z 0-9 _ . - (not first: . or -)");
    Claim c;
    c.dir_ = open_registry(trusted_path::Missing::create);
    c.name_ = name;
    for (int attempt = 0; attempt < 20; ++attempt) {
        UniqueFd lock = open_lock(c.dir_.get(), name, true);
        if (!sys::flock_try(lock.get(), false, lock_file(name))) {
            const std::optional<Entry> e = read_entry(c.dir_.get(), name);
            throw PlanError(cat("run: --name ", quote(name), ": a sandbox of that name is running",
                                e ? cat(" (pid ", e->pid, ")") : ""),
                            "'gpubox ps' lists them; choose another name, or 'gpubox exec " + name +
                                " CMD' runs CMD in it");
        }
        if (!still_linked(c.dir_.get(), name, lock.get())) continue;  // a stale one's, removed
        sys::try_unlink_at(c.dir_.get(), entry_file(name));           // a dead run's, if any
        c.lock_ = std::move(lock);
        return c;
    }
    throw SetupError(cat("run: --name ", quote(name), ": its lock kept going away"));
}

std::vector<Entry> list() {
    std::vector<Entry> out;
    const UniqueFd dir = open_registry(trusted_path::Missing::absent_ok);
    if (!dir.valid()) return out;
    std::vector<std::string> names = sys::list_dir(dir.get(), ".");
    std::sort(names.begin(), names.end());
    for (const std::string& f : names) {
        const auto dot = f.rfind(".lock");
        if (dot == std::string::npos || dot + 5 != f.size()) continue;
        const std::string name = f.substr(0, dot);
        if (!name_problem(name).empty()) continue;
        try {
            if (std::optional<Entry> e = live_entry(dir.get(), name)) out.push_back(std::move(*e));
        } catch (const std::exception&) {  // not one of ours (a symlink, a FIFO): said, skipped
            log::warn(describe(std::current_exception()));
        }
    }
    return out;
}

std::uint64_t start_time(pid_t pid) {
    isolate::ProcSample s;
    try {
        if (isolate::parse_proc_stat(sys::read_file(cat("/proc/", pid, "/stat"), 4096), 1, s))
            return s.start;
    } catch (const SysError&) {}
    return 0;
}

Target find(const std::string& name) {
    if (const std::string p = name_problem(name); !p.empty())
        throw PlanError(cat("exec: no sandbox can be named ", quote(name), " (the name ", p, ")"));
    const UniqueFd dir = open_registry(trusted_path::Missing::absent_ok);
    std::optional<Entry> e;
    if (dir.valid()) e = live_entry(dir.get(), name);
    if (!e)
        throw PlanError(cat("exec: no running sandbox named ", quote(name)),
                        "'gpubox ps' lists yours; 'gpubox run --name NAME ...' names one");
    Target t;
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, e->pid, 0));
    // The pidfd is of the recorded init only if that pid still has its start time after it was
    // opened, and the sandbox still runs (its lock held): a pid reused since is refused.
    if (fd >= 0) t.init = UniqueFd(fd);
    pollfd p{t.init.get(), POLLIN, 0};
    const UniqueFd lock = open_lock(dir.get(), name, false);
    if (!t.init.valid() || start_time(e->pid) != e->start || !lock.valid() ||
        sys::flock_try(lock.get(), true, lock_file(name)) || ::poll(&p, 1, 0) != 0)
        throw PlanError(cat("exec: the sandbox ", quote(name), " has ended"));
    t.entry = std::move(*e);
    return t;
}

}  // namespace gpubox::launcher::named
