// The workload's side of launcher/pty.hpp: runs in the sandbox.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

#include "common/sys.hpp"
#include "launcher/channel.hpp"
#include "launcher/pty.hpp"

namespace gpubox::launcher::pty {

void enter_new_pty(const PtySpec& spec, UniqueFd sock) {
    UniqueFd master = sys::open_at(AT_FDCWD, "/dev/ptmx", O_RDWR | O_NOCTTY);  // the sandbox's devpts
    int unlock = 0;
    if (::ioctl(master.get(), TIOCSPTLCK, &unlock) < 0) sys::fail("ioctl(\"/dev/ptmx\", TIOCSPTLCK)", errno);
    UniqueFd slave(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!slave.valid()) sys::fail("ioctl(\"/dev/ptmx\", TIOCGPTPEER)", errno);
    if (spec.size.ws_row && ::ioctl(slave.get(), TIOCSWINSZ, &spec.size) < 0) sys::fail("ioctl(pty, TIOCSWINSZ)", errno);
    channel::send(sock.get(), channel::PtyMaster{std::move(master)});
    sock.reset();
    for (int fd = 0; fd <= (spec.stderr_too ? 2 : 1); ++fd) sys::dup2(slave.get(), fd);
    if (::ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0) sys::fail("ioctl(pty, TIOCSCTTY)", errno);
}

}  // namespace gpubox::launcher::pty
