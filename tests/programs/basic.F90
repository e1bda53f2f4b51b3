! The Fortran twin of basic.c: the same calls and bytes (see basic_expectations() in
! tests/src/lib.rs), through one of the three Fortran bindings, chosen at compile time:
!   -DMPIF_H   include 'mpif.h'
!   -DUSE_MPI  use mpi
!   -DUSE_F08  use mpi_f08
! Prints "basic rank <r> ok" on every rank when all received data is right; stops with 1 otherwise.
program basic
#if defined(USE_F08)
  use mpi_f08
#elif defined(USE_MPI)
  use mpi
#endif
  implicit none
#if defined(MPIF_H)
  include 'mpif.h'
#endif
#if defined(USE_F08)
  type(MPI_Status) :: st, st0, sts(2)
  type(MPI_Request) :: req(4), rest(2)
#define SOURCE_OF(s) s%MPI_SOURCE
#define TAG_OF(s) s%MPI_TAG
#else
  integer :: st(MPI_STATUS_SIZE), st0(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
  integer :: req(4), rest(2)
#define SOURCE_OF(s) s(MPI_SOURCE)
#define TAG_OF(s) s(MPI_TAG)
#endif
  integer :: ierr, rank, nranks, right, left, n_out, n_in, m, i, k, got, got0, got1
  integer :: outb(1000), inb(1000), a(7), s(7)
  double precision :: dout(256, 2), din(256, 2), b(25)
  integer :: failures

  failures = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)

  ! Ring: 3 messages of 100 (r+1) integers to the right, received from the left into a larger buffer.
  n_out = 100 * (rank + 1)
  n_in = 100 * (left + 1)
  do i = 1, n_out
    outb(i) = rank * 10000 + i - 1
  end do
  do m = 0, 2
    if (mod(rank, 2) == 0) call MPI_Send(outb, n_out, MPI_INTEGER, right, m, MPI_COMM_WORLD, ierr)
    if (m < 2) then
      call MPI_Recv(inb, 1000, MPI_INTEGER, left, m, MPI_COMM_WORLD, st, ierr)
      call MPI_Get_count(st, MPI_INTEGER, got, ierr)
      call check(got == n_in .and. SOURCE_OF(st) == left .and. TAG_OF(st) == m, 'ring status')
    else
      call MPI_Recv(inb, 1000, MPI_INTEGER, left, m, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    end if
    if (mod(rank, 2) == 1) call MPI_Send(outb, n_out, MPI_INTEGER, right, m, MPI_COMM_WORLD, ierr)
    call check(inb(1) == left * 10000 .and. inb(n_in) == left * 10000 + n_in - 1, 'ring data')
  end do
  call MPI_Send(outb, 50, MPI_INTEGER, MPI_PROC_NULL, 7, MPI_COMM_WORLD, ierr)
  call MPI_Recv(inb, 50, MPI_INTEGER, MPI_PROC_NULL, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)

  ! Non-blocking: 2 Irecv of 256 doubles posted, 2 Isend of 10 (r+1) doubles.
  do k = 1, 2
    do i = 1, 256
      dout(i, k) = rank + (k - 1) + (i - 1) * 0.5d0
    end do
    call MPI_Irecv(din(1, k), 256, MPI_DOUBLE_PRECISION, right, 99 + k, MPI_COMM_WORLD, req(k), ierr)
  end do
  do k = 1, 2
    call MPI_Isend(dout(1, k), 10 * (rank + 1), MPI_DOUBLE_PRECISION, left, 99 + k, MPI_COMM_WORLD, req(2 + k), ierr)
  end do
  call MPI_Wait(req(1), st0, ierr)
  call MPI_Wait(req(3), MPI_STATUS_IGNORE, ierr)
  rest(1) = req(2)
  rest(2) = req(4)
  call MPI_Waitall(2, rest, sts, ierr)
  call MPI_Get_count(st0, MPI_DOUBLE_PRECISION, got0, ierr)
#if defined(USE_F08)
  call MPI_Get_count(sts(1), MPI_DOUBLE_PRECISION, got1, ierr)
#else
  call MPI_Get_count(sts(:, 1), MPI_DOUBLE_PRECISION, got1, ierr)
#endif
  call check(got0 == 10 * (right + 1) .and. got1 == 10 * (right + 1), 'irecv counts')
  call check(din(4, 2) == right + 1 + 1.5d0, 'irecv data')

  ! Collectives.
  do k = 0, 2
    do i = 1, 25
      if (rank == 0) then
        b(i) = k * 100 + i - 1
      else
        b(i) = -1
      end if
    end do
    call MPI_Bcast(b, 25, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    call check(b(25) == k * 100 + 24, 'bcast')
  end do
  do k = 0, 4
    do i = 1, 7
      a(i) = rank + (i - 1) + k
    end do
    call MPI_Allreduce(a, s, 7, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(s(7) == nranks * (nranks - 1) / 2 + nranks * (6 + k), 'allreduce')
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  if (failures == 0) print '(a, i0, a)', 'basic rank ', rank, ' ok'
  call MPI_Finalize(ierr)
  if (failures /= 0) stop 1

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      write (0, '(a, i0, a, a)') 'basic rank ', rank, ': check failed: ', what
      failures = failures + 1
    end if
  end subroutine check

end program basic
