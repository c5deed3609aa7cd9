//! Anonymous memory: zero-page reads, write faults, fork and COW, munmap, smaps.

mod common;

use common::{machine, run_big, run_in, smaps_field, vmstat};
use mm::{Access, Signal, prot};
use simcore::{Bytes, VirtAddr};

/// Given a 1 GiB private anonymous mapping, when every page is read, then Rss stays near 0 and
/// every page maps the shared zero page; when every page is then written, Rss is 1 GiB.
#[test]
fn reading_1g_maps_the_zero_page_writing_it_allocates() {
    let mut m = machine(Bytes::gib(2));
    let pid = m.new_process("reader").unwrap();
    let addr = run_big(&mut m, pid, |t| async move {
        let a = t.mmap_anon(Bytes::gib(1), prot::READ | prot::WRITE).await.unwrap();
        t.touch(a, Bytes::gib(1), Access::Read).await.unwrap();
        a
    });
    assert_eq!(smaps_field(&m, pid, addr.0, "Rss"), 0);
    assert_eq!(vmstat(&m, "nr_anon_pages"), 0);
    let zero = m.kernel().state().zero_pfn.0;
    let pm = m.pagemap(pid, addr, 3).unwrap();
    for e in pm {
        assert_eq!(e >> 63, 1, "present");
        assert_eq!(e & mm::fs::proc::PM_PFN_MASK, zero, "maps the zero page");
        assert_eq!(e & mm::fs::proc::PM_MMAP_EXCLUSIVE, 0);
    }
    run_big(&mut m, pid, move |t| async move {
        t.touch(addr, Bytes::gib(1), Access::Write).await.unwrap();
    });
    assert_eq!(smaps_field(&m, pid, addr.0, "Rss"), 1 << 20);
    assert_eq!(smaps_field(&m, pid, addr.0, "Private_Dirty"), 1 << 20);
    assert_eq!(smaps_field(&m, pid, addr.0, "Anonymous"), 1 << 20);
    assert_eq!(vmstat(&m, "nr_anon_pages"), 262_144);
    // Every write replaced a zero-page mapping: a write-protect fault per page, no reuse.
    assert_eq!(vmstat(&m, "pgfault"), 2 * 262_144);
    assert_eq!(vmstat(&m, "pgreuse"), 0);
}

/// Given a parent with written anonymous memory, when it forks and the child writes one page,
/// then only that page is copied and each process sees its own bytes.
#[test]
fn fork_then_child_write_copies_only_the_written_page() {
    let mut m = machine(Bytes::mib(64));
    let parent = m.new_process("parent").unwrap();
    let (addr, child) = run_in(&mut m, parent, |t| async move {
        let a = t.mmap_anon(Bytes::kib(64), prot::READ | prot::WRITE).await.unwrap();
        for i in 0..16u64 {
            t.write_bytes(a + Bytes(i * 4096), format!("page {i}").as_bytes()).await.unwrap();
        }
        let child = t.fork().await.unwrap();
        (a, child)
    });
    let before = vmstat(&m, "nr_anon_pages");
    assert_eq!(before, 16, "pages are shared after fork");
    assert_eq!(smaps_field(&m, parent, addr.0, "Shared_Dirty"), 64);
    let got = run_in(&mut m, child, move |t| async move {
        t.write_bytes(addr + Bytes(3 * 4096), b"child!").await.unwrap();
        (
            t.read_bytes(addr + Bytes(3 * 4096), 6).await.unwrap(),
            t.read_bytes(addr + Bytes(4 * 4096), 6).await.unwrap(),
        )
    });
    assert_eq!(got, (b"child!".to_vec(), b"page 4".to_vec()));
    assert_eq!(vmstat(&m, "nr_anon_pages"), 17, "exactly one page was copied");
    let parent_view = run_in(&mut m, parent, move |t| async move {
        t.read_bytes(addr + Bytes(3 * 4096), 6).await.unwrap()
    });
    assert_eq!(parent_view, b"page 3");
    // The parent's page 3 is now mapped once again: a later parent write reuses it.
    run_in(&mut m, parent, move |t| async move {
        t.write_bytes(addr + Bytes(3 * 4096), b"P").await.unwrap()
    });
    assert_eq!(vmstat(&m, "nr_anon_pages"), 17);
    assert_eq!(vmstat(&m, "pgreuse"), 1);
    assert_eq!(smaps_field(&m, parent, addr.0, "Private_Dirty"), 4);
    assert_eq!(smaps_field(&m, parent, addr.0, "Shared_Dirty"), 60);
    assert_eq!(smaps_field(&m, child, addr.0, "Pss"), 4 + 30);
}

/// Given mapped and touched memory, when it is unmapped and the process exits, then every page
/// and page table is freed and the counters return to their initial values.
#[test]
fn munmap_and_exit_free_everything() {
    let mut m = machine(Bytes::mib(64));
    let initial_free = vmstat(&m, "nr_free_pages");
    let pid = m.new_process("p").unwrap();
    run_in(&mut m, pid, |t| async move {
        let a = t.mmap_anon(Bytes::mib(8), prot::READ | prot::WRITE).await.unwrap();
        t.touch(a, Bytes::mib(8), Access::Write).await.unwrap();
        t.munmap(a + Bytes::mib(2), Bytes::mib(4)).await.unwrap();
        let b = t.mmap_anon(Bytes::mib(1), prot::READ | prot::WRITE).await.unwrap();
        t.touch(b, Bytes::mib(1), Access::Write).await.unwrap();
        t.exit().await.unwrap();
    });
    assert_eq!(vmstat(&m, "nr_anon_pages"), 0);
    assert_eq!(vmstat(&m, "nr_page_table_pages"), 0);
    assert_eq!(vmstat(&m, "nr_free_pages"), initial_free);
    assert_eq!(vmstat(&m, "nr_inactive_anon") + vmstat(&m, "nr_active_anon"), 0);
    assert!(vmstat(&m, "pgfree") >= 1536 + 256);
}

/// smaps of a small process, field by field, against a hand computation.
#[test]
fn smaps_matches_a_hand_computed_expectation() {
    let mut m = machine(Bytes::mib(64));
    let pid = m.new_process("p").unwrap();
    let (a, b) = run_in(&mut m, pid, |t| async move {
        // 8 pages: 3 written, 2 read (zero page), 3 untouched.
        let a = t.mmap_anon(Bytes::kib(32), prot::READ | prot::WRITE).await.unwrap();
        t.touch(a, Bytes::kib(12), Access::Write).await.unwrap();
        t.touch(a + Bytes::kib(12), Bytes::kib(8), Access::Read).await.unwrap();
        // A read-only mapping that is never touched.
        let b = t.mmap_anon(Bytes::kib(16), prot::READ).await.unwrap();
        (a, b)
    });
    let smaps = m.smaps(pid);
    let expected_a = format!(
        "{:08x}-{:08x} rw-p 00000000 00:00 0
Size:                 32 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                  12 kB
Pss:                  12 kB
Pss_Dirty:            12 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:         0 kB
Private_Dirty:        12 kB
Referenced:           12 kB
Anonymous:            12 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
VmFlags: rd wr mr mw me ac sd 
",
        a.0,
        a.0 + 32 * 1024
    );
    assert!(smaps.contains(&expected_a), "got:\n{smaps}\nexpected:\n{expected_a}");
    assert!(smaps.contains(&format!(
        "{:08x}-{:08x} r--p 00000000 00:00 0\nSize:                 16 kB",
        b.0,
        b.0 + 16 * 1024
    )));
    let rollup = m.smaps_rollup(pid).expect("smaps_rollup exists on the default kernel");
    assert!(rollup.contains("Rss:                  12 kB"), "{rollup}");
    assert!(m.status(pid).contains("RssAnon:\t      12 kB"));
}

/// Bad arguments return the kernel's errno; bad accesses raise the kernel's signal.
#[test]
fn errors_are_the_kernels() {
    let mut m = machine(Bytes::mib(64));
    let pid = m.new_process("p").unwrap();
    run_in(&mut m, pid, |t| async move {
        use mm::{Errno, MmapArgs, map};
        let unaligned = MmapArgs {
            addr: Some(VirtAddr(0x1001)),
            len: Bytes::PAGE,
            prot: prot::READ,
            flags: map::PRIVATE | map::ANONYMOUS | map::FIXED,
            fd: None,
            offset: 0,
        };
        assert_eq!(t.mmap(unaligned).await, Err(Errno::EINVAL));
        let zero = MmapArgs { len: Bytes(0), addr: None, ..unaligned };
        assert_eq!(t.mmap(zero).await, Err(Errno::EINVAL));
        let both = MmapArgs {
            addr: None,
            flags: map::PRIVATE | map::SHARED | map::ANONYMOUS,
            ..unaligned
        };
        assert_eq!(t.mmap(both).await, Err(Errno::EINVAL));
        let no_fd = MmapArgs { addr: None, flags: map::PRIVATE, fd: Some(7), ..unaligned };
        assert_eq!(t.mmap(no_fd).await, Err(Errno::EBADF));
        assert_eq!(t.munmap(VirtAddr(0x1234), Bytes::PAGE).await, Err(Errno::EINVAL));
        assert_eq!(
            t.mprotect(VirtAddr(0x10000), Bytes::PAGE, prot::READ).await,
            Err(Errno::ENOMEM)
        );
        let ro = t.mmap_anon(Bytes::PAGE, prot::READ).await.unwrap();
        assert_eq!(t.write_bytes(ro, b"x").await, Err(Signal::SIGSEGV));
        assert_eq!(t.read_bytes(VirtAddr(0x1000), 1).await, Err(Signal::SIGSEGV));
        let rw = t.mmap_anon(Bytes::PAGE, prot::READ | prot::WRITE).await.unwrap();
        t.write_bytes(rw, b"x").await.unwrap();
        t.mprotect(rw, Bytes::PAGE, prot::NONE).await.unwrap();
        assert_eq!(t.read_bytes(rw, 1).await, Err(Signal::SIGSEGV));
        t.mprotect(rw, Bytes::PAGE, prot::READ).await.unwrap();
        assert_eq!(t.read_bytes(rw, 1).await, Ok(b"x".to_vec()));
        assert_eq!(t.write_bytes(rw, b"y").await, Err(Signal::SIGSEGV));
        t.mprotect(rw, Bytes::PAGE, prot::READ | prot::WRITE).await.unwrap();
        t.write_bytes(rw, b"y").await.unwrap();
        assert_eq!(
            t.madvise(rw + Bytes(1), Bytes::PAGE, mm::madv::DONTNEED).await,
            Err(Errno::EINVAL)
        );
        t.madvise(rw, Bytes::PAGE, mm::madv::DONTNEED).await.unwrap();
        assert_eq!(
            t.read_bytes(rw, 1).await,
            Ok(vec![0]),
            "MADV_DONTNEED drops anonymous contents"
        );
    });
    // mprotect back to writable reused the exclusive page without a fault copy.
    assert_eq!(vmstat(&m, "pgreuse"), 0);
}
