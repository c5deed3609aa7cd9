//! One CPU's translation hardware: its first-level instruction and data TLBs, the second level,
//! the walk caches and its ASID slots. The translation of an access through it is
//! `translate.rs`.

use super::array::Array;
use super::asid::AsidSlot;
use super::geometry::SPAN_SHIFTS;
use super::geometry::{ArrayGeometry, SecondLevel, TlbGeometry};
use super::walk::bits;
use super::walk_cache::WalkCaches;
use super::{TlbEvent, TlbStats};
use crate::types::ids::MmId;
use simcore::{SimDuration, VirtAddr};

/// One CPU's translation hardware.
#[derive(Clone, Debug)]
pub struct CpuTlb {
    pub(super) itlb: Vec<Array>,
    pub(super) dtlb: Vec<Array>,
    /// The second level; for a unified one, `l2i` is empty and instruction misses use `l2d`.
    pub(super) l2i: Vec<Array>,
    pub(super) l2d: Vec<Array>,
    /// PGD, PUD and PMD entry caches (span codes 3, 2, 1).
    pub(super) pwc: WalkCaches,
    pub(super) slots: Vec<AsidSlot>,
    pub(super) next_slot: usize,
    /// The mm whose page tables the CPU uses now, and its ASID slot.
    pub(super) loaded: Option<(MmId, u32)>,
    pub stats: TlbStats,
    /// Walk and second-level cycles not yet charged.
    pub(super) pending_cycles: u64,
    /// Time taken by shootdown handlers and ASID flushes, charged to the next access here.
    pub(super) stolen: SimDuration,
}

fn arrays(gs: &[ArrayGeometry]) -> Vec<Array> {
    gs.iter().map(|g| Array::new(g, g.sizes)).collect()
}

impl CpuTlb {
    pub(super) fn new(g: &TlbGeometry) -> CpuTlb {
        let (l2i, l2d) = match &g.l2 {
            SecondLevel::Unified(a) => (Vec::new(), arrays(a)),
            SecondLevel::Split { instr, data } => (arrays(instr), arrays(data)),
        };
        CpuTlb {
            itlb: arrays(&g.itlb),
            dtlb: arrays(&g.dtlb),
            l2i,
            l2d,
            pwc: WalkCaches::new(&g.pwc),
            slots: vec![AsidSlot::default(); g.asid_slots as usize],
            next_slot: 0,
            loaded: None,
            stats: TlbStats::new(),
            pending_cycles: 0,
            stolen: SimDuration::ZERO,
        }
    }

    fn all_arrays(&mut self) -> impl Iterator<Item = &mut Array> {
        self.itlb.iter_mut().chain(&mut self.dtlb).chain(&mut self.l2i).chain(&mut self.l2d)
    }

    pub(super) fn flush_asid(&mut self, asid: u32) {
        for a in self.all_arrays() {
            a.invalidate_asid(asid);
        }
        self.pwc.invalidate_asid(asid);
        self.stats.inc(TlbEvent::AsidFlushes);
    }

    pub(super) fn flush_va(&mut self, va: VirtAddr, asid: u32) {
        for a in self.all_arrays() {
            a.invalidate_va(va.0, asid);
        }
    }

    pub(super) fn flush_walk_caches(&mut self, asid: u32) {
        self.pwc.invalidate_asid(asid);
    }

    pub(super) fn slot_of(&self, mm: MmId) -> Option<u32> {
        self.slots.iter().position(|s| s.mm == Some(mm)).map(|i| i as u32)
    }

    /// Fills `va`'s entry at the deepest span the arrays of one level hold, down from `span`.
    pub(super) fn fill_level(level: &mut [Array], va: u64, span: usize, asid: u32, data: u64) {
        for s in (0..=span).rev() {
            if let Some(a) = level.iter_mut().find(|a| a.holds(s)) {
                let within = (va >> 12) & ((1u64 << (SPAN_SHIFTS[span] - 12)) - 1);
                let offset = within & !((1u64 << (SPAN_SHIFTS[s] - 12)) - 1);
                a.fill(va, s, asid, data + (offset << bits::PFN_SHIFT));
                return;
            }
        }
    }
}
