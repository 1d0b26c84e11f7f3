/* A judge's serial loop: ROUNDS rounds; in each, every command once, in an order drawn afresh
 * (a fixed seed): a run is slowed by what the one before it left behind (a network namespace
 * the kernel tears down in a worker, grace periods), so no command may always follow the same
 * one. Each run is forked and exec'd, its output discarded, and waited for; printed per command:
 * the median wall time, its quartiles, and the CPU of the run's whole tree (wait4's rusage).
 *
 *   serial_loop ROUNDS CMD [ARG...] [:: CMD [ARG...]]...
 *
 * "{N}" in an argument stands for the round's number: a meta file of its own for each run, as CMS
 * names them (run.log.N); overwriting one file on ext4 makes its writer's close flush it.
 *
 * GAP_MS in the environment: a pause before each run, that long (a judge that runs a submission
 * now and then: what the kernel keeps warm for a second after use, it then has to set up again).
 *
 * A command that fails is reported on stderr (a broken row is no measurement). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kMaxCmds = 16 };

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static double ms(const struct timeval* t) { return t->tv_sec * 1e3 + t->tv_usec / 1e3; }

/* `cmd` with "{N}" in its arguments replaced by `round`, in `out` (freed by the next call). */
static char** for_round(char** cmd, int round, char** out, int max) {
    static char* made[256];
    static int n_made = 0;
    for (int i = 0; i < n_made; ++i) free(made[i]);
    n_made = 0;
    int i = 0;
    for (; cmd[i] && i < max - 1; ++i) {
        const char* at = strstr(cmd[i], "{N}");
        if (!at || n_made == 256) {
            out[i] = cmd[i];
            continue;
        }
        const size_t len = strlen(cmd[i]) + 16;
        char* s = malloc(len);
        snprintf(s, len, "%.*s%d%s", (int)(at - cmd[i]), cmd[i], round, at + 3);
        out[i] = made[n_made++] = s;
    }
    out[i] = NULL;
    return out;
}

int main(int argc, char** argv) {
    if (argc < 3) return fprintf(stderr, "usage: serial_loop ROUNDS CMD [ARG...] [:: CMD...]\n"), 2;
    const int rounds = atoi(argv[1]);
    char** cmds[kMaxCmds];
    int n = 0;
    cmds[n++] = &argv[2];
    for (int i = 2; i < argc; ++i)
        if (!strcmp(argv[i], "::")) {
            if (n == kMaxCmds)
                return fprintf(stderr, "serial_loop: at most %d commands\n", kMaxCmds), 2;
            argv[i] = NULL;
            cmds[n++] = &argv[i + 1];
        }
    if (rounds < 1) return fprintf(stderr, "serial_loop: ROUNDS must be at least 1\n"), 2;
    double* wall[kMaxCmds];
    double cpu[kMaxCmds] = {0};
    int failed[kMaxCmds] = {0};
    for (int c = 0; c < n; ++c) wall[c] = calloc((size_t)rounds, sizeof(double));
    const int devnull = open("/dev/null", O_WRONLY);
    const char* gap = getenv("GAP_MS");
    const long gap_ms = gap ? atol(gap) : 0;
    srand(12345);
    for (int r = 0; r < rounds; ++r) {
        int order[kMaxCmds];
        for (int j = 0; j < n; ++j) order[j] = j;
        for (int j = n - 1; j > 0; --j) {
            const int k = rand() % (j + 1), t = order[j];
            order[j] = order[k], order[k] = t;
        }
        for (int j = 0; j < n; ++j) {
            const int c = order[j];
            char* argv_r[256];
            char** cmd = for_round(cmds[c], r, argv_r, 256);
            if (gap_ms > 0) {
                const struct timespec pause = {gap_ms / 1000, gap_ms % 1000 * 1000000L};
                nanosleep(&pause, NULL);
            }
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            const pid_t pid = fork();
            if (pid == 0) {
                dup2(devnull, 1), dup2(devnull, 2);
                execvp(cmd[0], cmd);
                _exit(127);
            }
            int status = 0;
            struct rusage ru;
            wait4(pid, &status, 0, &ru);
            clock_gettime(CLOCK_MONOTONIC, &b);
            if (!WIFEXITED(status) || WEXITSTATUS(status)) ++failed[c];
            wall[c][r] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
            cpu[c] += ms(&ru.ru_utime) + ms(&ru.ru_stime);
        }
    }
    for (int c = 0; c < n; ++c) {
        qsort(wall[c], (size_t)rounds, sizeof(double), by_value);
        printf("%d %.3f %.3f %.3f %.3f %s\n", c, wall[c][rounds / 2], wall[c][rounds / 4],
               wall[c][3 * rounds / 4], cpu[c] / rounds, cmds[c][0]);
        if (failed[c]) fprintf(stderr, "serial_loop: command %d failed %d times\n", c, failed[c]);
    }
    return 0;
}
