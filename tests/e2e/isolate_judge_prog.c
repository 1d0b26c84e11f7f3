// A submission for tests/e2e/test_isolate_mode.sh, built there with gcc -static: one program,
// one behaviour per argv[1], as a judge's correct, wrong, crashing and hostile submissions.
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void* spin(void* arg) {
    for (volatile unsigned long i = 0;; ++i) (void)arg;
    return NULL;
}

int main(int argc, char** argv) {
    const char* m = argc > 1 ? argv[1] : "ok";
    long a = 0, b = 0;
    if (!strcmp(m, "ok") || !strcmp(m, "wa")) {
        if (scanf("%ld %ld", &a, &b) != 2) return 4;
        printf("%ld\n", !strcmp(m, "ok") ? a + b : a - b);
        return 0;
    }
    if (!strcmp(m, "exit3")) return 3;
    if (!strcmp(m, "segv")) return *(volatile int*)0;
    if (!strcmp(m, "cpu"))
        for (volatile unsigned long i = 0;; ++i) {}
    if (!strcmp(m, "sleep")) {  // says so first: the test waits for that, not for a time
        printf("sleeping\n");
        fflush(stdout);
        return sleep(30), 0;
    }
    if (!strcmp(m, "alloc")) {  // 512 MiB, 8 MiB at a time, every page touched, then held
        for (int i = 0; i < 64; ++i) {
            char* p = malloc(8 << 20);
            if (!p) return printf("malloc failed after %d MiB\n", i * 8), 1;
            memset(p, i, 8 << 20);
            usleep(5000);
        }
        return sleep(30), 0;  // a sampled memory limit may come late on a loaded machine
    }
    if (!strcmp(m, "forkbomb")) {
        int made = 0;
        for (pid_t p; made < 1000 && (p = fork()) >= 0; ++made)
            if (p == 0) sleep(2), _exit(0);
        printf("%d\n", made);
        fflush(stdout);
        return sleep(1), 0;
    }
    if (!strcmp(m, "flood")) {
        static char line[4096];
        memset(line, 'x', sizeof line);
        for (;;) fwrite(line, 1, sizeof line, stdout);
    }
    if (!strcmp(m, "threads")) {
        pthread_t t[4];
        for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, spin, NULL);
        return pthread_join(t[0], NULL), 0;
    }
    if (!strcmp(m, "read")) {  // read a host file by its path
        FILE* f = fopen(argv[2], "r");
        if (!f) return printf("%s\n", strerror(errno)), 2;
        return printf("read %zu bytes\n", fread(malloc(1 << 16), 1, 1 << 16, f)), 0;
    }
    if (!strcmp(m, "symlink")) return symlink("/etc/shadow", "planted"), 0;
    if (!strcmp(m, "ls")) {  // the names in a directory, sorted, on one line
        struct dirent** e;
        const int n = scandir(argv[2], &e, NULL, alphasort);
        if (n < 0) return printf("%s\n", strerror(errno)), 2;
        for (int i = 0, first = 1; i < n; ++i)
            if (e[i]->d_name[0] != '.') printf("%s%s", first ? "" : " ", e[i]->d_name), first = 0;
        return printf("\n"), 0;
    }
    return 5;
}
