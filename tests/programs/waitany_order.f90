! The Fortran twin of waitany_order.c (see there): MPI_Waitany over MPI_Irecv(MPI_ANY_SOURCE)
! and MPI_Irsend on MPI_COMM_WORLD, a duplicate and a reversed split, each used for the first
! time, through mpif.h as MPICH's f77 test suite calls it. Prints the same lines.
program waitany_order
  implicit none
  include 'mpif.h'
  integer, parameter :: count = 666, tag = 2456
  integer :: ierr, wrank, wsize, k, comm, sync, rank, other, index, first, done, n, failures
  integer :: requests(2), status(MPI_STATUS_SIZE)
  logical :: flag
  real :: sendbuf(2000), recvbuf(2000)
  integer :: i

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, wrank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, wsize, ierr)
  failures = 0
  do i = 1, count
    sendbuf(i) = real(i)
  end do
  do k = 0, 2
    if (k == 0) then
      comm = MPI_COMM_WORLD
    else if (k == 1) then
      call MPI_Comm_dup(MPI_COMM_WORLD, comm, ierr)
    else
      call MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, comm, ierr)
    end if
    call MPI_Comm_rank(comm, rank, ierr)
    other = 1 - rank
    call MPI_Comm_dup(comm, sync, ierr)
    call MPI_Irecv(recvbuf, 2000, MPI_REAL, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, requests(1), ierr)
    call MPI_Sendrecv(MPI_BOTTOM, 0, MPI_INTEGER, other, 0, MPI_BOTTOM, 0, MPI_INTEGER, other, 0, &
                      sync, status, ierr)
    if (rank == 0) then
      first = -1
      call MPI_Irsend(sendbuf, count, MPI_REAL, other, tag, comm, requests(2), ierr)
      do done = 1, 2
        call MPI_Waitany(2, requests, index, status, ierr)
        if (done == 1) first = index
        if (index == 1) then
          call MPI_Get_count(status, MPI_REAL, n, ierr)
          if (status(MPI_SOURCE) /= other .or. status(MPI_TAG) /= tag .or. n /= count) &
            failures = failures + 1
        end if
      end do
      if (first == 1) then
        print '(a,i0,a)', 'waitany_order comm ', k, ' first irecv'
      else
        print '(a,i0,a)', 'waitany_order comm ', k, ' first irsend'
      end if
    else
      flag = .false.
      do while (.not. flag)
        call MPI_Test(requests(1), flag, status, ierr)
      end do
      if (status(MPI_SOURCE) /= other) failures = failures + 1
      call MPI_Irsend(recvbuf, count, MPI_REAL, other, tag, comm, requests(1), ierr)
      call MPI_Waitall(1, requests, MPI_STATUSES_IGNORE, ierr)
    end if
    if (recvbuf(count) /= real(count)) failures = failures + 1
    call MPI_Comm_free(sync, ierr)
    if (k > 0) call MPI_Comm_free(comm, ierr)
  end do
  if (failures == 0) print '(a,i0,a)', 'waitany_order rank ', wrank, ' ok'
  call MPI_Finalize(ierr)
end program waitany_order
