/* A program that leaks communicators until MPI has no context id left for another, then ends
 * normally: with MPI_ERRORS_RETURN on MPI_COMM_WORLD it duplicates MPI_COMM_WORLD until a
 * duplicate fails (MPICH's limit is 2,048 context ids; Open MPI's is far higher, so it stops
 * after MAX_LEAKED), puts MPI_ERRORS_ARE_FATAL back, makes one MPI_Allreduce of 4 doubles, and
 * calls MPI_Finalize. Bare, the job succeeds. The profiler's own communicator cannot be made in
 * its MPI_Finalize: that must not abort the job. Rank 0 prints "leaked N" (N duplicates made).
 *
 * With the argument "rank0", only rank 0 leaks, duplicates of MPI_COMM_SELF (local), until one
 * fails, however many that takes (Open MPI: 65,532): the other ranks still have context ids,
 * and a creation that fails on one rank alone must not leave the others waiting (under Open MPI
 * it did: they waited in MPI_Comm_create_group, and rank 0 crashed in MPI_Finalize). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define MAX_LEAKED 5000

int main(int argc, char **argv)
{
    int rank, leaked = 0;
    int rank0 = argc > 1 && strcmp(argv[1], "rank0") == 0;
    double a[4] = {1, 2, 3, 4}, s[4];
    MPI_Comm c;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank0) {
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        while (rank == 0 && MPI_Comm_dup(MPI_COMM_SELF, &c) == MPI_SUCCESS)
            leaked++;
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    } else {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        while (leaked < MAX_LEAKED && MPI_Comm_dup(MPI_COMM_WORLD, &c) == MPI_SUCCESS)
            leaked++;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    MPI_Allreduce(a, s, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("leaked %d\n", leaked);
    MPI_Finalize();
    return 0;
}
