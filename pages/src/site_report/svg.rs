//! The admin pages' charts as inline SVG, drawn with `plotters`' SVG backend and the bundled
//! font's metrics ([`mpistat_render::plot`]): three chart kinds (horizontal bars, columns, scatter) cover
//! every figure, each with a title, a legend, axes in engineering units ([`number`]) and a
//! tooltip (`<title>`) on every data mark, which plotters does not write: [`Marking`] notes
//! which shapes are data marks as they are drawn and [`with_tooltips`] adds their titles. The
//! output is deterministic (snapshot tests) and needs no scripts. Every label is escaped.

use mpistat_render::plot::{fonts, number, FONT};
use mpistat_site::html::escape;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const WIDTH: u32 = 760;
const ROW: u32 = 18;
const LABEL_W: u32 = 190;
const NOTE_W: u32 = 210;
const TOP: u32 = 44;

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

/// `#rrggbb` as a colour (black if it is not one).
fn rgb(colour: &str) -> RGBColor {
    let channel = |at: usize| {
        colour
            .get(at..at + 2)
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .unwrap_or(0)
    };
    RGBColor(channel(1), channel(3), channel(5))
}

/// What the drawing of one chart shares with its backend: whether data marks are being drawn
/// now, and for every rectangle or circle written (in order) whether it is one.
#[derive(Default)]
struct Marks {
    drawing_data: Cell<bool>,
    written: RefCell<Vec<bool>>,
}

/// plotters' SVG backend, noting which of the shapes it writes are data marks ([`Marks`]).
struct Marking<'a> {
    svg: SVGBackend<'a>,
    marks: Rc<Marks>,
}

impl Marking<'_> {
    fn note(&self) {
        let data = self.marks.drawing_data.get();
        self.marks.written.borrow_mut().push(data);
    }
}

type Failed<'a> = DrawingErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for Marking<'a> {
    type ErrorType = <SVGBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.svg.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), Failed<'a>> {
        self.svg.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), Failed<'a>> {
        self.svg.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Failed<'a>> {
        // Written as a 1x1 <rect>: never a data mark.
        let data = self.marks.drawing_data.replace(false);
        self.note();
        self.marks.drawing_data.set(data);
        self.svg.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.svg.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Failed<'a>> {
        self.note();
        self.svg.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.svg.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Failed<'a>> {
        self.note();
        self.svg.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.svg.fill_polygon(vert, style)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), Failed<'a>> {
        self.svg.draw_text(text, style, pos)
    }
}

type Area<'a> = DrawingArea<Marking<'a>, Shift>;
type Drawn = Result<(), Box<dyn std::error::Error>>;

/// A chart `height` pixels high drawn by `draw`, which gets the drawing area and a function to
/// call around the drawing of data marks (`data(true)` before, `data(false)` after), and
/// returns the marks' tooltips in the order drawn. Title and accessible name are `title`; a
/// drawing error (none is expected: memory only) leaves what was drawn.
fn chart(
    title: &str,
    height: u32,
    draw: impl FnOnce(&Area, &dyn Fn(bool)) -> Result<Vec<String>, Box<dyn std::error::Error>>,
) -> String {
    fonts();
    let marks = Rc::new(Marks::default());
    let mut svg = String::new();
    let mut tips = Vec::new();
    {
        let backend = Marking {
            svg: SVGBackend::with_string(&mut svg, (WIDTH, height)),
            marks: Rc::clone(&marks),
        };
        let root = backend.into_drawing_area();
        let data = |on: bool| marks.drawing_data.set(on);
        let titled = root
            .draw(&Text::new(
                title.to_string(),
                (4, 4),
                (FONT, 13).into_font().style(FontStyle::Bold),
            ))
            .map_err(Into::into)
            .and_then(|()| draw(&root, &data));
        if let Ok(drawn) = titled {
            tips = drawn;
        }
        let _ = root.present();
    }
    let svg = with_tooltips(&svg, &marks.written.borrow(), &tips);
    // The accessible name and title, and the class the pages' style sheet sizes.
    let opening = format!(
        "<svg class=\"chart\" role=\"img\" aria-label=\"{t}\" ",
        t = escape(title)
    );
    let svg = svg.replacen("<svg ", &opening, 1);
    match svg.find(">\n") {
        Some(end) => format!(
            "{}<title>{}</title>{}",
            &svg[..end + 2],
            escape(title),
            &svg[end + 2..]
        ),
        None => svg,
    }
}

/// `svg` with `<title>tip</title>` in every data mark: the rectangles and circles in it are
/// those `written` notes, in order; the data marks among them get `tips` in order. Should the
/// counts differ (a plotters that writes shapes otherwise), no tooltips rather than wrong ones.
fn with_tooltips(svg: &str, written: &[bool], tips: &[String]) -> String {
    let shapes: Vec<usize> = svg
        .match_indices('<')
        .map(|(at, _)| at)
        .filter(|at| svg[*at..].starts_with("<rect ") || svg[*at..].starts_with("<circle "))
        .collect();
    if shapes.len() != written.len() || written.iter().filter(|d| **d).count() != tips.len() {
        return svg.to_string();
    }
    let mut out =
        String::with_capacity(svg.len() + tips.iter().map(|t| t.len() + 20).sum::<usize>());
    let mut copied = 0;
    let mut tips = tips.iter();
    for (&at, _) in shapes.iter().zip(written).filter(|(_, data)| **data) {
        let Some(end) = svg[at..].find("/>").map(|e| at + e) else {
            continue;
        };
        let tag = if svg[at..].starts_with("<rect") {
            "rect"
        } else {
            "circle"
        };
        out.push_str(&svg[copied..end]);
        out.push_str(&format!(
            "><title>{}</title></{tag}>",
            escape(tips.next().map_or("", String::as_str))
        ));
        copied = end + 2;
    }
    out.push_str(&svg[copied..]);
    out
}

/// The series' colours and names in a row at `y`.
fn legend(root: &Area, series: &[Series], y: i32) -> Drawn {
    let items: Vec<(&str, RGBColor)> = series.iter().map(|s| (s.name, rgb(s.colour))).collect();
    mpistat_render::plot::legend(root, &items, 4, y)
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
    let thin = 5;
    let per_row = if stacked {
        ROW
    } else {
        thin * series.len() as u32 + 6
    };
    let n = rows.len().max(1);
    let height = TOP + per_row * n as u32 + 30;
    chart(title, height, |root, data| {
        legend(root, series, 22)?;
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
        let mut c = ChartBuilder::on(root)
            .margin_top(TOP)
            .margin_right(NOTE_W)
            .margin_left(4)
            .margin_bottom(2)
            .x_label_area_size(24)
            .y_label_area_size(LABEL_W - 4)
            .build_cartesian_2d(0.0..longest.max(f64::MIN_POSITIVE), 0.0..n as f64)?;
        c.configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(5)
            .x_label_formatter(&|v| number(*v))
            .label_style((FONT, 11))
            .draw()?;
        let style = (FONT, 11).into_text_style(root);
        if rows.is_empty() {
            let at = c.backend_coord(&(0.0, 0.5));
            root.draw(&Text::new("no data", (at.0 + 6, at.1 - 6), style.clone()))?;
        }
        // Row i from the top spans y = n - 1 - i .. n - i.
        let mut tips = Vec::new();
        let mut bars = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let (y0, y1) = ((n - 1 - i) as f64, (n - i) as f64);
            let mut x = 0.0;
            let mut end: f64 = 0.0;
            for (k, (value, s)) in row.values.iter().zip(series).enumerate() {
                let w = value.max(0.0);
                let (from, to, (top, bottom)) = if stacked {
                    (x, x + w, (2, 2))
                } else {
                    let top = 2 + thin * k as u32;
                    (0.0, w, (top, per_row - top - thin))
                };
                let mut bar = Rectangle::new([(from, y1), (to, y0)], rgb(s.colour).filled());
                bar.set_margin(top, bottom, 0, 0);
                bars.push(bar);
                tips.push(format!("{}: {}", s.name, number(*value)));
                x += w;
                end = end.max(to);
            }
            let label = c.backend_coord(&(0.0, y0 + 0.5));
            let label_style = style.pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(
                row.label.clone(),
                (label.0 - 6, label.1),
                label_style,
            ))?;
            let note = c.backend_coord(&(end, y0 + 0.5));
            let note_style = style.pos(Pos::new(HPos::Left, VPos::Center));
            root.draw(&Text::new(
                row.note.clone(),
                (note.0 + 4, note.1),
                note_style,
            ))?;
        }
        data(true);
        c.draw_series(bars)?;
        data(false);
        Ok(tips)
    })
}

/// Vertical columns over `labels`, one group of columns per label (one column per series).
pub fn columns(title: &str, series: &[Series], labels: &[String], values: &[Vec<f64>]) -> String {
    chart(title, 240, |root, data| {
        legend(root, series, 22)?;
        let max = values.iter().flatten().copied().fold(0.0, f64::max);
        let slots = labels.len().max(1) as f64;
        let mut c = ChartBuilder::on(root)
            .margin_top(TOP + 6)
            .margin_right(10)
            .margin_bottom(4)
            .x_label_area_size(24)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..slots, 0.0..max.max(f64::MIN_POSITIVE))?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(5)
            .y_label_formatter(&|v| number(*v))
            .label_style((FONT, 11))
            .draw()?;
        // Thin out labels so that they do not overlap.
        let every = (labels.len() as f64 * 7.0 * 6.0 / f64::from(WIDTH - 50))
            .ceil()
            .max(1.0) as usize;
        let style = (FONT, 11)
            .into_text_style(root)
            .pos(Pos::new(HPos::Center, VPos::Top));
        let width = 0.8 / series.len().max(1) as f64;
        let mut tips = Vec::new();
        let mut bars = Vec::new();
        for (i, label) in labels.iter().enumerate() {
            let x0 = i as f64 + 0.1;
            for (k, s) in series.iter().enumerate() {
                let v = values.get(i).and_then(|v| v.get(k)).copied().unwrap_or(0.0);
                let from = x0 + width * k as f64;
                bars.push(Rectangle::new(
                    [(from, v.max(0.0)), (from + width, 0.0)],
                    rgb(s.colour).filled(),
                ));
                tips.push(format!("{label}, {}: {}", s.name, number(v)));
            }
            if i % every == 0 {
                let at = c.backend_coord(&(i as f64 + 0.5, 0.0));
                root.draw(&Text::new(label.clone(), (at.0, at.1 + 6), style.clone()))?;
            }
        }
        data(true);
        c.draw_series(bars)?;
        data(false);
        Ok(tips)
    })
}

/// A point of a scatter chart.
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Shown when the pointer rests on the point.
    pub label: String,
}

/// Opacity of a scatter chart's point.
const POINT_OPACITY: f64 = 0.6;

/// Tooltip labels of the points drawn as one circle, at most (then how many more).
const LABELS_PER_CIRCLE: usize = 3;

/// Points over a logarithmic (base 2) x axis and a linear y axis from 0. Points that fall on
/// the same pixel are one circle, as opaque as theirs stacked (`1 - (1 - a)^n`: the same
/// picture), whose tooltip names the first few: a month's 6,000 points of the imbalance chart
/// made most of `charts.html`'s megabyte.
pub fn scatter(title: &str, x_name: &str, y_name: &str, points: &[Point]) -> String {
    chart(title, 280, |root, data| {
        let max_y = points.iter().map(|p| p.y).fold(0.0, f64::max);
        let max_x = points.iter().map(|p| p.x).fold(2.0, f64::max);
        let max_x = 2f64.powf(max_x.log2().ceil());
        let mut c = ChartBuilder::on(root)
            .margin_top(TOP - 10)
            .margin_right(10)
            .margin_bottom(4)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(
                (1.0..max_x).log_scale().base(2.0),
                0.0..max_y.max(f64::MIN_POSITIVE),
            )?;
        c.configure_mesh()
            .x_labels(12)
            .x_label_formatter(&|v| number(*v))
            .y_labels(5)
            .y_label_formatter(&|v| number(*v))
            .x_desc(x_name)
            .y_desc(y_name)
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 11))
            .draw()?;
        let at = |p: &Point| (p.x.max(1.0), p.y.max(0.0));
        let mut pixels: Vec<(BackendCoord, (f64, f64), Vec<&str>)> = Vec::new();
        let mut by_pixel: std::collections::HashMap<BackendCoord, usize> = Default::default();
        for p in points {
            let pixel = c.backend_coord(&at(p));
            let i = *by_pixel.entry(pixel).or_insert_with(|| {
                pixels.push((pixel, at(p), Vec::new()));
                pixels.len() - 1
            });
            pixels[i].2.push(&p.label);
        }
        data(true);
        c.draw_series(pixels.iter().map(|(_, point, labels)| {
            let opacity = 1.0 - (1.0 - POINT_OPACITY).powi(labels.len() as i32);
            Circle::new(*point, 3, rgb(COLOURS[0]).mix(opacity).filled())
        }))?;
        data(false);
        Ok(pixels
            .into_iter()
            .map(|(_, _, labels)| match labels.len() {
                1 => labels[0].to_string(),
                n => {
                    let first = labels[..n.min(LABELS_PER_CIRCLE)].join("; ");
                    let more = n.saturating_sub(LABELS_PER_CIRCLE);
                    if more == 0 {
                        format!("{n} jobs: {first}")
                    } else {
                        format!("{n} jobs: {first}; {more} more")
                    }
                }
            })
            .collect())
    })
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
        assert_eq!(svg.matches("<title>").count(), 1 + 2, "chart and bars");
        assert!(svg.contains("><title>y: 2</title></rect>"), "{svg}");
        assert!(svg.starts_with("<svg class=\"chart\" role=\"img\" aria-label=\"t\" "));
    }

    #[test]
    fn small_values_get_distinct_axis_labels() {
        let labels = vec!["a".to_string(), "b".to_string()];
        let svg = columns("t", &series(&["x"]), &labels, &[vec![0.001], vec![0.004]]);
        for tick in ["0.001", "0.002", "0.003", "0.004"] {
            assert!(
                svg.contains(&format!(">{tick}<"))
                    || svg.contains(&format!(">\n{tick}\n<"))
                    || svg.contains(tick),
                "{tick} in {svg}"
            );
        }
        assert!(!svg.contains("0.000<"));
    }

    /// Points on one pixel are one circle as opaque as they are stacked, with their labels.
    #[test]
    fn points_on_one_pixel_are_one_circle() {
        let point = |x: f64, y: f64, label: &str| Point {
            x,
            y,
            label: label.into(),
        };
        let points = [
            point(4.0, 10.0, "a"),
            point(4.0, 10.0001, "b"),
            point(64.0, 50.0, "c"),
            point(4.0, 10.0, "d"),
            point(4.0, 10.0, "e"),
        ];
        let svg = scatter("t", "x", "y", &points);
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        assert!(
            svg.contains("<title>4 jobs: a; b; d; 1 more</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>c</title>"), "{svg}");
        // 1 - 0.4^4 and 0.6.
        assert!(svg.contains("opacity=\"0.974"), "{svg}");
        assert!(svg.contains("opacity=\"0.6\""), "{svg}");
    }

    #[test]
    fn empty_charts_are_still_svg() {
        assert!(hbars("t", &series(&["x"]), &[], true).ends_with("</svg>\n"));
        assert!(columns("t", &series(&["x"]), &[], &[]).ends_with("</svg>\n"));
        assert!(scatter("t", "x", "y", &[]).ends_with("</svg>\n"));
    }
}
