// What the kernel charges for each namespace and each filesystem a sandbox makes, made and torn
// down N times (bench/ns_cost.sh). Each row forks a child that makes it and exits; a row's cost
// is its busy CPU time over all CPUs (/proc/stat, after a settle for the kernel's deferred
// teardown work: a network namespace is dismantled by a kworker) per iteration, less the row it
// builds on. Run unprivileged: as gpubox makes them, in a user namespace of their own.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long busy_ticks(void) {
    FILE* f = fopen("/proc/stat", "r");
    long long v[8] = {0};
    if (!f || fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]) != 8)
        exit(2);
    fclose(f);
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // user nice system irq softirq steal
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

// A fresh filesystem of `type`, detached, closed at exit.
static int fresh_fs(const char* type) {
    const int fs = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC);
    if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) return 3;
    return syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0) < 0 ? 4 : 0;
}

// The child's work for row `what`; its exit status (0: done).
static int row(const char* what) {
    const int base = CLONE_NEWUSER;
    if (!strcmp(what, "fork")) return 0;
    if (!strcmp(what, "user")) return unshare(base) ? 1 : 0;
    if (!strcmp(what, "user+mnt")) return unshare(base | CLONE_NEWNS) ? 1 : 0;
    if (!strcmp(what, "user+ipc")) return unshare(base | CLONE_NEWIPC) ? 1 : 0;
    if (!strcmp(what, "user+uts")) return unshare(base | CLONE_NEWUTS) ? 1 : 0;
    if (!strcmp(what, "user+cgroup")) return unshare(base | CLONE_NEWCGROUP) ? 1 : 0;
    if (!strcmp(what, "user+net")) return unshare(base | CLONE_NEWNET) ? 1 : 0;
    if (!strcmp(what, "user+mnt+tmpfs")) return unshare(base | CLONE_NEWNS) ? 1 : fresh_fs("tmpfs");
    if (!strcmp(what, "user+mnt+devpts"))
        return unshare(base | CLONE_NEWNS) ? 1 : fresh_fs("devpts");
    if (!strcmp(what, "user+mnt+net")) return unshare(base | CLONE_NEWNS | CLONE_NEWNET) ? 1 : 0;
    if (!strcmp(what, "user+mnt+net+sysfs"))
        return unshare(base | CLONE_NEWNS | CLONE_NEWNET) ? 1 : fresh_fs("sysfs");
    if (!strcmp(what, "user+mnt+bind")) {  // a clone of a directory, dissolved at exit
        if (unshare(base | CLONE_NEWNS)) return 1;
        return syscall(SYS_open_tree, AT_FDCWD, "/usr", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) < 0
                   ? 2
                   : 0;
    }
    return 9;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ns_cost N ROW\n");
        return 2;
    }
    const int n = atoi(argv[1]);
    const char* what = argv[2];
    const long hz = sysconf(_SC_CLK_TCK);
    const long long b0 = busy_ticks();
    const double t0 = now();
    for (int i = 0; i < n; i++) {
        const pid_t p = fork();
        if (p == 0) _exit(row(what));
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "ns_cost: %s: the child failed (status %d)\n", what, st);
            return 1;
        }
    }
    const double t1 = now();
    usleep(300000);  // the kernel's deferred teardown (RCU, kworkers) counted in
    const long long b1 = busy_ticks();
    printf("%-20s wall %7.1f us  cpu %7.1f us\n", what, (t1 - t0) / n * 1e6,
           (double)(b1 - b0) * 1e6 / (double)hz / n);
    return 0;
}
