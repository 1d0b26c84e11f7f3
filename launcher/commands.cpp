#include "launcher/commands.hpp"

#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/inventory.hpp"
#include "launcher/apparmor.hpp"
#include "rootfs/create.hpp"

namespace gpubox::launcher {
namespace {

nlohmann::json to_json(const gpu::GpuInventory& inv) {
    nlohmann::json j;
    j["driver_root"] = inv.driver_root;
    j["driver_version"] = inv.nvidia_version ? nlohmann::json(*inv.nvidia_version) : nlohmann::json();
    j["gpus"] = nlohmann::json::array();
    for (const gpu::Gpu& g : inv.gpus) {
        nlohmann::json n = {{"vendor", gpu::to_string(g.vendor)}, {"pci", gpu::to_string(g.pci)},
                            {"model", g.model}, {"uuid", g.uuid}, {"nodes", nlohmann::json::array()}};
        n["class"] = g.pci_class ? nlohmann::json(cat("0x", std::hex, g.pci_class)) : nlohmann::json();
        n["index"] = g.index >= 0 ? nlohmann::json(g.index) : nlohmann::json();
        n["minor"] = g.minor >= 0 ? nlohmann::json(g.minor) : nlohmann::json();
        for (const gpu::Node& d : g.nodes) n["nodes"].push_back(d.path);
        n["problem"] = g.problem.empty() ? nlohmann::json() : nlohmann::json(g.problem);
        if (g.vendor == gpu::Vendor::nvidia) n["mig_instances"] = g.mig_instances;
        j["gpus"].push_back(n);
    }
    j["unplaced"] = inv.unplaced;
    return j;
}

std::string read_sysctl(const char* path) {
    try {
        std::string v = sys::read_file(path);
        while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
        return v;
    } catch (...) {
        return "";
    }
}

struct Doctor {
    int problems = 0;
    void ok(const std::string& what) { std::cout << "ok       " << what << "\n"; }
    void problem(const std::string& what, const std::string& fix) {
        ++problems;
        std::cout << "PROBLEM  " << what << "\n         fix: " << fix << "\n";
    }
};

// A user namespace, tried for real in a child: sysctls are only part of the story (AppArmor,
// outer seccomp filters).
bool userns_works() {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);
    int st = 0;
    return pid > 0 && ::waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void check_host(Doctor& d) {
    const std::string max = read_sysctl("/proc/sys/user/max_user_namespaces");
    if (max == "0") d.problem("user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000");
    const std::string clone = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone");
    if (clone == "0") d.problem("kernel.unprivileged_userns_clone is 0", "sysctl -w kernel.unprivileged_userns_clone=1");
    if (auto f = judge_apparmor(discover_apparmor()); f.problem) d.problem(f.what, f.fix); else d.ok(f.what);
    if (userns_works()) d.ok("unprivileged user + mount namespaces");
    else d.problem("cannot create a user namespace", "see the settings above; an outer container may forbid it");
    const std::string release = sys::kernel_release();
    if (sys::kernel_at_least(5, 12)) d.ok(cat("kernel ", release, " (overlayfs in a user namespace, mount_setattr)"));
    else d.problem(cat("kernel ", release, " is older than 5.12"), "gpubox needs Linux >= 5.12");
}

void check_gpus(Doctor& d, const Options& o) {
    gpu::GpuInventory inv = gpu::discover_gpus(o.driver_root, gpu::kCapAll);
    for (const std::string& why : inv.unplaced) d.problem(why, gpu::kUnplacedHint);
    if (inv.gpus.empty()) {
        if (inv.unplaced.empty()) std::cout << "info     no GPU found under " << quote(o.driver_root) << "\n";
        return;
    }
    for (const gpu::Gpu& g : inv.gpus) {
        if (!g.problem.empty())
            d.problem(gpu::describe_problem(g), gpu::kGpuProblemHint);
        for (const gpu::Node& n : g.nodes)
            if (!n.exists || !n.is_char)
                d.problem(cat("GPU ", gpu::to_string(g.pci), ": node ", n.path, n.exists ? " is not the driver's device" : " is missing"),
                          "run nvidia-modprobe (NVIDIA) or load the GPU's kernel driver");
    }
    if (std::none_of(inv.gpus.begin(), inv.gpus.end(), [](auto& g) { return g.vendor == gpu::Vendor::nvidia; })) return;
    if (!inv.nvidia_version) return d.problem("NVIDIA GPU present but no kernel module version", "load the nvidia kernel module");
    d.ok(cat("NVIDIA kernel module ", *inv.nvidia_version));
    for (const char* n : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
        const gpu::Node& node = inv.shared_nodes.at(n);
        if (node.exists && node.is_char) d.ok(cat(node.path));
        else d.problem(cat(node.path, node.exists ? " is not the driver's device" : " is missing"),
                       "run 'nvidia-modprobe -u -c=0' as root (or any CUDA program once)");
    }
    if (!inv.ldcache_problem.empty()) d.problem(inv.ldcache_problem, "run ldconfig on the host");
    else if (inv.libs.empty() && !inv.stale_versions.empty())
        d.problem(cat("driver/library version mismatch: module ", *inv.nvidia_version, ", libraries ", join(inv.stale_versions, ", ")),
                  "reboot after a driver upgrade, or reinstall the matching user-space driver");
    else if (inv.libs.empty()) d.problem("no NVIDIA user-space libraries in ld.so.cache", "install the driver's libraries and run ldconfig");
    else d.ok(cat(inv.libs.size(), " driver libraries at version ", *inv.nvidia_version,
                  inv.stale_versions.empty() ? "" : cat(" (ignored: ", join(inv.stale_versions, ", "), ")")));
}

}  // namespace

int create_rootfs_command(const Options& o) {
    rootfs::create_rootfs({o.create_dir, o.busybox, true});
    std::cout << "gpubox: created rootfs " << quote(o.create_dir) << "\n";
    return 0;
}

int list_command(const Options& o) {
    gpu::GpuInventory inv = gpu::discover_gpus(o.driver_root, gpu::kCapDefault);
    if (o.json) {
        std::cout << to_json(inv).dump(2) << "\n";
        return 0;
    }
    std::cout << "driver: " << (inv.nvidia_version ? *inv.nvidia_version : "none") << "\n";
    std::cout << gpu::describe_gpus(inv);
    return 0;
}

int doctor_command(const Options& o) {
    Doctor d;
    check_host(d);
    check_gpus(d, o);
    std::cout << (d.problems ? cat(d.problems, " problem(s) found\n") : "no problems found\n");
    return d.problems ? 1 : 0;
}

}  // namespace gpubox::launcher
