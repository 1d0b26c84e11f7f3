#include "launcher/sandbox/init_loop.hpp"

#include <signal.h>

#include <cerrno>
#include <optional>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/exit_codes.hpp"

namespace gpubox::launcher {
namespace {

sigset_t init_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (int s : forwarded_signals()) sigaddset(&set, s);
    return set;
}

}  // namespace

[[noreturn]] void init_loop(Ends& own, pid_t workload) {
    const sigset_t set = init_signals();
    // Only the workload uses the relays; the monitor must see EOF if the workload fails first.
    own.stdin_relay.reset(), own.stdout_relay.reset(), own.stderr_relay.reset(), own.pty.reset();
    for (;;) {
        const int sig = sys::wait_signal(set, std::nullopt);
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            sys::signal_group(workload, sig);  // its group, as a shell would (or it, before setsid)
            continue;
        }
        int status = 0;
        for (pid_t p; (p = sys::reap_any(status)) > 0;) {
            if (p != workload) continue;
            // Is any process left? Orphans come to init (or a task's, a subreaper): none where
            // it has no child. The monitor's last pass then waits for our exit (Exited::alone).
            int other = 0;
            pid_t left = 0;
            while ((left = sys::reap_any(other)) > 0) {}
            const bool alone = left < 0 && errno == ECHILD;
            // Its peak resident set, and its reaped descendants': the program's, not ours (the
            // monitor's wait4 of init would report the larger of the two).
            channel::send_quietly(own.control.get(),
                                  channel::Exited{status, sys::children_max_rss_kb(), alone});
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
