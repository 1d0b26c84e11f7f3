#pragma once
// An interactive workload's terminal. When the caller's stdin and stdout are terminals (and no
// output cap asks the monitor to count output), the workload gets a pty of its own, made in the
// sandbox's devpts, instead of the caller's terminal:
// - the caller's terminal is a host file the workload would own (it runs as the caller): it
//   could chmod it, and with it as controlling terminal push input into the caller's shell
//   (TIOCSTI; blocked by seccomp today, but only for the syscall's native ABI), or keep it
//   open after gpubox exits;
// - the workload gets what an interactive program needs: a controlling terminal after setsid(),
//   so `sh -i` has job control, and `tty` names /dev/pts/N in the sandbox's own devpts (a host
//   pty's path would not resolve inside).
// The workload opens the pty (as runc's console socket does) and sends the master to the monitor,
// which relays it to the caller's terminal (raw mode, restored at exit) through its stdin and
// stdout relays, and passes the caller's window size on at start and on SIGWINCH (TIOCSWINSZ).
#include <sys/ioctl.h>
#include <termios.h>

#include <optional>

#include "common/unique_fd.hpp"
#include "launcher/sandbox/pty_open.hpp"

namespace gpubox::launcher::pty {

// Pure: whether a run gets a pty of its own.
bool wanted(bool stdin_tty, bool stdout_tty, bool output_capped);

// [monitor] The caller's terminal while the sandbox runs.
class Terminal {
public:
    Terminal() = default;
    Terminal(const Terminal&) = delete;
    Terminal& operator=(const Terminal&) = delete;
    ~Terminal();  // the caller's terminal settings come back

    // Before clone(): whether a pty is wanted (then the run makes the socket pair), filling `spec`.
    bool prepare(PtySpec& spec, bool output_capped);
    // Waits on `sock` (the monitor's end; none: no pty) for the master (none: the sandbox failed
    // before, and reports why), then puts the caller's terminal in raw mode: the pty's line
    // discipline does the rest.
    void attach(UniqueFd sock);
    // The relays' ends, for the monitor's loop to own (it closes them at EOF); -1 without a pty.
    int take_input() { return input_.release(); }    // written with what the caller types
    int take_output() { return master_.release(); }  // read for what the workload prints
    int master() const { return master_fd_; }
    // SIGWINCH: the caller's window size, passed on to the pty.
    static void copy_window_size(int from, int to);

private:
    UniqueFd master_, input_;
    int master_fd_ = -1;
    std::optional<termios> saved_;
};

}  // namespace gpubox::launcher::pty
