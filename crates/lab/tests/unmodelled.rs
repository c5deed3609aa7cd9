//! hugetlb is modelled from v5.7 to v6.19 (`era::hugetlb_unmodelled`): the `hugetlb_sync`
//! switch takes its three values, and every hugetlb use (a hugetlbfs file, a `MAP_HUGETLB`
//! mapping, a pool) on an earlier kernel is refused with the missing change named, at the line
//! of the use.

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

/// A `MAP_HUGETLB` mapping and a hugetlbfs file on v5.6 (before the model's first scheme) are
/// refused at their lines; on v6.1, v6.5, v6.8 and v6.14 they run.
#[test]
fn hugetlb_use_outside_the_modelled_kernels_is_refused() {
    let mmap = SCENARIO.to_string()
        + "\n[[step]]\nprocess = \"p\"\nops = [\n  { op = \"mmap\", len = \"2MiB\", prot = \"rw\", flags = \"private|anonymous|hugetlb\", expect = { errno = \"ENOMEM\" } },\n]\n";
    let file = SCENARIO.replace(
        "[[process]]",
        "[[file]]\npath = \"/huge\"\nfs = \"hugetlbfs\"\nsize = \"2MiB\"\n\n[[process]]",
    );
    for (text, line) in [(&mmap, 11), (&file, 5)] {
        let s = parse_scenario("s.toml", text).unwrap();
        for kernel in ["v6.1", "v6.5", "v6.8", "v6.14"] {
            let o = Overrides { kernel: Some(kernel.parse().unwrap()), ..Overrides::default() };
            assert!(run(&s, &o, &mut |_| ()).unwrap().passed(), "{kernel}");
        }
        let o = Overrides { kernel: Some("v5.6".parse().unwrap()), ..Overrides::default() };
        let err = run(&s, &o, &mut |_| ()).unwrap_err();
        assert!(err.message.contains("before v5.7"), "v5.6: {}", err.message);
        assert_eq!(err.line, line, "the error names the use's line: {err:?}");
    }
}
