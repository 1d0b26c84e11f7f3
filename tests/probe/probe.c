/* probe: a static program the e2e tests run inside the sandbox. Each subcommand prints what the
 * workload observes, one "name=value" per line, so tests assert on observations, not on logs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/sockios.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/shm.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/inotify.h>
#include <sys/uio.h>
#include <unistd.h>

static const char* result(long rc) { return rc < 0 ? strerrorname_np(errno) : "OK"; }

static int status(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
            !strncmp(line, "Seccomp:", 8) || !strncmp(line, "Uid:", 4) || !strncmp(line, "Gid:", 4))
            fputs(line, stdout);
    return 0;
}

static int syscalls(void) {
    struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    printf("unshare_user=%s\n", result(unshare(CLONE_NEWUSER)));
    printf("unshare_mnt=%s\n", result(unshare(CLONE_NEWNS)));
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0) _exit(0);
    printf("clone3=%s\n", result(r));
    r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0) _exit(0);
    printf("clone_newuser=%s\n", result(r));
    printf("mount=%s\n", result(mount("none", "/tmp", "tmpfs", 0, NULL)));
    printf("open_tree=%s\n", result(syscall(SYS_open_tree, AT_FDCWD, "/", 1)));
    printf("open_tree_attr=%s\n", result(syscall(467, AT_FDCWD, "/", 1, NULL, 0)));
    printf("fsopen=%s\n", result(syscall(SYS_fsopen, "tmpfs", 0)));
    printf("keyctl=%s\n", result(syscall(SYS_keyctl, 0, 0, 0, 0, 0)));
    printf("add_key=%s\n", result(syscall(SYS_add_key, "user", "x", "y", 1, -3)));
    printf("bpf=%s\n", result(syscall(SYS_bpf, 0, NULL, 0)));
    printf("perf_event_open=%s\n", result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0)));
    printf("userfaultfd=%s\n", result(syscall(SYS_userfaultfd, 0)));
    printf("io_uring_setup=%s\n", result(syscall(SYS_io_uring_setup, 1, NULL)));
    printf("socket_vsock=%s\n", result(socket(40, SOCK_STREAM, 0)));
    printf("personality_norandom=%s\n", result(personality(ADDR_NO_RANDOMIZE)));
    printf("ptrace_attach_1=%s\n", result(ptrace(PTRACE_ATTACH, 1, 0, 0)));
    printf("kexec_load=%s\n", result(syscall(SYS_kexec_load, 0, 0, NULL, 0)));
    printf("init_module=%s\n", result(syscall(SYS_init_module, NULL, 0, "")));
    printf("setuid0=%s\n", result(setuid(0) == 0 && getuid() == 0 && geteuid() != 0 ? -1 : 0));
    printf("chroot=%s\n", result(chroot("/tmp")));
    return 0;
}

static int tiocsti(void) {
    char c = 'x';
    printf("tiocsti=%s\n", result(ioctl(0, TIOCSTI, &c)));
    printf("tiocsti_high_bits=%s\n", result(syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, &c)));
    return 0;
}

static int list_dir(const char* path, int numeric_only) {
    DIR* d = opendir(path);
    if (!d) return printf("error=%s\n", strerrorname_np(errno)), 1;
    for (struct dirent* e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (numeric_only && (e->d_name[0] < '0' || e->d_name[0] > '9')) continue;
        if (!strcmp(path, "/proc/self/fd") && atoi(e->d_name) == dirfd(d)) continue;
        printf("%s\n", e->d_name);
    }
    return closedir(d), 0;
}

static int stat_path(const char* p) {
    struct stat st;
    if (lstat(p, &st) < 0) return printf("%s=%s\n", p, strerrorname_np(errno)), 0;
    const char* t = S_ISCHR(st.st_mode)   ? "chr"
                    : S_ISDIR(st.st_mode) ? "dir"
                    : S_ISLNK(st.st_mode) ? "lnk"
                    : S_ISREG(st.st_mode) ? "reg"
                                          : "other";
    printf("%s=%s %u:%u\n", p, t, major(st.st_rdev), minor(st.st_rdev));
    return 0;
}

static int read_path(const char* p) {
    int fd = open(p, O_RDONLY);
    printf("%s=%s\n", p, result(fd));
    return 0;
}

static int write_path(const char* p) {
    int fd = open(p, O_WRONLY);
    long rc = fd < 0 ? -1 : write(fd, "1", 1);
    printf("%s=%s\n", p, result(rc));
    return 0;
}

/* Allocate and touch 1 MiB at a time until something stops us. */
static int membomb(void) {
    for (size_t mb = 0;; ++mb) {
        char* p = malloc(1 << 20);
        if (!p) return printf("malloc failed after %zu MiB\n", mb), 3;
        memset(p, 1, 1 << 20);
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* memfd-flight: *fd sent over a new unix socket (SCM_RIGHTS) that nobody reads, then closed: the
 * memfd is in flight only, no process holds it; *fd is a new memfd. 0 on failure. */
static int send_away(int* fd) {
    int sv[2];
    char c = 0;
    char ctl[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {&c, 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET, h->cmsg_type = SCM_RIGHTS, h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), fd, sizeof(int));
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0 || sendmsg(sv[0], &m, 0) < 0) return 0;
    close(*fd);
    return (*fd = memfd_create("hog", 0)) >= 0;
}

/* Take MIB MiB of memory the way KIND says, RATE MiB/s (0: as fast as possible), then hold it
 * for HOLD seconds. Prints how far it got: "hog=<MiB>" and why it stopped.
 *   anon     malloc'd 1 MiB chunks, touched
 *   malloc1  one malloc(MIB), then touched
 *   shared   one MAP_SHARED|MAP_ANONYMOUS mapping, touched
 *   shared2  the same, then a child that touches every page too: two processes map it
 *   memfd    written into a memfd that is never mapped
 *   memfd-hidden  the same, by a process that made itself undumpable (PR_SET_DUMPABLE 0)
 *   memfd-flight  the same, 32 MiB per memfd, each then sent over a unix socket (SCM_RIGHTS),
 *            never received, and closed: in flight only
 *   cow      malloc'd and touched like anon, then 7 idle children share it copy-on-write
 *   cow-write  the same, then after a second each child writes every page: 8 copies, none shared
 *   populate one mmap(MAP_POPULATE) of MIB: the kernel fills it in one call (RATE ignored)
 *   sysv     a SysV segment, attached, touched, then detached (held by the kernel alone)
 *   file:P   written into file P (a tmpfs file: /tmp/x, /dev/shm/x, /dev/x) */
static int hog(const char* kind, long mib, long rate, long hold) {
    const size_t M = 1 << 20;
    char* region = NULL;
    int fd = -1, shmid = -1;
    if (!strcmp(kind, "populate")) {
        if (mmap(NULL, (size_t)mib * M, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) == MAP_FAILED)
            return printf("hog=0 mmap=%s\n", strerrorname_np(errno)), 3;
        printf("hog=%ld\n", mib);
        sleep((unsigned)hold);
        return 0;
    }
    if (!strcmp(kind, "malloc1") && !(region = malloc((size_t)mib * M)))
        return printf("hog=0 malloc=ENOMEM\n"), 3;
    if ((!strcmp(kind, "shared") || !strcmp(kind, "shared2")) &&
        (region = mmap(NULL, (size_t)mib * M, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0)) == MAP_FAILED)
        return printf("hog=0 mmap=%s\n", strerrorname_np(errno)), 3;
    if (!strcmp(kind, "memfd-hidden")) prctl(PR_SET_DUMPABLE, 0);
    if (!strncmp(kind, "memfd", 5) && (fd = memfd_create("hog", 0)) < 0)
        return printf("hog=0 memfd_create=%s\n", strerrorname_np(errno)), 3;
    if (!strcmp(kind, "sysv")) {
        if ((shmid = shmget(IPC_PRIVATE, (size_t)mib * M, IPC_CREAT | 0600)) < 0)
            return printf("hog=0 shmget=%s\n", strerrorname_np(errno)), 3;
        if ((region = shmat(shmid, NULL, 0)) == (void*)-1)
            return printf("hog=0 shmat=%s\n", strerrorname_np(errno)), 3;
    }
    if (!strncmp(kind, "file:", 5) && (fd = open(kind + 5, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
        return printf("hog=0 open=%s\n", strerrorname_np(errno)), 3;
    static char chunk[1 << 20];
    static char* chunks[1 << 16]; /* cow-write's, to write again in each child */
    memset(chunk, 7, sizeof chunk);
    const double t0 = now();
    for (long i = 0; i < mib; ++i) {
        if (rate > 0)
            while (now() - t0 < (double)i / (double)rate) {}
        if (!strcmp(kind, "anon") || !strncmp(kind, "cow", 3)) {
            char* p = malloc(M);
            if (!p) return printf("hog=%ld malloc=ENOMEM\n", i), 3;
            memset(p, 1, M);
            if (i < (long)(sizeof chunks / sizeof *chunks)) chunks[i] = p;
        } else if (fd >= 0) {
            if (!strcmp(kind, "memfd-flight") && i % 32 == 0 && i > 0 && !send_away(&fd))
                return printf("hog=%ld sendmsg=%s\n", i, strerrorname_np(errno)), 3;
            if (write(fd, chunk, M) != (ssize_t)M)
                return printf("hog=%ld write=%s\n", i, strerrorname_np(errno)), 3;
        } else {
            memset(region + (size_t)i * M, 1, M);
        }
    }
    if (shmid >= 0) shmdt(region);
    if (!strcmp(kind, "memfd-flight") && !send_away(&fd))
        return printf("hog=%ld sendmsg=%s\n", mib, strerrorname_np(errno)), 3;
    const int cow_write = !strcmp(kind, "cow-write");
    for (int i = 0; (cow_write || !strcmp(kind, "cow")) && i < 7; ++i)
        if (fork() == 0) {
            if (cow_write) {
                sleep(1);
                for (long c = 0; c < mib && c < (long)(sizeof chunks / sizeof *chunks); ++c)
                    for (size_t off = 0; off < M; off += 4096) chunks[c][off] = 2;
            }
            sleep((unsigned)hold + 1);
            _exit(0);
        }
    if (!strcmp(kind, "shared2") && fork() == 0) {
        volatile char sum = 0;
        for (long i = 0; i < mib; ++i)
            for (size_t off = 0; off < M; off += 4096) sum += region[(size_t)i * M + off];
        sleep((unsigned)hold + 1);
        _exit(0);
    }
    printf("hog=%ld\n", mib);
    sleep((unsigned)hold);
    return 0;
}

static void spin_for(double seconds) {
    const double t0 = cpu_now();
    while (cpu_now() - t0 < seconds) {}
}

static void* spin_thread(void* arg) {
    spin_for(*(double*)arg);
    return NULL;
}

/* THREADS threads each burning SECONDS of CPU. */
static int spin(int threads, double seconds) {
    pthread_t t[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, spin_thread, &seconds);
    for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
    printf("spun=%d\n", threads);
    return 0;
}

/* N children in turn, each burning MS ms of CPU, whose parent has the kernel reap them
 * (SIGCHLD ignored, or SA_NOCLDWAIT with MODE "nocldwait"): their CPU time reaches nobody's
 * cutime. The parent only waits for each to vanish. */
static int reaped_chain(int n, int ms, const char* mode) {
    struct sigaction sa = {0};
    sa.sa_handler = strcmp(mode, "nocldwait") ? SIG_IGN : SIG_DFL;
    sa.sa_flags = strcmp(mode, "nocldwait") ? 0 : SA_NOCLDWAIT;
    sigaction(SIGCHLD, &sa, NULL);
    for (int i = 0; i < n; ++i) {
        pid_t p = fork();
        if (p == 0) {
            spin_for(ms / 1000.0);
            _exit(0);
        }
        if (p < 0) return printf("chain=%d fork=%s\n", i, strerrorname_np(errno)), 3;
        while (kill(p, 0) == 0) usleep(500);
    }
    printf("chain=%d\n", n);
    return 0;
}

/* for (;;) fork(): every process forks for ever, failures included (MARK names it for pgrep). */
static int forkspin(void) {
    for (;;) fork();
}

/* forkspin, each child starting a session of its own first (where the kernel's autogroups apply,
 * each session is a scheduling group, as heavy as any other). */
static int sessionspin(void) {
    for (;;)
        if (fork() == 0) setsid();
}

/* Kernel memory that is in no process's resident set, N units of KIND, then held HOLD seconds:
 *   msgq   1-byte SysV messages, as many queues and messages as the IPC namespace allows
 *   files  empty files in /tmp (inodes and dentries, no blocks)
 *   ptes   one page of a file mapped read-only at every 2 MiB (a page table each)
 * Prints "kmem=<units made> <why it stopped>". */
static int kmem(const char* kind, long n, long hold) {
    long made = 0;
    const char* why = "done";
    if (!strcmp(kind, "msgq")) {
        struct {
            long type;
            char c;
        } msg = {1, 'x'};
        for (int q = -1; made < n; ++made) {
            if (q < 0 && (q = msgget(IPC_PRIVATE, IPC_CREAT | 0600)) < 0) {
                why = strerrorname_np(errno);
                break;
            }
            if (msgsnd(q, &msg, 1, IPC_NOWAIT) < 0) {
                if (errno != EAGAIN) {
                    why = strerrorname_np(errno);
                    break;
                }
                q = -1, --made;
            }
        }
    } else if (!strcmp(kind, "files")) {
        char name[64];
        for (; made < n; ++made) {
            snprintf(name, sizeof name, "/tmp/k%ld", made);
            int fd = open(name, O_CREAT | O_WRONLY, 0600);
            if (fd < 0) {
                why = strerrorname_np(errno);
                break;
            }
            close(fd);
        }
    } else if (!strcmp(kind, "ptes")) {
        int fd = open("/tmp/ptes", O_CREAT | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, 4096) < 0)
            return printf("kmem=0 open=%s\n", strerrorname_np(errno)), 3;
        const size_t step = 2 << 20;
        char* base = mmap(NULL, (size_t)n * step, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) return printf("kmem=0 mmap=%s\n", strerrorname_np(errno)), 3;
        volatile char sum = 0;
        for (; made < n; ++made) {
            char* p = mmap(base + (size_t)made * step, 4096, PROT_READ,
                           MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0);
            if (p == MAP_FAILED) {
                why = strerrorname_np(errno);
                break;
            }
            sum += *p;
        }
    }
    printf("kmem=%ld %s\n", made, why);
    sleep((unsigned)hold);
    return 0;
}

/* Kernel memory held through open files, N units of KIND across processes of at most 1000 fds
 * each, then held HOLD seconds (each process holds its own):
 *   pipes     pipes enlarged to 1 MiB (F_SETPIPE_SZ; past the per-user soft limit refused) and
 *             filled, their write ends closed
 *   vmsplice  pipes whose every slot holds one 4 KiB page vmspliced from a 2 MiB huge page of its
 *             own (MADV_HUGEPAGE), the mapping then unmapped: the pipe pins the whole huge page
 *   epoll     watches on 16 timerfds, up to 800 per (epoll, timerfd) pair: one timerfd dup'ed to
 *             each fd number in turn, added, the dup closed (the watch lives while the file does)
 *   open      empty regular files in /tmp, each held open (an honest program's files)
 *   threads   pipes as above, 1000 per thread, each thread with an fd table of its own
 *             (unshare(CLONE_FILES)): one process, whose /proc/PID/fd shows none of them
 *   inotify   inotify instances watching one directory, whose queues (16384 events each) are
 *             then filled by files with 250-character names made and removed there
 *   fdstarve  100 sleepers each holding up to N fds of /dev/null; then the first process
 *             allocates and touches 2 GiB as fast as it can
 * Prints "kmem=<units made> <why it stopped>" once every process has made its share. */
struct fdshare {
    long made;
    int err, ready;
};

static int one_pipe(const char* kind) {
    static char chunk[1 << 16];
    int p[2];
    if (pipe2(p, O_NONBLOCK) < 0) return -1;
    if (!strcmp(kind, "pipes")) {
        fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
        while (write(p[1], chunk, sizeof chunk) > 0) {}
    } else {
        for (;;) {
            char* r =
                mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (r == MAP_FAILED) return -1;
            char* a = (char*)(((uintptr_t)r + (2 << 20) - 1) & ~(((uintptr_t)2 << 20) - 1));
            madvise(a, 2 << 20, MADV_HUGEPAGE);
            memset(a, 1, 2 << 20);
            struct iovec v = {a, 4096};
            const ssize_t w = vmsplice(p[1], &v, 1, SPLICE_F_NONBLOCK);
            const int e = errno;
            munmap(r, 4 << 20);
            if (w > 0) continue;
            if (e == EAGAIN) break;
            errno = e;
            return -1;
        }
    }
    return close(p[1]);
}

static int fd_share(const char* kind, long n, struct fdshare* sh) {
    static int tfd[16];
    int ep = -1, k = 200;
    for (int i = 0; !strcmp(kind, "epoll") && i < 16; ++i)
        if ((tfd[i] = timerfd_create(CLOCK_MONOTONIC, 0)) < 0) return -1;
    for (long made = 0; made < n; ++made) {
        if (!strcmp(kind, "pipes") || !strcmp(kind, "vmsplice")) {
            if (one_pipe(kind) < 0) return -1;
        } else if (!strcmp(kind, "open") || !strcmp(kind, "fdstarve")) {
            char name[64];
            snprintf(name, sizeof name, "/tmp/fd%d.%ld", getpid(), made);
            const int fd = !strcmp(kind, "open") ? open(name, O_CREAT | O_RDWR, 0600)
                                                 : open("/dev/null", O_RDONLY);
            if (fd < 0) return errno == EMFILE && !strcmp(kind, "fdstarve") ? 0 : -1;
        } else if (!strcmp(kind, "inotify")) {
            const int in = inotify_init1(IN_NONBLOCK);
            if (in < 0 || (mkdir("/tmp/inotify", 0700) < 0 && errno != EEXIST) ||
                inotify_add_watch(in, "/tmp/inotify", IN_ALL_EVENTS) < 0)
                return -1;
        } else if (!strcmp(kind, "epoll")) {
            if (made % (16 * 800) == 0 && (ep = epoll_create1(0)) < 0) return -1;
            struct epoll_event ev = {EPOLLIN, {0}};
            k = 200 + (int)(made / 16 % 800);  // (timerfd, fd number) pairs: each a watch
            if (dup2(tfd[made % 16], k) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev) < 0) return -1;
        }
        __atomic_add_fetch(&sh->made, 1, __ATOMIC_RELAXED);
    }
    if (!strcmp(kind, "epoll")) close(k);
    for (int i = 0; !strcmp(kind, "inotify") && i < 8192; ++i) {
        char name[300];
        snprintf(name, sizeof name, "/tmp/inotify/%0250d", i);
        if (close(open(name, O_CREAT | O_WRONLY, 0600)) < 0 || unlink(name) < 0) return -1;
    }
    return 0;
}

static struct fdshare* thread_share;
static long thread_n;

static void* own_table(void* arg) {
    (void)arg;
    if (unshare(CLONE_FILES) < 0 || fd_share("pipes", thread_n, thread_share) < 0)
        __atomic_store_n(&thread_share->err, errno, __ATOMIC_RELAXED);
    __atomic_add_fetch(&thread_share->ready, 1, __ATOMIC_RELAXED);
    pause();
    return NULL;
}

static int fdkmem(const char* kind, long n, long hold) {
    struct fdshare* sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return printf("kmem=0 mmap=%s\n", strerrorname_np(errno)), 3;
    if (!strcmp(kind, "threads")) { /* the threads stand for the processes below */
        thread_share = sh, thread_n = 1000;
        pthread_t t;
        for (long i = 0; i < (n + 999) / 1000; ++i)
            if (pthread_create(&t, NULL, own_table, NULL) != 0) return printf("kmem=0 thread\n"), 3;
        while (__atomic_load_n(&sh->ready, __ATOMIC_RELAXED) < (n + 999) / 1000) usleep(1000);
        if (sh->err) return printf("kmem=%ld %s\n", sh->made, strerrorname_np(sh->err)), 3;
        printf("kmem=%ld done\n", sh->made);
        sleep((unsigned)hold);
        return 0;
    }
    const int starve = !strcmp(kind, "fdstarve");
    const long per = starve || !strcmp(kind, "epoll") || !strcmp(kind, "inotify") ? n : 1000;
    const int procs = starve ? 100 : (int)((n + per - 1) / per);
    for (int i = 1; i < procs; ++i) {
        const pid_t pid = fork();
        if (pid < 0) return printf("kmem=%ld fork=%s\n", sh->made, strerrorname_np(errno)), 3;
        if (pid == 0) {
            if (fd_share(kind, per, sh) < 0) __atomic_store_n(&sh->err, errno, __ATOMIC_RELAXED);
            __atomic_add_fetch(&sh->ready, 1, __ATOMIC_RELAXED);
            sleep((unsigned)hold + 1);
            _exit(0);
        }
    }
    if (fd_share(kind, starve ? n : n - per * (procs - 1), sh) < 0) sh->err = errno;
    while (__atomic_load_n(&sh->ready, __ATOMIC_RELAXED) < procs - 1) usleep(1000);
    if (sh->err) return printf("kmem=%ld %s\n", sh->made, strerrorname_np(sh->err)), 3;
    if (starve)
        for (long i = 0; i < 2048; ++i) {
            char* p = malloc(1 << 20);
            if (!p) return printf("kmem=%ld malloc=ENOMEM\n", sh->made), 3;
            memset(p, 1, 1 << 20);
        }
    printf("kmem=%ld done\n", sh->made);
    sleep((unsigned)hold);
    return 0;
}

/* Kernel memory of mappings (issue #31): n mappings across processes of at most 60000 each
 * (vm.max_map_count is 65530), none touched, so no page and no page table backs them: every
 * other page of one PROT_NONE reservation made readable, each mprotect splitting off two
 * vm_area_structs. Held `hold` seconds. Prints "kmem=<mappings> <why it stopped>". */
static int vmas(long n, long hold) {
    long* made =
        mmap(NULL, sizeof *made, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (made == MAP_FAILED) return printf("kmem=0 mmap=%s\n", strerrorname_np(errno)), 3;
    const long per = 60000;
    int err = 0;
    for (long left = n; left > 0 && !err; left -= per) {
        const pid_t pid = fork();
        if (pid < 0) {
            err = errno;
            break;
        }
        if (pid == 0) {
            const long k = (left < per ? left : per) / 2;
            char* base = mmap(NULL, (size_t)(2 * k + 1) * 4096, PROT_NONE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            for (long i = 0; base != MAP_FAILED && i < k; ++i) {
                if (mprotect(base + (2 * i + 1) * 4096, 4096, PROT_READ) < 0) break;
                __atomic_add_fetch(made, 2, __ATOMIC_RELAXED);
            }
            sleep((unsigned)hold + 1);
            _exit(0);
        }
        while (__atomic_load_n(made, __ATOMIC_RELAXED) < n - left + (left < per ? left : per) - 2)
            if (waitpid(pid, NULL, WNOHANG) == pid) { /* it died (killed) before its share */
                err = ECHILD;
                break;
            } else usleep(1000);
    }
    printf("kmem=%ld %s\n", *made, err ? strerrorname_np(err) : "done");
    fflush(stdout);
    sleep((unsigned)hold);
    return 0;
}

/* Memory faulted into a process that never runs (issue #31): a child reserves `mib` MiB it never
 * touches and sleeps; its parent writes it in, 1 MiB at a time, with process_vm_writev (allowed
 * to MPI's cross-memory attach). The pages are the child's, resident in its set. Prints
 * "remote=<MiB written> <why it stopped>", then holds `hold` seconds. */
static int remote(long mib, long hold) {
    int p[2];
    if (pipe(p) < 0) return printf("remote=0 pipe=%s\n", strerrorname_np(errno)), 3;
    const pid_t child = fork();
    if (child < 0) return printf("remote=0 fork=%s\n", strerrorname_np(errno)), 3;
    if (child == 0) {
        char* area = mmap(NULL, (size_t)mib << 20, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (write(p[1], &area, sizeof area) != sizeof area) _exit(1);
        sleep((unsigned)hold + 30);
        _exit(0);
    }
    char* area = NULL;
    if (read(p[0], &area, sizeof area) != sizeof area || area == MAP_FAILED)
        return printf("remote=0 child\n"), 3;
    static char chunk[1 << 20];
    memset(chunk, 1, sizeof chunk);
    long done = 0;
    const char* why = "done";
    for (; done < mib; ++done) {
        struct iovec local = {chunk, sizeof chunk},
                     far = {area + ((size_t)done << 20), sizeof chunk};
        if (process_vm_writev(child, &local, 1, &far, 1, 0) != (ssize_t)sizeof chunk) {
            why = strerrorname_np(errno);
            break;
        }
    }
    printf("remote=%ld %s\n", done, why);
    fflush(stdout);
    sleep((unsigned)hold);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}

/* Socket buffers held by the kernel, in no process's memory (issue #31), until about `mib` MiB
 * are queued, then held `hold` seconds. Each connection in a child of its own, at most 100 per
 * child (fds), its writer non-blocking, filled until it would block, its reader never read:
 *   ustream         unix stream socketpairs, 64 KiB writes
 *   ustream-closed  the same with 1-byte writes (the most kernel memory per byte), writer closed
 *   udgram-closed   unix datagram socketpairs, 64 KiB datagrams, writer closed
 *   udgram-named    a unix datagram socket with an address, sent 1 MiB datagrams by senders
 *                   that each close after one, an empty one first (its queue's length reads 0)
 *   tcp             TCP over loopback, 64 KiB writes, neither end reads
 * Prints "kmem=<connections> <why it stopped>" (what sockets refused, or done). */
static int sockmem(const char* kind, long mib, long hold) {
    int tcp = !strcmp(kind, "tcp"), closed = strstr(kind, "-closed") != NULL;
    int named = !strcmp(kind, "udgram-named");
    int type = !strncmp(kind, "udgram", 6) ? SOCK_DGRAM : SOCK_STREAM;
    size_t chunk = strcmp(kind, "ustream-closed") ? 65536 : 1;
    char* buf = calloc(1, 1 << 20);
    int lsn = -1, big = 64 << 20, report[2];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (tcp && ((lsn = socket(AF_INET, SOCK_STREAM, 0)) < 0 || bind(lsn, (void*)&a, alen) < 0 ||
                listen(lsn, 128) < 0 || getsockname(lsn, (void*)&a, &alen) < 0))
        return printf("kmem=0 listen=%s\n", strerrorname_np(errno)), 3;
    if (pipe(report) < 0) return 3;
    long made = 0, queued = 0;
    const char* why = "done";
    while (queued < (mib << 20) && !strcmp(why, "done")) {
        pid_t child = fork();
        if (child < 0) {
            why = strerrorname_np(errno);
            break;
        }
        if (child == 0) {  // up to 100 connections; reports "<made> <queued> <errno or 0>"
            long n = 0, q = 0;
            int err = 0;
            for (; n < 100 && queued + q < (mib << 20); ++n) {
                int sv[2];
                if (tcp) {
                    sv[0] = socket(AF_INET, SOCK_STREAM, 0);
                    if (sv[0] < 0 || connect(sv[0], (void*)&a, alen) < 0 ||
                        (sv[1] = accept(lsn, NULL, NULL)) < 0) {
                        err = errno;
                        break;
                    }
                } else if (named) {  // autobound: an abstract address of its own
                    struct sockaddr_un u = {.sun_family = AF_UNIX};
                    socklen_t ulen = sizeof u;
                    sv[1] = socket(AF_UNIX, SOCK_DGRAM, 0);
                    if (sv[1] < 0 || bind(sv[1], (void*)&u, sizeof(sa_family_t)) < 0 ||
                        getsockname(sv[1], (void*)&u, &ulen) < 0) {
                        err = errno;
                        break;
                    }
                    for (size_t len = 0;; len = 1 << 20) {
                        int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0), outq = 0;
                        if (s < 0) break;
                        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
                        ssize_t w = sendto(s, buf, len, 0, (void*)&u, ulen);
                        ioctl(s, SIOCOUTQ, &outq);
                        close(s);
                        if (w < 0) break;
                        q += outq;
                    }
                    continue;
                } else if (socketpair(AF_UNIX, type, 0, sv) < 0) {
                    err = errno;
                    break;
                }
                setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);  // as far as allowed
                setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
                fcntl(sv[0], F_SETFL, O_NONBLOCK);
                long sent = 0;
                for (ssize_t w; (w = write(sv[0], buf, chunk)) > 0 || (w < 0 && errno == EINTR);)
                    sent += w > 0 ? w : 0;
                if (tcp) usleep(1000);  // let loopback deliver, then count what the reader holds
                int outq = 0, inq = 0;
                ioctl(sv[0], SIOCOUTQ, &outq);  // unix: the skbs' true size; TCP: bytes unsent
                ioctl(sv[1], SIOCINQ, &inq);
                q += tcp ? outq + inq : outq > sent ? outq : sent;
                if (closed) close(sv[0]);
            }
            dprintf(report[1], "%ld %ld %d\n", n, q, err);
            sleep((unsigned)hold + 1);
            _exit(0);
        }
        char line[64] = "";
        FILE* in = fdopen(dup(report[0]), "r");
        long n = 0, q = 0;
        int err = 0;
        if (!in || !fgets(line, sizeof line, in) || sscanf(line, "%ld %ld %d", &n, &q, &err) != 3)
            why = "EIO";
        if (in) fclose(in);
        made += n, queued += q;
        if (err) why = strerrorname_np(err);
        if (!n) break;
    }
    printf("kmem=%ld %s\n", made, why);
    sleep((unsigned)hold);
    return 0;
}

/* Fork until fork fails; children sleep. Prints how many forks succeeded. */
static int forkbomb(void) {
    int ok = 0;
    for (int i = 0; i < 100000; ++i) {
        pid_t p = fork();
        if (p == 0) {
            sleep(60);
            _exit(0);
        }
        if (p < 0) break;
        ++ok;
    }
    printf("forks=%d\n", ok);
    return 0;
}

/* What the kernel charges to end N processes: N children of ours (copies of this static program,
 * as a fork bomb's are) wait; then, between two reads of COUNTER (a cgroup v1 cpuacct.usage
 * whose group holds us), SIGKILL each and reap it. Prints the CPU time that took. */
static long long read_counter(const char* path) {
    char b[32] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, sizeof b - 1) <= 0) return -1;
    close(fd);
    return atoll(b);
}

static int teardown(int n, const char* counter) {
    pid_t* kids = calloc((size_t)n, sizeof *kids);
    int made = 0;
    for (; made < n; ++made) {
        kids[made] = fork();
        if (kids[made] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* none left behind if we are killed first */
            for (;;) pause();
        }
        if (kids[made] < 0) break;
    }
    usleep(200000); /* each child out of fork and waiting */
    const long long before = read_counter(counter);
    for (int i = 0; i < made; ++i) kill(kids[i], SIGKILL);
    for (int i = 0; i < made; ++i) waitpid(kids[i], NULL, 0);
    const long long after = read_counter(counter);
    if (before < 0 || after < 0) return printf("teardown=%s\n", strerrorname_np(errno)), 3;
    printf("processes=%d teardown_s=%.3f\n", made, (double)(after - before) / 1e9);
    return 0;
}

static int connect_tcp(const char* ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    printf("connect=%s\n", result(connect(s, (struct sockaddr*)&a, sizeof a)));
    return 0;
}

static socklen_t abstract_addr(struct sockaddr_un* a, const char* name) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    strncpy(a->sun_path + 1, name, sizeof a->sun_path - 2);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
}

static int abstract(const char* mode, const char* name, int seconds) {
    struct sockaddr_un a;
    socklen_t len = abstract_addr(&a, name);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (!strcmp(mode, "listen")) {
        printf("listen=%s\n", result(bind(s, (struct sockaddr*)&a, len) < 0 ? -1 : listen(s, 1)));
        if (seconds > 0) sleep((unsigned)seconds);
        return 0;
    }
    printf("abstract_connect=%s\n", result(connect(s, (struct sockaddr*)&a, len)));
    return 0;
}

static int shm(const char* mode, int key, int seconds) {
    if (!strcmp(mode, "create")) {
        printf("shm_create=%s\n", result(shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0600)));
        if (seconds > 0) sleep((unsigned)seconds);
        return 0;
    }
    printf("shm_find=%s\n", result(shmget(key, 0, 0)));
    return 0;
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        return fprintf(stderr,
                       "usage: probe status|syscalls|tiocsti|fds|pids|ls D|stat P..|read P..|write "
                       "P..\n"),
               2;
    const char* cmd = argv[1];
    if (!strcmp(cmd, "status")) return status();
    if (!strcmp(cmd, "syscalls")) return syscalls();
    if (!strcmp(cmd, "tiocsti")) return tiocsti();
    if (!strcmp(cmd, "fds")) return list_dir("/proc/self/fd", 1);
    if (!strcmp(cmd, "pids")) return list_dir("/proc", 1);
    if (!strcmp(cmd, "ls") && argc > 2) return list_dir(argv[2], 0);
    if (!strcmp(cmd, "membomb")) return membomb();
    if (!strcmp(cmd, "forkbomb")) return forkbomb();
    if (!strcmp(cmd, "forkspin")) return forkspin();
    if (!strcmp(cmd, "sessionspin")) return sessionspin();
    if (!strcmp(cmd, "setsid")) { /* in a child, which leads no process group */
        pid_t p = fork();
        if (p == 0) _exit(printf("setsid=%s\n", result(setsid())) < 0);
        return waitpid(p, NULL, 0) < 0;
    }
    if (!strcmp(cmd, "fdkmem") && argc > 4) return fdkmem(argv[2], atol(argv[3]), atol(argv[4]));
    if (!strcmp(cmd, "vmas") && argc > 3) return vmas(atol(argv[2]), atol(argv[3]));
    if (!strcmp(cmd, "remote") && argc > 3) return remote(atol(argv[2]), atol(argv[3]));
    if (!strcmp(cmd, "kmem") && argc > 4) return kmem(argv[2], atol(argv[3]), atol(argv[4]));
    if (!strcmp(cmd, "sockmem") && argc > 4) return sockmem(argv[2], atol(argv[3]), atol(argv[4]));
    if (!strcmp(cmd, "hog") && argc > 5)
        return hog(argv[2], atol(argv[3]), atol(argv[4]), atol(argv[5]));
    if (!strcmp(cmd, "spin") && argc > 3) return spin(atoi(argv[2]), atof(argv[3]));
    if (!strcmp(cmd, "teardown") && argc > 3) return teardown(atoi(argv[2]), argv[3]);
    if (!strcmp(cmd, "reaped-chain") && argc > 3)
        return reaped_chain(atoi(argv[2]), atoi(argv[3]), argc > 4 ? argv[4] : "ign");
    if (!strcmp(cmd, "connect") && argc > 3) return connect_tcp(argv[2], atoi(argv[3]));
    if (!strcmp(cmd, "abstract") && argc > 3)
        return abstract(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 0);
    if (!strcmp(cmd, "shm") && argc > 3)
        return shm(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
    if (!strcmp(cmd, "kill-all")) return printf("kill_all=%s\n", result(kill(-1, SIGKILL))), 0;
    if (!strcmp(cmd, "ptrace") && argc > 2)
        return printf("ptrace=%s\n", result(ptrace(PTRACE_ATTACH, atoi(argv[2]), 0, 0))), 0;
    if (!strcmp(cmd, "vmread") && argc > 2) {  // EFAULT: allowed (address 0 is never mapped)
        char byte;
        struct iovec l = {&byte, 1}, r = {NULL, 1};
        return printf("vmread=%s\n",
                      result(syscall(SYS_process_vm_readv, atoi(argv[2]), &l, 1L, &r, 1L, 0L))),
               0;
    }
    for (int i = 2; i < argc; ++i) {
        if (!strcmp(cmd, "stat")) stat_path(argv[i]);
        else if (!strcmp(cmd, "read")) read_path(argv[i]);
        else if (!strcmp(cmd, "write")) write_path(argv[i]);
    }
    return 0;
}
