/* Counter split: every rank burns ITERS x BURN_MS of its own CPU time outside MPI (measured with
 * CLOCK_THREAD_CPUTIME_ID, so the amount does not depend on sharing the cores), then rank 0 sleeps
 * SLEEP_MS while the others wait in MPI_Barrier.
 *
 *   counters ITERS BURN_MS SLEEP_MS
 *
 * Prints "counters rank R done" per rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = argc > 1 ? atoi(argv[1]) : 5;
    double burn = argc > 2 ? atof(argv[2]) : 40;
    double sleep_ms = argc > 3 ? atof(argv[3]) : 50;
    volatile double x = 0;
    for (int k = 0; k < iters; k++) {
        double start = cpu_ms();
        while (cpu_ms() - start < burn)
            for (int i = 0; i < 10000; i++) x += i * 0.5;
        if (rank == 0) {
            struct timespec s = {(time_t)(sleep_ms / 1000), (long)(sleep_ms * 1e6) % 1000000000L};
            nanosleep(&s, NULL);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    printf("counters rank %d done\n", rank);
    MPI_Finalize();
    return 0;
}
