/* Demo: a 1-D halo exchange on a ring of ranks (nonblocking neighbour exchange, a 3-point
 * stencil) with a global residual every 10 steps: the shape of many real solvers. */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 200000
#define STEPS 300

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;

    /* u[0] and u[N+1] are the halo cells. */
    double *u = calloc(N + 2, sizeof *u), *v = calloc(N + 2, sizeof *v);
    if (!u || !v)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 1; i <= N; i++)
        u[i] = sin(0.001 * (i + (double)rank * N));

    double residual = 0;
    for (int step = 0; step < STEPS; step++) {
        MPI_Request req[4];
        MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(&u[N + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(&u[N], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);

        double local = 0;
        for (int i = 1; i <= N; i++) {
            v[i] = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1]);
            local += (v[i] - u[i]) * (v[i] - u[i]);
        }
        double *t = u;
        u = v;
        v = t;
        if (step % 10 == 0)
            MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("ring: %d ranks, %d steps, residual %.3e\n", size, STEPS, sqrt(residual));
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
