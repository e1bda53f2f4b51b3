/* Demo: a load-imbalanced job. Rank r computes (r+1) units per step, so the others wait in
 * MPI_Allreduce for the last rank: mpistat shows it as MPI time, unevenly spread over ranks.
 * The set-up phase is left out of the profile with MPI_Pcontrol(0)/(1). */
#include <mpi.h>
#include <stdio.h>

static double work(int units)
{
    volatile double x = 0; /* volatile: the loop is the point, keep the compiler from folding it */
    for (long i = 0; i < units * 2000000L; i++)
        x += 1e-9 * (double)i;
    return x;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Set-up: not part of what the user wants profiled. */
    MPI_Pcontrol(0);
    int params[4] = {20, 0, 0, 0};
    MPI_Bcast(params, 4, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Pcontrol(1);

    double total = 0;
    for (int step = 0; step < params[0]; step++) {
        double local = work(rank + 1), sum;
        MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("unbalanced: %d ranks, %d steps, total %.1f\n", size, params[0], total);
    MPI_Finalize();
    return 0;
}
