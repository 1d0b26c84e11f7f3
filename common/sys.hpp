#pragma once
// THE syscall wrappers. Each one captures errno on failure and throws SysError whose text names
// the call, its quoted paths and symbolic flags, so `grep sys::mount` has one answer and every
// failure reads "op(args): reason".
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <termios.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <span>
#include <string_view>

#include "common/syscall.hpp"
#include "common/unique_fd.hpp"

namespace gpubox::sys {

// Throws SysError. The call and path are given as values: hints match on them, not on the text.
[[noreturn]] void fail(Syscall call, int err, const std::string& op_text,
                       const std::string& path = {});
// The same with the call and path read from `op_text` ("name(\"path\", ...)"), for call sites
// that give only the text.
[[noreturn]] void fail(const std::string& op_text, int err);

// open(2)'s flags as its manual names them ("O_WRONLY|O_TRUNC"), for an error's text.
std::string open_flags(int flags);
UniqueFd open_at(int dirfd, const std::string& path, int flags, mode_t mode = 0);
// openat2(2), retried while it answers EAGAIN; returns the fd or -errno, so resolve.cpp can
// choose a fallback.
int try_openat2(int dirfd, const std::string& path, std::uint64_t flags, std::uint64_t resolve,
                std::uint64_t mode = 0);
struct stat fstat(int fd, const std::string& what);
// fstatat without following the final symlink; returns false on ENOENT.
bool lstat_at(int dirfd, const std::string& name, struct stat& st);
void mkdir_at(int dirfd, const std::string& name, mode_t mode);
void mknod_file_at(int dirfd, const std::string& name,
                   mode_t mode);  // an empty file; both keep an existing one
void symlink_at(const std::string& text, int dirfd, const std::string& name);
void rename_at(int dirfd, const std::string& from, const std::string& to);  // within one directory
void fchmod(int fd, mode_t mode, const std::string& what);
std::string read_link_at(int dirfd, const std::string& name);
std::string read_fd_link(int fd);  // readlink("/proc/self/fd/N")
void write_all(int fd, std::string_view data, const std::string& what);
int try_write_all(int fd, std::string_view data) noexcept;  // 0, or the errno that stopped it
// Everything left on `fd` (a file, pipe or memfd) up to EOF; EFBIG past `limit`. `what` names it.
std::string read_all(int fd, const std::string& what, std::size_t limit = 64 << 20);
std::string read_file(const std::string& path, std::size_t limit = 1 << 20);
void write_file(const std::string& path, std::string_view data);

// Probes for the in-root walk and the entry writers, which decide per errno (a missing
// component is made, an existing entry kept): the fd or 0, else -errno. O_CLOEXEC is added.
int try_open_at(int dirfd, const std::string& name, int flags, mode_t mode = 0);
int try_lstat_at(int dirfd, const std::string& name, struct stat& st);
int try_stat(const std::string& path, struct stat& st);
int try_read_link_at(int dirfd, const std::string& name, std::string& text);
int try_mkdir_at(int dirfd, const std::string& name, mode_t mode);       // EEXIST is an error here
int try_mknod_file_at(int dirfd, const std::string& name, mode_t mode);  // an empty file
int try_symlink_at(const std::string& text, int dirfd, const std::string& name);
int try_unlink_at(int dirfd, const std::string& name);
void fchmod_at(int dirfd, const std::string& name, mode_t mode);  // never follows a final link
mode_t set_umask(mode_t mask);                                    // umask(2): the previous mask
// A helper process: fork(2) naming `what`; its exit status (waitpid, EINTR retried); and, on
// a failure path, SIGKILL and reaping, errors ignored, so no zombie is left behind.
pid_t fork(const std::string& what);
int wait_status(pid_t pid);
void kill_and_reap(pid_t pid) noexcept;

// Mounts: only the new mount API, plus make_rprivate.
UniqueFd fsopen(const std::string& fstype);
void fsconfig_string(int fsfd, const std::string& fstype, const std::string& key,
                     const std::string& value);
void fsconfig_flag(int fsfd, const std::string& fstype, const std::string& key);
void fsconfig_create(int fsfd, const std::string& fstype);
UniqueFd fsmount(int fsfd, const std::string& fstype, unsigned attrs);
// A clone of the mount tree at `fd` itself (AT_EMPTY_PATH), with mount attributes `set` on it
// (every mount of it where `recursive`): one open_tree_attr() where the kernel has it.
UniqueFd open_tree_clone(int fd, const std::string& what, bool recursive, std::uint64_t set = 0);
// open_tree(dirfd, path, OPEN_TREE_CLONE [| AT_RECURSIVE]) with mount attributes `set` on the
// clone: one open_tree_attr() where the kernel has it (6.15), else open_tree() and
// mount_setattr(). A new fd, or -errno.
int try_open_tree_attr(int dirfd, const std::string& path, bool recursive, std::uint64_t set);
// The same for directory `dirfd` itself, throwing SysError naming it as `what`.
UniqueFd open_tree_attr(int dirfd, const std::string& what, bool recursive, std::uint64_t set);
void mount_setattr(int mntfd, const std::string& what, std::uint64_t set, std::uint64_t clr,
                   bool recursive);
void move_mount(int from_fd, const std::string& from, int to_fd, const std::string& to);
// move_mount() onto `name` in directory `dirfd`, which is looked up once and never followed
// if it is a symlink (no MOVE_MOUNT_T_SYMLINKS): 0, or -errno.
int try_move_mount_at(int from_fd, int dirfd, const std::string& name);
void make_rprivate();
void pivot_root_here();
void umount_detach(const std::string& path);
void fchdir(int fd, const std::string& what);
void chdir(const std::string& path);

// Box locks and fds (isolate mode).
// flock(LOCK_EX [| LOCK_NB]): false where another process holds it and `wait` is false.
bool flock_exclusive(int fd, bool wait, const std::string& what);
// flock(LOCK_SH or LOCK_EX, | LOCK_NB): false where another lock is in the way (GPU leases).
bool flock_try(int fd, bool shared, const std::string& what);
// faccessat(AT_FDCWD, path, mode, AT_EACCESS): 0, or -errno (EPERM: a device cgroup refuses it).
int try_faccessat(const std::string& path, int mode);
void ftruncate(int fd, off_t size, const std::string& what);
UniqueFd dup_cloexec(int fd);  // fcntl(F_DUPFD_CLOEXEC)
void dup2(int from, int to);
void set_nonblocking(int fd, const std::string& what);  // fcntl(F_SETFL, O_NONBLOCK)
// ioctl(2) with a pointer (or integer) argument; `what` names the fd and request for errors,
// e.g. "ioctl(\"/dev/ptmx\", TIOCSPTLCK)". Returns ioctl's result.
int ioctl(int fd, unsigned long request, void* arg, const std::string& what);
int ioctl(int fd, unsigned long request, long arg, const std::string& what);
int try_ioctl(int fd, unsigned long request, void* arg);  // its result, or -errno
// The caller's terminal (launcher/monitor/pty.cpp), best effort where it says nothing else.
bool is_terminal(int fd);                 // isatty(3)
int file_flags(int fd);                   // fcntl(F_GETFL): the flags, or -errno
int set_file_flags(int fd, int flags);    // fcntl(F_SETFL): 0, or -errno
bool terminal_attrs(int fd, termios& t);  // tcgetattr(3): false where fd is none
void set_terminal_attrs(
    int fd, int when,
    const termios& t);  // tcsetattr(3)            // onto `to`, which stays open across exec

// Processes and namespaces.
void unshare(int flags);
void sethostname(const std::string& name);
void set_loopback_up();
UniqueFd pidfd_open(pid_t pid);
void prctl(int option, unsigned long arg, const std::string& what);
// setrlimit(resource) to `value`, soft and hard, or to the hard limit where that is lower
// (`name`: "RLIMIT_NPROC", for the message).
void lower_rlimit(int resource, std::uint64_t value, const std::string& name);
// sched_setscheduler(0, SCHED_IDLE): the calling thread runs only where nothing else of its
// cpu cgroup (or autogroup) wants the CPU; its children inherit it.
void set_sched_idle();
std::uint64_t page_size();
void close_range_cloexec(unsigned first);
// close_range(CLOSE_RANGE_CLOEXEC) from `first` up, but the fds in `keep` (ascending) stay open
// across exec (PMI_FD, --preserve-fds).
void close_range_cloexec_except(unsigned first, const std::vector<int>& keep);
// setns(2): `fd` a namespace's or a pidfd (then `flags` names the namespaces to enter at once).
void setns(int fd, int flags, const std::string& what);
void pipe(UniqueFd& read_end, UniqueFd& write_end);
// A connected AF_UNIX SOCK_SEQPACKET pair (close-on-exec): each send is one frame, delivered
// whole and never interleaved with another writer's, EOF once every peer end is closed.
void socketpair(UniqueFd& a, UniqueFd& b);
// One frame: `bytes` (never empty) and up to kMaxFrameFds fds beside it (SCM_RIGHTS), one
// sendmsg: the peer wakes once for them all. A peer that is gone answers EPIPE (no SIGPIPE).
// `what` names the channel in errors. `fd` < 0: none.
constexpr std::size_t kMaxFrameFds = 8;
void send_frame(int sock, std::string_view bytes, std::span<const int> fds,
                const std::string& what);
void send_frame(int sock, std::string_view bytes, int fd, const std::string& what);
// The next frame's first byte, left queued; -1 at EOF.
int peek_frame(int sock, const std::string& what);
// The next frame and the fds that came with it, in their order (close-on-exec); false at EOF.
bool recv_frame(int sock, std::string& bytes, std::vector<UniqueFd>& fds, const std::string& what);
// The same for a frame of at most one fd: the first that came (any more are closed).
bool recv_frame(int sock, std::string& bytes, UniqueFd& fd, const std::string& what);
UniqueFd memfd(const std::string& name);
void install_seccomp_filter(const void* prog_bytes, std::size_t len);

// Processes and signals (the sandbox's init and workload, the monitor).
pid_t clone3(void* args, std::size_t size, int ns_flags);  // clone3(2); isolate/spawn.cpp only
void setsid();
[[noreturn]] void exit_now(int code);  // _exit(2): no atexit handlers, no stdio flush
int try_execve(const std::string& path, char* const argv[], char* const envp[]);  // its errno
void unblock_all_signals();
void default_signal(int sig);
void ignore_signal(int sig);
// sigtimedwait for a signal of `set` (blocked), for at most `ns` (nullopt: for ever): the
// signal, or -1 when the time ran out or a handler interrupted it.
int wait_signal(const sigset_t& set, std::optional<std::uint64_t> ns);
void signal_group(pid_t pid, int sig);  // kill(-pid), else kill(pid): best effort
pid_t reap_any(int& status);            // waitpid(-1, WNOHANG): a pid, 0 or -1 (none left)
bool poll_readable(int fd, int timeout_ms);
int poll(pollfd* fds, std::size_t n, int timeout_ms);  // the ready count; 0 also on EINTR
UniqueFd signalfd(const sigset_t& set);                // close-on-exec
sigset_t block_signals(const sigset_t& set);           // sigprocmask(SIG_BLOCK): the old mask
void send_signal(pid_t pid, int sig);                  // kill(2), best effort
// wait4(2) for `pid`, EINTR retried: its status and rusage (left as they are on ECHILD).
void wait_rusage(pid_t pid, int& status, rusage& ru);
long children_max_rss_kb();  // getrusage(RUSAGE_CHILDREN).ru_maxrss: the reaped ones' peak
// read(2) and write(2) as they are, for relays that decide per errno: the count, or -errno.
ssize_t try_read(int fd, void* buf, std::size_t n);
ssize_t try_write(int fd, const void* buf, std::size_t n);
int current_cpu();  // sched_getcpu(): -1 where unknown
// sched_setaffinity, best effort: where refused (or with one usable CPU) nothing changes.
void set_affinity(pid_t pid, const cpu_set_t& cpus);
cpu_set_t affinity();    // empty where it cannot be read (> 1024 CPUs)
unsigned usable_cpus();  // at least 1
std::uint64_t monotonic_ns();

// uname(2)'s release ("6.18.44-fc") and whether it is at least major.minor.
std::string kernel_release();
bool kernel_at_least(int major, int minor);

}  // namespace gpubox::sys
