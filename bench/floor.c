/* The least a profiler that times every call can add: a PMPI wrapper around each routine that
 * bench/overhead.c times, which reads the clock (rdtsc, as libmpistat) before and after the real
 * call and adds the difference and the call to one counter per routine, nothing else (no thread
 * safety, no bytes, no supersteps, no record). MPI_Pcontrol(0) pauses it as it pauses libmpistat
 * (a flag test per call), for the benchmark's in-job A/B blocks. `bench/run.sh --floor` runs it
 * beside libmpistat, so the tables show which part of libmpistat's cost is the clock's. */
#include <mpi.h>
#include <stdint.h>
#include <x86intrin.h>

enum { COMM_RANK, TEST, IPROBE, SEND, RECV, ALLREDUCE, BARRIER, BCAST, GATHER, ROUTINES };
static uint64_t calls[ROUTINES], ticks[ROUTINES];
static int paused;

int MPI_Pcontrol(const int level, ...) {
    paused = level == 0;
    return MPI_SUCCESS;
}

#define TIMED(routine, call)                \
    do {                                    \
        if (paused) return call;            \
        uint64_t t0 = __rdtsc();            \
        int rc = call;                      \
        ticks[routine] += __rdtsc() - t0;   \
        calls[routine]++;                   \
        return rc;                          \
    } while (0)

int MPI_Comm_rank(MPI_Comm comm, int *rank) { TIMED(COMM_RANK, PMPI_Comm_rank(comm, rank)); }

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    TIMED(TEST, PMPI_Test(request, flag, status));
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    TIMED(IPROBE, PMPI_Iprobe(source, tag, comm, flag, status));
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    TIMED(SEND, PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    TIMED(RECV, PMPI_Recv(buf, count, type, source, tag, comm, status));
}

int MPI_Allreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
    TIMED(ALLREDUCE, PMPI_Allreduce(in, out, count, type, op, comm));
}

int MPI_Barrier(MPI_Comm comm) { TIMED(BARRIER, PMPI_Barrier(comm)); }

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    TIMED(BCAST, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Gather(const void *in, int in_count, MPI_Datatype in_type, void *out, int out_count,
               MPI_Datatype out_type, int root, MPI_Comm comm) {
    TIMED(GATHER, PMPI_Gather(in, in_count, in_type, out, out_count, out_type, root, comm));
}
