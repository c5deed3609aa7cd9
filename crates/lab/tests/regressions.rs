//! Model bugs found by swarm testing and fixed: each is a scenario under
//! `scenarios/regressions/` (its header names the seed, the bug and the kernel rule), and each
//! holds in a spread of eras with the whole-system checkers after every simulation event.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod eras;

#[test]
fn fixed_model_bugs_stay_fixed_in_every_era() {
    let runs: Vec<(&str, Vec<(String, String)>)> =
        ["v4.14", "v5.7", "v5.15", "v6.1", "v6.8"].into_iter().map(|k| (k, vec![])).collect();
    for f in eras::scenario_files("regressions", 3) {
        eras::assert_holds_in(&f, &runs);
    }
}

/// `huge_pmd_unshare` leaves another CPU's walk cache pointing at the shared PMD table, which
/// lives on in the other mm, until the unmap's flush: the checker once called that a violation
/// under a random schedule (`explore` reported it on `hugetlb/pmd-share.toml`). A walk cache may
/// point at a live table the page tables no longer reach while a flush can be in flight, never at
/// a freed one.
#[test]
fn pmd_unsharing_survives_random_schedules_checked_every_step() {
    use lab::scenario::run::{Overrides, load, run};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/hugetlb");
    for name in ["pmd-share.toml", "pmd-share-split.toml"] {
        let s = load(&root.join(name).to_string_lossy()).unwrap();
        for seed in 0..4 {
            let o = Overrides {
                seed: Some(seed),
                scheduler: Some("random".parse().unwrap()),
                check_every_step: true,
                ..Overrides::default()
            };
            let report = run(&s, &o, &mut |_| ()).unwrap();
            assert!(
                report.passed(),
                "{name} seed {seed}: {:?} {:?}",
                report.failures,
                report.stopped
            );
        }
    }
}
