//! MPI for the analysis: [`World`] implements the analysis's [`Exchange`] with `MPI_Alltoallv`
//! over `MPI_COMM_WORLD`, through the byte-only C shim `shim.c`, and knows how many processes
//! share each node (for the memory limit).

use mpistat_analysis::distributed::Exchange;
use std::os::raw::{c_int, c_void};

extern "C" {
    fn mpistat_mpi_init() -> c_int;
    fn mpistat_mpi_finalize() -> c_int;
    fn mpistat_mpi_abort(code: c_int);
    fn mpistat_mpi_rank() -> c_int;
    fn mpistat_mpi_size() -> c_int;
    fn mpistat_mpi_node_size() -> c_int;
    fn mpistat_mpi_alltoall_int(send: *const c_int, receive: *mut c_int) -> c_int;
    fn mpistat_mpi_alltoallv_bytes(
        send: *const c_void,
        send_counts: *const c_int,
        send_displs: *const c_int,
        receive: *mut c_void,
        receive_counts: *const c_int,
        receive_displs: *const c_int,
    ) -> c_int;
}

/// `MPI_COMM_WORLD` of an initialised MPI; finalised when dropped.
pub struct World {
    rank: usize,
    size: usize,
    /// Processes on this one's node (sharing its memory), this one included.
    node_size: usize,
}

impl World {
    /// Initialises MPI (once per process).
    pub fn init() -> anyhow::Result<World> {
        // SAFETY: called once, before any other MPI call.
        if unsafe { mpistat_mpi_init() } != 0 {
            anyhow::bail!("MPI_Init failed");
        }
        // SAFETY: MPI is initialised.
        let (rank, size) = unsafe { (mpistat_mpi_rank(), mpistat_mpi_size()) };
        // SAFETY: MPI is initialised; every process calls it (a collective).
        let node_size = unsafe { mpistat_mpi_node_size() };
        Ok(World {
            rank: rank.max(0) as usize,
            size: size.max(1) as usize,
            node_size: node_size.max(1) as usize,
        })
    }

    /// How many processes of the analysis share this one's node (and its memory).
    pub fn node_size(&self) -> usize {
        self.node_size
    }

    /// Ends every process of the job (when one fails where the others cannot know).
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI is initialised; MPI_Abort does not return.
        unsafe { mpistat_mpi_abort(code) };
        std::process::exit(code)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // SAFETY: MPI is initialised and not finalised yet.
        unsafe { mpistat_mpi_finalize() };
    }
}

/// Displacements of consecutive blocks of `counts`.
fn displacements(counts: &[c_int]) -> Vec<c_int> {
    counts
        .iter()
        .scan(0, |at, &n| {
            let here = *at;
            *at += n;
            Some(here)
        })
        .collect()
}

impl Exchange for World {
    fn process(&self) -> usize {
        self.rank
    }

    fn processes(&self) -> usize {
        self.size
    }

    fn all_to_all(&self, outgoing: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let too_big = |n: usize| {
            c_int::try_from(n).unwrap_or_else(|_| {
            eprintln!("mpistat-analyze: an exchange of {n} bytes is beyond MPI's int counts; use more processes");
            self.abort(2)
        })
        };
        let send_counts: Vec<c_int> = outgoing.iter().map(|b| too_big(b.len())).collect();
        let mut receive_counts: Vec<c_int> = vec![0; self.size];
        // SAFETY: both buffers hold one int per process.
        let status =
            unsafe { mpistat_mpi_alltoall_int(send_counts.as_ptr(), receive_counts.as_mut_ptr()) };
        if status != 0 {
            eprintln!("mpistat-analyze: MPI_Alltoall failed ({status})");
            self.abort(2);
        }
        // One spare byte each: empty buffers would share a dangling address, which Open MPI
        // rejects (a send buffer equal to the receive buffer).
        let mut send: Vec<u8> = outgoing.concat();
        send.push(0);
        let total: usize = receive_counts.iter().map(|&n| n as usize).sum();
        too_big(total);
        let mut receive = vec![0u8; total + 1];
        let (send_displs, receive_displs) =
            (displacements(&send_counts), displacements(&receive_counts));
        // SAFETY: counts and displacements describe the buffers exactly, one entry per process.
        let status = unsafe {
            mpistat_mpi_alltoallv_bytes(
                send.as_ptr().cast(),
                send_counts.as_ptr(),
                send_displs.as_ptr(),
                receive.as_mut_ptr().cast(),
                receive_counts.as_ptr(),
                receive_displs.as_ptr(),
            )
        };
        if status != 0 {
            eprintln!("mpistat-analyze: MPI_Alltoallv failed ({status})");
            self.abort(2);
        }
        receive_counts
            .iter()
            .zip(&receive_displs)
            .map(|(&n, &at)| receive[at as usize..(at + n) as usize].to_vec())
            .collect()
    }
}
