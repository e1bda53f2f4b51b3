/*
 * Global synchronising collectives on communicators other than MPI_COMM_WORLD, for the
 * superstep count: 3 MPI_Allreduce on a duplicate of MPI_COMM_WORLD (supersteps), then, after
 * freeing it, 4 on each half of the world (MPI_Comm_split by rank parity: not supersteps; MPI
 * often hands the freed duplicate's handle to the new communicator, which must not be taken
 * for the duplicate), then 2 MPI_Barrier on a second duplicate (supersteps). With the last
 * superstep, ended by MPI_Finalize, a record shows 6. Needs an even number of ranks >= 2.
 * Prints "superstep_comms rank R reused 0|1" (1: the half got the first duplicate's handle),
 * then "superstep_comms rank R done".
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank;
    double in = 1.0, out = 0.0;
    MPI_Comm dup, half, dup2, first;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, dup);
    memcpy(&first, &dup, sizeof first);
    MPI_Comm_free(&dup);

    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int reused = memcmp(&first, &half, sizeof half) == 0;
    for (int i = 0; i < 4; i++)
        MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, half);
    MPI_Comm_free(&half);

    MPI_Comm_dup(MPI_COMM_WORLD, &dup2);
    for (int i = 0; i < 2; i++)
        MPI_Barrier(dup2);
    MPI_Comm_free(&dup2);

    printf("superstep_comms rank %d reused %d\nsuperstep_comms rank %d done\n", rank, reused, rank);
    MPI_Finalize();
    return 0;
}
