//! Every race scenario in `scenarios/races/` finds what its `[[explore]]` declarations say:
//! a violation in the kernel eras where the race exists, none where it was fixed (or where there
//! is no race: the guards against false positives).
//!
//! The files are independent explorations, so they are shared among the host's CPUs (each
//! exploration stays single-threaded and deterministic); failures are reported in file order.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::scenario::explore::check_declared;
use lab::scenario::run::load;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The declarations of one race file that do not hold.
fn failures_of(f: &Path) -> Vec<String> {
    let s = load(&f.to_string_lossy()).unwrap();
    assert!(!s.explore.is_empty(), "{} declares no [[explore]]", f.display());
    check_declared(&s)
        .unwrap()
        .into_iter()
        .filter(|r| !r.holds)
        .map(|r| format!("{}:{}: {}", f.display(), r.line, r.summary))
        .collect()
}

#[test]
fn race_scenarios_find_what_they_declare() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/races");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "race scenarios are missing");
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Vec<String>)>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let failed = failures_of(f);
                    results.lock().unwrap().push((i, failed));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort();
    let failures: Vec<String> = results.into_iter().flat_map(|(_, f)| f).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
