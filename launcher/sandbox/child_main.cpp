// The sandbox side of gpubox, in the order it happens. Everything here runs after clone() in the
// new namespaces; everything it uses was decided by the monitor (ChildSpec). Errors are
// exceptions (SysError names the syscall, its paths and errno), reported to the monitor as one
// channel::Failure frame by report_and_exit.
#include "launcher/sandbox/child_main.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "isolate/caps.hpp"
#include "isolate/sock_usage.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/exit_codes.hpp"
#include "launcher/sandbox/init_loop.hpp"
#include "isolate/spawn.hpp"
#include "isolate/tree_clock.hpp"
#include "isolate/usage.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/view.hpp"

namespace gpubox::launcher {
namespace {

void die_with_parent(const UniqueFd& monitor) {
    sys::prctl(PR_SET_PDEATHSIG, SIGKILL, "PR_SET_PDEATHSIG, SIGKILL");
    // The monitor died before we armed it: it reports nothing, and we go.
    if (sys::poll_readable(monitor.get(), 0)) sys::exit_now(kExitSetupFailed);
}

bool wait_for_go(const Ends& own) {
    auto go = channel::receive_if<channel::Go>(own.control.get());
    if (!go) sys::exit_now(kExitSetupFailed);  // the monitor gave up (and reported why)
    return go->bound;
}

// The monitor's fd belongs to its mount namespace, where nothing can be mounted from here: open
// ROOTFS (or --overlay's DIR/upper, DIR/work) again in ours, and insist it is the directory the
// monitor checked.
UniqueFd reopen_same(const std::string& path, const char* what, UniqueFd monitors, int flags) {
    UniqueFd fd = sys::open_at(AT_FDCWD, path, O_PATH | O_DIRECTORY | flags);
    const struct stat a = sys::fstat(fd.get(), path);
    const struct stat b = sys::fstat(monitors.get(), path);
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        sys::fail(cat("open(", quote(path), "): ", what, " was replaced during start-up"), ESTALE);
    return fd;
}

// A squashfs image's root, which the monitor mounted over ROOTFS in our mount namespace before
// Go (launcher/monitor/fuse_root.hpp): a FUSE mount's root there, or the run fails.
UniqueFd open_fuse_root(const ChildSpec& spec, RunFds& fds) {
    fds.rootfs.reset();
    const std::string& path = spec.plan.root.rootfs;
    UniqueFd fd = sys::open_at(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    struct statfs fs {};
    if (::fstatfs(fd.get(), &fs) != 0) sys::fail(cat("fstatfs(", quote(path), ")"), errno);
    if (static_cast<unsigned long>(fs.f_type) != 0x65735546)  // FUSE_SUPER_MAGIC
        sys::fail(cat("open(", quote(path), "): not the squashfs image's FUSE mount"), ESTALE);
    return fd;
}

// --overlay DIR (never inside ROOTFS: the monitor checked): opened before ROOTFS is covered.
void open_kept_layers(const ChildSpec& spec, RunFds& fds, rootfs::RootLayer& layer) {
    const std::string& dir = spec.plan.root.overlay_dir;
    if (dir.empty() || !layer.upper.valid()) return;
    layer.kept_upper =
        reopen_same(dir + "/upper", "--overlay's DIR/upper", std::move(fds.kept_upper), O_NOFOLLOW);
    layer.kept_work =
        reopen_same(dir + "/work", "--overlay's DIR/work", std::move(fds.kept_work), O_NOFOLLOW);
}

// A layered image's layers over its empty rootfs directory: from here on ROOTFS is their union.
UniqueFd stack_image(const ChildSpec& spec, int image) {
    sys::move_mount(rootfs::stack_layers(spec.image_layers).get(), "layers", image, "ROOTFS");
    return sys::open_at(AT_FDCWD, spec.plan.root.rootfs, O_PATH | O_DIRECTORY);
}

// ROOTFS read-only, with its submounts: reads through a read-only mount change no timestamp
// (rootfs/view.hpp), symlinks followed and directories listed included. The monitor gets a
// clone of its own, where it reads ROOTFS (preflight, GPU planning); ours where `keep`.
UniqueFd send_root_view(const ChildSpec& spec, const Ends& own, int image, bool keep) {
    UniqueFd view = sys::open_tree_attr(image, spec.plan.root.rootfs, true, MOUNT_ATTR_RDONLY);
    channel::send(own.control.get(),
                  channel::RootView{keep ? sys::dup_cloexec(view.get()) : std::move(view)});
    return view;
}

// An overlay root's lower layer, and what we resolve its entries in: such a clone, attached
// over ROOTFS in our mount namespace (no older kernel takes a detached layer; a bound root is
// one already; --writable writes ROOTFS). The monitor's view goes on it, unseen, so that its
// close costs no RCU grace period (a detached tree's does; our old root's detach queued behind).
UniqueFd cover_read_only(const ChildSpec& spec, int image, UniqueFd monitors) {
    const std::string& path = spec.plan.root.rootfs;
    UniqueFd view = sys::open_tree_attr(image, path, true, MOUNT_ATTR_RDONLY);
    sys::move_mount(view.get(), path + " (read-only)", image, path);
    if (monitors.valid()) sys::move_mount(monitors.get(), "ROOTFS's view", view.get(), path);
    return view;
}

// The late directory of our layer, for the monitor to make the GPU's entries in (none where
// the root is bound).
void send_late_dir(const Ends& own, const rootfs::RootLayer& layer) {
    UniqueFd dir = layer.late.valid() ? sys::dup_cloexec(layer.late.get()) : UniqueFd();
    channel::send(own.control.get(), channel::LateDir{std::move(dir)});
}

// Our own network namespace, owned by our user namespace as a clone flag would make it (the
// monitor leaves it to us: it is the costly one), and its loopback up.
void enter_new_net() {
    sys::unshare(CLONE_NEWNET);
    sys::set_loopback_up();
}

// The run's one synchronisation point: the whole plan, grown by the GPU's ops, which the
// monitor planned and placed (and made the entries of, in our layer's late directory) while we
// set up. Nullopt where there are no late ops.
std::optional<rootfs::LatePlan> receive_late_plan(const ChildSpec& spec, const Ends& own) {
    if (!spec.late_plan) return std::nullopt;
    auto got = channel::receive_if<channel::DevicePlan>(own.control.get());
    // The monitor kept us off its CPU while it planned them (see keep_off_my_cpu): from here on,
    // the user's CPUs, which the workload inherits.
    if (CPU_COUNT(&spec.cpus) > 0) sys::set_affinity(0, spec.cpus);
    if (!got) sys::exit_now(kExitSetupFailed);  // the monitor could not plan them, and says why
    got->late.full.root = spec.plan.root;
    return std::move(got->late);
}

[[noreturn]] void exec_command(const ChildSpec& spec) {
    std::vector<char*> argv, envp;
    for (auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    for (auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    int first_error = ENOENT;
    for (const std::string& path : spec.exec_candidates) {
        const int err = sys::try_execve(path, argv.data(), envp.data());
        if (err != ENOENT && err != ENOTDIR && first_error == ENOENT) first_error = err;
    }
    const int code = first_error == ENOENT ? kExitNotFound : kExitCannotExec;
    const bool searched = spec.argv[0].find('/') == std::string::npos;
    throw ExecError(cat("execve(", quote(spec.argv[0]), "): ", std::strerror(first_error),
                        code == kExitNotFound && searched ? " (searched the sandbox's PATH)" : ""),
                    code);
}

// fds 0-2 from the monitor's relays, where it relays them (see launcher/monitor/stdio.hpp).
void take_relays(const Ends& own) {
    if (own.stdin_relay.valid()) sys::dup2(own.stdin_relay.get(), STDIN_FILENO);
    if (own.stdout_relay.valid()) sys::dup2(own.stdout_relay.get(), STDOUT_FILENO);
    if (own.stderr_relay.valid()) sys::dup2(own.stderr_relay.get(), STDERR_FILENO);
}

// The sandbox's fresh /proc, gpubox's tmpfs, its sockets' meter and (`clock`) the workload's CPU
// counter, opened on ourselves (isolate/tree_clock.hpp), for the monitor, before the workload runs.
void send_meters(const Ends& own, const UniqueFd& tmpfs, UniqueFd diag = {}, bool clock = false) {
    const bool counted = diag.valid();  // (moved from below, before the opens)
    auto net = [&](const char* name) {  // absent (no IPv6): an invalid fd
        return UniqueFd(counted ? sys::try_open_at(AT_FDCWD, name, O_RDONLY) : -1);
    };
    isolate::TreeClock c = clock ? isolate::TreeClock::attach(0) : isolate::TreeClock();
    channel::send(own.control.get(),
                  channel::Meter{sys::open_at(AT_FDCWD, "/proc", O_PATH | O_DIRECTORY),
                                 tmpfs.valid() ? sys::dup_cloexec(tmpfs.get()) : UniqueFd(),
                                 std::move(diag), net("/proc/self/net/sockstat"),
                                 net("/proc/self/net/sockstat6"), c.take(), c.error()});
}

// The workload: a child of init, so it is never pid 1 and keeps ordinary signal semantics.
// `holder`: a joining task's, the pidfd of the step's holder, whose user namespace it enters.
// `inits_dumpable`: where it shares init's memory until its exec, init's dumpable flag, which
// is the memory's (ours sets init's): put back before the exec, whose new memory has its own,
// so that nothing the workload runs finds init's /proc open. -1: forked, nothing shared.
[[noreturn]] void workload_main(const ChildSpec& spec, const Ends& own, int holder = -1,
                                int inits_dumpable = -1) noexcept {
    try {
        sys::unblock_all_signals();
        sys::default_signal(SIGPIPE);  // the monitor ignores it while relaying
        take_relays(own);
        sys::setsid();  // no controlling tty: no TIOCSTI
        if (own.pty.valid()) pty::enter_new_pty(spec.pty, own.pty.get());  // its own one
        sys::prctl(PR_SET_DUMPABLE, 1, "PR_SET_DUMPABLE, 1");  // init's 0 locks /proc/self
        if (holder < 0)
            isolate::enter_nested_userns(spec.ids);  // see its own uid; no caps over mounts
        else if (spec.ids.nested) sys::setns(holder, CLONE_NEWUSER, "the step's holder");
        sys::chdir(spec.workdir);
        if (spec.sched_idle) sys::set_sched_idle();  // below the monitor; RLIMIT_NICE keeps it
        isolate::apply_rlimits(spec.rlimits);        // own user ns: NPROC per sandbox
        isolate::drop_all_privileges();              // caps (incl. bounding, ambient), NNP
        // A joined task's init dies with its monitor, and the workload with it (after the
        // credential changes above, which clear the death signal).
        if (holder >= 0) sys::prctl(PR_SET_PDEATHSIG, SIGKILL, "PR_SET_PDEATHSIG, SIGKILL");
        sys::set_umask(022);
        sys::close_range_cloexec_except(3, spec.keep_fds);  // inherited fds never reach CMD
        if (inits_dumpable >= 0)                            // (nothing below reads /proc/self)
            sys::prctl(PR_SET_DUMPABLE, inits_dumpable, "PR_SET_DUMPABLE, init's");
        isolate::install(spec.limits_bpf);
        if (spec.seccomp) isolate::install(spec.bpf);  // last before exec
        exec_command(spec);
    } catch (...) {
        report_and_exit(own.control.get(), std::current_exception());
    }
}

// A step's init: the holder of the workloads' user namespace (pid 2, a child that entered it
// and waits), its pidfd to the keeper, then reaping until the keeper kills it
// (launcher/monitor/step.hpp).
[[noreturn]] void step_init(const ChildSpec& spec, Ends& own) {
    sys::prctl(PR_SET_DUMPABLE, 1, "PR_SET_DUMPABLE, 1");  // see below; the holder inherits it
    UniqueFd ready_r, ready_w;
    sys::pipe(ready_r, ready_w);
    const pid_t holder = sys::fork("the step's holder");
    if (holder == 0) {
        try {
            isolate::enter_nested_userns(spec.ids);
            isolate::drop_all_privileges();
            // The workloads may write its memory (process_vm_writev: same uid, same user
            // namespace, no capability): it is no freer than they are.
            if (spec.seccomp) isolate::install(spec.bpf);
        } catch (...) {
            report_and_exit(own.control.get(), std::current_exception());
        }
        sys::write_all(ready_w.get(), "1", "the holder's pipe");  // in its user namespace now
        ready_w.reset();
        for (;;) ::pause();
    }
    ready_w.reset();
    char byte = 0;
    if (sys::try_read(ready_r.get(), &byte, 1) != 1)
        sys::exit_now(kExitSetupFailed);  // it said why
    own.stdin_relay.reset(), own.stdout_relay.reset(), own.stderr_relay.reset(), own.pty.reset();
    // Tasks join by our pidfd, which takes ptrace read access: dumpable, now that we are set up
    // (above). The workloads still cannot reach us: no capability of our user namespace.
    channel::send(own.control.get(), channel::StepReady{sys::pidfd_open(holder)});
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (;;) {
        sys::wait_signal(set, std::nullopt);
        int status = 0;
        while (sys::reap_any(status) > 0) {}
    }
}

// A named sandbox's workload: pid 2 of its pid namespace (init's first and only fork), while
// it runs. Its pidfd, checked to be init's child after it was opened, so that the pid names
// it and nothing started since.
UniqueFd named_workload() {
    UniqueFd fd = sys::pidfd_open(2);
    isolate::ProcSample s;
    if (!isolate::parse_proc_stat(sys::read_file("/proc/2/stat", 4096), 1, s) || s.ppid != 1 ||
        s.state == 'Z')
        throw SetupError("exec: the sandbox's workload (pid 2) is gone");
    return fd;
}

struct TaskArgs {
    const ChildSpec* spec;
    RunFds* fds;
    int joined_r, joined_w;  // a byte once the monitor has the go-between's Joined (join_main)
};

// A joined task's init, in the sandbox's pid namespace, the monitor's child: the reaper of its
// workload's processes (a subreaper: orphans come to it, not to the step's init).
void task_init(void* arg) {
    const ChildSpec& spec = *static_cast<TaskArgs*>(arg)->spec;
    RunFds& fds = *static_cast<TaskArgs*>(arg)->fds;
    Ends& own = fds.sandbox;
    try {
        die_with_parent(fds.monitor_pidfd);
        // Nothing of ours on the control channel before the go-between's Joined, which the
        // monitor takes first (join_sandbox): a Meter (or a Failure) ahead of it there had the
        // monitor supervise the go-between instead of us.
        const auto* a = static_cast<TaskArgs*>(arg);
        ::close(a->joined_w);
        char byte = 0;
        if (sys::try_read(a->joined_r, &byte, 1) != 1) sys::exit_now(kExitSetupFailed);
        ::close(a->joined_r);
        sys::prctl(PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE, 0");
        sys::prctl(PR_SET_CHILD_SUBREAPER, 1, "PR_SET_CHILD_SUBREAPER, 1");
        if (spec.into_named) fds.join_holder = named_workload();
        // The step's /proc (its tmpfs is the step's, no task's): the monitor measures our tree.
        if (spec.meters) send_meters(own, UniqueFd());
        const pid_t pid = sys::fork("the workload");
        if (pid == 0) workload_main(spec, own, fds.join_holder.get());
        fds.join_holder.reset();
        init_loop(own, pid);
    } catch (...) {
        report_and_exit(own.control.get(), std::current_exception());
    }
}

}  // namespace

[[noreturn]] void join_main(const ChildSpec& spec, RunFds& fds) noexcept {
    Ends& own = fds.sandbox;
    try {
        fds.monitor = {};
        sys::setns(fds.join_init.get(), spec.join_ns, "the sandbox's init");
        fds.join_init.reset();
        UniqueFd joined_r, joined_w;
        sys::pipe(joined_r, joined_w);
        TaskArgs args{&spec, &fds, joined_r.get(), joined_w.get()};
        isolate::Spawned task = isolate::spawn_sibling(task_init, &args);
        channel::send(own.control.get(), channel::Joined{task.pid, std::move(task.pidfd)});
        sys::write_all(joined_w.get(), "1", "the task's init");
        sys::exit_now(0);
    } catch (...) {
        report_and_exit(own.control.get(), std::current_exception());
    }
}

[[noreturn]] void sandbox_init(const ChildSpec& spec, RunFds& fds) noexcept {
    Ends& own = fds.sandbox;
    try {
        fds.monitor = {};  // first: EOF on ours means the monitor died
        if (spec.image_hold >= 0) ::close(spec.image_hold);  // the monitor's alone
        die_with_parent(fds.monitor_pidfd);
        if (spec.new_net) enter_new_net();    // the costliest, while the monitor writes our maps
        const bool bound = wait_for_go(own);  // the monitor wrote our id maps
        sys::prctl(PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE, 0");  // /proc/1/exe stays closed
        isolate::apply_ipc_limits(spec.ipc);  // our IPC namespace's, through the host's /proc
        sys::set_umask(0);
        UniqueFd image =
            spec.fuse_root ? open_fuse_root(spec, fds)
                           : reopen_same(spec.plan.root.rootfs, "ROOTFS", std::move(fds.rootfs), 0);
        if (!spec.image_layers.empty()) image = stack_image(spec, image.get());
        // The layer first, so that the monitor can make the GPU's entries in it while we go on.
        rootfs::RootLayer layer = rootfs::open_root_layer(spec.plan, spec.late_plan, bound);
        open_kept_layers(spec, fds, layer);
        UniqueFd view;
        if (spec.send_view) view = send_root_view(spec, own, image.get(), layer.upper.valid());
        if (spec.late_plan) send_late_dir(own, layer);
        // The monitor's sock_diag socket of our network namespace, under a memory limit it counts.
        UniqueFd diag =
            spec.new_net && spec.dgram_qlen ? isolate::open_net_meter(spec.dgram_qlen) : UniqueFd();
        sys::sethostname(spec.hostname);
        sys::make_rprivate();
        if (layer.upper.valid() && spec.plan.root.mode != rootfs::RootMode::tmpfs)
            image = cover_read_only(spec, image.get(), std::move(view));
        rootfs::RootDraft draft = rootfs::draft_root(spec.plan, image.get(), std::move(layer));
        const std::optional<rootfs::LatePlan> late = receive_late_plan(spec, own);
        const rootfs::MountPlan& plan = late ? late->full : spec.plan;
        const rootfs::LatePlan* with = late ? &*late : nullptr;
        rootfs::NewRoot root =
            rootfs::assemble_root(spec.plan, image.get(), std::move(draft), with);
        rootfs::apply_mount_plan(plan, root);  // fresh /proc while the old root is visible
        rootfs::enter_root(root.mnt.get());
        if (spec.role == ChildSpec::Role::step_init) step_init(spec, own);
        if (spec.meters) send_meters(own, root.tmpfs, std::move(diag), spec.tree_clock);
        // Named: its owner's exec enters us by pidfd, which takes ptrace read access. The
        // workload still cannot reach us: no capability of our user namespace (as step_init).
        if (spec.joinable) sys::prctl(PR_SET_DUMPABLE, 1, "PR_SET_DUMPABLE, 1");
        // The workload shares our memory until its exec: no copy of our page tables, no
        // copy-on-write faults in either of us (isolate/spawn.hpp).
        struct Args {
            const ChildSpec* spec;
            const Ends* own;
            int dumpable;
        } args{&spec, &own, spec.joinable ? 1 : 0};
        init_loop(own, isolate::spawn_until_exec(
                           [](void* p) {
                               const auto* a = static_cast<const Args*>(p);
                               workload_main(*a->spec, *a->own, -1, a->dumpable);
                           },
                           &args));
    } catch (...) {
        report_and_exit(own.control.get(), std::current_exception());
    }
}

}  // namespace gpubox::launcher
