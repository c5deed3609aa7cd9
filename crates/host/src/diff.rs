//! `mmsim diff`: one scenario run natively on the host and in mmsim at the host's kernel
//! version, every operation's result and every expectation's reading set side by side as
//! kernel and model, each row agreeing or not by its comparison class (`observe.rs`).

use crate::controller::{HostReading, NativeOptions, NativeReport, run_native};
use crate::observe::{self, Class};
use crate::support::{Refusal, refuse};
use lab::scenario::interp::Reading;
use lab::scenario::model::Scenario;
use lab::scenario::run::{Overrides, Report, run};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a row's two sides compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Agree,
    Disagree,
    /// The kernel does not show it (the model's own state or checker).
    ModelOnly,
    /// They differ, as the scenario declares (`[[host_differs]]`) with its reason.
    Declared,
    /// The scenario declares a difference that is no longer there.
    Stale,
}

/// One operation or expectation, as the kernel and the model answered it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub line: usize,
    pub what: String,
    /// What the scenario expects.
    pub expected: String,
    pub kernel: Option<String>,
    pub model: Option<String>,
    pub class: Class,
    pub verdict: Verdict,
    /// The declared reason, for a declared or stale row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A scenario's comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiffReport {
    pub scenario: String,
    pub release: String,
    pub kernel: String,
    pub rows: Vec<Row>,
    /// Expectations the kernel did not meet (within the noisy counters' allowance).
    pub kernel_failures: usize,
    /// Expectations the model did not meet.
    pub model_failures: usize,
}

impl DiffReport {
    /// Rows that differ undeclared, and declarations of differences no longer there.
    pub fn disagreements(&self) -> usize {
        self.rows.iter().filter(|r| matches!(r.verdict, Verdict::Disagree | Verdict::Stale)).count()
    }

    /// The side-by-side table.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{}: the kernel {} ({}) against the model\n",
            self.scenario, self.release, self.kernel
        );
        let w = self.rows.iter().map(|r| r.what.len()).max().unwrap_or(4).clamp(4, 48);
        out.push_str(&format!(
            "{:>5}  {:<w$}  {:>22}  {:>22}  verdict\n",
            "line", "what", "kernel", "model"
        ));
        for r in &self.rows {
            let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            let verdict = match (&r.verdict, &r.class) {
                (Verdict::Agree, _) => "agree".to_string(),
                (Verdict::Disagree, _) => "DISAGREE".to_string(),
                (Verdict::ModelOnly, Class::ModelOnly(why)) => format!("model only ({why})"),
                (Verdict::ModelOnly, _) => match &r.reason {
                    Some(why) => format!("varies natively: {why}"),
                    None => "model only".to_string(),
                },
                (Verdict::Declared, _) => {
                    format!("declared: {}", r.reason.as_deref().unwrap_or(""))
                }
                (Verdict::Stale, _) => "STALE: declared to differ, but agrees".to_string(),
            };
            let what: String = r.what.chars().take(w).collect();
            out.push_str(&format!(
                "{:>5}  {what:<w$}  {:>22}  {:>22}  {verdict}\n",
                r.line,
                clip(&side(&r.kernel)),
                clip(&side(&r.model))
            ));
        }
        let agree = self.rows.iter().filter(|r| r.verdict == Verdict::Agree).count();
        let count = |v: Verdict| self.rows.iter().filter(|r| r.verdict == v).count();
        out.push_str(&format!(
            "{agree} agree, {} disagree, {} declared, {} stale, {} model only\n",
            count(Verdict::Disagree),
            count(Verdict::Declared),
            count(Verdict::Stale),
            count(Verdict::ModelOnly)
        ));
        out
    }
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 22 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(21).collect::<String>())
    }
}

/// Runs `s` on the host and in the model at the host's kernel version, and compares them.
/// The model runs first, so that the native run can place its mappings where the model did.
pub fn diff(s: &Scenario, o: &NativeOptions) -> Result<DiffReport, Refusal> {
    let kernel = crate::support::host_kernel()?;
    let overrides = Overrides { kernel: Some(kernel), ..Overrides::default() };
    let model = run(s, &overrides, &mut |_| {}).or_else(|e| refuse(format!("the model: {e}")))?;
    if let Some(why) = &model.skipped {
        return refuse(format!("the scenario does not apply to {kernel}: {why}"));
    }
    if let Some(why) = model.stopped.as_ref().or(model.refused.as_ref()) {
        return refuse(format!("the model's run did not finish: {why}"));
    }
    let unplaced: Vec<usize> = s
        .all_ops()
        .filter(|op| matches!(op.kind, lab::scenario::model::OpKind::Mmap { addr: None, .. }))
        .map(|op| op.line)
        .collect();
    let placement = model
        .readings
        .iter()
        .filter(|r| unplaced.contains(&r.line))
        .filter_map(|r| Some((r.line, r.addr?)))
        .collect();
    let native = run_native(s, &NativeOptions { placement, ..o.clone() })?;
    let switches = mm::Switches::for_kernel(kernel);
    let declared: Vec<Declared> = s
        .host_differs
        .iter()
        .filter(|d| d.when.holds(&switches, kernel))
        .map(|d| Declared { line: d.at, reason: d.reason.clone(), varies: d.varies })
        .collect();
    Ok(compare(&native, &model, &declared))
}

/// A row the scenario declares (`[[host_differs]]`) on this kernel.
#[derive(Clone, Debug)]
pub struct Declared {
    pub line: usize,
    pub reason: String,
    /// The native value varies from run to run: not compared.
    pub varies: bool,
}

/// The rows of a native run and a model run of one scenario; `declared` are the lines the
/// scenario declares to differ (or to vary) on this kernel, with their reasons.
pub fn compare(native: &NativeReport, model: &Report, declared: &[Declared]) -> DiffReport {
    let mut after: Option<usize> = None;
    let rows = pair_readings(native, model)
        .into_iter()
        .map(|(line, k, m)| {
            let mut r = row(line, k, m);
            if let Some(d) = declared.iter().find(|d| d.line == line) {
                r.verdict = match r.verdict {
                    _ if d.varies => Verdict::ModelOnly,
                    Verdict::Disagree => Verdict::Declared,
                    _ => Verdict::Stale,
                };
                r.reason = Some(d.reason.clone());
                after = after.or(Some(line));
            } else if let (Some(at), None, Verdict::Disagree) = (after, &r.kernel, r.verdict) {
                // The native run stopped at a declared difference and never came here.
                r.verdict = Verdict::Declared;
                r.reason = Some(format!("not run natively after line {at}"));
            }
            r
        })
        .collect();
    DiffReport {
        scenario: native.scenario.clone(),
        release: native.release.clone(),
        kernel: native.kernel.clone(),
        rows,
        kernel_failures: native.failures.len(),
        model_failures: model.failures.len(),
    }
}

/// A line's kernel and model readings.
type Paired<'a> = (usize, Option<&'a HostReading>, Option<&'a Reading>);

/// The two runs' readings paired by line and observable, in the order of the lines and, within
/// a line, of their first reading: two expectations written on one line are two rows, while
/// the iterations of a loop, which read the same observable on the same line, are one (the
/// last reading of each side).
fn pair_readings<'a>(native: &'a NativeReport, model: &'a Report) -> Vec<Paired<'a>> {
    type Slot<'a> = (usize, Option<&'a HostReading>, Option<&'a Reading>);
    let mut pairs: BTreeMap<(usize, &'a str), Slot<'a>> = BTreeMap::new();
    let sides = native.readings.iter().map(|k| (&k.reading, Some(k), None));
    let sides = sides.chain(model.readings.iter().map(|m| (m, None, Some(m))));
    for (n, (r, k, m)) in sides.enumerate() {
        let slot = pairs.entry((r.line, r.what.as_str())).or_insert((n, None, None));
        slot.1 = k.or(slot.1);
        slot.2 = m.or(slot.2);
    }
    let mut rows: Vec<(usize, usize, Option<&HostReading>, Option<&Reading>)> =
        pairs.into_iter().map(|((line, _), (first, k, m))| (line, first, k, m)).collect();
    rows.sort_by_key(|&(line, first, ..)| (line, first));
    rows.into_iter().map(|(line, _, k, m)| (line, k, m)).collect()
}

fn row(line: usize, k: Option<&HostReading>, m: Option<&Reading>) -> Row {
    let class = k.map_or(Class::Exact, |k| k.class.clone());
    let first = k.map(|k| &k.reading).or(m).expect("a line has a reading on one side");
    let verdict = match (&class, k, m) {
        (Class::ModelOnly(_), _, _) => Verdict::ModelOnly,
        (_, Some(k), Some(m)) if agree(&class, &k.reading, m) => Verdict::Agree,
        _ => Verdict::Disagree,
    };
    Row {
        line,
        what: first.what.clone(),
        expected: first.expected.clone(),
        kernel: k.map(|k| k.reading.observed.clone()),
        model: m.map(|m| m.observed.clone()),
        class,
        verdict,
        reason: None,
    }
}

/// Whether the two readings agree in `class`'s terms.
fn agree(class: &Class, k: &Reading, m: &Reading) -> bool {
    match (class, k.value, m.value) {
        (Class::Progress, _, _) => k.held && m.held,
        (Class::Noisy(a), Some(kv), Some(mv)) => kv.abs_diff(mv) <= observe::slack(*a, mv),
        (_, Some(kv), Some(mv)) => kv == mv,
        _ => k.observed == m.observed,
    }
}
