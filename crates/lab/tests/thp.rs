//! Transparent huge pages (issue 16): every scenario under `scenarios/thp/` holds in every era
//! boundary of the THP rules, checked after every simulation event; and the THP knobs are set
//! by their sysfs paths with the kernel's checks.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

#[macro_use]
mod shards;

mod eras;

use lab::scenario::parse::parse_scenario;
use lab::scenario::run::{Overrides, run};

/// One kernel on each side of every THP era boundary (`era.rs`): PR_SET_THP_DISABLE and the
/// THP swap cluster v4.13, whole-THP swap-out v4.14,
/// THPeligible v5.0, the COW split v5.8, the fork split of pinned PMDs v5.9, the THP refcount
/// reuse v5.18, PageAnonExclusive v5.19, MADV_COLLAPSE v6.1, the huge zero page COW v6.13; and
/// those of file THPs: READ_ONLY_THP_FOR_FS v5.4, the `file_thp` eras v5.13/v5.14 and v6.8,
/// `retract_page_tables` without mmap_lock v6.6; `collapse_file` filling the page-cache slots one
/// by one until v6.4; khugepaged obeying the tmpfs mount v5.11 (shmem
/// THPs, v4.8, predate the first kernel here); ext4's large folios v6.16 (an opener for write no
/// longer drops collapsed THPs).
const KERNELS: [&str; 23] = [
    "v4.12", "v4.13", "v4.14", "v4.20", "v5.0", "v5.4", "v5.7", "v5.8", "v5.9", "v5.11", "v5.13",
    "v5.14", "v5.17", "v5.18", "v5.19", "v6.0", "v6.1", "v6.4", "v6.6", "v6.8", "v6.12", "v6.13",
    "v6.16",
];

/// Every scenario on every kernel above, and on v6.8 with the mapcount COW rule: the pairs are
/// dealt to [`SHARDS`] tests (about two minutes each on one core of a 2-core machine).
fn thp_shard_holds(shard: usize) {
    let mut runs: Vec<eras::Run<'_>> = KERNELS.iter().map(|k| (*k, Vec::new())).collect();
    runs.push(("v6.8", vec![("cow_reuse".into(), "mapcount".into())]));
    eras::assert_shard_holds(&eras::scenario_files("thp", 1), &runs, shard, SHARDS);
}

const SHARDS: usize = 12;

shard_tests!(
    thp_shard_holds,
    SHARDS;
    thp_scenarios_hold_in_every_era_0 = 0,
    thp_scenarios_hold_in_every_era_1 = 1,
    thp_scenarios_hold_in_every_era_2 = 2,
    thp_scenarios_hold_in_every_era_3 = 3,
    thp_scenarios_hold_in_every_era_4 = 4,
    thp_scenarios_hold_in_every_era_5 = 5,
    thp_scenarios_hold_in_every_era_6 = 6,
    thp_scenarios_hold_in_every_era_7 = 7,
    thp_scenarios_hold_in_every_era_8 = 8,
    thp_scenarios_hold_in_every_era_9 = 9,
    thp_scenarios_hold_in_every_era_10 = 10,
    thp_scenarios_hold_in_every_era_11 = 11,
);

const SCENARIO: &str = "[machine]\nprofile = \"tiny\"\n\n[[process]]\nname = \"p\"\n";

fn with_sysfs(line: &str) -> String {
    SCENARIO.replace("[[process]]", &format!("[machine.sysfs]\n{line}\n\n[[process]]"))
}

#[test]
fn knobs_are_set_by_sysfs_path_with_the_kernels_checks() {
    let ok = with_sysfs("\"/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none\" = 255");
    assert!(parse_scenario("s.toml", &ok).is_ok());
    for (line, wanted) in [
        (
            "\"/sys/kernel/mm/transparent_hugepage/enabled\" = \"sometimes\"",
            "expected one of always, madvise, never",
        ),
        (
            "\"/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none\" = 512",
            "outside 0..=511",
        ),
        (
            "\"/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled\" = \"sometimes\"",
            "expected one of always, inherit, madvise, never",
        ),
        (
            "\"/sys/kernel/mm/transparent_hugepage/hugepages-8kB/enabled\" = \"always\"",
            "no such knob",
        ),
        (
            "\"/sys/kernel/mm/transparent_hugepage/hugepages-64kB/shmem_enabled\" = \"always\"",
            "no such knob on v6.8",
        ),
        ("\"/sys/kernel/mm/transparent_hugepage/frobnicate\" = 1", "no such knob"),
        ("\"/sys/kernel/mm/lru_gen/enabled\" = 1", "expected a path under"),
    ] {
        let err = parse_scenario("s.toml", &with_sysfs(line)).unwrap_err();
        assert!(err.message.contains(wanted), "{line}: {}", err.message);
        assert_eq!(err.line, 5, "{line}");
    }
    // max_ptes_shared exists from v5.8 (71a2c112a0f6): refused on a v5.7 run.
    let s = parse_scenario("s.toml", SCENARIO).unwrap();
    let set = |k: &str| Overrides {
        kernel: Some(k.parse().unwrap()),
        sets: vec![("transparent_hugepage/khugepaged/max_ptes_shared".into(), "100".into())],
        ..Overrides::default()
    };
    let err = run(&s, &set("v5.7"), &mut |_| ()).unwrap_err();
    assert!(err.message.contains("no such knob on v5.7"), "{}", err.message);
    assert!(run(&s, &set("v5.8"), &mut |_| ()).unwrap().passed());
    // The per-size knobs exist from v6.8 (3485b88390b0).
    let size = |k: &str| Overrides {
        kernel: Some(k.parse().unwrap()),
        sets: vec![("transparent_hugepage/hugepages-64kB/enabled".into(), "always".into())],
        ..Overrides::default()
    };
    let err = run(&s, &size("v6.7"), &mut |_| ()).unwrap_err();
    assert!(err.message.contains("no such knob on v6.7"), "{}", err.message);
    assert!(run(&s, &size("v6.8"), &mut |_| ()).unwrap().passed());
    // Per-size shmem THP (v6.11) is refused by name, not taken as a missing file.
    let shmem = Overrides {
        kernel: Some("v6.11".parse().unwrap()),
        sets: vec![("transparent_hugepage/hugepages-64kB/shmem_enabled".into(), "always".into())],
        ..Overrides::default()
    };
    let err = run(&s, &shmem, &mut |_| ()).unwrap_err();
    assert!(err.message.contains("multi-size shmem THP"), "{}", err.message);
}
