#include "gpu/inventory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/ldcache.hpp"
#include "gpu/proc_driver.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::gpu {
namespace {

constexpr int kNvidiaMajor = 195;

// A short read ends the file: true of regular files, sysfs attributes and the seq_file procfs
// files read here, and it saves a read per file on the start-up path. O_NONBLOCK: a FIFO planted
// under the driver root reads as empty instead of blocking the monitor (which then ignores
// SIGTERM, as it forwards signals only once it supervises).
std::optional<std::string> read_in(int root, const std::string& path, std::size_t limit = 1 << 20) {
    int fd = rootfs::try_open_in_root(root, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return std::nullopt;
    UniqueFd f(fd);
    std::string out;
    char buf[8192];
    for (ssize_t n; (n = ::read(f.get(), buf, sizeof buf)) > 0;) {
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > limit) return std::nullopt;
        if (static_cast<std::size_t>(n) < sizeof buf) break;
    }
    return out;
}

unsigned hex_value(const std::optional<std::string>& text) {
    if (!text) return 0;
    try {
        return static_cast<unsigned>(std::stoul(*text, nullptr, 16));
    } catch (...) {
        return 0;
    }
}

// Host files, looked up in their directory (opened once, inside the driver root) by one
// fstatat() of the last component, which is never followed. A symlink to a plain name in the
// same directory, as drivers install sonames (libcuda.so.1 -> libcuda.so.550.54.14), is
// followed by hand; any other link takes the full resolution inside the driver root. Discovery
// runs on every `run --gpu`: this saves an open, a /proc/self/fd readlink and a close per file.
class HostFiles {
public:
    struct Found {
        bool exists = false;
        struct stat st {};
        std::string host;  // the real host path ("" if missing)
    };

    explicit HostFiles(int root) : root_(root) {}

    // `f` as found at host path `host`.
    static Found found(Found f, std::string host) {
        f.exists = true;
        f.host = std::move(host);
        return f;
    }

    // `link`: the file is most likely a symlink (a library's soname): its target is read first,
    // which saves the fstatat() that would only say so.
    Found find(const std::string& path, bool link = false) {
        const Dir& d = dir(rootfs::parent_of(path));
        const std::string name = rootfs::base_name(path);
        Found f;
        if (!d.fd.valid()) return {};
        char buf[256];
        ssize_t n = -1;
        if (link && (n = ::readlinkat(d.fd.get(), name.c_str(), buf, sizeof buf)) < 0 &&
            errno != EINVAL)
            return {};
        if (n < 0) {
            if (::fstatat(d.fd.get(), name.c_str(), &f.st, AT_SYMLINK_NOFOLLOW) < 0) return {};
            if (!S_ISLNK(f.st.st_mode)) return found(f, d.host + "/" + name);
            n = ::readlinkat(d.fd.get(), name.c_str(), buf, sizeof buf);
        }
        const std::string target(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
        if (n > 0 && static_cast<std::size_t>(n) < sizeof buf &&
            target.find('/') == std::string::npos && target != "." && target != ".." &&
            ::fstatat(d.fd.get(), target.c_str(), &f.st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISLNK(f.st.st_mode))
            return found(f, d.host + "/" + target);
        return resolved(path);
    }

private:
    struct Dir {
        UniqueFd fd;
        std::string host;
    };

    // A directory reached without a symlink is at the driver root's host path plus its own (one
    // readlink for the root, not one per directory); any other is asked for its real path.
    const Dir& dir(const std::string& path) {
        auto it = dirs_.find(path);
        if (it != dirs_.end()) return it->second;
        Dir d;
        if (rootfs::is_plain_path(path)) {
            const int fd = rootfs::try_open_beneath(root_, path.substr(1), O_PATH | O_DIRECTORY);
            if (fd >= 0) {
                if (!root_host_) root_host_ = sys::read_fd_link(root_);
                d.fd.reset(fd), d.host = (*root_host_ == "/" ? "" : *root_host_) + path;
            }
            // Missing without a symlink on the way: missing however it is resolved.
            if (fd == -ENOENT || fd == -ENOTDIR)
                return dirs_.emplace(path, std::move(d)).first->second;
        }
        if (!d.fd.valid())
            if (int fd = rootfs::try_open_in_root(root_, path, O_PATH | O_DIRECTORY); fd >= 0)
                d.fd.reset(fd), d.host = sys::read_fd_link(fd);
        return dirs_.emplace(path, std::move(d)).first->second;
    }

    Found resolved(const std::string& path) {
        Found f;
        int fd = rootfs::try_open_in_root(root_, path, O_PATH);
        if (fd < 0) return f;
        UniqueFd file(fd);
        if (::fstat(fd, &f.st) == 0) f.exists = true, f.host = sys::read_fd_link(fd);
        return f;
    }

    int root_;
    std::optional<std::string> root_host_;
    std::map<std::string, Dir> dirs_;
};

Node find_node(HostFiles& files, const std::string& path) {
    const HostFiles::Found f = files.find(path);
    Node n{path};
    if (f.exists)
        n.host = f.host, n.exists = true, n.is_char = S_ISCHR(f.st.st_mode), n.rdev = f.st.st_rdev;
    return n;
}

// "gi3" -> 3 (for `prefix` "gi"); -1 for any other name.
int numbered(const std::string& name, const char* prefix) {
    const std::string p = prefix;
    if (!starts_with(name, p) || name.size() == p.size() || name.size() > p.size() + 4) return -1;
    for (std::size_t i = p.size(); i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return -1;
    return std::stoi(name.substr(p.size()));
}

// The GPU's MIG devices, from the driver's capability directories: one per compute instance
// of each GPU instance (their nodes are found once mig-minors is read, see add_mig_nodes).
void add_mig_instances(int root, HostFiles& files, Gpu& g) {
    const std::string dir = cat("/proc/driver/nvidia/capabilities/gpu", g.minor, "/mig");
    const HostFiles::Found d = files.find(dir);
    g.mig_dir = d.exists && S_ISDIR(d.st.st_mode);
    if (!g.mig_dir) return;
    for (const std::string& gi_name : list_dir(root, dir)) {
        const int gi = numbered(gi_name, "gi");
        if (gi < 0) continue;
        ++g.mig_instances;
        const std::string gi_dir = dir + "/" + gi_name;
        for (const std::string& ci_name : list_dir(root, gi_dir)) {
            const int ci = numbered(ci_name, "ci");
            if (ci < 0) continue;
            MigDevice m;
            m.gi = gi, m.ci = ci;
            m.gi_access = gi_dir + "/access";
            m.ci_access = gi_dir + "/" + ci_name + "/access";
            for (auto [path, host] : {std::pair{&m.gi_access, &m.gi_access_host},
                                      std::pair{&m.ci_access, &m.ci_access_host}}) {
                const HostFiles::Found f = files.find(*path);
                if (f.exists && S_ISREG(f.st.st_mode)) *host = f.host;
                else if (m.problem.empty())
                    m.problem = cat(quote(*path), " is not a file inside the driver root");
            }
            g.mig.push_back(std::move(m));
        }
    }
    std::sort(g.mig.begin(), g.mig.end(), [](const MigDevice& a, const MigDevice& b) {
        return std::pair(a.gi, a.ci) < std::pair(b.gi, b.ci);
    });
}

// The MIG devices' capability nodes: minors from mig-minors, checked against the major the
// driver registered as `nvidia-caps`, as for the GPUs' own nodes.
void add_mig_nodes(int root, HostFiles& files, GpuInventory& inv, const std::string& devices) {
    std::optional<std::map<std::string, int>> minors;
    const int major = parse_char_major(devices, "nvidia-caps");
    for (Gpu& g : inv.gpus)
        for (MigDevice& m : g.mig) {
            if (!minors)
                minors = parse_mig_minors(
                    read_in(root, "/proc/driver/nvidia-caps/mig-minors").value_or(""));
            const std::string gi = cat("gpu", g.minor, "/gi", m.gi), ci = cat(gi, "/ci", m.ci);
            const auto gi_it = minors->find(gi + "/access"), ci_it = minors->find(ci + "/access");
            if (gi_it == minors->end() || ci_it == minors->end()) {
                if (m.problem.empty())
                    m.problem = cat("/proc/driver/nvidia-caps/mig-minors lists no ",
                                    gi_it == minors->end() ? gi : ci, "/access");
                continue;
            }
            m.gi_minor = gi_it->second, m.ci_minor = ci_it->second;
            m.gi_node = find_node(files, cat("/dev/nvidia-caps/nvidia-cap", m.gi_minor));
            m.ci_node = find_node(files, cat("/dev/nvidia-caps/nvidia-cap", m.ci_minor));
            // Not the node the driver made for that capability: never given.
            m.gi_node.is_char &= major >= 0 && m.gi_node.rdev == makedev(major, m.gi_minor);
            m.ci_node.is_char &= major >= 0 && m.ci_node.rdev == makedev(major, m.ci_minor);
            m.gi_node.read_only = m.ci_node.read_only = true;
        }
}

// One directory of /proc/driver/nvidia/gpus, and the bus address its name spells, if any.
struct ProcGpuDir {
    std::string dir;
    std::optional<PciAddress> pci;
};

enum class GpuRead { ok, unusable, reorder };

// GPU `g`, listed as `e`, from its information file: ok (a problem may still be noted),
// unusable (`why` says why), or reorder: `lazy` placed it by its name, which its file
// contradicts, and only the full read can order the GPUs.
GpuRead read_nvidia_gpu(int root, HostFiles& files, const ProcGpuDir& e, bool lazy, Gpu& g,
                        std::string& why) {
    const std::string dir = "/proc/driver/nvidia/gpus/" + e.dir, path = dir + "/information";
    auto text = read_in(root, path);
    if (!text) {
        why = cat(quote(path), " cannot be read");
        return GpuRead::unusable;
    }
    GpuInformation info;
    try {
        info = parse_gpu_information(*text, path);
    } catch (const PlanError& x) {
        why = x.what();
        return GpuRead::unusable;
    }
    auto pci = parse_pci_address(info.bus_location);
    if (!pci) pci = e.pci;
    if (!pci) {
        why = cat("its Bus Location ", quote(info.bus_location), " is not one");
        return GpuRead::unusable;
    }
    if (lazy && pci != e.pci) return GpuRead::reorder;
    g.pci = *pci;
    g.model = info.model;
    g.uuid = info.uuid;
    g.minor = info.device_minor;
    // Its directory is bound into the sandbox: from where it is inside the driver root.
    if (const HostFiles::Found d = files.find(dir); d.exists && S_ISDIR(d.st.st_mode))
        g.proc_host = d.host;
    else g.problem = cat(quote(dir), " is not a directory inside the driver root");
    g.nodes.push_back(find_node(files, cat("/dev/nvidia", info.device_minor)));
    add_mig_instances(root, files, g);
    return GpuRead::ok;
}

// The driver's GPUs, indexed in PCI bus order, as nvidia-smi numbers them (one whose
// information file cannot be read or parsed is kept, unusable). With `only` (indices), the
// others get their place in that order from their directory's name alone, with no read of their
// information file or their node: a `run --gpu 0` on an 8-GPU host reads one GPU's files, not
// eight.
void add_nvidia_gpus(int root, HostFiles& files, GpuInventory& inv,
                     const std::vector<Gpu>& sysfs_nvidia, const std::vector<int>& only) {
    std::vector<ProcGpuDir> dirs;
    bool named = true;  // every directory is named by its bus address, as the driver names them
    for (std::string& dir : list_dir(root, "/proc/driver/nvidia/gpus")) {
        auto pci = parse_pci_address(dir);
        named = named && pci.has_value();
        dirs.push_back({std::move(dir), pci});
    }
    const bool lazy = named && !only.empty();
    // The driver lists its GPUs only (an NVSwitch has its own directory); the PCI class comes
    // from the sysfs scan, when the scope had one.
    const auto sysfs_class = [&](const PciAddress& pci) {
        auto it = std::find_if(sysfs_nvidia.begin(), sysfs_nvidia.end(),
                               [&](const Gpu& x) { return x.pci == pci; });
        return it != sysfs_nvidia.end() ? it->pci_class : 0;
    };
    if (lazy)
        std::sort(dirs.begin(), dirs.end(),
                  [](const ProcGpuDir& a, const ProcGpuDir& b) { return *a.pci < *b.pci; });
    std::vector<Gpu> found;
    std::vector<std::string> unplaced;
    for (const ProcGpuDir& e : dirs) {
        Gpu g{Vendor::nvidia};
        g.pci_name = g.proc_dir = e.dir;
        const int index = static_cast<int>(found.size());
        if (lazy && std::find(only.begin(), only.end(), index) == only.end()) {
            g.pci = *e.pci;  // listed, not inspected
            found.push_back(std::move(g));
            continue;
        }
        std::string why;
        const GpuRead r = read_nvidia_gpu(root, files, e, lazy, g, why);
        if (r == GpuRead::reorder) return add_nvidia_gpus(root, files, inv, sysfs_nvidia, {});
        // A GPU the driver lists but does not describe keeps its place, by its directory's
        // name, with the reason: left out, every later index would name the next GPU; failing
        // the whole read would hide the healthy ones. Without a name to place it by, it is
        // recorded as unplaced, which makes every index uncertain.
        if (r == GpuRead::unusable && !e.pci) {
            unplaced.push_back(cat(quote("/proc/driver/nvidia/gpus/" + e.dir),
                                   " is not named by a PCI address, and ", why));
            continue;
        }
        if (r == GpuRead::unusable) g.pci = *e.pci, g.problem = std::move(why);
        g.pci_class = sysfs_class(g.pci);
        found.push_back(std::move(g));
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const Gpu& a, const Gpu& b) { return a.pci < b.pci; });
    for (std::size_t i = 0; i < found.size(); ++i) found[i].index = static_cast<int>(i);
    inv.gpus.insert(inv.gpus.end(), found.begin(), found.end());
    inv.unplaced = std::move(unplaced);
}

void add_drm_gpu(int root, HostFiles& files, GpuInventory& inv, Gpu g, const std::string& sysdir) {
    for (const std::string& name : list_dir(root, sysdir + "/drm"))
        if (starts_with(name, "card") || starts_with(name, "renderD"))
            g.nodes.push_back(find_node(files, "/dev/dri/" + name));
    if (g.vendor == Vendor::amd) inv.shared_nodes["kfd"] = find_node(files, "/dev/kfd");
    inv.gpus.push_back(std::move(g));
}

// The driver's libraries of the kernel module's version; returns the directories the cache
// names them in (inside the driver root), where the driver's own tools may live beside them.
std::vector<std::string> add_libraries(int root, HostFiles& files, GpuInventory& inv,
                                       unsigned caps) {
    std::vector<std::string> dirs;
    const auto cache = rootfs::map_regular_in_root(root, "/etc/ld.so.cache", 64 << 20);
    if (!cache) {
        inv.ldcache_problem = "no /etc/ld.so.cache under the driver root";
        return dirs;
    }
    const auto prefixes = library_prefixes(caps);
    std::string problem;
    // The driver's entries only, by binary search.
    const std::vector<LdCacheEntry> entries = parse_mapped_ldcache(
        *cache, [&](std::string_view bytes) { return find_ldcache(bytes, prefixes); }, problem);
    if (!problem.empty()) {
        inv.ldcache_problem = "/etc/ld.so.cache: " + problem;
        return dirs;
    }
    const std::string suffix = inv.nvidia_version ? ".so." + *inv.nvidia_version : "";
    for (const LdCacheEntry& e : entries) {
        if ((e.flags & 0xff00) != (kLdFlagsNative & 0xff00) || !(e.flags & 1) ||
            (e.hwcap & kLdHwcapExtension))
            continue;
        const HostFiles::Found found = files.find(e.value, true);
        if (!found.exists) continue;
        const std::string& host = found.host;
        const std::string file = rootfs::base_name(host);
        const auto so = file.find(".so.");
        if (suffix.empty() || file.size() < suffix.size() ||
            file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
            if (so != std::string::npos) inv.stale_versions.push_back(file.substr(so + 4));
            continue;
        }
        if (std::find(dirs.begin(), dirs.end(), rootfs::parent_of(e.value)) == dirs.end())
            dirs.push_back(rootfs::parent_of(e.value));
        auto it = std::find_if(inv.libs.begin(), inv.libs.end(),
                               [&](auto& l) { return l.host_path == host; });
        if (it == inv.libs.end()) inv.libs.push_back({file, host, {}}), it = inv.libs.end() - 1;
        if (e.key != file &&
            std::find(it->sonames.begin(), it->sonames.end(), e.key) == it->sonames.end())
            it->sonames.push_back(e.key);
    }
    std::sort(inv.libs.begin(), inv.libs.end(), [](auto& a, auto& b) { return a.file < b.file; });
    std::sort(inv.stale_versions.begin(), inv.stale_versions.end());
    inv.stale_versions.erase(std::unique(inv.stale_versions.begin(), inv.stale_versions.end()),
                             inv.stale_versions.end());
    return dirs;
}

bool is_elf(int root, const std::string& path) {
    const int fd = rootfs::try_open_in_root(root, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return false;
    UniqueFd f(fd);
    char magic[4];
    return ::pread(fd, magic, sizeof magic, 0) == 4 && std::string_view(magic, 4) ==
                                                           "\x7f"
                                                           "ELF";
}

// The tools: first from the driver's own bin directory beside its libraries (a driver installed
// under a prefix, /usr/local/nvidia/{lib64,bin}, keeps the ones matching its libraries there),
// then from the standard directories. Only an ELF file will do: hosts with such a prefix often
// put a shell script of the same name on the PATH that sets LD_LIBRARY_PATH and execs the real
// one, which inside an image that lacks the prefix (or /bin/sh) finds nothing.
void add_binaries(int root, HostFiles& files, GpuInventory& inv, unsigned caps,
                  const std::vector<std::string>& lib_dirs) {
    std::vector<std::string> dirs;
    const auto add = [&](std::string d) {
        if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(std::move(d));
    };
    for (const std::string& d : lib_dirs)
        if (d != "/") add(rootfs::parent_of(d) == "/" ? "/bin" : rootfs::parent_of(d) + "/bin");
    for (const char* d : {"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"}) add(d);
    for (const std::string& name : binary_names(caps))
        for (const std::string& d : dirs) {
            const std::string path = d + "/" + name;
            const HostFiles::Found f = files.find(path);
            if (!f.exists || !S_ISREG(f.st.st_mode) || !is_elf(root, path)) continue;
            inv.binaries.emplace_back(name, f.host);
            break;
        }
}

}  // namespace

std::vector<std::string> list_dir(int root, const std::string& path) {
    std::vector<std::string> out;
    int fd = rootfs::try_open_in_root(root, path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return out;
    UniqueFd dir(fd);
    alignas(dirent64) char buf[16384];
    for (ssize_t n; (n = ::getdents64(fd, buf, sizeof buf)) > 0;)
        for (ssize_t off = 0; off < n;) {
            const auto* e = reinterpret_cast<const dirent64*>(buf + off);
            if (e->d_name[0] != '.') out.emplace_back(e->d_name);
            off += e->d_reclen;
        }
    std::sort(out.begin(), out.end());
    return out;
}

std::string mig_id(const Gpu& g, const MigDevice& m) { return cat(g.index, ":", m.gi, ":", m.ci); }

std::string mig_name(const Gpu& g, const MigDevice& m) {
    return cat("MIG-", g.uuid, "/", m.gi, "/", m.ci);
}

std::vector<Node> nodes_of(const Gpu& g) {
    std::vector<Node> out = g.nodes;
    for (const MigDevice& m : g.mig) out.push_back(m.gi_node), out.push_back(m.ci_node);
    return out;
}

const char* to_string(Vendor v) {
    switch (v) {
        case Vendor::nvidia: return "nvidia";
        case Vendor::amd: return "amd";
        case Vendor::intel: return "intel";
    }
    return "?";
}

// The shared nodes found, and every NVIDIA node checked against the numbers the driver
// registered in /proc/devices: a node with other numbers is not the one the driver made.
void check_nvidia_nodes(int r, HostFiles& files, GpuInventory& inv) {
    const std::string devices = read_in(r, "/proc/devices").value_or("");
    for (const char* n : {"nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools"})
        inv.shared_nodes[n] = find_node(files, cat("/dev/", n));
    int major = parse_char_major(devices, "nvidia");
    if (major < 0) major = parse_char_major(devices, "nvidia-frontend");
    if (major < 0) major = kNvidiaMajor;
    for (Gpu& g : inv.gpus)
        if (g.vendor == Vendor::nvidia && !g.nodes.empty() && g.nodes[0].exists &&
            g.nodes[0].rdev != makedev(major, g.minor))
            g.nodes[0].is_char = false;  // not the node the driver made for this minor
    inv.shared_nodes["nvidiactl"].is_char &=
        inv.shared_nodes["nvidiactl"].rdev == makedev(major, 255);
    inv.shared_nodes["nvidia-modeset"].is_char &=
        inv.shared_nodes["nvidia-modeset"].rdev == makedev(major, 254);
    add_mig_nodes(r, files, inv, devices);
    const int uvm = parse_char_major(devices, "nvidia-uvm");
    if (uvm >= 0) {
        inv.shared_nodes["nvidia-uvm"].is_char &=
            inv.shared_nodes["nvidia-uvm"].rdev == makedev(uvm, 0);
        inv.shared_nodes["nvidia-uvm-tools"].is_char &=
            inv.shared_nodes["nvidia-uvm-tools"].rdev == makedev(uvm, 1);
    }
}

GpuInventory discover_gpus(const std::string& driver_root, unsigned caps, Scope scope,
                           const std::vector<int>& only) {
    GpuInventory inv;
    inv.driver_root = driver_root.size() > 1 && driver_root.back() == '/'
                          ? driver_root.substr(0, driver_root.size() - 1)
                          : driver_root;
    UniqueFd root;
    try {
        root = sys::open_at(AT_FDCWD, driver_root, O_PATH | O_DIRECTORY);
    } catch (...) {
        std::throw_with_nested(
            PlanError(cat("--driver-root ", quote(driver_root), " is not a directory")));
    }
    const int r = root.get();
    HostFiles files(r);
    inv.nvidia_version =
        parse_driver_version(read_in(r, "/sys/module/nvidia/version").value_or(""));
    inv.proc_version = read_in(r, "/proc/driver/nvidia/version").value_or("");
    if (!inv.nvidia_version) inv.nvidia_version = parse_driver_version(inv.proc_version);
    inv.proc_params = read_in(r, "/proc/driver/nvidia/params").value_or("");
    inv.proc_registry = read_in(r, "/proc/driver/nvidia/registry").value_or("");

    std::vector<Gpu> sysfs_nvidia;
    const std::string pci_dir = "/sys/bus/pci/devices";
    for (const std::string& name :
         scope == Scope::all ? list_dir(r, pci_dir) : std::vector<std::string>{}) {
        const std::string dir = pci_dir + "/" + name;
        // class first: most PCI functions are not display controllers, and need one read.
        const unsigned cls = hex_value(read_in(r, dir + "/class"));
        auto pci = parse_pci_address(name);
        if ((cls >> 16) != 0x03 || !pci) continue;  // only display controllers are GPUs
        const unsigned vendor = hex_value(read_in(r, dir + "/vendor"));
        Gpu g{vendor == 0x10de ? Vendor::nvidia : vendor == 0x1002 ? Vendor::amd : Vendor::intel};
        if (vendor != 0x10de && vendor != 0x1002 && vendor != 0x8086) continue;
        g.pci = *pci, g.pci_name = name, g.pci_class = cls;
        if (g.vendor == Vendor::nvidia) sysfs_nvidia.push_back(g);
        else add_drm_gpu(r, files, inv, g, dir);
    }
    std::vector<Gpu> others = std::move(inv.gpus);
    inv.gpus.clear();
    add_nvidia_gpus(r, files, inv, sysfs_nvidia, only);
    inv.gpus.insert(inv.gpus.end(), others.begin(), others.end());

    check_nvidia_nodes(r, files, inv);
    if (std::any_of(inv.gpus.begin(), inv.gpus.end(),
                    [](auto& g) { return g.vendor == Vendor::nvidia; })) {
        add_binaries(r, files, inv, caps, add_libraries(r, files, inv, caps));
        // Path, and whether it is read-only inside: the socket and the pipes must stay usable.
        std::vector<std::pair<std::string, bool>> extras = {
            {"/run/nvidia-persistenced/socket", false}, {"/tmp/nvidia-mps", false}};
        for (std::string& p : config_files(caps)) extras.emplace_back(std::move(p), true);
        if (inv.nvidia_version)
            extras.emplace_back("/lib/firmware/nvidia/" + *inv.nvidia_version, true);
        for (const auto& [p, read_only] : extras)
            if (const HostFiles::Found f = files.find(p); f.exists)
                inv.optional_paths.push_back({p, f.host, S_ISDIR(f.st.st_mode), read_only});
    }
    return inv;
}

}  // namespace gpubox::gpu
