//! Figures: line plots drawn as inline SVG, with the spread over seeds as a shaded area around
//! each line and published bands as shaded horizontal stripes.

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
}

impl Series {
    /// A line measured once.
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, spread: Vec::new() }
    }
}

/// A horizontal stripe of y values: a published figure's range or its tolerance band.
#[derive(Clone, Debug, PartialEq)]
pub struct Shade {
    pub label: String,
    pub low: f64,
    pub high: f64,
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

    /// Adds a stripe from `low` to `high`.
    pub fn with_shade(mut self, label: &str, low: f64, high: f64) -> Figure {
        self.shades.push(Shade { label: label.into(), low, high });
        self
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
            .map(|s| json!({"label": s.label, "low": s.low, "high": s.high}))
            .collect();
        json!({
            "title": self.title, "x_label": self.x_label, "y_label": self.y_label,
            "log_x": self.log_x, "log_y": self.log_y, "series": series, "shades": shades,
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

    /// The axes' ranges over every drawable point, spread and stripe (positive values only on a
    /// logarithmic axis); `None` when nothing is drawable.
    fn ranges(&self) -> Option<((f64, f64), (f64, f64))> {
        let drawable = |x, y| self.drawable(x, y);
        let mut xs = (f64::MAX, f64::MIN);
        let mut ys = (f64::MAX, f64::MIN);
        let mut take = |x: f64, y: f64| {
            if drawable(x, y) {
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
        if xs.0 > xs.1 {
            return None;
        }
        for sh in &self.shades {
            for y in [sh.low, sh.high] {
                if !self.log_y || y > 0.0 {
                    ys = (ys.0.min(y), ys.1.max(y));
                }
            }
        }
        Some((pad(xs, self.log_x, false), pad(ys, self.log_y, true)))
    }

    /// Whether a point has a place on the axes (a logarithmic axis has none for 0 or less).
    fn drawable(&self, x: f64, y: f64) -> bool {
        (!self.log_x || x > 0.0) && (!self.log_y || y > 0.0)
    }

    /// Where the lines leave room: tails fall towards the lower right, levels and gains rise.
    fn legend_corner(&self) -> SeriesLabelPosition {
        if self.log_y { SeriesLabelPosition::LowerLeft } else { SeriesLabelPosition::UpperLeft }
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
        chart
            .configure_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(plot_err)?;
        let (xr, yr) = (chart.x_range(), chart.y_range());
        let clamp = |v: f64| v.clamp(yr.start, yr.end);
        for (i, sh) in self.shades.iter().enumerate() {
            let color = SHADES[i % SHADES.len()];
            let corners = [(xr.start, clamp(sh.low)), (xr.end, clamp(sh.high))];
            chart
                .draw_series(std::iter::once(Rectangle::new(corners, color.mix(0.25).filled())))
                .map_err(plot_err)?
                .label(sh.label.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 20, y + 5)], color.mix(0.25).filled())
                });
        }
        for (i, s) in self.series.iter().enumerate() {
            let color = LINES[i % LINES.len()];
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
            let points = s.points.iter().copied().filter(|&(x, y)| drawable(x, y));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(plot_err)?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(self.legend_corner())
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)
    }
}

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
