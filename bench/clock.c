/* What one read of libmpistat's clock costs on this host: rdtsc (its clock wherever the TSC is
 * invariant), 10 million reads back to back, median of 5 runs. bench/run.sh prints it beside its
 * tables: any tool that times each call pays two reads a call (bench/floor.c), and what a read
 * costs depends on the host's CPU (11.3 ns on one virtual machine's host, where the floor's
 * MPI_Comm_rank cost 21 ns a call; about half that on another's).
 *
 * Output: clock rdtsc_ns=F */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    enum { RUNS = 5, READS = 10000000 };
    double ns[RUNS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < READS; i++)
            sink += __rdtsc();
        ns[r] = (now_ns() - t0) / READS;
    }
    qsort(ns, RUNS, sizeof ns[0], cmp_double);
    printf("clock rdtsc_ns=%.2f\n", ns[RUNS / 2]);
    return sink == 0; /* the sum is never 0: uses it */
}
