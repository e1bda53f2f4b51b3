/* Traffic whose split between on-node and off-node bytes is known for any placement of ranks on
 * nodes (tests/tests/deploy/nodes.rs computes it from the layout):
 *   1. a ring on MPI_COMM_WORLD: MPI_Sendrecv of 1000 (r+1) bytes to the right, from the left;
 *   2. a ring on a communicator in reversed rank order (rank r is size-1-r there): MPI_Isend of
 *      100 bytes to its next rank (world left), MPI_Recv from MPI_ANY_SOURCE (world right, known
 *      only from the status), MPI_Wait; then the communicator is freed;
 *   3. MPI_Allreduce of 8 bytes and MPI_Bcast of 16 bytes on the ranks of this node
 *      (MPI_Comm_split_type SHARED: stays on the node), then MPI_Allreduce of 8 bytes on
 *      MPI_COMM_WORLD; the node communicator is freed and a duplicate of MPI_COMM_WORLD (which MPI
 *      may give the freed handle) carries an MPI_Allgather of 8 bytes per rank.
 * Prints "nodes rank R ok" when all received data is right; exits 1 otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, failures = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    static char out[64000], in[64000];
    memset(out, rank + 1, sizeof out);

    MPI_Status st;
    MPI_Sendrecv(out, 1000 * (rank + 1), MPI_BYTE, right, 1, in, (int)sizeof in, MPI_BYTE, left, 1,
                 MPI_COMM_WORLD, &st);
    int got;
    MPI_Get_count(&st, MPI_BYTE, &got);
    failures += got != 1000 * (left + 1) || in[0] != left + 1;

    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &rev);
    int rr;
    MPI_Comm_rank(rev, &rr);
    MPI_Request req;
    MPI_Isend(out, 100, MPI_BYTE, (rr + 1) % size, 2, rev, &req);
    MPI_Recv(in, 100, MPI_BYTE, MPI_ANY_SOURCE, 2, rev, &st);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    failures += in[0] != right + 1 || st.MPI_SOURCE != (rr + size - 1) % size;
    MPI_Comm_free(&rev);

    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    long one = 1, here = 0, all = 0;
    MPI_Allreduce(&one, &here, 1, MPI_LONG, MPI_SUM, node);
    double b[2] = {rank, 0.5};
    MPI_Bcast(b, 2, MPI_DOUBLE, 0, node);
    MPI_Allreduce(&one, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    failures += all != size || here < 1 || b[1] != 0.5;
    MPI_Comm_free(&node);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    static long ranks[4096];
    long me = rank;
    MPI_Allgather(&me, 1, MPI_LONG, ranks, 1, MPI_LONG, dup);
    failures += ranks[size - 1] != size - 1;
    MPI_Comm_free(&dup);

    if (failures == 0)
        printf("nodes rank %d ok\n", rank);
    MPI_Finalize();
    return failures != 0;
}
