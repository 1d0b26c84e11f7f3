#include "launcher/commands/commands.hpp"

#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/print.hpp"
#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/lease.hpp"
#include "gpu/inventory.hpp"
#include "isolate/cgroup.hpp"
#include "launcher/commands/apparmor.hpp"
#include "launcher/monitor/nvml.hpp"
#include "rootfs/create.hpp"

namespace gpubox::launcher {
namespace {

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
    void ok(const std::string& what) { print(cat("ok       ", what, "\n")); }
    // Works, but less well than it could: not counted as a problem.
    void note(const std::string& what, const std::string& fix) {
        print(cat("note     ", what, "\n         fix: ", fix, "\n"));
    }
    void problem(const std::string& what, const std::string& fix) {
        ++problems;
        print(cat("PROBLEM  ", what, "\n         fix: ", fix, "\n"));
    }
};

// `doctor` tries things in children; where it cannot fork, the trial says no rather than fail.
pid_t try_fork() {
    try {
        return sys::fork("a trial for gpubox doctor");
    } catch (const SysError&) {
        return -1;
    }
}

// A user namespace, tried for real in a child: sysctls are only part of the story (AppArmor,
// outer seccomp filters).
bool userns_works() {
    const int pid = try_fork();
    if (pid < 0) return false;
    if (pid == 0) ::_exit(::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);  // raw: after fork
    const int st = sys::wait_status(pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void check_host(Doctor& d) {
    const std::string max = read_sysctl("/proc/sys/user/max_user_namespaces");
    if (max == "0")
        d.problem("user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000");
    const std::string clone = read_sysctl("/proc/sys/kernel/unprivileged_userns_clone");
    if (clone == "0")
        d.problem("kernel.unprivileged_userns_clone is 0",
                  "sysctl -w kernel.unprivileged_userns_clone=1");
    if (auto f = judge_apparmor(discover_apparmor()); f.problem) d.problem(f.what, f.fix);
    else d.ok(f.what);
    if (userns_works()) d.ok("unprivileged user + mount namespaces");
    else
        d.problem("cannot create a user namespace",
                  "see the settings above; an outer container may forbid it");
    const std::string release = sys::kernel_release();
    if (sys::kernel_at_least(5, 12))
        d.ok(cat("kernel ", release, " (overlayfs in a user namespace, mount_setattr)"));
    else d.problem(cat("kernel ", release, " is older than 5.12"), "gpubox needs Linux >= 5.12");
}

// What a run with memory and process limits would get, tried for real in a child (a systemd
// scope it starts ends with it), one field per line: "how\t...", "caps\tUMP", ...
std::string try_cgroup_in_child() {
    UniqueFd r, w;
    sys::pipe(r, w);  // (print() buffers nothing the child could print again)
    const pid_t pid = try_fork();
    if (pid < 0) return "";
    if (pid == 0) {  // a child that reports over the pipe and _exits: it never returns here
        r.reset();
        std::string out;
        try {
            isolate::Limits l;
            l.memory_bytes = 64 << 20, l.pids = 64;
            isolate::Cgroup cg = isolate::setup_cgroup(l, {});
            out = cat("how\t", cg.how, "\ncaps\t", cg.caps.usable, cg.caps.memory, cg.caps.pids,
                      "\nreason\t", cg.reason, "\n");
            if (cg.caps.usable)
                out += cat("controllers\t", read_sysctl((cg.path + "/cgroup.controllers").c_str()),
                           "\n");
            for (const auto& [route, why] : cg.passed_over)
                out += cat("passed\t", static_cast<int>(route), "\t", why, "\n");
            isolate::remove_cgroup(cg);
        } catch (...) {
            out = cat("reason\t", describe(std::current_exception()), "\n");
        }
        try {
            sys::write_all(w.get(), out, "cgroup trial pipe");
        } catch (...) {}
        ::_exit(0);
    }
    w.reset();
    std::string text;
    try {
        text = sys::read_all(r.get(), "cgroup trial");
    } catch (...) {
        sys::kill_and_reap(pid);
        throw;
    }
    sys::wait_status(pid);
    return text;
}

void check_cgroup(Doctor& d) {
    std::string how, caps, reason, controllers;
    std::vector<std::pair<isolate::CgroupRoute, std::string>> passed;
    std::istringstream in(try_cgroup_in_child());
    for (std::string line; std::getline(in, line);) {
        const auto tab = line.find('\t');
        const std::string key = line.substr(0, tab),
                          value = tab == std::string::npos ? "" : line.substr(tab + 1);
        if (key == "how") how = value;
        else if (key == "caps") caps = value;
        else if (key == "reason") reason = value;
        else if (key == "controllers") controllers = value;
        else if (key == "passed" && value.find('\t') != std::string::npos)
            passed.emplace_back(static_cast<isolate::CgroupRoute>(std::stoi(value)),
                                value.substr(value.find('\t') + 1));
    }
    const auto route_name = [](isolate::CgroupRoute r) {
        return r == isolate::CgroupRoute::own ? "a delegated cgroup v2 of our own"
                                              : "a systemd scope";
    };
    const bool usable = caps.size() == 3 && caps[0] == '1';
    const std::string missing =
        usable ? cat(caps[1] == '1' ? "" : " memory", caps[2] == '1' ? "" : " pids") : "";
    if (usable)
        d.ok(cat("limits use ", how, " (controllers: ", controllers.empty() ? "none" : controllers,
                 ")"));
    else
        d.note(
            "limits use no cgroup: memory is sampled, processes counted by RLIMIT_NPROC, the kill "
            "is by pid "
            "namespace",
            "see the notes below");
    if (!missing.empty()) {
        const std::string why = cat("controllers not delegated to ", how, ":", missing);
        d.note(cat(how, " lacks", missing, ": those limits are sampled or rlimits instead"),
               isolate::cgroup_fix(
                   isolate::CgroupRoute::own,
                   how.find("/unified") != std::string::npos ? why + " (cgroup/unified)" : why,
                   ::getuid()));
    }
    const bool scope = starts_with(how, "systemd scope");
    for (const auto& [route, why] : passed)
        d.note(cat("not ", route_name(route), why.empty() ? "" : cat(": ", why)),
               scope && route == isolate::CgroupRoute::own
                   ? "none needed: the systemd scope enforces the same limits"
                   : isolate::cgroup_fix(route, why, ::getuid()));
    if (usable && !has_word(controllers, "cpu"))
        d.note(
            "the sandbox's cgroup has no cpu controller: CPU time (cpu.stat) works, cpu.max would "
            "not",
            how.find("/unified") != std::string::npos
                ? isolate::cgroup_fix(isolate::CgroupRoute::own, "cgroup/unified", ::getuid())
                : isolate::cgroup_cpu_fix());
}

// MIG: a GPU whose driver offers MIG capabilities but that has no GPU instance (in MIG mode,
// CUDA finds no device on it), and MIG devices whose capability nodes cannot be given.
void check_mig(Doctor& d, const gpu::Gpu& g) {
    const std::string label = gpu::gpu_label(g), i = std::to_string(g.index);
    const std::string make =
        cat("make instances (nvidia-smi mig -i ", i,
            " -cgi PROFILE -C) or leave MIG mode (nvidia-smi -i ", i, " -mig 0)");
    if (g.mig_mode == 1 && g.mig_instances == 0)  // NVML says so
        d.note(cat(label, " is in MIG mode with no GPU instance: CUDA finds no device on it"),
               make);
    else if (g.mig_mode < 0 && g.mig_dir && g.mig_instances == 0)  // NVML unknown
        d.note(cat(label, " has no MIG GPU instance: if it is in MIG mode (nvidia-smi -i ", i,
                   " --query-gpu=mig.mode.current), CUDA finds no device on it"),
               make);
    if (g.mig_mode >= 0 && g.mig_pending >= 0 && g.mig_mode != g.mig_pending)
        d.note(cat(label, " MIG mode is ", g.mig_mode ? "on" : "off", ", ",
                   g.mig_pending ? "on" : "off", " after a reset"),
               cat("reset the GPU (nvidia-smi -i ", i, " -r) or reboot"));
    for (const gpu::MigDevice& m : g.mig) {
        std::string why = m.problem;
        for (const gpu::Node* n : {&m.gi_node, &m.ci_node})
            if (why.empty() && (!n->exists || !n->is_char))
                why = cat(n->path, n->exists ? " is not the driver's device" : " is missing");
        if (!why.empty())
            d.problem(cat(gpu::gpu_label(g), " MIG device ", gpu::mig_id(g, m), ": ", why),
                      "as root: nvidia-modprobe -f " + m.ci_access + " (and its GPU instance's)");
    }
}

void check_gpus(Doctor& d, const Options& o) {
    gpu::GpuInventory inv = gpu::discover_gpus(o.driver_root, gpu::kCapAll);
    add_nvml_facts(inv, o.driver_root);
    if (!inv.nvml &&
        std::any_of(inv.gpus.begin(), inv.gpus.end(), [](const gpu::Gpu& g) { return g.mig_dir; }))
        print(cat("info     MIG mode unknown: ", inv.nvml_problem, "\n"));
    for (const std::string& why : inv.unplaced) d.problem(why, gpu::kUnplacedHint);
    if (inv.gpus.empty()) {
        if (inv.unplaced.empty())
            print(cat("info     no GPU found under ", quote(o.driver_root), "\n"));
        return;
    }
    for (const gpu::Gpu& g : inv.gpus) {
        if (!g.problem.empty()) d.problem(gpu::describe_problem(g), gpu::kGpuProblemHint);
        check_mig(d, g);
        for (const gpu::Node& n : g.nodes)
            if (!n.exists || !n.is_char)
                d.problem(cat("GPU ", gpu::to_string(g.pci), ": node ", n.path,
                              n.exists ? " is not the driver's device" : " is missing"),
                          "run nvidia-modprobe (NVIDIA) or load the GPU's kernel driver");
    }
    if (std::none_of(inv.gpus.begin(), inv.gpus.end(),
                     [](auto& g) { return g.vendor == gpu::Vendor::nvidia; }))
        return;
    if (!inv.nvidia_version)
        return d.problem("NVIDIA GPU present but no kernel module version",
                         "load the nvidia kernel module");
    d.ok(cat("NVIDIA kernel module ", *inv.nvidia_version));
    for (const char* n : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
        const gpu::Node& node = inv.shared_nodes.at(n);
        if (node.exists && node.is_char) d.ok(cat(node.path));
        else
            d.problem(cat(node.path, node.exists ? " is not the driver's device" : " is missing"),
                      "run 'nvidia-modprobe -u -c=0' as root (or any CUDA program once)");
    }
    if (!inv.ldcache_problem.empty()) d.problem(inv.ldcache_problem, "run ldconfig on the host");
    else if (inv.libs.empty() && !inv.stale_versions.empty())
        d.problem(cat("driver/library version mismatch: module ", *inv.nvidia_version,
                      ", libraries ", join(inv.stale_versions, ", ")),
                  "reboot after a driver upgrade, or reinstall the matching user-space driver");
    else if (inv.libs.empty())
        d.problem("no NVIDIA user-space libraries in ld.so.cache",
                  "install the driver's libraries and run ldconfig");
    else
        d.ok(cat(inv.libs.size(), " driver libraries at version ", *inv.nvidia_version,
                 inv.stale_versions.empty()
                     ? ""
                     : cat(" (ignored: ", join(inv.stale_versions, ", "), ")")));
}

}  // namespace

int doctor_command(const Options& o) {
    Doctor d;
    check_host(d);
    check_cgroup(d);
    check_gpus(d, o);
    print(d.problems ? cat(d.problems, " problem(s) found\n") : "no problems found\n");
    return d.problems ? 1 : 0;
}

}  // namespace gpubox::launcher
