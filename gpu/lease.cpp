#include "gpu/lease.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "gpu/gpu_spec.hpp"

namespace gpubox::gpu {
namespace {

enum class Try { taken, busy, unusable };

constexpr int kLockOpen = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

// Opens (creating it only with O_EXCL, so never another's file through O_CREAT, which
// fs.protected_regular refuses in a sticky directory anyway) and locks one lock file. A
// symlink, a FIFO or any non-regular file is never followed or blocked on: that GPU is
// unusable, and `why` says so. The lock must be on the file the name still names: one
// removed and made anew meanwhile is tried again.
Try try_lock(int dir, const std::string& name, bool shared, UniqueFd& out, std::string& why) {
    for (int attempt = 0; attempt < 4; ++attempt) {
        UniqueFd fd;
        try {
            fd = sys::open_at(dir, name, kLockOpen | O_CREAT | O_EXCL, 0644);
            sys::fchmod(fd.get(), 0644, name);  // whatever the umask: others need only read it
        } catch (const SysError& e) {
            if (e.err() != EEXIST) throw;
            try {
                fd = sys::open_at(dir, name, kLockOpen);
            } catch (const SysError& e2) {
                if (e2.err() == ENOENT) continue;
                why = e2.err() == ELOOP ? cat(name, " is a symlink") : e2.what();
                return Try::unusable;
            }
        }
        const struct stat st = sys::fstat(fd.get(), name);
        if (!S_ISREG(st.st_mode)) {
            why = cat(name, " is not a regular file");
            return Try::unusable;
        }
        if (!sys::flock_try(fd.get(), shared, name)) return Try::busy;
        struct stat now {};
        if (sys::lstat_at(dir, name, now) && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
            out = std::move(fd);
            return Try::taken;
        }
    }
    return Try::busy;
}

struct Holder {
    std::string name;
    LockLine lock;
};

// Who holds which lock file in the directory, from /proc/locks.
std::vector<Holder> holders(int dir) {
    std::vector<LockLine> locks;
    try {
        locks = parse_proc_locks(sys::read_file("/proc/locks", 16 << 20));
    } catch (const SysError&) {
        return {};
    }
    std::vector<Holder> out;
    for (const std::string& name : sys::list_dir(dir, ".")) {
        struct stat st {};
        if (name.size() < 6 || name.substr(name.size() - 5) != ".lock" ||
            !sys::lstat_at(dir, name, st))
            continue;
        for (const LockLine& l : locks)
            if (l.inode == st.st_ino && l.dev_major == major(st.st_dev) &&
                l.dev_minor == minor(st.st_dev))
                out.push_back({name, l});
    }
    return out;
}

std::string owner_of(pid_t pid) {
    struct stat st {};
    if (!sys::lstat_at(AT_FDCWD, cat("/proc/", pid), st)) return "?";
    return std::to_string(st.st_uid);
}

std::string describe(const std::vector<Holder>& hs) {
    std::vector<std::string> out;
    for (const Holder& h : hs)
        out.push_back(cat(h.name, " (", h.lock.shared ? "shared" : "exclusive", ", pid ",
                          h.lock.pid, " uid ", owner_of(h.lock.pid), ")"));
    return out.empty() ? "none" : join(out, ", ");
}

}  // namespace

std::string lease_name(const Gpu& g) {
    std::string key = g.uuid.empty() ? to_string(g.pci) : g.uuid;
    for (char& c : key)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_')
            c = '_';
    return "nvidia-" + key + ".lock";
}

std::string lease_name(const Gpu& g, const MigDevice& m) {
    const std::string whole = lease_name(g);
    return cat(whole.substr(0, whole.size() - 5), "-gi", m.gi, "-ci", m.ci, ".lock");
}

std::vector<LockLine> parse_proc_locks(const std::string& text) {
    std::vector<LockLine> out;
    for (std::string_view line : split_lines(text)) {
        // "ID: FLOCK ADVISORY MODE PID MAJ:MIN:INODE START END"; "->" after ID marks a waiter
        const std::vector<std::string_view> w = split_words(line);
        if (w.size() < 6 || w[1] != "FLOCK") continue;
        LockLine l;
        const std::optional<pid_t> pid = parse_whole<pid_t>(w[4]);
        if (!pid) continue;
        l.pid = *pid;
        const std::string dev(w[5]);
        unsigned maj = 0, min = 0;
        unsigned long ino = 0;
        if (std::sscanf(dev.c_str(), "%x:%x:%lu", &maj, &min, &ino) != 3) continue;
        l.shared = w[3] == "READ";
        l.dev_major = maj, l.dev_minor = min, l.inode = ino;
        out.push_back(l);
    }
    return out;
}

std::string lease_dir_path() {
    if (const char* d = std::getenv("GPUBOX_LEASE_DIR"); d && *d) return d;
    struct stat st {};
    if (sys::lstat_at(AT_FDCWD, "/run/gpubox/leases", st) && S_ISDIR(st.st_mode) &&
        sys::try_faccessat("/run/gpubox/leases", W_OK | X_OK) == 0)
        return "/run/gpubox/leases";
    return "/tmp/gpubox-leases";
}

UniqueFd open_lease_dir(const std::string& path, bool create) {
    struct stat st {};
    if (!sys::lstat_at(AT_FDCWD, path, st)) {
        if (!create) return {};
        try {
            sys::mkdir_at(AT_FDCWD, path, 0700);
            UniqueFd fd = sys::open_at(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
            // Whoever makes it owns it; 0700 until it is sticky, so nobody slips in between.
            if (sys::fstat(fd.get(), path).st_uid == ::getuid()) sys::fchmod(fd.get(), 01777, path);
        } catch (const SysError& e) {
            if (e.err() != EEXIST) throw;
        }
    }
    UniqueFd fd;
    try {
        fd = sys::open_at(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (const SysError&) {
        std::throw_with_nested(
            PlanError(cat("GPU lease directory ", quote(path), " is not a usable directory")));
    }
    st = sys::fstat(fd.get(), path);
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        throw PlanError(cat("GPU lease directory ", quote(path),
                            " is writable by all but not sticky: anyone could remove a lease"),
                        "an admin can make /run/gpubox/leases (root's, mode 1777)");
    return fd;
}

namespace {

struct Unit {
    std::string item, lock;  // as --gpu names it; its lock file
};

// What --gpu auto hands out: each usable NVIDIA GPU, except that one with MIG GPU instances
// is handed out by its usable MIG devices.
std::vector<Unit> lease_units(const GpuInventory& inv) {
    std::vector<Unit> out;
    for (const Gpu& g : inv.gpus) {
        if (g.vendor != Vendor::nvidia || !g.problem.empty() || g.index < 0) continue;
        if (g.mig_instances == 0) out.push_back({std::to_string(g.index), lease_name(g)});
        for (const MigDevice& m : g.mig)
            if (m.problem.empty()) out.push_back({mig_id(g, m), lease_name(g, m)});
    }
    return out;
}

}  // namespace

Lease take_lease(const GpuInventory& inv, const LeaseRequest& r) {
    const std::vector<Unit> candidates = lease_units(inv);
    const std::string what = cat("--gpu auto:", r.count, r.shared ? " --gpu-share" : "");
    const bool mig = std::any_of(inv.gpus.begin(), inv.gpus.end(),
                                 [](const Gpu& g) { return g.mig_instances > 0; });
    const char* units = mig ? "GPUs and MIG devices" : "GPUs";
    if (static_cast<int>(candidates.size()) < r.count)
        throw PlanError(cat(what, ": this host has ", candidates.size(), " usable NVIDIA ", units),
                        "see 'gpubox list'");
    Lease lease;
    lease.dir = lease_dir_path();
    UniqueFd dir = open_lease_dir(lease.dir, true);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<long>(r.wait_seconds * 1000));
    for (;;) {
        std::vector<std::string> unusable;
        for (const Unit& u : candidates) {
            if (static_cast<int>(lease.items.size()) == r.count) break;
            UniqueFd fd;
            std::string why;
            const Try t = try_lock(dir.get(), u.lock, r.shared, fd, why);
            if (t == Try::taken)
                lease.items.push_back(u.item), lease.locks.push_back(std::move(fd));
            if (t == Try::unusable) unusable.push_back(why);
        }
        if (static_cast<int>(lease.items.size()) == r.count) return lease;
        const std::size_t got = lease.items.size();
        lease.items.clear(), lease.locks.clear();  // never sit on some while waiting for more
        if (std::chrono::steady_clock::now() >= deadline)
            throw PlanError(cat(what, ": only ", got, " of ", candidates.size(), " ", units,
                                " free in ", lease.dir, "; held: ", describe(holders(dir.get())),
                                unusable.empty() ? "" : "; unusable: " + join(unusable, ", ")),
                            "--gpu-wait SEC waits for them; 'gpubox list' shows who holds which");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

std::string describe_leases(const GpuInventory& inv) {
    UniqueFd dir;
    const std::string path = lease_dir_path();
    try {
        dir = open_lease_dir(path, false);
    } catch (const PlanError&) {
        return "";
    }
    if (!dir.valid()) return "";
    std::ostringstream out;
    for (const Holder& h : holders(dir.get())) {
        std::string gpu = "-";
        for (const Unit& u : lease_units(inv))
            if (u.lock == h.name) gpu = u.item;
        out << gpu << "  " << (h.lock.shared ? "shared" : "exclusive") << "  pid " << h.lock.pid
            << "  uid " << owner_of(h.lock.pid) << "  " << path << "/" << h.name << "\n";
    }
    const std::string s = out.str();
    return s.empty() ? "" : "LEASE\n" + s;
}

}  // namespace gpubox::gpu
