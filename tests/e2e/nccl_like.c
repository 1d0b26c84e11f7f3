// test_slurm_mpi.sh's stand-in for NCCL's intra-node set-up, without a GPU: the ranks of a Slurm
// step (SLURM_PROCID, SLURM_NTASKS) meet over an abstract unix socket (NCCL's bootstrap and
// cuMem handle exchange), share a /dev/shm segment, import a peer's fd with pidfd_getfd (how
// NCCL takes a peer's cuMem fd) and read a peer's buffer with process_vm_readv (UCX's and Open
// MPI's cross-memory attach). Prints "nccl_like rank R: ok" or the step that failed.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

struct slot {
    volatile int ready;
    int pid, fd;
    unsigned long addr;
};

static int fail(int rank, const char* what) {
    printf("nccl_like rank %d: %s: %s\n", rank, what, strerror(errno));
    return 1;
}

static socklen_t abstract(struct sockaddr_un* a, const char* tag, int rank) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "nccl-like-%s-%d", tag, rank);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int main(void) {
    const char* r = getenv("SLURM_PROCID");
    const char* n = getenv("SLURM_NTASKS");
    const char* j = getenv("SLURM_JOB_ID");
    if (!r || !n || !j) return printf("nccl_like: not in a Slurm step\n"), 1;
    const int rank = atoi(r), size = atoi(n);
    if (size < 2 || size > 64) return printf("nccl_like: %d tasks\n", size), 1;
    char name[64];
    snprintf(name, sizeof name, "/nccl-like-%s", j);
    const int shm = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (shm < 0 || ftruncate(shm, 4096) != 0) return fail(rank, "shm_open /dev/shm");
    struct slot* slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    if (slots == MAP_FAILED) return fail(rank, "mmap");
    // An abstract socket per rank; the next rank connects and sends a byte.
    const int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a;
    socklen_t len = abstract(&a, j, rank);
    if (bind(ls, (struct sockaddr*)&a, len) != 0 || listen(ls, 4) != 0)
        return fail(rank, "bind abstract socket");
    // What the peer imports and reads: a memfd and a buffer, both with the rank's text.
    char text[64], buf[64];
    snprintf(text, sizeof text, "buffer of rank %d", rank);
    strcpy(buf, text);
    const int mfd = memfd_create("nccl-like", 0);
    if (mfd < 0 || write(mfd, text, strlen(text) + 1) < 0) return fail(rank, "memfd");
    slots[rank].pid = getpid();  // as the peer sees it: the ranks share a pid namespace
    slots[rank].fd = mfd;
    slots[rank].addr = (unsigned long)buf;
    __atomic_store_n(&slots[rank].ready, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < size; i++)
        for (int t = 0; !__atomic_load_n(&slots[i].ready, __ATOMIC_SEQ_CST); t++) {
            if (t > 6000)
                return printf("nccl_like rank %d: rank %d never came to /dev/shm\n", rank, i), 1;
            usleep(10000);
        }
    const int peer = (rank + 1) % size;
    const int c = socket(AF_UNIX, SOCK_STREAM, 0);
    len = abstract(&a, j, peer);
    if (connect(c, (struct sockaddr*)&a, len) != 0) return fail(rank, "connect abstract socket");
    if (write(c, "x", 1) != 1) return fail(rank, "write");
    const int in = accept(ls, NULL, NULL);
    char byte = 0;
    if (in < 0 || read(in, &byte, 1) != 1 || byte != 'x') return fail(rank, "accept");
    char want[64];
    snprintf(want, sizeof want, "buffer of rank %d", peer);
    const int pidfd = (int)syscall(SYS_pidfd_open, slots[peer].pid, 0);
    if (pidfd < 0) return fail(rank, "pidfd_open peer");
    const int got = (int)syscall(SYS_pidfd_getfd, pidfd, slots[peer].fd, 0);
    if (got < 0) return fail(rank, "pidfd_getfd peer's memfd");
    char back[64] = "";
    if (pread(got, back, sizeof back - 1, 0) < 0 || strcmp(back, want) != 0)
        return printf("nccl_like rank %d: peer's memfd holds \"%s\"\n", rank, back), 1;
    char remote[64] = "";
    struct iovec l = {remote, strlen(want) + 1}, rv = {(void*)slots[peer].addr, strlen(want) + 1};
    if (process_vm_readv(slots[peer].pid, &l, 1, &rv, 1, 0) < 0)
        return fail(rank, "process_vm_readv peer's buffer");
    if (strcmp(remote, want) != 0)
        return printf("nccl_like rank %d: peer's buffer holds \"%s\"\n", rank, remote), 1;
    // Nobody leaves before everyone has read: the peers' buffers must stay.
    __atomic_add_fetch(&slots[size].ready, 1, __ATOMIC_SEQ_CST);
    for (int t = 0; __atomic_load_n(&slots[size].ready, __ATOMIC_SEQ_CST) < size; t++) {
        if (t > 6000) return printf("nccl_like rank %d: the others never finished\n", rank), 1;
        usleep(10000);
    }
    if (rank == 0) shm_unlink(name);
    printf("nccl_like rank %d: ok\n", rank);
    return 0;
}
