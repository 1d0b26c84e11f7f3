// tools/hot-text.sh's profiling build only: which of gpubox's functions a run calls, in every
// process of it. gpubox's objects are compiled with -pg, so that each function calls mcount
// (mcount.S) on entry, which passes the return address, inside the function, to
// hot_text_mark(). The map is a shared anonymous mapping made at the first call, before any fork
// or clone, so that the sandbox's init and the workload's process before its exec mark it too,
// without a system call (none their seccomp filter or their closed fds could refuse); the
// process that made it appends the marked places to $HOT_TEXT_OUT when it exits. One byte per 16
// bytes of text.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern char __executable_start[], etext[];

static unsigned char* marks;
static size_t slots;
static pid_t owner;

void hot_text_mark(uintptr_t at) {
    if (!owner) {
        owner = getpid();
        slots = ((uintptr_t)etext - (uintptr_t)__executable_start) / 16 + 1;
        void* p = mmap(NULL, slots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) marks = p;
    }
    const uintptr_t slot = (at - (uintptr_t)__executable_start) / 16;
    if (marks && slot < slots) marks[slot] = 1;
}

__attribute__((destructor)) static void write_marks(void) {
    const char* out = getenv("HOT_TEXT_OUT");
    if (!marks || !out || getpid() != owner) return;
    FILE* f = fopen(out, "a");
    if (!f) return;
    for (size_t i = 0; i < slots; i++)
        if (marks[i]) fprintf(f, "%lx\n", (unsigned long)((uintptr_t)__executable_start + i * 16));
    fclose(f);
}
