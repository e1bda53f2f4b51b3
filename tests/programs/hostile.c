/* What a hostile environment (issue 34 §4) costs a job, per rank: how long MPI_Init took, the
 * peak resident set right after it (VmHWM of /proc/self/status), and whether a profiler
 * implementation (libmpistat_<family>.so, which the front loads at the first MPI call) is mapped:
 * "rank R init_ms=T hwm_kb=K implementation=0|1". Then a few calls, so that a profiled job has
 * a record worth the name, and MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long peak_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
    fclose(f);
    return kb;
}

static int implementation_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "/libmpistat_") != NULL) found = 1;
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    int rank, size;
    double x = 1, y = 0;
    double start = now_ms();
    MPI_Init(&argc, &argv);
    double init_ms = now_ms() - start;
    long hwm_kb = peak_kb();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 10; i++) {
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    printf("rank %d init_ms=%.1f hwm_kb=%ld implementation=%d\n", rank, init_ms, hwm_kb,
           implementation_mapped());
    fflush(stdout);
    MPI_Finalize();
    return y == size ? 0 : 1;
}
