//! DAX hole reads (seed `002`): the DAX scenarios hold in every era they describe, checked after
//! every simulation event (the reproduced experiment is tested in `reproduce.rs`).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod eras;

/// Each scenario states what every era does: the page-cache era, the zero-page era, v4.11 (with
/// its stale huge zero page after `write()`), and either hole mode on the other's kernel.
#[test]
fn dax_scenarios_hold_in_every_era() {
    let runs: [(&str, Vec<(String, String)>); 5] = [
        ("v6.8", vec![]),
        ("v4.14", vec![]),
        ("v4.13", vec![]),
        ("v4.11", vec![]),
        ("v4.13", vec![("dax_hole".into(), "zero_page".into())]),
    ];
    for f in eras::scenario_files("dax", 4) {
        eras::assert_holds_in(&f, &runs);
    }
}
