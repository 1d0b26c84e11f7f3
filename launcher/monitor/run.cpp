// The monitor: plan, spawn, supervise. It stays outside the sandbox's pid namespace, forwards
// signals to the sandbox's init, and turns what init reports into gpubox's exit status.
#include "launcher/monitor/run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "common/print.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"
#include "isolate/id_map.hpp"
#include "isolate/namespaces.hpp"
#include "isolate/default_filter.hpp"
#include "isolate/seccomp.hpp"
#include "isolate/spawn.hpp"
#include "isolate/tree_clock.hpp"
#include "isolate/usage.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/image.hpp"
#include "gpu/slurm.hpp"
#include "gpu/inventory.hpp"
#include "gpu/mount_list.hpp"
#include "gpu/rdma.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/init_loop.hpp"
#include "launcher/monitor/nvml.hpp"
#include "launcher/monitor/cdi_devices.hpp"
#include "launcher/monitor/meta_isolate.hpp"
#include "launcher/monitor/preflight.hpp"
#include "launcher/monitor/environment.hpp"
#include "launcher/monitor/fuse_root.hpp"
#include "launcher/sandbox/exit_codes.hpp"
#include "launcher/monitor/pty.hpp"
#include "launcher/monitor/stdio.hpp"
#include "launcher/monitor/step_plan.hpp"
#include "launcher/monitor/supervise.hpp"
#include "launcher/monitor/verdict.hpp"
#include "launcher/cli/cli_habits.hpp"
#include "isolate/cgroup.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/wire.hpp"
#include "isolate/limits.hpp"
#include "rootfs/plan.hpp"
#include "preflight/discover.hpp"
#include "preflight/preflight.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/view.hpp"

namespace gpubox::launcher {
namespace {

// A frame to init, which may have failed and gone already: then its Failure is queued for
// supervise(), which reports it.
void send_unless_gone(int control, const channel::Frame& frame) {
    try {
        channel::send(control, frame);
    } catch (const SysError& e) {
        if (e.err() != EPIPE) throw;
    }
}

// Init sets up while the monitor discovers GPUs: with two CPUs, discovery costs init nothing.
// But the scheduler places a freshly cloned child, and wakes it from a pipe, on its parent's
// CPU: on a 2-vCPU VM init waited behind discovery in about 3 runs of 4 while the other CPU
// idled. So init may not use the monitor's CPU until the GPU's ops arrive; then it returns to
// the user's CPUs (spec.cpus) itself, before anything runs in the sandbox. Best effort: with
// one usable CPU, or where the call is refused, nothing changes.
void keep_off_my_cpu(pid_t init, const cpu_set_t& cpus) {
    const int me = sys::current_cpu();
    if (CPU_COUNT(&cpus) < 2 || me < 0 || me >= CPU_SETSIZE || !CPU_ISSET(me, &cpus)) return;
    cpu_set_t others = cpus;
    CPU_CLR(me, &others);
    sys::set_affinity(init, others);
}

sigset_t monitor_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : forwarded_signals()) sigaddset(&set, s);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGWINCH);  // passed on to the workload's pty, if it has one
    return set;
}

// --meta: opened before anything runs, so that a bad one (a FIFO, a symlink, a directory) is
// refused then (common/trusted_path.hpp), and written once the verdict is known.
UniqueFd open_meta(const std::string& path) {
    if (path.empty()) return {};
    try {
        return trusted_path::open_output_file(path, 0644);
    } catch (...) {
        std::throw_with_nested(PlanError(cat("--meta ", quote(path))));
    }
}

// The verdict is never lost: where it cannot be written to --meta, the file is left empty and
// the verdict goes to stderr in full after the error.
void write_meta(const UniqueFd& meta, const Options& o, const Verdict& v, const RunOutcome& out,
                const Mechanisms& m) {
    if (!meta.valid()) return;
    const std::string text = o.meta_format == MetaFormat::isolate
                                 ? render_meta_isolate(v, out, o.limits)
                                 : render_meta_json(v, out, o.limits, m);
    try {
        sys::write_all(meta.get(), text, o.meta);
    } catch (const SysError& e) {
        try {
            sys::ftruncate(meta.get(), 0, o.meta);
        } catch (const SysError&) {}
        log::error(cat("--meta ", quote(o.meta), ": ", e.what(), "; the verdict follows"));
        print_err(text);
    }
}

void report_setup_failure(const RunOutcome& out) {
    const auto nl = out.message.find('\n');
    log::error(out.message.substr(0, nl));
    if (nl != std::string::npos) log::hint(out.message.substr(nl + 1));
}

// A device cgroup (a Slurm job's ConstrainDevices, a container's) that refuses a selected GPU's
// node: refused now, not as a sandbox in which CUDA later finds no device. The kernel checks
// the device cgroup in inode_permission(), so access() answers it without opening the GPU.
void check_node_access(const std::string& label, const std::vector<gpu::Node>& nodes,
                       bool peers = false) {
    for (const gpu::Node& n : nodes) {
        if (!n.exists) continue;
        const int how = n.read_only ? R_OK : R_OK | W_OK;
        const int rc = sys::try_faccessat(n.host, how);
        if (rc == -EPERM && peers) continue;  // a peer task's GPU (gpu::GpuSpec::peers)
        if (rc == -EPERM)
            throw PlanError(
                cat(label, ": the device cgroup ",
                    quote(gpu::device_cgroup_of(sys::read_file("/proc/self/cgroup"))), " refuses ",
                    n.path, " (faccessat(", quote(n.host), n.read_only ? ", R_OK" : ", R_OK|W_OK",
                    "): Operation not permitted)"),
                label == "--rdma"
                    ? "this job or container was not given that device"
                    : "this job or container was not given that GPU; under Slurm, --gpu slurm "
                      "takes the step's own");
        if (rc == -EACCES)
            throw PlanError(
                cat(label, ": faccessat(", quote(n.host), n.read_only ? ", R_OK" : ", R_OK|W_OK",
                    "): Permission denied"),
                "the node's owner and mode keep this user out; see 'ls -l /dev/nvidia*'");
    }
}

void check_device_access(const std::vector<gpu::Gpu>& selected, bool peers) {
    for (const gpu::Gpu& g : selected)
        check_node_access(gpu::gpu_label(g), gpu::nodes_of(g), peers);
}

// Discovery and the GPU planner: the device ops, and a summary line per selected GPU. With
// --gpu auto, the lease is taken here, by the monitor, after clone(): the sandbox never has it.
// `root`: ROOTFS's read-only view (rootfs/view.hpp).
std::vector<rootfs::MountOp> plan_gpus(const Options& o, RunPlan& plan, int root) {
    std::vector<std::string>& summary = plan.gpu_summary;
    gpu::GpuSpec gpus = plan.gpus;
    const gpu::Scope scope = gpu::scope_for(gpus);
    gpu::GpuInventory inv =
        gpu::discover_gpus(o.driver_root, o.gpu_caps, scope, gpu::indices_only(gpus));
    if (gpu::names_mig_uuid(gpus)) add_nvml_facts(inv, o.driver_root);  // MIG-<uuid>: NVML's
    if (gpus.kind == gpu::GpuSpec::Kind::lease) {
        plan.lease = gpu::take_lease(inv, {gpus.count, o.gpu_share, o.gpu_wait});
        gpus = gpu::GpuSpec{gpu::GpuSpec::Kind::list, {}, {}, 1, "--gpu auto"};
        gpus.items = plan.lease.items;
    }
    std::vector<gpu::Gpu> selected;
    try {
        selected = gpu::select_gpus(inv, gpus);
    } catch (const PlanError&) {
        // The error lists the host's GPUs: all of them, whatever the scope.
        if (scope != gpu::Scope::all) {
            gpu::GpuInventory all = gpu::discover_gpus(o.driver_root, o.gpu_caps, gpu::Scope::all);
            if (gpu::names_mig_uuid(gpus)) add_nvml_facts(all, o.driver_root);
            gpu::select_gpus(all, gpus);
        }
        throw;
    }
    check_device_access(selected, gpus.peers);
    gpu::ImageInfo image = gpu::inspect_image(root);
    std::vector<std::string> models;
    for (const gpu::Gpu& g : selected) models.push_back(g.model);
    std::string compat;
    // The compat directory as the preflight read it, where it did: one read of ROOTFS for both;
    // and its decision, where it was taken on these GPUs (not a lease's, named only now).
    const std::optional<preflight::CompatFacts> facts =
        plan.preflight.compat_read ? plan.preflight.compat : preflight::discover_compat(root);
    image.compat_first =
        preflight::forward_compat(facts, inv.nvidia_version, models, compat, plan.preflight);
    if (!compat.empty()) log::info("gpu: forward compatibility: " + compat);
    gpu::GpuPlan gp = gpu::plan_gpu_mounts(inv, selected, o.gpu_caps, image);
    summary = std::move(gp.summary);
    for (const std::string& line : summary) log::info("gpu: " + line);
    for (const std::string& line : gp.warnings) log::warn(line);
    return std::move(gp.ops);
}

// What the limits' plan asks of the sandbox and of the monitor. Without a cgroup, the monitor
// measures the sandbox from outside, through the /proc init sends (channel::Meter).
void apply_limit_plan(const Options& o, const isolate::CgroupCaps& caps,
                      const isolate::LimitPlan& limits, RunPlan& plan) {
    plan.spec.rlimits = limits.rlimits;
    plan.spec.sched_idle = limits.idle_policy;
    plan.spec.ipc = limits.ipc;
    // A cgroup without the memory controller still leaves memory to the monitor's count.
    plan.spec.meters = (!caps.usable && o.limits.any()) || (!caps.memory && o.limits.memory_bytes);
    plan.spec.tree_clock = plan.spec.meters && limits.tree_clock;
    plan.sample_ms = limits.sample_usage ? limits.sample_ms : 0;
    if (!caps.memory && o.limits.memory_bytes) {
        plan.sampled_memory_limit = *o.limits.memory_bytes;
        plan.spec.plan.root.tmpfs_inodes = isolate::tmpfs_inodes(*o.limits.memory_bytes);
        plan.spec.dgram_qlen = static_cast<std::uint32_t>(isolate::kDgramQlen);
    }
}

// The seccomp filter with the limits' refusals joined to it: one program for the kernel to
// check and compile instead of two (~60 us of a run). The default filter is picked here, with
// them compiled in (isolate::default_filter: ~50 us less again); a --seccomp-bpf program has
// them folded on; where they cannot be, the child installs both.
void join_limits_filter(ChildSpec& s, bool default_filter, bool refuse_memfd, bool refuse_setsid) {
    if (s.seccomp && default_filter) {
        s.bpf = isolate::default_filter(refuse_memfd, refuse_setsid);
        return;
    }
    s.limits_bpf = isolate::limits_filter(refuse_memfd, refuse_setsid);
    if (!s.seccomp || s.limits_bpf.empty()) return;
    if (std::optional<isolate::BpfProgram> one = isolate::fold(s.bpf, s.limits_bpf))
        s.bpf = std::move(*one), s.limits_bpf = {};
}

}  // namespace

RunPlan plan_run(const RunRequest& r, const RunInputs& run) {
    const Options& o = r.options;
    RunPlan p;
    ChildSpec& s = p.spec;
    p.preflight = run.preflight;
    p.ns_flags = isolate::plan_namespaces(o.share_net).flags;
    s.ids = isolate::plan_id_maps(::getuid(), ::getgid(), o.root);
    s.image_hold = r.image_hold.get();
    s.image_layers = o.image_layers;
    p.squashfs = o.squashfs;
    s.fuse_root = !o.squashfs.empty();
    rootfs::PlanInputs in;
    // One tmpfs holds every writable in-memory place: unless told otherwise, it may not outgrow
    // the memory limit, or without one, a quarter of the memory the host has available.
    const auto avail = isolate::parse_mem_available(sys::read_file("/proc/meminfo", 1 << 16));
    in.root = {o.rootfs, o.root_mode,
               isolate::plan_tmpfs_size(o.tmpfs_size, o.limits.memory_bytes, avail.value_or(0)),
               o.overlay.empty() ? "" : std::filesystem::absolute(o.overlay).lexically_normal()};
    p.host_share = isolate::plan_tmpfs_size(0, std::nullopt, avail.value_or(0));
    in.new_pid_ns = true;
    in.new_net_ns = !o.share_net;
    in.sysfs = o.sysfs, in.run_tmpfs = o.run_tmpfs;
    in.shm_size = o.shm_size;
    in.user_mounts = o.mounts;
    // --device: CDI devices and host nodes, planned up front (their specs are small).
    std::vector<std::pair<std::string, std::string>> env = o.env;
    if (!o.devices.empty()) {
        cdi::Plan devices = plan_cdi_devices(o, run.view);
        check_node_access("--device", devices.nodes);
        in.device_ops = std::move(devices.ops);
        env.insert(env.begin(), devices.env.begin(), devices.env.end());  // --env wins
    }
    // --rdma: the host's verbs nodes and sysfs entries (gpu/rdma.hpp; step mode too).
    if (o.rdma || o.rdma_if_any) {
        gpu::RdmaPlan rdma =
            gpu::plan_rdma(gpu::read_rdma_host(o.driver_root),
                           {.required = o.rdma, .sysfs = in.sysfs, .fresh_sysfs = in.new_net_ns});
        check_node_access("--rdma", rdma.nodes);
        for (const std::string& line : rdma.summary) log::info("rdma: " + line);
        in.device_ops.insert(in.device_ops.end(), rdma.ops.begin(), rdma.ops.end());
        env.insert(env.begin(), rdma.env.begin(), rdma.env.end());  // --env wins
    }
    if (run.gpus_error) std::rethrow_exception(run.gpus_error);
    p.gpus = run.gpus;
    if (p.gpus.kind != gpu::GpuSpec::Kind::none) {
        // Discovery reads a hundred-odd host files: the monitor does it after clone(), while
        // the sandbox creates its namespaces and fills its layer; the sandbox takes the GPU's
        // ops just before it mounts the overlay. --print-plan plans everything up front.
        if (!o.print_plan) p.devices_later = true;
        else {
            std::vector<rootfs::MountOp> gpu_ops = plan_gpus(o, p, run.view);
            in.device_ops.insert(in.device_ops.end(), gpu_ops.begin(), gpu_ops.end());
        }
    }
    s.plan = rootfs::build_mount_plan(in);
    s.late_plan = p.devices_later;
    s.seccomp = o.seccomp;
    if (!o.seccomp) {
        p.seccomp_text = "off (--no-seccomp)\n";
    } else if (!o.seccomp_bpf.empty()) {
        s.bpf = isolate::load_bpf_file(o.seccomp_bpf);  // validated before anything runs
        p.seccomp_text = cat("custom BPF from ", quote(o.seccomp_bpf), " (", s.bpf.bytes.size() / 8,
                             " instructions)\n");
    }  // else the default filter, with the limits' refusals: join_limits_filter, below
    s.hostname = o.hostname;
    s.new_net = !o.share_net;
    s.argv = o.argv;
    s.env =
        o.bare_env ? render_environment(env) : build_environment(env, o.root, std::getenv("TERM"));
    s.exec_candidates = plan_exec_candidates(o.argv[0], s.env);
    s.workdir = o.workdir;
    s.keep_fds = o.keep_fds;
    for (int fd = 3; fd < 3 + o.preserve_fds; ++fd) s.keep_fds.push_back(fd);
    std::sort(s.keep_fds.begin(), s.keep_fds.end());
    s.keep_fds.erase(std::unique(s.keep_fds.begin(), s.keep_fds.end()), s.keep_fds.end());
    // The limits last: the cgroup they may need is made here, and only their own planning
    // comes after it.
    const bool nproc_per_userns = sys::kernel_at_least(5, 14);
    std::optional<isolate::CgroupHost> host;  // read once, where a limit needs it
    if (isolate::cgroup_wanted(o.limits, o.cgroup.mode, o.require_cgroup, ::getuid() == 0,
                               nproc_per_userns))
        p.cgroup =
            isolate::setup_cgroup(o.limits, o.cgroup, host.emplace(isolate::read_cgroup_host()));
    if (!p.cgroup.reason.empty()) log::info("cgroup: " + p.cgroup.reason);
    try {
        // Autogroups matter only to a workload the monitor samples (LimitPlan::refuse_setsid).
        const bool sampled =
            !p.cgroup.caps.usable && (o.limits.cpu_seconds || o.limits.memory_bytes);
        if (sampled && !host) host = isolate::read_cgroup_host();
        p.limits =
            isolate::plan_limits(o.limits, p.cgroup.caps,
                                 {.nproc_per_userns = nproc_per_userns,
                                  .root_inside = o.root,
                                  .caller_root = ::getuid() == 0,
                                  .tmpfs_size = s.plan.root.tmpfs_size,
                                  .host_share = p.host_share,
                                  .cpus = sys::usable_cpus(),
                                  .autogroups = sampled && isolate::autogroups_here(*host),
                                  .share_net = o.share_net,
                                  .step_task = o.step == 1,
                                  .tree_clock = sampled && o.name.empty() &&
                                                isolate::tree_clock_lent_here(::getuid() == 0),
                                  .require_cgroup = o.require_cgroup,
                                  .no_cgroup = p.cgroup.reason});
    } catch (...) {
        isolate::remove_cgroup(p.cgroup);
        throw;
    }
    apply_limit_plan(o, p.cgroup.caps, p.limits, p);
    join_limits_filter(s, o.seccomp_bpf.empty(), p.limits.refuse_memfd, p.limits.refuse_setsid);
    // Its text only where --print-plan shows it: rendering the policy took ~180 us a run.
    if (o.print_plan && o.seccomp && o.seccomp_bpf.empty())
        p.seccomp_text = isolate::to_string(isolate::with_limit_refusals(
            isolate::default_seccomp_policy(), p.limits.refuse_memfd, p.limits.refuse_setsid));
    return p;
}

namespace {

// The GPU's ops, planned now that the sandbox is setting up, placed where the plan would have
// had them (before the user's mounts) by the same planner, and sent to init as the whole plan.
// Their entries (mount points, links, the ld.so.cache) are made here too, in the late directory
// of init's layer, which init sent first: init meanwhile creates its network namespace and fills
// the rest of its layer, instead of doing it all in turn. A frame other than LateDir (or EOF):
// init failed first, and its Failure stays queued for supervise().
void send_device_ops(const Options& o, RunPlan& plan, RunFds& fds, int root) {
    const rootfs::MountPlan& base = plan.spec.plan;
    std::vector<rootfs::MountOp> ops = rootfs::place_device_ops(base, plan_gpus(o, plan, root));
    const int control = fds.monitor.control.get();
    std::optional<channel::LateDir> dir = channel::receive_if<channel::LateDir>(control);
    if (!dir) return;
    const std::size_t n = ops.size();
    channel::DevicePlan msg;
    msg.late.full = rootfs::with_device_ops(base, std::move(ops));
    msg.late.prepared.assign(n, false);
    if (dir->dir.valid())
        msg.late.prepared =
            rootfs::prepare_late_entries(msg.late.full, base.user_from, n, root, dir->dir.get());
    send_unless_gone(control, msg);
}

// The ends of every channel of the run: the control channel, the relays the caller's fds 0-2
// need (launcher/monitor/stdio.hpp), the pty's socket; ROOTFS, --overlay's layers and the
// monitor's pidfd for init.
RunFds open_run_fds(const Options& o, RunPlan& plan, pty::Terminal& term, UniqueFd rootfs) {
    RunFds f;
    f.rootfs = std::move(rootfs);
    sys::socketpair(f.monitor.control, f.sandbox.control);
    const bool capped = o.limits.stdout_bytes || o.limits.stderr_bytes;
    const StdioPlan stdio = plan_stdio(inspect_stdio(), {false, o.limits.stdout_bytes.has_value(),
                                                         o.limits.stderr_bytes.has_value()});
    if (stdio.relay[0]) {
        sys::pipe(f.sandbox.stdin_relay, f.monitor.stdin_relay);
        // The monitor never blocks on it: a workload that does not read its stdin stalls nothing.
        sys::set_nonblocking(f.monitor.stdin_relay.get(), "stdin relay");
    }
    if (stdio.relay[1]) sys::pipe(f.monitor.stdout_relay, f.sandbox.stdout_relay);
    if (stdio.err_into_out) f.sandbox.stderr_relay = sys::dup_cloexec(f.sandbox.stdout_relay.get());
    else if (stdio.relay[2]) sys::pipe(f.monitor.stderr_relay, f.sandbox.stderr_relay);
    if (f.monitor.stdin_relay.valid() || f.monitor.stdout_relay.valid() ||
        f.monitor.stderr_relay.valid())
        sys::ignore_signal(SIGPIPE);  // a closed reader must not kill us
    if (term.prepare(plan.spec.pty, capped)) sys::socketpair(f.monitor.pty, f.sandbox.pty);
    f.monitor_pidfd = sys::pidfd_open(::getpid());
    if (plan.kept.upper.valid()) {
        f.kept_upper = sys::dup_cloexec(plan.kept.upper.get());
        f.kept_work = sys::dup_cloexec(plan.kept.work.get());
    }
    return f;
}

struct ChildArgs {
    const ChildSpec* spec;
    RunFds* fds;
};

void child_entry(void* arg) {
    auto* a = static_cast<ChildArgs*>(arg);
    sandbox_init(*a->spec, *a->fds);
}

void join_entry(void* arg) {
    auto* a = static_cast<ChildArgs*>(arg);
    join_main(*a->spec, *a->fds);
}

}  // namespace

BoundRoot bound_root(const RunPlan& plan, int rootfs) {
    const ChildSpec& s = plan.spec;
    if (rootfs::bound_instead(s.plan.root)) return BoundRoot::submounts;
    if (s.plan.root.mode != rootfs::RootMode::read_only || rootfs < 0 || s.fuse_root ||
        !s.image_layers.empty() || plan.gpus.kind != gpu::GpuSpec::Kind::none)
        return BoundRoot::no;
    try {
        return rootfs::layer_is_empty(s.plan, rootfs) ? BoundRoot::complete : BoundRoot::no;
    } catch (...) {
        return BoundRoot::no;  // the overlay root then, and init says why
    }
}

namespace {

// clone(), then what only the monitor can do before init goes on: the id maps, then Go.
isolate::Spawned start_sandbox(RunPlan& plan, RunFds& fds, isolate::Cgroup& cgroup,
                               FuseDaemon* fuse = nullptr) {
    // The network namespace is the costly one to create: init unshares it itself, so the monitor
    // is back from clone() sooner and plans the GPU's ops while init does that.
    const int clone_flags = plan.spec.new_net ? plan.ns_flags & ~CLONE_NEWNET : plan.ns_flags;
    ChildArgs args{&plan.spec, &fds};
    isolate::Spawned child = isolate::spawn_sandbox(
        clone_flags, cgroup.caps.usable ? cgroup.dir.get() : -1, child_entry, &args);
    fds.sandbox = {};  // init's now
    fds.monitor_pidfd.reset();
    const UniqueFd rootfs = std::move(fds.rootfs);  // init's, to check its own against
    fds.kept_upper.reset(), fds.kept_work.reset();
    try {
        isolate::write_outer_id_maps(child.pid, plan.spec.ids);
    } catch (...) {
        sys::kill_and_reap(child.pid);
        std::throw_with_nested(SetupError("user namespace id maps"));
    }
    if (fuse && !plan.squashfs.empty()) {
        try {
            mount_fuse_root(child.pid, plan.spec.plan.root.rootfs, plan.squashfs, *fuse);
        } catch (...) {
            sys::kill_and_reap(child.pid);
            throw;
        }
    }
    // Read here, while init makes its network namespace, not by init after the go (mountinfo,
    // ~50 us: the kernel prints every mount). Init's mount namespace is a copy of ours.
    channel::Go go;
    try {
        go.bound = bound_root(plan, rootfs.get()) != BoundRoot::no;
    } catch (...) {
        sys::kill_and_reap(child.pid);
        throw;
    }
    if (plan.devices_later) keep_off_my_cpu(child.pid, plan.spec.cpus);
    send_unless_gone(fds.monitor.control.get(), go);
    return child;
}

// A joining task (step mode): a go-between enters the running sandbox and starts the task's
// init there as our child (spawn_sibling), then goes; that init is the one supervised.
// Where the go-between fails, it is, and its Failure stays queued for supervise().
isolate::Spawned join_sandbox(const RunPlan& plan, RunFds& fds, isolate::Cgroup& cgroup) {
    ChildArgs args{&plan.spec, &fds};
    const int into = plan.into_cgroup.valid() ? plan.into_cgroup.get()
                     : cgroup.caps.usable     ? cgroup.dir.get()
                                              : -1;
    isolate::Spawned go_between = isolate::spawn_sandbox(0, into, join_entry, &args);
    fds.sandbox = {};
    fds.monitor_pidfd.reset(), fds.rootfs.reset(), fds.join_init.reset(), fds.join_holder.reset();
    std::optional<channel::Joined> joined =
        channel::receive_if<channel::Joined>(fds.monitor.control.get());
    if (!joined) return go_between;
    int status = 0;
    rusage ru{};
    sys::wait_rusage(go_between.pid, status, ru);
    isolate::Spawned task;
    task.pid = joined->pid;
    task.pidfd = std::move(joined->pidfd);
    return task;
}

// A process's pid in its own pid namespace, the innermost of /proc/PID/status's NSpid (0: gone).
pid_t inner_pid(pid_t pid) {
    const std::string status = sys::read_file(cat("/proc/", pid, "/status"), 1 << 16);
    const auto at = status.find("\nNSpid:");
    if (at == std::string::npos) return 0;
    const std::string line = status.substr(at + 7, status.find('\n', at + 1) - at - 7);
    const auto last = line.find_last_of(" \t");
    return static_cast<pid_t>(std::atoi(line.substr(last + 1).c_str()));
}

// ROOTFS's read-only view for the monitor's reads: `made` where it was made before the sandbox
// (--preflight enforce, --device), else the one init sends first (spec.send_view), else none.
// With warn, the preflight runs here, while the sandbox sets up, and keeps what it read for the
// GPU plan. Invalid where init failed first: its Failure stays queued for supervise().
UniqueFd monitor_view(const Options& o, RunPlan& plan, RunFds& fds, UniqueFd made,
                      const gpu::GpuSpec& gpus) {
    UniqueFd view = std::move(made);
    if (plan.spec.send_view) {
        std::optional<channel::RootView> got =
            channel::receive_if<channel::RootView>(fds.monitor.control.get());
        if (!got) return UniqueFd();
        view = std::move(got->root);
    }
    if (o.preflight == preflight::Mode::warn && view.valid())
        plan.preflight = run_preflight(o, view.get(), gpus);
    return view;
}

// run --name: the entry ps shows and exec reads (launcher/monitor/named.hpp), once init runs.
void publish_named(const Options& o, RunPlan& plan, pid_t init) {
    named::Entry e;
    e.name = o.name;
    e.pid = init;
    e.start = named::start_time(init);
    e.monitor = ::getpid();
    e.started = std::time(nullptr);
    e.rootfs = o.named_image.empty() ? o.rootfs : o.named_image;
    std::vector<std::string> gpus;  // "index 0 -> 0000:3b:00.0 -> ...": "0"
    for (const std::string& line : plan.gpu_summary) {
        const std::string first = line.substr(0, line.find(" -> "));
        gpus.push_back(starts_with(first, "index ") ? first.substr(6) : first);
    }
    e.gpus = gpus.empty() ? "none" : join(gpus, ",");
    e.limits = named::limits_summary(o.limits, plan.limits);
    e.seccomp = !o.seccomp ? "off" : o.seccomp_bpf.empty() ? "default" : o.seccomp_bpf;
    e.refuse_memfd = plan.limits.refuse_memfd;
    e.refuse_setsid = plan.limits.refuse_setsid;
    e.nested = plan.spec.ids.nested;
    e.own_net = plan.spec.new_net;
    if (plan.cgroup.caps.usable) e.cgroup = plan.cgroup.path;
    for (const isolate::RlimitOp& r : plan.spec.rlimits)
        e.rlimits.emplace_back(r.resource, r.value);
    e.workdir = plan.spec.workdir;
    e.env = plan.spec.env;
    plan.named.publish(e);
}

// Everything from the channels to the verdict; exceptions before the sandbox exists propagate.
RunOutcome spawn_and_supervise(const Options& o, RunPlan& plan, int parent_pidfd,
                               const RunInputs& run, UniqueFd rootfs, UniqueFd view) {
    isolate::Cgroup& cgroup = plan.cgroup;
    pty::Terminal term;  // with the caller at a terminal: the workload's own pty, relayed
    RunFds fds = open_run_fds(o, plan, term, std::move(rootfs));
    if (plan.devices_later) plan.spec.cpus = sys::affinity();
    // Blocked until gpubox exits, not only while it supervises: a request to end that comes
    // after the run (a scheduler's SIGTERM to every process of a job, gpubox's last) must not
    // end gpubox before its verdict is written and its cgroup removed. The workload unblocks
    // them for itself; one left pending here goes with gpubox's exit, a moment later.
    sys::block_signals(monitor_signals());
    const bool joins = plan.spec.role == ChildSpec::Role::joined;
    if (joins) {
        fds.join_init = sys::dup_cloexec(plan.step.init.get());
        if (plan.step.holder.valid()) fds.join_holder = sys::dup_cloexec(plan.step.holder.get());
    }
    FuseDaemon fuse;  // a squashfs image's squashfuse: killed when the run ends
    isolate::Spawned child =
        joins ? join_sandbox(plan, fds, cgroup) : start_sandbox(plan, fds, cgroup, &fuse);
    try {
        if (!joins) view = monitor_view(o, plan, fds, std::move(view), run.gpus);
        // (A joining task's GPUs are the step's sandbox's, which the keeper planned.)
        if (!joins && plan.devices_later && view.valid()) send_device_ops(o, plan, fds, view.get());
    } catch (...) {
        sys::kill_and_reap(child.pid);  // it waits for the plan; nothing of it outlives it
        throw;
    }
    view.reset();
    if (plan.named.held()) publish_named(o, plan, child.pid);
    term.attach(std::move(fds.monitor.pty));
    Ends& m = fds.monitor;
    // Named, in Supervised's order: several are ints, and two adjacent bools.
    RunOutcome out = supervise({
        .child = child,
        .control = m.control.get(),
        .limits = o.limits,
        .cgroup = cgroup,
        .stdin_relay = m.stdin_relay.valid() ? m.stdin_relay.release() : term.take_input(),
        .stdout_relay = m.stdout_relay.valid() ? m.stdout_relay.release() : term.take_output(),
        .stderr_relay = m.stderr_relay.release(),
        .pty_master = term.master(),
        .kill_after = o.kill_after,
        .parent_pidfd = parent_pidfd,
        .sample_ms = plan.sample_ms,
        .sampled_memory_limit = plan.sampled_memory_limit,
        .task_root = joins ? inner_pid(child.pid) : 0,
        .crowd_apart = plan.limits.idle_policy,
        .take_turns = plan.limits.take_turns,
        .joinable = plan.spec.joinable,
    });
    // The kernel refused init the workload's CPU counter (channel::Meter).
    if (out.clock_error) {
        log::info(cat(
            "perf_event_open(task-clock) in the sandbox's init: ", std::strerror(out.clock_error),
            ": a child the kernel reaps is charged an upper bound"));
        plan.limits.tree_clock = false;
        for (auto& [name, how] : plan.limits.mechanisms)
            if (name == isolate::LimitName::cpu_time)
                how = isolate::sampled_cpu_mechanism(plan.limits, false);
    }
    return out;
}

}  // namespace

void write_usage_failure_meta(const std::string& path, const std::string& message) {
    if (path.empty()) return;
    Options o;
    o.meta = path;
    RunOutcome out;
    out.setup_failed = true;
    out.setup_code = kExitSetupFailed;
    out.message = message;
    try {
        write_meta(open_meta(path), o, judge(out, o.limits), out, {});
    } catch (...) {}  // a bad --meta: the usage error is all there is to say
}

namespace {

// The kill line names what enforced a CPU or memory limit (--meta has every mechanism in full):
// a cgroup's count is exact, the monitor's is read from outside at each pass.
std::string enforced_by(const Verdict& v, const isolate::CgroupCaps& caps) {
    if (v.limit == isolate::LimitName::memory)
        return caps.memory ? " (cgroup memory.max)" : " (the monitor's count, no cgroup)";
    if (v.limit == isolate::LimitName::cpu_time &&
        v.message.find("RLIMIT_CPU") == std::string::npos)
        return caps.usable ? " (cgroup cpu.stat)" : " (the monitor's count, no cgroup)";
    return "";
}

// --die-with-parent: a pidfd of gpubox's parent, for the monitor to poll. The parent may die
// before pidfd_open(): then gpubox has been reparented, and getppid() no longer names it, so
// the pidfd is the parent's only if getppid() still is the pid after it was opened.
UniqueFd watch_parent() {
    const pid_t parent = ::getppid();
    UniqueFd fd = sys::pidfd_open(parent);
    if (::getppid() != parent)
        throw PlanError(
            cat("--die-with-parent: gpubox's parent (pid ", parent, ") has already died"));
    return fd;
}

// Frictions answered before anything starts (launcher/cli/cli_habits.hpp): a CUDA_VISIBLE_DEVICES
// that a wrapper set, in a run given no GPU, is a warning, not an error: Slurm sets it in every
// step of a GPU job, CPU-only steps that use gpubox included, and docker, podman and Apptainer
// ignore it too without --gpus/--nv; silence, though, leaves "CUDA finds no device" to puzzle
// over. --writable on a ROOTFS that is not the caller's would fail only at the workload's first
// write, with its own "Permission denied".
void check_before_start(const Options& o, int rootfs) {
    const std::string w =
        gpu_env_warning(std::getenv("CUDA_VISIBLE_DEVICES"), o.gpu_given || !o.devices.empty());
    if (!w.empty() && log::level() >= log::Level::warn) {
        log::warn(w);
        log::hint(
            "--gpu slurm (the Slurm step's GPUs), --gpu 0 or --gpu all gives GPUs; "
            "--gpu none says none is meant");
    }
    if (o.root_mode != rootfs::RootMode::writable || o.print_plan) return;
    const struct stat st = sys::fstat(rootfs, o.rootfs);
    if (st.st_uid != ::geteuid())
        throw PlanError(
            cat("run: --writable: ROOTFS ", quote(o.rootfs), " belongs to uid ", st.st_uid,
                ", not to you (uid ", ::geteuid(), "): the sandbox could not write to it"),
            "drop --writable (writes then go to a layer discarded at exit), or keep "
            "them with --overlay DIR");
}

// The keeper's work (launcher/monitor/step.hpp): the step's sandbox, started as a private one
// is, with no cgroup of a task's and no workload; ready once its init sends StepReady.
step::Made make_step_sandbox(const Options& o, RunPlan& plan, const gpu::GpuSpec& gpus) {
    plan.spec.role = ChildSpec::Role::step_init;
    RunFds fds;
    // The keeper holds none of the task's fds (step.cpp's detach_fds): the step's sandbox is a
    // run of its own, whose init checks its own open of ROOTFS against this one.
    fds.rootfs = rootfs::open_directory(o.rootfs, "ROOTFS");
    sys::socketpair(fds.monitor.control, fds.sandbox.control);
    fds.monitor_pidfd = sys::pidfd_open(::getpid());
    if (plan.devices_later) plan.spec.cpus = sys::affinity();
    isolate::Cgroup none;
    step::Made made;
    made.init = start_sandbox(plan, fds, none);
    UniqueFd view = monitor_view(o, plan, fds, UniqueFd(), gpus);
    if (plan.devices_later && view.valid()) send_device_ops(o, plan, fds, view.get());
    view.reset();
    std::optional<channel::Frame> f = channel::receive(fds.monitor.control.get());
    if (f && std::holds_alternative<channel::StepReady>(*f))
        made.holder = std::move(std::get<channel::StepReady>(*f).holder);
    else if (f && std::holds_alternative<channel::Failure>(*f))
        made.failure = std::get<channel::Failure>(*f).text;
    else made.failure = "the step's sandbox ended during its set-up";
    return made;
}

}  // namespace

int run_sandbox(const Options& o, RunReport* report) {
    RunRequest r;
    r.options = o;
    return run_sandbox(r, report);
}

int run_sandbox(const RunRequest& given, RunReport* report) {
    std::optional<std::string> step_key;
    RunRequest stepped;  // step mode's options (the wire-up), with the same image hold
    try {
        step_key = given.options.print_plan ? std::nullopt : decide_step(given.options);
        if (step_key) {
            stepped.options = step_options(given.options);
            bind_task_gpus(stepped.options);
            if (given.image_hold.valid())
                stepped.image_hold = sys::dup_cloexec(given.image_hold.get());
        }
    } catch (...) {  // before anything started: --meta still gets gpubox's own verdict (XX)
        if (!given.options.print_plan)
            write_usage_failure_meta(given.options.meta, describe(std::current_exception()));
        throw;
    }
    const RunRequest& r = step_key ? stepped : given;
    const Options& o = r.options;
    RunPlan plan;
    UniqueFd parent;
    UniqueFd meta;
    try {
        if (!o.print_plan) meta = open_meta(o.meta);
        if (o.die_with_parent) parent = watch_parent();
        // ROOTFS, opened once: the preflight, the GPU plan and init's own check read this one
        // directory, through a read-only view of it (made here where the monitor reads it before
        // clone(), else by init from its own, checked, open).
        RunInputs in;
        UniqueFd root = rootfs::open_directory(o.rootfs, "ROOTFS");
        in.rootfs = root.get();
        check_before_start(o, root.get());
        named::Claim name;  // taken first: a name in use is refused before anything starts
        if (!o.name.empty() && !o.print_plan) {
            if (step_key)
                throw PlanError(
                    "run: --name: a step's tasks share one sandbox, which no one of "
                    "them names",
                    "drop --name, or --no-step for a sandbox of this task's own");
            name = named::claim(o.name);
        }
        try {
            in.gpus = gpu::resolve_gpu_spec(o.gpu);
        } catch (...) {
            in.gpus_error = std::current_exception();  // the plan reports it; the preflight
        }                                              // goes on without GPUs
        const bool preflight_first = o.preflight == preflight::Mode::enforce ||
                                     (o.print_plan && o.preflight != preflight::Mode::off);
        UniqueFd view;
        if (preflight_first || !o.devices.empty() ||
            (o.print_plan && in.gpus.kind != gpu::GpuSpec::Kind::none))
            view = rootfs::read_only_view_of(root.get(), o.rootfs, "ROOTFS", o.image_layers);
        in.view = view.get();
        // --preflight enforce (and --print-plan's warnings) before anything starts; warn runs
        // while the sandbox sets up, on the view init sends.
        if (preflight_first) in.preflight = run_preflight(o, view.get(), in.gpus);
        plan = plan_run(r, in);
        plan.named = std::move(name);
        plan.spec.joinable = plan.named.held();
        if (!o.overlay.empty() && !o.print_plan) {  // before a cgroup exists: nothing to undo
            plan.kept = open_kept_overlay(o.overlay, o.rootfs, o.origin, o.force_overlay);
            plan.spec.plan.root.overlay_dir = plan.kept.dir;  // as the kernel resolved it
        }
        plan.spec.send_view =
            !view.valid() && (o.preflight != preflight::Mode::off || plan.devices_later);
        if (o.print_plan) {
            print(render_plan(plan));
            isolate::remove_cgroup(plan.cgroup);
            return 0;
        }
        if (step_key) {
            // The step's sandbox: made by the keeper from this plan, if this task is the first.
            // Without a cgroup, the monitor's count reads this task's tree of the shared pid
            // namespace (Supervised::task_root). The keeper's own run measures nothing.
            plan.step = step::join(*step_key, step_asks(o),
                                   [&] { return make_step_sandbox(o, plan, in.gpus); });
            plan.spec.role = ChildSpec::Role::joined;
            plan.spec.join_ns =
                CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
        }
        RunOutcome out =
            spawn_and_supervise(o, plan, parent.get(), in, std::move(root), std::move(view));
        isolate::remove_cgroup(plan.cgroup);
        open_up_kept_overlay(plan.kept);
        const Verdict v = judge(out, o.limits);
        if (out.setup_failed && !report) report_setup_failure(out);  // else the caller's to say
        if (v.killed && !o.quiet)  // "killed: wall-clock limit 1.000 s exceeded"
            log::error(v.message + enforced_by(v, plan.cgroup.caps));
        write_meta(meta, o, v, out, plan.limits.mechanisms);
        if (report) *report = {v, out};
        return v.gpubox_exit;
    } catch (...) {
        isolate::remove_cgroup(plan.cgroup);
        // gpubox's own failure: the verdict says so too (XX), then main() prints the error.
        RunOutcome out;
        out.setup_failed = true;
        out.setup_code = kExitSetupFailed;
        out.message = describe(std::current_exception());
        try {
            write_meta(meta, o, judge(out, o.limits), out, plan.limits.mechanisms);
        } catch (...) {}
        throw;
    }
}

// A name is listed once init runs; its workload (init's one child) comes once init has made the
// root, and is ready to be joined once it has its own user namespace and ids and has dropped its
// privileges (NoNewPrivs, just before its filter and exec). Exec waits for that, at most 10 s
// (then goes on, and the join says what it found), or it would join a sandbox still being made
// (CI: exec right after ps listed the name, 125).
namespace {

void wait_for_workload(pid_t init) {
    const std::string children = cat("/proc/", init, "/task/", init, "/children");
    for (int i = 0; i < 10000; ++i, ::usleep(1000)) {
        const std::string listed = sys::try_read_at(AT_FDCWD, children, 64);
        std::uint64_t pid = 0;
        if (!isolate::to_u64(listed.substr(0, listed.find(' ')), pid)) continue;
        const std::string status = sys::try_read_at(AT_FDCWD, cat("/proc/", pid, "/status"), 8192);
        if (status.find("\nNoNewPrivs:\t1\n") != std::string::npos) return;
    }
}

}  // namespace

int exec_sandbox(const Options& o) {
    named::Target target = named::find(o.name);
    const named::Entry& e = target.entry;
    wait_for_workload(e.pid);
    RunPlan plan;
    ChildSpec& s = plan.spec;
    // Joined as a step's task joins (join_main): init's namespaces, then the workload's user
    // namespace (ChildSpec::into_named), the sandbox's cgroup, filter and rlimits.
    s.role = ChildSpec::Role::joined;
    s.into_named = true;
    s.join_ns = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_NEWCGROUP | (e.own_net ? CLONE_NEWNET : 0);
    s.ids.nested = e.nested;
    s.argv = o.argv;
    std::vector<std::pair<std::string, std::string>> env;
    for (const std::string& kv : e.env)
        if (const auto eq = kv.find('='); eq != std::string::npos)
            env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    for (const auto& [k, v] : o.env) {  // --env wins
        std::erase_if(env, [&](const auto& p) { return p.first == k; });
        env.emplace_back(k, v);
    }
    s.env = render_environment(env);
    s.exec_candidates = plan_exec_candidates(o.argv[0], s.env);
    s.workdir = o.workdir_given ? o.workdir : e.workdir;
    for (auto [resource, value] : e.rlimits)
        s.rlimits.push_back({resource, static_cast<rlim_t>(value), cat("rlimit ", resource)});
    s.seccomp = e.seccomp != "off";
    if (s.seccomp && e.seccomp != "default") s.bpf = isolate::load_bpf_file(e.seccomp);
    join_limits_filter(s, e.seccomp == "default", e.refuse_memfd, e.refuse_setsid);
    if (!e.cgroup.empty()) {
        plan.into_cgroup = sys::open_at(AT_FDCWD, e.cgroup, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sys::fstat(plan.into_cgroup.get(), e.cgroup).st_uid != ::geteuid())
            throw PlanError(
                cat("exec: the sandbox's cgroup ", quote(e.cgroup), " is not the caller's own"));
    }
    plan.step.init = std::move(target.init);
    RunInputs in;
    RunOutcome out;
    try {
        out = spawn_and_supervise(o, plan, -1, in, UniqueFd(), UniqueFd());
    } catch (const SysError& x) {
        // cgroup v2 lets a process into a cgroup only where it may write the procs file of the
        // nearest cgroup it and the target have in common: a run in a systemd scope, say, and
        // an exec from another login session have only root's user slice in common.
        if (!plan.into_cgroup.valid() || !starts_with(x.op, "clone3(") ||
            (x.err() != EACCES && x.err() != EPERM))
            throw;
        throw PlanError(cat("exec: cannot enter the sandbox's cgroup ", quote(e.cgroup), " (",
                            x.what(), "), and will not run outside its limits"),
                        "run gpubox exec from where the run was started (the same login "
                        "session or systemd user service), or give the run --cgroup DIR, a "
                        "cgroup delegated to you that both can reach");
    }
    const Verdict v = judge(out, o.limits);
    if (out.setup_failed) report_setup_failure(out);
    return v.gpubox_exit;
}

}  // namespace gpubox::launcher
