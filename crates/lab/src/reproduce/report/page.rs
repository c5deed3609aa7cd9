//! A run of `mmsim reproduce` as one document: where and when it ran, a summary of every seed
//! change (the ones without an experiment marked "not yet modelled"), then each experiment's
//! section. As HTML (`html_page`), JSON (`page_json`) and a text summary (`summary_table`).

use super::{Report, escape};
use crate::reproduce::SEED_CHANGES;
use serde_json::{Value, json};

/// Where, when and how a run was made; the CLI fills it in (it may read the clock and the host).
#[derive(Clone, Debug, PartialEq)]
pub struct Provenance {
    /// `git describe` of the source, or the crate version when that is unknown.
    pub commit: String,
    /// UTC, `YYYY-MM-DD HH:MM`.
    pub date: String,
    /// The host name, its CPU model and count.
    pub host: String,
    /// Wall-clock seconds of the whole run.
    pub runtime_s: f64,
    /// Host threads the seeds ran on.
    pub threads: usize,
    /// `full` or `quick` (test sizes).
    pub scale: String,
}

/// One line of the summary: a seed change with its citation, its experiment, verdict and the
/// row that decided it (`Report::headline`), and, when a sensitivity run was asked for, whether
/// the verdict holds across the declared parameters' ranges.
struct SummaryLine {
    citation: &'static str,
    change: &'static str,
    experiment: &'static str,
    verdict: String,
    headline: String,
    robustness: Option<String>,
}

fn summary(reports: &[Report]) -> Vec<SummaryLine> {
    SEED_CHANGES
        .iter()
        .map(|s| {
            let report = s.experiment.and_then(|e| reports.iter().find(|r| r.experiment == e));
            let verdict = match (s.experiment, report) {
                (None, _) => "not yet modelled".to_string(),
                (Some(_), None) => "not run".to_string(),
                (Some(_), Some(r)) => r.verdict().0.label().to_string(),
            };
            SummaryLine {
                citation: s.citation,
                change: s.change,
                experiment: s.experiment.unwrap_or("-"),
                verdict,
                headline: report.map_or(String::new(), Report::headline),
                robustness: report.and_then(|r| r.sensitivity.as_ref()).map(|s| s.robustness()),
            }
        })
        .collect()
}

/// The summary of every seed change as a text table.
pub fn summary_table(reports: &[Report]) -> String {
    let lines = summary(reports);
    let w = lines.iter().map(|l| l.change.len()).max().unwrap_or(6);
    let e = lines.iter().map(|l| l.experiment.len()).max().unwrap_or(10).max(10);
    let mut out =
        format!("{:w$}  {:e$}  {:16}  headline\n", "seed change", "experiment", "verdict");
    for l in &lines {
        out += &format!("{:w$}  {:e$}  {:16}  {}\n", l.change, l.experiment, l.verdict, l.headline)
            .replace("  \n", "\n");
        if let Some(r) = &l.robustness {
            out += &format!("{:w$}  {:e$}  {:16}  robustness: {r}\n", "", "", "");
        }
    }
    out
}

/// The whole run as JSON: `{"provenance", "summary", "experiments"}`.
pub fn page_json(p: &Provenance, reports: &[Report]) -> Value {
    let summary: Vec<Value> = summary(reports)
        .iter()
        .map(|l| {
            let mut line = json!({
                "citation": l.citation, "change": l.change, "experiment": l.experiment,
                "verdict": l.verdict, "headline": l.headline,
            });
            if let Some(r) = &l.robustness {
                line["robustness"] = json!(r);
            }
            line
        })
        .collect();
    json!({
        "provenance": {
            "commit": p.commit, "date": p.date, "host": p.host, "runtime_s": (p.runtime_s * 10.0).round() / 10.0,
            "threads": p.threads, "scale": p.scale,
        },
        "summary": summary,
        "experiments": reports.iter().map(Report::json).collect::<Vec<_>>(),
    })
}

const STYLE: &str = "body{font-family:sans-serif;max-width:66em;margin:auto;padding:0 1em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\
td:first-child,th:first-child,td.cite,#summary td{text-align:left}td.cite{font-size:85%;max-width:28em}\
.reproduced{color:#060}.direction-only{color:#a60}.missed{color:#b00}.nondefault{background:#fdd}\
figure{margin:1em 0}figcaption{font-size:90%;color:#444}";

/// A whole HTML page: provenance, the summary table (`id="summary"`, a row per seed change),
/// then each report's section.
pub fn html_page(p: &Provenance, reports: &[Report]) -> Result<String, String> {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mmsim reproduce</title>\n<style>{STYLE}</style></head><body>\n<h1>mmsim reproduce: published vs simulated</h1>\n<p>Commit <code>{}</code>, run {} UTC on {}, {} scale, {} host threads; the whole run took {:.0} s.</p>\n",
        escape(&p.commit),
        escape(&p.date),
        escape(&p.host),
        escape(&p.scale),
        p.threads,
        p.runtime_s
    );
    out += "<p>A verdict compares the mean over the seeds of each published (headline) figure with its band: <b>reproduced</b> inside every band, <b>direction only</b> outside one but in the published direction, <b>missed</b> otherwise. Bands check the model; nothing is fitted to them.</p>\n";
    if p.scale != "full" {
        out += "<p class=\"nondefault\">Test scale: sizes are reduced, so the figures are not comparable with the published ones and the verdicts mean nothing.</p>\n";
    }
    out += "<table id=\"summary\"><thead><tr><th>seed change</th><th>experiment</th><th>verdict</th><th>headline</th></tr></thead><tbody>\n";
    for l in summary(reports) {
        let robustness = l.robustness.as_ref().map_or(String::new(), |r| {
            format!("<br><span class=\"robustness\">Robustness: {}</span>", escape(r))
        });
        out += &format!(
            "<tr><td>{} <small>({})</small></td><td>{}</td><td class=\"{}\">{}</td><td>{}{robustness}</td></tr>\n",
            escape(l.change),
            escape(l.citation),
            escape(l.experiment),
            l.verdict.replace(' ', "-"),
            escape(&l.verdict),
            escape(&l.headline)
        );
    }
    out += "</tbody></table>\n";
    for r in reports {
        out += &r.html_section()?;
    }
    out += "</body></html>\n";
    Ok(out)
}
