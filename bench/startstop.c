/*
 * Start-up and finalize cost per rank, for comparing bare runs with runs under libmpistat on one
 * node and on several (emulated) nodes (bench/nodes.sh).
 *
 *   STARTSTOP_OUT=PREFIX mpirun ... startstop [ITERS]
 *
 * Times MPI_Init, then ITERS 1-double MPI_Allreduce calls (the job's work, which also sets up the
 * connections a real job would) and a barrier, then MPI_Finalize, on each rank. Nothing can be
 * sent after MPI_Finalize, so each rank writes "RANK INIT_MS FINALIZE_MS HOOK_MS" to PREFIX.RANK,
 * HOOK_MS being the time from its call of MPI_Finalize to the MPI library's PMPI_Finalize when
 * bench/finalize_clock.c is preloaded after the profiler (the profiler's part; 0 without it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
    double t0 = now_ms();
    MPI_Init(&argc, &argv);
    double init_ms = now_ms() - t0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double in = 1.0, out;
    for (long i = 0; i < iters; i++)
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double f0 = now_ms();
    MPI_Finalize();
    double finalize_ms = now_ms() - f0;
    const double *entered = dlsym(RTLD_DEFAULT, "finalize_clock_entered_ms");
    double hook_ms = entered && *entered > 0 ? *entered - f0 : 0;
    const char *out_prefix = getenv("STARTSTOP_OUT");
    if (out_prefix) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", out_prefix, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d %.3f %.3f %.3f\n", rank, init_ms, finalize_ms, hook_ms);
            fclose(f);
        }
    }
    return 0;
}
