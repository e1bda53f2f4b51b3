/*
 * A PMPI layer for bench/finalize.sh, preloaded after libmpistat.so: libmpistat's MPI_Finalize
 * does its reduction and sends the record, then calls the next PMPI_Finalize in the search
 * order (profiler/src/next.rs), which is this one. It notes when that happens, on the clock
 * bench/startstop.c reads, in finalize_clock_entered_ms, and calls the MPI library's. The time
 * from the program's call of MPI_Finalize to here is the profiler's own part of it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

double finalize_clock_entered_ms = 0;

int PMPI_Finalize(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    finalize_clock_entered_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "PMPI_Finalize");
    return next ? next() : 1;
}
