/* MPI_THREAD_MULTIPLE: THREADS threads per rank, each on its own duplicate of MPI_COMM_WORLD,
 * each doing ROUNDS rounds of (MPI_Comm_rank, MPI_Allreduce of 3 ints, MPI_Sendrecv of 5 ints
 * with the partner rank r^1). Needs an even number of ranks.
 * Prints "threads rank <r> ok" when the thread level is MULTIPLE and every result is right. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 4
#define ROUNDS 25

static MPI_Comm comms[THREADS];
static int rank, size, errors[THREADS];

static void *work(void *arg)
{
    int t = (int)(long)arg;
    for (int k = 0; k < ROUNDS; k++) {
        int r, in[3] = {rank, t, k}, out[3], sbuf[5], rbuf[5];
        MPI_Comm_rank(comms[t], &r);
        MPI_Allreduce(in, out, 3, MPI_INT, MPI_SUM, comms[t]);
        if (r != rank || out[0] != size * (size - 1) / 2 || out[1] != size * t || out[2] != size * k)
            errors[t]++;
        for (int i = 0; i < 5; i++)
            sbuf[i] = rank * 1000 + t * 100 + k;
        MPI_Sendrecv(sbuf, 5, MPI_INT, rank ^ 1, t, rbuf, 5, MPI_INT, rank ^ 1, t, comms[t], MPI_STATUS_IGNORE);
        if (rbuf[4] != (rank ^ 1) * 1000 + t * 100 + k)
            errors[t]++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int t = 0; t < THREADS; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, work, (void *)(long)t);
    int bad = provided != MPI_THREAD_MULTIPLE;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        bad += errors[t];
    }
    for (int t = 0; t < THREADS; t++)
        MPI_Comm_free(&comms[t]);
    if (!bad)
        printf("threads rank %d ok\n", rank);
    else
        printf("threads rank %d: provided %d, %d wrong results\n", rank, provided, bad);
    MPI_Finalize();
    return bad ? 1 : 0;
}
