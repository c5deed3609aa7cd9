//! Concurrent faults under random interleavings, with every invariant checked after each step.

mod common;

use common::vmstat;
use engine::SchedulerKind;
use mm::{Access, KernelVersion, Machine, MachineConfig, Profile, prot};
use simcore::{Bytes, VirtAddr};
use std::cell::Cell;
use std::rc::Rc;

fn machine(seed: u64, scheduler: SchedulerKind) -> Machine {
    let profile = Profile::named("tiny").unwrap().resized(None, Some(Bytes::mib(64))).unwrap();
    let config =
        MachineConfig { seed, scheduler, ..MachineConfig::new(profile, KernelVersion::DEFAULT) };
    Machine::new(config).unwrap()
}

/// Two threads of one process write the same untouched anonymous page at once: whatever the
/// interleaving, one folio ends up mapped, both writes land in it, and the loser of the PTE race
/// freed its page.
#[test]
fn racing_write_faults_map_one_folio() {
    let mut lost_races = 0;
    for seed in 0..40 {
        let mut m = machine(seed, SchedulerKind::Random);
        let pid = m.new_process("p").unwrap();
        let addr = Rc::new(Cell::new(VirtAddr(0)));
        let a = addr.clone();
        m.spawn_thread(pid, 0, "setup", move |t| async move {
            a.set(t.mmap_anon(Bytes::PAGE, prot::READ | prot::WRITE).await.unwrap());
        })
        .unwrap();
        m.run_checked().unwrap();
        for (cpu, byte) in [(0u32, b'a'), (1, b'b')] {
            let a = addr.get();
            m.spawn_thread(pid, cpu, "writer", move |t| async move {
                t.write_bytes(a + Bytes(u64::from(cpu)), &[byte]).await.unwrap();
            })
            .unwrap();
        }
        m.run_checked().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(vmstat(&m, "nr_anon_pages"), 1, "seed {seed}");
        // A fault that lost the PTE race frees the page it allocated.
        lost_races += u32::from(vmstat(&m, "pgfree") > 0);
        let out = Rc::new(Cell::new([0u8; 2]));
        let (o, a) = (out.clone(), addr.get());
        m.spawn_thread(pid, 2, "reader", move |t| async move {
            let v = t.read_bytes(a, 2).await.unwrap();
            o.set([v[0], v[1]]);
        })
        .unwrap();
        m.run_checked().unwrap();
        assert_eq!(&out.get(), b"ab", "seed {seed}: a write was lost");
        m.check().unwrap();
    }
    assert!(lost_races > 0, "no interleaving exercised the race");
}

/// A shared anonymous mapping (tmpfs-backed) stays shared across fork: the child's write is seen
/// by the parent, while a private mapping is copied.
#[test]
fn shared_anonymous_memory_is_shared_after_fork() {
    let mut m = machine(0, SchedulerKind::TimeOrdered);
    let pid = m.new_process("parent").unwrap();
    let state = Rc::new(Cell::new((VirtAddr(0), VirtAddr(0), mm::Pid(0))));
    let s = state.clone();
    m.spawn_thread(pid, 0, "parent", move |t| async move {
        let shared = t
            .mmap(mm::MmapArgs {
                addr: None,
                len: Bytes::PAGE,
                prot: prot::READ | prot::WRITE,
                flags: mm::map::SHARED | mm::map::ANONYMOUS,
                fd: None,
                offset: 0,
            })
            .await
            .unwrap();
        let private = t.mmap_anon(Bytes::PAGE, prot::READ | prot::WRITE).await.unwrap();
        t.touch(shared, Bytes::PAGE, Access::Write).await.unwrap();
        t.touch(private, Bytes::PAGE, Access::Write).await.unwrap();
        s.set((shared, private, t.fork().await.unwrap()));
    })
    .unwrap();
    m.run_checked().unwrap();
    let (shared, private, child) = state.get();
    m.spawn_thread(child, 1, "child", move |t| async move {
        t.write_bytes(shared, b"shared").await.unwrap();
        t.write_bytes(private, b"mine").await.unwrap();
    })
    .unwrap();
    m.run_checked().unwrap();
    let seen = Rc::new(Cell::new(([0u8; 6], [0u8; 4])));
    let o = seen.clone();
    m.spawn_thread(pid, 0, "parent", move |t| async move {
        let a = t.read_bytes(shared, 6).await.unwrap();
        let b = t.read_bytes(private, 4).await.unwrap();
        o.set((a.try_into().unwrap(), b.try_into().unwrap()));
    })
    .unwrap();
    m.run_checked().unwrap();
    assert_eq!(seen.get(), (*b"shared", [0; 4]));
    assert_eq!(vmstat(&m, "nr_shmem"), 1);
    assert!(m.smaps(pid).contains("/dev/zero (deleted)"));
}

/// The same seed gives the same digest and the same observables.
#[test]
fn runs_are_deterministic() {
    let run = |seed| {
        let mut m = machine(seed, SchedulerKind::Random);
        let pid = m.new_process("p").unwrap();
        for cpu in 0..3u32 {
            m.spawn_thread(pid, cpu, "w", move |t| async move {
                let a = t.mmap_anon(Bytes::kib(64), prot::READ | prot::WRITE).await.unwrap();
                t.touch(a, Bytes::kib(64), Access::Write).await.unwrap();
                t.munmap(a, Bytes::kib(16)).await.unwrap();
            })
            .unwrap();
        }
        let r = m.run().unwrap();
        (r.digest, m.smaps(pid), m.vmstat_text())
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5).0, run(6).0);
}
