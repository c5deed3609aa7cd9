//! DAX hole reads (seed `002`): the DAX scenarios hold in every era they describe, checked after
//! every simulation event (the reproduced experiment is tested in `reproduce.rs`).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::scenario::run::{Overrides, load, run};
use std::path::Path;

/// Each scenario states what every era does: the page-cache era, the zero-page era, v4.11 (with
/// its stale huge zero page after `write()`), and either hole mode on the other's kernel.
#[test]
fn dax_scenarios_hold_in_every_era() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/dax");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 4, "the DAX scenarios are missing: {files:?}");
    let eras: [(&str, &[(&str, &str)]); 5] = [
        ("v6.8", &[]),
        ("v4.14", &[]),
        ("v4.13", &[]),
        ("v4.11", &[]),
        ("v4.13", &[("dax_hole", "zero_page")]),
    ];
    for f in files {
        let s = load(&f.to_string_lossy()).unwrap();
        for (kernel, sets) in eras {
            let o = Overrides {
                kernel: Some(kernel.parse().unwrap()),
                sets: sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                check_every_step: true,
                ..Overrides::default()
            };
            let report = run(&s, &o, &mut |_| ()).unwrap();
            assert!(
                report.passed(),
                "{} on {kernel} {sets:?}: {:?} {:?}",
                f.display(),
                report.failures,
                report.stopped
            );
        }
    }
}
