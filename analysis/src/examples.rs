//! Example executions shared by the tests, the benchmarks and the end-to-end comparison of the
//! one-process and the distributed analysis: the worked examples of the papers and generated
//! traces.

use crate::analysis::Analysis;
use crate::builder::{ExecutionBuilder, WORLD};
use mpistat_trace::model::{CommId, Rank, RegionId, Ticks, Trace};

/// Böhme et al., "Identifying the root causes of wait states" (TOPC 2016), Fig. 2: excess `comp` on
/// rank 0 makes rank 1 wait in R1; rank 1's wait and its receive time make rank 2 wait in R2.
pub fn topc_figure_2() -> ExecutionBuilder {
    let (a, b_, c) = (0, 1, 2);
    let mut b = ExecutionBuilder::new(3);
    let comp = b.region("comp", "");
    let (s1, r1) = (b.region("MPI_Send", "S1"), b.region("MPI_Recv", "R1"));
    let (s2, r2) = (b.region("MPI_Send", "S2"), b.region("MPI_Recv", "R2"));
    b.compute(a, comp, 4);
    b.compute(b_, comp, 2);
    b.compute(c, comp, 2);
    b.message((a, s1), (b_, r1), 0, 8, false, 0, 1); // rank 1 waits 2, receives for 1
    b.message((b_, s2), (c, r2), 0, 8, false, 0, 1); // rank 2 waits 3
    b
}

/// The same paper, Fig. 3, in its artificial time unit (1 tick).
pub fn topc_figure_3() -> ExecutionBuilder {
    let (a, b_, c) = (0, 1, 2);
    let mut b = ExecutionBuilder::new(3);
    let (f, g, h) = (b.region("f", ""), b.region("g", ""), b.region("h", ""));
    let (s3, r3) = (b.region("MPI_Send", "S3"), b.region("MPI_Recv", "R3"));
    let (s4, r4) = (b.region("MPI_Send", "S4"), b.region("MPI_Recv", "R4"));
    b.compute(a, f, 2);
    b.compute(a, g, 3);
    b.compute(b_, f, 1);
    b.compute(b_, h, 1);
    b.message((a, s3), (b_, r3), 0, 8, false, 0, 1); // rank 1 waits 3 in R3, receives for 1
    b.compute(b_, g, 1);
    b.compute(c, f, 2);
    b.compute(c, h, 1);
    b.compute(c, g, 2);
    b.message((b_, s4), (c, r4), 0, 8, false, 0, 1); // rank 2 waits 2 in R4
    b
}

/// A xorshift generator: the same numbers on every machine.
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// A 1-D halo exchange of about `target` events with uneven, varying work and an allreduce
/// every 10 iterations.
pub fn halo(ranks: Rank, target: usize) -> Trace {
    let mut b = ExecutionBuilder::new(ranks);
    let work = b.region("work", "");
    let (send, recv) = (
        b.region("MPI_Send", "halo.c:40"),
        b.region("MPI_Recv", "halo.c:41"),
    );
    let allreduce = b.region("MPI_Allreduce", "halo.c:60");
    let mut random = xorshift(0x2545_f491_4f6c_dd1d);
    let per_iteration = ranks as usize * 14;
    for iteration in 0..target.div_ceil(per_iteration) {
        for rank in 0..ranks {
            b.compute(rank, work, 10_000 + random() % 5_000);
        }
        for rank in 0..ranks {
            b.message(
                (rank, send),
                ((rank + 1) % ranks, recv),
                0,
                4096,
                false,
                200,
                300,
            );
        }
        for rank in 0..ranks {
            b.message(
                (rank, send),
                ((rank + ranks - 1) % ranks, recv),
                1,
                4096,
                false,
                200,
                300,
            );
        }
        if iteration % 10 == 9 {
            b.collective(WORLD, allreduce, None, 1_000);
        }
    }
    b.finish()
}

/// The collective routines of [`mixed`] executions.
pub const ROUTINES: [&str; 5] = [
    "MPI_Barrier",
    "MPI_Allreduce",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Gather",
];

/// The regions and the communicator of a [`mixed`] execution (the property tests build theirs
/// with it too): three user regions, standard and synchronous sends, receives, the
/// [`ROUTINES`], and the communicator of the even ranks.
pub struct MixedRegions {
    pub users: [RegionId; 3],
    pub send: RegionId,
    pub ssend: RegionId,
    pub recv: RegionId,
    pub routines: [RegionId; 5],
    pub evens: CommId,
}

impl MixedRegions {
    /// Sets them up on `b`; the MPI call sites are in source file `file`.
    pub fn new(b: &mut ExecutionBuilder, file: &str) -> Self {
        let users = ["solve", "exchange_prep", "io"].map(|name| b.region(name, ""));
        let mut site = |name: &str, line: u32| b.region(name, &format!("{file}:{line}"));
        let (send, ssend, recv) = (
            site("MPI_Send", 1),
            site("MPI_Ssend", 2),
            site("MPI_Recv", 3),
        );
        let routines = ROUTINES.map(|routine| site(routine, 9));
        let ranks = b.ranks();
        let evens = b.communicator((0..ranks).step_by(2).collect());
        MixedRegions {
            users,
            send,
            ssend,
            recv,
            routines,
            evens,
        }
    }

    /// A message of 8 bytes with tag 0, standard or synchronous.
    pub fn message(
        &self,
        b: &mut ExecutionBuilder,
        (from, to): (Rank, Rank),
        synchronous: bool,
        (send_cost, recv_cost): (Ticks, Ticks),
    ) {
        let site = if synchronous { self.ssend } else { self.send };
        b.message(
            (from, site),
            (to, self.recv),
            0,
            8,
            synchronous,
            send_cost,
            recv_cost,
        );
    }

    /// Collective `routine` (an index into [`ROUTINES`]) on the world or, `on_evens`, on the
    /// even ranks (the root then moves down to an even rank).
    pub fn collective(
        &self,
        b: &mut ExecutionBuilder,
        routine: usize,
        root: Rank,
        on_evens: bool,
        cost: Ticks,
    ) {
        let (comm, root) = if on_evens {
            (self.evens, root - root % 2)
        } else {
            (WORLD, root)
        };
        b.collective(comm, self.routines[routine], Some(root), cost);
    }
}

/// `steps` random steps on `ranks` ranks (from `seed`): computation in three user regions,
/// standard and synchronous messages between random ranks, and barriers, all-reduces,
/// broadcasts, reductions and gathers with random roots on the world and on the even ranks.
pub fn mixed(ranks: Rank, steps: usize, seed: u64) -> Trace {
    let mut random = xorshift(seed | 1);
    let mut b = ExecutionBuilder::new(ranks);
    let regions = MixedRegions::new(&mut b, "mixed.c");
    for _ in 0..steps {
        let pick = |n: u64, r: u64| (r % n) as u32;
        match random() % 7 {
            0..=2 => {
                let rank = pick(u64::from(ranks), random());
                b.compute(
                    rank,
                    regions.users[pick(3, random()) as usize],
                    random() % 20,
                );
            }
            3..=5 if ranks > 1 => {
                let from = pick(u64::from(ranks), random());
                let to = (from + 1 + pick(u64::from(ranks - 1), random())) % ranks;
                let synchronous = random() & 1 == 0;
                let costs = (random() % 3, random() % 3);
                regions.message(&mut b, (from, to), synchronous, costs);
            }
            _ => {
                let routine = pick(5, random()) as usize;
                let root = pick(u64::from(ranks), random());
                let on_evens = random() & 1 == 0;
                regions.collective(&mut b, routine, root, on_evens, random() % 3);
            }
        }
    }
    b.finish()
}

/// The id of the call path labelled `label` (`"f"`, `"MPI_Recv (R3)"`) in `analysis`; panics
/// when there is none. For the tests that check the examples' documented numbers.
#[track_caller]
pub fn callpath_id(analysis: &Analysis, label: &str) -> u32 {
    analysis
        .callpath(label)
        .unwrap_or_else(|| panic!("no call path {label}"))
        .id
}

/// `actual` is the documented `expected` (up to rounding, 1e-9).
#[track_caller]
pub fn assert_close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
}
