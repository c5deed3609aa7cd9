//! `scenarios/selftests/mseal.toml` and `scenarios/syscalls/mseal-enosys.toml`: `mseal(2)`
//! (`mm/mseal.c`, `crates/mm/src/mseal.rs`) on both sides of its arrival (v6.10) and of the
//! v6.12 rework that checks a sealed VMA VMA by VMA instead of the whole range first, with the
//! whole-system checkers after every simulation event. The second era agrees with this
//! machine's kernel (`mmsim diff scenarios/selftests/mseal.toml`: 63 rows on 6.18).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod eras;

use std::path::Path;

fn runs<'a>(kernels: &[&'a str]) -> Vec<eras::Run<'a>> {
    kernels.iter().map(|k| (*k, vec![])).collect()
}

#[test]
fn mseal_holds_on_both_sides_of_the_per_vma_rework() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sealed = runs(&["v6.10", "v6.11", "v6.12", "v6.14", "v6.18"]);
    eras::assert_holds_in(&root.join("scenarios/selftests/mseal.toml"), &sealed);
    let enosys = runs(&["v4.0", "v6.9", "v6.10", "v6.18"]);
    eras::assert_holds_in(&root.join("scenarios/syscalls/mseal-enosys.toml"), &enosys);
}
