//! `scenarios/mlock/`: mlock, mlock2, munlock, mlockall, munlockall and msync (`mm/mlock.c`,
//! `mm/msync.c`), each file holding on kernels across the eras of `mlock2` (v4.4) and the
//! v5.18 munlock rework, under the classic and the multi-gen LRU, with the whole-system checkers
//! after every simulation event.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod eras;

#[test]
fn mlock_scenarios_hold_in_every_era() {
    let mglru = vec![("lru".to_string(), "mglru".to_string())];
    let mut runs: Vec<(&str, Vec<(String, String)>)> =
        ["v4.0", "v4.4", "v4.14", "v5.10", "v5.18", "v6.1", "v6.8", "v6.19"]
            .into_iter()
            .map(|k| (k, vec![]))
            .collect();
    runs.push(("v6.8", mglru));
    for f in eras::scenario_files("mlock", 3) {
        eras::assert_holds_in(&f, &runs);
    }
}
