//! A switch whose mechanism is not modelled is refused wherever a run could override it: a
//! scenario's `[machine.switches]` and `--set` (and so every sweep point).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use lab::scenario::parse::parse_scenario;
use lab::scenario::run::{Overrides, run};

const SCENARIO: &str = "[machine]\nprofile = \"tiny\"\n\n[[process]]\nname = \"p\"\n";

#[test]
fn hugetlb_sync_overrides_are_refused() {
    let with_switch = SCENARIO
        .replace("[[process]]", "[machine.switches]\nhugetlb_sync = \"vma_lock\"\n\n[[process]]");
    let err = parse_scenario("s.toml", &with_switch).unwrap_err();
    assert!(err.message.contains("hugetlb is not modelled"), "{}", err.message);

    let s = parse_scenario("s.toml", SCENARIO).unwrap();
    let o =
        Overrides { sets: vec![("hugetlb_sync".into(), "revert".into())], ..Overrides::default() };
    let err = run(&s, &o, &mut |_| ()).unwrap_err();
    assert!(
        err.message.contains("--set hugetlb_sync=revert")
            && err.message.contains("hugetlb is not modelled"),
        "{}",
        err.message
    );
    // Without an override the era's documented value runs, and reports list it.
    let report = run(&s, &Overrides::default(), &mut |_| ()).unwrap();
    assert!(report.switches.iter().any(|(k, v)| k == "hugetlb_sync" && v == "vma_lock"));
}

/// Every hugetlb use is refused with its reason, with the file and line, until hugetlb is
/// modelled: a `MAP_HUGETLB` mapping and a file on hugetlbfs.
#[test]
fn hugetlb_mappings_and_files_are_refused() {
    let mmap = SCENARIO.to_string()
        + "\n[[step]]\nprocess = \"p\"\nops = [\n  { op = \"mmap\", len = \"2MiB\", prot = \"rw\", flags = \"private|anonymous|hugetlb\" },\n]\n";
    let err = parse_scenario("s.toml", &mmap).unwrap_err();
    assert!(err.message.contains("hugetlb pages"), "{}", err.message);
    assert!(err.line > 0, "the error names its line: {err:?}");
    let file = SCENARIO.replace(
        "[[process]]",
        "[[file]]\npath = \"/huge\"\nfs = \"hugetlbfs\"\nsize = \"2MiB\"\n\n[[process]]",
    );
    let err = parse_scenario("s.toml", &file).unwrap_err();
    assert!(err.message.contains("hugetlb pages"), "{}", err.message);
}
