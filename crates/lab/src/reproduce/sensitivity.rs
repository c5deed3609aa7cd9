//! Declared free parameters and the sensitivity of a headline to them (issue 46).
//!
//! A published figure is reproduced only if the model lands in its band for every plausible
//! value of what the model had to assume. Each experiment therefore declares, beside its code,
//! the parameters its headline rests on that were not measured on the seed's machine
//! ([`FreeParam`]: a machine-profile cost such as the wake-up latency of an idle CPU, or a
//! figure of the experiment's own such as a workload's CPU time per frame), each with the range
//! a reader could defend and where that range comes from. A range is a statement about the
//! seed's machine, never a knob to fit: nothing here chooses a value.
//!
//! `mmsim reproduce NAME --sensitivity` runs the experiment at the first seed once per point of
//! a plan ([`plan`]): each parameter at each end of its range with the others at the
//! experiment's own values (one at a time, for the tornado figure), then a Latin hypercube of
//! [`SAMPLES`] points over all of them together from a fixed seed (so two parameters that only
//! flip the verdict jointly show). Every point is a whole run with the parameters given as
//! `--set` settings, so the verdicts are the report's own; the points run on host threads
//! beside the seeds (`run_seeds`). The outcome ([`Sensitivity`]) follows one headline row (the
//! experiment's [`Experiment::headline`](super::Experiment)) and the experiment's verdict, and
//! says whether either changes anywhere in the declared ranges.
//!
//! An experiment's own parameter is named `EXPERIMENT.NAME` (`fadv-noreuse.frame_cpu_ns`) and
//! read with `Setup::knob`; `--set` takes it as it takes a cost.

use super::report::{Published, Report, Verdict, fmt_num};
use serde_json::{Value, json};

/// A parameter a headline rests on that was not measured on the seed's machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreeParam {
    /// The `--set` key that varies it: a machine setting (`cost.wakeup_latency`) or the
    /// experiment's own (`fadv-noreuse.frame_cpu_ns`).
    pub key: &'static str,
    pub unit: &'static str,
    /// The plausible range's ends, in `unit`.
    pub low: u64,
    pub high: u64,
    /// Where the range comes from.
    pub source: &'static str,
}

/// The wake-up latency of a task woken on an idle CPU, which the hugetlb and fadvise
/// experiments' headlines rest on: the seeds' machines are not described.
pub(super) const WAKEUP_LATENCY: FreeParam = FreeParam {
    key: "cost.wakeup_latency",
    unit: "ns",
    low: 2_000,
    high: 64_000,
    source: "bare metal whose idle CPU sits in a shallow C-state wakes in about 2 us (intel_idle's \
             Skylake-SP C1 exit latency); a KVM guest whose idle vCPU halts exits through the host: \
             tools/wakeup.c measured a median of 47.5 us and a p90 of 64 us on the development VM",
};

/// The joint samples of a sensitivity run.
pub const SAMPLES: usize = 8;

/// The seed of the Latin hypercube (fixed: a sensitivity run is reproducible).
const SAMPLE_SEED: u64 = 46;

/// The settings of every point of the plan for `params`: each parameter at its low then its
/// high end alone, then the [`joint_samples`].
pub fn plan(params: &[FreeParam]) -> Vec<Vec<(String, String)>> {
    let set = |p: &FreeParam, v: u64| (p.key.to_string(), v.to_string());
    let alone = params.iter().flat_map(|p| [vec![set(p, p.low)], vec![set(p, p.high)]]);
    let joint = joint_samples(params)
        .into_iter()
        .map(|values| params.iter().zip(values).map(|(p, v)| set(p, v)).collect());
    alone.chain(joint).collect()
}

/// [`SAMPLES`] joint points of a centred Latin hypercube over `params` (none without a
/// parameter): each point's values in `params` order; each range's [`SAMPLES`] equal strata
/// hold one point each, at their centres.
pub fn joint_samples(params: &[FreeParam]) -> Vec<Vec<u64>> {
    if params.is_empty() {
        return Vec::new();
    }
    let mut prng = simcore::Prng::from_seed(SAMPLE_SEED).stream("latin-hypercube");
    let strata: Vec<Vec<u64>> = params
        .iter()
        .map(|_| {
            let mut s: Vec<u64> = (0..SAMPLES as u64).collect();
            prng.shuffle(&mut s);
            s
        })
        .collect();
    let n = SAMPLES as u64;
    let at = |p: &FreeParam, k: u64| p.low + (p.high - p.low) * (2 * k + 1) / (2 * n);
    (0..SAMPLES).map(|i| params.iter().zip(&strata).map(|(p, s)| at(p, s[i])).collect()).collect()
}

/// The lowest and highest of `values` (infinities when there is none).
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// What one run gave: the headline row's value and verdict, and the experiment's verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub value: f64,
    pub row: Verdict,
    pub verdict: Verdict,
}

impl Outcome {
    fn of(report: &Report, row: &str) -> Result<Outcome, String> {
        let r = report.rows.iter().find(|r| r.name == row);
        let r = r.ok_or_else(|| format!("{}: no headline row `{row}`", report.experiment))?;
        let v = report.row_verdict(r).ok_or_else(|| format!("`{row}` has no published figure"))?;
        Ok(Outcome { value: r.mean(), row: v, verdict: report.verdict().0 })
    }

    fn json(&self) -> Value {
        json!({"value": super::report::round(self.value), "row_verdict": self.row.label(), "verdict": self.verdict.label()})
    }
}

/// One parameter's one-at-a-time runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamRange {
    pub param: FreeParam,
    pub at_low: Outcome,
    pub at_high: Outcome,
}

/// The headline over every declared range of one experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct Sensitivity {
    /// The headline row followed, its unit and published figure.
    pub row: String,
    pub unit: String,
    pub published: Published,
    /// The seed every point ran at.
    pub seed: u64,
    /// At the experiment's own values.
    pub base: Outcome,
    pub params: Vec<ParamRange>,
    /// The joint samples: each parameter's value, in `params` order, and what the run gave.
    pub samples: Vec<(Vec<u64>, Outcome)>,
}

impl Sensitivity {
    /// The sensitivity of `row` from the run at the experiment's own values (`base`) and the
    /// runs of [`plan`]`(params)`, in its order.
    pub fn new(
        row: &str,
        params: &[FreeParam],
        base: &Report,
        points: &[Report],
    ) -> Result<Sensitivity, String> {
        let r = base.rows.iter().find(|r| r.name == row);
        let r = r.ok_or_else(|| format!("{}: no headline row `{row}`", base.experiment))?;
        let published = r.published.clone().ok_or_else(|| format!("`{row}` is not published"))?;
        let outcomes: Vec<Outcome> =
            points.iter().map(|p| Outcome::of(p, row)).collect::<Result<_, _>>()?;
        if outcomes.len() != plan(params).len() {
            return Err(format!(
                "{}: {} sensitivity runs for its plan",
                base.experiment,
                outcomes.len()
            ));
        }
        let (alone, joint) = outcomes.split_at(2 * params.len());
        let params_ranges = params
            .iter()
            .zip(alone.chunks(2))
            .map(|(&param, o)| ParamRange { param, at_low: o[0], at_high: o[1] })
            .collect();
        let samples = joint_samples(params).into_iter().zip(joint.iter().copied()).collect();
        Ok(Sensitivity {
            row: row.into(),
            unit: r.unit.clone(),
            published,
            seed: *base.seeds.first().ok_or("a report without a seed")?,
            base: Outcome::of(base, row)?,
            params: params_ranges,
            samples,
        })
    }

    fn outcomes(&self) -> impl Iterator<Item = &Outcome> {
        let alone = self.params.iter().flat_map(|p| [&p.at_low, &p.at_high]);
        std::iter::once(&self.base).chain(alone).chain(self.samples.iter().map(|(_, o)| o))
    }

    /// The headline's lowest and highest value over every run.
    pub fn range(&self) -> (f64, f64) {
        span(self.outcomes().map(|o| o.value))
    }

    /// The headline's lowest and highest value over the joint samples, if there are any.
    pub fn samples_range(&self) -> Option<(f64, f64)> {
        let values = self.samples.iter().map(|(_, o)| o.value);
        (!self.samples.is_empty()).then(|| span(values))
    }

    /// How `o` differs from the verdicts at the experiment's own values, if it does: the
    /// headline row's verdict or side of its band, or the experiment's verdict.
    fn flip(&self, o: &Outcome) -> Option<String> {
        let mut what = Vec::new();
        let side = |v: f64| {
            let (lo, hi) = self.published.band;
            if v < lo {
                "below"
            } else if v > hi {
                "above"
            } else {
                "inside"
            }
        };
        if o.row != self.base.row {
            what.push(format!("{} {}", self.row, o.row.label()));
        } else if side(o.value) != side(self.base.value) {
            // The same verdict on the band's other side: the headline crossed the band (a
            // "direction only" below and above it), so some value between changes the verdict.
            what.push(format!("{} {} its band", self.row, side(o.value)));
        }
        if o.verdict != self.base.verdict {
            what.push(format!("experiment {}", o.verdict.label()));
        }
        (!what.is_empty()).then(|| what.join(", "))
    }

    /// "verdict holds across every declared range", or the parameters it depends on, each
    /// with the end of its range where the verdicts differ and how; joint samples that differ
    /// where no parameter alone does are named last.
    pub fn robustness(&self) -> String {
        let mut depends = Vec::new();
        for p in &self.params {
            let ends = [(p.param.low, &p.at_low), (p.param.high, &p.at_high)];
            let flips: Vec<String> = ends
                .iter()
                .filter_map(|(v, o)| {
                    self.flip(o).map(|f| format!("flips at {v} {}: {f}", p.param.unit))
                })
                .collect();
            if !flips.is_empty() {
                depends.push(format!("{} ({})", p.param.key, flips.join("; ")));
            }
        }
        let joint = self.samples.iter().filter(|(_, o)| self.flip(o).is_some()).count();
        if depends.is_empty() && joint > 0 {
            depends.push(format!(
                "the parameters together ({joint} of {} joint samples)",
                self.samples.len()
            ));
        }
        if depends.is_empty() {
            "verdict holds across every declared range".into()
        } else {
            format!("verdict depends on: {}", depends.join("; "))
        }
    }

    /// The text lines of `mmsim reproduce --sensitivity`: the headline's range per parameter,
    /// over the joint samples and over everything (the robustness line goes beside the verdict).
    pub fn table(&self) -> String {
        let (lo, hi) = self.range();
        let u = &self.unit;
        let mut out = format!(
            "sensitivity of `{}` (seed {}; published {} {u}, band {} .. {}): {} {u} at the experiment's values ({})\n",
            self.row,
            self.seed,
            self.published.text(),
            fmt_num(self.published.band.0),
            fmt_num(self.published.band.1),
            fmt_num(self.base.value),
            self.base.row.label()
        );
        let width = self.params.iter().map(|p| p.param.key.len()).max().unwrap_or(9).max(9);
        out += &format!(
            "  {:width$}  {:>24}  {:>24}  at low / at high\n",
            "parameter", "range", "headline"
        );
        for p in &self.params {
            let range = format!("{} .. {} {}", p.param.low, p.param.high, p.param.unit);
            let head = format!("{} .. {} {u}", fmt_num(p.at_low.value), fmt_num(p.at_high.value));
            out += &format!(
                "  {:width$}  {range:>24}  {head:>24}  {} / {}\n",
                p.param.key,
                p.at_low.row.label(),
                p.at_high.row.label()
            );
        }
        if let Some((slo, shi)) = self.samples_range() {
            out += &format!(
                "  {SAMPLES} joint samples (Latin hypercube): {} .. {} {u}\n",
                fmt_num(slo),
                fmt_num(shi)
            );
        }
        out + &format!("  headline over every run: {} .. {} {u}\n", fmt_num(lo), fmt_num(hi))
    }

    /// The sensitivity as JSON: the row, its published band, the outcome at the experiment's
    /// values, each parameter with its range, source and outcomes, the joint samples, the
    /// headline's range and the robustness line.
    pub fn json(&self) -> Value {
        let params: Vec<Value> = self
            .params
            .iter()
            .map(|p| {
                json!({
                    "key": p.param.key, "unit": p.param.unit, "low": p.param.low,
                    "high": p.param.high, "source": p.param.source,
                    "at_low": p.at_low.json(), "at_high": p.at_high.json(),
                })
            })
            .collect();
        let samples: Vec<Value> =
            self.samples.iter().map(|(v, o)| json!({"values": v, "outcome": o.json()})).collect();
        let (lo, hi) = self.range();
        json!({
            "row": self.row, "unit": self.unit, "band": [self.published.band.0, self.published.band.1],
            "seed": self.seed, "base": self.base.json(), "params": params, "samples": samples,
            "range": [super::report::round(lo), super::report::round(hi)], "robustness": self.robustness(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: FreeParam = FreeParam { key: "cost.a", unit: "ns", low: 0, high: 800, source: "s" };
    const B: FreeParam = FreeParam { key: "x.b", unit: "MiB", low: 100, high: 100, source: "s" };

    #[test]
    fn the_plan_is_each_end_alone_then_a_latin_hypercube() {
        let p = plan(&[A, B]);
        assert_eq!(p.len(), 4 + SAMPLES);
        let one = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            p[..4],
            [one("cost.a", "0"), one("cost.a", "800"), one("x.b", "100"), one("x.b", "100")]
        );
        // Every stratum of A's range holds exactly one sample, at its centre.
        let mut a: Vec<u64> = p[4..].iter().map(|s| s[0].1.parse().unwrap()).collect();
        a.sort_unstable();
        assert_eq!(a, [50, 150, 250, 350, 450, 550, 650, 750]);
        assert!(p[4..].iter().all(|s| s[1] == ("x.b".to_string(), "100".to_string())));
        assert_eq!(plan(&[A, B]), p, "a fixed seed");
        assert!(plan(&[]).is_empty());
    }

    #[test]
    fn a_headline_crossing_its_band_is_a_flip_though_its_verdict_reads_the_same() {
        let o = |value| Outcome { value, row: Verdict::DirectionOnly, verdict: Verdict::Missed };
        let mut s = Sensitivity {
            row: "run time change".into(),
            unit: "%".into(),
            published: Published::point(-0.9).band(-2.7, -0.3),
            seed: 1,
            base: o(-0.08),
            params: vec![ParamRange { param: A, at_low: o(-8.5), at_high: o(-0.03) }],
            samples: vec![(vec![100], o(-1.0))],
        };
        assert_eq!(s.range(), (-8.5, -0.03));
        assert_eq!(s.samples_range(), Some((-1.0, -1.0)));
        let line = s.robustness();
        assert_eq!(
            line,
            "verdict depends on: cost.a (flips at 0 ns: run time change below its band)"
        );
        s.params[0].at_low = o(-0.2);
        s.samples[0].1.row = Verdict::Reproduced;
        let line = s.robustness();
        assert_eq!(line, "verdict depends on: the parameters together (1 of 1 joint samples)");
        s.samples.clear();
        assert_eq!(s.robustness(), "verdict holds across every declared range");
    }

    #[test]
    fn the_summary_puts_the_robustness_line_beside_the_verdict() {
        use crate::reproduce::report::{Provenance, Row, html_page, page_json, summary_table};
        let o = |value| Outcome { value, row: Verdict::Reproduced, verdict: Verdict::Reproduced };
        let published = Published::point(-0.9).band(-2.7, -0.3);
        let mut report = Report {
            experiment: "thp-exec".into(),
            title: "t".into(),
            source: "s".into(),
            seeds: vec![1],
            seeded: false,
            rows: vec![Row::change("run time change", -1.0).published(published.clone())],
            figures: Vec::new(),
            notes: Vec::new(),
            configurations: Vec::new(),
            overrides: Vec::new(),
            sensitivity: None,
        };
        let plain = summary_table(std::slice::from_ref(&report));
        assert!(!plain.contains("robustness"), "{plain}");
        let p = Provenance {
            commit: "c".into(),
            date: "d".into(),
            host: "h".into(),
            runtime_s: 1.0,
            threads: 1,
            scale: "full".into(),
        };
        let line = |j: &Value| {
            j["summary"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["experiment"] == "thp-exec")
                .cloned()
                .unwrap()
        };
        assert!(line(&page_json(&p, std::slice::from_ref(&report))).get("robustness").is_none());
        report.sensitivity = Some(Sensitivity {
            row: "run time change".into(),
            unit: "%".into(),
            published,
            seed: 1,
            base: o(-1.0),
            params: vec![ParamRange { param: A, at_low: o(-1.5), at_high: o(-0.5) }],
            samples: Vec::new(),
        });
        let reports = [report];
        let text = summary_table(&reports);
        assert!(text.contains("robustness: verdict holds across every declared range"), "{text}");
        let j = line(&page_json(&p, &reports));
        assert_eq!(j["robustness"], "verdict holds across every declared range");
        let h = html_page(&p, &reports).unwrap();
        assert!(h.contains("<br><span class=\"robustness\">Robustness: verdict holds"), "{h}");
    }
}
