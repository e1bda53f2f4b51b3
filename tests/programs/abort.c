/* MPI_Abort from rank 1 after known calls: every rank calls MPI_Barrier twice and MPI_Allreduce
 * (4 doubles) once; then rank 1 sends 3 messages of 10 ints to MPI_PROC_NULL and aborts with
 * code 3, while the other ranks wait in MPI_Recv for a message that never comes. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, buf[10] = {0};
    double a[4] = {1, 2, 3, 4}, s[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(a, s, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        for (int i = 0; i < 3; i++)
            MPI_Send(buf, 10, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Recv(buf, 10, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
