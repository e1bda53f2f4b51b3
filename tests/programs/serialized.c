/* MPI_THREAD_SERIALIZED: global collectives from two threads taking turns (one thread at a time
 * in MPI: the main thread waits for the second one to end). ROUNDS Allreduces on MPI_COMM_WORLD by
 * the main thread, ROUNDS by a second thread, then ROUNDS by the main thread again: each ends one
 * superstep, whichever thread made it.
 * Prints "serialized rank <r> ok" when the level is SERIALIZED and every result is right. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define ROUNDS 25

static int rank, size, errors;

static void rounds(int base)
{
    for (int k = 0; k < ROUNDS; k++) {
        int in[2] = {rank, base + k}, out[2];
        MPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (out[0] != size * (size - 1) / 2 || out[1] != size * (base + k))
            errors++;
    }
}

static void *second(void *arg)
{
    (void)arg;
    rounds(ROUNDS);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rounds(0);
    pthread_t thread;
    pthread_create(&thread, NULL, second, NULL);
    pthread_join(thread, NULL);
    rounds(2 * ROUNDS);
    int bad = (provided != MPI_THREAD_SERIALIZED) + errors;
    if (!bad)
        printf("serialized rank %d ok\n", rank);
    else
        printf("serialized rank %d: provided %d, %d wrong results\n", rank, provided, errors);
    MPI_Finalize();
    return bad ? 1 : 0;
}
