//! ASID slots and TLB generations, the kernel's side of the TLBs (`arch/x86/mm/tlb.c`, Linux
//! v6.8), over every CPU's hardware.
//!
//! ASIDs follow Linux on x86 (`choose_new_asid`): each CPU holds a few ASID slots
//! (`TLB_NR_DYN_ASIDS` = 6), handed round-robin to the mms that run there. Every flush bumps the
//! mm's TLB generation (`mm->context.tlb_gen`); a CPU that has the mm loaded is flushed at once
//! (by IPI when remote, see `tlbflush.rs`), a CPU that only keeps an ASID slot for it flushes that
//! ASID when it switches back with an older generation. `invlpg` also drops the walk-cache
//! entries of the ASID (SDM: INVLPG invalidates all paging-structure-cache entries of the current
//! PCID), and freeing page tables drops them everywhere (the kernel's `freed_tables` flush).

use super::cpu::CpuTlb;
use super::geometry::TlbGeometry;
use super::{TlbEvent, TlbStats};
use crate::types::ids::MmId;
use simcore::{SimDuration, VirtAddr};

/// Which mm an ASID slot holds, and the TLB generation it has caught up with.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AsidSlot {
    pub(super) mm: Option<MmId>,
    pub(super) tlb_gen: u64,
}

/// The translation hardware of every CPU, and each mm's TLB generation.
#[derive(Clone, Debug)]
pub struct Tlbs {
    pub geometry: TlbGeometry,
    pub(super) cpus: Vec<CpuTlb>,
    /// `mm->context.tlb_gen`, by mm id.
    tlb_gens: Vec<u64>,
    /// What flushing a whole ASID costs (charged when a switch finds it out of date).
    flush_all: SimDuration,
}

/// What a flush asks one CPU to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushKind {
    /// `invlpg` each page of the range.
    Pages,
    /// Flush the whole ASID.
    Full,
}

impl Tlbs {
    pub fn new(geometry: &TlbGeometry, cpus: u32, flush_all: SimDuration) -> Tlbs {
        let cpu = CpuTlb::new(geometry);
        Tlbs {
            geometry: geometry.clone(),
            cpus: vec![cpu; cpus as usize],
            tlb_gens: Vec::new(),
            flush_all,
        }
    }

    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }

    /// The event counters of `cpu`.
    pub fn stats(&self, cpu: usize) -> &TlbStats {
        &self.cpus[cpu].stats
    }

    /// The counters summed over every CPU.
    pub fn total_stats(&self) -> TlbStats {
        let mut t = TlbStats::new();
        for c in &self.cpus {
            for &e in <TlbEvent as simcore::CounterKey>::ALL {
                t.add(e, c.stats.get(e));
            }
        }
        t
    }

    pub(super) fn tlb_gen(&self, mm: MmId) -> u64 {
        self.tlb_gens.get(mm.0 as usize).copied().unwrap_or(0)
    }

    /// `switch_mm_irqs_off`: makes `mm` the CPU's loaded mm, choosing its ASID; returns the slot.
    pub(super) fn switch_mm(&mut self, cpu: usize, mm: MmId) -> u32 {
        let tlb_gen = self.tlb_gen(mm);
        let flush_all = self.flush_all;
        let c = &mut self.cpus[cpu];
        let asid = match c.slot_of(mm) {
            Some(asid) => {
                if c.slots[asid as usize].tlb_gen != tlb_gen {
                    c.flush_asid(asid);
                    c.stolen += flush_all;
                }
                asid
            }
            None => {
                let asid = c.next_slot as u32;
                c.next_slot = (c.next_slot + 1) % c.slots.len();
                c.flush_asid(asid);
                asid
            }
        };
        c.slots[asid as usize] = AsidSlot { mm: Some(mm), tlb_gen };
        c.loaded = Some((mm, asid));
        asid
    }

    /// Starts a flush of `mm`: bumps its generation and returns the CPUs that have it loaded now
    /// (the initiator's CPU, if it has, comes out first).
    pub(crate) fn begin_flush(&mut self, mm: MmId, initiator: usize) -> Vec<usize> {
        let i = mm.0 as usize;
        if self.tlb_gens.len() <= i {
            self.tlb_gens.resize(i + 1, 0);
        }
        self.tlb_gens[i] += 1;
        let mut cpus: Vec<usize> = (0..self.cpus.len())
            .filter(|&c| self.cpus[c].loaded.is_some_and(|(m, _)| m == mm))
            .collect();
        cpus.sort_by_key(|&c| c != initiator);
        cpus
    }

    /// Flushes `[start, end)` of `mm` on `cpu`, which has it loaded, bringing its ASID up to date.
    pub(crate) fn flush_on(
        &mut self,
        cpu: usize,
        mm: MmId,
        start: VirtAddr,
        end: VirtAddr,
        kind: FlushKind,
    ) {
        let tlb_gen = self.tlb_gen(mm);
        let c = &mut self.cpus[cpu];
        let Some((loaded, asid)) = c.loaded else { return };
        debug_assert_eq!(loaded, mm);
        match kind {
            FlushKind::Full => c.flush_asid(asid),
            FlushKind::Pages => {
                let mut a = start;
                while a < end {
                    c.flush_va(a, asid);
                    c.stats.inc(TlbEvent::PageFlushes);
                    a = a + simcore::Bytes::PAGE;
                }
                c.flush_walk_caches(asid);
            }
        }
        c.slots[asid as usize].tlb_gen = tlb_gen;
    }

    /// Charges a shootdown handler's time to `cpu` (taken at its next access).
    pub(crate) fn steal(&mut self, cpu: usize, d: SimDuration) {
        let c = &mut self.cpus[cpu];
        c.stolen += d;
        c.stats.inc(TlbEvent::ShootdownsReceived);
    }

    /// Page tables of `mm` were freed: no walk cache may keep pointing at them.
    pub(crate) fn flush_walk_caches(&mut self, mm: MmId) {
        for c in &mut self.cpus {
            if let Some(asid) = c.slot_of(mm) {
                c.flush_walk_caches(asid);
            }
        }
    }

    /// Takes the virtual time `cpu` owes: walks, second-level hits, handlers.
    pub(crate) fn take_pending(&mut self, cpu: usize) -> SimDuration {
        let c = &mut self.cpus[cpu];
        let ns = self.geometry.cycles_to_ns(c.pending_cycles);
        let charged = ns * u64::from(self.geometry.clock_mhz) / 1000;
        c.pending_cycles -= charged.min(c.pending_cycles);
        SimDuration::from_ns(ns) + std::mem::replace(&mut c.stolen, SimDuration::ZERO)
    }
}
