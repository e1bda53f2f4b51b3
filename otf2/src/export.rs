//! The export of an mpistat trace directory as an OTF2 archive, by one process
//! ([`export_dir`]) or by the processes of `mpistat-analyze` together
//! ([`export_dir_distributed`]), which write the same archive.
//!
//! Memory stays bounded: each rank file is decoded event by event (with its times moved onto
//! rank 0's clock, as the analysis reads them) straight into its location's writer, which holds
//! one chunk (256 KiB) and writes it out when full.

use crate::error::Otf2Error;
use crate::write::{ArchiveWriter, CommRanks, RankWritten};
use mpistat_analysis::blocks::Blocks;
use mpistat_analysis::distributed::Exchange;
use mpistat_analysis::source::world_size;
use mpistat_trace::model::{Definitions, Rank};
use mpistat_trace::tracefile::read_dir_ranks_with;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exported {
    /// Locations (world ranks).
    pub ranks: u32,
    /// OTF2 events over all locations (on process 0 of a distributed export; the others count
    /// their own).
    pub events: u64,
    /// Problems of the reading that did not stop it (missing ranks, stray files), as the
    /// analysis reports them.
    pub problems: Vec<String>,
}

/// Writes the trace in `dir` as an OTF2 archive in the new directory `out`. `prepare` adjusts
/// the definitions before they are written (call sites turned into source lines).
pub fn export_dir(
    dir: &Path,
    out: &Path,
    prepare: &mut dyn FnMut(&mut Definitions),
) -> Result<Exported, Otf2Error> {
    export(dir, out, prepare, None)
}

/// [`export_dir`] by the processes of a distributed analysis, all calling it together: each
/// writes its block of ranks, process 0 the definitions and the anchor file. A process that
/// fails makes all fail ([`Otf2Error::ElsewhereFailed`] on the others).
pub fn export_dir_distributed(
    dir: &Path,
    out: &Path,
    prepare: &mut dyn FnMut(&mut Definitions),
    exchange: &dyn Exchange,
) -> Result<Exported, Otf2Error> {
    export(dir, out, prepare, Some(exchange))
}

/// Every process's flag; the first process that failed, if any.
fn failed_somewhere(exchange: Option<&dyn Exchange>, failed: bool) -> Option<usize> {
    let exchange = exchange?;
    let flags = exchange.all_to_all(vec![vec![u8::from(failed)]; exchange.processes()]);
    flags.iter().position(|f| f.first() == Some(&1))
}

fn export(
    dir: &Path,
    out: &Path,
    prepare: &mut dyn FnMut(&mut Definitions),
    exchange: Option<&dyn Exchange>,
) -> Result<Exported, Otf2Error> {
    let (processes, process) = exchange.map_or((1, 0), |e| (e.processes(), e.process()));
    // The world size comes with the definitions; read them before choosing the block.
    let definitions = read_dir_ranks_with(dir, |_| false, |_, _, _| Ok::<(), Otf2Error>(()));
    let failed = definitions.is_err();
    if let Some(elsewhere) = failed_somewhere(exchange, failed) {
        definitions?;
        return Err(Otf2Error::ElsewhereFailed { process: elsewhere });
    }
    let (definitions, _, _) = definitions?;
    let blocks = Blocks {
        ranks: world_size(&definitions),
        processes,
    };
    let block = blocks.range(process);
    let writer = ArchiveWriter::create(out, exchange);
    if let Some(elsewhere) = failed_somewhere(exchange, writer.is_err()) {
        writer?;
        return Err(Otf2Error::ElsewhereFailed { process: elsewhere });
    }
    let writer = Mutex::new(writer?);
    let comm_ranks: OnceLock<CommRanks> = OnceLock::new();
    let read = read_dir_ranks_with(
        dir,
        |rank| block.contains(&rank),
        |rank, events, defs| {
            let comm_ranks = comm_ranks.get_or_init(|| CommRanks::new(defs));
            let mut writer = writer.lock().unwrap_or_else(|e| e.into_inner());
            writer.write_rank(rank, events, defs, comm_ranks)
        },
    );
    let mut writer = writer.into_inner().unwrap_or_else(|e| e.into_inner());
    // Ranks without a file get an empty location, so that every location has its files.
    let read = read.and_then(|(defs, mut ranks, problems)| {
        let comm_ranks = comm_ranks.get_or_init(|| CommRanks::new(&defs));
        for rank in block.clone() {
            if ranks.get(rank as usize).is_none_or(Option::is_none) {
                let written = writer.write_rank(rank, [], &defs, comm_ranks)?;
                if ranks.len() <= rank as usize {
                    ranks.resize(rank as usize + 1, None);
                }
                ranks[rank as usize] = Some(written);
            }
        }
        Ok((defs, ranks, problems))
    });
    if let Some(elsewhere) = failed_somewhere(exchange, read.is_err()) {
        read?;
        return Err(Otf2Error::ElsewhereFailed { process: elsewhere });
    }
    let (mut defs, ranks, problems) = read?;
    let mine: Vec<RankWritten> = block
        .clone()
        .map(|rank| ranks[rank as usize].unwrap_or_default())
        .collect();
    let all = gather_written(exchange, &mine, blocks.ranks);
    let mut exported = Exported {
        ranks: blocks.ranks,
        events: mine.iter().map(|w| w.events).sum(),
        problems,
    };
    let defined = match &all {
        Some(all) => {
            exported.events = all.iter().map(|w| w.events).sum();
            prepare(&mut defs);
            writer.write_definitions(&defs, all)
        }
        None => Ok(()),
    };
    if let Some(elsewhere) = failed_somewhere(exchange, defined.is_err()) {
        defined?;
        return Err(Otf2Error::ElsewhereFailed { process: elsewhere });
    }
    writer.close(block)?;
    Ok(exported)
}

/// Every rank's [`RankWritten`] on process 0 (in rank order); `None` on the others.
fn gather_written(
    exchange: Option<&dyn Exchange>,
    mine: &[RankWritten],
    ranks: Rank,
) -> Option<Vec<RankWritten>> {
    let Some(exchange) = exchange else {
        return Some(mine.to_vec());
    };
    let encoded: Vec<u8> = (mine.iter())
        .flat_map(|w| w.encode())
        .flat_map(u64::to_le_bytes)
        .collect();
    let mut outgoing = vec![Vec::new(); exchange.processes()];
    outgoing[0] = encoded;
    let incoming = exchange.all_to_all(outgoing);
    (exchange.process() == 0).then(|| {
        let all: Vec<RankWritten> = (incoming.concat().chunks_exact(24))
            .map(|chunk| {
                let word = |i: usize| {
                    u64::from_le_bytes(chunk[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
                };
                RankWritten::decode([word(0), word(1), word(2)])
            })
            .collect();
        debug_assert_eq!(all.len(), ranks as usize);
        all
    })
}
