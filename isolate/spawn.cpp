#include "isolate/spawn.hpp"

#include <linux/sched.h>
#include <limits.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::isolate {

Spawned spawn_sandbox(int ns_flags, int cgroup_fd, void (*child)(const void*), const void* arg) {
    int pidfd = -1;
    clone_args args{};
    args.flags = static_cast<std::uint64_t>(ns_flags) | CLONE_PIDFD;
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
    }
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) sys::fail(cat("clone3(", ns_flags, ")"), errno);
    if (pid == 0) {
        child(arg);
        ::_exit(125);
    }
    Spawned s;
    s.pid = static_cast<pid_t>(pid);
    s.pidfd.reset(pidfd);
    return s;
}

// Frame: type (1 byte), code (4), text length (2), text. Each frame is one write of at most
// PIPE_BUF bytes, so frames from init and the workload never interleave.
void send_message(int fd, const Message& msg) noexcept {
    char buf[PIPE_BUF];
    const std::uint16_t len = static_cast<std::uint16_t>(std::min<std::size_t>(msg.text.size(), sizeof buf - 7));
    buf[0] = static_cast<char>(msg.type);
    std::memcpy(buf + 1, &msg.code, 4);
    std::memcpy(buf + 5, &len, 2);
    std::memcpy(buf + 7, msg.text.data(), len);
    ssize_t ignored = ::write(fd, buf, 7u + len);
    (void)ignored;
}

namespace {
bool read_exact(int fd, char* p, std::size_t n) {
    while (n > 0) {
        ssize_t r = ::read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}
}  // namespace

bool read_message(int fd, Message& msg) {
    char head[7];
    if (!read_exact(fd, head, sizeof head)) return false;
    std::uint16_t len = 0;
    msg.type = static_cast<MsgType>(head[0]);
    std::memcpy(&msg.code, head + 1, 4);
    std::memcpy(&len, head + 5, 2);
    msg.text.assign(len, '\0');
    return read_exact(fd, msg.text.data(), len);
}

}  // namespace gpubox::isolate
