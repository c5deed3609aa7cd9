//! TLBs against the mm model: walk caches, shootdowns, and no stale translation after munmap,
//! mprotect or COW (the coherence checker of `tlb.rs` after each scenario, the free-frame
//! checker after every step).

mod common;

use common::{machine, run_in};
use mm::arch::tlb::TlbEvent;
use mm::{Access, Machine, Pid, prot};
use simcore::{Bytes, SimDuration, VirtAddr};

fn stat(m: &Machine, cpu: usize, e: TlbEvent) -> u64 {
    m.kernel().state().tlb.stats(cpu).get(e)
}

fn coherent(m: &Machine) {
    m.kernel().state().check_tlb(true).unwrap();
}

/// Given a page already touched, when its neighbour in the same 2 MiB is first read, then the
/// walk starts at the PTE table (a PDE-cache hit) and reads one entry.
#[test]
fn walk_caches_shorten_walks() {
    let mut m = machine(Bytes::mib(64));
    let pid = m.new_process("p").unwrap();
    let a = run_in(&mut m, pid, |t| async move {
        let a = t.mmap_anon(Bytes::mib(4), prot::READ | prot::WRITE).await.unwrap();
        let a = a.align_up(Bytes::PMD).unwrap();
        t.touch(a, Bytes::PAGE, Access::Write).await.unwrap();
        a
    });
    let (refs, hits) = (stat(&m, 0, TlbEvent::WalkRefs), stat(&m, 0, TlbEvent::WalkCacheHits));
    run_in(&mut m, pid, move |t| async move {
        t.touch(a + Bytes::PAGE, Bytes::PAGE, Access::Read).await.unwrap();
    });
    // One walk before the fault (PTE none), one after: each reads only the PTE.
    assert_eq!(stat(&m, 0, TlbEvent::WalkRefs) - refs, 2);
    assert_eq!(stat(&m, 0, TlbEvent::WalkCacheHits) - hits, 2);
    // A hit in the first level needs no walk at all.
    let walks = stat(&m, 0, TlbEvent::DtlbWalks);
    run_in(&mut m, pid, move |t| async move {
        t.touch(a, Bytes::PAGE, Access::Read).await.unwrap();
    });
    assert_eq!(stat(&m, 0, TlbEvent::DtlbWalks), walks);
    coherent(&m);
}

/// Maps one written page at a fixed address in `pid`.
fn mapped_page(m: &mut Machine, pid: Pid) -> VirtAddr {
    run_in(m, pid, |t| async move {
        let a = t.mmap_anon(Bytes::kib(16), prot::READ | prot::WRITE).await.unwrap();
        t.write_bytes(a, b"data").await.unwrap();
        a
    })
}

/// Given two threads of one process on CPUs 0 and 1 that both touched a page, when CPU 0 unmaps
/// it while CPU 1 computes, then CPU 1 handles a shootdown (charged there), keeps no entry for
/// it, and no step ever showed a TLB entry to a freed frame; when CPU 1 sleeps instead (idle,
/// in lazy TLB mode), then its entry is dropped all the same but no handler is charged to it.
#[test]
fn munmap_shoots_down_the_other_cpu() {
    for busy in [true, false] {
        let mut m = machine(Bytes::mib(64));
        let pid = m.new_process("p").unwrap();
        let a = mapped_page(&mut m, pid);
        m.spawn_thread(pid, 1, "reader", move |t| async move {
            t.read_bytes(a, 4).await.unwrap();
            if busy {
                t.compute(SimDuration::from_us(50)).await;
            } else {
                t.cx().sleep(SimDuration::from_us(50)).await;
            }
            // The shootdown's time is taken at this CPU's next access.
            assert!(t.read_bytes(a, 4).await.is_err(), "unmapped");
        })
        .unwrap();
        m.spawn_thread(pid, 0, "unmapper", move |t| async move {
            t.cx().sleep(SimDuration::from_us(10)).await;
            t.munmap(a, Bytes::kib(16)).await.unwrap();
        })
        .unwrap();
        m.run_checked().unwrap();
        assert_eq!(stat(&m, 1, TlbEvent::ShootdownsReceived), u64::from(busy), "busy: {busy}");
        assert_eq!(stat(&m, 0, TlbEvent::ShootdownsReceived), 0);
        coherent(&m);
    }
}

/// Given a written page, when it is made read-only, then no writable entry survives and a write
/// faults (SIGSEGV); when the process forks and writes, then the COW copy is what the TLB maps.
#[test]
fn mprotect_and_cow_leave_no_stale_entry() {
    let mut m = machine(Bytes::mib(64));
    let pid = m.new_process("p").unwrap();
    let a = mapped_page(&mut m, pid);
    let denied = run_in(&mut m, pid, move |t| async move {
        t.mprotect(a, Bytes::kib(16), prot::READ).await.unwrap();
        t.write_bytes(a, b"no").await.is_err()
    });
    assert!(denied);
    coherent(&m);
    let child = run_in(&mut m, pid, move |t| async move {
        t.mprotect(a, Bytes::kib(16), prot::READ | prot::WRITE).await.unwrap();
        t.write_bytes(a, b"one").await.unwrap();
        let child = t.fork().await.unwrap();
        t.write_bytes(a, b"two").await.unwrap();
        child
    });
    coherent(&m);
    let seen = run_in(&mut m, child, move |t| async move { t.read_bytes(a, 3).await.unwrap() });
    assert_eq!(seen, b"one", "the parent's write after fork went to its own copy");
    coherent(&m);
}
