// The wrappers for processes, signals and the frames of the control channel (see sys.hpp).
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::sys {
namespace {

// A msghdr over `body`, with room for kMaxFrameFds fds beside it (always, to receive).
struct FrameMsg {
    iovec iov;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFrameFds)] = {};
    msghdr msg{};
    FrameMsg(void* data, std::size_t len, std::size_t fds) : iov{data, len} {
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (!fds) return;
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds);
    }
    FrameMsg(const FrameMsg&) = delete;  // points into itself
    FrameMsg& operator=(const FrameMsg&) = delete;
};

ssize_t retry_eintr(auto call) {
    ssize_t n;
    do n = call();
    while (n < 0 && errno == EINTR);
    return n;
}

}  // namespace

void send_frame(int sock, std::string_view bytes, std::span<const int> fds,
                const std::string& what) {
    if (fds.size() > kMaxFrameFds) fail(cat("sendmsg(", what, "): ", fds.size(), " fds"), E2BIG);
    FrameMsg m(const_cast<char*>(bytes.data()), bytes.size(), fds.size());
    if (!fds.empty()) {
        cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = retry_eintr([&] { return ::sendmsg(sock, &m.msg, MSG_NOSIGNAL); });
    if (n < 0)
        fail(cat("sendmsg(", what, ", ", bytes.size(), " bytes",
                 fds.empty() ? ")" : cat(", SCM_RIGHTS of ", fds.size(), ")")),
             errno);
}

void send_frame(int sock, std::string_view bytes, int fd, const std::string& what) {
    send_frame(sock, bytes, fd >= 0 ? std::span<const int>(&fd, 1) : std::span<const int>(), what);
}

int peek_frame(int sock, const std::string& what) {
    unsigned char first = 0;
    const ssize_t n = retry_eintr([&] { return ::recv(sock, &first, 1, MSG_PEEK); });
    if (n < 0) fail(cat("recv(", what, ", MSG_PEEK)"), errno);
    return n == 0 ? -1 : first;
}

bool recv_frame(int sock, std::string& bytes, std::vector<UniqueFd>& fds, const std::string& what) {
    // A frame is one datagram: its size first (MSG_TRUNC answers it without taking it).
    const ssize_t size =
        retry_eintr([&] { return ::recv(sock, nullptr, 0, MSG_PEEK | MSG_TRUNC); });
    if (size < 0) fail(cat("recv(", what, ", MSG_PEEK|MSG_TRUNC)"), errno);
    bytes.assign(static_cast<std::size_t>(size), '\0');
    FrameMsg m(bytes.data(), bytes.size(), kMaxFrameFds);
    const ssize_t n = retry_eintr([&] { return ::recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC); });
    if (n < 0) fail(cat("recvmsg(", what, ")"), errno);
    fds.clear();
    for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < k; ++i) {
            int got;
            std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            fds.emplace_back(got);
        }
    }
    bytes.resize(static_cast<std::size_t>(n));
    return n > 0;
}

bool recv_frame(int sock, std::string& bytes, UniqueFd& fd, const std::string& what) {
    std::vector<UniqueFd> fds;
    const bool got = recv_frame(sock, bytes, fds, what);
    fd = fds.empty() ? UniqueFd() : std::move(fds.front());  // any more are closed
    return got;
}

void set_nonblocking(int fd, const std::string& what) {
    if (::fcntl(fd, F_SETFL, O_NONBLOCK) < 0) fail(cat("fcntl(", what, ", O_NONBLOCK)"), errno);
}

int ioctl(int fd, unsigned long request, void* arg, const std::string& what) {
    const int rc = ::ioctl(fd, request, arg);
    if (rc < 0) fail(what, errno);
    return rc;
}

int ioctl(int fd, unsigned long request, long arg, const std::string& what) {
    const int rc = ::ioctl(fd, request, arg);
    if (rc < 0) fail(what, errno);
    return rc;
}

int try_ioctl(int fd, unsigned long request, void* arg) {
    const int rc = ::ioctl(fd, request, arg);
    return rc < 0 ? -errno : rc;
}

bool is_terminal(int fd) { return ::isatty(fd) == 1; }

int file_flags(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    return flags < 0 ? -errno : flags;
}

int set_file_flags(int fd, int flags) { return ::fcntl(fd, F_SETFL, flags) < 0 ? -errno : 0; }

bool terminal_attrs(int fd, termios& t) { return ::tcgetattr(fd, &t) == 0; }

void set_terminal_attrs(int fd, int when, const termios& t) { ::tcsetattr(fd, when, &t); }

pid_t clone3(void* args, std::size_t size, int ns_flags) {
    const long pid = ::syscall(SYS_clone3, args, size);
    if (pid < 0) fail(cat("clone3(", ns_flags, ")"), errno);
    return static_cast<pid_t>(pid);
}

void setsid() {
    if (::setsid() < 0) fail("setsid()", errno);
}

void exit_now(int code) { ::_exit(code); }

int try_execve(const std::string& path, char* const argv[], char* const envp[]) {
    ::execve(path.c_str(), argv, envp);
    return errno;
}

void unblock_all_signals() {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

void default_signal(int sig) { ::signal(sig, SIG_DFL); }

void ignore_signal(int sig) { ::signal(sig, SIG_IGN); }

int wait_signal(const sigset_t& set, std::optional<std::uint64_t> ns) {
    siginfo_t info{};
    if (!ns) return ::sigwaitinfo(&set, &info) < 0 ? -1 : info.si_signo;
    const timespec t{static_cast<time_t>(*ns / 1000000000ULL),
                     static_cast<long>(*ns % 1000000000ULL)};
    return ::sigtimedwait(&set, &info, &t) < 0 ? -1 : info.si_signo;
}

void signal_group(pid_t pid, int sig) {
    if (::kill(-pid, sig) < 0) ::kill(pid, sig);
}

pid_t reap_any(int& status) { return ::waitpid(-1, &status, WNOHANG); }

bool poll_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
}

int poll(pollfd* fds, std::size_t n, int timeout_ms) {
    const int rc = ::poll(fds, n, timeout_ms);
    if (rc < 0 && errno != EINTR) fail("poll()", errno);
    return std::max(rc, 0);
}

UniqueFd signalfd(const sigset_t& set) {
    UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC));
    if (!fd.valid()) fail("signalfd()", errno);
    return fd;
}

sigset_t block_signals(const sigset_t& set) {
    sigset_t old;
    ::sigprocmask(SIG_BLOCK, &set, &old);
    return old;
}

void send_signal(pid_t pid, int sig) { ::kill(pid, sig); }

void wait_rusage(pid_t pid, int& status, rusage& ru) {
    while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {}
}

long children_max_rss_kb() {
    rusage ru{};
    ::getrusage(RUSAGE_CHILDREN, &ru);  // fails only for a bad `who`
    return ru.ru_maxrss;
}

ssize_t try_read(int fd, void* buf, std::size_t n) {
    const ssize_t r = ::read(fd, buf, n);
    return r < 0 ? -errno : r;
}

ssize_t try_write(int fd, const void* buf, std::size_t n) {
    const ssize_t w = ::write(fd, buf, n);
    return w < 0 ? -errno : w;
}

int current_cpu() { return ::sched_getcpu(); }

void set_affinity(pid_t pid, const cpu_set_t& cpus) {
    ::sched_setaffinity(pid, sizeof cpus, &cpus);
}

cpu_set_t affinity() {
    cpu_set_t cpus;
    if (::sched_getaffinity(0, sizeof cpus, &cpus) != 0) CPU_ZERO(&cpus);
    return cpus;
}

unsigned usable_cpus() {
    const cpu_set_t cpus = affinity();
    return std::max(1, CPU_COUNT(&cpus));
}

std::uint64_t monotonic_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ULL +
           static_cast<std::uint64_t>(t.tv_nsec);
}

}  // namespace gpubox::sys
