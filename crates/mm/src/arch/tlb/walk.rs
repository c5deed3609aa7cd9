//! The hardware page walk (Intel SDM Vol. 3A §4.5, §4.8 "Accessed and Dirty Flags"; AMD64 APM
//! Vol. 2 §5.3) and the TLB entries it makes.
//!
//! A lookup that misses both levels walks the simulated page tables, starting below the deepest
//! level that hits in the walk caches, so a walk reads one to four entries. A present PMD leaf
//! gives a 2 MiB entry, a PUD leaf a 1 GiB one; a level that holds no array for a page size
//! keeps the 4 KiB piece instead (AMD "smashes" 1 GiB pages this way). The walk sets the accessed
//! bit, and the dirty and soft-dirty bits for a store, as x86 hardware does; a store that hits an
//! entry whose dirty bit is clear sets the PTE's dirty bit too. A walk that ends at a missing or
//! forbidding entry fills nothing and is a page fault; a hit whose rights forbid the access
//! drops that address's entries first (hardware does so on every page fault).

use super::Access;
use super::TlbEvent;
use super::cpu::CpuTlb;
use super::geometry::PageSize;
use super::geometry::SPAN_SHIFTS;
use crate::pgtable::{Level, PageTables, Pte, Upper};
use crate::types::ids::PtId;
use simcore::{Pfn, VirtAddr};

/// Entry data bits below the pfn.
pub(super) mod bits {
    pub(in crate::arch::tlb) const WRITE: u64 = 1 << 0;
    pub(in crate::arch::tlb) const DIRTY: u64 = 1 << 1;
    pub(in crate::arch::tlb) const EXEC: u64 = 1 << 2;
    pub(in crate::arch::tlb) const PFN_SHIFT: u32 = 8;
}

/// The result of the page walk.
pub(super) struct Walked {
    pub(super) data: u64,
    pub(super) span: usize,
}

/// Reads the page tables for `va` below what the walk caches give, filling them; sets the
/// accessed (and for a store dirty) bits. `None` when the access must fault.
pub(super) fn walk(
    pt: &mut PageTables,
    pgd: PtId,
    c: &mut CpuTlb,
    asid: u32,
    va: u64,
    access: Access,
    ref_cycles: u64,
) -> Option<Walked> {
    let addr = VirtAddr(va);
    let mut start = (pgd, Level::Pgd);
    if let Some(cached) = c.pwc.lookup(va, asid) {
        start = cached;
        c.stats.inc(TlbEvent::WalkCacheHits);
    }
    let (mut table, mut level) = start;
    let mut refs = 0u64;
    let leaf = loop {
        refs += 1;
        let idx = level.index(addr);
        if level == Level::Pte {
            break Some((pt.pte(table, idx), table, idx, level));
        }
        match pt.upper(table, idx) {
            Upper::Table(next) => {
                c.pwc.fill(level, va, asid, next);
                table = next;
                level = level.below();
            }
            Upper::Leaf(e) => break Some((e, table, idx, level)),
            Upper::None => break None,
        }
    };
    let cycles = refs * ref_cycles;
    c.stats.add(TlbEvent::WalkRefs, refs);
    c.stats.add(TlbEvent::WalkCycles, cycles);
    c.pending_cycles += cycles;
    let (pte, table, idx, level) = leaf?;
    let allowed = pte.is_present()
        && pte.0 & Pte::USER != 0
        && (access != Access::Write || pte.write())
        && (access != Access::Exec || pte.0 & Pte::NX == 0);
    if !allowed {
        return None;
    }
    let set = if access.is_write() {
        Pte::ACCESSED | Pte::DIRTY | Pte::SOFT_DIRTY
    } else {
        Pte::ACCESSED
    };
    let updated = pte.with(set);
    // The accessed and dirty bits are written only when they change (hardware's locked update).
    if updated != pte {
        if level == Level::Pte {
            pt.set_pte(table, idx, updated);
        } else {
            pt.set_upper(table, idx, Upper::Leaf(updated));
        }
    }
    let pte = updated;
    Some(Walked { data: entry_data(pte), span: PageSize::of_level(level) as usize })
}

pub(super) fn entry_data(pte: Pte) -> u64 {
    let mut d = pte.pfn().0 << bits::PFN_SHIFT;
    if pte.write() {
        d |= bits::WRITE;
    }
    if pte.dirty() {
        d |= bits::DIRTY;
    }
    if pte.0 & Pte::NX == 0 {
        d |= bits::EXEC;
    }
    d
}

/// Whether an entry's rights allow `access`.
pub(super) fn permits(data: u64, access: Access) -> bool {
    match access {
        Access::Read => true,
        Access::Write => data & bits::WRITE != 0,
        Access::Exec => data & bits::EXEC != 0,
    }
}

/// The frame `va` reaches through an entry of span `span`.
pub(super) fn frame(data: u64, span: usize, va: u64) -> Pfn {
    let offset = (va >> 12) & ((1 << (SPAN_SHIFTS[span] - 12)) - 1);
    Pfn((data >> bits::PFN_SHIFT) + offset)
}
