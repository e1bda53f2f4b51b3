/* The few MPI calls mpistat-analyze makes, behind a byte-only C interface: the Rust side then
 * needs no MPI handle types, which differ between Open MPI and MPICH. */
#include <mpi.h>
#include <stddef.h>

int mpistat_mpi_init(void) { return MPI_Init(NULL, NULL); }

int mpistat_mpi_finalize(void) { return MPI_Finalize(); }

void mpistat_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int mpistat_mpi_rank(void) {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int mpistat_mpi_size(void) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

/* One int to and from every process. */
int mpistat_mpi_alltoall_int(const int *send, int *receive) {
    return MPI_Alltoall(send, 1, MPI_INT, receive, 1, MPI_INT, MPI_COMM_WORLD);
}

/* Bytes to and from every process. */
int mpistat_mpi_alltoallv_bytes(const void *send, const int *send_counts, const int *send_displs,
                                void *receive, const int *receive_counts,
                                const int *receive_displs) {
    return MPI_Alltoallv(send, send_counts, send_displs, MPI_BYTE, receive, receive_counts,
                         receive_displs, MPI_BYTE, MPI_COMM_WORLD);
}

/* How many processes of MPI_COMM_WORLD share this one's node (its memory). */
int mpistat_mpi_node_size(void) {
    MPI_Comm node;
    int size = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return 1;
    MPI_Comm_size(node, &size);
    MPI_Comm_free(&node);
    return size;
}
