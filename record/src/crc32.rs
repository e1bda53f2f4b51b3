//! CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320: zlib's and `crc32fast`'s) one byte at a
//! time from a 1 KiB table built at compile time, for the encoder.
//!
//! The profiler computes a record's checksums once per job over a few kB, so speed does not
//! matter there but code and constants do: `crc32fast`'s SSE, AVX2 and AVX-512 variants, their
//! detection and its 16 KiB slicing table were ~36 kB of rank 0's `MPI_Finalize` path
//! (docs/footprint.md, "finrec"); this is ~100 bytes of code and 1 KiB of table. The decoders
//! (ingest checks every line and every record) keep `crc32fast`; `tests/crc32_props.rs` checks
//! the two agree on any input, split anywhere.

/// The reflected polynomial.
const POLYNOMIAL: u32 = 0xEDB8_8320;

/// The CRC of every byte value, as a register of zeros would take it in.
static TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLYNOMIAL
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// A running CRC-32: [`Crc32::update`] with the pieces in order, then [`Crc32::finish`].
#[derive(Clone, Copy, Debug)]
pub struct Crc32 {
    /// The register, inverted (the CRC's initial value and final XOR are all ones).
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    pub fn new() -> Self {
        Crc32 { state: !0 }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        let mut crc = self.state;
        for &b in bytes {
            crc = (crc >> 8) ^ TABLE[((crc ^ u32::from(b)) & 0xff) as usize];
        }
        self.state = crc;
    }

    pub fn finish(self) -> u32 {
        !self.state
    }
}

/// The CRC-32 of `bytes`.
pub fn hash(bytes: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(bytes);
    crc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The CRC-32 check value (the catalogue's "123456789") and two more of zlib's.
        assert_eq!(hash(b"123456789"), 0xCBF4_3926);
        assert_eq!(hash(b""), 0);
        assert_eq!(
            hash(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }
}
