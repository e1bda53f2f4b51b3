/* Rank 0 sends rank 1 one element of contiguous types of 1, 2, ... 8 ints, each created,
 * used and freed in turn, and every rank reduces and gathers one element of each on
 * MPI_COMM_WORLD; freed handles are usually reused for the next type, which must not keep the
 * old size in the profiler's type-size cache nor take a collective's steady path with the old
 * type's memo (the same handle, count and communicator). Prints "reused N" (handles that came
 * back) on rank 0. */
#include <mpi.h>
#include <stdio.h>

/* A reduction for any type: the result is what the rank had. */
static void keep(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)in, (void)inout, (void)len, (void)type;
}

int main(int argc, char **argv) {
    int rank, buf[8] = {0}, out[16] = {0}, reused = 0;
    MPI_Op op;
    MPI_Datatype previous = MPI_DATATYPE_NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Op_create(keep, 1, &op);
    for (int n = 1; n <= 8; n++) {
        MPI_Datatype t;
        MPI_Type_contiguous(n, MPI_INT, &t);
        MPI_Type_commit(&t);
        reused += t == previous;
        if (rank == 0) MPI_Send(buf, 1, t, 1, n, MPI_COMM_WORLD);
        if (rank == 1) MPI_Recv(buf, 1, t, 0, n, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(buf, out, 1, t, op, MPI_COMM_WORLD);
        MPI_Allgather(buf, 1, t, out, 1, t, MPI_COMM_WORLD);
        previous = t;
        MPI_Type_free(&t);
    }
    MPI_Op_free(&op);
    if (rank == 0) printf("reused %d\n", reused);
    MPI_Finalize();
    return 0;
}
