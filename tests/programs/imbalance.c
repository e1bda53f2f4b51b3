/* Synthetic load-imbalance benchmark after Böhme et al., "Scalable critical-path based performance
 * analysis", Sec. IV-A: `iters` iterations of sleep-based "work" followed by an MPI_Allreduce on
 * MPI_COMM_WORLD (one superstep each).
 *
 *   imbalance SCENARIO ITERS WORK_MS [FACTOR]
 *
 * Average work per rank and iteration is WORK_MS in every scenario (total work constant). In the
 * imbalanced ones one rank is overloaded to 1.25 x WORK_MS per iteration and the others share
 * the rest ((P - 1.25) / (P - 1) x WORK_MS), so each iteration takes 25 % longer than balanced:
 *   balanced  every rank WORK_MS
 *   static    rank 1 is overloaded in every iteration
 *   dynamic   rank k % P is overloaded in iteration k
 *   mixed     rank 0 is overloaded in the first half of the iterations, rank 1 in the second
 *   mpmd      every rank sleeps FACTOR x WORK_MS (give each MPMD application its own FACTOR)
 * Prints "imbalance rank R done" per rank. With IMBALANCE_GAPS_DIR set, rank R also writes
 * DIR/gaps.R: one line per superstep k, the microseconds it spent outside MPI_Allreduce before
 * the k-th one (the seed's d(k), measured by the program itself), the last line from the last
 * one to MPI_Finalize. The file is written after MPI_Finalize, so that writing it is in no
 * superstep. Tests compare the profiler's estimates with these gaps: on an oversubscribed
 * machine sleeps overshoot by a millisecond or more, differently per MPI. (A file, not stdout:
 * mpiexec.mpich forwards output in chunks that can cut long lines.) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
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
    double left = now_us();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: imbalance SCENARIO ITERS WORK_MS [FACTOR]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *scenario = argv[1];
    int iters = atoi(argv[2]);
    double w = atof(argv[3]);
    double factor = argc > 4 ? atof(argv[4]) : 1.0;
    double over = 1.25 * w;
    double under = size > 1 ? (size - 1.25) / (size - 1) * w : w;
    double *gaps = calloc((size_t)iters + 1, sizeof *gaps);
    if (!gaps) MPI_Abort(MPI_COMM_WORLD, 3);
    for (int k = 0; k < iters; k++) {
        int overloaded = -1;
        if (strcmp(scenario, "static") == 0) overloaded = 1 % size;
        else if (strcmp(scenario, "dynamic") == 0) overloaded = k % size;
        else if (strcmp(scenario, "mixed") == 0) overloaded = (k < iters / 2 ? 0 : 1) % size;
        double ms;
        if (strcmp(scenario, "mpmd") == 0) ms = factor * w;
        else if (overloaded < 0) ms = w;
        else ms = rank == overloaded ? over : under;
        work(ms);
        int one = 1, sum = 0;
        gaps[k] = now_us() - left;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        left = now_us();
    }
    printf("imbalance rank %d done\n", rank);
    fflush(stdout);
    /* The last gap ends where MPI_Finalize is called, and the file is written after it: writing
     * it takes milliseconds on a busy machine, which would be the profiler's last superstep
     * and not the program's. */
    gaps[iters] = now_us() - left;
    MPI_Finalize();
    int rc = 0;
    const char *dir = getenv("IMBALANCE_GAPS_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/gaps.%d", dir, rank);
        FILE *f = fopen(path, "w");
        if (!f) return 4;
        for (int k = 0; k <= iters; k++) fprintf(f, "%.0f\n", gaps[k]);
        if (fclose(f) != 0) rc = 4;
    }
    free(gaps);
    return rc;
}
