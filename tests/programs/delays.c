/* A known delay pattern for trace mode (Böhme et al., "Identifying the root causes of wait states",
 * Fig. 2, and a Wait at Barrier loop):
 *
 *   delays DELAY_MS ITERS WORK_MS EXTRA_MS
 *
 * 1. After a barrier, rank 0 "computes" DELAY_MS (sleeps; the other ranks none) and then starts a
 *    point-to-point chain 0 -> 1 -> 2 -> ... -> P-1: rank 1 waits DELAY_MS in its receive (a Late
 *    Sender caused directly by rank 0's computation), and ranks 2..P-1 wait as long (indirectly:
 *    the wait propagates along the chain; the last rank waits in MPI_Wait of an MPI_Irecv).
 * 2. ITERS iterations: every rank works WORK_MS, rank 2 EXTRA_MS more, then MPI_Barrier: the
 *    other ranks wait EXTRA_MS at each barrier.
 * Each rank writes "delays rank R start S end E" (CLOCK_MONOTONIC ns, before its first and after
 * its last MPI call of the pattern) and "delays rank R arrivals A1 ... A_ITERS" (when it called
 * each loop barrier) to the file DELAYS_TIMINGS/rank-R if that variable names a directory, else to
 * stdout (where mpirun may split a long line and interleave it with another rank's output).
 * Work is sleeping, so that ranks do not compete for cores. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void work(double ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - ts.tv_sec * 1000.0) * 1e6);
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, token = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double delay_ms = argc > 1 ? atof(argv[1]) : 200.0;
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    double work_ms = argc > 3 ? atof(argv[3]) : 10.0;
    double extra_ms = argc > 4 ? atof(argv[4]) : 10.0;

    long long start = now_ns();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        work(delay_ms);
        MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD); /* DELAYED SEND */
    } else if (rank + 1 < size) {
        MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&token, 1, MPI_INT, rank + 1, 0, MPI_COMM_WORLD);
    } else {
        /* The chain's end receives nonblocking, without a status. */
        MPI_Request request;
        MPI_Irecv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long long *arrivals = malloc(sizeof(long long) * (iters > 0 ? iters : 1));
    for (int i = 0; i < iters; i++) {
        work(work_ms + (rank == 2 ? extra_ms : 0.0));
        arrivals[i] = now_ns();
        MPI_Barrier(MPI_COMM_WORLD); /* LOOP BARRIER */
    }
    long long end = now_ns();
    FILE *out = stdout;
    const char *dir = getenv("DELAYS_TIMINGS");
    if (dir != NULL) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank-%d", dir, rank);
        out = fopen(path, "w");
        if (out == NULL) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    fprintf(out, "delays rank %d start %lld end %lld\n", rank, start, end);
    fprintf(out, "delays rank %d arrivals", rank);
    for (int i = 0; i < iters; i++) {
        fprintf(out, " %lld", arrivals[i]);
    }
    fprintf(out, "\n");
    if (out != stdout) {
        fclose(out);
    }
    free(arrivals);
    MPI_Finalize();
    return 0;
}
