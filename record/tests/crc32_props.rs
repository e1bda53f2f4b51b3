//! The encoder's own CRC-32 (`mpistat_record::crc32`) is `crc32fast`'s (what the decoders and
//! every earlier profiler used) on any bytes, in one piece or split anywhere.

use mpistat_record::crc32::{self, Crc32};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn equals_crc32fast(data in prop::collection::vec(any::<u8>(), 0..9000)) {
        prop_assert_eq!(crc32::hash(&data), crc32fast::hash(&data));
    }

    #[test]
    fn pieces_give_the_whole(
        data in prop::collection::vec(any::<u8>(), 0..3000),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
        at.sort_unstable();
        let mut crc = Crc32::new();
        let mut from = 0;
        for to in at.into_iter().chain([data.len()]) {
            crc.update(&data[from..to]);
            from = to;
        }
        prop_assert_eq!(crc.finish(), crc32fast::hash(&data));
    }
}

#[test]
fn every_single_byte_and_runs_of_it() {
    for b in 0..=255u8 {
        for len in [1, 2, 7, 64] {
            let data = vec![b; len];
            assert_eq!(crc32::hash(&data), crc32fast::hash(&data), "{b:#x} x {len}");
        }
    }
}
