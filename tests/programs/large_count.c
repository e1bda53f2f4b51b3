/* MPI-4 large-count routines (MPI_Count counts, MPI_Aint displacements), which MPICH 4 has and
 * Open MPI 4 lacks: rank 0 sends 100 doubles to rank 1 (posted 1000), an in-place allreduce of 7
 * doubles, an alltoallv of 15 doubles to each rank. Prints "large_count rank <r> ok" when the
 * data is right. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    static double buf[1000], in[1000];
    int rank, size, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 1000; i++)
        buf[i] = rank + 1;
    if (rank == 0) {
        MPI_Send_c(buf, 100, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Status st;
        MPI_Count got;
        MPI_Recv_c(in, 1000, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, &st);
        MPI_Get_count_c(&st, MPI_DOUBLE, &got);
        ok &= got == 100 && in[99] == 1.0;
    }
    MPI_Allreduce_c(MPI_IN_PLACE, buf, 7, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    ok &= buf[6] == size * (size + 1) / 2;
    MPI_Count counts[64];
    MPI_Aint displs[64];
    for (int r = 0; r < size && r < 64; r++) {
        counts[r] = 15;
        displs[r] = 15 * r;
    }
    MPI_Alltoallv_c(buf, counts, displs, MPI_DOUBLE, in, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    if (ok)
        printf("large_count rank %d ok\n", rank);
    MPI_Finalize();
    return ok ? 0 : 1;
}
