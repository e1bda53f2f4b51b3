//! The finalize's reductions as point-to-point messages combined by our own code: a binomial
//! tree to rank 0 (`ceil(log2 P)` rounds) and recursive doubling for a result on every rank
//! (`log2 P` rounds for a power of two, two more otherwise: the ranks above the largest power
//! of two fold into a partner first and get the result back last).
//!
//! Why not `MPI_Reduce` and `MPI_Allreduce`: MPICH maps its collective code, the reduction's
//! code per datatype and its constants on first use, ~300 kB of `libmpich` a rank in
//! `MPI_Finalize` that the bare `MPI_Finalize` never maps (docs/footprint.md "Finalize"). Every
//! operation here is commutative and associative (a sum wraps as `MPI_SUM` on `MPI_UINT64_T`
//! does; `MaxLoc` keeps the lowest rank of equal maxima, as `MPI_MAXLOC` does), so any tree
//! gives MPI's figures byte for byte.
//!
//! The code is in `.text.finalize` with the rest of what every rank runs in `MPI_Finalize`
//! (by attribute, `combine_parts` by `profiler/finalize.ld`): elsewhere in `.text` it mapped
//! two more chunks of ours.

/// What the reductions send their messages over: ranks of one communicator, each message a
/// vector of 64-bit words whose length both ends know.
pub trait Link {
    type Error;
    fn send(&mut self, to: usize, data: &[u64]) -> Result<(), Self::Error>;
    fn recv(&mut self, from: usize, into: &mut [u64]) -> Result<(), Self::Error>;
    /// Send `data` to `peer` and receive `into` from it, without waiting for one before the
    /// other (both ends call it at once).
    fn exchange(&mut self, peer: usize, data: &[u64], into: &mut [u64]) -> Result<(), Self::Error>;
}

/// A [`Link`] that carries each message as consecutive messages of at most `words` words, in
/// order (both ends know the length, so they cut it alike). Why: a message over the MPI
/// library's eager limit takes its rendezvous path, whose code (UCX's `ucp_rndv_*`, MPICH's
/// large-message path) and registered buffers a bare `MPI_Finalize` never maps: 64-128 kB more
/// of rank 0's peak (docs/footprint.md, "finpieces").
pub struct InPieces<L> {
    link: L,
    /// At least 1.
    words: usize,
}

impl<L> InPieces<L> {
    /// `link` in pieces of `words` words (at least one).
    #[link_section = ".text.finalize.mpistat"]
    pub fn new(link: L, words: usize) -> InPieces<L> {
        InPieces {
            link,
            words: words.max(1),
        }
    }
}

impl<L: Link> Link for InPieces<L> {
    type Error = L::Error;
    #[link_section = ".text.finalize.mpistat"]
    fn send(&mut self, to: usize, data: &[u64]) -> Result<(), L::Error> {
        data.chunks(self.words)
            .try_for_each(|piece| self.link.send(to, piece))
    }
    #[link_section = ".text.finalize.mpistat"]
    fn recv(&mut self, from: usize, into: &mut [u64]) -> Result<(), L::Error> {
        into.chunks_mut(self.words)
            .try_for_each(|piece| self.link.recv(from, piece))
    }
    /// Piece by piece; where one direction has more pieces, the other's are empty messages
    /// (the peer's lengths mirror ours, so both ends make the same number of exchanges).
    #[link_section = ".text.finalize.mpistat"]
    fn exchange(&mut self, peer: usize, data: &[u64], into: &mut [u64]) -> Result<(), L::Error> {
        let mut out = data.chunks(self.words);
        let mut back = into.chunks_mut(self.words);
        loop {
            match (out.next(), back.next()) {
                (None, None) => return Ok(()),
                (piece, room) => {
                    self.link
                        .exchange(peer, piece.unwrap_or(&[]), room.unwrap_or(&mut []))?
                }
            }
        }
    }
}

/// The reduction operations the profiler uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Wrapping sum, as `MPI_SUM` on `MPI_UINT64_T`.
    Sum,
    Min,
    Max,
    /// Pairs of words (value, rank): the largest value and the lowest rank holding it.
    MaxLoc,
    /// Bitwise or (of masks).
    BitOr,
}

impl Op {
    /// Fold `other` into `acc`, element by element (pairs for [`Op::MaxLoc`]).
    pub fn combine(self, acc: &mut [u64], other: &[u64]) {
        let pairs = acc.iter_mut().zip(other);
        match self {
            Op::Sum => pairs.for_each(|(a, b)| *a = a.wrapping_add(*b)),
            Op::Min => pairs.for_each(|(a, b)| *a = (*a).min(*b)),
            Op::Max => pairs.for_each(|(a, b)| *a = (*a).max(*b)),
            Op::BitOr => pairs.for_each(|(a, b)| *a |= *b),
            Op::MaxLoc => {
                for (a, b) in acc.chunks_exact_mut(2).zip(other.chunks_exact(2)) {
                    if (b[0], std::cmp::Reverse(b[1])) > (a[0], std::cmp::Reverse(a[1])) {
                        a.copy_from_slice(b);
                    }
                }
            }
        }
    }
}

/// Consecutive parts of one message, each reduced with its own operation: several reductions
/// in one pass of the tree.
#[derive(Clone, Copy, Debug)]
pub struct Part {
    pub op: Op,
    pub len: usize,
}

// Not in `.text.finalize` by attribute: its `match` is a jump table, which LLVM puts in plain
// `.rodata` for a function with a section of its own (a chunk of ours in MPI_Finalize);
// `profiler/finalize.ld` names it, with its `.rodata.` section.
#[inline(never)]
fn combine_parts(parts: &[Part], acc: &mut [u64], other: &[u64]) {
    let mut at = 0;
    for p in parts {
        let end = at + p.len;
        p.op.combine(&mut acc[at..end], &other[at..end]);
        at = end;
    }
}

/// Reduce `data` (laid out as `parts`) of every rank to rank 0 of `size` ranks; returns true on
/// rank 0, whose `data` then holds the result (elsewhere it is scratch). Binomial tree: in
/// round k a rank whose k lowest bits are zero receives from `rank + 2^k`, unless bit k is set,
/// in which case it sends to `rank - 2^k` and is done.
#[link_section = ".text.finalize.mpistat"]
pub fn to_root<L: Link>(
    link: &mut L,
    rank: usize,
    size: usize,
    parts: &[Part],
    data: &mut [u64],
) -> Result<bool, L::Error> {
    let mut other = vec![0u64; data.len()];
    let mut mask = 1;
    while mask < size {
        if rank & mask != 0 {
            link.send(rank - mask, data)?;
            return Ok(false);
        }
        if rank + mask < size {
            link.recv(rank + mask, &mut other)?;
            combine_parts(parts, data, &other);
        }
        mask <<= 1;
    }
    Ok(true)
}

/// Reduce `data` (laid out as `parts`) of every rank of `size` ranks into `data` on every rank:
/// recursive doubling among the largest power of two of ranks, the others folded in before
/// and served after.
#[link_section = ".text.finalize.mpistat"]
pub fn to_all<L: Link>(
    link: &mut L,
    rank: usize,
    size: usize,
    parts: &[Part],
    data: &mut [u64],
) -> Result<(), L::Error> {
    let below = if size == 0 {
        return Ok(());
    } else {
        1 << size.ilog2()
    };
    let extra = size - below;
    if rank >= below {
        link.send(rank - below, data)?;
        return link.recv(rank - below, data);
    }
    let mut other = vec![0u64; data.len()];
    if rank < extra {
        link.recv(rank + below, &mut other)?;
        combine_parts(parts, data, &other);
    }
    let mut mask = 1;
    while mask < below {
        link.exchange(rank ^ mask, data, &mut other)?;
        combine_parts(parts, data, &other);
        mask <<= 1;
    }
    if rank < extra {
        link.send(rank + below, data)?;
    }
    Ok(())
}

/// Rounds of messages on the longest path: [`to_root`]'s and [`to_all`]'s at `size` ranks.
pub fn rounds(size: usize) -> (u32, u32) {
    if size <= 1 {
        return (0, 0);
    }
    let log = size.ilog2();
    if size.is_power_of_two() {
        (log, log)
    } else {
        (log + 1, log + 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::mpsc::{channel, Receiver, Sender};

    /// One thread's end of a full mesh of channels.
    struct Mesh {
        to: Vec<Sender<Vec<u64>>>,
        from: Vec<Receiver<Vec<u64>>>,
        /// The longest message sent, in words.
        longest: usize,
    }

    impl Link for Mesh {
        type Error = String;
        fn send(&mut self, to: usize, data: &[u64]) -> Result<(), String> {
            self.longest = self.longest.max(data.len());
            self.to[to].send(data.to_vec()).map_err(|e| e.to_string())
        }
        fn recv(&mut self, from: usize, into: &mut [u64]) -> Result<(), String> {
            let got = self.from[from].recv().map_err(|e| e.to_string())?;
            if got.len() != into.len() {
                return Err(format!("{} words for {}", got.len(), into.len()));
            }
            into.copy_from_slice(&got);
            Ok(())
        }
        fn exchange(&mut self, peer: usize, data: &[u64], into: &mut [u64]) -> Result<(), String> {
            self.send(peer, data)?;
            self.recv(peer, into)
        }
    }

    /// Each rank's senders to every rank and receivers from every rank.
    fn meshes(size: usize) -> Vec<Mesh> {
        let mut to: Vec<Vec<Sender<Vec<u64>>>> = (0..size).map(|_| Vec::new()).collect();
        let mut from: Vec<Vec<Receiver<Vec<u64>>>> = (0..size).map(|_| Vec::new()).collect();
        for senders in to.iter_mut() {
            // from[b] gets its receivers in the senders' order.
            for receivers in from.iter_mut() {
                let (s, r) = channel();
                senders.push(s);
                receivers.push(r);
            }
        }
        to.into_iter()
            .zip(from)
            .map(|(to, from)| Mesh {
                to,
                from,
                longest: 0,
            })
            .collect()
    }

    /// Every rank's result of `f` run on its own thread.
    fn run<F>(inputs: &[Vec<u64>], f: F) -> Vec<(bool, Vec<u64>)>
    where
        F: Fn(&mut Mesh, usize, usize, &mut [u64]) -> Result<bool, String> + Sync,
    {
        let size = inputs.len();
        std::thread::scope(|s| {
            let handles: Vec<_> = meshes(size)
                .into_iter()
                .zip(inputs)
                .enumerate()
                .map(|(rank, (mut mesh, input))| {
                    let f = &f;
                    s.spawn(move || {
                        let mut data = input.clone();
                        let root = f(&mut mesh, rank, size, &mut data).unwrap();
                        (root, data)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// What MPI's reduction gives: each part element-wise over the ranks in rank order.
    fn sequential(parts: &[Part], inputs: &[Vec<u64>]) -> Vec<u64> {
        let mut at = 0;
        let mut out = Vec::new();
        for p in parts {
            let column = |i: usize| inputs.iter().map(move |v| v[at + i]);
            match p.op {
                Op::Sum => out.extend((0..p.len).map(|i| column(i).fold(0, u64::wrapping_add))),
                Op::Min => out.extend((0..p.len).map(|i| column(i).min().unwrap())),
                Op::Max => out.extend((0..p.len).map(|i| column(i).max().unwrap())),
                Op::BitOr => out.extend((0..p.len).map(|i| column(i).fold(0, |a, b| a | b))),
                Op::MaxLoc => {
                    for i in (0..p.len).step_by(2) {
                        let max = column(i).max().unwrap();
                        let rank = inputs
                            .iter()
                            .find(|v| v[at + i] == max)
                            .map(|v| v[at + i + 1])
                            .unwrap();
                        out.extend([max, rank]);
                    }
                }
            }
            at += p.len;
        }
        out
    }

    /// Parts of `n` elements each with their operation (pairs for [`Op::MaxLoc`]).
    fn parts_of(ops: &[(Op, usize)]) -> Vec<Part> {
        ops.iter()
            .map(|&(op, n)| Part {
                op,
                len: if op == Op::MaxLoc { 2 * n } else { n },
            })
            .collect()
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Sum),
            Just(Op::Min),
            Just(Op::Max),
            Just(Op::MaxLoc),
            Just(Op::BitOr)
        ]
    }

    /// Ranks' vectors for `parts`; small values so that equal maxima (MaxLoc's ties) are common,
    /// or any value (sums that wrap). A MaxLoc pair's second word is the rank, as the callers
    /// make it.
    fn inputs(parts: &[Part], size: usize, small: bool, seed: u64) -> Vec<Vec<u64>> {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if small {
                state % 4
            } else {
                state
            }
        };
        (0..size)
            .map(|rank| {
                let mut v = Vec::new();
                for p in parts {
                    for i in 0..p.len {
                        let maxloc_rank = p.op == Op::MaxLoc && i % 2 == 1;
                        v.push(if maxloc_rank { rank as u64 } else { next() });
                    }
                }
                v
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn the_trees_give_the_sequential_reductions_figures(
            size in 1usize..=64,
            ops in prop::collection::vec((op(), 0usize..5), 1..4),
            small in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let parts = parts_of(&ops);
            let inputs = inputs(&parts, size, small, seed);
            let want = sequential(&parts, &inputs);
            let at_root = run(&inputs, |m, r, s, d| to_root(m, r, s, &parts, d));
            prop_assert_eq!(at_root.iter().filter(|(root, _)| *root).count(), 1);
            prop_assert!(at_root[0].0);
            prop_assert_eq!(&at_root[0].1, &want);
            let everywhere = run(&inputs, |m, r, s, d| to_all(m, r, s, &parts, d).map(|()| true));
            for (_, got) in &everywhere {
                prop_assert_eq!(got, &want);
            }
        }
    }

    /// The mesh behind a borrow, as [`InPieces`] takes it in these tests.
    impl Link for &mut Mesh {
        type Error = String;
        fn send(&mut self, to: usize, data: &[u64]) -> Result<(), String> {
            (**self).send(to, data)
        }
        fn recv(&mut self, from: usize, into: &mut [u64]) -> Result<(), String> {
            (**self).recv(from, into)
        }
        fn exchange(&mut self, peer: usize, data: &[u64], into: &mut [u64]) -> Result<(), String> {
            (**self).exchange(peer, data, into)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn pieces_give_the_same_figures_in_messages_of_at_most_their_words(
            size in 1usize..=20,
            ops in prop::collection::vec((op(), 0usize..9), 1..4),
            words in 1usize..6,
            seed in any::<u64>(),
        ) {
            let parts = parts_of(&ops);
            let inputs = inputs(&parts, size, true, seed);
            let want = sequential(&parts, &inputs);
            let checked = |m: &Mesh, root: bool| match m.longest <= words {
                true => Ok(root),
                false => Err(format!("a message of {} words, pieces of {words}", m.longest)),
            };
            let at_root = run(&inputs, |m, r, s, d| {
                let root = to_root(&mut InPieces::new(&mut *m, words), r, s, &parts, d)?;
                checked(m, root)
            });
            prop_assert_eq!(&at_root[0].1, &want);
            let everywhere = run(&inputs, |m, r, s, d| {
                to_all(&mut InPieces::new(&mut *m, words), r, s, &parts, d)?;
                checked(m, true)
            });
            for (_, got) in &everywhere {
                prop_assert_eq!(got, &want);
            }
        }
    }

    #[test]
    fn every_size_to_64_reduces_exactly() {
        let parts = [
            Part {
                op: Op::Sum,
                len: 3,
            },
            Part {
                op: Op::MaxLoc,
                len: 4,
            },
        ];
        for size in 1..=64 {
            let inputs = inputs(&parts, size, true, size as u64);
            let want = sequential(&parts, &inputs);
            assert_eq!(
                run(&inputs, |m, r, s, d| to_root(m, r, s, &parts, d))[0].1,
                want
            );
            for (_, got) in run(&inputs, |m, r, s, d| {
                to_all(m, r, s, &parts, d).map(|()| true)
            }) {
                assert_eq!(got, want, "{size} ranks");
            }
        }
    }

    #[test]
    fn rounds_grow_as_log2() {
        assert_eq!(rounds(1), (0, 0));
        assert_eq!(rounds(2), (1, 1));
        assert_eq!(rounds(3), (2, 3));
        assert_eq!(rounds(64), (6, 6));
        assert_eq!(rounds(100), (7, 8));
        assert_eq!(rounds(100_000), (17, 18));
    }
}
