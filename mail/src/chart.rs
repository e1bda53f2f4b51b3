//! The HTML mail's charts as PNG images (mail clients show `cid:` images, not scripts or SVG),
//! drawn with `plotters`' bitmap backend and the bundled font ([`mpistat_render::plot`]), encoded with
//! the `png` crate: where the MPI time goes per routine (routine names on the axis, time in
//! engineering units, a legend of the estimate's parts), and the user's MPI share among all
//! users of the week. At most [`WIDTH`] pixels wide: they fit the mail's 600 px.

use mpistat_record::units::duration;
use mpistat_render::plot::{fonts, FONT};
use mpistat_render::user::UserDigest;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

/// Width of both images in pixels.
pub const WIDTH: u32 = 560;
const ROW_HEIGHT: u32 = 24;
/// Routines drawn (the table lists them all).
pub const MAX_ROUTINES: usize = 8;

/// Latency, transfer, synchronisation, no estimate.
pub const PART_COLOURS: [(&str, [u8; 3]); 4] = [
    ("latency", [31, 119, 180]),
    ("transfer", [44, 160, 44]),
    ("synchronisation", [255, 127, 14]),
    ("no estimate", [170, 170, 170]),
];

fn colour([r, g, b]: [u8; 3]) -> RGBColor {
    RGBColor(r, g, b)
}

/// Draw `draw` on a white `WIDTH` x `height` RGB picture and encode it as PNG. A drawing error
/// (none is expected: memory only) leaves what was drawn so far; the mail goes out anyway.
fn png(
    height: u32,
    draw: impl FnOnce(&DrawingArea<BitMapBackend, plotters::coord::Shift>) -> DrawResult,
) -> Vec<u8> {
    fonts();
    let mut pixels = vec![255u8; (3 * WIDTH * height) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, height)).into_drawing_area();
        let _ = draw(&root);
        let _ = root.present();
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, WIDTH, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Flat colour areas compress well at any level; the best level costs a quarter of a digest
    // of a thousand users and saves almost nothing.
    encoder.set_compression(png::Compression::Fast);
    let written = encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(&pixels));
    match written {
        Ok(()) => out,
        // Only an impossible size fails: no image rather than a broken one.
        Err(_) => Vec::new(),
    }
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// One bar per routine (the first [`MAX_ROUTINES`] of the table), its length the routine's
/// time, split into the latency, transfer and synchronisation estimates.
pub fn routine_bars(d: &UserDigest) -> Vec<u8> {
    let rows = &d.routines[..d.routines.len().min(MAX_ROUTINES)];
    let n = rows.len().max(1) as u32;
    let height = n * ROW_HEIGHT + 84;
    png(height, |root| {
        legend(root)?;
        let longest = rows.iter().map(|r| r.time_ns).max().unwrap_or(1).max(1) as f64;
        let mut chart = ChartBuilder::on(root)
            .margin(6)
            .margin_top(28)
            .x_label_area_size(34)
            .y_label_area_size(112)
            // Segments 0..n-1, one per row (plotters' integer ranges include their end).
            .build_cartesian_2d(0.0..longest * 1.02, (0..n - 1).into_segmented())?;
        // Row i (from the top) is segment n - 1 - i.
        let name = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(k) if *k < n => rows
                .get((n - 1 - k) as usize)
                .map_or(String::new(), |r| r.name.clone()),
            _ => String::new(),
        };
        let time = |ns: &f64| duration(ns.max(0.0) as u64);
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n as usize)
            .y_label_formatter(&name)
            .x_labels(5)
            .x_label_formatter(&time)
            .x_desc("MPI time, summed over ranks")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()?;
        // Each row's parts, left to right; a routine without estimates is one grey bar.
        let parts = |r: &mpistat_figures::sums::RoutineRow| match (r.latency_ns, r.transfer_ns) {
            (Some(latency), Some(transfer)) => {
                let total = r.time_ns as f64;
                let latency = latency.clamp(0.0, total);
                let transfer = transfer.clamp(0.0, total - latency);
                [latency, transfer, total - latency - transfer, 0.0]
            }
            _ => [0.0, 0.0, 0.0, r.time_ns as f64],
        };
        for (k, (_, rgb)) in PART_COLOURS.iter().enumerate() {
            let bars = rows.iter().enumerate().filter_map(|(i, r)| {
                let p = parts(r);
                let start: f64 = p[..k].iter().sum();
                let row = n - 1 - i as u32;
                (p[k] > 0.0).then(|| {
                    let mut bar = Rectangle::new(
                        [
                            (start, SegmentValue::Exact(row)),
                            (start + p[k], SegmentValue::Exact(row + 1)),
                        ],
                        colour(*rgb).filled(),
                    );
                    bar.set_margin(3, 3, 0, 0);
                    bar
                })
            });
            chart.draw_series(bars)?;
        }
        Ok(())
    })
}

/// The parts' colours and names in a row along the top.
fn legend(root: &DrawingArea<BitMapBackend, plotters::coord::Shift>) -> DrawResult {
    let items: Vec<(&str, RGBColor)> = PART_COLOURS
        .iter()
        .map(|(name, rgb)| (*name, colour(*rgb)))
        .collect();
    mpistat_render::plot::legend(root, &items, 118, 8)
}

/// A 0..100 % axis with a grey tick per user of the week and a black bar for this user. The
/// ticks that fall on the same pixel columns are drawn once ([`distinct_ticks`]): the same
/// picture, at a cost that no longer grows with the users (10,000 users' ticks are a few hundred
/// distinct ones, and every user's mail drew all of them: 45 % of the mails' time).
pub fn mpi_share_strip(d: &UserDigest) -> Vec<u8> {
    share_strip(d.mpi_percent, |to_pixels| {
        distinct_ticks(&d.site_mpi_percents, to_pixels)
    })
}

/// A share's tick on the strip: 0.3 % wide, the middle 60 % of its height.
fn tick(share: f64) -> [(f64, f64); 2] {
    let p = share.clamp(0.0, 100.0);
    [(p - 0.15, 0.2), (p + 0.15, 0.8)]
}

/// One of `shares` for each distinct pair of pixel columns their ticks span (`to_pixels`: a
/// point's pixel column): the ticks are all alike and opaque, so drawing these draws every pixel
/// that drawing them all would.
fn distinct_ticks(shares: &[f64], to_pixels: &dyn Fn((f64, f64)) -> i32) -> Vec<f64> {
    let mut ticks: Vec<((i32, i32), f64)> = shares
        .iter()
        .map(|&share| {
            let [left, right] = tick(share);
            ((to_pixels(left), to_pixels(right)), share)
        })
        .collect();
    ticks.sort_unstable_by_key(|(columns, _)| *columns);
    ticks.dedup_by_key(|(columns, _)| *columns);
    ticks.into_iter().map(|(_, share)| share).collect()
}

/// The strip with a tick for each share `ticks` returns (given a point's pixel column) and
/// `you`'s bar.
fn share_strip(you: f64, ticks: impl FnOnce(&dyn Fn((f64, f64)) -> i32) -> Vec<f64>) -> Vec<u8> {
    png(64, |root| {
        let mut chart = ChartBuilder::on(root)
            .margin_left(10)
            .margin_right(16)
            .margin_top(4)
            .x_label_area_size(28)
            .build_cartesian_2d(0.0..100.0, 0.0..1.0)?;
        let percent = |v: &f64| format!("{v:.0} %");
        chart
            .configure_mesh()
            .disable_mesh()
            .disable_y_axis()
            .x_labels(11)
            .x_label_formatter(&percent)
            .label_style((FONT, 12))
            .draw()?;
        let grey = RGBColor(150, 150, 150);
        let shares = ticks(&|point| chart.backend_coord(&point).0);
        chart.draw_series(
            shares
                .into_iter()
                .map(|share| Rectangle::new(tick(share), grey.filled())),
        )?;
        let you = you.clamp(0.0, 100.0);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(you - 0.4, 0.0), (you + 0.4, 1.0)],
            BLACK.filled(),
        )))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strip of 10,000 users' shares (some alike, some out of range) drawn from its distinct
    /// ticks is, byte for byte, the strip with every user's tick, and draws at most one tick
    /// per pair of pixel columns it can span (a tick is one or two pixels wide).
    #[test]
    fn the_strip_of_distinct_ticks_is_the_strip_of_all() {
        let shares: Vec<f64> = (0..10_000u64)
            .map(|i| (i * 7_919 % 10_007) as f64 / 97.0 - 1.5)
            .chain([f64::NAN, 250.0, -3.0, 42.0, 42.0])
            .collect();
        let mut drawn = 0;
        let binned = share_strip(42.0, |to_pixels| {
            let distinct = distinct_ticks(&shares, to_pixels);
            drawn = distinct.len();
            distinct
        });
        let all = share_strip(42.0, |_| shares.clone());
        assert!(binned == all, "the pictures differ");
        assert!(
            0 < drawn && drawn <= 2 * WIDTH as usize,
            "{drawn} ticks drawn"
        );
    }
}
