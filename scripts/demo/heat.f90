! Demo: Fortran. Rank 0 broadcasts the problem, every rank relaxes its slice of a 1-D heat
! equation exchanging boundary values with MPI_Sendrecv, and the result is reduced to rank 0.
program heat
  use mpi
  implicit none
  integer, parameter :: n = 50000, steps = 200
  integer :: ierr, rank, nprocs, left, right, step, i
  double precision :: u(0:n+1), v(0:n+1), alpha, local, total

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  left = rank - 1
  right = rank + 1
  if (left < 0) left = MPI_PROC_NULL
  if (right >= nprocs) right = MPI_PROC_NULL

  alpha = 0
  if (rank == 0) alpha = 0.25d0
  call MPI_Bcast(alpha, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)

  u = 0
  if (rank == 0) u(n/2) = 100
  do step = 1, steps
    call MPI_Sendrecv(u(n), 1, MPI_DOUBLE_PRECISION, right, 0, &
                      u(0), 1, MPI_DOUBLE_PRECISION, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 1, &
                      u(n+1), 1, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    do i = 1, n
      v(i) = u(i) + alpha * (u(i-1) - 2*u(i) + u(i+1))
    end do
    u(1:n) = v(1:n)
  end do

  local = sum(u(1:n))
  call MPI_Reduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a,f10.4)', 'heat: ', nprocs, ' ranks, total heat ', total
  call MPI_Finalize(ierr)
end program heat
