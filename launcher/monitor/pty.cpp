#include "launcher/monitor/pty.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/sys.hpp"
#include "launcher/sandbox/channel.hpp"

namespace gpubox::launcher::pty {

bool wanted(bool stdin_tty, bool stdout_tty, bool output_capped) {
    return stdin_tty && stdout_tty && !output_capped;
}

namespace {

// What the caller typed while the terminal was still in canonical mode, as bytes for the pty.
// Switching to raw mode would turn a pending end-of-file (^D, stored as a NUL by the kernel's
// line discipline) into a NUL byte: read it here instead, line by line, an EOF as `eof`.
std::string take_typeahead(cc_t eof) {
    std::string typed;
    const int flags = sys::file_flags(STDIN_FILENO);
    if (flags < 0 || sys::set_file_flags(STDIN_FILENO, flags | O_NONBLOCK) < 0) return typed;
    char buf[4096];
    for (int i = 0; i < 64; ++i) {  // a hung-up terminal reads EOF for ever
        const ssize_t n = sys::try_read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0) break;  // EAGAIN: nothing more
        if (n == 0) typed += static_cast<char>(eof);
        else typed.append(buf, static_cast<std::size_t>(n));
    }
    sys::set_file_flags(STDIN_FILENO, flags);
    return typed;
}

}  // namespace

bool Terminal::prepare(PtySpec& spec, bool output_capped) {
    if (!wanted(sys::is_terminal(STDIN_FILENO), sys::is_terminal(STDOUT_FILENO), output_capped))
        return false;
    spec.stderr_too = sys::is_terminal(STDERR_FILENO);
    if (sys::try_ioctl(STDIN_FILENO, TIOCGWINSZ, &spec.size) < 0) spec.size = {};
    return true;
}

void Terminal::attach(UniqueFd sock) {
    if (!sock.valid()) return;
    std::optional<channel::Frame> got = channel::receive(sock.get());
    sock.reset();
    if (!got || !std::holds_alternative<channel::PtyMaster>(*got)) return;
    master_ = std::move(std::get<channel::PtyMaster>(*got).master);
    master_fd_ = master_.get();
    // Non-blocking: a workload that does not read its terminal stalls nothing in the monitor.
    sys::set_nonblocking(master_.get(), "pty");
    input_ = sys::dup_cloexec(master_.get());  // the stdin relay closes its own
    termios t{};
    if (!sys::terminal_attrs(STDIN_FILENO, t)) return;
    saved_ = t;
    const std::string typed = take_typeahead(t.c_cc[VEOF]);
    ::cfmakeraw(&t);
    sys::set_terminal_attrs(STDIN_FILENO, TCSANOW, t);
    // Best effort: what was typed before the sandbox's terminal existed.
    if (!typed.empty()) sys::try_write(master_.get(), typed.data(), typed.size());
}

Terminal::~Terminal() {
    if (saved_) sys::set_terminal_attrs(STDIN_FILENO, TCSADRAIN, *saved_);
}

void Terminal::copy_window_size(int from, int to) {
    winsize ws{};
    if (sys::try_ioctl(from, TIOCGWINSZ, &ws) == 0) sys::try_ioctl(to, TIOCSWINSZ, &ws);
}

}  // namespace gpubox::launcher::pty
