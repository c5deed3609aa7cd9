//! The sensitivity section of an experiment's report: a table of the declared parameters (their
//! ranges, sources, the headline at each end and its verdicts) and a tornado figure drawn as
//! plain SVG: one horizontal bar per parameter, widest swing on top, from the headline at the
//! experiment's own values (a dashed line) to the headline at the range's low end (one colour)
//! and at its high end (another), a last bar spanning the joint samples with a dot for each,
//! and the published figure's band drawn as a stripe behind them all, so a bar that leaves the
//! stripe shows where the verdict would change.

use super::{escape, fmt_num, tick};
use crate::reproduce::Sensitivity;
use crate::reproduce::sensitivity::SAMPLES;

const WIDTH: f64 = 720.0;
const LEFT: f64 = 210.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 56.0;
const ROW: f64 = 30.0;
const BOTTOM: f64 = 40.0;
const LOW_COLOUR: &str = "#1f77b4";
const HIGH_COLOUR: &str = "#ff7f0e";
const BAND_COLOUR: &str = "#c7e9c0";

/// The section: a heading, the robustness line, the figure and the parameters' table.
pub(super) fn html(experiment: &str, s: &Sensitivity) -> String {
    let id = escape(experiment);
    let mut out = format!(
        "<h3>Sensitivity to the declared parameters</h3>\n<p>Each parameter below was not measured on the seed's machine; the experiment ran at seed {} with each at each end of its range (the others at the experiment's values), and at {SAMPLES} joint points of a Latin hypercube over all of them. The headline `{}` ranged over {} .. {} {}.</p>\n",
        s.seed,
        escape(&s.row),
        fmt_num(s.range().0),
        fmt_num(s.range().1),
        escape(&s.unit)
    );
    out += &format!(
        "<figure id=\"{id}-tornado\">{}<figcaption>{}: the headline at each end of each declared range, and over the joint samples</figcaption></figure>\n",
        svg(s),
        escape(&s.row)
    );
    out += "<table class=\"sensitivity\">\n<tr><th>parameter</th><th>range</th><th>headline at low</th><th>headline at high</th><th>verdicts (low / high)</th><th>source of the range</th></tr>\n";
    for p in &s.params {
        out += &format!(
            "<tr><td><code>{}</code></td><td>{} .. {} {}</td><td>{}</td><td>{}</td><td>{} / {}</td><td class=\"cite\">{}</td></tr>\n",
            escape(p.param.key),
            p.param.low,
            p.param.high,
            escape(p.param.unit),
            fmt_num(p.at_low.value),
            fmt_num(p.at_high.value),
            p.at_low.row.label(),
            p.at_high.row.label(),
            escape(p.param.source)
        );
    }
    out + "</table>\n"
}

/// The x axis's ends: every value drawn and the band, widened a little.
fn domain(s: &Sensitivity) -> (f64, f64) {
    let (lo, hi) = s.range();
    let (lo, hi) = (lo.min(s.published.band.0), hi.max(s.published.band.1));
    let span = (hi - lo).max(hi.abs() * 0.1).max(1e-9);
    (lo - span * 0.03, hi + span * 0.03)
}

/// The tornado figure as an SVG document.
pub(super) fn svg(s: &Sensitivity) -> String {
    let mut order: Vec<usize> = (0..s.params.len()).collect();
    let swing = |i: usize| (s.params[i].at_high.value - s.params[i].at_low.value).abs();
    order.sort_by(|&a, &b| swing(b).total_cmp(&swing(a)));
    let bars = s.params.len() + usize::from(!s.samples.is_empty());
    let height = TOP + ROW * bars as f64 + BOTTOM;
    let (lo, hi) = domain(s);
    let x = |v: f64| LEFT + (v - lo) / (hi - lo) * (WIDTH - LEFT - RIGHT);
    let (b0, b1) = s.published.band;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    out += &format!(
        "<rect x=\"{:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{BAND_COLOUR}\"/>\n",
        x(b0),
        (x(b1) - x(b0)).max(1.0),
        ROW * bars as f64
    );
    out += &legend(s);
    for (row, &i) in order.iter().enumerate() {
        let p = &s.params[i];
        let y = TOP + ROW * row as f64;
        out += &label(y, p.param.key);
        out += &bar(x(s.base.value), x(p.at_low.value), y, LOW_COLOUR);
        out += &bar(x(s.base.value), x(p.at_high.value), y, HIGH_COLOUR);
    }
    if let Some((min, max)) = s.samples_range() {
        let y = TOP + ROW * s.params.len() as f64;
        out += &label(y, &format!("all together ({SAMPLES} samples)"));
        out += &bar(x(min), x(max), y, "#999999");
        for v in s.samples.iter().map(|(_, o)| o.value) {
            out += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"black\"/>\n",
                x(v),
                y + ROW / 2.0
            );
        }
    }
    let base = x(s.base.value);
    out += &format!(
        "<line x1=\"{base:.1}\" y1=\"{TOP}\" x2=\"{base:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n",
        TOP + ROW * bars as f64
    );
    out + &axis(s, height - BOTTOM, &x) + "</svg>"
}

/// A bar between `x0` and `x1` (either order) in row `y`.
fn bar(x0: f64, x1: f64, y: f64, colour: &str) -> String {
    format!(
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\" fill-opacity=\"0.85\"/>\n",
        x0.min(x1),
        y + 6.0,
        (x1 - x0).abs().max(1.5),
        ROW - 12.0
    )
}

fn label(y: f64, text: &str) -> String {
    format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>\n",
        LEFT - 8.0,
        y + ROW / 2.0,
        escape(text)
    )
}

/// The legend above the bars: what each colour and the stripe mean.
fn legend(s: &Sensitivity) -> String {
    let band = format!(
        "published {} {}, band {} .. {}",
        s.published.text(),
        s.unit,
        fmt_num(s.published.band.0),
        fmt_num(s.published.band.1)
    );
    let items = [
        (LOW_COLOUR, "at the range's low end".to_string()),
        (HIGH_COLOUR, "at its high end".to_string()),
        (BAND_COLOUR, band),
    ];
    let mut out = format!(
        "<text x=\"10\" y=\"16\">{}: dashed at the experiment's values ({})</text>\n",
        escape(&s.row),
        fmt_num(s.base.value)
    );
    let mut at = 10.0;
    for (colour, text) in items {
        out += &format!(
            "<rect x=\"{at:.1}\" y=\"28\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"38\">{}</text>\n",
            at + 16.0,
            escape(&text)
        );
        at += 16.0 + 6.5 * text.len() as f64 + 14.0;
    }
    out
}

/// Ticks at round values (a step of 1, 2 or 5 times a power of ten) inside `lo .. hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo) / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|&s| s >= raw);
    let step = step.unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    (first..).map(|k| k as f64 * step).take_while(|&v| v <= hi).collect()
}

/// The x axis at `y`: ticks at round values and the unit.
fn axis(s: &Sensitivity, y: f64, x: &dyn Fn(f64) -> f64) -> String {
    let (lo, hi) = domain(s);
    let mut out = format!(
        "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"black\"/>\n",
        WIDTH - RIGHT
    );
    for v in ticks(lo, hi) {
        out += &format!(
            "<line x1=\"{0:.1}\" y1=\"{y:.1}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"black\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{3}</text>\n",
            x(v),
            y + 4.0,
            y + 18.0,
            tick(v)
        );
    }
    out + &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} ({})</text>\n",
        (LEFT + WIDTH - RIGHT) / 2.0,
        y + 34.0,
        escape(&s.row),
        escape(&s.unit)
    )
}
