//! The scenario files of one folder, each run on a list of kernels and switch overrides with
//! the whole-system checkers after every simulation event: what the THP and DAX tests share. A
//! long list is cut into shards, each its own test, so that the harness runs them on every CPU
//! and none runs for minutes alone.

use lab::scenario::run::{Overrides, load, run};
use std::path::{Path, PathBuf};

/// The scenario files of `scenarios/<dir>`, sorted; at least `min` of them.
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
/// runs inner) is `shard` modulo `of` holds, checked every step.
#[allow(dead_code)] // not every test binary that includes this module shards
pub(crate) fn assert_shard_holds(files: &[PathBuf], runs: &[Run<'_>], shard: usize, of: usize) {
    let pairs = files.iter().flat_map(|f| runs.iter().map(move |r| (f, r)));
    for (_, (file, run)) in pairs.enumerate().filter(|(i, _)| i % of == shard) {
        assert_holds_in(file, std::slice::from_ref(run));
    }
}

/// Asserts that `file` holds on each `(kernel, switch overrides)` run, checked every step.
pub(crate) fn assert_holds_in(file: &Path, runs: &[Run<'_>]) {
    let s = load(&file.to_string_lossy()).unwrap();
    for (kernel, sets) in runs {
        let o = Overrides {
            kernel: Some(kernel.parse().unwrap()),
            sets: sets.clone(),
            check_every_step: true,
            // A model bug that spins (swarm seed 1009) fails here rather than hanging the suite.
            max_events: Some(5_000_000),
            ..Overrides::default()
        };
        let report = run(&s, &o, &mut |_| ()).unwrap();
        assert!(
            report.passed(),
            "{} on {kernel} {sets:?}: {:?} {:?}",
            file.display(),
            report.failures,
            report.stopped
        );
    }
}
