/* A stub "MPI" library: a few MPI_ routines with handles, a status layout and a version of its
 * own, no PMPI_ names, and none of the symbols of a family libmpistat knows. A program using it
 * must run exactly as without libmpistat (tests/tests/job/foreign_mpi.rs): the handles are small
 * integers, so a profiler that read them as Open MPI's pointers, or asked this library for a
 * datatype's size, would crash or abort. */
#include <string.h>

typedef struct {
    long bytes;
    int source, tag;
} StubStatus;

#ifdef OPEN_MPI_5
/* Built with -DOPEN_MPI_5 it poses as an Open MPI of a major version libmpistat was not built
 * for: Open MPI's marker function, and its version string. */
#define STUB_VERSION "Open MPI v5.0.3, package: Open MPI stub"
void ompi_mpi_init(void) {}
#else
#define STUB_VERSION "Stub MPI 9.9"
#endif

int MPI_Init(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }
int MPI_Finalize(void) { return 0; }
int MPI_Comm_rank(int comm, int *rank) { *rank = comm == 91 ? 0 : -1; return 0; }
int MPI_Comm_size(int comm, int *size) { *size = comm == 91 ? 1 : -1; return 0; }
int MPI_Get_library_version(char *version, int *len)
{
    strcpy(version, STUB_VERSION);
    *len = (int)strlen(version);
    return 0;
}
int MPI_Sendrecv(const void *sendbuf, int sendcount, int sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, int recvtype, int source, int recvtag, int comm,
                 StubStatus *status)
{
    (void)sendtype; (void)dest; (void)recvcount; (void)recvtype; (void)recvtag; (void)comm;
    memcpy(recvbuf, sendbuf, (size_t)sendcount * 4);
    status->bytes = sendcount * 4L;
    status->source = source;
    status->tag = sendtag;
    return 0;
}
