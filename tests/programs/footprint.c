/* Prints, per rank, how much of libmpistat's code is resident after MPI_Init and a loop of
 * common calls: "code rss_kb=N size_kb=M" from /proc/self/smaps (r-xp mapping of libmpistat). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void report_code_residency(int rank) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    int in_code = 0;
    unsigned long start, end, rss_kb = 0, size_kb = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) {
            in_code = strstr(line, "libmpistat") != NULL && strcmp(perms, "r-xp") == 0;
            if (in_code) size_kb += (end - start) / 1024;
        } else if (in_code && strncmp(line, "Rss:", 4) == 0) {
            unsigned long kb;
            if (sscanf(line + 4, "%lu", &kb) == 1) rss_kb += kb;
        }
    }
    fclose(f);
    printf("rank %d code rss_kb=%lu size_kb=%lu\n", rank, rss_kb, size_kb);
}

int main(int argc, char **argv) {
    int rank, size, flag;
    double x = 1, y = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status status;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 100; i++) {
        MPI_Test(&req, &flag, &status);
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &status);
        MPI_Sendrecv(&x, 1, MPI_DOUBLE, (rank + 1) % size, 0, &y, 1, MPI_DOUBLE,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    report_code_residency(rank);
    MPI_Finalize();
    return 0;
}
