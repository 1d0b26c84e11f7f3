// The workload's side of launcher/monitor/pty.hpp: runs in the sandbox.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/sys.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/pty_open.hpp"

namespace gpubox::launcher::pty {

void enter_new_pty(const PtySpec& spec, int sock) {
    UniqueFd master =
        sys::open_at(AT_FDCWD, "/dev/ptmx", O_RDWR | O_NOCTTY);  // the sandbox's devpts
    int unlock = 0;
    sys::ioctl(master.get(), TIOCSPTLCK, &unlock, "ioctl(\"/dev/ptmx\", TIOCSPTLCK)");
    UniqueFd slave(sys::ioctl(master.get(), TIOCGPTPEER, long{O_RDWR | O_NOCTTY | O_CLOEXEC},
                              "ioctl(\"/dev/ptmx\", TIOCGPTPEER)"));
    if (spec.size.ws_row)
        sys::ioctl(slave.get(), TIOCSWINSZ, const_cast<winsize*>(&spec.size),
                   "ioctl(pty, TIOCSWINSZ)");
    channel::send(sock, channel::PtyMaster{std::move(master)});
    ::close(sock);  // ours; init's copy is its own
    for (int fd = 0; fd <= (spec.stderr_too ? 2 : 1); ++fd) sys::dup2(slave.get(), fd);
    sys::ioctl(STDIN_FILENO, TIOCSCTTY, 0L, "ioctl(pty, TIOCSCTTY)");
}

}  // namespace gpubox::launcher::pty
