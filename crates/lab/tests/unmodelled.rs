//! hugetlb is modelled from v4.0 to v6.1 (before v5.7 with the `revert` scheme): the
//! `hugetlb_sync` switch takes its three values on those kernels, and every hugetlb use (a
//! hugetlbfs file, a `MAP_HUGETLB` mapping, a pool) on a later kernel is refused with the
//! missing change named, at the line of the use.

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

/// A `MAP_HUGETLB` mapping and a hugetlbfs file on v6.8 (later changes not modelled) are
/// refused at their lines; on v6.1, v5.6 and v4.0 they run.
#[test]
fn hugetlb_use_outside_the_modelled_kernels_is_refused() {
    let mmap = SCENARIO.to_string()
        + "\n[[step]]\nprocess = \"p\"\nops = [\n  { op = \"mmap\", len = \"2MiB\", prot = \"rw\", flags = \"private|anonymous|hugetlb\", expect = { errno = \"ENOMEM\" } },\n]\n";
    let s = parse_scenario("s.toml", &mmap).unwrap();
    assert!(run(&s, &Overrides::default(), &mut |_| ()).unwrap().passed());
    let on = |k: &str| Overrides { kernel: Some(k.parse().unwrap()), ..Overrides::default() };
    for kernel in ["v5.6", "v4.0"] {
        assert!(run(&s, &on(kernel), &mut |_| ()).unwrap().passed(), "{kernel}");
    }
    let err = run(&s, &on("v6.8"), &mut |_| ()).unwrap_err();
    assert!(err.message.contains("after v6.1"), "{}", err.message);
    assert_eq!(err.line, 11, "the error names the mmap's line: {err:?}");
    let file = SCENARIO.replace(
        "[[process]]",
        "[[file]]\npath = \"/huge\"\nfs = \"hugetlbfs\"\nsize = \"2MiB\"\n\n[[process]]",
    );
    let s = parse_scenario("s.toml", &file).unwrap();
    assert!(run(&s, &Overrides::default(), &mut |_| ()).unwrap().passed());
    let o = Overrides { kernel: Some("v6.5".parse().unwrap()), ..Overrides::default() };
    let err = run(&s, &o, &mut |_| ()).unwrap_err();
    assert!(err.message.contains("hugetlb is not modelled on v6.5"), "{}", err.message);
    assert_eq!(err.line, 5);
}
