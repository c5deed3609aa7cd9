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
