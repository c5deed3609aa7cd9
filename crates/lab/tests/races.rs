//! Every race scenario in `scenarios/races/` finds what its `[[explore]]` declarations say:
//! a violation in the kernel eras where the race exists, none where it was fixed (or where there
//! is no race: the guards against false positives).
//!
//! Each declaration is an independent exploration, so the declarations of all files are dealt to
//! [`SHARDS`] tests, which the harness runs on the host's CPUs (each exploration stays
//! single-threaded and deterministic) and none of which runs for minutes alone; failures are
//! reported in file order.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

#[macro_use]
mod shards;

use lab::scenario::explore::check_declared;
use lab::scenario::model::Scenario;
use lab::scenario::run::load;
use std::path::{Path, PathBuf};

const SHARDS: usize = 8;

/// Every race file, loaded, in name order.
fn race_files() -> Vec<(PathBuf, Scenario)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/races");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "race scenarios are missing");
    files
        .into_iter()
        .map(|f| {
            let s = load(&f.to_string_lossy()).unwrap();
            assert!(!s.explore.is_empty(), "{} declares no [[explore]]", f.display());
            (f, s)
        })
        .collect()
}

/// Checks the declarations whose position among all files' declarations is `shard` modulo
/// [`SHARDS`].
fn race_shard_finds_what_it_declares(shard: usize) {
    let files = race_files();
    let declarations = files.iter().flat_map(|(f, s)| s.explore.iter().map(move |d| (f, s, d)));
    let mut failures = Vec::new();
    for (_, (f, s, d)) in declarations.enumerate().filter(|(i, _)| i % SHARDS == shard) {
        let one = Scenario { explore: vec![d.clone()], ..s.clone() };
        let results = check_declared(&one).unwrap();
        let failed = results.into_iter().filter(|r| !r.holds);
        failures.extend(failed.map(|r| format!("{}:{}: {}", f.display(), r.line, r.summary)));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

shard_tests!(
    race_shard_finds_what_it_declares,
    SHARDS;
    race_scenarios_find_what_they_declare_0 = 0,
    race_scenarios_find_what_they_declare_1 = 1,
    race_scenarios_find_what_they_declare_2 = 2,
    race_scenarios_find_what_they_declare_3 = 3,
    race_scenarios_find_what_they_declare_4 = 4,
    race_scenarios_find_what_they_declare_5 = 5,
    race_scenarios_find_what_they_declare_6 = 6,
    race_scenarios_find_what_they_declare_7 = 7,
);

/// A result declared `[[time_order]]` is checked in time order only: explored, the schedules
/// that reorder a sleep against the work it waits for are no violation. Without the
/// declarations the same exploration reports one, so the declarations are what it rests on.
#[test]
fn time_ordered_results_are_left_to_the_time_ordered_run() {
    use lab::scenario::model::ExploreExpect;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    for name in ["regressions/read-vs-truncate.toml", "lang/repeat.toml"] {
        let s = load(&dir.join(name).to_string_lossy()).unwrap();
        assert!(!s.time_order.is_empty(), "{name} declares no [[time_order]]");
        let d = ExploreExpect {
            line: 0,
            kernel: None,
            sets: Vec::new(),
            strategy: "random".into(),
            seed: 0,
            budget: 20,
            violation: false,
            reach: None,
            never: None,
            when: Default::default(),
        };
        let explored = Scenario { explore: vec![d.clone()], ..s.clone() };
        let r = check_declared(&explored).unwrap();
        assert!(r[0].holds, "{name}: {}", r[0].summary);
        let undeclared = Scenario { time_order: Vec::new(), ..explored };
        let r = check_declared(&undeclared).unwrap();
        assert!(!r[0].holds, "{name} without its declarations: {}", r[0].summary);
    }
}
