// A program written with the MPI C++ bindings (MPI::, removed from the standard in MPI-3 but
// still shipped by MPICH and Open MPI): what a record shows for it (docs/counting.md). Rank 0
// sends 25 doubles to rank 1 with MPI::COMM_WORLD.Send, rank 1 receives them into a buffer of
// 100; every rank then calls MPI::COMM_WORLD.Allreduce of 3 ints and MPI::COMM_WORLD.Barrier.
// Prints "cxx_bindings rank R ok" when the data is right.
#include <mpi.h>
#include <cstdio>

int main(int argc, char **argv)
{
    MPI::Init(argc, argv);
    const int rank = MPI::COMM_WORLD.Get_rank();
    int failures = 0;
    double data[100] = {0};
    if (rank == 0) {
        for (int i = 0; i < 25; i++)
            data[i] = i + 0.5;
        MPI::COMM_WORLD.Send(data, 25, MPI::DOUBLE, 1, 4);
    } else if (rank == 1) {
        MPI::Status status;
        MPI::COMM_WORLD.Recv(data, 100, MPI::DOUBLE, 0, 4, status);
        failures += status.Get_count(MPI::DOUBLE) != 25 || data[24] != 24.5;
    }
    int in[3] = {rank, 1, 2}, out[3];
    MPI::COMM_WORLD.Allreduce(in, out, 3, MPI::INT, MPI::SUM);
    failures += out[1] != MPI::COMM_WORLD.Get_size();
    MPI::COMM_WORLD.Barrier();
    if (failures == 0)
        std::printf("cxx_bindings rank %d ok\n", rank);
    MPI::Finalize();
    return failures != 0;
}
