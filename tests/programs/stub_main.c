/* A program of the stub "MPI" (stub_mpi.c, its own declarations: no mpi.h). Prints what the
 * stub returned and exits with status 3. */
#include <stdio.h>

typedef struct {
    long bytes;
    int source, tag;
} StubStatus;

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Comm_rank(int comm, int *rank);
int MPI_Comm_size(int comm, int *size);
int MPI_Get_library_version(char *version, int *len);
int MPI_Sendrecv(const void *sendbuf, int sendcount, int sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, int recvtype, int source, int recvtag, int comm,
                 StubStatus *status);

int main(int argc, char **argv)
{
    char version[64];
    int len, rank, size, out[3] = {42, 43, 44}, in[3] = {0};
    StubStatus st;
    MPI_Get_library_version(version, &len);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(91, &rank);
    MPI_Comm_size(91, &size);
    int rc = MPI_Sendrecv(out, 3, 7, 0, 5, in, 3, 7, 0, 5, 91, &st);
    printf("%s: rank %d of %d, sendrecv %d: %d %d %d, %ld bytes from %d tag %d\n", version, rank,
           size, rc, in[0], in[1], in[2], st.bytes, st.source, st.tag);
    MPI_Finalize();
    return 3;
}
