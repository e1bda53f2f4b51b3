/* Runs until killed (at most 10 minutes): every rank calls MPI_Barrier and sleeps 50 ms in a
 * loop; after the first barrier rank 0 prints "forever: running" (so a test knows MPI_Init is
 * over) and "forever: rank 0 pid <pid>", and flushes. For tests that end jobs by a signal
 * (scancel, a time limit, kill). */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    struct timespec pause = {0, 50 * 1000 * 1000};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("forever: running\nforever: rank 0 pid %d\n", (int)getpid());
        fflush(stdout);
    }
    for (int i = 0; i < 10 * 60 * 20; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        nanosleep(&pause, NULL);
    }
    MPI_Finalize();
    return 0;
}
