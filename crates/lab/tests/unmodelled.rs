//! hugetlb is modelled on every kernel mmsim runs, v4.0 to v6.19 (before v5.7 with the
//! `revert` scheme, later changes per `hugetlb.rs`'s eras): the `hugetlb_sync` switch takes its
//! three values, and a hugetlb use (a hugetlbfs file, a `MAP_HUGETLB` mapping) runs anywhere.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::scenario::parse::parse_scenario;
use lab::scenario::run::{Overrides, run};

const SCENARIO: &str =
    "[machine]\nprofile = \"tiny\"\nkernel = \"v6.1\"\n\n[[process]]\nname = \"p\"\n";

#[test]
fn hugetlb_sync_overrides_are_accepted() {
    let with_switch = SCENARIO
        .replace("[[process]]", "[machine.switches]\nhugetlb_sync = \"revert\"\n\n[[process]]");
    let s = parse_scenario("s.toml", &with_switch).unwrap();
    let report = run(&s, &Overrides::default(), &mut |_| ()).unwrap();
    assert!(report.switches.iter().any(|(k, v)| k == "hugetlb_sync" && v == "revert"));
    let s = parse_scenario("s.toml", SCENARIO).unwrap();
    let o =
        Overrides { sets: vec![("hugetlb_sync".into(), "magic".into())], ..Overrides::default() };
    let err = run(&s, &o, &mut |_| ()).unwrap_err();
    assert!(err.message.contains("has no value `magic`"), "{}", err.message);
}

/// A `MAP_HUGETLB` mapping and a hugetlbfs file run on the oldest, the seed's and the newest
/// kernels.
#[test]
fn hugetlb_runs_on_every_kernel() {
    let mmap = SCENARIO.to_string()
        + "\n[[step]]\nprocess = \"p\"\nops = [\n  { op = \"mmap\", len = \"2MiB\", prot = \"rw\", flags = \"private|anonymous|hugetlb\", expect = { errno = \"ENOMEM\" } },\n]\n";
    let file = SCENARIO.replace(
        "[[process]]",
        "[[file]]\npath = \"/huge\"\nfs = \"hugetlbfs\"\nsize = \"2MiB\"\n\n[[process]]",
    );
    for text in [&mmap, &file] {
        let s = parse_scenario("s.toml", text).unwrap();
        for kernel in ["v4.0", "v5.6", "v6.1", "v6.5", "v6.8", "v6.14", "v6.19"] {
            let o = Overrides { kernel: Some(kernel.parse().unwrap()), ..Overrides::default() };
            assert!(run(&s, &o, &mut |_| ()).unwrap().passed(), "{kernel}");
        }
    }
}
