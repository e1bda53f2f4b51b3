/* What a wrapper costs in instructions, which unlike time does not move with the host: one
 * rank calls one routine in a loop, and bench/instructions.sh counts the instructions the loop
 * executes under valgrind's callgrind (--toggle-collect=timed_loop: the loop and everything it
 * calls, nothing of MPI_Init or MPI_Finalize), bare, with libmpistat preloaded and with the floor
 * (bench/floor.c). One call of the routine comes before the loop, so that what a first call
 * does once (binding symbols, the thread's table) is not counted. One rank: a collective on a
 * communicator of one runs the same wrapper code as on many, and the MPI's own code takes the
 * same path every time, so the count is the same from run to run.
 *
 *     instructions WORKLOAD N     (WORKLOAD: comm_rank test_null iprobe allreduce1 barrier bcast1
 *                                  irecv_wait)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double in = 1.0, out;

static void comm_rank(void) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
}

static void test_null(void) {
    MPI_Request request = MPI_REQUEST_NULL;
    int flag;
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
}

static void iprobe(void) {
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, 4711, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

static void allreduce1(void) { MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }

static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

static void bcast1(void) { MPI_Bcast(&in, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); }

/* A nonblocking receive of one int from this rank, the send that matches it, and its wait: the
 * receive's bytes are counted when the wait completes it (docs/counting.md). */
static void irecv_wait(void) {
    int sent = 1, received;
    MPI_Request request;
    MPI_Irecv(&received, 1, MPI_INT, 0, 4712, MPI_COMM_WORLD, &request);
    MPI_Send(&sent, 1, MPI_INT, 0, 4712, MPI_COMM_WORLD);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
}

static const struct {
    const char *name;
    void (*call)(void);
} workloads[] = {
    {"comm_rank", comm_rank}, {"test_null", test_null}, {"iprobe", iprobe},
    {"allreduce1", allreduce1}, {"barrier", barrier}, {"bcast1", bcast1},
    {"irecv_wait", irecv_wait},
};

/* The only function callgrind collects in (by name): not inlined, not cloned. */
__attribute__((noinline, noclone)) void timed_loop(void (*call)(void), long n) {
    for (long i = 0; i < n; i++) {
        call();
        __asm__ volatile("" ::: "memory");
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s WORKLOAD N\n", argv[0]);
        return 2;
    }
    long n = strtol(argv[2], NULL, 10);
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        if (strcmp(argv[1], workloads[i].name) == 0) {
            MPI_Init(&argc, &argv);
            workloads[i].call();
            timed_loop(workloads[i].call, n);
            MPI_Finalize();
            return 0;
        }
    }
    fprintf(stderr, "%s: unknown workload %s\n", argv[0], argv[1]);
    return 2;
}
