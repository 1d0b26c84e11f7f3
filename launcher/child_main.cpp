// The sandbox side of gpubox, in the order it happens. Everything here runs after clone() in the
// new namespaces; everything it uses was decided by the monitor (ChildSpec).
#include "launcher/child_main.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "isolate/caps.hpp"
#include "isolate/spawn.hpp"
#include "isolate/usage.hpp"
#include "launcher/exit_codes.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/plan.hpp"
#include "rootfs/wire.hpp"

namespace gpubox::launcher {
namespace {

void die_with_parent(int parent_pidfd) {
    sys::prctl(PR_SET_PDEATHSIG, SIGKILL, "PR_SET_PDEATHSIG, SIGKILL");
    pollfd p{parent_pidfd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) ::_exit(kExitSetupFailed);  // the monitor died before we armed it
}

void wait_for_go(int go_fd) {
    char c = 0;
    ssize_t n;
    do n = ::read(go_fd, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(kExitSetupFailed);  // the monitor gave up (and reported why)
}

// The monitor's fd belongs to its mount namespace, where nothing can be mounted from here: open
// ROOTFS again in ours, and insist it is the directory the monitor checked.
UniqueFd reopen_rootfs(const ChildSpec& spec) {
    UniqueFd fd = sys::open_at(AT_FDCWD, spec.plan.root.rootfs, O_PATH | O_DIRECTORY);
    struct stat a = sys::fstat(fd.get(), spec.plan.root.rootfs);
    struct stat b = sys::fstat(spec.rootfs_fd, spec.plan.root.rootfs);
    if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        sys::fail(cat("open(", quote(spec.plan.root.rootfs), "): ROOTFS was replaced during start-up"), ESTALE);
    ::close(spec.rootfs_fd);
    return fd;
}

// The plan grown by the GPU's ops, which the monitor planned (and made the entries of, in our
// layer's late directory) while we set up; they go where the plan keeps device ops, before the
// user's mounts.
rootfs::LatePlan read_device_ops(const ChildSpec& spec) {
    const std::string bytes = sys::read_all(spec.device_fd, "device plan socket");
    ::close(spec.device_fd);
    // The monitor kept us off its CPU while it planned them (see keep_off_my_cpu): from here on,
    // the user's CPUs, which the workload inherits.
    if (CPU_COUNT(&spec.cpus) > 0) ::sched_setaffinity(0, sizeof spec.cpus, &spec.cpus);
    if (bytes.empty()) ::_exit(kExitSetupFailed);  // the monitor could not plan them, and reports why
    rootfs::LatePlan late;
    late.full = rootfs::with_device_ops(spec.plan, rootfs::decode_ops(bytes, &late.prepared));
    return late;
}

[[noreturn]] void report_and_exit(const ChildSpec& spec, std::exception_ptr e) noexcept {
    int code = kExitSetupFailed;
    try {
        std::rethrow_exception(e);
    } catch (const ExecError& x) {
        code = x.code;
    } catch (...) {
    }
    std::string text = describe(e);
    std::string hint = hint_for(e);
    if (!hint.empty()) text += "\n" + hint;
    isolate::send_message(spec.report_fd, {isolate::MsgType::error, code, text});
    ::_exit(code);
}

[[noreturn]] void exec_command(const ChildSpec& spec) {
    std::vector<char*> argv, envp;
    for (auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    for (auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    int first_error = ENOENT;
    for (const std::string& path : spec.exec_candidates) {
        ::execve(path.c_str(), argv.data(), envp.data());
        if (errno != ENOENT && errno != ENOTDIR && first_error == ENOENT) first_error = errno;
    }
    const int code = first_error == ENOENT ? kExitNotFound : kExitCannotExec;
    throw ExecError(cat("execve(", quote(spec.argv[0]), "): ", std::strerror(first_error),
                        code == kExitNotFound ? " (searched the sandbox's PATH)" : ""),
                    code);
}

// The workload: a child of init, so it is never pid 1 and keeps ordinary signal semantics.
[[noreturn]] void workload_main(const ChildSpec& spec) noexcept {
    try {
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);  // the monitor ignores it while relaying output
        if (spec.stdin_fd >= 0 && ::dup2(spec.stdin_fd, STDIN_FILENO) < 0) sys::fail("dup2(stdin relay)", errno);
        if (spec.stdout_fd >= 0 && ::dup2(spec.stdout_fd, STDOUT_FILENO) < 0) sys::fail("dup2(stdout relay)", errno);
        if (spec.stderr_fd >= 0 && ::dup2(spec.stderr_fd, STDERR_FILENO) < 0) sys::fail("dup2(stderr relay)", errno);
        if (::setsid() < 0) sys::fail("setsid()", errno);  // no controlling tty: no TIOCSTI
        if (spec.pty.sock >= 0) pty::enter_new_pty(spec.pty);  // but its own pty, when the caller has one
        sys::prctl(PR_SET_DUMPABLE, 1, "PR_SET_DUMPABLE, 1");  // init's 0 would lock its /proc/self
        isolate::enter_nested_userns(spec.ids);            // see its own uid; no caps over mounts
        sys::chdir(spec.workdir);
        isolate::apply_rlimits(spec.rlimits);              // in its own user ns: NPROC is per sandbox
        isolate::drop_all_privileges();                    // caps (incl. bounding, ambient), NNP
        ::umask(022);
        sys::close_range_cloexec(3);                       // inherited fds never reach CMD
        if (spec.seccomp) isolate::install(isolate::receive_bpf(spec.seccomp_fd));  // last before exec
        exec_command(spec);
    } catch (...) {
        report_and_exit(spec, std::current_exception());
    }
}

std::uint64_t monotonic_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(t.tv_nsec);
}

// Without a cgroup, init measures the sandbox (isolate/usage.hpp) and the monitor decides. A pass
// is due every sample_ms, or ten times as long as the last pass took (a sandbox of many
// processes), so that measuring never takes more than a tenth of a CPU. Signals do not put it
// off: it is due by the clock.
class Reporter {
public:
    Reporter(const ChildSpec& spec, int tmpfs) : spec_(spec) {
        if (spec.sample_ms <= 0) return;
        cpu_set_t cpus;
        const unsigned n = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? static_cast<unsigned>(CPU_COUNT(&cpus)) : 1;
        proc_ = sys::open_at(AT_FDCWD, "/proc", O_PATH | O_DIRECTORY);  // the sandbox's own
        sampler_.emplace(proc_.get(), tmpfs, n, spec.sampled_memory_limit);
        period_ = static_cast<std::uint64_t>(spec.sample_ms) * 1000000ULL;
        due_ = monotonic_ns() + period_;
    }
    // How long init may wait for a signal: until the next pass, or for ever.
    std::optional<timespec> wait() const {
        if (!sampler_) return std::nullopt;
        const std::uint64_t now = monotonic_ns(), left = due_ > now ? due_ - now : 0;
        return timespec{static_cast<time_t>(left / 1000000000ULL), static_cast<long>(left % 1000000000ULL)};
    }
    void tick() {
        if (sampler_ && monotonic_ns() >= due_) report();
    }
    void report() {
        if (!sampler_) return;
        const std::uint64_t t0 = monotonic_ns();
        const isolate::Usage u = sampler_->sample();
        const std::uint64_t t1 = monotonic_ns();
        due_ = t1 + std::max(period_, 10 * (t1 - t0));
        isolate::send_message(spec_.report_fd, {isolate::MsgType::usage, 0,
                                                std::string(reinterpret_cast<const char*>(&u), sizeof u)});
    }

private:
    const ChildSpec& spec_;
    UniqueFd proc_;
    std::optional<isolate::Sampler> sampler_;
    std::uint64_t period_ = 0, due_ = 0;
};

// pid 1: reap everything, forward signals to the workload, report its status, exit (which
// makes the kernel kill whatever else is left in the pid namespace).
[[noreturn]] void init_loop(const ChildSpec& spec, pid_t workload, int tmpfs) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (int s : forwarded_signals()) sigaddset(&set, s);
    if (spec.stdin_fd >= 0) ::close(spec.stdin_fd);    // only the workload uses the relays
    if (spec.stdout_fd >= 0) ::close(spec.stdout_fd);
    if (spec.stderr_fd >= 0) ::close(spec.stderr_fd);
    if (spec.pty.sock >= 0) ::close(spec.pty.sock);     // the monitor must see EOF if the workload fails first
    Reporter reporter(spec, tmpfs);
    for (;;) {
        siginfo_t info{};
        const std::optional<timespec> wait = reporter.wait();
        const int sig = wait ? ::sigtimedwait(&set, &info, &*wait) : ::sigwaitinfo(&set, &info);
        reporter.tick();
        if (sig < 0) continue;
        if (info.si_signo != SIGCHLD) {
            // Its process group, as a shell would; before its setsid() the pid alone.
            if (::kill(-workload, info.si_signo) < 0) ::kill(workload, info.si_signo);
            continue;
        }
        int status = 0;
        for (pid_t p; (p = ::waitpid(-1, &status, WNOHANG)) > 0;) {
            if (p != workload) continue;
            reporter.report();  // the last word: what its files in gpubox's tmpfs still hold, too
            isolate::send_message(spec.report_fd, {isolate::MsgType::status, status, {}});
            ::_exit(0);
        }
    }
}

}  // namespace

const std::vector<int>& forwarded_signals() {
    static const std::vector<int> sigs = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    return sigs;
}

[[noreturn]] void sandbox_init(const ChildSpec& spec) noexcept {
    try {
        for (int fd : spec.monitor_fds) ::close(fd);
        die_with_parent(spec.parent_pidfd);
        wait_for_go(spec.go_fd);                          // the monitor wrote our id maps
        sys::prctl(PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE, 0");  // /proc/1/exe stays closed
        isolate::apply_ipc_limits(spec.ipc);              // our IPC namespace's, through the host's /proc
        ::umask(0);
        // The layer first, so that the monitor can make the GPU's entries in it while we go on.
        const bool late_ops = spec.device_fd >= 0;
        rootfs::RootLayer layer = rootfs::open_root_layer(spec.plan, late_ops);
        if (late_ops) sys::send_fd(spec.device_fd, layer.late.get(), "device plan socket");
        if (spec.new_net) sys::unshare(CLONE_NEWNET);     // owned by our user namespace, as a clone flag would be
        if (spec.new_net) sys::set_loopback_up();         // before the wait for the GPU's ops, if any
        sys::sethostname(spec.hostname);
        sys::make_rprivate();
        UniqueFd image = reopen_rootfs(spec);
        rootfs::LatePlan late_plan;
        rootfs::LateOps late;
        if (late_ops) late = [&]() -> const rootfs::LatePlan& { return late_plan = read_device_ops(spec); };
        rootfs::NewRoot root = rootfs::assemble_root(spec.plan, image.get(), std::move(layer), late);
        rootfs::apply_mount_plan(late ? late_plan.full : spec.plan, root);  // fresh /proc while the old root is visible
        rootfs::enter_root(root.mnt.get());
        pid_t pid = ::fork();
        if (pid < 0) sys::fail("fork()", errno);
        if (pid == 0) workload_main(spec);
        init_loop(spec, pid, root.tmpfs.get());
    } catch (...) {
        report_and_exit(spec, std::current_exception());
    }
}

}  // namespace gpubox::launcher
