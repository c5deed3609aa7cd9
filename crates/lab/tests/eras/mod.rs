//! The scenario files of one folder, each run on a list of kernels and switch overrides with
//! the whole-system checkers after every simulation event: what the THP and DAX tests share. A
//! long list is cut into shards, each its own test, so that the harness runs them on every CPU
//! and none runs for minutes alone.
//!
//! A sharded list runs every pair once without the per-event checkers (the scenario's own
//! checkers after each of its steps and every expectation still apply), and then with them
//! only the first pair of each trajectory: kernels that give a file the same event history
//! (the engine's digest of every event's time, task and blocking point), the same final
//! `/proc/vmstat` and the same COW rule (the one switch the checkers read) are taken to visit
//! the same states. That is an approximation: an era that changed state without changing any
//! event, counter or checker rule would be checked in its first kernel only. Across the THP
//! eras, 29 files on 24 runs (696 pairs) make 160 trajectories, and the per-event checkers are
//! most of the cost (the THP test took 618 s on two idle cores checking all pairs, 110 s so).

use lab::scenario::run::{Overrides, load, run};
use std::path::{Path, PathBuf};

/// The scenario files of `scenarios/<dir>`, sorted; at least `min` of them.
#[allow(dead_code)] // a test binary may name its files instead of a folder
pub(crate) fn scenario_files(dir: &str, min: usize) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= min, "the scenarios of {} are missing: {files:?}", dir.display());
    files
}

/// A run: a kernel and switch overrides.
pub(crate) type Run<'a> = (&'a str, Vec<(String, String)>);

/// Asserts that every `(file, run)` pair whose position in the list of all pairs (files outer,
/// runs inner) is `shard` modulo `of` holds, and checks every step of the trajectories dealt to
/// this shard (the module's note).
#[allow(dead_code)] // not every test binary that includes this module shards
pub(crate) fn assert_shard_holds(files: &[PathBuf], runs: &[Run<'_>], shard: usize, of: usize) {
    let plan = trajectories(files, runs);
    for (pair, unchecked) in plan.iter().enumerate().filter(|(i, _)| i % of == shard) {
        if let Err(why) = unchecked {
            panic!("pair {pair}: {why}");
        }
    }
    let firsts = plan.iter().enumerate().filter(|(_, p)| p.as_ref().is_ok_and(|first| *first));
    for (_, (pair, _)) in firsts.enumerate().filter(|(i, _)| i % of == shard) {
        let (file, run) = (&files[pair / runs.len()], &runs[pair % runs.len()]);
        assert_holds_in(file, std::slice::from_ref(run));
    }
}

/// Per pair (files outer, runs inner), its run without the per-event checkers: `Ok(true)` for
/// the first pair of a file with its trajectory, `Ok(false)` for a repeat, `Err` naming what
/// failed. Computed once per test binary, by whichever shard asks first.
fn trajectories(files: &[PathBuf], runs: &[Run<'_>]) -> &'static [Result<bool, String>] {
    static PLAN: std::sync::OnceLock<Vec<Result<bool, String>>> = std::sync::OnceLock::new();
    let plan = PLAN.get_or_init(|| {
        let mut plan = Vec::new();
        for file in files {
            let s = load(&file.to_string_lossy()).unwrap();
            let mut seen = Vec::new();
            for (kernel, sets) in runs {
                let report = run(&s, &overrides(kernel, sets, false), &mut |_| ()).unwrap();
                if !report.passed() {
                    let why = format!("{:?} {:?}", report.failures, report.stopped);
                    plan.push(Err(format!("{} on {kernel} {sets:?}: {why}", file.display())));
                    continue;
                }
                let rule = report.switches.iter().find(|(k, _)| k == "cow_reuse").cloned();
                let key = (report.digest, report.vmstat, rule);
                plan.push(Ok(!seen.contains(&key)));
                seen.push(key);
            }
        }
        plan
    });
    assert_eq!(plan.len(), files.len() * runs.len(), "one plan per test binary");
    plan
}

/// A run on `kernel` with `sets`, checked after every event when `every_step`.
fn overrides(kernel: &str, sets: &[(String, String)], every_step: bool) -> Overrides {
    Overrides {
        kernel: Some(kernel.parse().unwrap()),
        sets: sets.to_vec(),
        check_every_step: every_step,
        // A model bug that spins (swarm seed 1009) fails here rather than hanging the suite.
        max_events: Some(5_000_000),
        ..Overrides::default()
    }
}

/// Asserts that `file` holds on each `(kernel, switch overrides)` run, checked every step.
pub(crate) fn assert_holds_in(file: &Path, runs: &[Run<'_>]) {
    let s = load(&file.to_string_lossy()).unwrap();
    for (kernel, sets) in runs {
        let report = run(&s, &overrides(kernel, sets, true), &mut |_| ()).unwrap();
        assert!(
            report.passed(),
            "{} on {kernel} {sets:?}: {:?} {:?}",
            file.display(),
            report.failures,
            report.stopped
        );
    }
}
