#include "launcher/monitor/step_plan.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/inventory.hpp"
#include "gpu/slurm.hpp"
#include "launcher/monitor/step.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::launcher {

Options step_options(const Options& given) {
    Options o = given;
    o.step = 1;  // decided: what the plan sees from here on is a step's task
    o.share_net = true;
    o.rdma_if_any = true;  // multi-node ranks: the host's verbs devices where it has any
    char host[256] = "";
    if (o.hostname == Options{}.hostname && ::gethostname(host, sizeof host - 1) == 0 && *host)
        o.hostname = host;
    std::vector<std::pair<std::string, std::string>> env = step::environment(environ);
    o.env.insert(o.env.begin(), env.begin(), env.end());
    using T = rootfs::UserMount::Type;
    for (const char* var : {"PMIX_SERVER_TMPDIR", "PMIX_SYSTEM_TMPDIR"}) {
        const char* dir = std::getenv(var);
        struct stat st {};
        if (dir && *dir == '/' && sys::lstat_at(AT_FDCWD, dir, st) && S_ISDIR(st.st_mode) &&
            std::string(dir) != "/tmp")
            o.mounts.push_back({T::bind, dir, rootfs::normalize_container_path(dir, var)});
    }
    if (const char* fd = std::getenv("PMI_FD");
        fd && *fd && std::strspn(fd, "0123456789") == std::strlen(fd))
        o.keep_fds.push_back(std::atoi(fd));
    if (!o.workdir_given) {
        const std::string cwd = std::filesystem::current_path().string();
        if (cwd != "/") o.mounts.push_back({T::bind, cwd, cwd});
        o.workdir = cwd;
    }
    return o;
}

std::string step_asks(const Options& o) {
    using M = rootfs::RootMode;
    using T = rootfs::UserMount::Type;
    std::string mounts;
    for (const rootfs::UserMount& m : o.mounts)
        mounts += m.type == T::tmpfs ? cat(" --tmpfs ", m.target)
                                     : cat(m.type == T::bind ? " --bind " : " --ro-bind ", m.source,
                                           ":", m.target);
    const std::string abs = std::filesystem::absolute(o.rootfs).lexically_normal();
    std::string asks = cat("ROOTFS\t", quote(abs), "\n");
    asks += cat("the root\t",
                o.root_mode == M::writable    ? "--writable"
                : o.root_mode == M::read_only ? "--read-only"
                                              : "overlay (writes discarded)",
                "\n");
    if (!o.overlay.empty()) asks += cat("--overlay\t", quote(o.overlay), "\n");
    asks += cat("mounts\t", mounts.empty() ? "none" : mounts.substr(1), "\n");
    asks += cat("GPUs\t", gpu::to_string(o.gpu), "\n");
    asks += cat("--device\t", o.devices.empty() ? "none" : join(o.devices, " "), "\n");
    asks += cat("--rdma\t", o.rdma ? "yes" : "no", "\n");
    asks += cat("--shm-size\t", o.shm_size, "\n");
    asks += cat("seccomp\t", !o.seccomp              ? "off"
                             : o.seccomp_bpf.empty() ? "the default filter"
                                                     : quote(o.seccomp_bpf));
    return asks;
}

void bind_task_gpus(Options& o) {
    if (o.gpu.kind != gpu::GpuSpec::Kind::slurm || !gpu::per_task_binding()) return;
    const gpu::GpuSpec own = gpu::resolve_gpu_spec(o.gpu);
    const gpu::GpuInventory inv =
        gpu::discover_gpus(o.driver_root, o.gpu_caps, gpu::scope_for(own), gpu::indices_only(own));
    std::vector<std::string> uuids;
    for (const gpu::Gpu& g : gpu::select_gpus(inv, own)) uuids.push_back(g.uuid);
    o.env.insert(o.env.begin(), {"CUDA_VISIBLE_DEVICES", join(uuids, ",")});
    o.gpu = gpu::node_gpus(gpu::read_gres_conf());
    o.gpu.peers = true;
}

std::optional<std::string> decide_step(const Options& o) {
    const step::Info info = step::inspect([](const char* n) { return std::getenv(n); });
    if (o.step == 0 || (o.step < 0 && !info.wants_step())) {
        if (o.step == 0 && info.wants_step())
            log::warn(cat("--no-step: ",
                          info.local_tasks > 1 ? cat("this node runs ", info.local_tasks,
                                                     " tasks of this Slurm step")
                                               : cat(info.pmi, " is set"),
                          ", but each gets a private sandbox: its ranks will not find each other"));
        return std::nullopt;
    }
    if (info.key.empty())
        throw PlanError(
            "--step: no Slurm step (SLURM_JOB_ID, SLURM_STEP_ID) nor PMIx namespace "
            "(PMIX_NAMESPACE) names the sandbox to share",
            "run it as a task of a job step: srun -n N gpubox run ...");
    return info.key;
}

}  // namespace gpubox::launcher
