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

// A row: what its child makes (flags for unshare, then a fresh filesystem of `fs` or a clone of
// /usr), and the row it builds on, whose cost it adds to.
struct Row {
    const char* name;
    int flags;       // unshare(); -1: nothing (fork and exit)
    const char* fs;  // fsopen() type, "bind" (an open_tree clone of /usr, dissolved at exit)
    const char* base;
};
static const struct Row kRows[] = {
    {"fork", -1, NULL, NULL},
    {"user", CLONE_NEWUSER, NULL, "fork"},
    {"user+mnt", CLONE_NEWUSER | CLONE_NEWNS, NULL, "user"},
    {"user+ipc", CLONE_NEWUSER | CLONE_NEWIPC, NULL, "user"},
    {"user+uts", CLONE_NEWUSER | CLONE_NEWUTS, NULL, "user"},
    {"user+cgroup", CLONE_NEWUSER | CLONE_NEWCGROUP, NULL, "user"},
    {"user+net", CLONE_NEWUSER | CLONE_NEWNET, NULL, "user"},
    {"user+mnt+bind", CLONE_NEWUSER | CLONE_NEWNS, "bind", "user+mnt"},
    {"user+mnt+tmpfs", CLONE_NEWUSER | CLONE_NEWNS, "tmpfs", "user+mnt"},
    {"user+mnt+devpts", CLONE_NEWUSER | CLONE_NEWNS, "devpts", "user+mnt"},
    {"user+mnt+net", CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET, NULL, "user"},
    {"user+mnt+net+sysfs", CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET, "sysfs", "user+mnt+net"},
};

// The child's work for row `r`; its exit status (0: done). What it made is closed at its exit.
static int make(const struct Row* r) {
    if (r->flags < 0) return 0;
    if (unshare(r->flags) != 0) return 1;
    if (!r->fs) return 0;
    if (!strcmp(r->fs, "bind"))
        return syscall(SYS_open_tree, AT_FDCWD, "/usr", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) < 0;
    const int fs = (int)syscall(SYS_fsopen, r->fs, FSOPEN_CLOEXEC);
    if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) return 3;
    return syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0) < 0 ? 4 : 0;
}

int main(int argc, char** argv) {
    if (argc == 2 && !strcmp(argv[1], "rows")) {  // each row and the row it builds on
        for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; i++)
            printf("%s %s\n", kRows[i].name, kRows[i].base ? kRows[i].base : "-");
        return 0;
    }
    const struct Row* r = NULL;
    for (size_t i = 0; argc == 3 && i < sizeof kRows / sizeof kRows[0]; i++)
        if (!strcmp(argv[2], kRows[i].name)) r = &kRows[i];
    if (!r) {
        fprintf(stderr, "usage: ns_cost rows | ns_cost N ROW\n");
        return 2;
    }
    const int n = atoi(argv[1]);
    const long hz = sysconf(_SC_CLK_TCK);
    const long long b0 = busy_ticks();
    const double t0 = now();
    for (int i = 0; i < n; i++) {
        const pid_t p = fork();
        if (p == 0) _exit(make(r));
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "ns_cost: %s: the child failed (status %d)\n", r->name, st);
            return 1;
        }
    }
    const double t1 = now();
    usleep(300000);  // the kernel's deferred teardown (RCU, kworkers) counted in
    const long long b1 = busy_ticks();
    printf("%-20s wall %7.1f us  cpu %7.1f us\n", r->name, (t1 - t0) / n * 1e6,
           (double)(b1 - b0) * 1e6 / (double)hz / n);
    return 0;
}
