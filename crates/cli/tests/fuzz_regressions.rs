//! The fuzz targets (`mmsim_cli::fuzz`) on their seed corpus and on every input the fuzzer found
//! that once crashed or hung (`tests/fuzz/TARGET/`), replayed as ordinary tests so that CI needs
//! no fuzzer: none may panic. A new finding is added by copying it from
//! `target/fuzz/out/TARGET/default/crashes/` (or `hangs/`) into `tests/fuzz/TARGET/` with a
//! name that says what it found, then fixed at its root.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The regression inputs of `target`, as `(name, bytes)`.
fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut out: Vec<(String, Vec<u8>)> = entries
        .map(|e| e.unwrap().path())
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_target_survives_its_seeds_and_regressions() {
    let mut ran = 0;
    for (target, f) in mmsim_cli::fuzz::TARGETS {
        let seeds = mmsim_cli::fuzz::seeds(target, root()).unwrap();
        assert!(!seeds.is_empty(), "target {target} has no seeds");
        for (name, bytes) in seeds.iter().chain(&regressions(target)) {
            let outcome = std::panic::catch_unwind(|| f(bytes));
            assert!(outcome.is_ok(), "fuzz target {target} panicked on {name}");
            ran += 1;
        }
    }
    assert!(ran >= 6, "{ran} inputs");
}
