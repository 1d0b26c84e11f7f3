// test_slurm_mpi.sh's MPI program: hello with rank and size, allreduce sums, a 1 MiB message
// passed round the ring and checked byte for byte, and an 8-byte ping-pong between 0 and 1.
// Each rank prints its lines; rank 0 ends with "mpi_test: ok" or "mpi_test: FAILED".
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    printf("rank %d of %d pid %d\n", rank, size, (int)getpid());
    fflush(stdout);
    long mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size + 1) / 2) bad |= 1;
    double d = 0.5 * rank, dsum = 0;
    MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (dsum != 0.25 * size * (size - 1)) bad |= 2;
    enum { kBig = 1 << 20 };
    unsigned char* out = malloc(kBig);
    unsigned char* in = malloc(kBig);
    for (int i = 0; i < kBig; i++) out[i] = (unsigned char)(i * 7 + rank * 13);
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(out, kBig, MPI_BYTE, next, 1, in, kBig, MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < kBig; i++)
        if (in[i] != (unsigned char)(i * 7 + prev * 13)) {
            bad |= 4;
            break;
        }
    if (size > 1 && rank < 2) {
        long ball = 0;
        for (int i = 0; i < 100; i++) {
            if (rank == 0) {
                ball = i;
                MPI_Send(&ball, 1, MPI_LONG, 1, 2, MPI_COMM_WORLD);
                MPI_Recv(&ball, 1, MPI_LONG, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (ball != i + 1) bad |= 8;
            } else {
                MPI_Recv(&ball, 1, MPI_LONG, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                ball++;
                MPI_Send(&ball, 1, MPI_LONG, 0, 2, MPI_COMM_WORLD);
            }
        }
    }
    int all = 0;
    MPI_Reduce(&bad, &all, 1, MPI_INT, MPI_BOR, 0, MPI_COMM_WORLD);
    printf("rank %d: allreduce %ld %s, 1 MiB from %d %s\n", rank, sum, bad & 3 ? "WRONG" : "right",
           prev, bad & 4 ? "CORRUPT" : "intact");
    if (rank == 0) printf("mpi_test: %s (bits %d)\n", all ? "FAILED" : "ok", all);
    free(out);
    free(in);
    MPI_Finalize();
    return all ? 1 : 0;
}
