#include "launcher/pty.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/sys.hpp"
#include "launcher/channel.hpp"

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
    const int flags = ::fcntl(STDIN_FILENO, F_GETFL);
    if (flags < 0 || ::fcntl(STDIN_FILENO, F_SETFL, flags | O_NONBLOCK) < 0) return typed;
    char buf[4096];
    for (int i = 0; i < 64; ++i) {  // a hung-up terminal reads EOF for ever
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0) break;  // EAGAIN: nothing more
        if (n == 0) typed += static_cast<char>(eof);
        else typed.append(buf, static_cast<std::size_t>(n));
    }
    ::fcntl(STDIN_FILENO, F_SETFL, flags);
    return typed;
}

}  // namespace

bool Terminal::prepare(PtySpec& spec, bool output_capped) {
    if (!wanted(::isatty(STDIN_FILENO) == 1, ::isatty(STDOUT_FILENO) == 1, output_capped)) return false;
    spec.stderr_too = ::isatty(STDERR_FILENO) == 1;
    if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &spec.size) < 0) spec.size = {};
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
    if (::fcntl(master_.get(), F_SETFL, O_NONBLOCK) < 0) sys::fail("fcntl(pty, O_NONBLOCK)", errno);
    input_.reset(::fcntl(master_.get(), F_DUPFD_CLOEXEC, 3));  // the stdin relay closes its own
    if (!input_.valid()) sys::fail("fcntl(pty, F_DUPFD_CLOEXEC)", errno);
    termios t{};
    if (::tcgetattr(STDIN_FILENO, &t) < 0) return;
    saved_ = t;
    const std::string typed = take_typeahead(t.c_cc[VEOF]);
    ::cfmakeraw(&t);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &t);
    if (!typed.empty() && ::write(master_.get(), typed.data(), typed.size()) < 0) {
        // best effort: what was typed before the sandbox's terminal existed
    }
}

Terminal::~Terminal() {
    if (saved_) ::tcsetattr(STDIN_FILENO, TCSADRAIN, &*saved_);
}

void Terminal::copy_window_size(int from, int to) {
    winsize ws{};
    if (::ioctl(from, TIOCGWINSZ, &ws) == 0) ::ioctl(to, TIOCSWINSZ, &ws);
}

}  // namespace gpubox::launcher::pty
