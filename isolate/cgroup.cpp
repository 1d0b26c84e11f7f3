#include "isolate/cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "isolate/systemd_scope.hpp"

namespace gpubox::isolate {
namespace {

// A kernel file's text, "" where it cannot be read (a controller's file that is absent). Not by
// iostreams: a limited run reads a few of these before its clone(), and the first std::ifstream
// of a process cost ~90 us here (the locale's facets and filebuf's code paged in).
std::string read_text(const std::string& path) { return sys::try_read_at(AT_FDCWD, path, 1 << 20); }

// Whether the kernel took `value`: a controller not delegated to us is a refusal to note, not
// an error, and noted without an exception (a run's cgroup search throws nothing it expects).
bool write_text(const std::string& path, const std::string& value) {
    const int fd = sys::try_open_at(AT_FDCWD, path, O_WRONLY);
    if (fd < 0) return false;
    const UniqueFd f(fd);
    return sys::try_write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
}

constexpr const char* kNoCgroup2 = "no cgroup v2 hierarchy is mounted";
constexpr const char* kNoOwnEntry = "/proc/self/cgroup has no cgroup v2 entry";

// Our own cgroup's directory below the cgroup2 mount point, from /proc/self/cgroup as read.
std::optional<std::string> own_cgroup_dir(const CgroupHost& host) {
    if (!host.mount) return std::nullopt;
    auto path = parse_proc_cgroup(host.self);
    if (!path) return std::nullopt;
    return *path == "/" ? *host.mount : *host.mount + *path;
}

// The value of `key` in a cgroup file of "key value" lines (cpu.stat, memory.events).
std::optional<std::uint64_t> keyed_value(std::string_view text, std::string_view key) {
    for (std::string_view line : split_lines(text)) {
        const std::vector<std::string_view> w = split_words(line);
        if (w.size() == 2 && w[0] == key) return parse_whole<std::uint64_t>(w[1]);
    }
    return std::nullopt;
}

// Make `ctrl` available to our child cgroups, if our cgroup offers it.
bool enable_controller(const std::string& parent, const std::string& ctrl) {
    if (!has_word(read_text(parent + "/cgroup.controllers"), ctrl)) return false;
    if (has_word(read_text(parent + "/cgroup.subtree_control"), ctrl)) return true;
    return write_text(parent + "/cgroup.subtree_control", "+" + ctrl);
}

// A monitor killed by SIGKILL never removed its sandbox's cgroup (its sandbox died with it: the
// cgroup is empty). Those of monitors that are gone are removed here; rmdir refuses one that
// still holds a process, so a live sandbox's (of a monitor in another pid namespace) stays.
void remove_stale_cgroups(int parent) {
    for (const std::string& name :
         sys::try_list_dir(parent, ".").value_or(std::vector<std::string>{})) {
        const auto pid = sandbox_cgroup_pid(name);
        if (!pid || *pid == ::getpid() || sys::try_kill(*pid, 0) != -ESRCH) continue;
        try {
            sys::remove_dir_at(parent, name);
        } catch (const SysError&) {  // still in use, or not ours to remove: it stays
        }
    }
}

// The sandbox's cgroup `name` below `parent`, with the limits written. Throws if it cannot be
// made; a missing controller is only a reason. With `refused`, a parent that is not ours to
// write (mkdirat: EACCES, EPERM, EROFS) is not thrown but said there, the cgroup left empty.
Cgroup make_below(const std::string& parent, const std::string& name, const Limits& limits,
                  bool enable_in_parent, std::string* refused = nullptr) {
    const bool want_mem = limits.memory_bytes.has_value(), want_pids = limits.pids.has_value();
    Cgroup cg;
    cg.path = cat(parent, "/", name);
    UniqueFd parent_fd = sys::open_at(AT_FDCWD, parent, O_PATH | O_DIRECTORY);
    // The test first: where the parent is not ours to write (the common case without delegation,
    // every limited run), nothing more is read or listed. The controllers are enabled after: a
    // child cgroup gets their files when its parent's subtree_control gains them.
    if (const int rc = sys::try_mkdir_at(parent_fd.get(), name, 0755); rc < 0 && rc != -EEXIST) {
        if (refused && (rc == -EACCES || rc == -EPERM || rc == -EROFS)) {
            // As SysError's what() words it, without making one: a std::system_error's first
            // construction cost ~120 us of every limited run here, to say what -v alone shows.
            *refused = cat("mkdirat(", quote(name), "): ", ::strerrordesc_np(-rc));
            return {};
        }
        sys::mkdir_at(parent_fd.get(), name, 0755);  // throws its error
    }
    remove_stale_cgroups(parent_fd.get());
    if (enable_in_parent) {
        if (want_mem) enable_controller(parent, "memory");
        if (want_pids) enable_controller(parent, "pids");
    }
    cg.dir = sys::open_at(parent_fd.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);  // made here
    cg.caps.usable = cg.dir.valid();
    if (want_mem && write_text(cg.path + "/memory.max", std::to_string(*limits.memory_bytes))) {
        write_text(cg.path + "/memory.swap.max", "0");
        cg.caps.memory = true;
    }
    if (want_pids && write_text(cg.path + "/pids.max", std::to_string(*limits.pids)))
        cg.caps.pids = true;
    if ((want_mem && !cg.caps.memory) || (want_pids && !cg.caps.pids))
        cg.reason = cat("controllers not delegated to ", quote(parent), ":",
                        want_mem && !cg.caps.memory ? " memory" : "",
                        want_pids && !cg.caps.pids ? " pids" : "");
    return cg;
}

// A route tried: the cgroup it gave, or why it gave none. The expected refusals (no cgroup2, a
// cgroup not delegated to us, no user manager) are found by a cheap test and said in `failed`,
// without an exception: unwinding the first one costs a static binary milliseconds (sorting
// its unwind tables), more than a limited run's whole set-up. The unexpected still throw.
struct Tried {
    Cgroup cg;
    std::string failed;
};

// `host`: read once for every route.
Tried own_route(const Limits& limits, const CgroupHost& host) {
    if (!host.mount) return {{}, kNoCgroup2};
    const std::optional<std::string> parent = own_cgroup_dir(host);
    if (!parent) return {{}, kNoOwnEntry};
    std::string refused;
    Tried t{make_below(*parent, cat("gpubox-", ::getpid()), limits, true, &refused), ""};
    if (!refused.empty())
        t.failed = cat("own cgroup ", quote(*parent), " (not delegated to this user): ", refused);
    t.cg.how = cat("own cgroup ", *parent);
    return t;
}

Cgroup given_route(const Limits& limits, const std::string& parent, const CgroupHost& host) {
    struct stat st {};
    if (!sys::lstat_at(AT_FDCWD, parent + "/cgroup.procs", st))
        throw SetupError(
            cat("--cgroup ", quote(parent), ": not a cgroup v2 directory (no cgroup.procs)"));
    // clone3(CLONE_INTO_CGROUP) would fail with a bare EACCES: said here, with the cgroup that
    // refuses (the kernel checks the user may write it; root may write any).
    char real[PATH_MAX];
    const std::optional<std::string> own = own_cgroup_dir(host);
    if (own && ::realpath(parent.c_str(), real)) {
        const std::string common = common_cgroup(*own, real);
        if (::faccessat(AT_FDCWD, (common + "/cgroup.procs").c_str(), W_OK, AT_EACCESS) != 0 &&
            errno == EACCES)
            throw PlanError(
                cat("--cgroup ", quote(parent),
                    ": cgroup v2 refuses to move the sandbox there from this process's cgroup ",
                    quote(*own), ": the nearest cgroup both share, ", quote(common),
                    ", is not this user's to write"),
                "start gpubox from within the cgroup tree delegated to you that holds DIR (as "
                "systemd-run --user --scope -p Delegate=yes does), or give --cgroup a directory "
                "below your own cgroup");
    }
    Cgroup cg = make_below(parent, cat("gpubox-", ::getpid()), limits, true);
    cg.how = cat("--cgroup ", parent);
    return cg;
}

// The scope's name's random part, from getrandom(2): std::random_device's set-up probes the CPU
// (cpuid, which a VM traps) on every run that looks for a scope.
std::uint32_t unit_random() {
    std::uint32_t r = 0;
    if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r))
        r = static_cast<std::uint32_t>(sys::monotonic_ns());
    return r;
}

// `quick`: no cgroup2 or no bus socket is said, not thrown (--cgroup auto; --cgroup systemd
// fails).
Tried systemd_route(const Limits& limits, bool quick, const std::optional<std::string>& mnt) {
    if (!mnt) {
        if (quick) return {{}, kNoCgroup2};
        throw SetupError(kNoCgroup2);
    }
    const std::string unit = scope_unit_name(::getpid(), unit_random());
    if (quick)
        if (const std::string missing = systemd_bus_missing(); !missing.empty())
            return {{}, cat("systemd scope ", quote(unit), ": ", missing)};
    try {
        const SystemdScope scope = enter_systemd_scope(*mnt, unit);
        Cgroup cg = make_below(scope.dir, "sandbox", limits, false);
        cg.how = cat("systemd scope ", unit);
        return {std::move(cg), ""};
    } catch (...) {
        std::throw_with_nested(SetupError(cat("systemd scope ", quote(unit))));
    }
}

Tried try_route(CgroupRoute route, const Limits& limits, const CgroupRequest& request,
                const CgroupHost& host) {
    switch (route) {
        case CgroupRoute::own: return own_route(limits, host);
        case CgroupRoute::systemd_scope:
            return systemd_route(limits, request.mode == CgroupMode::auto_, host.mount);
        case CgroupRoute::given: return {given_route(limits, request.path, host), ""};
    }
    throw SetupError("unknown cgroup route");
}

}  // namespace

// Where cgroup2 is mounted: /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid), which
// one statfs each tells, else mountinfo's first. The search runs every limited run, and reading
// mountinfo makes the kernel print every mount of the host (46 us a read here, 22 mounts).
CgroupHost read_cgroup_host() {
    CgroupHost host;
    host.self = read_text("/proc/self/cgroup");
    for (const char* dir : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        struct statfs fs {};
        if (::statfs(dir, &fs) == 0 && fs.f_type == 0x63677270) {  // CGROUP2_SUPER_MAGIC
            host.mount = dir;
            return host;
        }
    }
    host.mount = parse_cgroup2_mount(read_text("/proc/self/mountinfo"));
    return host;
}

Cgroup setup_cgroup(const Limits& limits, const CgroupRequest& request, const CgroupHost& host) {
    Cgroup best;
    if (request.mode == CgroupMode::off) {
        best.reason = cat("--cgroup ", to_string(request.mode));
        return best;
    }
    std::vector<std::pair<CgroupRoute, std::string>> tried;
    std::optional<CgroupRoute> best_route;
    for (CgroupRoute route : plan_cgroup_routes(request.mode)) {
        Tried t;
        try {
            t = try_route(route, limits, request, host);
        } catch (...) {
            if (request.mode != CgroupMode::auto_) std::throw_with_nested(SetupError("cgroup"));
            t.failed = describe(std::current_exception());
        }
        if (!t.failed.empty()) {  // only --cgroup auto's routes fail quietly
            tried.emplace_back(route, t.failed);
            continue;
        }
        Cgroup& cg = t.cg;
        tried.emplace_back(route, cg.reason.empty() ? "" : cat(cg.how, ": ", cg.reason));
        if (cgroup_score(cg.caps, limits) > cgroup_score(best.caps, limits))
            std::swap(best, cg), best_route = route;
        remove_cgroup(cg);
        if (cgroup_covers(best.caps, limits)) break;
    }
    std::vector<std::string> why;
    for (const auto& [route, text] : tried) {
        if (!text.empty()) why.push_back(text);
        if (route != best_route) best.passed_over.emplace_back(route, text);
    }
    best.reason = cgroup_covers(best.caps, limits) ? "" : join(why, "; ");
    if (!best.how.empty()) log::info(cat("cgroup: ", best.how));
    return best;
}

std::optional<std::uint64_t> cgroup_cpu_usec(const Cgroup& cg) {
    return keyed_value(read_text(cg.path + "/cpu.stat"), "usage_usec");
}

std::optional<std::uint64_t> cgroup_memory_peak(const Cgroup& cg) {
    std::string t = read_text(cg.path + "/memory.peak");
    if (t.empty()) return std::nullopt;
    return std::stoull(t);
}

bool cgroup_oom_killed(const Cgroup& cg) {
    return keyed_value(read_text(cg.path + "/memory.events"), "oom_kill").value_or(0) > 0;
}

bool cgroup_kill(const Cgroup& cg) {
    return cg.caps.usable && write_text(cg.path + "/cgroup.kill", "1");
}

bool autogroups_here(const CgroupHost& host) {
    return autogroup_applies(read_text("/proc/sys/kernel/sched_autogroup_enabled") == "1\n",
                             host.self, read_text("/sys/fs/cgroup/cgroup.subtree_control"));
}

void remove_cgroup(Cgroup& cg) {
    if (cg.path.empty()) return;
    cg.dir.reset();
    for (int i = 0; i < 100 && sys::try_rmdir(cg.path) == -EBUSY; ++i) ::usleep(2000);
    cg.path.clear();
}

}  // namespace gpubox::isolate
