#include "launcher/monitor/supervise.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_set>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/init_loop.hpp"
#include "isolate/crowd.hpp"
#include "isolate/kernel_walk.hpp"
#include "isolate/usage.hpp"
#include "launcher/sandbox/child_main.hpp"
#include "launcher/monitor/pty.hpp"

namespace gpubox::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// With a CPU limit and a cgroup, the monitor reads the cgroup's CPU time this often (ms).
constexpr int kCpuPollMs = 50;

struct Relay {
    int in = -1;
    int out;
    std::optional<std::uint64_t> cap;
    std::uint64_t bytes = 0;
    const char* name;
    KillReason over_cap;  // what passing `cap` is
};

// The caller's stdin, fed into the workload's pipe (see launcher/monitor/stdio.hpp). The pipe's end is
// non-blocking: what the workload has not read yet waits here, at most 64 KiB, and the monitor
// reads the source again only once that is gone.
struct StdinPump {
    int src = STDIN_FILENO;
    int dst = -1;
    char buf[65536];
    std::size_t off = 0, len = 0;

    short wants() const { return len > off ? POLLOUT : POLLIN; }
    int fd() const { return dst < 0 ? -1 : len > off ? dst : src; }
    void step() {
        if (len == off) {
            const ssize_t n = sys::try_read(src, buf, sizeof buf);
            if (n == -EINTR) return;
            if (n <= 0) return stop();  // EOF (or an unreadable stdin): the workload sees EOF
            off = 0, len = static_cast<std::size_t>(n);
        }
        const ssize_t w = sys::try_write(dst, buf + off, len - off);
        if (w > 0) off += static_cast<std::size_t>(w);
        else if (w < 0 && w != -EAGAIN && w != -EINTR) stop();  // EPIPE: it closed its stdin
    }
    void stop() {
        UniqueFd closed(dst);
        dst = -1;
    }
};

// The sandbox measured from outside (isolate/usage.hpp). The next pass comes before the sandbox
// could reach a limit: its memory filling at kFillRate, its CPU with every CPU busy; and before
// kernel memory filling at kKernelFillRate (below) could take it past the footprint bound, 2 x its
// memory limit + 64 MiB, in half the time left. Never sooner than the period (sample_ms), never
// later than kMaxPeriodNs, and at least twice as long as the last pass ran (its CPU time: see
// Monitor::cpu_ns()). An idle sandbox far from its limits costs a pass every 50 ms; under a
// memory limit below about 170 MiB, more often (at 64 MiB, every 23 ms).
//
// Why the footprint's own pace: kernel memory the pass counts by proxy (each open fd charged
// isolate::kFdBytes) fills at the kernel's speed, not at page faults'. 20 processes making pipes,
// filling them, and closing their write ends (test_limits_attacks) were counted at 2 MiB by one
// pass and 51-74 MiB by the next, 50 ms later, the host's memory (measured from outside) growing
// 2.8 GiB/s, past 140 MiB; once, with other tests beside it, 203 MiB held against the bound of 192.
constexpr std::uint64_t kMaxPeriodNs = 50'000'000;
constexpr std::uint64_t kFillRate = 1ULL << 30;  // bytes/s: the rate the overrun bound is for

// Socket buffers fill at memcpy's speed (2-3 GiB/s measured, unix pairs), and kernel memory held
// through fds as fast: kKernelFillRate is the rate the footprint bound is paced for
// (Monitor::footprint_delay). A pass comes at that pace unless its own cost puts it off (twice its
// CPU time: a large sandbox). Then, with a memory limit, the sandbox's unix socket buffers are
// read again between passes (Sampler::resample_sockets: its sockstat, and one dump where it has
// sockets) while it has sockets, and in its first kSockStartNs, before a pass may have seen any:
// at the same pace, no sooner than kSockPeriodNs nor than 25 times the check's own CPU time (many
// sockets), and not where the next pass comes first. A check costs its wakeup, about 0.2 ms on
// the development VM. Measured with the check every 38 ms instead: 169 MiB held once under
// 64 MiB (the bound: 192).
constexpr std::uint64_t kKernelFillRate = 4ULL << 30, kSockPeriodNs = 5'000'000,
                        kSockStartNs = 100'000'000;

// A pass over a crowd (more than isolate::kCrowdPerCpu tasks a CPU) that waited for the CPU
// longer than this and a quarter of its own run: the crowd keeps the monitor waiting (see
// measure()).
constexpr std::uint64_t kStarvedNs = 1'000'000;

// While the monitor holds a crowd to a CPU limit, at most this many of its processes a CPU run at
// once; the rest are stopped (SIGSTOP) and take turns (SIGCONT), those stopped longest first. In
// a run queue the crowd shares with the monitor (a child cpu cgroup), a SCHED_IDLE task that
// waited long enough outranks the monitor and runs up to a tick before it: with 500 a CPU, that
// held the monitor off for 1.4 s; with 100 a CPU none waits that long (docs/limits.md).
constexpr std::size_t kRunnablePerCpu = 100;

// A crowd held to a CPU limit is set apart from the monitor (Monitor::set_apart) once it is more
// than kApartPerCpu tasks a CPU: a fork bomb, not a make -j8, whose dozen tasks weigh nothing
// against the monitor and keep every CPU; it gets them back once it is no crowd. In a run queue it
// shares with the monitor (a child cpu cgroup) the crowd would starve it; as an autogroup of its
// own (the root cpu cgroup) it still shares the monitor's CPU, and whatever holds a pass up (the
// crowd there, the host's other work, a hypervisor) lets it run on every CPU meanwhile: set apart,
// on all but one (a fork bomb in the root cgroup, 42 runs on 2 CPUs: 1.30-1.56 s of CPU with the
// kill's teardown, against 1.45-1.82; docs/limits.md). While set apart, its processes are pinned
// again every kApartEvery passes (a sweep costs about two passes, and goes on kSweepSliceNs a
// pass). Where a crowd may form, the passes come kGrowingPassNs apart in the first kStartingNs (the
// program may not have begun at the first) and while the tasks grow: a fork bomb doubles about
// every millisecond, and the fewer it is when set apart, the sooner that is done (a sweep over the
// 400-1000 processes a pass 10 ms in found took 0.2-1 s of a starved monitor, over the 80-500 found
// at 3-9 ms 5-40 ms).
constexpr unsigned kApartPerCpu = 16;
constexpr std::uint64_t kApartEvery = 32, kGrowingPassNs = 1'000'000, kStartingNs = 10'000'000;
// A sweep that sets a crowd apart goes on for at most this long a pass (isolate::PinSweep).
constexpr std::uint64_t kSweepSliceNs = 5'000'000;

// A crowd running within this much of its CPU limit (with every CPU busy) is measured pass after
// pass, the monitor never sleeping between them: in a run queue the crowd shares, a task that
// wakes waits behind the crowd's SCHED_IDLE tasks that waited long (measured: a pass due 40 ms
// after the last came 123 ms after it, the crowd running 0.16 s of CPU meanwhile), one that stays
// runnable keeps its share. At most this long a run (the kill comes at the limit), and only while
// the crowd runs.
constexpr std::uint64_t kNearLimitNs = 100'000'000;

class Monitor {
public:
    explicit Monitor(const Supervised& s) : s_(s), start_(Clock::now()) {
        sigset_t set;
        sigemptyset(&set);
        for (int sig : forwarded_signals()) sigaddset(&set, sig);
        sigaddset(&set, SIGCHLD);
        sigaddset(&set, SIGWINCH);
        sigfd_ = sys::signalfd(set);
        stdin_.dst = s.stdin_relay;
        relays_[0] = {s.stdout_relay, STDOUT_FILENO,      s.limits.stdout_bytes, 0,
                      "stdout",       KillReason::stdout_};
        relays_[1] = {s.stderr_relay, STDERR_FILENO,      s.limits.stderr_bytes, 0,
                      "stderr",       KillReason::stderr_};
        out_.kill_after = s.kill_after;
        if (s.limits.wall_seconds)
            deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(*s.limits.wall_seconds));
    }

    RunOutcome run() {
        control_ = s_.control;
        while (!exited_) step();
        stdin_.stop();
        rusage ru{};
        sys::wait_rusage(s_.child.pid, out_.init_status, ru);
        out_.wall_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        while (control_ >= 0) read_report();
        if (last_word_after_init_ && sampler_) {
            sampler_->set_ended();  // init reaped: nothing of the sandbox runs
            measure(false);
        }
        for (Relay& r : relays_)
            while (r.in >= 0) relay(r);
        note_late_request();
        finish(ru);
        return out_;
    }

private:
    void kill_for(KillReason reason) {
        if (out_.killed_for != KillReason::none) return;
        out_.killed_for = reason;
        // What the kill ends is counted first: the kernel adds it to nobody's time.
        if (reason != KillReason::cpu_time && reason != KillReason::memory) measure(false);
        if (isolate::cgroup_kill(s_.cgroup)) return;
        if (!s_.task_root) {
            // The sandbox's init first: once it runs, the kernel kills its whole pid namespace
            // at once, forks included; meanwhile each process of it now, not once init has run.
            sys::send_signal(s_.child.pid, SIGKILL);
            if (sampler_) sampler_->kill_all();
            return;
        }
        if (proc_.valid()) kill_task_tree();      // a step task's own tree, leaves first
        sys::send_signal(s_.child.pid, SIGKILL);  // then the task's init
    }

    // Step mode without a cgroup: the task's processes, leaves first, through their /proc
    // directories in the step's /proc (pidfd_send_signal takes one as a pidfd): killed before
    // the task's init, whose death would hand its orphans to the step's init, out of its tree.
    // Again while any is left: one may have forked before its SIGKILL came. Each process's
    // parent is read again through the fd that names it: a pid that died and came back as
    // another task's process since the scan has a parent outside the tree, and is left alone.
    void kill_task_tree() {
        for (int pass = 0; pass < 8; ++pass) {
            const std::vector<pid_t> tree = isolate::task_tree(proc_.get(), s_.task_root);
            if (tree.size() <= 1) return;
            for (std::size_t i = tree.size(); i-- > 1;) {
                const UniqueFd fd(::openat(proc_.get(), std::to_string(tree[i]).c_str(),
                                           O_RDONLY | O_DIRECTORY | O_CLOEXEC));
                if (!fd.valid()) continue;  // gone already
                isolate::ProcSample p;
                if (!isolate::parse_proc_stat(sys::try_read_at(fd.get(), "stat"),
                                              sys::ns_per_clock_tick(), p) ||
                    std::find(tree.begin(), tree.end(), p.ppid) == tree.end())
                    continue;
                ::syscall(SYS_pidfd_send_signal, fd.get(), SIGKILL, nullptr, 0);
            }
        }
    }

    int timeout_ms() const {
        int t = -1;
        auto until = [](Clock::time_point when) {
            return static_cast<int>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now())
                           .count()) +
                   1;
        };
        if (deadline_) t = until(*deadline_);
        if (grace_end_) t = t < 0 ? until(*grace_end_) : std::min(t, until(*grace_end_));
        if (s_.limits.cpu_seconds && s_.cgroup.caps.usable)
            t = t < 0 ? kCpuPollMs : std::min(t, kCpuPollMs);
        if (sampler_ && s_.sample_ms) {
            const std::uint64_t now = sys::monotonic_ns(),
                                next = sock_due_ ? std::min(due_, sock_due_) : due_;
            const int due = next > now ? static_cast<int>((next - now + 999999) / 1000000) : 0;
            t = t < 0 ? due : std::min(t, due);
        }
        return t < 0 ? -1 : std::max(t, 0);
    }

    void step() {
        pollfd fds[7] = {{sigfd_.get(), POLLIN, 0},
                         {s_.child.pidfd.get(), POLLIN, 0},
                         {control_, POLLIN, 0},
                         {relays_[0].in, POLLIN, 0},
                         {relays_[1].in, POLLIN, 0},
                         {stdin_.fd(), stdin_.wants(), 0},
                         {out_.killed_for == KillReason::none ? s_.parent_pidfd : -1, POLLIN, 0}};
        sys::poll(fds, 7, timeout_ms());
        if (fds[0].revents & POLLIN) forward_signal();
        if (fds[2].revents & (POLLIN | POLLHUP)) read_report();
        for (int i = 0; i < 2; ++i)
            if (fds[3 + i].revents & (POLLIN | POLLHUP)) relay(relays_[i]);
        if (fds[5].revents) stdin_.step();
        if (fds[6].revents & POLLIN) kill_for(KillReason::parent_died);
        if (grace_end_ && Clock::now() >= *grace_end_)
            kill_for(KillReason::kill_after), grace_end_.reset();
        if (deadline_ && Clock::now() >= *deadline_) kill_for(KillReason::wall_time);
        if (s_.limits.cpu_seconds && s_.cgroup.caps.usable)
            if (auto us = isolate::cgroup_cpu_usec(s_.cgroup);
                us && *us > *s_.limits.cpu_seconds * 1e6)
                kill_for(KillReason::cpu_time);
        if (sampler_ && s_.sample_ms && sys::monotonic_ns() >= due_ && !exited_) measure(true);
        if (sampler_ && sock_due_ && sys::monotonic_ns() >= sock_due_ && !exited_) check_sockets();
        if (fds[1].revents & POLLIN) exited_ = true;
    }

    // A scheduler's scancel or time limit, ^C, a hangup.
    static bool asks_to_end(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP; }

    void forward_signal() {
        signalfd_siginfo si{};
        if (sys::try_read(sigfd_.get(), &si, sizeof si) != sizeof si || si.ssi_signo == SIGCHLD)
            return;
        if (si.ssi_signo == SIGWINCH)
            return pty::Terminal::copy_window_size(STDIN_FILENO, s_.pty_master);
        const int sig = static_cast<int>(si.ssi_signo);
        sys::send_signal(s_.child.pid, sig);
        // A request to end: the workload has the grace to end itself, then everything in the
        // sandbox is killed.
        if (asks_to_end(sig) && !grace_end_) {
            out_.terminated_by = sig;
            grace_end_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(s_.kill_after));
        }
    }

    // A request to end that reached us only as the sandbox ended is the run's end all the same:
    // a scheduler signals every process of a job, the workload first where it walks the process
    // tree from the leaves (Slurm's proctrack/linuxproc), and a workload that ends of it can be
    // gone before our own signal comes. Said, not forwarded: nothing is left to forward it to.
    void note_late_request() {
        pollfd p{sigfd_.get(), POLLIN, 0};
        while (!out_.terminated_by && ::poll(&p, 1, 0) == 1) {
            signalfd_siginfo si{};
            if (sys::try_read(sigfd_.get(), &si, sizeof si) != sizeof si) return;
            const int sig = static_cast<int>(si.ssi_signo);
            if (asks_to_end(sig)) out_.terminated_by = sig;
        }
    }

    void read_report() {
        std::optional<channel::Frame> f;
        try {
            f = channel::receive(control_);
        } catch (const SetupError&) {
            return;  // cannot come from our own sandbox code: dropped, the run goes on
        }
        if (!f) {
            control_ = -1;
            return;
        }
        if (auto* x = std::get_if<channel::Failure>(&*f); x && !out_.setup_failed)
            out_.setup_failed = true, out_.setup_code = x->code, out_.message = std::move(x->text);
        if (auto* x = std::get_if<channel::Exited>(&*f)) {
            out_.have_status = true, out_.status = x->wait_status, program_rss_kb_ = x->max_rss_kb;
            // The last word: what is left, which init's exit kills, and its files. Where nothing
            // is left (and nothing can join), only the files and socket buffers can still have
            // changed, and they outlive init (the meters' fds hold them): read once init is
            // gone (run()), not beside its exit, which the pass then held up on the same CPU
            // (a sync wakeup's): 0.1-0.25 ms a run on the development VM (bench/README.md).
            if (x->alone && !s_.joinable) last_word_after_init_ = true;
            else measure(false);
        }
        if (auto* x = std::get_if<channel::Meter>(&*f)) on_meter(*x);
    }

    void on_meter(channel::Meter& m) {
        if (s_.cgroup.caps.usable && !s_.sampled_memory_limit) return;  // the cgroup measures
        // A proc instance whose pid 1 is our init: init opened it before the workload ran.
        const auto fs = sys::try_fstatfs(m.proc.get());
        if (proc_.valid() || !fs || fs->f_type != PROC_SUPER_MAGIC) return;
        proc_ = std::move(m.proc);
        tmpfs_ = std::move(m.tmpfs);
        cpus_ = sys::usable_cpus();
        crowd_ = isolate::kCrowdPerCpu * cpus_;
        sampler_.emplace(proc_.get(), tmpfs_.get(), cpus_, s_.sampled_memory_limit);
        if (s_.task_root) sampler_->set_root(s_.task_root);
        if (s_.joinable) sampler_->set_joinable();
        // The workload's CPU counter, which init opened on itself (isolate/tree_clock.hpp).
        clock_ = isolate::TreeClock::adopt(std::move(m.clock), m.clock_error);
        if (clock_.valid()) sampler_->set_clock(&clock_);
        out_.clock_error = clock_.error();
        if (s_.sampled_memory_limit)
            walk_ = std::make_unique<isolate::KernelWalk>(proc_.get(), s_.task_root);
        // A step's task shares the host's network namespace, the monitor's: its sockets are
        // found by the walk and read from a sock_diag socket of the monitor's own.
        if (walk_ && s_.task_root) {
            const int diag = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
            if (diag >= 0)
                walk_->count_host_sockets(UniqueFd(diag), isolate::host_sock_bounds(true));
            else
                log::warn(cat("socket(AF_NETLINK, NETLINK_SOCK_DIAG): ", std::strerror(errno),
                              ": this task's socket buffers are not counted"));
        }
        if (m.sockets.valid()) on_socket_meter(m);
        period_ns_ = static_cast<std::uint64_t>(s_.sample_ms) * 1000000ULL;
        // Where a crowd may form, the first pass comes soon (kGrowingPassNs).
        meters_ns_ = sys::monotonic_ns();
        due_ = meters_ns_ + (s_.crowd_apart ? kGrowingPassNs : period_ns_);
    }

    // The sandbox's socket buffers, counted with its memory (isolate/sock_usage.hpp); a step's
    // task shares its network namespace with the step's other tasks: not counted there.
    void on_socket_meter(channel::Meter& m) {
        if (s_.task_root) return;
        diag_ = std::move(m.sockets);
        sock_bounds_ = isolate::host_sock_bounds();
        sampler_->set_sockets(diag_.get(), sock_bounds_, std::move(m.sockstat),
                              std::move(m.sockstat6));
        if (s_.sampled_memory_limit && s_.sample_ms) {
            sock_start_ = sys::monotonic_ns();
            sock_due_ = sock_start_ + kSockPeriodNs;
        }
    }

    // Between passes: the last pass's memory with the unix socket buffers read again.
    void check_sockets() {
        const std::uint64_t c0 = cpu_ns(), memory = sampler_->resample_sockets();
        sampled_peak_ =
            std::max(sampled_peak_, memory - std::min(memory, sampler_->counted_twice()));
        if (memory > s_.sampled_memory_limit && out_.killed_for == KillReason::none)
            kill_for(KillReason::memory);
        plan_sock_check(memory, cpu_ns() - c0);
    }

    // How soon kernel memory filling at kKernelFillRate could take a sandbox that holds `memory`
    // past the footprint bound (2 x its memory limit + 64 MiB), in half the time left: the
    // other half is for a late wakeup and the kill.
    std::uint64_t footprint_delay(std::uint64_t memory) const {
        const std::uint64_t bound = 2 * s_.sampled_memory_limit + (64ULL << 20);
        const double left = static_cast<double>(bound - std::min(bound, memory)) / 2;
        return static_cast<std::uint64_t>(left * 1e9 / static_cast<double>(kKernelFillRate));
    }

    // When check_sockets() comes next (0: not before the next pass, which reads them too).
    void plan_sock_check(std::uint64_t memory, std::uint64_t cost) {
        const std::uint64_t now = sys::monotonic_ns();
        if (!sock_start_ || (!sampler_->has_sockets() && now - sock_start_ > kSockStartNs)) {
            sock_due_ = 0;
            return;
        }
        sock_due_ = now + std::max({footprint_delay(memory), kSockPeriodNs, 25 * cost});
        if (sock_due_ >= due_) sock_due_ = 0;
    }

    // One pass over the sandbox; `enforce`: hold it against the limits (else only recorded, as
    // the kill or the end of the workload comes anyway).
    void measure(bool enforce) {
        if (!sampler_) return;
        const bool cpu_limit = enforce && s_.limits.cpu_seconds && !s_.cgroup.caps.usable;
        // What a pass costs matters where it is large (next_delay's floor, a crowd's wait): a
        // pass over a few processes is not timed, two clock_gettime calls of an idle pass's six.
        const bool timed = !small_;
        const std::uint64_t t0 = sys::monotonic_ns(), c0 = timed ? cpu_ns() : 0;
        if (walk_) sampler_->set_walk_bytes(walk_->bytes());
        const isolate::Usage u = sampler_->sample(
            cpu_limit ? static_cast<std::uint64_t>(*s_.limits.cpu_seconds * 1e9) : 0, !enforce);
        const std::uint64_t t1 = sys::monotonic_ns(), ran = timed ? cpu_ns() - c0 : 0;
        small_ = u.tasks <= crowd_ && u.processes <= isolate::Sampler::kQuietMax;
        // A task that sleeps among a crowd of runnable ones waits far longer for the CPU each
        // time it wakes than its weight says (Linux 6.18, a child cpu cgroup, 1000 SCHED_IDLE
        // spinners: a task that slept 10 ms between 0.6 ms of work got 1 % of a CPU, one that
        // never slept 45 %). While a crowd keeps the passes waiting, the next comes at once.
        const bool starved = u.tasks > crowd_ && t1 - t0 > ran + ran / 4 + kStarvedNs;
        due_ = t1 + (starved && out_.killed_for == KillReason::none ? 0 : next_delay(u, ran));
        if (s_.sampled_memory_limit && diag_.valid()) plan_sock_check(u.memory_bytes, 0);
        sampled_peak_ = std::max(sampled_peak_, u.memory_bytes - u.counted_twice);
        if (walk_) {  // what the walk found so far may fill before its count stops
            walk_->set_room(s_.sampled_memory_limit -
                            std::min(s_.sampled_memory_limit, u.memory_bytes) + walk_->bytes());
            if (enforce)  // a run shorter than a pass walks none
                walk_->on_pass(u.fds, &sampler_->listed(), u.quiet);
        }
        sampled_sock_peak_ = std::max(sampled_sock_peak_, u.socket_bytes);
        sampled_rss_kb_ = std::max(sampled_rss_kb_, static_cast<long>(u.rss_peak_bytes / 1024));
        sampled_cpu_ns_ = std::max(sampled_cpu_ns_, u.cpu_ns);
        if (!enforce) return;
        if (cpu_limit && u.cpu_ns > *s_.limits.cpu_seconds * 1e9) kill_for(KillReason::cpu_time);
        if (s_.sampled_memory_limit && u.memory_bytes > s_.sampled_memory_limit)
            kill_for(KillReason::memory);
        // (Not in a step's task: the step's other tasks share its pid namespace.)
        if (cpu_limit && s_.crowd_apart && !s_.task_root && out_.killed_for == KillReason::none) {
            if (s_.take_turns) take_turns(u.runnable);
            set_apart(u.tasks);
            // Starting, or growing (init and a program are two tasks): see kApartPerCpu.
            if (apart_ == Apart::no &&
                (t1 < meters_ns_ + kStartingNs || u.tasks > std::max(last_tasks_, 2U)))
                due_ = std::min(due_, t1 + kGrowingPassNs);
        }
        last_tasks_ = u.tasks;
    }

    // A crowd held to a CPU limit (kApartPerCpu): the monitor keeps the CPU it is on, the
    // sandbox the others (isolate/crowd.hpp); again every kApartEvery passes while the crowd
    // lasts, for orphans of a parent that died mid-sweep (its children file was not read). No
    // crowd any more: the sandbox's processes and the monitor get every CPU back. Nothing with
    // one usable CPU. Init: ours, unreaped, its pid held.
    void set_apart(std::uint32_t tasks) {
        if (apart_ == Apart::impossible) return;
        if (apart_ == Apart::yes && tasks <= crowd_) {
            sweep_.reset();
            isolate::pin_tree(s_.child.pid, usable_);  // a few processes
            sys::set_affinity(0, usable_);
            apart_ = Apart::no;
            return;
        }
        if (sweep_ && !sweep_->step(kSweepSliceNs)) return;  // the rest at the next pass
        sweep_.reset();
        if (apart_ == Apart::no && tasks <= kApartPerCpu * cpus_) return;
        if (apart_ == Apart::yes && ++apart_passes_ % kApartEvery) return;
        if (apart_ == Apart::no) {
            usable_ = sys::affinity();
            const int me = sys::current_cpu();
            crowd_cpus_ = isolate::all_but(usable_, me);
            if (!CPU_COUNT(&crowd_cpus_)) {
                apart_ = Apart::impossible;
                return;
            }
            cpu_set_t mine;
            CPU_ZERO(&mine);
            CPU_SET(me, &mine);
            sys::set_affinity(0, mine);
            apart_ = Apart::yes;
        }
        sweep_.emplace(s_.child.pid, crowd_cpus_);
        if (sweep_->step(kSweepSliceNs)) sweep_.reset();
    }

    // The crowd's turns (kRunnablePerCpu): the stopped ones run first, then the runnable ones
    // this pass found, up to the cap; the rest stop. Each through its /proc directory (a pid of
    // the sandbox's own namespace: whatever it names now is the sandbox's). A process stopped
    // runs to take the stop: one a pass finds runnable again meanwhile is stopped once, waits once.
    void take_turns(const std::vector<pid_t>& runnable) {
        const std::size_t cap = kRunnablePerCpu * cpus_;
        if (runnable.size() <= cap && waiting_.empty()) return;
        std::size_t running = 0;
        std::deque<pid_t> still;
        std::unordered_set<pid_t> stopped;
        for (const pid_t w : waiting_)
            if (running >= cap) still.push_back(w), stopped.insert(w);
            else if (isolate::signal_process(proc_.get(), w, SIGCONT)) ++running;
        for (const pid_t r : runnable)
            if (stopped.contains(r)) continue;
            else if (running < cap) ++running;
            else if (isolate::signal_process(proc_.get(), r, SIGSTOP))
                still.push_back(r), stopped.insert(r);
        waiting_ = std::move(still);
    }

    // The monitor's own CPU time so far. What a pass costs is this, not its wall time: a pass
    // over a crowd waits for the CPU far longer than it runs, and putting the next one off by
    // its wall time would give the crowd that long again.
    static std::uint64_t cpu_ns() {
        timespec t{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);  // cannot fail for this clock
        return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL +
               static_cast<std::uint64_t>(t.tv_nsec);
    }

    // Never sooner than the period; otherwise a pass costs the monitor at most a third of its
    // time (2 x its CPU apart), except while the workload runs toward its CPU limit: there what
    // the CPUs run between the crossing and the pass that sees it is the overrun, so the pass
    // comes when the limit could be reached with every CPU busy, however costly (a crowd of 1000:
    // 17 ms of the monitor's CPU a pass, which would otherwise put the next 34 ms off).
    std::uint64_t next_delay(const isolate::Usage& u, std::uint64_t cost) {
        std::uint64_t d = kMaxPeriodNs, cpu_left = kMaxPeriodNs;
        if (s_.sampled_memory_limit) {
            const std::uint64_t room =
                s_.sampled_memory_limit - std::min(s_.sampled_memory_limit, u.memory_bytes);
            d = std::min(d, static_cast<std::uint64_t>(static_cast<double>(room) * 1e9 /
                                                       static_cast<double>(kFillRate)));
            d = std::min(d, footprint_delay(u.memory_bytes));
        }
        if (s_.limits.cpu_seconds && !s_.cgroup.caps.usable) {
            const auto limit = static_cast<std::uint64_t>(*s_.limits.cpu_seconds * 1e9);
            const std::uint64_t left = (limit - std::min(limit, u.cpu_ns)) / cpus_;
            d = std::min(d, left);
            const bool ran = u.cpu_ns > last_cpu_ns_;  // since the last pass
            last_cpu_ns_ = u.cpu_ns;
            if (ran) cpu_left = left;
            // A crowd near its limit: the monitor does not sleep (see kNearLimitNs).
            if (ran && u.tasks > crowd_ && left < kNearLimitNs) return 0;
            // Children the kernel reaps are charged the time between passes: keep it short.
            if (sampler_->reaping()) d = 0;
        }
        return std::min(
            {kMaxPeriodNs, std::max({d, period_ns_, 2 * cost}), std::max(cpu_left, period_ns_)});
    }

    // Stream at most 64 KiB at a time: the monitor's memory does not grow with the output.
    void relay(Relay& r) {
        char buf[65536];
        const ssize_t n = sys::try_read(r.in, buf, sizeof buf);
        if (n == -EINTR || n == -EAGAIN) return;  // EAGAIN: a pty's master, non-blocking
        if (n <= 0) {
            UniqueFd closed(r.in);
            r.in = -1;
            return;
        }
        std::size_t keep = static_cast<std::size_t>(n);
        if (r.cap && r.bytes + keep > *r.cap) {
            keep = static_cast<std::size_t>(*r.cap - std::min(*r.cap, r.bytes));
            kill_for(r.over_cap);
        }
        r.bytes += static_cast<std::uint64_t>(n);
        for (std::size_t off = 0; off < keep;) {
            const ssize_t w = sys::try_write(r.out, buf + off, keep - off);
            if (w == -EINTR) continue;
            if (w <= 0) break;  // the reader went away: keep draining, drop the rest
            off += static_cast<std::size_t>(w);
        }
    }

    void finish(const rusage& ru) {
        auto secs = [](const timeval& t) {
            return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
        };
        out_.cpu_seconds = std::max(secs(ru.ru_utime) + secs(ru.ru_stime),
                                    static_cast<double>(sampled_cpu_ns_) / 1e9);
        // The program's peak resident set (isolate's max-rss): what init reports of its
        // processes, or the largest VmHWM its samples saw. init's own rusage (the monitor's
        // wait4) holds init's resident set too, which is gpubox's; it is the last resort, for a
        // sandbox killed before init reported and never sampled.
        out_.max_rss_kb = std::max(program_rss_kb_, sampled_rss_kb_);
        if (!out_.max_rss_kb) out_.max_rss_kb = ru.ru_maxrss;
        out_.csw_voluntary = ru.ru_nvcsw;
        out_.csw_forced = ru.ru_nivcsw;
        rusage self{};
        ::getrusage(RUSAGE_SELF, &self);
        out_.monitor_cpu_seconds = secs(self.ru_utime) + secs(self.ru_stime);
        if (s_.cgroup.caps.usable) {
            out_.cgroup = s_.cgroup.path;
            if (auto us = isolate::cgroup_cpu_usec(s_.cgroup))
                out_.cpu_seconds = static_cast<double>(*us) / 1e6;
        }
        if (s_.cgroup.caps.memory) {
            out_.memory_peak_bytes = isolate::cgroup_memory_peak(s_.cgroup);
            out_.memory_peak_cgroup = out_.memory_peak_bytes.has_value();
            out_.oom_killed = isolate::cgroup_oom_killed(s_.cgroup);
        } else if (sampled_peak_ > 0) {
            out_.memory_peak_bytes = sampled_peak_;
        }
        if (diag_.valid() && !s_.cgroup.caps.memory) out_.socket_peak_bytes = sampled_sock_peak_;
    }

    const Supervised& s_;
    Clock::time_point start_;
    std::optional<Clock::time_point> deadline_;
    std::optional<Clock::time_point> grace_end_;  // set by the first SIGTERM, SIGINT or SIGHUP
    UniqueFd sigfd_;
    int control_ = -1;
    Relay relays_[2];
    StdinPump stdin_;
    bool exited_ = false;
    bool last_word_after_init_ = false;  // see read_report()
    std::uint64_t sampled_peak_ = 0, sampled_sock_peak_ = 0;
    long program_rss_kb_ = 0, sampled_rss_kb_ = 0;  // see finish()
    std::uint64_t sampled_cpu_ns_ = 0;
    UniqueFd proc_, tmpfs_, diag_;  // channel::Meter's
    isolate::TreeClock clock_;      // channel::Meter's too: the sampler reads it
    isolate::SockBounds sock_bounds_;
    std::optional<isolate::Sampler> sampler_;
    std::unique_ptr<isolate::KernelWalk>
        walk_;  // epoll watches, mappings; its thread reads proc_: stops first
    std::uint64_t period_ns_ = 0, due_ = 0;
    std::uint64_t last_cpu_ns_ = 0;                // the CPU the last pass found (next_delay())
    std::uint64_t sock_start_ = 0, sock_due_ = 0;  // check_sockets(): since, next (0: none)
    unsigned cpus_ = 1;
    std::deque<pid_t> waiting_;                                   // take_turns()'s stopped, in turn
    enum class Apart { no, yes, impossible } apart_ = Apart::no;  // set_apart()
    std::uint64_t apart_passes_ = 0;
    cpu_set_t crowd_cpus_{}, usable_{};       // set apart: the crowd's CPUs; everyone's before
    std::uint32_t last_tasks_ = 0;            // the last pass's
    std::optional<isolate::PinSweep> sweep_;  // set_apart()'s, a slice a pass
    std::uint64_t meters_ns_ = 0;             // when the meters came: the workload's start
    unsigned crowd_ = 0;  // tasks: past this many, a pass kept waiting is followed at once
    bool small_ = false;  // the last pass found a few processes: the next is not timed
    RunOutcome out_;
};

}  // namespace

RunOutcome supervise(const Supervised& s) { return Monitor(s).run(); }

}  // namespace gpubox::launcher
