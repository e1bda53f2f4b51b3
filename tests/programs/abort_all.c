/* Every rank calls MPI_Abort at once, after one MPI_Allreduce of 1 double: each writes its
 * partial record while the first real MPI_Abort makes the launcher stop the others, some of
 * them while they send theirs. */
#include <mpi.h>

int main(int argc, char **argv)
{
    double one = 1, sum;
    MPI_Init(&argc, &argv);
    MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Abort(MPI_COMM_WORLD, 3);
    return 0;
}
