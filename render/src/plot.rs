//! What the charts of the mail (PNG, `mail::chart`) and of the admin pages (SVG,
//! `site_report::svg`) share: both are drawn with `plotters`, whose text needs a font.
//! The font is bundled: DejaVu Sans, committed under `render/fonts/` with its licence (Bitstream
//! Vera's: free to copy and redistribute, unmodified) and compiled into the binary, so drawing
//! text depends on no fontconfig, no installed font and no font name a machine may lack. Axis
//! numbers are in engineering units with three significant digits ([`number`]).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::sync::Once;

/// DejaVu Sans 2.37 (Debian's `fonts-dejavu-core`), the whole file.
static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// The font family every chart names.
pub const FONT: &str = "sans-serif";

/// Register the bundled font as [`FONT`]; every chart calls it before drawing (only the first
/// call does anything).
pub fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The committed font parses (a test checks it); were it not, plotters would report
        // every text it draws as an error, which the charts swallow.
        let _ = register_font(FONT, FontStyle::Normal, DEJAVU_SANS);
    });
}

/// A legend: a square of each item's colour and its name, in a row from (`x`, `y`) (the
/// squares' top left corner), on `area`.
pub fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(&str, RGBColor)],
    x: i32,
    y: i32,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let style = (FONT, 12).into_text_style(area);
    let mut x = x;
    for (name, colour) in items {
        area.draw(&Rectangle::new([(x, y), (x + 10, y + 10)], colour.filled()))?;
        let (w, _) = area.estimate_text_size(name, &style)?;
        area.draw(&Text::new(name.to_string(), (x + 14, y - 1), style.clone()))?;
        x += 14 + w as i32 + 16;
    }
    Ok(())
}

/// A number for an axis or a tooltip in at most about six characters and three significant
/// digits: decimal prefixes from a thousand on (`12.3k`, `4.56M`), plain decimals below
/// (`0.00125`, `12.5`, `250`), trailing zeros dropped, so ticks of small values stay apart
/// (`0.001`, `0.0015`, `0.002`, not `0.001 / 0.000`).
pub fn number(v: f64) -> String {
    const PREFIXES: [&str; 6] = ["k", "M", "G", "T", "P", "E"];
    if v == 0.0 || !v.is_finite() {
        return "0".to_string();
    }
    let (mut value, mut prefix) = (v, "");
    for p in PREFIXES {
        if value.abs() < 999.5 {
            break;
        }
        value /= 1e3;
        prefix = p;
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    let mut text = format!("{value:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    text + prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_three_significant_digits() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(0.0015), "0.0015");
        assert_eq!(number(0.000_123_4), "0.000123");
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(12.34), "12.3");
        assert_eq!(number(250.0), "250");
        assert_eq!(number(12_345.0), "12.3k");
        assert_eq!(number(4_560_000.0), "4.56M");
        assert_eq!(number(-2_000.0), "-2k");
        assert_eq!(number(999.7), "1k");
    }

    #[test]
    fn the_bundled_font_parses() {
        assert!(register_font("dejavu-test", FontStyle::Normal, DEJAVU_SANS).is_ok());
    }
}
