#pragma once
// The workload's side of an interactive run's pty (launcher/monitor/pty.hpp: why, and the
// monitor's side).
#include <sys/ioctl.h>

#include "common/unique_fd.hpp"

namespace gpubox::launcher::pty {

// With a pty, the run's fds hold a socket pair (Ends::pty) over which the workload sends the
// master as a channel::PtyMaster frame.
struct PtySpec {
    bool stderr_too = false;  // fd 2 is the caller's terminal too, so it becomes the pty as well
    winsize size{};           // the caller's window size when the run starts
};

// [workload, after setsid()] Opens a pty in the sandbox's devpts, sends the master over
// `sock` (then closed: our fd of init's object, whose memory the workload may share), and makes
// the slave fds 0 and 1 (and 2) and the controlling terminal.
void enter_new_pty(const PtySpec& spec, int sock);

}  // namespace gpubox::launcher::pty
