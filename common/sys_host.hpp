#pragma once
// More syscall wrappers (beside common/sys.hpp's), for the host side (the launcher, the monitor, `doctor`, isolate mode)
// and init's usage sampler: processes, directories, and reads of /proc where an entry that
// vanishes meanwhile is normal. Same rules as common/sys.hpp: a failure is a SysError naming
// the call, its path and errno; try_* return what happened instead, for callers that expect it.
//
// Between fork() and exec() only raw async-signal-safe calls belong: the child is a copy of a
// process whose locks may be held, and an exception there would run the parent's handlers.
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace gpubox::sys {

// Processes (fork, wait_status and kill_and_reap are in sys.hpp).
int try_kill(pid_t pid, int sig);  // 0, or -errno (-ESRCH: it is gone)

// Reading a pipe with a deadline: poll(POLLIN) once (1 ready, 0 timed out, or -errno), then
// read() once (the count, 0 at EOF, or -errno; EINTR retried).
int try_poll_in(int fd, int timeout_ms);
ssize_t read_some(int fd, void* buf, std::size_t len);

// Files and directories.
struct stat stat(const std::string& path);         // follows symlinks
void mkdir(const std::string& path, mode_t mode);  // EEXIST is an error too
void pwrite_all(int fd, const std::string& data, off_t offset, const std::string& what);
// The names in directory `name` below `dirfd` ("." and ".." left out), in readdir order.
std::vector<std::string> list_dir(int dirfd, const std::string& name);
std::optional<std::vector<std::string>> try_list_dir(int dirfd, const std::string& name);
void remove_dir_at(int dirfd, const std::string& name);  // unlinkat(AT_REMOVEDIR)
int try_rmdir(const std::string& path);                  // 0, or -errno

// Reads where failure is an answer (a process gone, a file absent): "" / nullopt / false.
std::string try_read_at(int dirfd, const std::string& name, std::size_t cap = 4096);
bool try_stat_at(int dirfd, const std::string& name, struct stat& st);  // follows symlinks
bool try_fstat(int fd, struct stat& st);
std::optional<struct statfs> try_fstatfs(int fd);

// Host facts that cannot fail.
std::uint64_t ns_per_clock_tick();  // for /proc/PID/stat's utime and stime
std::string node_name();            // uname(2)'s nodename

}  // namespace gpubox::sys
