//! `scenarios/uffd/`: userfaultfd (`fs/userfaultfd.c`, `mm/userfaultfd.c`), each file holding on
//! kernels across its eras: the syscall (v4.3), hugetlb and shmem registration, ENOENT and the
//! non-cooperative events (v4.11), `SIGBUS` and `THREAD_ID` (v4.14), fills EAGAIN while an
//! event is delivered (v4.18), `VM_MAYWRITE` (v4.20),
//! mremap's reset (v5.0), the retried fault counted major (v5.9), `UFFD_USER_MODE_ONLY` (v5.11),
//! minor faults and `UFFDIO_CONTINUE` (v5.13 hugetlb, v5.14 shmem), hugetlb mremap (v5.16), `EXACT_ADDRESS` (v5.18), `/dev/userfaultfd` (v6.1), under the classic
//! and the multi-gen LRU, with the whole-system checkers after every simulation event. A file
//! skips the kernels its `[requires]` excludes.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod eras;

#[test]
fn uffd_scenarios_hold_in_every_era() {
    let mglru = vec![("lru".to_string(), "mglru".to_string())];
    let kernels = [
        "v4.2", "v4.3", "v4.10", "v4.11", "v4.13", "v4.14", "v4.17", "v4.18", "v4.19", "v4.20",
        "v5.0", "v5.8", "v5.9", "v5.10", "v5.11", "v5.12", "v5.13", "v5.14", "v5.16", "v5.17",
        "v5.18", "v6.0", "v6.1", "v6.8", "v6.19",
    ];
    let mut runs: Vec<(&str, Vec<(String, String)>)> =
        kernels.into_iter().map(|k| (k, vec![])).collect();
    runs.push(("v6.8", mglru));
    for f in eras::scenario_files("uffd", 18) {
        eras::assert_holds_in(&f, &runs);
    }
}
