//! The encoder's own base64 (`mpistat_record::base64url`) is `base64-simd`'s URL-safe alphabet
//! without padding (what the decoders read and every earlier profiler wrote) on any bytes.

use base64_simd::URL_SAFE_NO_PAD;
use mpistat_record::base64url;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn equals_base64_simd(data in prop::collection::vec(any::<u8>(), 0..2000)) {
        prop_assert_eq!(base64url::encode(&data), URL_SAFE_NO_PAD.encode_to_string(&data));
    }
}

#[test]
fn short_inputs_and_every_byte() {
    for len in 0..=6 {
        for b in 0..=255u8 {
            let data = vec![b; len];
            assert_eq!(
                base64url::encode(&data),
                URL_SAFE_NO_PAD.encode_to_string(&data)
            );
        }
    }
}
