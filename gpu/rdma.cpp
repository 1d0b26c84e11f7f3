#include "gpu/rdma.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::gpu {
namespace {

constexpr const char* kClasses[] = {"/sys/class/infiniband", "/sys/class/infiniband_verbs"};

// `text`, a relative link in directory `dir`, as one normalized path; "" where it climbs above
// "/". Lexical: sysfs's class links lead through real directories only.
std::string join_link(const std::string& dir, const std::string& text) {
    if (text.empty() || text[0] == '/') return "";
    std::vector<std::string> parts;
    for (const std::string& s : {dir, text}) {
        std::size_t start = 0;
        while (start <= s.size()) {
            const std::size_t end = std::min(s.find('/', start), s.size());
            const std::string c = s.substr(start, end - start);
            if (c == "..") {
                if (parts.empty()) return "";
                parts.pop_back();
            } else if (!c.empty() && c != ".") {
                parts.push_back(c);
            }
            start = end + 1;
        }
    }
    std::string out;
    for (const std::string& c : parts) out += "/" + c;
    return out.empty() ? "/" : out;
}

std::string link_in(int root, const std::string& path) {
    const int fd = rootfs::try_open_in_root(root, rootfs::parent_of(path), O_PATH | O_DIRECTORY);
    if (fd < 0) return "";
    UniqueFd dir(fd);
    std::string text;
    return sys::try_read_link_at(fd, rootfs::base_name(path), text) == 0 ? text : "";
}

std::string first_line_in(int root, const std::string& path) {
    const int fd = rootfs::try_open_in_root(root, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return "";
    UniqueFd f(fd);
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return "";
    std::string s(buf, static_cast<std::size_t>(n));
    return s.substr(0, s.find('\n'));
}

// The real host path of a directory inside the root; "" where it is none.
std::string host_dir(int root, const std::string& path) {
    const int fd = rootfs::try_open_in_root(root, path, O_PATH | O_DIRECTORY);
    if (fd < 0) return "";
    UniqueFd f(fd);
    return sys::read_fd_link(fd);
}

// Verbs and the connection manager; umad/issm (management datagrams, port state) are the
// subnet manager's and diagnostics' business, not a job's.
bool for_jobs(const std::string& name) {
    if (name == "rdma_cm") return true;
    if (!starts_with(name, "uverbs") || name.size() == 6) return false;
    return std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

RdmaHost read_rdma_host(const std::string& root_path) {
    RdmaHost host;
    UniqueFd root;
    try {
        root = sys::open_at(AT_FDCWD, root_path, O_PATH | O_DIRECTORY);
    } catch (...) {
        std::throw_with_nested(
            PlanError(cat("--driver-root ", quote(root_path), " is not a directory")));
    }
    const int r = root.get();
    host.simulated = sys::read_fd_link(r) != "/";
    for (const std::string& name : list_dir(r, "/dev/infiniband")) {
        Node n{"/dev/infiniband/" + name};
        const int fd = rootfs::try_open_in_root(r, n.path, O_PATH | O_NOFOLLOW);
        if (fd >= 0) {
            UniqueFd f(fd);
            struct stat st {};
            if (::fstat(fd, &st) == 0)
                n.exists = true, n.is_char = S_ISCHR(st.st_mode), n.rdev = st.st_rdev,
                n.host = sys::read_fd_link(fd);
        }
        host.nodes.push_back(n);
    }
    for (const char* c : kClasses)
        if (const std::string h = host_dir(r, c); !h.empty()) host.classes.emplace_back(c, h);
    const std::string verbs = "/sys/class/infiniband_verbs";
    for (const std::string& name : list_dir(r, verbs)) {
        if (!starts_with(name, "uverbs")) continue;  // (abi_version)
        RdmaDevice d{first_line_in(r, cat(verbs, "/", name, "/ibdev")), name, "", ""};
        const std::string entry = join_link(verbs, link_in(r, cat(verbs, "/", name)));
        const std::string dev =
            entry.empty() ? "" : join_link(entry, link_in(r, entry + "/device"));
        if (rootfs::is_within(dev, "/sys/devices") && dev != "/sys/devices")
            if (std::string h = host_dir(r, dev); !h.empty()) d.sysfs_dir = dev, d.sysfs_host = h;
        host.devices.push_back(std::move(d));
    }
    return host;
}

RdmaPlan plan_rdma(const RdmaHost& host, const RdmaRequest& request) {
    RdmaPlan plan;
    for (const Node& n : host.nodes) {
        const std::string name = rootfs::base_name(n.path);
        if (!for_jobs(name)) {
            plan.summary.push_back(
                cat("left out ", n.path, " (not for jobs: verbs and rdma_cm are)"));
            continue;
        }
        if (!n.exists || !n.is_char) {
            plan.summary.push_back(cat("left out ", n.path, " (not a character device)"));
            continue;
        }
        plan.nodes.push_back(n);
        plan.ops.push_back(rootfs::BindDev{.source = n.host, .target = n.path, .rdev = n.rdev});
    }
    // rdma_cm alone is no device: a host with the RDMA core and no HCA has it (a lent H100
    // node had /dev/infiniband/rdma_cm and empty infiniband classes).
    if (std::none_of(plan.nodes.begin(), plan.nodes.end(),
                     [](const Node& n) { return rootfs::base_name(n.path) != "rdma_cm"; })) {
        if (request.required)
            throw PlanError("--rdma: no RDMA device (uverbs*) in /dev/infiniband",
                            "see 'ls /dev/infiniband' and 'ibv_devices' on the host; the "
                            "ib_uverbs module makes the nodes");
        return {};
    }
    if (!request.sysfs) {
        if (request.required)
            throw PlanError("--rdma: the sandbox has no /sys, where libibverbs finds its devices");
        return plan;
    }
    // The sysfs entries: on the host, the sandbox's own sysfs has them, unless the RDMA
    // subsystem is in exclusive network namespace mode; the host's are bound over them, so that
    // a private network namespace sees the devices either way. A simulated host's appear under
    // kSimulatedSysfs, and SYSFS_PATH tells libibverbs.
    if (!host.simulated && !request.fresh_sysfs) {
        plan.summary.push_back("sysfs: the host's /sys (shared network namespace)");
    } else {
        auto bind = [&](const std::string& path, const std::string& source) {  // path: /sys/...
            plan.ops.push_back(
                rootfs::Bind{.source = source,
                             .target = host.simulated ? kSimulatedSysfs + path.substr(4) : path,
                             .need = rootfs::Need::optional,
                             .kind = rootfs::SourceKind::dir});
        };
        for (const auto& [path, source] : host.classes) bind(path, source);
        std::vector<std::string> done;
        for (const RdmaDevice& d : host.devices)
            if (!d.sysfs_dir.empty() &&
                std::find(done.begin(), done.end(), d.sysfs_dir) == done.end()) {
                done.push_back(d.sysfs_dir);
                bind(d.sysfs_dir, d.sysfs_host);
            }
        if (host.simulated) plan.env.emplace_back("SYSFS_PATH", kSimulatedSysfs);
        plan.summary.push_back(cat("sysfs: ", host.classes.size(), " classes and ", done.size(),
                                   " device directories",
                                   host.simulated ? cat(" under ", kSimulatedSysfs) : ""));
    }
    for (const RdmaDevice& d : host.devices)
        plan.summary.push_back(cat(d.name.empty() ? "?" : d.name, " (", d.uverbs, ", ",
                                   d.sysfs_dir.empty() ? "no device directory" : d.sysfs_dir, ")"));
    return plan;
}

}  // namespace gpubox::gpu
