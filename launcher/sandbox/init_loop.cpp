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

// After the workload's end: the zombies reaped, is any process of the sandbox left? Every one
// is a descendant of init (orphans come to the pid namespace's init, or to a joined task's,
// a subreaper), so none is once init has no child; and none can come, but from outside. The
// monitor reads what is left before init's exit kills it, and where nothing is, after.
bool nothing_left() {
    int status = 0;
    pid_t p;
    while ((p = sys::reap_any(status)) > 0) {}
    return p < 0 && errno == ECHILD;
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
            sys::signal_group(workload,
                              sig);  // its group, as a shell would; before setsid() itself
            continue;
        }
        int status = 0;
        for (pid_t p; (p = sys::reap_any(status)) > 0;) {
            if (p != workload) continue;
            const bool alone = nothing_left();
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
