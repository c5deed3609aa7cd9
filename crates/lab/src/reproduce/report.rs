//! The report of an experiment: published figures, each with the band a faithful model should
//! land in, against what the model gives over one or several seeds; a verdict; diagnostic rows
//! that explain the figures; line plots. Rendered as a text table, as JSON, and as an HTML
//! section (`page` puts the sections of a run together under a summary).
//!
//! A band is a check on the model, never a target: each experiment module says where its bands
//! come from (the source's stated precision, its own run-to-run spread, or the stated rule
//! "within a factor of 2 of the published figure"), and a figure outside its band is reported as
//! missed, with the reason, not tuned into it.

mod figure;
mod page;
mod tornado;

pub use figure::{Figure, Series, Shade, tick};
pub use page::{Provenance, html_page, page_json, summary_table};

use super::Sensitivity;
use serde_json::{Value, json};

/// What a published figure says about its direction, beyond its band.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Nothing (a level, or a change published as "on par").
    Unstated,
    /// A change whose sign is the published one.
    Sign,
    /// A level above the row named.
    Above(String),
    /// A level below the row named.
    Below(String),
}

/// A published figure and the band it checks the model against.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    /// As published: a single figure (`low == high`) or a stated range ("9-11%").
    pub low: f64,
    pub high: f64,
    /// Where a faithful model is expected to land; it contains the published figure.
    pub band: (f64, f64),
    /// Where the figure comes from and why the band is as wide as it is.
    pub citation: String,
    pub direction: Direction,
    /// What the model leaves out that bears on this figure, given as the reason when it misses.
    pub caveat: Option<String>,
}

impl Published {
    /// A single published figure, its band the figure itself until widened.
    pub fn point(v: f64) -> Published {
        Published::range(v, v)
    }

    /// A published range.
    pub fn range(low: f64, high: f64) -> Published {
        Published {
            low,
            high,
            band: (low, high),
            citation: String::new(),
            direction: Direction::Unstated,
            caveat: None,
        }
    }

    /// The band "within a factor of `f`" of the published figure or range.
    pub fn within_factor(mut self, f: f64) -> Published {
        self.band = if self.low >= 0.0 {
            (self.low / f, self.high * f)
        } else if self.high <= 0.0 {
            (self.low * f, self.high / f)
        } else {
            (self.low * f, self.high * f)
        };
        self
    }

    /// An explicit band.
    pub fn band(mut self, low: f64, high: f64) -> Published {
        self.band = (low.min(self.low), high.max(self.high));
        self
    }

    pub fn cite(mut self, citation: &str) -> Published {
        self.citation = citation.into();
        self
    }

    pub fn direction(mut self, d: Direction) -> Published {
        self.direction = d;
        self
    }

    pub fn caveat(mut self, caveat: &str) -> Published {
        self.caveat = Some(caveat.into());
        self
    }

    /// The published figure as text: `24.9` or `9-11`.
    pub fn text(&self) -> String {
        if self.low == self.high {
            fmt_num(self.low)
        } else {
            format!("{}-{}", fmt_num(self.low), fmt_num(self.high))
        }
    }

    fn band_text(&self) -> String {
        format!("{} .. {}", fmt_num(self.band.0), fmt_num(self.band.1))
    }

    fn mid(&self) -> f64 {
        (self.low + self.high) / 2.0
    }

    fn json(&self) -> Value {
        let direction = match &self.direction {
            Direction::Unstated => json!(null),
            Direction::Sign => json!("sign"),
            Direction::Above(row) => json!({"above": row}),
            Direction::Below(row) => json!({"below": row}),
        };
        json!({
            "low": self.low, "high": self.high, "band": [self.band.0, self.band.1],
            "citation": self.citation, "direction": direction, "caveat": self.caveat,
        })
    }
}

/// How a published figure, or an experiment's published figures, came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Inside the band.
    Reproduced,
    /// Outside the band, in the published direction.
    DirectionOnly,
    /// Outside the band and not in the published direction.
    Missed,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::DirectionOnly => "direction only",
            Verdict::Missed => "missed",
        }
    }
}

/// A figure the model gives, once per seed; a headline row when it has a published figure,
/// otherwise a diagnostic row (a counter that explains the headline).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub unit: String,
    pub published: Option<Published>,
    /// One value per seed, in the report's seed order.
    pub values: Vec<f64>,
    /// A change (a gain in %), whose sign is its direction; otherwise a level.
    pub is_change: bool,
}

impl Row {
    /// A change in percent.
    pub fn change(name: &str, simulated: f64) -> Row {
        Row { is_change: true, ..Row::level(name, "%", simulated) }
    }

    /// A level in `unit`.
    pub fn level(name: &str, unit: &str, simulated: f64) -> Row {
        Row {
            name: name.into(),
            unit: unit.into(),
            published: None,
            values: vec![simulated],
            is_change: false,
        }
    }

    /// This row as a headline: the published figure it is checked against.
    pub fn published(mut self, p: Published) -> Row {
        self.published = Some(p);
        self
    }

    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.values.len().max(1) as f64
    }

    pub fn min(&self) -> f64 {
        self.values.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn max(&self) -> f64 {
        self.values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    /// `min .. max` over the seeds, or `-` for one seed.
    fn spread_text(&self) -> String {
        if self.values.len() < 2 {
            "-".into()
        } else {
            format!("{} .. {}", fmt_num(self.min()), fmt_num(self.max()))
        }
    }
}

/// The published figure of the row called `name` among an experiment's rows, for a figure to
/// draw with its band.
pub fn published_of<'a>(rows: &'a [Row], name: &str) -> Result<&'a Published, String> {
    rows.iter()
        .find(|r| r.name == name)
        .and_then(|r| r.published.as_ref())
        .ok_or_else(|| format!("no published row `{name}`"))
}

/// What an experiment found over one or several seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub experiment: String,
    pub title: String,
    pub source: String,
    pub seeds: Vec<u64>,
    /// Whether the experiment's workload draws on the seed (`Experiment::seeded`).
    pub seeded: bool,
    pub rows: Vec<Row>,
    pub figures: Vec<Figure>,
    /// How the figures were obtained and what the model leaves out, for the reader.
    pub notes: Vec<String>,
    /// The kernel of each machine the experiment ran, with its switches that differ from that
    /// kernel's own (`v5.11 cow_reuse=mapcount`).
    pub configurations: Vec<String>,
    /// `--set KEY=VALUE` settings that replaced the experiment's own (none by default).
    pub overrides: Vec<(String, String)>,
    /// The headline over the declared parameters' ranges, when a sensitivity run was asked for.
    pub sensitivity: Option<Sensitivity>,
}

impl Report {
    /// The report of several seeds' reports of one experiment, in their order: every row's
    /// values side by side, figures merged (`Figure::merge`).
    pub fn merge(reports: Vec<Report>) -> Result<Report, String> {
        let mut it = reports.into_iter();
        let mut out = it.next().ok_or("no report to merge")?;
        let mut figures = vec![std::mem::take(&mut out.figures)];
        for r in it {
            let names = |rep: &Report| rep.rows.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
            if r.experiment != out.experiment || names(&r) != names(&out) {
                return Err(format!("{}: seeds disagree on the rows reported", out.experiment));
            }
            for (row, other) in out.rows.iter_mut().zip(r.rows) {
                row.values.extend(other.values);
            }
            out.seeds.extend(r.seeds);
            for c in r.configurations {
                if !out.configurations.contains(&c) {
                    out.configurations.push(c);
                }
            }
            figures.push(r.figures);
        }
        out.figures = (0..figures[0].len())
            .map(|i| {
                let each: Vec<Figure> = figures.iter().filter_map(|f| f.get(i).cloned()).collect();
                Figure::merge(&each, &out.seeds)
            })
            .collect();
        Ok(out)
    }

    /// The headline rows, then the diagnostic rows, each in the experiment's order.
    pub fn ordered_rows(&self) -> impl Iterator<Item = &Row> {
        let headline = self.rows.iter().filter(|r| r.published.is_some());
        headline.chain(self.rows.iter().filter(|r| r.published.is_none()))
    }

    fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// A headline row's verdict from its mean over the seeds; `None` for a diagnostic row.
    pub fn row_verdict(&self, row: &Row) -> Option<Verdict> {
        let p = row.published.as_ref()?;
        let v = row.mean();
        if (p.band.0..=p.band.1).contains(&v) {
            return Some(Verdict::Reproduced);
        }
        let towards = match &p.direction {
            Direction::Unstated => false,
            Direction::Sign => p.mid() != 0.0 && v != 0.0 && v.signum() == p.mid().signum(),
            Direction::Above(other) => self.row(other).is_some_and(|o| v > o.mean()),
            Direction::Below(other) => self.row(other).is_some_and(|o| v < o.mean()),
        };
        Some(if towards { Verdict::DirectionOnly } else { Verdict::Missed })
    }

    /// The experiment's verdict, the worst of its headline rows', and why when it is not
    /// reproduced: each row outside its band, with the caveat its published figure carries.
    pub fn verdict(&self) -> (Verdict, Option<String>) {
        let mut worst = Verdict::Reproduced;
        let (mut why, mut caveats): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for row in self.ordered_rows() {
            let (Some(v), Some(p)) = (self.row_verdict(row), &row.published) else { continue };
            worst = worst.max(v);
            if v == Verdict::Reproduced {
                continue;
            }
            let side = if v == Verdict::Missed { "not in" } else { "in" };
            why.push(format!(
                "{} is {} {}, outside {} ({side} the published direction)",
                row.name,
                fmt_num(row.mean()),
                row.unit,
                p.band_text()
            ));
            if let Some(c) = p.caveat.as_ref().filter(|c| !caveats.contains(c)) {
                caveats.push(c.clone());
            }
        }
        let mut reason = why.join("; ");
        if !caveats.is_empty() {
            reason += &format!(". Why: {}", caveats.join("; "));
        }
        (worst, (!why.is_empty()).then_some(reason))
    }

    /// The report as JSON: the experiment, its seeds, verdict, configurations, overrides and
    /// notes; its sensitivity (only when asked for: the default report is unchanged); every row with its published figure and band (`null` for a diagnostic row), its
    /// mean, min, max and per-seed values and its verdict; every figure's data.
    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self
            .ordered_rows()
            .map(|r| {
                json!({
                    "name": r.name,
                    "unit": r.unit,
                    "is_change": r.is_change,
                    "published": r.published.as_ref().map(Published::json),
                    "simulated": {
                        "mean": round(r.mean()), "min": round(r.min()), "max": round(r.max()),
                        "values": r.values.iter().map(|&v| round(v)).collect::<Vec<f64>>(),
                    },
                    "verdict": self.row_verdict(r).map(Verdict::label),
                })
            })
            .collect();
        let (verdict, reason) = self.verdict();
        let overrides: Vec<String> =
            self.overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut out = json!({
            "experiment": self.experiment, "title": self.title, "source": self.source,
            "seeds": self.seeds, "seeded": self.seeded, "verdict": verdict.label(), "reason": reason,
            "configurations": self.configurations, "overrides": overrides, "notes": self.notes,
            "rows": rows, "figures": self.figures.iter().map(Figure::json).collect::<Vec<_>>(),
        });
        if let Some(s) = &self.sensitivity {
            out["sensitivity"] = s.json();
        }
        out
    }

    /// The row that decided the verdict: the first headline row whose verdict is the
    /// experiment's (for a reproduced experiment, its first headline row).
    pub fn deciding_row(&self) -> Option<&Row> {
        let (verdict, _) = self.verdict();
        self.ordered_rows().find(|r| self.row_verdict(r) == Some(verdict))
    }

    /// The headline line of the summary: the deciding row, published (with its band) against
    /// simulated (with its spread over the seeds), and how many other rows missed their bands.
    pub fn headline(&self) -> String {
        let Some(r) = self.deciding_row() else { return String::new() };
        let p = r.published.as_ref().expect("a deciding row is a headline row");
        let spread = if r.values.len() > 1 { format!(" ({})", r.spread_text()) } else { "".into() };
        let outside = self
            .ordered_rows()
            .filter(|o| o.name != r.name)
            .filter(|o| self.row_verdict(o).is_some_and(|v| v != Verdict::Reproduced))
            .count();
        let more = match outside {
            0 => String::new(),
            n => format!(
                "; {n} more row{} outside {}",
                if n > 1 { "s" } else { "" },
                if n > 1 { "their bands" } else { "its band" }
            ),
        };
        format!(
            "{}: published {} {u} (band {}), simulated {} {u}{spread}{more}",
            r.name,
            p.text(),
            p.band_text(),
            fmt_num(r.mean()),
            u = r.unit
        )
    }

    fn seeds_text(&self) -> String {
        let s: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        let unseeded = if self.seeded {
            ""
        } else {
            " (the workload draws nothing from the seed: every seed gives this report)"
        };
        format!("seed{} {}{unseeded}", if s.len() > 1 { "s" } else { "" }, s.join(", "))
    }

    /// The table "published vs simulated": the verdict, the headline rows, a separator, then
    /// the diagnostic rows.
    pub fn table(&self) -> String {
        let width = self.rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
        let (verdict, reason) = self.verdict();
        let mut out = format!(
            "{} — {} ({}), {}\n",
            self.experiment,
            self.title,
            self.source,
            self.seeds_text()
        );
        out += &format!(
            "verdict: {}{}\n",
            verdict.label(),
            reason.map_or(String::new(), |r| format!(" — {r}"))
        );
        if let Some(s) = &self.sensitivity {
            out += &format!("robustness: {}\n", s.robustness());
        }
        if !self.overrides.is_empty() {
            out += &format!("NON-DEFAULT settings: {}\n", overrides_text(&self.overrides));
        }
        let line = |a: &str, b: &str, c: &str, d: &str, e: &str, f: &str, g: &str| {
            format!("{a:width$}  {b:>8}  {c:>10}  {d:>20}  {e:>10}  {f:>22}  {g}\n")
        };
        out += &line("name", "unit", "published", "band", "simulated", "min .. max", "verdict");
        let mut diagnostics = false;
        for r in self.ordered_rows() {
            if r.published.is_none() && !diagnostics {
                diagnostics = true;
                out += &format!("{}\n", "-".repeat(width + 8 + 10 + 20 + 10 + 22 + 20));
            }
            let p = r.published.as_ref();
            out += &line(
                &r.name,
                &r.unit,
                &p.map_or("-".into(), Published::text),
                &p.map_or("-".into(), Published::band_text),
                &fmt_num(r.mean()),
                &r.spread_text(),
                self.row_verdict(r).map_or("", Verdict::label),
            );
        }
        if let Some(s) = &self.sensitivity {
            out += &s.table();
        }
        out
    }

    /// An HTML section: the verdict, the configurations, the headline table, the diagnostic
    /// rows folded, the notes, and the figures as inline SVG.
    pub fn html_section(&self) -> Result<String, String> {
        let (verdict, reason) = self.verdict();
        let mut out = format!(
            "<section id=\"{id}\"><h2>{id} — {}</h2>\n<p>Source: <code>{}</code>; {}.</p>\n<p class=\"verdict {}\">Verdict: <b>{}</b>{}</p>\n",
            escape(&self.title),
            escape(&self.source),
            self.seeds_text(),
            verdict.label().replace(' ', "-"),
            verdict.label(),
            reason.map_or(String::new(), |r| format!(" — {}", escape(&r))),
            id = escape(&self.experiment),
        );
        if let Some(s) = &self.sensitivity {
            out +=
                &format!("<p class=\"robustness\">Robustness: {}</p>\n", escape(&s.robustness()));
        }
        if !self.overrides.is_empty() {
            out += &format!(
                "<p class=\"nondefault\">Non-default settings (<code>--set</code>): <code>{}</code></p>\n",
                escape(&overrides_text(&self.overrides))
            );
        }
        out += "<p>Kernels and switches:</p><ul>\n";
        for c in &self.configurations {
            out += &format!("<li><code>{}</code></li>\n", escape(c));
        }
        out += "</ul>\n";
        let (headline, diagnostics): (Vec<&Row>, Vec<&Row>) =
            self.ordered_rows().partition(|r| r.published.is_some());
        out += &self.html_table("headline", &headline, true);
        out += &format!("<details><summary>Diagnostics ({} rows)</summary>\n", diagnostics.len());
        out += &self.html_table("diagnostics", &diagnostics, false);
        out += "</details>\n<h3>Notes</h3>\n<ul>\n";
        for n in &self.notes {
            out += &format!("<li>{}</li>\n", escape(n));
        }
        out += "</ul>\n";
        for (i, f) in self.figures.iter().enumerate() {
            out += &format!(
                "<figure id=\"{}-figure-{i}\">{}<figcaption>{}</figcaption></figure>\n",
                escape(&self.experiment),
                f.svg()?,
                escape(&f.title)
            );
        }
        if let Some(s) = &self.sensitivity {
            out += &tornado::html(&self.experiment, s);
        }
        out += "</section>\n";
        Ok(out)
    }

    fn html_table(&self, class: &str, rows: &[&Row], headline: bool) -> String {
        let mut out = format!("<table class=\"{class}\">\n<tr><th>name</th><th>unit</th>");
        if headline {
            out += "<th>published</th><th>band</th>";
        }
        out += "<th>simulated (mean)</th><th>min .. max</th><th>per seed</th>";
        out +=
            if headline { "<th>verdict</th><th>source of the band</th></tr>\n" } else { "</tr>\n" };
        for r in rows {
            out += &format!("<tr><td>{}</td><td>{}</td>", escape(&r.name), escape(&r.unit));
            if let Some(p) = &r.published {
                out += &format!("<td>{}</td><td>{}</td>", p.text(), p.band_text());
            }
            let each: Vec<String> = r.values.iter().map(|&v| fmt_num(v)).collect();
            out += &format!(
                "<td>{}</td><td>{}</td><td>{}</td>",
                fmt_num(r.mean()),
                r.spread_text(),
                each.join(", ")
            );
            if let (Some(v), Some(p)) = (self.row_verdict(r), &r.published) {
                out += &format!(
                    "<td>{}</td><td class=\"cite\">{}</td>",
                    v.label(),
                    escape(&p.citation)
                );
            }
            out += "</tr>\n";
        }
        out + "</table>\n"
    }
}

fn overrides_text(o: &[(String, String)]) -> String {
    o.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// Figures rounded to what the model can claim (four digits after the point).
pub(super) fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// A figure as a reader reads it: whole above 100, otherwise at most two decimals.
pub(super) fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 || x == x.trunc() {
        format!("{x:.0}")
    } else {
        format!("{x:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(seed: u64, gain: f64) -> Report {
        Report {
            experiment: "x".into(),
            title: "t".into(),
            source: "s".into(),
            seeds: vec![seed],
            seeded: true,
            rows: vec![
                Row::level("copies", "pages", 7.0),
                Row::change("gain", gain).published(
                    Published::point(24.9).within_factor(2.0).cite("c").direction(Direction::Sign),
                ),
                Row::level("latency a", "ns", 1500.0).published(
                    Published::point(2000.0)
                        .within_factor(1.1)
                        .direction(Direction::Above("latency b".into())),
                ),
                Row::level("latency b", "ns", 1000.0).published(Published::range(900.0, 1100.0)),
            ],
            figures: vec![
                Figure::new("cdf", "ns", "fraction")
                    .log_axes(true, false)
                    .with_series(vec![Series::new("a", vec![(1.0, 0.1), (1000.0, 1.0)])]),
            ],
            notes: vec!["n <1>".into()],
            configurations: vec!["v5.11".into()],
            overrides: Vec::new(),
            sensitivity: None,
        }
    }

    #[test]
    fn verdicts_come_from_bands_and_directions() {
        let r = report(1, 20.0);
        let v = |name: &str| r.row_verdict(r.row(name).unwrap());
        assert_eq!(v("gain"), Some(Verdict::Reproduced));
        assert_eq!(v("latency a"), Some(Verdict::DirectionOnly));
        assert_eq!(v("copies"), None);
        let (verdict, why) = r.verdict();
        assert_eq!(verdict, Verdict::DirectionOnly);
        assert!(why.unwrap().contains("latency a is 1500 ns, outside 1818"));
        let r = report(1, -3.0);
        assert_eq!(r.verdict().0, Verdict::Missed);
    }

    #[test]
    fn the_headline_is_the_row_that_decided_the_verdict_with_its_band() {
        let r = report(1, -3.0);
        assert_eq!(r.deciding_row().map(|d| d.name.as_str()), Some("gain"));
        let h = r.headline();
        assert!(
            h.starts_with("gain: published 24.9 % (band 12.45 .. 49.8), simulated -3 %"),
            "{h}"
        );
        assert!(h.ends_with("; 1 more row outside its band"), "{h}");
        let r = report(1, 20.0);
        assert_eq!(r.deciding_row().map(|d| d.name.as_str()), Some("latency a"));
        let r = Report { rows: r.rows[1..2].to_vec(), ..r };
        assert_eq!(r.verdict().0, Verdict::Reproduced);
        assert!(r.headline().starts_with("gain: published"), "the first headline row");
    }

    #[test]
    fn seeds_merge_into_mean_spread_and_values() {
        let r = Report::merge(vec![report(1, 20.0), report(2, 30.0)]).unwrap();
        let gain = r.row("gain").unwrap();
        assert_eq!((gain.mean(), gain.min(), gain.max()), (25.0, 20.0, 30.0));
        let j = r.json();
        assert_eq!(j["seeds"], json!([1, 2]));
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows[0]["name"], "gain", "headline rows first");
        assert_eq!(rows[0]["simulated"]["values"], json!([20.0, 30.0]));
        assert_eq!(rows[0]["published"]["band"], json!([12.45, 49.8]));
        assert_eq!(rows[3]["name"], "copies");
        assert!(rows[3]["published"].is_null() && rows[3]["verdict"].is_null());
        assert_eq!(j["figures"][0]["series"][0]["spread"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn the_table_puts_diagnostics_below_a_separator() {
        let t = report(1, 20.0).table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].starts_with("verdict: direction only"), "{t}");
        assert!(lines[3].starts_with("gain") && lines[3].ends_with("reproduced"), "{t}");
        assert!(lines[6].starts_with("----") && lines[7].starts_with("copies"), "{t}");
    }

    #[test]
    fn html_folds_diagnostics_and_escapes_notes() {
        let h = report(1, 20.0).html_section().unwrap();
        assert!(h.contains("<svg") && h.contains("n &lt;1&gt;"), "{h}");
        let fold = h.find("<details>").unwrap();
        assert!(h.find(">gain<").unwrap() < fold && h.find(">copies<").unwrap() > fold);
    }
}
