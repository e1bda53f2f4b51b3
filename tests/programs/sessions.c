/* An MPI-4 program that uses only sessions (MPICH 4): no MPI_Init, its communicator made from
 * the "mpi://WORLD" process set. What a record shows for it (docs/counting.md: none is sent).
 * Every rank sends 10 ints to the next one around the ring and receives from the previous;
 * prints "sessions rank R of N ok" when the data is right. */
#include <mpi.h>
#include <stdio.h>

int main(void)
{
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    int rank, size, failures = 0, out[10], in[10];
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, "mpistat.sessions", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &comm);
    MPI_Group_free(&group);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int i = 0; i < 10; i++)
        out[i] = rank * 100 + i;
    MPI_Sendrecv(out, 10, MPI_INT, (rank + 1) % size, 1, in, 10, MPI_INT, (rank + size - 1) % size,
                 1, comm, MPI_STATUS_IGNORE);
    failures += in[9] != ((rank + size - 1) % size) * 100 + 9;
    MPI_Comm_free(&comm);
    MPI_Session_finalize(&session);
    if (failures == 0)
        printf("sessions rank %d of %d ok\n", rank, size);
    return failures != 0;
}
