/*
 * What the profiler's PMI-1 look-ups cost under MPICH's Hydra (profiler/src/pmi1.rs, peers.rs):
 * the time of one `get` of a key the node's proxy holds (a profiled rank's key after MPI_Init's
 * barrier) and of one nobody put (asked of mpiexec), per rank, next to a bare MPI_Init.
 *
 *   mpiexec.mpich -n 4 ./pmi1_gets [GETS [MISSING_GETS]]
 *
 * Run bare (not preloaded): before MPI_Init each rank opens the PMI dialog and puts its key as
 * the profiler does, then times GETS gets of present keys (round robin over the ranks) and
 * MISSING_GETS (default GETS) of missing keys; `time` around it gives the CPU they cost. Rank 0 prints the medians over ranks, in microseconds per get, and what
 * learning the peers of a 1,000-rank job would cost a rank (1,001 present gets, or one present
 * and 999 missing when only one rank is profiled).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fd = -1;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One request line, one response line: peeked, then read to its newline (as pmi1.rs does). */
static int exchange(const char *request, char *reply, size_t size)
{
    if (send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request))
        return -1;
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t k = recv(fd, reply + n, size - 1 - n, MSG_PEEK);
        if (k <= 0)
            return -1;
        char *end = memchr(reply + n, '\n', (size_t)k);
        size_t take = end ? (size_t)(end - (reply + n)) + 1 : (size_t)k;
        if (recv(fd, reply + n, take, 0) != (ssize_t)take)
            return -1;
        n += take;
        if (end)
            break;
    }
    reply[n] = 0;
    return 0;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int gets = argc > 1 ? atoi(argv[1]) : 1000;
    int missing_gets = argc > 2 ? atoi(argv[2]) : gets;
    const char *pmi_fd = getenv("PMI_FD");
    if (!pmi_fd || !getenv("PMI_RANK")) {
        fprintf(stderr, "pmi1_gets: run under mpiexec.mpich (Hydra), bare\n");
        return 1;
    }
    fd = atoi(pmi_fd);
    int me = atoi(getenv("PMI_RANK"));
    char reply[2048], request[1024], kvs[300] = {0};
    if (exchange("cmd=init pmi_version=1 pmi_subversion=1\n", reply, sizeof reply) ||
        exchange("cmd=get_my_kvsname\n", reply, sizeof reply) ||
        sscanf(reply, "cmd=my_kvsname kvsname=%299s", kvs) != 1)
        return 1;
    snprintf(request, sizeof request, "cmd=put kvsname=%s key=mpistat.%d value=0\n", kvs, me);
    if (exchange(request, reply, sizeof reply))
        return 1;
    double t0 = now_us();
    MPI_Init(&argc, &argv);
    double init_us = now_us() - t0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double mine[3] = {init_us, 0, 0};
    for (int missing = 0; missing < 2; missing++) {
        int n = missing ? missing_gets : gets;
        t0 = now_us();
        for (int i = 0; i < n; i++) {
            snprintf(request, sizeof request, "cmd=get kvsname=%s key=%s.%d\n", kvs,
                     missing ? "nobody" : "mpistat", i % size);
            if (exchange(request, reply, sizeof reply) ||
                (strstr(reply, "rc=0") != NULL) == missing)
                return 1;
        }
        mine[1 + missing] = n > 0 ? (now_us() - t0) / n : 0;
    }
    double *all = rank == 0 ? malloc(sizeof(double) * 3 * (size_t)size) : NULL;
    MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double med[3], *col = malloc(sizeof(double) * (size_t)size);
        for (int c = 0; c < 3; c++) {
            for (int r = 0; r < size; r++)
                col[r] = all[3 * r + c];
            qsort(col, (size_t)size, sizeof(double), compare);
            med[c] = col[size / 2];
        }
        printf("ranks %d, medians over ranks: MPI_Init %.0f us; get of a present key %.1f us, "
               "of a missing key %.1f us\n",
               size, med[0], med[1], med[2]);
        printf("1,000 ranks, per rank: all profiled %.1f ms (%.2f x MPI_Init here); "
               "one profiled %.1f ms\n",
               1001 * med[1] / 1e3, 1001 * med[1] / med[0], (2 * med[1] + 999 * med[2]) / 1e3);
    }
    MPI_Finalize();
    return 0;
}
