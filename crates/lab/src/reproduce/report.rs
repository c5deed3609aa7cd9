//! The report of an experiment: rows of published against simulated figures, and figures (line
//! plots), rendered as a text table, as JSON, and as an HTML page with SVG plots.

use plotters::prelude::*;
use serde::Serialize;

/// One published figure and what the model gives for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub unit: String,
    /// `None` for figures the change text does not publish (counters that explain the others).
    pub published: Option<f64>,
    pub simulated: f64,
    /// A change (a gain in %), whose sign is its direction; otherwise a level.
    pub is_change: bool,
}

impl Row {
    /// A change in percent, published or not.
    pub fn change(name: &str, published: Option<f64>, simulated: f64) -> Row {
        Row { name: name.into(), unit: "%".into(), published, simulated, is_change: true }
    }

    /// A level in `unit`.
    pub fn level(name: &str, unit: &str, published: Option<f64>, simulated: f64) -> Row {
        Row { name: name.into(), unit: unit.into(), published, simulated, is_change: false }
    }

    /// Whether a published change and the simulated one have the same sign.
    pub fn direction(&self) -> Option<&'static str> {
        let p = self.published?;
        if !self.is_change {
            return None;
        }
        Some(if p.signum() == self.simulated.signum() { "same" } else { "opposite" })
    }

    /// Simulated over published.
    pub fn ratio(&self) -> Option<f64> {
        self.published.filter(|p| *p != 0.0).map(|p| self.simulated / p)
    }
}

/// A line of a figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

/// What an experiment found.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub experiment: String,
    pub title: String,
    pub source: String,
    pub seed: u64,
    pub rows: Vec<Row>,
    pub figures: Vec<Figure>,
    /// How the figures were obtained and what the model leaves out, for the reader.
    pub notes: Vec<String>,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    name: &'a str,
    unit: &'a str,
    published: Option<f64>,
    simulated: f64,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    experiment: &'a str,
    seed: u64,
    rows: Vec<JsonRow<'a>>,
}

impl Report {
    /// `{"experiment", "seed", "rows": [{"name", "unit", "published", "simulated"}]}`.
    pub fn json(&self) -> serde_json::Value {
        let r = JsonReport {
            experiment: &self.experiment,
            seed: self.seed,
            rows: self
                .rows
                .iter()
                .map(|r| JsonRow {
                    name: &r.name,
                    unit: &r.unit,
                    published: r.published,
                    simulated: round(r.simulated),
                })
                .collect(),
        };
        serde_json::to_value(r).expect("a report serialises")
    }

    /// The table "published vs simulated".
    pub fn table(&self) -> String {
        let width = self.rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
        let mut out =
            format!("{} — {} ({}), seed {}\n", self.experiment, self.title, self.source, self.seed);
        out += &format!(
            "{:width$}  {:>5}  {:>12}  {:>12}  {:>9}  {:>6}\n",
            "name", "unit", "published", "simulated", "direction", "ratio"
        );
        for r in &self.rows {
            out += &format!(
                "{:width$}  {:>5}  {:>12}  {:>12}  {:>9}  {:>6}\n",
                r.name,
                r.unit,
                r.published.map_or("-".into(), fmt_num),
                fmt_num(r.simulated),
                r.direction().unwrap_or("-"),
                r.ratio().map_or("-".into(), |x| format!("{x:.2}")),
            );
        }
        out
    }

    /// An HTML section: the table, the notes, and the figures as inline SVG.
    pub fn html_section(&self) -> Result<String, String> {
        let mut out = format!(
            "<section><h2>{} — {}</h2>\n<p>Source: <code>{}</code>; seed {}.</p>\n<table>\n<tr><th>name</th><th>unit</th><th>published</th><th>simulated</th><th>direction</th><th>ratio</th></tr>\n",
            escape(&self.experiment),
            escape(&self.title),
            escape(&self.source),
            self.seed
        );
        for r in &self.rows {
            out += &format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&r.name),
                escape(&r.unit),
                r.published.map_or("-".into(), fmt_num),
                fmt_num(r.simulated),
                r.direction().unwrap_or("-"),
                r.ratio().map_or("-".into(), |x| format!("{x:.2}")),
            );
        }
        out += "</table>\n<ul>\n";
        for n in &self.notes {
            out += &format!("<li>{}</li>\n", escape(n));
        }
        out += "</ul>\n";
        for f in &self.figures {
            out += &f.svg()?;
            out += "\n";
        }
        out += "</section>\n";
        Ok(out)
    }
}

/// A whole HTML page for several reports.
pub fn html_page(reports: &[Report]) -> Result<String, String> {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mmsim reproduce</title>\n<style>body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child{text-align:left}</style></head><body>\n<h1>mmsim reproduce: published vs simulated</h1>\n",
    );
    for r in reports {
        out += &r.html_section()?;
    }
    out += "</body></html>\n";
    Ok(out)
}

impl Figure {
    /// The figure as an SVG document.
    pub fn svg(&self) -> Result<String, String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let pts = self.series.iter().flat_map(|s| s.points.iter());
            let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
            for &(x, y) in pts {
                x0 = x0.min(x);
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
            if x0 > x1 {
                return Ok(String::new());
            }
            if self.log_x {
                x0 = x0.max(1.0);
            }
            x1 = x1.max(x0 * 1.01 + 1.0);
            y1 = if y1 > 0.0 { y1 * 1.05 } else { 1.0 };
            let mut builder = ChartBuilder::on(&root);
            builder
                .caption(&self.title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60);
            let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
            macro_rules! draw {
                ($chart:expr) => {{
                    let mut chart = $chart;
                    chart
                        .configure_mesh()
                        .x_desc(self.x_label.as_str())
                        .y_desc(self.y_label.as_str())
                        .draw()
                        .map_err(plot_err)?;
                    for (i, s) in self.series.iter().enumerate() {
                        let color = colors[i % colors.len()];
                        chart
                            .draw_series(LineSeries::new(
                                s.points.iter().copied(),
                                color.stroke_width(2),
                            ))
                            .map_err(plot_err)?
                            .label(s.name.as_str())
                            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
                    }
                    chart
                        .configure_series_labels()
                        .background_style(WHITE.mix(0.8))
                        .border_style(BLACK)
                        .draw()
                        .map_err(plot_err)?;
                }};
            }
            if self.log_x {
                draw!(
                    builder.build_cartesian_2d((x0..x1).log_scale(), 0f64..y1).map_err(plot_err)?
                );
            } else {
                draw!(builder.build_cartesian_2d(x0..x1, 0f64..y1).map_err(plot_err)?);
            }
            root.present().map_err(plot_err)?;
        }
        Ok(svg)
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing a figure failed: {e:?}")
}

/// Figures rounded to what the model can claim (four significant digits after the point).
fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 || x == x.trunc() { format!("{x:.0}") } else { format!("{x:.2}") }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            experiment: "x".into(),
            title: "t".into(),
            source: "s.txt".into(),
            seed: 3,
            rows: vec![
                Row::change("gain", Some(24.9), 12.45),
                Row::level("latency", "ns", Some(2000.0), 1500.0),
                Row::level("copies", "pages", None, 7.0),
                Row::change("loss", Some(1.5), -0.5),
            ],
            figures: vec![Figure {
                title: "cdf".into(),
                x_label: "ns".into(),
                y_label: "fraction".into(),
                log_x: true,
                series: vec![Series { name: "a".into(), points: vec![(1.0, 0.1), (1000.0, 1.0)] }],
            }],
            notes: vec!["n <1>".into()],
        }
    }

    #[test]
    fn json_has_exactly_the_published_shape() {
        let j = report().json();
        assert_eq!(j["experiment"], "x");
        assert_eq!(j["seed"], 3);
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 4);
        let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "published", "simulated", "unit"]);
        assert!(rows[2]["published"].is_null());
    }

    #[test]
    fn table_shows_direction_and_ratio() {
        let t = report().table();
        let gain = t.lines().find(|l| l.starts_with("gain")).unwrap();
        assert!(gain.contains("same") && gain.contains("0.50"), "{gain}");
        let loss = t.lines().find(|l| l.starts_with("loss")).unwrap();
        assert!(loss.contains("opposite"), "{loss}");
        let copies = t.lines().find(|l| l.starts_with("copies")).unwrap();
        assert!(copies.contains(" - "), "{copies}");
    }

    #[test]
    fn html_embeds_escaped_notes_and_an_svg() {
        let h = html_page(&[report()]).unwrap();
        assert!(h.contains("<svg") && h.contains("n &lt;1&gt;"), "{h}");
    }
}
