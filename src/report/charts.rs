//! Charts as SVG text, drawn with plotters' SVG backend: one line chart for every picture the
//! HTML report shows (percentile spectrum, throughput over time, sweep curves). Targets differ
//! by colour and by line style (solid, dashed, dotted…), so a grey print still tells them apart.
//! A logarithmic axis is drawn on the logarithm of the values, labelled with the values.

use std::io;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// One target's line.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A point to mark on a line (a knee), with its label.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The line whose style it takes.
    pub line: usize,
    pub at: (f64, f64),
    pub label: String,
}

/// How an axis maps and labels values.
#[derive(Clone, Copy)]
pub enum Axis {
    Linear(fn(f64) -> String),
    /// Drawn on log10 of the values, ticks on whole powers of ten.
    Log(fn(f64) -> String),
    /// Drawn on log2 of the values, ticks on whole powers of two (connection ladders).
    Log2(fn(f64) -> String),
    /// The percentile spectrum's "nines": 0 → 0%, 1 → 90%, 2 → 99%, 3 → 99.9%…
    Nines,
}

impl Axis {
    fn map(self, v: f64) -> Option<f64> {
        match self {
            Axis::Linear(_) | Axis::Nines => v.is_finite().then_some(v),
            Axis::Log(_) => (v > 0.0 && v.is_finite()).then(|| v.log10()),
            Axis::Log2(_) => (v > 0.0 && v.is_finite()).then(|| v.log2()),
        }
    }

    /// How many tick labels: on a logarithmic axis, one per whole power (plotters then puts
    /// them on whole values of the drawn logarithm).
    fn labels(self, lo: f64, hi: f64) -> usize {
        match self {
            Axis::Linear(_) => 8,
            Axis::Nines => ((hi - lo).ceil() as usize + 1).clamp(2, 12),
            // Within two decades a label per decade leaves one or none: ask for more (at
            // even steps of the log, each labelled with its value).
            _ if hi - lo < 2.0 => 6,
            _ => ((hi - lo).floor() as usize + 1).clamp(2, 12),
        }
    }

    /// The tick positions (drawn values) of a logarithmic axis over the drawn range
    /// `lo..hi`: 1-2-5 multiples of powers of ten, from the last at or below `lo` to the first
    /// at or above `hi`, so the labels enclose every line (plotters' own, within two decades,
    /// could stop at 2.51 ms under lines reaching 4 ms); only powers of ten past 12 ticks.
    /// None for other axes (plotters places those).
    fn log_ticks(self, lo: f64, hi: f64) -> Option<Vec<f64>> {
        if !matches!(self, Axis::Log(_)) || !lo.is_finite() || !hi.is_finite() {
            return None;
        }
        let nice = |k: i32| -> [f64; 3] {
            let p = 10f64.powi(k);
            [p, 2.0 * p, 5.0 * p]
        };
        let all: Vec<f64> = ((lo.floor() as i32 - 1)..=(hi.ceil() as i32 + 1))
            .flat_map(nice)
            .map(f64::log10)
            .collect();
        let first = all.iter().rposition(|t| *t <= lo + 1e-9).unwrap_or(0);
        let last = all
            .iter()
            .position(|t| *t >= hi - 1e-9)
            .unwrap_or(all.len() - 1);
        let ticks = &all[first..=last];
        if ticks.len() <= 12 {
            return Some(ticks.to_vec());
        }
        Some(
            ((lo + 1e-9).floor() as i32..=(hi - 1e-9).ceil() as i32)
                .map(f64::from)
                .collect(),
        )
    }

    fn label(self, drawn: f64) -> String {
        match self {
            Axis::Linear(f) => f(drawn),
            Axis::Log(f) => f(10f64.powf(drawn)),
            Axis::Log2(f) => f(2f64.powf(drawn)),
            Axis::Nines => nines_label(drawn),
        }
    }
}

/// The chart to draw.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_title: &'a str,
    pub y_title: &'a str,
    pub x: Axis,
    pub y: Axis,
    pub lines: &'a [Line],
    /// Fitted curves (USL), drawn thin and dotted in their line's colour, same order.
    pub fits: &'a [Option<Line>],
    pub marks: &'a [Mark],
    /// A horizontal threshold (an SLO), with its label.
    pub threshold: Option<(f64, String)>,
}

impl<'a> LineChart<'a> {
    /// Lines alone (no fits, marks or threshold), each axis with its title.
    pub fn plain(
        title: &'a str,
        (x_title, x): (&'a str, Axis),
        (y_title, y): (&'a str, Axis),
        lines: &'a [Line],
    ) -> LineChart<'a> {
        LineChart {
            title,
            x_title,
            y_title,
            x,
            y,
            lines,
            fits: &[],
            marks: &[],
            threshold: None,
        }
    }
}

pub const WIDTH: u32 = 860;
pub const HEIGHT: u32 = 430;

fn chart_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> io::Error {
    io::Error::other(format!("cannot draw a chart: {e}"))
}

/// The chart as a standalone SVG document.
pub fn svg(c: &LineChart) -> io::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        draw(c, &root)?;
        root.present().map_err(chart_error)?;
    }
    Ok(out)
}

/// Colours that stay apart on screen; the dash patterns carry the difference in grey.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 90, 181),
    RGBColor(220, 50, 32),
    RGBColor(0, 140, 70),
    RGBColor(150, 60, 160),
    RGBColor(230, 130, 0),
    RGBColor(60, 60, 60),
];
/// Dash and gap of each line, in pixels; the first is solid.
const DASHES: [(u32, u32); 6] = [(0, 0), (10, 5), (2, 4), (14, 4), (6, 3), (1, 2)];

/// Lines of at most this many points get a marker on each.
const MARKED_POINTS: usize = 60;

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn draw(c: &LineChart, root: &DrawingArea<SVGBackend, Shift>) -> io::Result<()> {
    root.fill(&WHITE).map_err(chart_error)?;
    // Onto the axes' scales; points an axis cannot show (≤ 0 on a log axis) are left out.
    let project = |l: &Line| -> Vec<(f64, f64)> {
        l.points
            .iter()
            .filter_map(|&(x, y)| Some((c.x.map(x)?, c.y.map(y)?)))
            .collect()
    };
    let mapped: Vec<Vec<(f64, f64)>> = c.lines.iter().map(project).collect();
    let fits: Vec<Option<Vec<(f64, f64)>>> =
        c.fits.iter().map(|f| f.as_ref().map(project)).collect();
    let threshold = c.threshold.as_ref().and_then(|(v, _)| c.y.map(*v));
    let e = Extent::of(&mapped, threshold);
    // Room around the lines; linear y axes start at zero, as throughput should.
    let pad = |lo: f64, hi: f64| ((hi - lo).abs() * 0.05).max(1e-9);
    let (px, py) = (pad(e.x0, e.x1), pad(e.y0, e.y1));
    let y_ticks = c.y.log_ticks(e.y0, e.y1);
    let (y_lo, y_hi) = match (&y_ticks, c.y) {
        // A log axis spans its ticks, the first and last of which enclose the lines.
        (Some(t), _) if t.len() >= 2 => (t[0], t[t.len() - 1]),
        (_, Axis::Linear(_)) => (0f64.min(e.y0), e.y1 + py),
        _ => (e.y0 - py, e.y1 + py),
    };
    let x_range = (e.x0 - px, e.x1 + px);
    let mut chart = ChartBuilder::on(root)
        .caption(c.title, ("sans-serif", 20))
        .margin(14)
        .margin_right(70)
        .x_label_area_size(46)
        .y_label_area_size(78)
        .build_cartesian_2d(x_range.0..x_range.1, y_lo..y_hi)
        .map_err(chart_error)?;
    draw_mesh(&mut chart, c, &e, y_ticks.is_some())?;
    draw_log_ticks(&mut chart, y_ticks.as_deref().unwrap_or(&[]), x_range, c.y)?;
    draw_lines(&mut chart, c, &mapped)?;
    draw_fits(&mut chart, c, &fits)?;
    if let (Some(t), Some((_, label))) = (threshold, &c.threshold) {
        draw_threshold(&mut chart, t, label, x_range)?;
    }
    draw_marks(&mut chart, c)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .position(legend_corner(&mapped, x_range, (y_lo, y_hi)))
        .draw()
        .map_err(chart_error)?;
    Ok(())
}

/// The extent of the drawn (mapped) values a chart's axes must show, before padding.
struct Extent {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Extent {
    /// What the lines and the threshold span; a unit square when there is nothing to draw,
    /// and room on both sides of a single value.
    fn of(mapped: &[Vec<(f64, f64)>], threshold: Option<f64>) -> Extent {
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in mapped.iter().flatten() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if let Some(t) = threshold {
            y0 = y0.min(t);
            y1 = y1.max(t);
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        // One point alone: give it room on both sides.
        if x1 - x0 < 1e-9 {
            (x0, x1) = (x0 - 1.0, x1 + 1.0);
        }
        if y1 - y0 < 1e-9 {
            (y0, y1) = (y0 - 1.0, y1 + 1.0);
        }
        Extent { x0, x1, y0, y1 }
    }
}

/// The axes with their titles, grid and labels (a log y axis gets its ticks from
/// [`draw_log_ticks`] instead).
fn draw_mesh(chart: &mut Chart, c: &LineChart, e: &Extent, own_y_ticks: bool) -> io::Result<()> {
    let (xa, ya) = (c.x, c.y);
    let x_fmt = move |v: &f64| xa.label(*v);
    let y_fmt = move |v: &f64| ya.label(*v);
    chart
        .configure_mesh()
        .x_desc(c.x_title)
        .y_desc(c.y_title)
        .x_labels(c.x.labels(e.x0, e.x1))
        // Ticks of our own on a log axis (drawn below), plotters' elsewhere.
        .y_labels(if own_y_ticks {
            0
        } else {
            c.y.labels(e.y0, e.y1)
        })
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(chart_error)
}

/// A horizontal threshold (an SLO) across the plot, grey and dashed, with its legend entry.
fn draw_threshold(
    chart: &mut Chart,
    t: f64,
    label: &str,
    (x_lo, x_hi): (f64, f64),
) -> io::Result<()> {
    let grey = RGBColor(90, 90, 90).stroke_width(1);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x_lo, t), (x_hi, t)],
            8,
            4,
            grey,
        ))
        .map_err(chart_error)?
        .label(label)
        .legend(move |(x, y)| DashedPathElement::new(vec![(x, y), (x + 24, y)], 8, 4, grey));
    Ok(())
}

/// Each mark (a knee) as a cross in its line's colour, labelled.
fn draw_marks(chart: &mut Chart, c: &LineChart) -> io::Result<()> {
    for m in c.marks {
        if let (Some(x), Some(y)) = (c.x.map(m.at.0), c.y.map(m.at.1)) {
            let col = colour(m.line);
            chart
                .draw_series([EmptyElement::at((x, y))
                    + Cross::new((0, 0), 8, col.stroke_width(3))
                    + Text::new(
                        m.label.clone(),
                        (8, -18),
                        ("sans-serif", 14).into_font().color(&col),
                    )])
                .map_err(chart_error)?;
        }
    }
    Ok(())
}

/// The chart plotters draws into: linear coordinates over the drawn (mapped) values.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A log axis's own ticks: a light line across the plot and the value's label left of it.
fn draw_log_ticks(
    chart: &mut Chart,
    ticks: &[f64],
    (x_lo, x_hi): (f64, f64),
    axis: Axis,
) -> io::Result<()> {
    for &t in ticks {
        let grid = RGBColor(235, 235, 235).stroke_width(1);
        chart
            .draw_series(LineSeries::new([(x_lo, t), (x_hi, t)], grid))
            .map_err(chart_error)?;
        let font = ("sans-serif", 13).into_font().color(&BLACK).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Right,
                plotters::style::text_anchor::VPos::Center,
            ),
        );
        chart
            .draw_series([EmptyElement::at((x_lo, t)) + Text::new(axis.label(t), (-8, 0), font)])
            .map_err(chart_error)?;
    }
    Ok(())
}

/// Each target's line in its colour and dash, with markers on the points of a sparse one.
fn draw_lines(chart: &mut Chart, c: &LineChart, mapped: &[Vec<(f64, f64)>]) -> io::Result<()> {
    for (i, (line, pts)) in c.lines.iter().zip(mapped).enumerate() {
        let style = colour(i).stroke_width(2);
        let (dash, gap) = DASHES[i % DASHES.len()];
        let legend = move |(x, y): (i32, i32)| {
            let (d, g) = if dash == 0 { (24, 0) } else { (dash, gap) };
            DashedPathElement::new(vec![(x, y), (x + 24, y)], d, g, style)
        };
        let drawn = if dash == 0 {
            chart.draw_series(LineSeries::new(pts.iter().copied(), style))
        } else {
            chart.draw_series(DashedLineSeries::new(pts.iter().copied(), dash, gap, style))
        };
        drawn
            .map_err(chart_error)?
            .label(line.name.as_str())
            .legend(legend);
        // Small markers on each measured point of a sparse line (readable where lines cross;
        // a dense one, like a spectrum, is its own marker).
        if pts.len() <= MARKED_POINTS {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour(i).filled())))
                .map_err(chart_error)?;
        }
    }
    Ok(())
}

/// The fitted curves (USL), thin and dotted in their line's colour.
fn draw_fits(chart: &mut Chart, c: &LineChart, fits: &[Option<Vec<(f64, f64)>>]) -> io::Result<()> {
    for (i, fit) in fits.iter().enumerate() {
        if let Some(pts) = fit {
            chart
                .draw_series(DashedLineSeries::new(
                    pts.iter().copied(),
                    3,
                    3,
                    colour(i).stroke_width(1),
                ))
                .map_err(chart_error)?
                .label(format!(
                    "{} (USL fit)",
                    c.lines.get(i).map_or("", |l| l.name.as_str())
                ))
                .legend(move |(x, y)| {
                    DashedPathElement::new(
                        vec![(x, y), (x + 24, y)],
                        3,
                        3,
                        colour(i).stroke_width(1),
                    )
                });
        }
    }
    Ok(())
}

/// The corner of the plot with the fewest points under it, for the legend (which would hide
/// them): upper left, upper right, lower right, lower left, in that order of preference.
fn legend_corner(
    lines: &[Vec<(f64, f64)>],
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
) -> SeriesLabelPosition {
    // The legend box takes about a third of the width and of the height.
    let (w, h) = ((x_hi - x_lo) * 0.35, (y_hi - y_lo) * 0.35);
    let corners = [
        (SeriesLabelPosition::UpperLeft, x_lo, y_hi - h),
        (SeriesLabelPosition::UpperRight, x_hi - w, y_hi - h),
        (SeriesLabelPosition::LowerRight, x_hi - w, y_lo),
        (SeriesLabelPosition::LowerLeft, x_lo, y_lo),
    ];
    let under = |x: f64, y: f64| {
        lines
            .iter()
            .flatten()
            .filter(|(px, py)| *px >= x && *px <= x + w && *py >= y && *py <= y + h)
            .count()
    };
    let mut best = (usize::MAX, SeriesLabelPosition::UpperLeft);
    for (pos, x, y) in corners {
        let n = under(x, y);
        if n < best.0 {
            best = (n, pos);
        }
    }
    best.1
}

/// 0 → "0%", 1 → "90%", 2 → "99%", 2.5 → "99.68%", 3 → "99.9%".
pub fn nines_label(nines: f64) -> String {
    let q = (1.0 - 10f64.powf(-nines)) * 100.0;
    let text = if (nines - nines.round()).abs() < 1e-9 {
        let digits = (nines.round() as usize).saturating_sub(2);
        format!("{q:.digits$}")
    } else {
        format!("{q:.2}")
    };
    format!("{text}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_read_as_percentiles() {
        assert_eq!(nines_label(0.0), "0%");
        assert_eq!(nines_label(1.0), "90%");
        assert_eq!(nines_label(2.0), "99%");
        assert_eq!(nines_label(3.0), "99.9%");
        assert_eq!(nines_label(5.0), "99.999%");
    }

    #[test]
    fn a_chart_is_an_svg_with_its_lines_labels_and_marks() {
        let lines = vec![
            Line {
                name: "intel".into(),
                points: vec![(1.0, 100.0), (2.0, 190.0), (4.0, 300.0)],
            },
            Line {
                name: "arm".into(),
                points: vec![(1.0, 120.0), (2.0, 230.0), (4.0, 420.0)],
            },
        ];
        let svg = svg(&LineChart {
            title: "Throughput",
            x_title: "connections",
            y_title: "req/s",
            x: Axis::Log(|v| format!("{v:.0}")),
            y: Axis::Linear(|v| format!("{v:.0}")),
            lines: &lines,
            fits: &[None, None],
            marks: &[Mark {
                line: 1,
                at: (2.0, 230.0),
                label: "knee".into(),
            }],
            threshold: Some((250.0, "SLO".into())),
        })
        .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for text in [
            "Throughput",
            "connections",
            "req/s",
            "intel",
            "arm",
            "knee",
            "SLO",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // The first line is solid (one polyline, and its legend's); the second is dashed:
        // drawn as many short segments in its colour.
        let polylines = |colour: &str| {
            svg.matches(&format!(
                "<polyline fill=\"none\" opacity=\"1\" stroke=\"{colour}\""
            ))
            .count()
        };
        assert_eq!(polylines("#005AB5"), 2);
        assert!(polylines("#DC3220") > 10, "{}", polylines("#DC3220"));
    }
}

#[cfg(test)]
mod log_axis_tests {
    use super::*;

    #[test]
    fn log_ticks_enclose_the_lines() {
        let axis = Axis::Log(|v| format!("{v:.0}"));
        // Lines from 1.1 ms to 4 ms (in µs): 1, 2, 5 ms, the last above the top.
        let t = axis.log_ticks(1_100f64.log10(), 4_000f64.log10()).unwrap();
        let values: Vec<f64> = t.iter().map(|x| 10f64.powf(*x).round()).collect();
        assert_eq!(values, [1_000.0, 2_000.0, 5_000.0]);
        // Many decades: powers of ten only.
        let t = axis.log_ticks(1.0, 9.5).unwrap();
        assert!(t.iter().all(|x| (x - x.round()).abs() < 1e-9), "{t:?}");
        assert_eq!(t.first().copied(), Some(1.0));
        assert_eq!(t.last().copied(), Some(10.0));
        assert!(Axis::Linear(|v| v.to_string())
            .log_ticks(0.0, 1.0)
            .is_none());
    }

    #[test]
    fn a_log_axis_is_labelled_over_the_whole_range_of_its_lines() {
        let lines = [Line {
            name: "p99".into(),
            points: vec![(0.0, 1_100.0), (1.0, 2_500.0), (2.0, 4_000.0)],
        }];
        let chart = LineChart::plain(
            "p99 over time",
            ("s", Axis::Linear(|v| format!("{v:.0}"))),
            ("µs", Axis::Log(|v| format!("{v:.0}us"))),
            &lines,
        );
        let svg = svg(&chart).unwrap();
        let labels: Vec<&str> = svg
            .lines()
            .map(str::trim)
            .filter(|l| l.ends_with("us"))
            .collect();
        // 1 ms below the lowest point, 5 ms above the highest (4 ms): the range is labelled.
        assert_eq!(labels, ["1000us", "2000us", "5000us"]);
    }
}
