/* A program with its own PMPI tool: it defines MPI_Barrier, which counts and calls PMPI_Barrier.
 * Every rank calls MPI_Barrier BARRIERS times and prints "rank <r> user barrier wrapper count <n>". */
#include <mpi.h>
#include <stdio.h>

#define BARRIERS 6

static int user_wrapper_calls = 0;

int MPI_Barrier(MPI_Comm comm)
{
    user_wrapper_calls++;
    return PMPI_Barrier(comm);
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < BARRIERS; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d user barrier wrapper count %d\n", rank, user_wrapper_calls);
    MPI_Finalize();
    return 0;
}
