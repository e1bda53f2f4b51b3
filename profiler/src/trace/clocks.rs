//! The trace's clocks: each rank's offset to rank 0's clock, measured at `MPI_Init` and again at
//! `MPI_Finalize` (ping-pongs with rank 0, or one message to a rank on its node), and the test
//! knob that skews some ranks' clocks to show the analysis corrects them.

use super::state::Recorder;
use crate::clock::monotonic_ns;
use crate::ffi::MPI_Comm;
use crate::mpi;
use mpistat_trace::model::ClockSample;
use std::ffi::c_int;

/// Artificial clock error of one rank, for testing the correction (`MPISTAT_TRACE_TEST_SKEW`).
#[derive(Clone, Copy, Default)]
pub(super) struct Skew {
    offset_ns: i64,
    drift_ppm: f64,
    origin: u64,
}

impl Skew {
    /// Monotonic nanoseconds `t` on the skewed clock.
    #[inline]
    pub(super) fn apply(&self, t: u64) -> u64 {
        if self.offset_ns == 0 && self.drift_ppm == 0.0 {
            return t;
        }
        let since = t.saturating_sub(self.origin) as f64;
        (t as i64 + self.offset_ns + (since * self.drift_ppm * 1e-6) as i64).max(0) as u64
    }
}

/// What a rank knows of where the ranks run, for the clock samples ([`measure_offset`]). The
/// recorder holds it boxed (out of the way of the fields every call uses), the box made with
/// the recorder before `MPI_Init` and filled at its end without allocating (footprint.rs):
/// hence the mapping is not boxed itself.
#[allow(clippy::large_enum_variant)]
pub(super) enum Nodes {
    Unknown,
    /// PMIx's local peers ([`crate::places`]).
    Pmix,
    /// Hydra's process mapping.
    Hydra(crate::node::Mapping),
}

impl Recorder {
    /// The trace clock now, in nanoseconds (clock samples; events take [`ticks`]).
    pub(super) fn now(&self) -> u64 {
        self.skewed(monotonic_ns())
    }

    /// Monotonic nanoseconds `t` on this rank's trace clock (the test knob's skew applied).
    pub(super) fn skewed(&self, t: u64) -> u64 {
        self.skew.apply(t)
    }

    /// Whether world rank `other` runs on this rank's node (false if unknown).
    #[link_section = ".text.init.mpistat"]
    pub(super) fn shares_node(&self, other: u32) -> bool {
        match &*self.nodes {
            Nodes::Unknown => false,
            Nodes::Pmix => crate::places::shares_node(other) == Some(true),
            Nodes::Hydra(m) => match (m.node_of(self.rank), m.node_of(other)) {
                (Some(mine), Some(theirs)) => mine == theirs,
                _ => false,
            },
        }
    }

    /// This rank's clock sample when it runs on rank 0's node: one kernel, one monotonic clock,
    /// so the offset is exactly the difference of the test knob's skews (0 without).
    #[link_section = ".text.init.mpistat"]
    pub(super) fn sample_beside_rank0(&self) -> ClockSample {
        let t = monotonic_ns();
        let local = self.skewed(t);
        ClockSample {
            local,
            offset: self.rank0_skew.apply(t) as i64 - local as i64,
        }
    }
}

/// `MPISTAT_TRACE_TEST_SKEW=RANK:OFFSET_NS:DRIFT_PPM[,RANK:...]`: a test knob that puts an
/// artificial offset and drift on some ranks' trace clocks (e.g. all ranks of one node), to show
/// the analysis corrects them.
pub(super) fn test_skew(text: &str, rank: u32) -> Skew {
    text.split(',')
        .find_map(
            |entry| match entry.split(':').collect::<Vec<_>>().as_slice() {
                [r, offset, drift] if r.parse() == Ok(rank) => Some(Skew {
                    offset_ns: offset.parse().unwrap_or(0),
                    drift_ppm: drift.parse().unwrap_or(0.0),
                    origin: monotonic_ns(),
                }),
                _ => None,
            },
        )
        .unwrap_or_default()
}

/// Tag of the clock ping-pongs (on a private communicator).
const CLOCK_TAG: c_int = 7001;
/// Ping-pongs with each rank at least, and at most while none was quick ([`QUICK_NS`]) and the
/// rank's exchanges took less than [`MAX_PING_PONG_NS`] (so the exchanges past the first 16 add
/// at most that per rank to a traced job's start and end).
const PING_PONGS: usize = 16;
const MAX_PING_PONGS: usize = 128;
const MAX_PING_PONG_NS: u64 = 20_000_000;
/// A round trip this short (or at most twice the shortest with an earlier rank, which a slower
/// network between nodes needs) ends a rank's ping-pongs after [`PING_PONGS`]: its offset is
/// then right within half of it.
const QUICK_NS: u64 = 20_000;
/// The first word of rank 0's messages: a ping, the result (offset, the peer's time of the
/// exchange it came from, its round trip), or [`SAME_NODE`].
const PING: u64 = 0;
const RESULT: u64 = 1;
/// Rank 0's only message to a rank on its node: take the offset of one clock.
const SAME_NODE: u64 = 2;

/// This rank's clock offset to rank 0 (rank 0's clock minus ours), collective over `comm` (its
/// ranks are the world's). Rank 0 tells each rank how: a rank on its node ([`Nodes`]: PMIx's
/// local peers, Hydra's process mapping) gets one message, [`SAME_NODE`], and reads the one
/// monotonic clock of their kernel: its offset is exactly 0 (or what the test knob's skews make
/// it), and neither side runs the ping-pongs' MPI code at `MPI_Init` (rank 0 sends, the rank
/// receives, once: footprint.rs). Only rank 0's knowledge decides, so a rank that knows less of
/// the nodes (a failed PMIx query) cannot wait for a message that never comes. Each other rank
/// ping-pongs with rank 0 over `comm` (every receive names its source and tag), keeping the
/// exchange with the shortest round trip: its offset is right within half that round trip
/// whatever delayed one direction, and every slower exchange is left out. The peer's sample is
/// at its own time of that exchange. The waits yield the processor
/// ([`mpi::recv_u64s_yielding`]), so that on an oversubscribed node the ranks waiting for their
/// turn leave the cores to the two exchanging. In `.text.init` with [`start`].
#[inline(never)]
#[link_section = ".text.init.mpistat"]
pub(super) fn measure_offset(recorder: &Recorder, comm: MPI_Comm) -> Option<ClockSample> {
    let rank = recorder.rank as c_int;
    if rank != 0 {
        loop {
            let [kind, offset, local, _] = mpi::recv_u64s_yielding::<4>(0, CLOCK_TAG, comm).ok()?;
            match kind {
                RESULT => {
                    return Some(ClockSample {
                        local,
                        offset: offset as i64,
                    })
                }
                SAME_NODE => return Some(recorder.sample_beside_rank0()),
                _ => mpi::send_u64s(&[recorder.now()], 0, CLOCK_TAG, comm).ok()?,
            }
        }
    }
    let mut shortest: Option<u64> = None;
    for peer in 1..recorder.world_size as c_int {
        if recorder.shares_node(peer as u32) {
            mpi::send_u64s(&[SAME_NODE, 0, 0, 0], peer, CLOCK_TAG, comm).ok()?;
            continue;
        }
        let quick = shortest.map_or(QUICK_NS, |s| (2 * s).max(QUICK_NS));
        // (round trip, offset, the peer's time) of the quickest exchange so far.
        let mut best = (u64::MAX, 0i64, 0u64);
        let first = recorder.now();
        for done in 1..=MAX_PING_PONGS {
            let t0 = recorder.now();
            mpi::send_u64s(&[PING, 0, 0, 0], peer, CLOCK_TAG, comm).ok()?;
            let [remote] = mpi::recv_u64s_yielding::<1>(peer, CLOCK_TAG, comm).ok()?;
            let t1 = recorder.now();
            let rtt = t1.saturating_sub(t0);
            if rtt < best.0 {
                let offset = ((t0 as i128 + t1 as i128) / 2 - remote as i128) as i64;
                best = (rtt, offset, remote);
            }
            if done >= PING_PONGS
                && (best.0 <= quick || t1.saturating_sub(first) > MAX_PING_PONG_NS)
            {
                break;
            }
        }
        let (rtt, offset, remote) = best;
        mpi::send_u64s(&[RESULT, offset as u64, remote, rtt], peer, CLOCK_TAG, comm).ok()?;
        shortest = Some(shortest.map_or(rtt, |s| s.min(rtt)));
    }
    Some(ClockSample {
        local: recorder.now(),
        offset: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::record::tests::recorder;

    #[test]
    fn rank_0_knows_which_ranks_share_its_clock() {
        // Hydra's mapping of ranks 0, 1 on node 0 and rank 2 on node 1 (only rank 0 holds one).
        let mapping = crate::node::Mapping::parse(b"(vector,(0,1,2),(1,1,1))").unwrap();
        let mut r = recorder(1 << 10, 0, 0, 0);
        r.world_size = 3;
        *r.nodes = Nodes::Hydra(mapping);
        r.rank = 0;
        assert!((r.shares_node(1), r.shares_node(2)) == (true, false));
        *r.nodes = Nodes::Unknown;
        assert!(
            !r.shares_node(1),
            "unknown: every rank takes the ping-pongs"
        );
        // The sample of rank 1, whose test clock runs 3 s ahead of rank 0's (which runs 1 s
        // behind the true one): offset exactly -4 s (no drift).
        r.rank = 1;
        r.skew = test_skew("1:3000000000:0,0:-1000000000:0", 1);
        r.rank0_skew = test_skew("1:3000000000:0,0:-1000000000:0", 0);
        let sample = r.sample_beside_rank0();
        assert_eq!(sample.offset, -4_000_000_000);
        assert!(sample.local > 3_000_000_000);
    }
}
