//! Figures: line plots drawn as inline SVG, with the spread over seeds as a shaded area around
//! each line, and every published figure drawn with its band: a stripe across the plot for a
//! figure that holds at every x (a horizontal one for a level or gain, a vertical one for a
//! latency on the x axis), or a mark at its x (the published value, its band as an error bar).
//!
//! An x axis of kernels or other categories (`with_categories`) plots each line's values as
//! points, never joined: nothing lies between two kernels. A line whose values equal an earlier
//! line's is drawn dashed over it and its legend says which it equals, so that neither hides.

use super::{Published, Row, published_of};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use serde_json::{Value, json};

/// A line of a figure: its points and, over several seeds, the spread `(x, min, max)` at each.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub spread: Vec<(f64, f64, f64)>,
    /// Its colour's index, shared with the marks of the same scheme (default: its position).
    pub colour: Option<usize>,
}

impl Series {
    /// A line measured once.
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, spread: Vec::new(), colour: None }
    }

    /// The line drawn in colour `i`, as the marks of colour `i` are.
    pub fn coloured(mut self, i: usize) -> Series {
        self.colour = Some(i);
        self
    }
}

/// A stripe across the plot: a published figure's range or its band, of y values (a level, a
/// gain) or of x values (`vertical`: a latency on the x axis).
#[derive(Clone, Debug, PartialEq)]
pub struct Shade {
    pub label: String,
    pub low: f64,
    pub high: f64,
    pub vertical: bool,
}

/// A published figure at one x: its value (or range) and the band it checks the model against.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub label: String,
    pub x: f64,
    pub low: f64,
    pub high: f64,
    pub band: (f64, f64),
    pub colour: usize,
}

/// A line plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    pub shades: Vec<Shade>,
    pub marks: Vec<Mark>,
    /// The x axis's categories (x = 0, 1, ... names them); empty for a numeric axis.
    pub categories: Vec<String>,
}

impl Figure {
    /// A figure with linear axes and no line yet.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Figure {
        Figure {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            series: Vec::new(),
            shades: Vec::new(),
            marks: Vec::new(),
            categories: Vec::new(),
        }
    }

    /// Logarithmic axes.
    pub fn log_axes(mut self, x: bool, y: bool) -> Figure {
        (self.log_x, self.log_y) = (x, y);
        self
    }

    pub fn with_series(mut self, series: Vec<Series>) -> Figure {
        self.series = series;
        self
    }

    /// An x axis of categories: a point at x = i belongs to `names[i]`.
    pub fn with_categories(mut self, names: &[&str]) -> Figure {
        self.categories = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Adds a horizontal stripe from `low` to `high`.
    pub fn with_shade(mut self, label: &str, low: f64, high: f64) -> Figure {
        self.shades.push(Shade { label: label.into(), low, high, vertical: false });
        self
    }

    /// Adds a vertical stripe of x values from `low` to `high`.
    pub fn with_x_shade(mut self, label: &str, low: f64, high: f64) -> Figure {
        self.shades.push(Shade { label: label.into(), low, high, vertical: true });
        self
    }

    /// Adds a vertical stripe for the published range of each row named (a latency on the x
    /// axis), labelled with the row's name and range.
    pub fn with_x_shades(mut self, rows: &[Row], names: &[&str]) -> Result<Figure, String> {
        for name in names {
            let p = published_of(rows, name)?;
            let unit = rows.iter().find(|r| r.name == *name).map_or("", |r| r.unit.as_str());
            self =
                self.with_x_shade(&format!("published {name}, {} {unit}", p.text()), p.low, p.high);
        }
        Ok(self)
    }

    /// Adds a published figure at `x`, with its band, in colour `colour`.
    pub fn with_mark(mut self, label: &str, x: f64, p: &Published, colour: usize) -> Figure {
        let mark = Mark { label: label.into(), x, low: p.low, high: p.high, band: p.band, colour };
        self.marks.push(mark);
        self
    }

    /// The legend labels of the published figures and bands the figure draws.
    pub fn published_labels(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.shades.iter().map(|s| s.label.as_str()).collect();
        for m in &self.marks {
            if !out.contains(&m.label.as_str()) {
                out.push(&m.label);
            }
        }
        out
    }

    /// The earlier line whose values equal line `i`'s, if any.
    fn same_as(&self, i: usize) -> Option<&Series> {
        let s = &self.series[i];
        self.series[..i].iter().find(|o| o.points == s.points && !s.points.is_empty())
    }

    /// The figure of several seeds: a line whose x values agree in every seed becomes the mean
    /// with its min–max spread; otherwise the first seed's line is kept, named so.
    pub fn merge(figures: &[Figure], seeds: &[u64]) -> Figure {
        let mut out = figures[0].clone();
        for (i, line) in out.series.iter_mut().enumerate() {
            let runs: Vec<&Series> = figures.iter().filter_map(|f| f.series.get(i)).collect();
            let xs = |s: &Series| s.points.iter().map(|p| p.0).collect::<Vec<f64>>();
            if runs.len() < 2 || runs.iter().any(|s| xs(s) != xs(line)) {
                if runs.len() > 1 {
                    line.name = format!("{} (seed {})", line.name, seeds[0]);
                }
                continue;
            }
            let n = runs.len() as f64;
            for (j, (x, y)) in line.points.iter_mut().enumerate() {
                let ys: Vec<f64> = runs.iter().map(|s| s.points[j].1).collect();
                *y = ys.iter().sum::<f64>() / n;
                let (lo, hi) =
                    ys.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
                line.spread.push((*x, lo, hi));
            }
        }
        out
    }

    /// The figure's data, for report.json.
    pub fn json(&self) -> Value {
        let series: Vec<Value> = self
            .series
            .iter()
            .map(|s| json!({"name": s.name, "points": s.points, "spread": s.spread}))
            .collect();
        let shades: Vec<Value> = self
            .shades
            .iter()
            .map(|s| json!({"label": s.label, "low": s.low, "high": s.high, "axis": if s.vertical { "x" } else { "y" }}))
            .collect();
        let marks: Vec<Value> = self
            .marks
            .iter()
            .map(|m| json!({"label": m.label, "x": m.x, "low": m.low, "high": m.high, "band": [m.band.0, m.band.1]}))
            .collect();
        json!({
            "title": self.title, "x_label": self.x_label, "y_label": self.y_label,
            "log_x": self.log_x, "log_y": self.log_y, "categories": self.categories,
            "series": series, "shades": shades, "marks": marks,
        })
    }

    /// The figure as an SVG document (empty when it has no point to draw).
    pub fn svg(&self) -> Result<String, String> {
        let Some(((x0, x1), (y0, y1))) = self.ranges() else { return Ok(String::new()) };
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            match (self.log_x, self.log_y) {
                (false, false) => self.draw(&root, x0..x1, y0..y1)?,
                (true, false) => self.draw(&root, (x0..x1).log_scale(), y0..y1)?,
                (false, true) => self.draw(&root, x0..x1, (y0..y1).log_scale())?,
                (true, true) => self.draw(&root, (x0..x1).log_scale(), (y0..y1).log_scale())?,
            }
            root.present().map_err(plot_err)?;
        }
        Ok(svg)
    }

    /// The axes' ranges over every drawable point, spread, stripe and mark (positive values
    /// only on a logarithmic axis); `None` when nothing is drawable.
    fn ranges(&self) -> Option<((f64, f64), (f64, f64))> {
        let mut xs = (f64::MAX, f64::MIN);
        let mut ys = (f64::MAX, f64::MIN);
        let mut take = |x: f64, y: f64| {
            if self.drawable(x, y) {
                xs = (xs.0.min(x), xs.1.max(x));
                ys = (ys.0.min(y), ys.1.max(y));
            }
        };
        for s in &self.series {
            s.points.iter().for_each(|&(x, y)| take(x, y));
            for &(x, lo, hi) in &s.spread {
                take(x, lo);
                take(x, hi);
            }
        }
        for m in &self.marks {
            [m.low, m.band.0, m.band.1].into_iter().for_each(|y| take(m.x, y));
        }
        if xs.0 > xs.1 {
            return None;
        }
        for sh in &self.shades {
            let (axis, log) =
                if sh.vertical { (&mut xs, self.log_x) } else { (&mut ys, self.log_y) };
            for v in [sh.low, sh.high].into_iter().filter(|&v| !log || v > 0.0) {
                *axis = (axis.0.min(v), axis.1.max(v));
            }
        }
        let x = if self.categories.is_empty() {
            pad(xs, self.log_x, false)
        } else {
            (-0.5, self.categories.len() as f64 - 0.5)
        };
        Some((x, pad(ys, self.log_y, true)))
    }

    /// Whether a point has a place on the axes (a logarithmic axis has none for 0 or less).
    fn drawable(&self, x: f64, y: f64) -> bool {
        (!self.log_x || x > 0.0) && (!self.log_y || y > 0.0)
    }

    /// Where the lines leave room: tails fall towards the lower right, levels and gains rise.
    fn legend_corner(&self) -> SeriesLabelPosition {
        if self.log_y { SeriesLabelPosition::LowerLeft } else { SeriesLabelPosition::UpperLeft }
    }

    /// An x tick's label: the category at a whole x, or the number.
    fn x_tick(&self, v: f64) -> String {
        if self.categories.is_empty() {
            return tick(v);
        }
        let i = v.round();
        let near = (v - i).abs() < 1e-6 && i >= 0.0;
        near.then(|| self.categories.get(i as usize).cloned()).flatten().unwrap_or_default()
    }

    fn draw<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        x: X,
        y: Y,
    ) -> Result<(), String>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x, y)
            .map_err(plot_err)?;
        let mut mesh = chart.configure_mesh();
        if !self.categories.is_empty() {
            mesh.x_labels(self.categories.len() * 2 + 1);
        }
        mesh.x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_label_formatter(&|v| self.x_tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(plot_err)?;
        self.draw_shades(&mut chart)?;
        self.draw_lines(&mut chart)?;
        self.draw_marks(&mut chart)?;
        chart
            .configure_series_labels()
            .position(self.legend_corner())
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)
    }

    /// The stripes, each with its legend entry.
    fn draw_shades<X, Y>(&self, chart: &mut Chart<'_, '_, X, Y>) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        let (xr, yr) = (chart.x_range(), chart.y_range());
        for (i, sh) in self.shades.iter().enumerate() {
            let color = SHADES[i % SHADES.len()].mix(0.25).filled();
            let corners = if sh.vertical {
                let clamp = |v: f64| v.clamp(xr.start, xr.end);
                [(clamp(sh.low), yr.start), (clamp(sh.high), yr.end)]
            } else {
                let clamp = |v: f64| v.clamp(yr.start, yr.end);
                [(xr.start, clamp(sh.low)), (xr.end, clamp(sh.high))]
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(corners, color)))
                .map_err(plot_err)?
                .label(sh.label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], color));
        }
        Ok(())
    }

    /// Every line with its spread: dashed where it equals an earlier line, as points only on
    /// an axis of categories.
    fn draw_lines<X, Y>(&self, chart: &mut Chart<'_, '_, X, Y>) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        for (i, s) in self.series.iter().enumerate() {
            let color = LINES[s.colour.unwrap_or(i) % LINES.len()];
            let drawable = |x, y| self.drawable(x, y);
            if !s.spread.is_empty() {
                let upper = s.spread.iter().filter(|p| drawable(p.0, p.2)).map(|p| (p.0, p.2));
                let lower =
                    s.spread.iter().rev().filter(|p| drawable(p.0, p.1)).map(|p| (p.0, p.1));
                let area: Vec<(f64, f64)> = upper.chain(lower).collect();
                chart
                    .draw_series(std::iter::once(Polygon::new(area, color.mix(0.15).filled())))
                    .map_err(plot_err)?;
            }
            let points: Vec<(f64, f64)> =
                s.points.iter().copied().filter(|&(x, y)| drawable(x, y)).collect();
            let same = self.same_as(i);
            let label = same
                .map_or(s.name.clone(), |o| format!("{} (= {}: the same values)", s.name, o.name));
            let style = color.stroke_width(2);
            if !self.categories.is_empty() {
                // Set a little apart, so that equal values of two lines both show.
                let dx = (i as f64 - (self.series.len() as f64 - 1.0) / 2.0) * 0.08;
                let dots =
                    points.into_iter().map(|(x, y)| Circle::new((x + dx, y), 5, style.filled()));
                let drawn = chart.draw_series(dots).map_err(plot_err)?;
                drawn
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
                continue;
            }
            if points.len() < FEW_POINTS {
                let dots = points.iter().map(|&p| Circle::new(p, 3, style.filled()));
                chart.draw_series(dots).map_err(plot_err)?;
            }
            let drawn = if same.is_some() {
                chart.draw_series(DashedLineSeries::new(points, 8, 6, style))
            } else {
                chart.draw_series(LineSeries::new(points, style))
            };
            drawn.map_err(plot_err)?.label(label).legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
        Ok(())
    }

    /// Every published figure at its x: the band as a bar with caps, the value as a diamond;
    /// one legend entry per label.
    fn draw_marks<X, Y>(&self, chart: &mut Chart<'_, '_, X, Y>) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        let yr = chart.y_range();
        let clamp = |v: f64| v.clamp(yr.start, yr.end);
        let mut labelled: Vec<&str> = Vec::new();
        for m in &self.marks {
            let color = LINES[m.colour % LINES.len()];
            let (lo, hi, x) = (clamp(m.band.0), clamp(m.band.1), m.x);
            let bar = [PathElement::new([(x, lo), (x, hi)], color.stroke_width(1))];
            chart.draw_series(bar).map_err(plot_err)?;
            let caps = [lo, hi].map(|y| Cross::new((x, y), 4, color.stroke_width(1)));
            chart.draw_series(caps).map_err(plot_err)?;
            let value = (m.low + m.high) / 2.0;
            let point = TriangleMarker::new((x, clamp(value)), 6, color.filled());
            let drawn = chart.draw_series(std::iter::once(point)).map_err(plot_err)?;
            if !labelled.contains(&m.label.as_str()) {
                labelled.push(&m.label);
                drawn
                    .label(m.label.as_str())
                    .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, color.filled()));
            }
        }
        Ok(())
    }
}

/// The chart a figure draws on.
type Chart<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// A line with fewer points than this shows each as a dot: the reader sees what was measured.
const FEW_POINTS: usize = 10;

const LINES: [RGBColor; 5] = [BLUE, RED, GREEN, MAGENTA, BLACK];
const SHADES: [RGBColor; 3] = [RGBColor(0, 160, 0), RGBColor(255, 160, 0), CYAN];

/// A range widened a little (from 0 on a linear y axis that holds no negative value).
fn pad((lo, hi): (f64, f64), log: bool, y: bool) -> (f64, f64) {
    if log {
        return (lo / 1.5, (hi * 1.5).max(lo * 2.0));
    }
    let lo = if y { lo.min(0.0) } else { lo };
    let span = (hi - lo).max(hi.abs() * 0.1).max(1e-9);
    (if !y || lo < 0.0 { lo - span * 0.02 } else { lo }, hi + span * 0.05)
}

/// A tick label a reader reads at a glance: `1M`, `250k`, `1000`, `1e-3`, `12.5`, never
/// `1000000.0` (a suffix from ten thousand up, so that `900` and `1000` sit side by side).
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
    };
    for (scale, suffix) in [(1e9_f64, "G"), (1e6, "M"), (1e3, "k")] {
        if a >= scale.max(1e4) {
            return trim(format!("{:.2}", v / scale)) + suffix;
        }
    }
    if a == 0.0 {
        "0".into()
    } else if a < 0.01 {
        format!("{v:.0e}")
    } else {
        trim(format!("{v:.2}"))
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing a figure failed: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        let shown: Vec<String> = [1e6, 250_000.0, 1024.0, 0.001, 12.5, 0.0, -3.0, 2.0]
            .iter()
            .map(|&v| tick(v))
            .collect();
        assert_eq!(shown, ["1M", "250k", "1024", "1e-3", "12.5", "0", "-3", "2"]);
    }

    #[test]
    fn merging_seeds_averages_lines_with_equal_x_and_keeps_their_spread() {
        let f = |y: f64, xs: &[f64]| {
            Figure::new("t", "x", "y")
                .with_series(vec![Series::new("s", xs.iter().map(|&x| (x, y * x)).collect())])
        };
        let m = Figure::merge(&[f(1.0, &[1.0, 2.0]), f(3.0, &[1.0, 2.0])], &[4, 5]);
        assert_eq!(m.series[0].points, [(1.0, 2.0), (2.0, 4.0)]);
        assert_eq!(m.series[0].spread, [(1.0, 1.0, 3.0), (2.0, 2.0, 6.0)]);
        let m = Figure::merge(&[f(1.0, &[1.0, 2.0]), f(3.0, &[1.0])], &[4, 5]);
        assert_eq!((m.series[0].name.as_str(), m.series[0].spread.len()), ("s (seed 4)", 0));
    }

    #[test]
    fn kernels_are_categories_and_equal_lines_say_so() {
        let f = Figure::new("t", "kernel", "y")
            .with_categories(&["v5.12", "v6.1"])
            .with_series(vec![Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)])]);
        assert_eq!(
            (f.x_tick(0.0), f.x_tick(1.0), f.x_tick(0.5), f.x_tick(7.0)),
            ("v5.12".into(), "v6.1".into(), String::new(), String::new())
        );
        assert_eq!(f.ranges().map(|(x, _)| x), Some((-0.5, 1.5)));
        let line = |n: &str| Series::new(n, vec![(1.0, 1.0), (2.0, 3.0)]);
        let f = Figure::new("t", "x", "y").with_series(vec![line("revert"), line("vma_lock")]);
        let svg = f.svg().unwrap();
        assert!(svg.contains("vma_lock (= revert: the same values)"), "{svg}");
    }

    #[test]
    fn marks_draw_published_figures_with_their_bands() {
        let p = Published::point(10.0).within_factor(2.0);
        let f = Figure::new("t", "x", "y")
            .with_series(vec![Series::new("s", vec![(1.0, 1.0), (2.0, 2.0)])])
            .with_mark("published", 1.0, &p, 0)
            .with_mark("published", 2.0, &p, 0)
            .with_x_shade("published latency", 1.2, 1.4);
        assert_eq!(
            f.ranges().map(|(_, y)| y.1 >= 20.0),
            Some(true),
            "the band's top is on the axis"
        );
        assert_eq!(f.published_labels(), ["published latency", "published"]);
        let svg = f.svg().unwrap();
        assert_eq!(svg.matches("\npublished\n").count(), 1, "one legend entry per label");
    }

    #[test]
    fn log_axes_draw_positive_values_and_the_stripes() {
        let f = Figure::new("t", "x", "y")
            .log_axes(true, true)
            .with_series(vec![Series::new("s", vec![(1.0, 0.5), (10.0, 0.0), (100.0, 0.01)])])
            .with_shade("published", 0.1, 0.2);
        assert_eq!(f.ranges().map(|(x, _)| x.0), Some(1.0 / 1.5));
        let svg = f.svg().unwrap();
        assert!(svg.contains("<svg") && svg.contains("published"), "{svg}");
    }
}
