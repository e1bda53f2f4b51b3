/* The completion order of MPI_Waitany over a receive from any source and a ready send, on the
 * communicators a test suite walks through: MPI_COMM_WORLD, a duplicate of it, and a split with
 * the ranks reversed (so that world rank 1 is rank 0 there), each used for the first time. Run
 * on 2 ranks. On each, rank 0 of the communicator posts MPI_Irecv(MPI_ANY_SOURCE), both ranks
 * synchronise on a duplicate (so that the ready send finds its receive posted), rank 0 starts
 * MPI_Irsend and completes both with MPI_Waitany; rank 1 waits for that message and sends it
 * back. Both orders are legal; tests/tests/job/waitany_order.rs compares the profiled program's
 * orders over several runs with the bare one's. Rank 0 of each communicator prints
 * "waitany_order comm K first irsend" (or "irecv"); every rank prints "waitany_order rank R ok"
 * when the data and statuses were right. */
#include <mpi.h>
#include <stdio.h>

enum { COUNT = 666, TAG = 2456 };

int main(int argc, char **argv)
{
    int wrank, wsize, failures = 0;
    static float sendbuf[2000], recvbuf[2000];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int i = 0; i < COUNT; i++)
        sendbuf[i] = (float)i;
    for (int k = 0; k < 3; k++) {
        MPI_Comm comm, sync;
        if (k == 0)
            comm = MPI_COMM_WORLD;
        else if (k == 1)
            MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &comm);
        int rank;
        MPI_Comm_rank(comm, &rank);
        int other = 1 - rank;
        MPI_Comm_dup(comm, &sync);
        MPI_Request requests[2];
        MPI_Status status;
        MPI_Irecv(recvbuf, 2000, MPI_FLOAT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &requests[0]);
        MPI_Sendrecv(NULL, 0, MPI_INT, other, 0, NULL, 0, MPI_INT, other, 0, sync,
                     MPI_STATUS_IGNORE);
        if (rank == 0) {
            int index, first = -1;
            MPI_Irsend(sendbuf, COUNT, MPI_FLOAT, other, TAG, comm, &requests[1]);
            for (int done = 0; done < 2; done++) {
                MPI_Waitany(2, requests, &index, &status);
                if (done == 0)
                    first = index;
                if (index == 0) {
                    int n;
                    MPI_Get_count(&status, MPI_FLOAT, &n);
                    failures += status.MPI_SOURCE != other || status.MPI_TAG != TAG || n != COUNT;
                }
            }
            printf("waitany_order comm %d first %s\n", k, first == 0 ? "irecv" : "irsend");
        } else {
            int flag = 0;
            while (!flag)
                MPI_Test(&requests[0], &flag, &status);
            failures += status.MPI_SOURCE != other || recvbuf[COUNT - 1] != COUNT - 1;
            MPI_Irsend(recvbuf, COUNT, MPI_FLOAT, other, TAG, comm, &requests[0]);
            MPI_Waitall(1, requests, MPI_STATUSES_IGNORE);
        }
        failures += recvbuf[COUNT - 1] != COUNT - 1;
        MPI_Comm_free(&sync);
        if (k > 0)
            MPI_Comm_free(&comm);
    }
    if (failures == 0)
        printf("waitany_order rank %d ok\n", wrank);
    MPI_Finalize();
    return failures != 0;
}
