//! Every race scenario in `scenarios/races/` finds what its `[[explore]]` declarations say:
//! a violation in the kernel eras where the race exists, none where it was fixed (or where there
//! is no race: the guards against false positives).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::scenario::explore::check_declared;
use lab::scenario::run::load;
use std::path::Path;

#[test]
fn race_scenarios_find_what_they_declare() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/races");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "race scenarios are missing");
    let mut failures = Vec::new();
    for f in files {
        let s = load(&f.to_string_lossy()).unwrap();
        assert!(!s.explore.is_empty(), "{} declares no [[explore]]", f.display());
        for r in check_declared(&s).unwrap() {
            if !r.holds {
                failures.push(format!("{}:{}: {}", f.display(), r.line, r.summary));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
