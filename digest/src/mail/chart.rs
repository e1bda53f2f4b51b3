//! The HTML mail's charts as small PNG images (mail clients show `cid:` images, not scripts or
//! SVG): where the MPI time goes per routine, and the user's MPI share among all users of the
//! week. Labels are in the HTML around the images, so the images need no fonts.

use super::content::UserDigest;
use std::io::Write;

const WIDTH: usize = 480;
const ROW_HEIGHT: usize = 16;
const GAP: usize = 4;
/// Routines drawn (the table lists them all).
pub const MAX_ROUTINES: usize = 8;

const WHITE: [u8; 3] = [255, 255, 255];
const GREY: [u8; 3] = [170, 170, 170];
const BLACK: [u8; 3] = [0, 0, 0];
/// Latency, transfer, synchronisation, no estimate.
pub const PART_COLOURS: [(&str, [u8; 3]); 4] = [
    ("latency", [31, 119, 180]),
    ("transfer", [44, 160, 44]),
    ("synchronisation", [255, 127, 14]),
    ("no estimate", [170, 170, 170]),
];

/// An RGB picture.
struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            pixels: WHITE.repeat(width * height),
        }
    }

    fn fill(&mut self, x: usize, y: usize, w: usize, h: usize, colour: [u8; 3]) {
        for row in y..(y + h).min(self.height) {
            for col in x..(x + w).min(self.width) {
                let at = 3 * (row * self.width + col);
                self.pixels[at..at + 3].copy_from_slice(&colour);
            }
        }
    }

    /// PNG: signature, IHDR, one zlib IDAT of unfiltered rows, IEND.
    fn png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity((3 * self.width + 1) * self.height);
        for row in self.pixels.chunks(3 * self.width) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        // Flat colour areas compress well at any level; the best level costs a quarter of a
        // digest of a thousand users and saves almost nothing.
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        zlib.write_all(&raw).expect("writing to memory");
        let idat = zlib.finish().expect("writing to memory");
        let mut header = Vec::new();
        header.extend_from_slice(&(self.width as u32).to_be_bytes());
        header.extend_from_slice(&(self.height as u32).to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, deflate, no filter, no interlace
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        for (kind, data) in [(b"IHDR", &header), (b"IDAT", &idat), (b"IEND", &Vec::new())] {
            png.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut crc = crc32fast::Hasher::new();
            crc.update(kind);
            crc.update(data);
            png.extend_from_slice(kind);
            png.extend_from_slice(data);
            png.extend_from_slice(&crc.finalize().to_be_bytes());
        }
        png
    }
}

/// One bar per routine (the first [`MAX_ROUTINES`] of the table), its length the routine's
/// time, split into the latency, transfer and synchronisation estimates.
pub fn routine_bars(d: &UserDigest) -> Vec<u8> {
    let rows = &d.routines[..d.routines.len().min(MAX_ROUTINES)];
    let longest = rows.iter().map(|r| r.time_ns).max().unwrap_or(1).max(1) as f64;
    let mut canvas = Canvas::new(WIDTH, rows.len().max(1) * (ROW_HEIGHT + GAP) + GAP);
    for (i, r) in rows.iter().enumerate() {
        let y = GAP + i * (ROW_HEIGHT + GAP);
        let scale = |ns: f64| ((ns.max(0.0) / longest) * (WIDTH - 1) as f64).round() as usize;
        let total = scale(r.time_ns as f64);
        match (r.latency_ns, r.transfer_ns) {
            (Some(latency), Some(transfer)) => {
                let latency = scale(latency).min(total);
                let transfer = scale(transfer).min(total - latency);
                let sync = total - latency - transfer;
                canvas.fill(0, y, latency, ROW_HEIGHT, PART_COLOURS[0].1);
                canvas.fill(latency, y, transfer, ROW_HEIGHT, PART_COLOURS[1].1);
                canvas.fill(latency + transfer, y, sync, ROW_HEIGHT, PART_COLOURS[2].1);
            }
            _ => canvas.fill(0, y, total, ROW_HEIGHT, PART_COLOURS[3].1),
        }
    }
    canvas.png()
}

/// A 0..100 % axis with a grey tick per user of the week and a black bar for this user.
pub fn mpi_share_strip(d: &UserDigest) -> Vec<u8> {
    let height = 24;
    let mut canvas = Canvas::new(WIDTH, height);
    let x = |percent: f64| ((percent.clamp(0.0, 100.0) / 100.0) * (WIDTH - 3) as f64) as usize;
    canvas.fill(0, height / 2, WIDTH, 1, GREY);
    for percent in &d.site_mpi_percents {
        canvas.fill(x(*percent), 6, 1, height - 12, GREY);
    }
    canvas.fill(x(d.mpi_percent), 0, 3, height, BLACK);
    canvas.png()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_has_signature_header_and_end() {
        let png = Canvas::new(2, 3).png();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x02\0\0\0\x03"));
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]));
    }
}
