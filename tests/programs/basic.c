/* Deterministic MPI program: a known number of calls and bytes per routine and rank.
 * The plan (and the expected record) is documented in tests/src/lib.rs, basic_expectations().
 * Prints "basic rank <r> ok" on every rank when all received data is right; exits 1 otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

static void check(int cond, const char *what, int rank)
{
    if (!cond) {
        fprintf(stderr, "basic rank %d: check failed: %s\n", rank, what);
        failures++;
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Ring: 3 messages of 100 (r+1) ints to the right, received from the left into a larger buffer. */
    static int out[1000], in[1000];
    int n_out = 100 * (rank + 1), n_in = 100 * (left + 1);
    for (int i = 0; i < n_out; i++)
        out[i] = rank * 10000 + i;
    for (int m = 0; m < 3; m++) {
        MPI_Status st;
        if (rank % 2 == 0)
            MPI_Send(out, n_out, MPI_INT, right, m, MPI_COMM_WORLD);
        if (m < 2) {
            MPI_Recv(in, 1000, MPI_INT, left, m, MPI_COMM_WORLD, &st);
            int got;
            MPI_Get_count(&st, MPI_INT, &got);
            check(got == n_in && st.MPI_SOURCE == left && st.MPI_TAG == m, "ring status", rank);
        } else {
            MPI_Recv(in, 1000, MPI_INT, left, m, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (rank % 2 == 1)
            MPI_Send(out, n_out, MPI_INT, right, m, MPI_COMM_WORLD);
        check(in[0] == left * 10000 && in[n_in - 1] == left * 10000 + n_in - 1, "ring data", rank);
    }
    MPI_Send(out, 50, MPI_INT, MPI_PROC_NULL, 7, MPI_COMM_WORLD);
    MPI_Recv(in, 50, MPI_INT, MPI_PROC_NULL, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Non-blocking: 2 Irecv of 256 doubles posted, 2 Isend of 10 (r+1) doubles. */
    static double dout[2][256], din[2][256];
    MPI_Request req[4];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 256; i++)
            dout[k][i] = rank + k + i * 0.5;
        MPI_Irecv(din[k], 256, MPI_DOUBLE, right, 100 + k, MPI_COMM_WORLD, &req[k]);
    }
    for (int k = 0; k < 2; k++)
        MPI_Isend(dout[k], 10 * (rank + 1), MPI_DOUBLE, left, 100 + k, MPI_COMM_WORLD, &req[2 + k]);
    MPI_Status st0;
    MPI_Wait(&req[0], &st0);
    MPI_Wait(&req[2], MPI_STATUS_IGNORE);
    MPI_Request rest[2] = {req[1], req[3]};
    MPI_Status sts[2];
    MPI_Waitall(2, rest, sts);
    int got0, got1;
    MPI_Get_count(&st0, MPI_DOUBLE, &got0);
    MPI_Get_count(&sts[0], MPI_DOUBLE, &got1);
    check(got0 == 10 * (right + 1) && got1 == 10 * (right + 1), "irecv counts", rank);
    check(din[1][3] == right + 1 + 1.5, "irecv data", rank);

    /* Collectives. */
    double b[25];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 25; i++)
            b[i] = rank == 0 ? k * 100 + i : -1;
        MPI_Bcast(b, 25, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        check(b[24] == k * 100 + 24, "bcast", rank);
    }
    int a[7], s[7];
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 7; i++)
            a[i] = rank + i + k;
        MPI_Allreduce(a, s, 7, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        check(s[6] == size * (size - 1) / 2 + size * (6 + k), "allreduce", rank);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);

    if (failures == 0)
        printf("basic rank %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
