/* Every rank returns from main without MPI_Finalize, after known calls: MPI_Barrier twice and
 * MPI_Allreduce (4 doubles) once on every rank; rank 0 also sends 5 messages of 10 ints to
 * MPI_PROC_NULL. The other ranks wait a second before they return, so that rank 0 is the first
 * to leave (mpirun then kills the rest). */
#include <mpi.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, buf[10] = {0};
    double a[4] = {1, 2, 3, 4}, s[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(a, s, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        for (int i = 0; i < 5; i++)
            MPI_Send(buf, 10, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    else
        sleep(1);
    return 0;
}
