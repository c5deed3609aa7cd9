//! Inspection by kernel names and named invariants (issue 21): the scenarios under
//! `scenarios/inspect/` hold on the boundary kernels of the fields they read, every event
//! checked; a wrong value fails; a name the kernel lacks, or an unknown one, is refused with its
//! line and the valid names.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod eras;

use lab::scenario::parse::parse_scenario;
use lab::scenario::run::{Overrides, machine_config, prepare, run};

/// PageAnonExclusive v5.19, the DAX zero entry v4.14, FMODE_NOREUSE v6.3.
const KERNELS: [&str; 7] = ["v4.9", "v4.13", "v4.14", "v5.18", "v5.19", "v6.2", "v6.3"];

#[test]
fn inspect_scenarios_hold_on_the_boundaries() {
    let mut runs: Vec<(&str, Vec<(String, String)>)> =
        KERNELS.iter().map(|k| (*k, Vec::new())).collect();
    runs.push(("v6.8", vec![("lru".into(), "mglru".into())]));
    for f in eras::scenario_files("inspect", 2) {
        eras::assert_holds_in(&f, &runs);
    }
}

const BASE: &str = r#"[machine]
profile = "tiny"

[[process]]
name = "p"

[[step]]
process = "p"
ops = [
  { op = "mmap", len = "4KiB", prot = "rw", flags = "private|anonymous", as = "buf" },
  { op = "write_bytes", addr = "buf", data = "x" },
]
"#;

/// The failures of `BASE` plus `expect` on `kernel`, or the load error.
fn outcome(expect: &str, kernel: &str) -> Result<Vec<String>, String> {
    let s = parse_scenario("t.toml", &format!("{BASE}{expect}")).map_err(|e| e.to_string())?;
    let o = Overrides { kernel: Some(kernel.parse().unwrap()), ..Overrides::default() };
    let config = machine_config(&s.machine, &o, &s.file).map_err(|e| e.to_string())?;
    prepare(&s, config, None).map_err(|e| e.to_string())?;
    let r = run(&s, &o, &mut |_| ()).map_err(|e| e.to_string())?;
    Ok(r.failures.iter().map(|f| format!("{} / {}", f.expected, f.observed)).collect())
}

#[test]
fn a_wrong_value_fails() {
    let at = "process = \"p\"\nat = \"buf\"\n";
    let ok =
        outcome(&format!("[[expect]]\ninspect = \"folio.refcount\"\n{at}equals = 1\n"), "v6.8");
    assert_eq!(ok, Ok(vec![]));
    let bad =
        outcome(&format!("[[expect]]\ninspect = \"folio.refcount\"\n{at}equals = 2\n"), "v6.8");
    assert_eq!(
        bad.unwrap(),
        vec!["folio.refcount of p at buf = 2 / folio.refcount of p at buf = 1".to_string()]
    );
    let pte = outcome(&format!("[[expect]]\ninspect = \"pte.write\"\n{at}is = false\n"), "v6.8");
    assert_eq!(pte.unwrap().len(), 1);
}

#[test]
fn a_field_the_kernel_lacks_is_refused_with_its_commit() {
    let e = "[[expect]]\ninspect = \"folio.anon_exclusive\"\nprocess = \"p\"\nat = \"buf\"\nis = true\n";
    assert_eq!(outcome(e, "v5.19"), Ok(vec![]));
    let err = outcome(e, "v5.18").unwrap_err();
    assert!(err.starts_with("t.toml:13:") && err.contains("6c287605fd56"), "{err}");
    let generation =
        "[[expect]]\ninspect = \"folio.gen\"\nprocess = \"p\"\nat = \"buf\"\nequals = 0\n";
    assert!(outcome(generation, "v6.8").unwrap_err().contains("lru = mglru"));
}

#[test]
fn unknown_names_are_refused_with_the_valid_ones() {
    let e = "[[expect]]\ninspect = \"folio.refcnt\"\nprocess = \"p\"\nat = \"buf\"\nequals = 1\n";
    let err = outcome(e, "v6.8").unwrap_err();
    assert!(err.starts_with("t.toml:14: unknown field `folio.refcnt`"), "{err}");
    assert!(err.contains("folio.refcount") && err.contains("pte.soft_dirty"), "{err}");
    let ra = "[[expect]]\ninspect = \"file.ra.size\"\nprocess = \"p\"\nfd = \"x\"\nequals = 1\n";
    assert!(outcome(ra, "v6.8").unwrap_err().contains("ra_pages"));
    let inv = "[[expect]]\ninvariant = \"refcount_ok\"\nholds = true\n";
    let err = outcome(inv, "v6.8").unwrap_err();
    assert!(err.contains("unknown invariant") && err.contains("rss_recount"), "{err}");
    let place = "[[expect]]\ninspect = \"folio.refcount\"\nequals = 1\n";
    let err = outcome(place, "v6.8").unwrap_err();
    assert!(err.starts_with("t.toml:13:") && err.contains("`process`"), "{err}");
}

#[test]
fn invariants_are_expected_by_name() {
    let holds = "[[expect]]\ninvariant = \"rmap_finds_every_mapping\"\nholds = true\n";
    assert_eq!(outcome(holds, "v6.8"), Ok(vec![]));
    let violated = "[[expect]]\ninvariant = \"rmap_finds_every_mapping\"\nholds = false\n";
    assert_eq!(outcome(violated, "v6.8").unwrap().len(), 1);
}

#[test]
fn kpageflags_and_kpagecount_fail_when_wrong() {
    let at = "process = \"p\"\nat = \"buf\"\n";
    let anon = outcome(&format!("[[expect]]\nkpageflags = \"ANON\"\n{at}is = true\n"), "v6.8");
    assert_eq!(anon, Ok(vec![]));
    let thp = outcome(&format!("[[expect]]\nkpageflags = \"THP\"\n{at}is = true\n"), "v6.8");
    assert_eq!(thp.unwrap().len(), 1);
    let count = outcome(&format!("[[expect]]\nkpagecount = true\n{at}equals = 2\n"), "v6.8");
    assert_eq!(count.unwrap().len(), 1);
    let ksm = outcome(&format!("[[expect]]\nkpageflags = \"KSM\"\n{at}is = true\n"), "v6.8");
    assert_eq!(ksm.unwrap().len(), 1, "a page KSM never merged is not KPF_KSM");
    let bad = outcome(&format!("[[expect]]\nkpageflags = \"HWPOISON\"\n{at}is = true\n"), "v6.8");
    assert!(bad.unwrap_err().contains("unknown kpageflags bit `HWPOISON`"));
}
