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
pub mod sensitivity;
mod thp_exec;

pub use report::{Direction, Figure, Published, Report, Row, Series, Verdict, published_of};
pub use sensitivity::{FreeParam, Sensitivity};

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
    /// A point of a sensitivity run, which reads only the headline rows and the verdict: the
    /// experiment may skip runs that only its diagnostic rows need (its own sweeps).
    pub headline_only: bool,
    configurations: RefCell<Vec<String>>,
}

impl Setup {
    pub fn new(seed: u64, scale: Scale, overrides: &[(String, String)]) -> Setup {
        Setup {
            seed,
            scale,
            overrides: overrides.to_vec(),
            headline_only: false,
            configurations: RefCell::default(),
        }
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
        let machine_sets: Vec<(String, String)> =
            self.overrides.iter().filter(|(k, _)| knob_owner(k).is_none()).cloned().collect();
        crate::scenario::run::apply_sets(&mut config, &machine_sets)?;
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

    /// The value of the experiment's own parameter `p`: `own` unless a `--set` replaces it.
    pub fn knob(&self, p: &FreeParam, own: u64) -> Result<u64, String> {
        match self.overrides.iter().rfind(|(k, _)| k == p.key) {
            Some((k, v)) => v.parse().map_err(|_| format!("--set {k}={v}: expected a number")),
            None => Ok(own),
        }
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
    /// The headline row a sensitivity run follows (`sensitivity`), a published row.
    pub headline: &'static str,
    /// The parameters that headline rests on that were not measured on the seed's machine,
    /// each with its plausible range and where that comes from.
    pub params: &'static [FreeParam],
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
            sensitivity: None,
        }
    }
}

impl std::fmt::Debug for Experiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment").field("name", &self.name).finish_non_exhaustive()
    }
}

/// One run of an experiment: a seed, or a point of its sensitivity plan (at the first seed).
#[derive(Clone, Copy, Debug)]
enum Job {
    Seed(u64),
    Point(usize),
}

/// Runs every seed of every experiment on `threads` host threads (the longest first), and with
/// `sensitivity` every point of each experiment's sensitivity plan at the first seed
/// ([`sensitivity::plan`]), with `progress(experiment, what)` reporting each run (`what`: "seed
/// 3", "sensitivity cost.wakeup_latency=2000"); an experiment that does not draw on the seed
/// runs only the first seed. Returns one merged report per experiment, in the order given, with
/// its sensitivity when asked. The result does not depend on the number of threads.
pub fn run_seeds(
    experiments: &[&Experiment],
    seeds: &[u64],
    scale: Scale,
    overrides: &[(String, String)],
    sensitivity: bool,
    threads: usize,
    progress: &(dyn Fn(&Experiment, &str) -> Box<dyn Progress> + Sync),
) -> Result<Vec<Report>, String> {
    check_knobs(overrides)?;
    let first = *seeds.first().ok_or("no seed to run")?;
    let plans: Vec<Vec<Vec<(String, String)>>> = experiments
        .iter()
        .map(|e| if sensitivity { sensitivity::plan(e.params) } else { Vec::new() })
        .collect();
    // Each experiment's jobs: its seeds, then its points.
    let jobs: Vec<Vec<Job>> = experiments
        .iter()
        .zip(&plans)
        .map(|(e, plan)| {
            let seeds = if e.seeded { seeds } else { &seeds[..1] };
            let points = (0..plan.len()).map(Job::Point);
            seeds.iter().map(|&s| Job::Seed(s)).chain(points).collect()
        })
        .collect();
    let flat: Vec<(usize, Job)> =
        jobs.iter().enumerate().flat_map(|(e, j)| j.iter().map(move |&job| (e, job))).collect();
    let mut done = run_jobs(
        &flat,
        threads,
        &|&(e, job)| {
            let experiment = experiments[e];
            let (seed, what, sets) = match job {
                Job::Seed(s) => (s, format!("seed {s}"), Vec::new()),
                Job::Point(k) => {
                    let sets = &plans[e][k];
                    let text: Vec<String> = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    (first, format!("sensitivity {}", text.join(" ")), sets.clone())
                }
            };
            let setup = Setup {
                headline_only: matches!(job, Job::Point(_)),
                ..Setup::new(seed, scale, &[overrides, &sets].concat())
            };
            (experiment.measure)(&setup, &mut *progress(experiment, &what))
                .map_err(|err| format!("{} {what}: {err}", experiment.name))
        },
        |&(e, _)| experiments[e].work,
    )
    .into_iter();
    let mut reports = Vec::new();
    for ((experiment, each), plan) in experiments.iter().zip(&jobs).zip(&plans) {
        let mine: Vec<Report> = done.by_ref().take(each.len()).collect::<Result<_, _>>()?;
        let (by_seed, points) = mine.split_at(each.len() - plan.len());
        let mut report = Report::merge(by_seed.to_vec())?;
        if sensitivity {
            let s = Sensitivity::new(experiment.headline, experiment.params, &by_seed[0], points);
            report.sensitivity = Some(s?);
        }
        reports.push(report);
    }
    Ok(reports)
}

/// `run(job)` for every job on `threads` host threads, the jobs of the largest `work` first;
/// the results in the jobs' order.
fn run_jobs<J: Sync, T: Send>(
    jobs: &[J],
    threads: usize,
    run: &(dyn Fn(&J) -> T + Sync),
    work: impl Fn(&J) -> u32,
) -> Vec<T> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(work(&jobs[i])));
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<T>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let worker = || {
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let result = run(&jobs[i]);
            done.lock().expect("no worker panicked")[i] = Some(result);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(worker);
        }
        worker();
    });
    let done = done.into_inner().expect("no worker panicked");
    done.into_iter().map(|r| r.expect("every job ran")).collect()
}

/// Checks that every `--set EXPERIMENT.NAME` names a parameter that experiment declares.
fn check_knobs(overrides: &[(String, String)]) -> Result<(), String> {
    for (key, value) in overrides {
        let Some(e) = knob_owner(key) else { continue };
        let p = e.params.iter().find(|p| p.key == key);
        let p = p.ok_or_else(|| {
            let own: Vec<&str> =
                e.params.iter().map(|p| p.key).filter(|k| knob_owner(k).is_some()).collect();
            format!(
                "--set {key}={value}: {} declares no parameter `{key}` (its own: {})",
                e.name,
                if own.is_empty() { "none".into() } else { own.join(", ") }
            )
        })?;
        value
            .parse::<u64>()
            .map_err(|_| format!("--set {key}={value}: expected a number of {}", p.unit))?;
    }
    Ok(())
}

/// The experiment whose own parameter `key` is (`fadv-noreuse.frame_cpu_ns`), if it is one.
fn knob_owner(key: &str) -> Option<&'static Experiment> {
    let (name, _) = key.split_once('.')?;
    EXPERIMENTS.iter().find(|e| e.name == name)
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
