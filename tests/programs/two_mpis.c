/* An Open MPI program that also loads MPICH's library, as a plugin linked against another MPI
 * would: two MPI libraries in one process, which libmpistat must pass through untouched
 * (tests/tests/job/foreign_mpi.rs). Prints "two_mpis rank <r> of <n>, sum <s>" on every rank. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (!dlopen("libmpich.so.12", RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "cannot load libmpich.so.12: %s\n", dlerror());
        return 2;
    }
    int rank, size, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("two_mpis rank %d of %d, sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
