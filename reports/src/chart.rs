//! The two chart shapes every report figure is made of — an x/y plot (lines,
//! points, reference lines, a highlighted point; linear or log axes) and a
//! bar chart — drawn with plotters to a PNG file and an SVG string from the
//! same description, with the bundled font.

use crate::font;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Pixel size of every chart.
pub const SIZE: (u32, u32) = (960, 540);
/// The family the bundled font is registered under.
pub const FONT: &str = "sans-serif";

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Okabe & Ito's colour-blind-safe palette ("Color Universal Design", 2008),
/// black last but one, yellow (weak on white) last.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(230, 159, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];
/// Secondary marks (points missing a target, "in flight").
pub const GREY: RGBColor = RGBColor(150, 150, 150);
/// Targets (SLOs, attainment goals): a red outside the palette, so a target
/// never shares a colour with a data series.
pub const TARGET: RGBColor = RGBColor(200, 30, 30);

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mark {
    Line,
    Points,
    LinePoints,
}

/// One data series.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend entry; empty for none.
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    pub color: RGBColor,
    pub width: u32,
    /// Per point, more to say on hover in the HTML report (a sweep point's
    /// settings); empty for none.
    pub tips: Vec<String>,
}

impl Series {
    pub fn new(
        label: impl Into<String>,
        points: Vec<(f64, f64)>,
        mark: Mark,
        color: RGBColor,
    ) -> Self {
        Series {
            label: label.into(),
            points,
            mark,
            color,
            width: 2,
            tips: Vec::new(),
        }
    }
}

/// A dashed reference line across the plot (an SLO target, a found limit).
#[derive(Clone, Debug)]
pub struct RefLine {
    pub label: String,
    pub at: f64,
    /// Vertical (x = at) or horizontal (y = at).
    pub vertical: bool,
    pub color: RGBColor,
}

/// A point ringed and named in the legend (the chosen operating point).
#[derive(Clone, Debug)]
pub struct Highlight {
    pub label: String,
    pub at: (f64, f64),
    pub color: RGBColor,
}

/// A second scale on the right of an x/y chart, the reciprocal of the
/// left one times `numerator` (dollars per million tokens beside tokens per
/// second per GPU: price / throughput).
#[derive(Clone, Debug)]
pub struct ReciprocalScale {
    pub label: String,
    pub numerator: f64,
    /// Put before each value ("$").
    pub prefix: String,
}

impl ReciprocalScale {
    /// The right-hand value at left-hand `y`; `None` at or below zero.
    pub fn at(&self, y: f64) -> Option<f64> {
        (y > 0.0).then(|| self.numerator / y)
    }

    /// The label of the right-hand value at left-hand `y`.
    pub fn label_at(&self, y: f64) -> Option<String> {
        // Three significant figures: a derived scale's values are not round.
        self.at(y).map(|v| {
            let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
            if v.abs() >= 1000.0 {
                format!("{}{}", self.prefix, tick(v))
            } else {
                format!("{}{v:.digits$}", self.prefix)
            }
        })
    }
}

/// Where the legend sits.
#[derive(Clone, Copy, Debug)]
pub enum Legend {
    UpperLeft,
    UpperRight,
    LowerRight,
}

/// An x/y chart.
#[derive(Clone, Debug)]
pub struct XyPlot {
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub ref_lines: Vec<RefLine>,
    pub highlights: Vec<Highlight>,
    pub x_log: bool,
    pub y_log: bool,
    /// The x values are counts (replicas, GPUs): label whole numbers only.
    pub x_integer: bool,
    /// Bounds the axes may not pass (0–100 % for a share); within them the
    /// axes fit the data, so points at 95–100 % are not flattened into the
    /// top of a 0–100 % axis.
    pub x_range: Option<(f64, f64)>,
    pub y_range: Option<(f64, f64)>,
    pub legend: Legend,
    /// A second scale on the right, derived from the left one.
    pub y2: Option<ReciprocalScale>,
}

impl XyPlot {
    pub fn new(
        name: &str,
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        XyPlot {
            name: name.to_string(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            ref_lines: Vec::new(),
            highlights: Vec::new(),
            x_log: false,
            y_log: false,
            x_integer: false,
            x_range: None,
            y_range: None,
            legend: Legend::UpperRight,
            y2: None,
        }
    }

    pub(crate) fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let pts = self.series.iter().flat_map(|s| s.points.iter().copied());
        let hl = self.highlights.iter().map(|h| h.at);
        let all: Vec<(f64, f64)> = pts.chain(hl).collect();
        let mut xs: Vec<f64> = all.iter().map(|p| p.0).collect();
        let mut ys: Vec<f64> = all.iter().map(|p| p.1).collect();
        for r in &self.ref_lines {
            if r.vertical { &mut xs } else { &mut ys }.push(r.at);
        }
        let x = within(span(&xs, self.x_log), self.x_range);
        let y = within(span(&ys, self.y_log), self.y_range);
        (x, y)
    }
}

/// The data's span clipped to `bounds` (the bounds alone when the data fall
/// outside them).
fn within(data: (f64, f64), bounds: Option<(f64, f64)>) -> (f64, f64) {
    match bounds {
        None => data,
        Some((lo, hi)) => {
            let (a, b) = (data.0.max(lo), data.1.min(hi));
            if a < b {
                (a, b)
            } else {
                (lo, hi)
            }
        }
    }
}

/// A data range padded for display: log ranges by a factor, linear ones by
/// 4 % (from 0 when the data are non-negative and near it).
fn span(v: &[f64], log: bool) -> (f64, f64) {
    let v: Vec<f64> = v
        .iter()
        .copied()
        .filter(|x| x.is_finite() && (!log || *x > 0.0))
        .collect();
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if v.is_empty() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        let (lo, hi) = if hi / lo < 1.5 {
            (lo / 1.5, hi * 1.5)
        } else {
            (lo, hi)
        };
        return (lo / 1.25, hi * 1.25);
    }
    let (lo, hi) = if hi - lo < 1e-9 * hi.abs().max(1.0) {
        (
            lo - 0.5_f64.max(lo.abs() * 0.1),
            hi + 0.5_f64.max(hi.abs() * 0.1),
        )
    } else {
        (lo, hi)
    };
    let pad = (hi - lo) * 0.04;
    let lo = if lo >= 0.0 && lo <= (hi - lo) * 0.5 {
        0.0
    } else {
        lo - pad
    };
    (lo, hi + pad)
}

/// Whether values spread enough to want a log axis.
pub fn wants_log(v: impl IntoIterator<Item = f64>) -> bool {
    let (lo, hi) = v
        .into_iter()
        .filter(|x| x.is_finite() && *x > 0.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    lo.is_finite() && hi / lo > 50.0
}

/// A bar chart over named categories.
#[derive(Clone, Debug)]
pub struct BarPlot {
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub bars: Vec<(String, f64)>,
    pub colors: Vec<RGBColor>,
    /// Per bar, more to say on hover in the HTML report (a plan option's
    /// settings and fleet); empty for none.
    pub tips: Vec<String>,
}

/// A chart of either shape.
#[derive(Clone, Debug)]
pub enum Chart {
    Xy(XyPlot),
    Bars(BarPlot),
}

impl Chart {
    pub fn name(&self) -> &str {
        match self {
            Chart::Xy(p) => &p.name,
            Chart::Bars(p) => &p.name,
        }
    }

    pub fn title(&self) -> &str {
        match self {
            Chart::Xy(p) => &p.title,
            Chart::Bars(p) => &p.title,
        }
    }

    fn draw<DB>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB: DrawingBackend,
        DB::ErrorType: Send + Sync + 'static,
    {
        root.fill(&WHITE)?;
        match self {
            Chart::Xy(p) => {
                let ((x0, x1), (y0, y1)) = p.ranges();
                match (p.x_log, p.y_log) {
                    (false, false) => draw_xy(root, p, x0..x1, y0..y1),
                    (false, true) => draw_xy(root, p, x0..x1, (y0..y1).log_scale()),
                    (true, false) => draw_xy(root, p, (x0..x1).log_scale(), y0..y1),
                    (true, true) => draw_xy(root, p, (x0..x1).log_scale(), (y0..y1).log_scale()),
                }
            }
            Chart::Bars(b) => draw_bars(root, b),
        }
    }
}

/// A chart written out: `<name>.png` and `<name>.svg`, and the SVG text for
/// inlining into HTML.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub name: String,
    pub title: String,
    /// The plotters SVG (the file `<name>.svg`).
    pub svg: String,
    /// The interactive SVG `report.html` inlines (`interactive`).
    pub interactive: String,
}

/// Draws `chart` into `dir/<name>.png` and `dir/<name>.svg`.
pub fn render(chart: &Chart, dir: &Path) -> Result<Rendered, String> {
    font::register();
    let name = chart.name();
    let png = dir.join(format!("{name}.png"));
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        format!("chart {name}: cannot draw the {what}: {e}")
    };
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        chart.draw(&root).map_err(|e| fail("PNG", &e))?;
        root.present().map_err(|e| fail("PNG", &e))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        chart.draw(&root).map_err(|e| fail("SVG", &e))?;
        root.present().map_err(|e| fail("SVG", &e))?;
    }
    std::fs::write(dir.join(format!("{name}.svg")), &svg)
        .map_err(|e| format!("chart {name}: cannot write {}: {e}", dir.display()))?;
    Ok(Rendered {
        name: name.to_string(),
        title: chart.title().to_string(),
        svg,
        interactive: crate::interactive::svg(chart),
    })
}

/// Tick labels: short, no float noise ("0.25", "1200", "35k").
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_string()
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else if a >= 1e-3 {
        trim(format!("{v:.4}"))
    } else {
        format!("{v:.1e}")
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn legend_pos(l: Legend) -> SeriesLabelPosition {
    match l {
        Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
        Legend::UpperRight => SeriesLabelPosition::UpperRight,
        Legend::LowerRight => SeriesLabelPosition::LowerRight,
    }
}

fn draw_xy<DB, XR, YR>(root: &DrawingArea<DB, Shift>, p: &XyPlot, xr: XR, yr: YR) -> DrawResult
where
    DB: DrawingBackend,
    DB::ErrorType: Send + Sync + 'static,
    XR: AsRangedCoord<Value = f64>,
    YR: AsRangedCoord<Value = f64>,
    XR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    YR::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, (FONT, 22))
        .margin(18)
        // Room on the right for the second scale's labels (a label area
        // there would repeat the left axis's).
        .margin_right(if p.y2.is_some() { 110 } else { 18 })
        .x_label_area_size(58)
        .y_label_area_size(78)
        .build_cartesian_2d(xr, yr)?;
    let (xs, ys) = (chart.x_range(), chart.y_range());
    let x_tick = |v: &f64| {
        if p.x_integer && v.fract().abs() > 1e-9 {
            String::new()
        } else {
            tick(*v)
        }
    };
    // Whole-number axes get a label per integer when they are short.
    let x_labels = if p.x_integer && !p.x_log {
        ((xs.end - xs.start).floor() as usize + 1).clamp(2, 12)
    } else {
        10
    };
    chart
        .configure_mesh()
        .x_labels(x_labels)
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .max_light_lines(4)
        .x_label_formatter(&x_tick)
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    if let Some(y2) = &p.y2 {
        // Labels at six evenly spaced heights (in the axis's own scale).
        let style = TextStyle::from((FONT, 14)).pos(Pos::new(HPos::Left, VPos::Center));
        for k in 0..=5 {
            let f = k as f64 / 5.0;
            let y = if p.y_log {
                (ys.start.ln() + f * (ys.end.ln() - ys.start.ln())).exp()
            } else {
                ys.start + f * (ys.end - ys.start)
            };
            if let Some(label) = y2.label_at(y) {
                let (px, py) = chart.backend_coord(&(xs.end, y));
                root.draw(&PathElement::new(
                    vec![(px, py), (px + 5, py)],
                    RGBColor(120, 120, 120),
                ))?;
                root.draw(&Text::new(label, (px + 8, py), style.clone()))?;
            }
        }
        let (px, _) = chart.backend_coord(&(xs.end, ys.start));
        let (_, top) = chart.backend_coord(&(xs.end, ys.end));
        let (_, bottom) = chart.backend_coord(&(xs.end, ys.start));
        let desc = TextStyle::from((FONT, 17))
            .transform(FontTransform::Rotate90)
            .pos(Pos::new(HPos::Center, VPos::Center));
        root.draw(&Text::new(
            y2.label.clone(),
            (px + 96, (top + bottom) / 2),
            desc,
        ))?;
    }
    let mut labelled = false;
    for s in &p.series {
        let line = s.color.stroke_width(s.width);
        let dot = s.color.filled();
        let label = !s.label.is_empty();
        labelled |= label;
        match s.mark {
            Mark::Line => {
                let a = chart.draw_series(LineSeries::new(s.points.iter().copied(), line))?;
                if label {
                    a.label(s.label.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], line));
                }
            }
            Mark::Points => {
                let a = chart.draw_series(s.points.iter().map(|&q| Circle::new(q, 4, dot)))?;
                if label {
                    a.label(s.label.as_str())
                        .legend(move |(x, y)| Circle::new((x + 11, y), 4, dot));
                }
            }
            Mark::LinePoints => {
                chart.draw_series(LineSeries::new(s.points.iter().copied(), line))?;
                let a = chart.draw_series(s.points.iter().map(|&q| Circle::new(q, 4, dot)))?;
                if label {
                    a.label(s.label.as_str()).legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (22, 0)], line)
                            + Circle::new((11, 0), 4, dot)
                    });
                }
            }
        }
    }
    for r in &p.ref_lines {
        let style = r.color.stroke_width(2);
        let ends = if r.vertical {
            vec![(r.at, ys.start), (r.at, ys.end)]
        } else {
            vec![(xs.start, r.at), (xs.end, r.at)]
        };
        let a = chart.draw_series(DashedLineSeries::new(ends, 9, 6, style))?;
        if !r.label.is_empty() {
            labelled = true;
            a.label(r.label.as_str()).legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (8, 0)], style)
                    + PathElement::new(vec![(14, 0), (22, 0)], style)
            });
        }
    }
    for h in &p.highlights {
        let ring = h.color.stroke_width(3);
        let a = chart.draw_series(std::iter::once(Circle::new(h.at, 10, ring)))?;
        if !h.label.is_empty() {
            labelled = true;
            a.label(h.label.as_str())
                .legend(move |(x, y)| Circle::new((x + 11, y), 7, ring));
        }
    }
    if labelled {
        chart
            .configure_series_labels()
            .position(legend_pos(p.legend))
            .background_style(WHITE.mix(0.88))
            .border_style(RGBColor(170, 170, 170))
            .label_font((FONT, 14))
            .margin(12)
            .draw()?;
    }
    Ok(())
}

fn draw_bars<DB>(root: &DrawingArea<DB, Shift>, b: &BarPlot) -> DrawResult
where
    DB: DrawingBackend,
    DB::ErrorType: Send + Sync + 'static,
{
    let n = b.bars.len().max(1);
    let top = b.bars.iter().map(|(_, v)| *v).fold(0.0_f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(root)
        .caption(&b.title, (FONT, 22))
        .margin(18)
        .x_label_area_size(58)
        .y_label_area_size(78)
        // A segmented 0..k has k + 1 segments (0 through k).
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..top)?;
    let names: Vec<&str> = b.bars.iter().map(|(s, _)| s.as_str()).collect();
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            names.get(*i).map(|s| s.to_string()).unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(b.x_label.as_str())
        .y_desc(b.y_label.as_str())
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .max_light_lines(4)
        .x_labels(n.min(32))
        .x_label_formatter(&label)
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    let colors = if b.colors.is_empty() {
        vec![PALETTE[0]]
    } else {
        b.colors.clone()
    };
    chart.draw_series(b.bars.iter().enumerate().map(|(i, (_, v))| {
        let c = colors[i % colors.len()];
        let mut r = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), *v),
            ],
            c.filled(),
        );
        r.set_margin(0, 0, 10, 10);
        r
    }))?;
    // Values over the bars, when there is room for them.
    if n <= 24 {
        let style = TextStyle::from((FONT, 14)).pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(b.bars.iter().enumerate().map(|(i, (_, v))| {
            // Exact counts over bars (axis ticks may abbreviate).
            let label = if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                tick(*v)
            };
            Text::new(label, (SegmentValue::CenterOf(i), *v), style.clone())
        }))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reciprocal_scale_labels_three_figures() {
        let s = ReciprocalScale {
            label: "$ per 1M output tokens".into(),
            numerator: 2.49e6 / 3600.0,
            prefix: "$".into(),
        };
        assert_eq!(s.label_at(5000.0).as_deref(), Some("$0.138"));
        assert_eq!(s.label_at(250.0).as_deref(), Some("$2.77"));
        assert_eq!(s.label_at(0.5).as_deref(), Some("$1383"));
        assert_eq!(s.label_at(0.0), None);
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(1200.0), "1200");
        assert_eq!(tick(35_000.0), "35k");
        assert_eq!(tick(12_500.0), "12.5k");
        assert_eq!(tick(3_000_000.0), "3M");
        assert_eq!(tick(0.0001), "1.0e-4");
        assert_eq!(tick(-0.0), "0");
    }

    #[test]
    fn ranges_start_at_zero_for_counts_and_pad_logs() {
        assert_eq!(span(&[3.0, 10.0], false).0, 0.0);
        let (lo, hi) = span(&[100.0, 110.0], false);
        assert!(lo > 90.0 && hi > 110.0);
        let (lo, hi) = span(&[1.0, 1000.0, -5.0], true);
        assert!(lo < 1.0 && lo > 0.0 && hi > 1000.0);
        assert_eq!(span(&[], false), (0.0, 1.0));
        let (lo, hi) = span(&[5.0], false);
        assert!(lo < 5.0 && hi > 5.0);
        assert!(wants_log([1.0, 100.0]));
        assert!(!wants_log([10.0, 100.0]));
    }
}
