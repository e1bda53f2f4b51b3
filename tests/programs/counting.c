/* The byte counts of docs/counting.md, one case per run (argument), each with figures computed
 * by hand in tests/tests/job/counting.rs. Every rank checks the data it received (and the statuses
 * it asked for) and prints "counting CASE rank R ok".
 *
 *   irecv                2 ranks: rank 1 posts MPI_Irecv for 1000 ints, rank 0 sends 10; the
 *                        wait ignores the status.
 *   persistent           2 ranks: MPI_Send_init of 200 ints on rank 0, MPI_Recv_init for 300
 *                        on rank 1, 5 x MPI_Start + MPI_Wait, then MPI_Request_free.
 *   completions          2 ranks: rank 0 sends 9 messages of 1..9 ints; rank 1 completes one
 *                        or two MPI_Irecv (each posted for 100 ints) with each completing
 *                        routine, statuses ignored or not; then a receive it cancels and one it
 *                        frees before it completes (no bytes).
 *   front                3 ranks: rank 1 posts 12 MPI_Irecv of 100 ints one at a time (each the
 *                        only one kept: the steady paths of MPI_Irecv, MPI_Wait and MPI_Test),
 *                        from rank 0 (rounds 0-3, 8-11) or rank 2 (4-7), every third with
 *                        MPI_ANY_SOURCE; round i brings (i % 4) + 1 ints. Odd rounds test the
 *                        receive before its message is sent (flag 0) and complete it with
 *                        MPI_Test, even ones with MPI_Wait; statuses ignored every other time;
 *                        some rounds wait on MPI_REQUEST_NULL while the receive is kept.
 *   peers                2 ranks: rank 0 sends 10 ints 3 times to rank 1 and 3 times to
 *                        MPI_PROC_NULL, alternately (the same count, datatype and communicator:
 *                        only the peer tells the steady path's memo test they differ).
 *   rewritten            2 ranks: rank 0 sends 10 ints 3 times; rank 1 receives the first with
 *                        MPI_Irecv of 100 ints and MPI_Wait (the routine's memo then holds that
 *                        key), posts the second the same way (in front, its memo's key held at
 *                        the post), then one of 50 ints, which it waits for first (the memo is
 *                        rewritten: 50 ints, 40 B from rank 0), then the second.
 *   taken                2 ranks: rank 0 sends 10 ints 3 times; rank 1 posts a receive of 100
 *                        ints (in front) and one of 50 (in the table), waits for the first,
 *                        then the second (its memo then holds 50 ints, the front entry still
 *                        says 100), posts a third of 50 ints (in front, the memo's key held at
 *                        the post: nothing staged) and completes it with MPI_Waitall (the
 *                        counting copy, which reads the front entry).
 *   alltoallw            2 ranks: every rank sends 1 int to rank 0 and 2 doubles to rank 1.
 *   neighbours           4 ranks, a non-periodic 1-D Cartesian topology: MPI_Neighbor_allgatherv
 *                        of r+1 ints from rank r, MPI_Neighbor_alltoallv of 2 ints to each side.
 *   collectives          4 ranks: one call of each blocking collective (sizes in counting.rs),
 *                        some of them with MPI_IN_PLACE.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failed;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "counting: rank %d: %s\n", rank, what);
        failed = 1;
    }
}

/* rank 1's receive of 10 of 1000 ints, status ignored. */
static void irecv(void) {
    int buf[1000];
    if (rank == 0) {
        for (int i = 0; i < 10; i++)
            buf[i] = i;
        MPI_Send(buf, 10, MPI_INT, 1, 1, MPI_COMM_WORLD);
    } else {
        MPI_Request request;
        memset(buf, 0xff, sizeof buf);
        MPI_Irecv(buf, 1000, MPI_INT, 0, 1, MPI_COMM_WORLD, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        check(request == MPI_REQUEST_NULL, "request not freed");
        for (int i = 0; i < 10; i++)
            check(buf[i] == i, "data");
        check(buf[10] == -1, "more than 10 ints written");
    }
}

static void persistent(void) {
    int buf[300] = {0};
    MPI_Request request;
    if (rank == 0)
        MPI_Send_init(buf, 200, MPI_INT, 1, 2, MPI_COMM_WORLD, &request);
    else
        MPI_Recv_init(buf, 300, MPI_INT, 0, 2, MPI_COMM_WORLD, &request);
    for (int round = 0; round < 5; round++) {
        MPI_Status status;
        if (rank == 0)
            for (int i = 0; i < 200; i++)
                buf[i] = round * 1000 + i;
        MPI_Start(&request);
        MPI_Wait(&request, &status);
        check(request != MPI_REQUEST_NULL, "persistent request freed by MPI_Wait");
        if (rank == 1) {
            int n;
            MPI_Get_count(&status, MPI_INT, &n);
            check(n == 200 && status.MPI_SOURCE == 0 && status.MPI_TAG == 2, "status");
            check(buf[199] == round * 1000 + 199, "data");
        }
    }
    MPI_Request_free(&request);
}

/* Rank 0 sends message k (1..9) of k ints with tag k; rank 1 receives each into a buffer posted
 * for 100 ints and completes it with a different routine. */
static void completions(void) {
    enum { MESSAGES = 9 };
    if (rank == 0) {
        int data[MESSAGES + 1];
        for (int i = 0; i <= MESSAGES; i++)
            data[i] = i;
        for (int k = 1; k <= MESSAGES; k++)
            MPI_Send(data, k, MPI_INT, 1, k, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    static int buf[MESSAGES + 1][100];
    MPI_Request r[MESSAGES + 1];
    MPI_Status statuses[2];
    int flag = 0, index, outcount, indices[2], n;
    for (int k = 1; k <= MESSAGES; k++)
        MPI_Irecv(buf[k], 100, MPI_INT, 0, k, MPI_COMM_WORLD, &r[k]);
    /* 1: MPI_Test until done, status ignored. */
    while (!flag)
        MPI_Test(&r[1], &flag, MPI_STATUS_IGNORE);
    /* 2: MPI_Testany over {2}, status given. */
    flag = 0;
    while (!flag)
        MPI_Testany(1, &r[2], &index, &flag, &statuses[0]);
    MPI_Get_count(&statuses[0], MPI_INT, &n);
    check(index == 0 && n == 2 && statuses[0].MPI_TAG == 2, "Testany");
    /* 3, 4: MPI_Testall, statuses ignored. */
    flag = 0;
    while (!flag)
        MPI_Testall(2, &r[3], &flag, MPI_STATUSES_IGNORE);
    /* 5: MPI_Waitany, status ignored. */
    MPI_Waitany(1, &r[5], &index, MPI_STATUS_IGNORE);
    check(index == 0, "Waitany");
    /* 6, 7: MPI_Waitall with statuses. */
    MPI_Waitall(2, &r[6], statuses);
    MPI_Get_count(&statuses[1], MPI_INT, &n);
    check(n == 7 && statuses[1].MPI_TAG == 7, "Waitall");
    /* 8: MPI_Waitsome, statuses ignored; 9: MPI_Testsome, statuses given. */
    MPI_Waitsome(1, &r[8], &outcount, indices, MPI_STATUSES_IGNORE);
    check(outcount == 1 && indices[0] == 0, "Waitsome");
    outcount = 0;
    while (outcount == 0)
        MPI_Testsome(1, &r[9], &outcount, indices, statuses);
    MPI_Get_count(&statuses[0], MPI_INT, &n);
    check(outcount == 1 && n == 9, "Testsome");
    for (int k = 1; k <= MESSAGES; k++) {
        check(r[k] == MPI_REQUEST_NULL, "request not freed");
        check(buf[k][k - 1] == k - 1, "data");
    }
    /* A receive that is cancelled, and one freed before it completes: no bytes. */
    MPI_Request cancelled, freed;
    MPI_Status status;
    MPI_Irecv(buf[0], 100, MPI_INT, 0, 99, MPI_COMM_WORLD, &cancelled);
    MPI_Cancel(&cancelled);
    MPI_Wait(&cancelled, &status);
    MPI_Test_cancelled(&status, &flag);
    check(flag, "not cancelled");
    MPI_Irecv(buf[0], 100, MPI_INT, 0, 98, MPI_COMM_WORLD, &freed);
    MPI_Cancel(&freed);
    MPI_Request_free(&freed);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void peers(void) {
    int buf[10];
    for (int i = 0; i < 3; i++) {
        if (rank == 0) {
            for (int k = 0; k < 10; k++)
                buf[k] = 10 * i + k;
            MPI_Send(buf, 10, MPI_INT, 1, i, MPI_COMM_WORLD);
            MPI_Send(buf, 10, MPI_INT, MPI_PROC_NULL, i, MPI_COMM_WORLD);
        } else {
            MPI_Recv(buf, 10, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(buf[9] == 10 * i + 9, "peers");
        }
    }
}

static void rewritten(void) {
    int buf[3][100];
    if (rank == 0) {
        for (int m = 0; m < 3; m++) {
            for (int k = 0; k < 10; k++)
                buf[m][k] = 10 * m + k;
            MPI_Send(buf[m], 10, MPI_INT, 1, m, MPI_COMM_WORLD);
        }
        return;
    }
    MPI_Request first, held, other;
    memset(buf, 0xff, sizeof buf);
    MPI_Irecv(buf[0], 100, MPI_INT, 0, 0, MPI_COMM_WORLD, &first);
    MPI_Wait(&first, MPI_STATUS_IGNORE);
    MPI_Irecv(buf[1], 100, MPI_INT, 0, 1, MPI_COMM_WORLD, &held);
    MPI_Irecv(buf[2], 50, MPI_INT, 0, 2, MPI_COMM_WORLD, &other);
    MPI_Wait(&other, MPI_STATUS_IGNORE);
    MPI_Wait(&held, MPI_STATUS_IGNORE);
    for (int m = 0; m < 3; m++)
        check(buf[m][9] == 10 * m + 9 && buf[m][10] == -1, "rewritten");
}

static void taken(void) {
    int buf[3][100];
    if (rank == 0) {
        for (int m = 0; m < 3; m++) {
            for (int k = 0; k < 10; k++)
                buf[m][k] = 10 * m + k;
            MPI_Send(buf[m], 10, MPI_INT, 1, m, MPI_COMM_WORLD);
        }
        return;
    }
    MPI_Request first, second, held;
    memset(buf, 0xff, sizeof buf);
    MPI_Irecv(buf[0], 100, MPI_INT, 0, 0, MPI_COMM_WORLD, &first);
    MPI_Irecv(buf[1], 50, MPI_INT, 0, 1, MPI_COMM_WORLD, &second);
    MPI_Wait(&first, MPI_STATUS_IGNORE);
    MPI_Wait(&second, MPI_STATUS_IGNORE);
    MPI_Irecv(buf[2], 50, MPI_INT, 0, 2, MPI_COMM_WORLD, &held);
    MPI_Waitall(1, &held, MPI_STATUSES_IGNORE);
    for (int m = 0; m < 3; m++)
        check(buf[m][9] == 10 * m + 9 && buf[m][10] == -1, "taken");
}

#define FRONT_ROUNDS 12

static void front(void) {
    int buf[100];
    for (int i = 0; i < FRONT_ROUNDS; i++) {
        int sender = (i / 4) % 2 ? 2 : 0, n = i % 4 + 1;
        if (rank != 1) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == sender) {
                for (int k = 0; k < n; k++)
                    buf[k] = 100 * i + k;
                MPI_Send(buf, n, MPI_INT, 1, i, MPI_COMM_WORLD);
            }
            continue;
        }
        MPI_Request request, null = MPI_REQUEST_NULL;
        MPI_Status status;
        int flag = 0, ignore = i % 4 < 2, got;
        memset(buf, 0xff, sizeof buf);
        MPI_Irecv(buf, 100, MPI_INT, i % 3 == 0 ? MPI_ANY_SOURCE : sender, i, MPI_COMM_WORLD,
                  &request);
        if (i % 3 == 1)
            MPI_Wait(&null, MPI_STATUS_IGNORE);
        if (i % 2) {
            /* Its message is sent after the barrier. */
            MPI_Test(&request, &flag, ignore ? MPI_STATUS_IGNORE : &status);
            check(!flag, "completed before its message was sent");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (i % 2)
            while (!flag)
                MPI_Test(&request, &flag, ignore ? MPI_STATUS_IGNORE : &status);
        else
            MPI_Wait(&request, ignore ? MPI_STATUS_IGNORE : &status);
        check(request == MPI_REQUEST_NULL, "request not freed");
        if (!ignore) {
            MPI_Get_count(&status, MPI_INT, &got);
            check(got == n && status.MPI_SOURCE == sender && status.MPI_TAG == i, "status");
        }
        for (int k = 0; k < n; k++)
            check(buf[k] == 100 * i + k, "data");
        check(buf[n] == -1, "more ints written than sent");
    }
}

static void alltoallw(void) {
    /* To rank 0: 1 int; to rank 1: 2 doubles. */
    struct {
        int i;
        double d[2];
    } send = {rank + 10, {rank + 0.5, rank + 1.5}};
    int sendcounts[2] = {1, 2};
    int sdispls[2] = {0, (int)((char *)send.d - (char *)&send)};
    MPI_Datatype sendtypes[2] = {MPI_INT, MPI_DOUBLE};
    int ints[2] = {0, 0};
    double doubles[2][2];
    int recvcounts[2], rdispls[2];
    MPI_Datatype recvtypes[2];
    for (int j = 0; j < 2; j++) {
        recvcounts[j] = rank == 0 ? 1 : 2;
        recvtypes[j] = rank == 0 ? MPI_INT : MPI_DOUBLE;
        rdispls[j] = rank == 0 ? j * (int)sizeof(int) : j * 2 * (int)sizeof(double);
    }
    void *recvbuf = rank == 0 ? (void *)ints : (void *)doubles;
    MPI_Alltoallw(&send, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                  MPI_COMM_WORLD);
    if (rank == 0)
        check(ints[0] == 10 && ints[1] == 11, "ints");
    else
        check(doubles[1][1] == 2.5, "doubles");
}

static void neighbours(void) {
    int dims[1] = {size}, periods[1] = {0}, left, right;
    MPI_Comm ring;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Cart_shift(ring, 0, 1, &left, &right);
    /* Allgatherv: r+1 ints from rank r to each neighbour. */
    int send[4] = {rank, rank, rank, rank}, recv[8] = {0};
    int recvcounts[2] = {left == MPI_PROC_NULL ? 0 : left + 1, right == MPI_PROC_NULL ? 0 : right + 1};
    int displs[2] = {0, 4};
    MPI_Neighbor_allgatherv(send, rank + 1, MPI_INT, recv, recvcounts, displs, MPI_INT, ring);
    if (right != MPI_PROC_NULL)
        check(recv[4 + right] == right, "allgatherv");
    /* Alltoallv: 2 ints to each neighbour. */
    int counts[2] = {2, 2}, sdispls[2] = {0, 2}, out[4] = {rank, rank, rank, rank}, in[4] = {-1, -1, -1, -1};
    MPI_Neighbor_alltoallv(out, counts, sdispls, MPI_INT, in, counts, sdispls, MPI_INT, ring);
    if (left != MPI_PROC_NULL)
        check(in[1] == left, "alltoallv");
    MPI_Comm_free(&ring);
}

/* One call of each blocking collective on 4 ranks (see counting.rs for the bytes). */
static void collectives(void) {
    double d[16] = {0}, e[16] = {0};
    int counts[4] = {1, 2, 3, 4}, displs[4] = {0, 1, 3, 6};
    MPI_Bcast(d, 3, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Reduce(d, e, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, d, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Gather(d, 2, MPI_DOUBLE, e, 2, MPI_DOUBLE, 2, MPI_COMM_WORLD);
    MPI_Scatter(d, 3, MPI_DOUBLE, e, 3, MPI_DOUBLE, 3, MPI_COMM_WORLD);
    MPI_Allgather(d, 1, MPI_DOUBLE, e, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, e, counts, displs, MPI_DOUBLE,
                   MPI_COMM_WORLD);
    MPI_Alltoall(d, 2, MPI_DOUBLE, e, 2, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoallv(d, counts, displs, MPI_DOUBLE, e, (int[]){rank + 1, rank + 1, rank + 1, rank + 1},
                  (int[]){0, 4, 8, 12}, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Reduce_scatter(d, e, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(d, e, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(d, e, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(d, e, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *which = argc > 1 ? argv[1] : "";
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"irecv", irecv},           {"persistent", persistent},
                 {"completions", completions}, {"front", front},
                 {"peers", peers},           {"rewritten", rewritten},
                 {"taken", taken},
                 {"alltoallw", alltoallw},
                 {"neighbours", neighbours}, {"collectives", collectives}};
    int known = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(which, cases[i].name) == 0) {
            cases[i].run();
            known = 1;
        }
    check(known, "unknown case");
    if (!failed)
        printf("counting %s rank %d ok\n", which, rank);
    MPI_Finalize();
    return failed;
}
