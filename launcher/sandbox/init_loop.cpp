#include "launcher/sandbox/init_loop.hpp"

#include <fcntl.h>
#include <signal.h>

#include <algorithm>
#include <optional>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "isolate/usage.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/exit_codes.hpp"

namespace gpubox::launcher {
namespace {

// Without a cgroup, init measures the sandbox (isolate/usage.hpp) and the monitor decides. A pass
// is due every sample_ms, or ten times as long as the last pass took (a sandbox of many
// processes), so that measuring never takes more than a tenth of a CPU. Signals do not put it
// off: it is due by the clock.
class Reporter {
public:
    Reporter(const ChildSpec& spec, int control, int tmpfs) : control_(control) {
        if (spec.sample_ms <= 0) return;
        proc_ = sys::open_at(AT_FDCWD, "/proc", O_PATH | O_DIRECTORY);  // the sandbox's own
        sampler_.emplace(proc_.get(), tmpfs, sys::usable_cpus(), spec.sampled_memory_limit);
        period_ = static_cast<std::uint64_t>(spec.sample_ms) * 1000000ULL;
        due_ = sys::monotonic_ns() + period_;
    }
    // How long init may wait for a signal: until the next pass, or for ever.
    std::optional<std::uint64_t> wait_ns() const {
        if (!sampler_) return std::nullopt;
        const std::uint64_t now = sys::monotonic_ns();
        return due_ > now ? due_ - now : 0;
    }
    void tick() {
        if (sampler_ && sys::monotonic_ns() >= due_) report();
    }
    void report() {
        if (!sampler_) return;
        const std::uint64_t t0 = sys::monotonic_ns();
        const isolate::Usage u = sampler_->sample();
        const std::uint64_t t1 = sys::monotonic_ns();
        due_ = t1 + std::max(period_, 10 * (t1 - t0));
        channel::send_quietly(control_, channel::Sample{u});
    }

private:
    int control_;
    UniqueFd proc_;
    std::optional<isolate::Sampler> sampler_;
    std::uint64_t period_ = 0, due_ = 0;
};

sigset_t init_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (int s : forwarded_signals()) sigaddset(&set, s);
    return set;
}

}  // namespace

[[noreturn]] void init_loop(const ChildSpec& spec, Ends& own, pid_t workload, int tmpfs) {
    const sigset_t set = init_signals();
    // Only the workload uses the relays; the monitor must see EOF if the workload fails first.
    own.stdin_relay.reset(), own.stdout_relay.reset(), own.stderr_relay.reset(), own.pty.reset();
    Reporter reporter(spec, own.control.get(), tmpfs);
    for (;;) {
        const int sig = sys::wait_signal(set, reporter.wait_ns());
        reporter.tick();
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            sys::signal_group(workload,
                              sig);  // its group, as a shell would; before setsid() itself
            continue;
        }
        int status = 0;
        for (pid_t p; (p = sys::reap_any(status)) > 0;) {
            if (p != workload) continue;
            reporter.report();  // the last word: what its files in gpubox's tmpfs still hold, too
            // Its peak resident set, and its reaped descendants': the program's, not ours (the
            // monitor's wait4 of init would report the larger of the two).
            channel::send_quietly(own.control.get(),
                                  channel::Exited{status, sys::children_max_rss_kb()});
            // What is left of its group (a joined task's: the step's sandbox outlives it).
            ::kill(-workload, SIGKILL);
            sys::exit_now(0);
        }
    }
}

const std::vector<int>& forwarded_signals() {
    static const std::vector<int> sigs = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    return sigs;
}

[[noreturn]] void report_and_exit(int control, std::exception_ptr e) noexcept {
    int code = kExitSetupFailed;
    try {
        std::rethrow_exception(e);
    } catch (const ExecError& x) {
        code = x.code;
    } catch (...) {}
    std::string text = describe(e);
    std::string hint = hint_for(e);
    if (!hint.empty()) text += "\n" + hint;
    channel::send_quietly(control, channel::Failure{code, text});
    sys::exit_now(code);
}

}  // namespace gpubox::launcher
