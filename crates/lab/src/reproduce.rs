//! `mmsim reproduce`: the published measurements of the seed changes, re-derived from the model.
//!
//! Each experiment module configures machines and workloads the way the published measurement
//! was taken (scaled down to what a laptop simulates in seconds), runs the kernel before and
//! after the change, and returns rows of "published vs simulated". Published figures are data
//! here, never inputs: no cost constant is fitted to them (DESIGN.md, "Costs"), so a simulated
//! figure may miss the published one, and the report says by how much.
//!
//! Every experiment reports in one shape (`Report`): the JSON is
//! `{"experiment", "seed", "rows": [{"name", "unit", "published", "simulated"}]}`, the text is a
//! table with the direction and the ratio, and the HTML page adds the experiment's figures.

mod cow_reuse;
mod dax_zero_page;
mod fadv_noreuse;
pub mod report;

pub use report::{Figure, Report, Row, Series};

/// How much to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The sizes the report is made with.
    Full,
    /// Small sizes for tests: the same mechanisms, coarser figures.
    Quick,
}

/// Reports progress of a long experiment (a progress bar in the CLI).
pub trait Progress {
    /// A new phase with `total` units of work.
    fn phase(&mut self, name: &str, total: u64);
    /// `n` more units done.
    fn advance(&mut self, n: u64);
}

/// Ignores progress.
#[derive(Debug)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn phase(&mut self, _: &str, _: u64) {}
    fn advance(&mut self, _: u64) {}
}

/// A reproducible experiment.
#[derive(Clone, Copy)]
pub struct Experiment {
    pub name: &'static str,
    /// The seed change it reproduces (the title of the kernel commit or patch series).
    pub source: &'static str,
    pub title: &'static str,
    pub run: fn(seed: u64, scale: Scale, progress: &mut dyn Progress) -> Result<Report, String>,
}

impl Experiment {
    /// This experiment's report for run seed `seed`.
    pub fn report(
        &self,
        seed: u64,
        rows: Vec<Row>,
        figures: Vec<Figure>,
        notes: Vec<String>,
    ) -> Report {
        Report {
            experiment: self.name.into(),
            title: self.title.into(),
            source: self.source.into(),
            seed,
            rows,
            figures,
            notes,
        }
    }
}

impl std::fmt::Debug for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment").field("name", &self.name).finish_non_exhaustive()
    }
}

/// A change in percent from `before` to `after`.
fn gain(before: f64, after: f64) -> f64 {
    (after / before - 1.0) * 100.0
}

/// The vmstat counters' increase from `before` to `after` (gauges that fell read 0).
fn vmstat_delta(before: &mm::vmstat::VmStats, after: &mm::vmstat::VmStats) -> mm::vmstat::VmStats {
    use simcore::CounterKey;
    let mut d = mm::vmstat::VmStats::new();
    for &k in mm::vmstat::VmStat::ALL {
        d.add(k, after.get(k).saturating_sub(before.get(k)));
    }
    d
}

/// Every experiment, in report order.
pub const EXPERIMENTS: &[Experiment] =
    &[cow_reuse::EXPERIMENT, fadv_noreuse::EXPERIMENT, dax_zero_page::EXPERIMENT];

/// The experiment called `name`.
pub fn find(name: &str) -> Result<&'static Experiment, String> {
    EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        format!("unknown experiment `{name}`: expected one of {}", names.join(", "))
    })
}
