/* Rank 0 sends rank 1 one element of contiguous types of 1, 2, ... 8 ints, each created,
 * used and freed in turn; freed handles are usually reused for the next type, which must not
 * keep the old size in the profiler's type-size cache. Prints "reused N" (handles that came
 * back) on rank 0. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, buf[8] = {0}, reused = 0;
    MPI_Datatype previous = MPI_DATATYPE_NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int n = 1; n <= 8; n++) {
        MPI_Datatype t;
        MPI_Type_contiguous(n, MPI_INT, &t);
        MPI_Type_commit(&t);
        reused += t == previous;
        if (rank == 0) MPI_Send(buf, 1, t, 1, n, MPI_COMM_WORLD);
        if (rank == 1) MPI_Recv(buf, 1, t, 0, n, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        previous = t;
        MPI_Type_free(&t);
    }
    if (rank == 0) printf("reused %d\n", reused);
    MPI_Finalize();
    return 0;
}
