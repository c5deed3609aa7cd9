//! `mmsim reproduce`: the published measurements of the seed changes, re-derived from the model.
//!
//! Each experiment module configures machines and workloads the way the published measurement
//! was taken (scaled down to what a laptop simulates in seconds), runs the kernel before and
//! after the change, and returns rows of "published vs simulated". Published figures are data
//! here, never inputs: no cost constant is fitted to them (DESIGN.md, "Costs"). Each is declared
//! with the band a faithful model should land in and where that band comes from (`Published`),
//! and the report's verdict says whether the model did, so a simulated figure may miss the
//! published one and the report says by how much and why.
//!
//! An experiment runs one seed at a time ([`Experiment::run`]); [`run_seeds`] runs several seeds
//! of several experiments on host threads, each seed an independent, deterministic simulation,
//! and merges each experiment's seeds into one report (mean, spread and every value).
//!
//! Every seed change has an experiment ([`SEED_CHANGES`]); one without would be reported as
//! "not yet modelled".

mod cow_reuse;
mod dax_zero_page;
mod fadv_noreuse;
mod hugetlb_locking;
pub mod report;
mod thp_exec;

pub use report::{Direction, Figure, Published, Report, Row, Series, Verdict, published_of};

use mm::{Machine, MachineConfig};
use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How much to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The sizes the report is made with.
    Full,
    /// Small sizes for tests: the same mechanisms, coarser figures.
    Quick,
}

/// Reports progress of a long experiment (a progress bar or plain lines in the CLI).
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

/// One run of an experiment: its seed, its sizes, the `--set` settings that replace its own,
/// and the configurations of the machines it built (for the report).
#[derive(Debug)]
pub struct Setup {
    pub seed: u64,
    pub scale: Scale,
    /// `KEY=VALUE` settings as `mmsim run --set` takes them: a switch, `cost.NAME`, a tunable.
    pub overrides: Vec<(String, String)>,
    configurations: RefCell<Vec<String>>,
}

impl Setup {
    pub fn new(seed: u64, scale: Scale, overrides: &[(String, String)]) -> Setup {
        Setup { seed, scale, overrides: overrides.to_vec(), configurations: RefCell::default() }
    }

    /// The machine of `config` with this run's seed and overrides; its kernel and the switches
    /// that differ from that kernel's own are recorded for the report.
    pub fn machine(&self, config: MachineConfig) -> Result<Machine, String> {
        Machine::new(self.config(config)?)
    }

    /// `config` with this run's seed and overrides, recorded for the report as [`Self::machine`]
    /// records it (for runs that build their machine themselves, such as a trace replay).
    pub fn config(&self, mut config: MachineConfig) -> Result<MachineConfig, String> {
        config.seed = self.seed;
        crate::scenario::run::apply_sets(&mut config, &self.overrides)?;
        config.switches.check_implemented(config.kernel)?;
        let own = mm::Switches::for_kernel(config.kernel);
        let changed: Vec<String> = config
            .switches
            .iter()
            .into_iter()
            .zip(own.iter())
            .filter(|(set, own)| set != own)
            .map(|((k, v), _)| format!(" {k}={v}"))
            .collect();
        let line = format!("{}{}", config.kernel, changed.concat());
        let mut seen = self.configurations.borrow_mut();
        if !seen.contains(&line) {
            seen.push(line);
        }
        drop(seen);
        Ok(config)
    }
}

/// A reproducible experiment.
#[derive(Clone, Copy)]
pub struct Experiment {
    pub name: &'static str,
    /// The seed change it reproduces (the title of the kernel commit or patch series).
    pub source: &'static str,
    pub title: &'static str,
    /// Its work per seed relative to the others', so that the longest start first.
    pub work: u32,
    /// Whether its workload draws on the seed. One that does not (a recorded trace, a workload
    /// with no random choice) gives the same report under every seed, so it runs once, at the
    /// first seed asked for, and its report says so; a test checks two seeds agree.
    pub seeded: bool,
    pub measure: fn(setup: &Setup, progress: &mut dyn Progress) -> Result<Report, String>,
}

impl Experiment {
    /// One seed with the experiment's own settings.
    pub fn run(
        &self,
        seed: u64,
        scale: Scale,
        progress: &mut dyn Progress,
    ) -> Result<Report, String> {
        (self.measure)(&Setup::new(seed, scale, &[]), progress)
    }

    /// This experiment's report of one run.
    pub fn report(
        &self,
        setup: &Setup,
        rows: Vec<Row>,
        figures: Vec<Figure>,
        notes: Vec<String>,
    ) -> Report {
        Report {
            experiment: self.name.into(),
            title: self.title.into(),
            source: format!("\"{}\" ({})", self.source, citation_of(self.name)),
            seeds: vec![setup.seed],
            seeded: self.seeded,
            rows,
            figures,
            notes,
            configurations: setup.configurations.take(),
            overrides: setup.overrides.clone(),
        }
    }
}

impl std::fmt::Debug for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Runs every seed of every experiment on `threads` host threads (the longest first), with
/// `progress(experiment, seed)` reporting each; an experiment that does not draw on the seed
/// runs only the first. Returns one merged report per experiment, in the order given. The
/// result does not depend on the number of threads.
pub fn run_seeds(
    experiments: &[&Experiment],
    seeds: &[u64],
    scale: Scale,
    overrides: &[(String, String)],
    threads: usize,
    progress: &(dyn Fn(&Experiment, u64) -> Box<dyn Progress> + Sync),
) -> Result<Vec<Report>, String> {
    let runs = |e: usize| if experiments[e].seeded { seeds.len() } else { seeds.len().min(1) };
    let mut jobs: Vec<(usize, usize)> =
        (0..experiments.len()).flat_map(|e| (0..runs(e)).map(move |s| (e, s))).collect();
    jobs.sort_by_key(|&(e, _)| std::cmp::Reverse(experiments[e].work));
    let next = AtomicUsize::new(0);
    let slots = experiments.len() * seeds.len();
    let done: Mutex<Vec<Option<Result<Report, String>>>> = Mutex::new(vec![None; slots]);
    let worker = || {
        while let Some(&(e, s)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
            let (experiment, seed) = (experiments[e], seeds[s]);
            let setup = Setup::new(seed, scale, overrides);
            let report = (experiment.measure)(&setup, &mut *progress(experiment, seed))
                .map_err(|err| format!("{} seed {seed}: {err}", experiment.name));
            done.lock().expect("no worker panicked")[e * seeds.len() + s] = Some(report);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(worker);
        }
        worker();
    });
    let mut done = done.into_inner().expect("no worker panicked").into_iter();
    (0..experiments.len())
        .map(|e| {
            let slots: Vec<_> = done.by_ref().take(seeds.len()).collect();
            let each: Vec<Report> = (slots.into_iter().take(runs(e)))
                .map(|r| r.expect("every job ran"))
                .collect::<Result<_, _>>()?;
            Report::merge(each)
        })
        .collect()
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
pub const EXPERIMENTS: &[Experiment] = &[
    cow_reuse::EXPERIMENT,
    fadv_noreuse::EXPERIMENT,
    dax_zero_page::EXPERIMENT,
    hugetlb_locking::EXPERIMENT,
    thp_exec::EXPERIMENT,
];

/// The experiment called `name`.
pub fn find(name: &str) -> Result<&'static Experiment, String> {
    EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        format!("unknown experiment `{name}`: expected one of {}", names.join(", "))
    })
}

/// A seed change: one of the five kernel changes the project models.
#[derive(Clone, Copy, Debug)]
pub struct SeedChange {
    /// Where a reader finds it: the upstream commit and release (or that it was not merged) and
    /// its posting in the mailing-list archive.
    pub citation: &'static str,
    /// What it changes, in a few words.
    pub change: &'static str,
    /// The experiment that reproduces its published figures, if one does yet.
    pub experiment: Option<&'static str>,
}

/// The five seed changes, in the seed set's order.
pub const SEED_CHANGES: [SeedChange; 5] = [
    SeedChange {
        citation: "commit eb6ecbed0aa2, v5.13; https://lkml.kernel.org/r/20210406000930.3455850-1-cfijalkovich@google.com",
        change: "file THPs for executables",
        experiment: Some("thp-exec"),
    },
    SeedChange {
        citation: "commit 188a39725ad7 and its series, v6.1; cover letter https://lkml.kernel.org/r/20220824175757.20590-1-mike.kravetz@oracle.com",
        change: "hugetlb PMD-sharing synchronisation",
        experiment: Some("hugetlb-locking"),
    },
    SeedChange {
        citation: "v4.14 (patch 3/5 of the series); https://lkml.kernel.org/r/20170724170616.25810-4-ross.zwisler@linux.intel.com",
        change: "DAX hole reads map the zero page",
        experiment: Some("dax-zero-page"),
    },
    SeedChange {
        citation: "commit 17e810229cb3, v6.3; https://lkml.kernel.org/r/20221230215252.2628425-2-yuzhao@google.com",
        change: "POSIX_FADV_NOREUSE under MGLRU",
        experiment: Some("fadv-noreuse"),
    },
    SeedChange {
        citation: "posted January 2021, not merged (v5.19's PageAnonExclusive took its place); https://lkml.kernel.org/r/20210107200402.31095-1-aarcange@redhat.com",
        change: "COW page reuse by mapcount",
        experiment: Some("cow-reuse"),
    },
];

/// The citation of the seed change experiment `name` reproduces.
pub fn citation_of(name: &str) -> &'static str {
    SEED_CHANGES.iter().find(|s| s.experiment == Some(name)).map_or("", |s| s.citation)
}
