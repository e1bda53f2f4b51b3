/* MPI_Pcontrol on 2 ranks: rank 0 sends 5 ints to rank 1 SENT_A times, calls MPI_Pcontrol(2)
 * (subtotals: MPI_Send SENT_A), pauses counting with MPI_Pcontrol(0), sends SENT_PAUSED more,
 * resumes with MPI_Pcontrol(1) and sends SENT_C more. Rank 1 receives them all; both ranks
 * make the same MPI_Pcontrol(0)/(1) calls. Prints "pcontrol rank <r> ok". */
#include <mpi.h>
#include <stdio.h>

#define SENT_A 5
#define SENT_PAUSED 7
#define SENT_C 3

static void transfer(int rank, int n)
{
    int buf[5] = {1, 2, 3, 4, 5};
    for (int i = 0; i < n; i++) {
        if (rank == 0)
            MPI_Send(buf, 5, MPI_INT, 1, i, MPI_COMM_WORLD);
        else
            MPI_Recv(buf, 5, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    transfer(rank, SENT_A);
    if (rank == 0)
        MPI_Pcontrol(2);
    MPI_Pcontrol(0);
    transfer(rank, SENT_PAUSED);
    MPI_Pcontrol(1);
    transfer(rank, SENT_C);
    printf("pcontrol rank %d ok\n", rank);
    MPI_Finalize();
    return 0;
}
