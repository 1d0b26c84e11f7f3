// The monitor: plan, spawn, supervise. It stays outside the sandbox's pid namespace, forwards
// signals to the sandbox's init, and turns what init reports into gpubox's exit status.
#include "launcher/run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "isolate/id_map.hpp"
#include "isolate/namespaces.hpp"
#include "isolate/seccomp.hpp"
#include "isolate/spawn.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/image.hpp"
#include "gpu/inventory.hpp"
#include "gpu/mount_list.hpp"
#include "launcher/environment.hpp"
#include "launcher/exit_codes.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::launcher {
namespace {

void child_entry(const void* arg) { sandbox_init(*static_cast<const ChildSpec*>(arg)); }

UniqueFd open_rootfs(const std::string& path) {
    try {
        UniqueFd fd = sys::open_at(AT_FDCWD, path, O_PATH | O_DIRECTORY);
        return fd;
    } catch (...) {
        std::throw_with_nested(PlanError(cat("ROOTFS ", quote(path), " is not a usable directory")));
    }
}

sigset_t monitor_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : forwarded_signals()) sigaddset(&set, s);
    sigaddset(&set, SIGCHLD);
    return set;
}

struct Outcome {
    bool have_error = false;
    isolate::Message error;
    bool have_status = false;
    int status = 0;       // the workload's wait status, from init
    int init_status = 0;  // init's own wait status
};

void drain(int fd, Outcome& out) {
    isolate::Message m;
    while (isolate::read_message(fd, m)) {
        if (m.type == isolate::MsgType::error && !out.have_error) out.have_error = true, out.error = m;
        if (m.type == isolate::MsgType::status) out.have_status = true, out.status = m.code;
    }
}

Outcome supervise(const isolate::Spawned& child, int report_fd) {
    sigset_t set = monitor_signals();
    UniqueFd sigfd(::signalfd(-1, &set, SFD_CLOEXEC));
    if (!sigfd.valid()) sys::fail("signalfd()", errno);
    Outcome out;
    for (;;) {
        pollfd fds[2] = {{sigfd.get(), POLLIN, 0}, {child.pidfd.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            sys::fail("poll()", errno);
        }
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo si{};
            if (::read(sigfd.get(), &si, sizeof si) == sizeof si && si.ssi_signo != SIGCHLD)
                ::kill(child.pid, static_cast<int>(si.ssi_signo));
        }
        if (fds[1].revents & POLLIN) break;
    }
    rusage ru{};
    while (::wait4(child.pid, &out.init_status, 0, &ru) < 0 && errno == EINTR) {
    }
    drain(report_fd, out);
    return out;
}

int exit_code_of(const Outcome& o) {
    if (o.have_error) {
        std::string text = o.error.text;
        auto nl = text.find('\n');
        log::error(text.substr(0, nl));
        if (nl != std::string::npos) log::hint(text.substr(nl + 1));
        return o.error.code;
    }
    const int st = o.have_status ? o.status : o.init_status;
    if (WIFEXITED(st)) {
        if (!o.have_status) log::error("the sandbox's init exited before the workload reported");
        return o.have_status ? WEXITSTATUS(st) : kExitSetupFailed;
    }
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return kExitSetupFailed;
}

}  // namespace

RunPlan plan_run(const Options& o) {
    RunPlan p;
    ChildSpec& s = p.spec;
    p.ns_flags = isolate::plan_namespaces(o.share_net).flags;
    s.ids = isolate::plan_id_maps(::getuid(), ::getgid(), o.root);
    rootfs::PlanInputs in;
    in.root = {o.rootfs, o.root_mode, o.tmpfs_size};
    in.new_pid_ns = true;
    in.new_net_ns = !o.share_net;
    in.tmpfs_size = o.tmpfs_size;
    in.user_mounts = o.mounts;
    const gpu::GpuSpec gpus = gpu::parse_gpu_spec(o.gpu);
    if (gpus.kind != gpu::GpuSpec::Kind::none) {
        const gpu::GpuInventory inv = gpu::discover_gpus(o.driver_root, o.gpu_caps);
        gpu::GpuPlan gp = gpu::plan_gpu_mounts(inv, gpu::select_gpus(inv, gpus), o.gpu_caps,
                                               gpu::inspect_image(o.rootfs));
        in.device_ops = std::move(gp.ops);
        p.gpu_summary = std::move(gp.summary);
        for (const std::string& line : p.gpu_summary) log::info("gpu: " + line);
    }
    s.plan = rootfs::build_mount_plan(in);
    if (!o.seccomp) {
        p.seccomp_text = "off (--no-seccomp)\n";
    } else if (!o.seccomp_bpf.empty()) {
        s.seccomp = isolate::load_bpf_file(o.seccomp_bpf);
        p.seccomp_text = cat("custom BPF from ", quote(o.seccomp_bpf), " (", s.seccomp.bytes.size() / 8,
                             " instructions)\n");
    } else {
        const isolate::SeccompPolicy policy = isolate::default_seccomp_policy();
        s.seccomp = isolate::compile(policy);
        p.seccomp_text = isolate::to_string(policy);
    }
    s.hostname = o.hostname;
    s.new_net = !o.share_net;
    s.argv = o.argv;
    s.env = build_environment(o.env, o.root, std::getenv("TERM"));
    s.exec_candidates = plan_exec_candidates(o.argv[0], s.env);
    s.workdir = o.workdir;
    return p;
}

int run_sandbox(const Options& o) {
    RunPlan plan = plan_run(o);
    if (o.print_plan) {
        std::cout << render_plan(plan) << std::flush;
        return 0;
    }
    ChildSpec& spec = plan.spec;
    UniqueFd rootfs = open_rootfs(o.rootfs);
    UniqueFd go_r, go_w, rep_r, rep_w;
    sys::pipe(go_r, go_w);
    sys::pipe(rep_r, rep_w);
    UniqueFd self = sys::pidfd_open(::getpid());
    spec.rootfs_fd = rootfs.get();
    spec.parent_pidfd = self.get();
    spec.go_fd = go_r.get();
    spec.report_fd = rep_w.get();
    spec.monitor_fds = {go_w.get(), rep_r.get()};

    sigset_t set = monitor_signals(), old;
    ::sigprocmask(SIG_BLOCK, &set, &old);
    std::cout.flush();
    std::cerr.flush();
    isolate::Spawned child = isolate::spawn_sandbox(plan.ns_flags, child_entry, &spec);
    go_r.reset();
    rep_w.reset();
    rootfs.reset();
    try {
        isolate::write_outer_id_maps(child.pid, spec.ids);
    } catch (...) {
        ::kill(child.pid, SIGKILL);
        ::waitpid(child.pid, nullptr, 0);
        std::throw_with_nested(SetupError("user namespace id maps"));
    }
    sys::write_all(go_w.get(), "g", "sync pipe");
    go_w.reset();
    Outcome out = supervise(child, rep_r.get());
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return exit_code_of(out);
}

}  // namespace gpubox::launcher
