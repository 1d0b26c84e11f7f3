/* An MPI job for the Slurm tests and bench/mpi.sh (Open MPI or MPICH: plain MPI-1 calls).
 *   mpi_ranks           every rank prints "rank R of N on HOST node NODE" (NODE: Slurm's
 *                       SLURMD_NODENAME, or -), then checks an allreduce of
 *                       the ranks (sum, max) and a 1 MiB message around the ring (each byte a
 *                       function of sender and offset): "rank R: allreduce ok" / "ring ok" or
 *                       what was wrong; exit 1 on anything wrong.
 *   mpi_ranks init      MPI_Init and MPI_Finalize only (start-up).
 *   mpi_ranks bench N   ranks 0 and 1: N round trips of 8 bytes and of 1 MiB; all ranks: N
 *                       8-byte allreduces; rank 0 prints "pingpong8 US", "pingpong1m US",
 *                       "allreduce8 US" (one-way latency, or time per allreduce, microseconds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG (1 << 20)

static unsigned char pattern(int sender, long i) {
    return (unsigned char)(sender * 131 + i * 7 + (i >> 12));
}

static double pingpong(int rank, char* buf, int size, int n) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / n / 2 * 1e6;
}

static int bench(int rank, int size, int n) {
    char* buf = calloc(1, BIG);
    if (!buf) return 1;
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "bench: needs 2 ranks or more\n");
        return 1;
    }
    pingpong(rank, buf, 8, n / 10 + 1); /* warm-up */
    double p8 = pingpong(rank, buf, 8, n);
    pingpong(rank, buf, BIG, n / 100 + 1);
    double p1m = pingpong(rank, buf, BIG, n / 10 + 1);
    long in = rank, out = 0;
    for (int i = 0; i < n / 10 + 1; i++)
        MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double ar = (MPI_Wtime() - t0) / n * 1e6;
    if (rank == 0) printf("pingpong8 %.3f\npingpong1m %.3f\nallreduce8 %.3f\n", p8, p1m, ar);
    free(buf);
    return 0;
}

int main(int argc, char** argv) {
    int rank, size, len, bad = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "init") == 0) { /* start-up only */
        MPI_Finalize();
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "bench") == 0) {
        int rc = bench(rank, size, atoi(argv[2]));
        MPI_Finalize();
        return rc;
    }
    MPI_Get_processor_name(host, &len);
    const char* node = getenv("SLURMD_NODENAME");
    printf("rank %d of %d on %s node %s\n", rank, size, host, node ? node : "-");
    fflush(stdout);

    long sum = 0, max = 0, mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (sum == (long)size * (size - 1) / 2 && max == size - 1) {
        printf("rank %d: allreduce ok (sum %ld)\n", rank, sum);
    } else {
        printf("rank %d: allreduce WRONG: sum %ld max %ld\n", rank, sum, max);
        bad = 1;
    }

    unsigned char* out = malloc(BIG);
    unsigned char* in = malloc(BIG);
    if (!out || !in) return 1;
    for (long i = 0; i < BIG; i++) out[i] = pattern(rank, i);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Sendrecv(out, BIG, MPI_BYTE, to, 7, in, BIG, MPI_BYTE, from, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    long wrong = 0;
    for (long i = 0; i < BIG; i++) wrong += in[i] != pattern(from, i);
    if (wrong == 0) {
        printf("rank %d: ring ok (1 MiB from rank %d)\n", rank, from);
    } else {
        printf("rank %d: ring WRONG: %ld of %d bytes from rank %d\n", rank, wrong, BIG, from);
        bad = 1;
    }
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
