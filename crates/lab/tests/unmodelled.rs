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

/// userfaultfd is modelled (missing, minor and anonymous write-protect modes,
/// `UFFDIO_COPY`/`ZEROPAGE`/`WAKE`/`CONTINUE`/`WRITEPROTECT`, the events, `SIGBUS`, `THREAD_ID`,
/// `EXACT_ADDRESS`); shmem and hugetlb write-protection, `WP_UNPOPULATED`, `WP_ASYNC`, `POISON`
/// and `MOVE` are refused by name when the file is read.
#[test]
fn userfaultfd_runs_and_its_unmodelled_parts_are_refused() {
    let ops = |ops: &str| format!("{SCENARIO}\n[[step]]\nprocess = \"p\"\nops = [\n{ops}\n]\n");
    let setup = "  { op = \"mmap\", len = \"8KiB\", prot = \"rw\", flags = \"private|anonymous\", as = \"m\" },\n  { op = \"userfaultfd\", flags = \"nonblock\", as = \"u\" },\n  { op = \"uffdio_api\", fd = \"u\" },\n  { op = \"uffdio_register\", fd = \"u\", addr = \"m\", len = \"8KiB\", mode = \"missing\" },\n  { op = \"uffd_read\", fd = \"u\", expect = { errno = \"EAGAIN\" } },\n  { op = \"uffdio_zeropage\", fd = \"u\", dst = \"m\", len = \"8KiB\", expect = { bytes = 8192 } },\n  { op = \"read_bytes\", addr = \"m\", len = 1, expect = { data_hex = \"00\" } },";
    let s = parse_scenario("s.toml", &ops(setup)).unwrap();
    assert!(run(&s, &Overrides::default(), &mut |_| ()).unwrap().passed());
    let refused = [
        ("{ op = \"uffdio_move\", fd = \"u\" }", "UFFDIO_MOVE"),
        ("{ op = \"uffdio_poison\", fd = \"u\" }", "UFFDIO_POISON"),
        ("{ op = \"uffdio_api\", fd = \"u\", features = \"poison\" }", "UFFD_FEATURE_POISON"),
        ("{ op = \"uffdio_api\", fd = \"u\", features = \"wp_async\" }", "UFFD_FEATURE_WP_ASYNC"),
        (
            "{ op = \"uffdio_api\", fd = \"u\", features = \"pagefault_flag_wp|wp_unpopulated\" }",
            "UFFD_FEATURE_WP_UNPOPULATED",
        ),
    ];
    for (op, name) in refused {
        let err = parse_scenario("s.toml", &ops(op)).unwrap_err();
        assert!(err.message.contains(name) && err.message.contains("not modelled"), "{err:?}");
    }
}

/// A fault on a registered page that no task resolves sleeps for good: the watchdog stops the
/// run (a failure, exit 1) and names the userfaultfd's wait queue.
#[test]
fn a_userfault_nobody_handles_stops_the_run() {
    let text = format!(
        "{SCENARIO}\n[[step]]\nprocess = \"p\"\nops = [\n  {{ op = \"mmap\", len = \"4KiB\", prot = \"rw\", flags = \"private|anonymous\", as = \"m\" }},\n  {{ op = \"userfaultfd\", as = \"u\" }},\n  {{ op = \"uffdio_api\", fd = \"u\" }},\n  {{ op = \"uffdio_register\", fd = \"u\", addr = \"m\", len = \"4KiB\", mode = \"missing\" }},\n  {{ op = \"touch\", addr = \"m\", len = \"4KiB\", access = \"write\" }},\n]\n"
    );
    let s = parse_scenario("s.toml", &text).unwrap();
    let report = run(&s, &Overrides::default(), &mut |_| ()).unwrap();
    assert!(!report.passed());
    let stopped = report.stopped.unwrap();
    assert!(stopped.contains("userfaultfd fault_wqh"), "{stopped}");
}

/// The model carves the hugetlb pool from the top of memory: a pool on a memory that is not a
/// whole number of huge pages is refused, not silently left empty.
#[test]
fn a_pool_on_a_memory_of_part_huge_pages_is_refused() {
    let text = SCENARIO.replace(
        "kernel = \"v6.1\"\n",
        "kernel = \"v6.1\"\nmemory = \"513MiB\"\n\n[machine.tunables]\nnr_hugepages = 10\n",
    );
    let s = parse_scenario("s.toml", &text).unwrap();
    let err = run(&s, &Overrides::default(), &mut |_| ()).unwrap_err();
    assert!(err.message.contains("a whole number of them"), "{}", err.message);
    let aligned = text.replace("513MiB", "514MiB");
    let s = parse_scenario("s.toml", &aligned).unwrap();
    assert!(run(&s, &Overrides::default(), &mut |_| ()).is_ok());
}
