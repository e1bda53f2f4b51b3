//! A small raw-DEFLATE compressor (RFC 1951) for the records the profiler writes at
//! `MPI_Finalize`.
//!
//! The record is a JSON of a few kB, compressed once, on rank 0, at the moment the job's memory
//! peak is judged. A general compressor sized for streams (miniz_oxide's keeps a 32 kB
//! dictionary copy, a 64 kB LZ buffer in a struct built on the stack and two 64 kB hash tables,
//! all zeroed: ~250 kB of pages touched for a 4 kB input) costs more than the record. Here the
//! input itself is the window, the hash heads are 4,096 `u16`s (8 kB), the chains one `u16`
//! distance per position of a window no larger than the input (8 kB for a 4 kB record), and the
//! block's symbols one `u32` each: ~20 kB for a typical record.
//!
//! The stream is LZ77 over hash chains with one step of lazy matching, in blocks of at most
//! [`BLOCK_SYMBOLS`] symbols, each written stored, with the fixed codes or with its own dynamic
//! codes, whichever is smallest. Any valid stream decodes the same, so the wire format and its
//! decoder (miniz_oxide's inflate on the site side) are unchanged.

/// Longest and shortest match, and the farthest a match may reach back (RFC 1951, 3.2.5).
const MAX_MATCH: usize = 258;
const MIN_MATCH: usize = 3;
const MAX_DISTANCE: usize = 32_768;

/// Hash heads: 2^12 buckets of the three bytes at a position.
const HASH_BITS: u32 = 12;

/// Candidates tried for a match at one position, and the length after which the search stops:
/// records are short, so a deep search costs little and buys most of what level 9 gets.
const MAX_CHAIN: usize = 256;
const GOOD_ENOUGH: usize = 128;

/// Symbols (literals and matches) per block: a block's codes fit its own statistics.
const BLOCK_SYMBOLS: usize = 16_384;

/// Base lengths of the length symbols 257..=285 and their extra bits.
const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// Base distances of the distance symbols 0..=29 and their extra bits.
const DISTANCE_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DISTANCE_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
/// The order in which the code-length code's lengths are sent (RFC 1951, 3.2.7).
const CODE_LENGTH_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// The literal/length code has 288 symbols, of which 286 and 287 never occur (they complete
/// the fixed code).
const LITERAL_LENGTH_SYMBOLS: usize = 288;
const DISTANCE_SYMBOLS: usize = 30;
const END_OF_BLOCK: usize = 256;

/// `data` as one raw DEFLATE stream (no zlib or gzip header).
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut out = BitWriter::with_capacity(data.len() / 3 + 16);
    let mut matcher = Matcher::new(data);
    let mut block = Block::new(data.len());
    let mut block_start = 0;
    let mut pending: Option<Match> = None;
    let mut pos = 0;
    while pos < data.len() {
        let found = matcher.longest_match(pos);
        matcher.insert(pos);
        match pending.take() {
            // Lazy matching: a longer match one byte on wins over the one before it.
            Some(previous) if found.length <= previous.length => {
                block.push_match(previous);
                let end = pos - 1 + previous.length;
                for inserted in pos + 1..end {
                    matcher.insert(inserted);
                }
                pos = end;
            }
            previous => {
                if previous.is_some() {
                    block.push_literal(data[pos - 1]);
                }
                if found.length >= GOOD_ENOUGH {
                    block.push_match(found);
                    let end = pos + found.length;
                    for inserted in pos + 1..end {
                        matcher.insert(inserted);
                    }
                    pos = end;
                } else if found.length >= MIN_MATCH {
                    pending = Some(found);
                    pos += 1;
                } else {
                    block.push_literal(data[pos]);
                    pos += 1;
                }
            }
        }
        if block.is_full() && pending.is_none() {
            block.write(&mut out, &data[block_start..pos], false);
            block_start = pos;
        }
    }
    if let Some(last) = pending {
        block.push_match(last);
    }
    block.write(&mut out, &data[block_start..], true);
    let deflated = out.finish();
    // Incompressible input: its blocks, each cut by its symbols, may carry more stored
    // headers than one copy in 65,535-byte pieces, the most `wire::PAYLOAD_MAX` allows for.
    if deflated.len() > stored_len(data.len()) {
        let mut out = BitWriter::with_capacity(stored_len(data.len()));
        write_stored(&mut out, data, true);
        return out.finish();
    }
    deflated
}

/// Bytes of `len` input bytes stored whole: 5 bytes of header a piece of at most 65,535.
pub fn stored_len(len: usize) -> usize {
    len + 5 * len.div_ceil(65_535).max(1)
}

/// A match: `length` bytes equal to those `distance` bytes before.
#[derive(Clone, Copy, Default)]
struct Match {
    length: usize,
    distance: usize,
}

/// Hash chains over the input, which is the window.
struct Matcher<'a> {
    data: &'a [u8],
    /// The low 16 bits of the latest position with each hash; a stale or unset head only yields
    /// a candidate whose bytes are then compared, never a wrong match.
    heads: Vec<u16>,
    /// Per position (modulo the table's length), the distance back to the previous position
    /// with the same hash; 0 ends the chain.
    previous: Vec<u16>,
}

impl<'a> Matcher<'a> {
    fn new(data: &'a [u8]) -> Self {
        let window = data.len().clamp(1, MAX_DISTANCE).next_power_of_two();
        Matcher {
            data,
            heads: vec![0; 1 << HASH_BITS],
            previous: vec![0; window],
        }
    }

    fn hash(&self, pos: usize) -> Option<usize> {
        let bytes = self.data.get(pos..pos + MIN_MATCH)?;
        let key = u32::from(bytes[0]) | u32::from(bytes[1]) << 8 | u32::from(bytes[2]) << 16;
        Some((key.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize)
    }

    /// Where the chain of `pos`'s hash starts, before `pos` is inserted.
    fn head(&self, pos: usize, hash: usize) -> Option<usize> {
        let back = (pos as u16).wrapping_sub(self.heads[hash]) as usize;
        (back != 0)
            .then(|| pos - back.min(pos))
            .filter(|&cand| cand < pos)
    }

    fn insert(&mut self, pos: usize) {
        let Some(hash) = self.hash(pos) else {
            return;
        };
        let back = self
            .head(pos, hash)
            .map(|cand| pos - cand)
            .filter(|&back| back < MAX_DISTANCE)
            .unwrap_or(0);
        let slot = pos & (self.previous.len() - 1);
        self.previous[slot] = back as u16;
        self.heads[hash] = pos as u16;
    }

    /// The longest match at `pos` (the nearest of equal ones), or a length below
    /// [`MIN_MATCH`].
    fn longest_match(&self, pos: usize) -> Match {
        let mut best = Match::default();
        let Some(hash) = self.hash(pos) else {
            return best;
        };
        let limit = MAX_MATCH.min(self.data.len() - pos);
        let here = &self.data[pos..pos + limit];
        let mut candidate = self.head(pos, hash);
        let mut tries = MAX_CHAIN;
        while let Some(cand) = candidate {
            let distance = pos - cand;
            if distance >= MAX_DISTANCE || tries == 0 {
                break;
            }
            tries -= 1;
            let there = &self.data[cand..cand + limit];
            if there[best.length.min(limit - 1)] == here[best.length.min(limit - 1)] {
                let length = here.iter().zip(there).take_while(|(a, b)| a == b).count();
                if length > best.length {
                    best = Match { length, distance };
                    if length >= limit || length >= GOOD_ENOUGH {
                        break;
                    }
                }
            }
            let back = self.previous[cand & (self.previous.len() - 1)] as usize;
            candidate = (back != 0 && back <= cand).then(|| cand - back);
        }
        best
    }
}

/// One block's symbols: a literal is its byte, a match `distance << 8 | (length - 3)`.
struct Block {
    symbols: Vec<u32>,
}

impl Block {
    fn new(input_len: usize) -> Self {
        Block {
            symbols: Vec::with_capacity(input_len.min(BLOCK_SYMBOLS) / 2 + 1),
        }
    }

    fn push_literal(&mut self, byte: u8) {
        self.symbols.push(u32::from(byte));
    }

    fn push_match(&mut self, found: Match) {
        self.symbols
            .push((found.distance as u32) << 8 | (found.length - MIN_MATCH) as u32);
    }

    fn is_full(&self) -> bool {
        self.symbols.len() >= BLOCK_SYMBOLS
    }

    /// Write the block (whose symbols spell `input`) in the smallest of the three forms, and
    /// start the next.
    fn write(&mut self, out: &mut BitWriter, input: &[u8], last: bool) {
        let mut literal_counts = [0u32; LITERAL_LENGTH_SYMBOLS];
        let mut distance_counts = [0u32; DISTANCE_SYMBOLS];
        literal_counts[END_OF_BLOCK] = 1;
        for &symbol in &self.symbols {
            match decode_symbol(symbol) {
                Symbol::Literal(byte) => literal_counts[usize::from(byte)] += 1,
                Symbol::Match { length, distance } => {
                    literal_counts[257 + length.0] += 1;
                    distance_counts[distance.0] += 1;
                }
            }
        }
        let dynamic = DynamicCodes::new(&literal_counts, &distance_counts);
        let fixed = fixed_codes();
        let dynamic_bits =
            dynamic.header_bits() + self.body_bits(&dynamic.literal, &dynamic.distance);
        let fixed_bits = 3 + self.body_bits(&fixed.0, &fixed.1);
        let stored_bits = stored_bits(input.len(), out.pending_bits());
        if stored_bits < dynamic_bits.min(fixed_bits) {
            write_stored(out, input, last);
        } else if fixed_bits <= dynamic_bits {
            out.put(u32::from(last) | 1 << 1, 3);
            self.write_symbols(out, &fixed.0, &fixed.1);
        } else {
            out.put(u32::from(last) | 2 << 1, 3);
            dynamic.write_header(out);
            self.write_symbols(out, &dynamic.literal, &dynamic.distance);
        }
        self.symbols.clear();
    }

    /// Bits of the symbols and the end of block in `literal` and `distance` codes.
    fn body_bits(
        &self,
        literal: &Code<LITERAL_LENGTH_SYMBOLS>,
        distance: &Code<DISTANCE_SYMBOLS>,
    ) -> u64 {
        let mut bits = u64::from(literal.lengths[END_OF_BLOCK]);
        for &symbol in &self.symbols {
            bits += match decode_symbol(symbol) {
                Symbol::Literal(byte) => u64::from(literal.lengths[usize::from(byte)]),
                Symbol::Match {
                    length,
                    distance: dist,
                } => {
                    u64::from(literal.lengths[257 + length.0])
                        + u64::from(LENGTH_EXTRA[length.0])
                        + u64::from(distance.lengths[dist.0])
                        + u64::from(DISTANCE_EXTRA[dist.0])
                }
            };
        }
        bits
    }

    fn write_symbols(
        &self,
        out: &mut BitWriter,
        literal: &Code<LITERAL_LENGTH_SYMBOLS>,
        distance: &Code<DISTANCE_SYMBOLS>,
    ) {
        for &symbol in &self.symbols {
            match decode_symbol(symbol) {
                Symbol::Literal(byte) => literal.put(out, usize::from(byte)),
                Symbol::Match {
                    length,
                    distance: dist,
                } => {
                    literal.put(out, 257 + length.0);
                    out.put(length.1, LENGTH_EXTRA[length.0]);
                    distance.put(out, dist.0);
                    out.put(dist.1, DISTANCE_EXTRA[dist.0]);
                }
            }
        }
        literal.put(out, END_OF_BLOCK);
    }
}

enum Symbol {
    Literal(u8),
    /// The length's and the distance's symbol index with its extra bits' value.
    Match {
        length: (usize, u32),
        distance: (usize, u32),
    },
}

fn decode_symbol(symbol: u32) -> Symbol {
    let distance = symbol >> 8;
    if distance == 0 {
        return Symbol::Literal(symbol as u8);
    }
    let length = (symbol & 0xff) as u16 + MIN_MATCH as u16;
    let length_index = LENGTH_BASE.partition_point(|&base| base <= length) - 1;
    let distance_index = DISTANCE_BASE.partition_point(|&base| u32::from(base) <= distance) - 1;
    Symbol::Match {
        length: (length_index, u32::from(length - LENGTH_BASE[length_index])),
        distance: (
            distance_index,
            distance - u32::from(DISTANCE_BASE[distance_index]),
        ),
    }
}

/// Bits a stored copy of `len` bytes takes, `pending` bits into the current byte.
fn stored_bits(len: usize, pending: u32) -> u64 {
    let pieces = len.div_ceil(65_535).max(1) as u64;
    // The first header, padding to the byte, LEN and NLEN, then whole bytes.
    let first = u64::from(3 + (8 - (pending + 3) % 8) % 8);
    first + (pieces - 1) * 8 + pieces * 32 + len as u64 * 8
}

fn write_stored(out: &mut BitWriter, input: &[u8], last: bool) {
    let mut pieces = input.chunks(65_535).peekable();
    if pieces.peek().is_none() {
        out.put(u32::from(last), 3);
        out.align();
        out.put(0xffff_0000, 32);
        return;
    }
    while let Some(piece) = pieces.next() {
        let final_piece = last && pieces.peek().is_none();
        out.put(u32::from(final_piece), 3);
        out.align();
        let len = piece.len() as u32;
        out.put(len | (!len & 0xffff) << 16, 32);
        out.bytes(piece);
    }
}

/// A prefix code over `N` symbols: each symbol's bit length (0: unused) and its code, bits
/// reversed so that they go out first bit first.
struct Code<const N: usize> {
    lengths: [u8; N],
    codes: [u16; N],
}

impl<const N: usize> Code<N> {
    fn from_lengths(lengths: [u8; N]) -> Self {
        // Canonical codes (RFC 1951, 3.2.2).
        let mut per_length = [0u16; 16];
        for &length in &lengths {
            per_length[usize::from(length)] += 1;
        }
        per_length[0] = 0;
        let mut next = [0u16; 16];
        let mut code = 0u16;
        for bits in 1..16 {
            code = (code + per_length[bits - 1]) << 1;
            next[bits] = code;
        }
        let mut codes = [0u16; N];
        for (symbol, &length) in lengths.iter().enumerate() {
            if length > 0 {
                let code = next[usize::from(length)];
                next[usize::from(length)] += 1;
                codes[symbol] = code.reverse_bits() >> (16 - length);
            }
        }
        Code { lengths, codes }
    }

    /// The code for `counts`, no code longer than `max_bits`.
    fn for_counts(counts: &[u32; N], max_bits: u8) -> Self {
        Self::from_lengths(limited_lengths(counts, max_bits))
    }

    fn put(&self, out: &mut BitWriter, symbol: usize) {
        out.put(u32::from(self.codes[symbol]), self.lengths[symbol]);
    }
}

/// Huffman code lengths for `counts`, none over `max_bits`. At least two symbols get a code
/// (a code of one symbol would be incomplete, which some decoders refuse). When the optimal
/// code is too deep, the counts are flattened (halved, kept above zero) until it fits: a
/// little worse than package-merge, never wrong.
fn limited_lengths<const N: usize>(counts: &[u32; N], max_bits: u8) -> [u8; N] {
    let mut weights = *counts;
    let mut used = weights.iter().filter(|&&count| count > 0).count();
    for weight in weights.iter_mut() {
        if used >= 2 {
            break;
        }
        if *weight == 0 {
            *weight = 1;
            used += 1;
        }
    }
    loop {
        let lengths = huffman_lengths(&weights);
        if lengths.iter().all(|&length| length <= max_bits) {
            return lengths;
        }
        for weight in weights.iter_mut().filter(|weight| **weight > 0) {
            *weight = (*weight >> 1).max(1);
        }
    }
}

/// Optimal (unlimited) code lengths for the non-zero `weights`: the two-queue Huffman
/// construction over the leaves sorted by weight. Plain arrays and an insertion sort (at most
/// 288 leaves): core's generic sort and collections would be code outside `.text.finalize`
/// (profiler/finalize.ld), one more 64 KiB chunk each on rank 0.
fn huffman_lengths<const N: usize>(weights: &[u32; N]) -> [u8; N] {
    // The leaves (weight, symbol), sorted by weight.
    let mut leaves = [(0u32, 0u16); N];
    let mut count = 0;
    for (symbol, &weight) in weights.iter().enumerate() {
        if weight == 0 {
            continue;
        }
        let mut at = count;
        while at > 0 && leaves[at - 1].0 > weight {
            leaves[at] = leaves[at - 1];
            at -= 1;
        }
        leaves[at] = (weight, symbol as u16);
        count += 1;
    }
    // Nodes: the leaves 0..count, then the merged ones in the order they are made (their
    // weights never decrease); each node's parent.
    let mut merged = [0u32; N];
    let mut parent = [0u16; N];
    let mut leaf_parent = [0u16; N];
    let (mut next_leaf, mut next_merged, mut made) = (0, 0, 0);
    while made + 1 < count {
        let mut pair = [0usize; 2];
        for node in &mut pair {
            let take_leaf = next_leaf < count
                && (next_merged == made || leaves[next_leaf].0 <= merged[next_merged]);
            if take_leaf {
                *node = next_leaf;
                next_leaf += 1;
            } else {
                *node = count + next_merged;
                next_merged += 1;
            }
        }
        let weight_of = |node: usize| {
            if node < count {
                leaves[node].0
            } else {
                merged[node - count]
            }
        };
        merged[made] = weight_of(pair[0]) + weight_of(pair[1]);
        for node in pair {
            if node < count {
                leaf_parent[node] = made as u16;
            } else {
                parent[node - count] = made as u16;
            }
        }
        made += 1;
    }
    // Depths from the root (the last node made) down: a parent is made after its children.
    let mut depth = [0u8; N];
    for node in (0..made.saturating_sub(1)).rev() {
        depth[node] = depth[usize::from(parent[node])] + 1;
    }
    let mut lengths = [0u8; N];
    for leaf in 0..count {
        lengths[usize::from(leaves[leaf].1)] = depth[usize::from(leaf_parent[leaf])] + 1;
    }
    lengths
}

/// The fixed codes (RFC 1951, 3.2.6).
fn fixed_codes() -> (Code<LITERAL_LENGTH_SYMBOLS>, Code<DISTANCE_SYMBOLS>) {
    let mut literal = [8u8; LITERAL_LENGTH_SYMBOLS];
    literal[144..256].fill(9);
    literal[256..280].fill(7);
    (
        Code::from_lengths(literal),
        Code::from_lengths([5; DISTANCE_SYMBOLS]),
    )
}

/// A block's own codes, and how their lengths are sent: run-length coded (symbols 16, 17, 18)
/// with the code-length code.
struct DynamicCodes {
    literal: Code<LITERAL_LENGTH_SYMBOLS>,
    distance: Code<DISTANCE_SYMBOLS>,
    literal_sent: usize,
    distance_sent: usize,
    /// Code-length symbols with the value of their extra bits.
    runs: Vec<(u8, u8)>,
    length_code: Code<19>,
    length_code_sent: usize,
}

impl DynamicCodes {
    fn new(
        literal_counts: &[u32; LITERAL_LENGTH_SYMBOLS],
        distance_counts: &[u32; DISTANCE_SYMBOLS],
    ) -> Self {
        let literal = Code::for_counts(literal_counts, 15);
        let distance = Code::for_counts(distance_counts, 15);
        let literal_sent = 257.max(last_used(&literal.lengths));
        let distance_sent = 1.max(last_used(&distance.lengths));
        let runs = runs_of(
            &literal.lengths[..literal_sent],
            &distance.lengths[..distance_sent],
        );
        let mut run_counts = [0u32; 19];
        for &(symbol, _) in &runs {
            run_counts[usize::from(symbol)] += 1;
        }
        let length_code = Code::for_counts(&run_counts, 7);
        let length_code_sent = 4.max(
            CODE_LENGTH_ORDER
                .iter()
                .rposition(|&symbol| length_code.lengths[symbol] > 0)
                .map_or(0, |last| last + 1),
        );
        DynamicCodes {
            literal,
            distance,
            literal_sent,
            distance_sent,
            runs,
            length_code,
            length_code_sent,
        }
    }

    fn header_bits(&self) -> u64 {
        let runs: u64 = self
            .runs
            .iter()
            .map(|&(symbol, _)| {
                u64::from(self.length_code.lengths[usize::from(symbol)])
                    + u64::from(run_extra_bits(symbol))
            })
            .sum();
        3 + 5 + 5 + 4 + 3 * self.length_code_sent as u64 + runs
    }

    fn write_header(&self, out: &mut BitWriter) {
        out.put((self.literal_sent - 257) as u32, 5);
        out.put((self.distance_sent - 1) as u32, 5);
        out.put((self.length_code_sent - 4) as u32, 4);
        for &symbol in &CODE_LENGTH_ORDER[..self.length_code_sent] {
            out.put(u32::from(self.length_code.lengths[symbol]), 3);
        }
        for &(symbol, extra) in &self.runs {
            self.length_code.put(out, usize::from(symbol));
            out.put(u32::from(extra), run_extra_bits(symbol));
        }
    }
}

/// One past the last symbol with a code.
fn last_used(lengths: &[u8]) -> usize {
    lengths
        .iter()
        .rposition(|&length| length > 0)
        .map_or(0, |last| last + 1)
}

fn run_extra_bits(symbol: u8) -> u8 {
    match symbol {
        16 => 2,
        17 => 3,
        18 => 7,
        _ => 0,
    }
}

/// Code lengths (the literal/length code's, then the distance code's, as one sequence) as
/// code-length symbols: 16 repeats the previous length 3-6 times, 17 and 18 give 3-10 and
/// 11-138 zeros.
fn runs_of(literal: &[u8], distance: &[u8]) -> Vec<(u8, u8)> {
    let mut lengths = [0u8; LITERAL_LENGTH_SYMBOLS + DISTANCE_SYMBOLS];
    let total = literal.len() + distance.len();
    lengths[..literal.len()].copy_from_slice(literal);
    lengths[literal.len()..total].copy_from_slice(distance);
    let lengths = &lengths[..total];
    let mut runs = Vec::with_capacity(total);
    let mut at = 0;
    while at < total {
        let length = lengths[at];
        let mut run = 1;
        while at + run < total && lengths[at + run] == length {
            run += 1;
        }
        let mut left = run;
        if length == 0 {
            while left >= 11 {
                let take = left.min(138);
                runs.push((18, (take - 11) as u8));
                left -= take;
            }
            if left >= 3 {
                runs.push((17, (left - 3) as u8));
                left = 0;
            }
        } else {
            runs.push((length, 0));
            left -= 1;
            while left >= 3 {
                let take = left.min(6);
                runs.push((16, (take - 3) as u8));
                left -= take;
            }
        }
        for _ in 0..left {
            runs.push((length, 0));
        }
        at += run;
    }
    runs
}

/// Bits out first bit first, as DEFLATE packs them.
struct BitWriter {
    bytes: Vec<u8>,
    word: u64,
    filled: u32,
}

impl BitWriter {
    fn with_capacity(capacity: usize) -> Self {
        BitWriter {
            bytes: Vec::with_capacity(capacity),
            word: 0,
            filled: 0,
        }
    }

    /// The low `count` bits of `value` (at most 32).
    fn put(&mut self, value: u32, count: u8) {
        let mask = if count >= 32 {
            u32::MAX
        } else {
            (1 << count) - 1
        };
        self.word |= u64::from(value & mask) << self.filled;
        self.filled += u32::from(count);
        while self.filled >= 8 {
            self.bytes.push(self.word as u8);
            self.word >>= 8;
            self.filled -= 8;
        }
    }

    fn pending_bits(&self) -> u32 {
        self.filled
    }

    fn align(&mut self) {
        if self.filled > 0 {
            self.put(0, (8 - self.filled) as u8);
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        debug_assert_eq!(self.filled, 0);
        self.bytes.extend_from_slice(bytes);
    }

    fn finish(mut self) -> Vec<u8> {
        self.align();
        self.bytes
    }
}
