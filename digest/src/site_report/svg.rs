//! The admin pages' charts as inline SVG, written by hand: three chart kinds (horizontal bars,
//! columns, scatter) cover every figure, the output is small, deterministic (snapshot tests) and
//! needs no fonts or scripts. Every label goes through [`escape`].

use crate::html::escape;
use std::fmt::Write;

const WIDTH: f64 = 760.0;
const ROW: f64 = 18.0;
const LABEL_W: f64 = 190.0;
const NOTE_W: f64 = 210.0;
const TOP: f64 = 44.0;

/// Colours of series, in order (colour-blind safe, after Okabe and Ito).
pub const COLOURS: [&str; 6] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9",
];

/// A series' name and colour.
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: &'a str,
}

/// Series named `names`, coloured in order.
pub fn series<'a>(names: &[&'a str]) -> Vec<Series<'a>> {
    names
        .iter()
        .zip(COLOURS.iter().cycle())
        .map(|(name, colour)| Series { name, colour })
        .collect()
}

fn open(out: &mut String, title: &str, height: f64) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"{t}\" font-family=\"sans-serif\" font-size=\"11\">\
         <title>{t}</title><text x=\"4\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{t}</text>",
        t = escape(title)
    );
}

fn legend(out: &mut String, series: &[Series], y: f64) {
    let mut x = 4.0;
    for s in series {
        let _ = write!(
            out,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{y}\">{}</text>",
            y - 9.0,
            s.colour,
            x + 14.0,
            escape(s.name)
        );
        x += 24.0 + 6.5 * s.name.chars().count() as f64;
    }
}

/// One row of a bar chart: a label, a value per series, and a note right of the bars.
pub struct Bar {
    pub label: String,
    pub values: Vec<f64>,
    pub note: String,
}

/// Horizontal bars, one row per [`Bar`]: the series stacked (parts of a whole) or side by side
/// (grouped, thinner). The longest row fills the width; negative values count as zero.
pub fn hbars(title: &str, series: &[Series], rows: &[Bar], stacked: bool) -> String {
    let thin = 5.0;
    let per_row = if stacked {
        ROW
    } else {
        thin * series.len() as f64 + 6.0
    };
    let height = TOP + per_row * rows.len().max(1) as f64 + 8.0;
    let mut out = String::new();
    open(&mut out, title, height);
    legend(&mut out, series, 34.0);
    let longest = rows
        .iter()
        .map(|r| {
            if stacked {
                r.values.iter().map(|v| v.max(0.0)).sum::<f64>()
            } else {
                r.values.iter().copied().fold(0.0, f64::max)
            }
        })
        .fold(0.0, f64::max);
    let scale = if longest > 0.0 {
        (WIDTH - LABEL_W - NOTE_W - 8.0) / longest
    } else {
        0.0
    };
    if rows.is_empty() {
        let _ = write!(
            out,
            "<text x=\"{LABEL_W}\" y=\"{}\">no data</text>",
            TOP + 12.0
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + per_row * i as f64;
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LABEL_W - 6.0,
            y + 12.0,
            escape(&row.label)
        );
        let mut x = LABEL_W;
        let mut end: f64 = LABEL_W;
        for (k, (value, s)) in row.values.iter().zip(series).enumerate() {
            let w = value.max(0.0) * scale;
            let (bx, by, bh) = if stacked {
                (x, y + 2.0, ROW - 4.0)
            } else {
                (LABEL_W, y + 2.0 + thin * k as f64, thin)
            };
            let _ = write!(
                out,
                "<rect x=\"{bx:.1}\" y=\"{by:.1}\" width=\"{w:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{}: {}</title></rect>",
                s.colour,
                escape(s.name),
                short(*value)
            );
            x += w;
            end = end.max(bx + w);
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            end + 4.0,
            y + 12.0,
            escape(&row.note)
        );
    }
    out.push_str("</svg>");
    out
}

/// Vertical columns over `labels`, one group of columns per label (one column per series).
pub fn columns(title: &str, series: &[Series], labels: &[String], values: &[Vec<f64>]) -> String {
    let height = 240.0;
    let (left, bottom, top) = (50.0, height - 40.0, TOP + 6.0);
    let mut out = String::new();
    open(&mut out, title, height);
    legend(&mut out, series, 34.0);
    let max = values.iter().flatten().copied().fold(0.0, f64::max);
    axis_y(&mut out, left, top, bottom, max);
    let slot = (WIDTH - left - 10.0) / labels.len().max(1) as f64;
    let bar = (slot * 0.8 / series.len().max(1) as f64).max(1.0);
    for (i, label) in labels.iter().enumerate() {
        let x0 = left + slot * i as f64 + slot * 0.1;
        for (k, s) in series.iter().enumerate() {
            let v = values.get(i).and_then(|v| v.get(k)).copied().unwrap_or(0.0);
            let h = if max > 0.0 {
                v.max(0.0) / max * (bottom - top)
            } else {
                0.0
            };
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{}, {}: {}</title></rect>",
                x0 + bar * k as f64,
                bottom - h,
                s.colour,
                escape(label),
                escape(s.name),
                short(v)
            );
        }
        // Thin out labels so that they do not overlap.
        let every = (labels.len() as f64 * 7.0 * 6.0 / (WIDTH - left))
            .ceil()
            .max(1.0) as usize;
        if i % every == 0 {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x0 + slot * 0.4,
                bottom + 14.0,
                escape(label)
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// A point of a scatter chart.
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Shown when the pointer rests on the point.
    pub label: String,
}

/// Points over a logarithmic (base 2) x axis and a linear y axis from 0.
pub fn scatter(title: &str, x_name: &str, y_name: &str, points: &[Point]) -> String {
    let height = 280.0;
    let (left, bottom, top, right) = (50.0, height - 40.0, TOP, WIDTH - 10.0);
    let mut out = String::new();
    open(&mut out, title, height);
    let max_y = points.iter().map(|p| p.y).fold(0.0, f64::max);
    axis_y(&mut out, left, top, bottom, max_y);
    let log = |x: f64| x.max(1.0).log2();
    let max_x = points.iter().map(|p| log(p.x)).fold(1.0, f64::max).ceil();
    let px = |x: f64| left + log(x) / max_x * (right - left);
    for k in 0..=max_x as u32 {
        let x = px(f64::from(1u32 << k.min(31)));
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#999\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            bottom + 4.0,
            bottom + 16.0,
            1u64 << k.min(63)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"4\" y=\"{}\">{}</text>",
        (left + right) / 2.0,
        height - 6.0,
        escape(x_name),
        top - 6.0,
        escape(y_name)
    );
    for p in points {
        let y = if max_y > 0.0 {
            bottom - p.y / max_y * (bottom - top)
        } else {
            bottom
        };
        let _ = write!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.6\"><title>{}</title></circle>",
            px(p.x),
            COLOURS[0],
            escape(&p.label)
        );
    }
    out.push_str("</svg>");
    out
}

/// A y axis from 0 to `max` with four grid lines.
fn axis_y(out: &mut String, left: f64, top: f64, bottom: f64, max: f64) {
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#333\"/>\
         <line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#333\"/>",
        WIDTH - 10.0
    );
    for k in 1..=4 {
        let y = bottom - (bottom - top) * f64::from(k) / 4.0;
        let _ = write!(
            out,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - 10.0,
            left - 4.0,
            y + 4.0,
            short(max * f64::from(k) / 4.0)
        );
    }
}

/// A number in at most about five characters.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_bars_drawn() {
        let rows = [Bar {
            label: "<script>".into(),
            values: vec![1.0, 2.0],
            note: "a&b".into(),
        }];
        let svg = hbars("t", &series(&["x", "y"]), &rows, true);
        assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script>"));
        assert!(svg.contains("a&amp;b"));
        assert_eq!(svg.matches("<rect").count(), 2 + 2, "legend and bars");
    }

    #[test]
    fn empty_charts_are_still_svg() {
        assert!(hbars("t", &series(&["x"]), &[], true).ends_with("</svg>"));
        assert!(columns("t", &series(&["x"]), &[], &[]).ends_with("</svg>"));
        assert!(scatter("t", "x", "y", &[]).ends_with("</svg>"));
    }
}
