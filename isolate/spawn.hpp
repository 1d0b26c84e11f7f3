#pragma once
#include <sys/types.h>

#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::isolate {

struct Spawned {
    pid_t pid = -1;
    UniqueFd pidfd;
};

// THE one clone of gpubox: clone3(ns_flags | CLONE_PIDFD). In the child, `child` runs and must
// not return (it is [[noreturn]] by contract; _exit(125) guards it).
// With `cgroup_fd` >= 0 the child starts in that cgroup (CLONE_INTO_CGROUP), so not one of its
// instructions runs outside the limits.
Spawned spawn_sandbox(int ns_flags, int cgroup_fd, void (*child)(const void*), const void* arg);

// Framed messages from the sandbox to the monitor over one O_CLOEXEC pipe. EOF with no
// message means the workload was exec'd and init has not reported yet.
enum class MsgType : char { error = 'E', status = 'S', usage = 'U' };

struct Message {
    MsgType type;
    int code = 0;      // error: the exit code gpubox should use; status: the wait status
    std::string text;  // error text; usage: "cpu_ns rss_bytes processes"
};

// Async-signal-safe enough for the child: one write(2) of at most PIPE_BUF bytes.
void send_message(int fd, const Message& msg) noexcept;
// Returns false at EOF.
bool read_message(int fd, Message& msg);

}  // namespace gpubox::isolate
