//! Address spaces (`struct mm_struct`, `include/linux/mm_types.h`; `mm/mmap.c` for the layout,
//! Linux v6.8).
//!
//! An mm has its page-table root, its VMAs ordered by start address, `mmap_lock` (an engine
//! rwsem), `page_table_lock`, the RSS counters (`MM_FILEPAGES`, `MM_ANONPAGES`, `MM_SWAPENTS`,
//! `MM_SHMEMPAGES`; which one a folio counts in is `mm_counter`, an inline of `include/linux/mm.h`)
//! and `mm_cpumask` (the CPUs that have run it, which TLB shootdowns target).
//!
//! Layout: x86-64's top-down mmap layout with randomisation off (`norandmaps`): mappings are
//! placed below `mmap_base` in the highest gap that fits, so addresses are reproducible.

use crate::folio::{Folios, pg};
use crate::pgtable::{Level, TASK_SIZE};
use crate::types::ids::FileId;
use crate::types::ids::Pid;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use engine::{CpuId, RwSem, SpinLock};
use simcore::{Bytes, Pfn, VirtAddr};
use std::collections::{BTreeMap, BTreeSet};

/// RSS counter indices (`enum mm_counter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmCounter {
    FilePages = 0,
    AnonPages = 1,
    SwapEnts = 2,
    ShmemPages = 3,
}

/// `MMF_HAS_PINNED`: the mm has had pages pinned with FOLL_PIN.
pub const MMF_HAS_PINNED: u32 = 1 << 0;
/// `MMF_DISABLE_THP`: `PR_SET_THP_DISABLE` (inherited across fork, `MMF_INIT_MASK`).
pub const MMF_DISABLE_THP: u32 = 1 << 1;
/// `MMF_VM_HUGEPAGE`: the mm is on khugepaged's list.
pub const MMF_VM_HUGEPAGE: u32 = 1 << 2;

/// x86-64 `mmap_base` without randomisation: below a 128 MiB stack gap under `TASK_SIZE`.
pub const MMAP_BASE: u64 = TASK_SIZE - (128 << 20);
/// Lowest address `get_unmapped_area` hands out (`mmap_min_addr` rounded up).
pub const MMAP_MIN: u64 = 0x10000;

#[derive(Debug)]
pub struct MmStruct {
    pub owner: Pid,
    pub pgd: PtId,
    pub mmap_lock: RwSem,
    pub page_table_lock: SpinLock,
    /// VMAs by start address.
    pub vmas: BTreeMap<u64, VmaId>,
    pub rss: [u64; 4],
    /// Peak of the RSS sum (`hiwater_rss`).
    pub hiwater_rss: u64,
    pub flags: u32,
    pub cpumask: BTreeSet<CpuId>,
    pub exe_file: Option<FileId>,
    /// Page-table pages of this mm below the PGD, by the level of their entries
    /// ([`MmStruct::nr_pgtables`]; `mm_inc_nr_ptes`, `mm_inc_nr_pmds`, `mm_inc_nr_puds`). The
    /// kernel counts no PGD either.
    pub(crate) pgtables: [u64; 3],
    /// Page-table pages deposited for the huge PMDs of anonymous memory, by PMD slot, to be
    /// withdrawn when the PMD is split or zapped (`pgtable_trans_huge_deposit`). Counted in
    /// the PTE tables and `nr_page_table_pages`; only anonymous PMDs have one (x86 deposits none for
    /// file THPs or DAX).
    pub deposited: BTreeMap<(PtId, usize), Pfn>,
    /// `mm->def_flags`: `VM_NOHUGEPAGE` after `PR_SET_THP_DISABLE` before v4.13.
    pub def_flags: u64,
    /// `mm->start_brk` and `mm->brk`: where the heap begins and the program break
    /// (`brk.rs`), set by `exec`.
    pub start_brk: VirtAddr,
    pub brk: VirtAddr,
    /// `mm->ksm_zero_pages` (v6.6+): this mm's KSM-placed zero pages (`ksm/zero.rs`).
    pub ksm_zero_pages: u64,
}

impl MmStruct {
    fn pgtable_slot(level: Level) -> usize {
        assert!(level != Level::Pgd, "the PGD is not counted");
        level as usize - 1
    }

    /// Page-table pages of `level` (PTE, PMD or PUD tables) this mm holds.
    pub fn nr_pgtables(&self, level: Level) -> u64 {
        self.pgtables[MmStruct::pgtable_slot(level)]
    }

    /// Every page-table page below the PGD (`mm_pgtables_bytes` in pages).
    pub fn nr_pgtables_total(&self) -> u64 {
        self.pgtables.iter().sum()
    }

    /// A page table of `level` was allocated (`mm_inc_nr_ptes`/`pmds`/`puds`).
    pub fn pgtable_inc(&mut self, level: Level) {
        self.pgtables[MmStruct::pgtable_slot(level)] += 1;
    }

    /// A page table of `level` was freed.
    pub fn pgtable_dec(&mut self, level: Level) {
        let n = &mut self.pgtables[MmStruct::pgtable_slot(level)];
        *n = n.checked_sub(1).expect("page-table count underflow");
    }

    pub fn rss(&self, c: MmCounter) -> u64 {
        self.rss[c as usize]
    }

    pub(crate) fn add_rss(&mut self, c: MmCounter, n: u64) {
        self.rss[c as usize] += n;
        let total = self.rss_total();
        self.hiwater_rss = self.hiwater_rss.max(total);
    }

    pub(crate) fn sub_rss(&mut self, c: MmCounter, n: u64) {
        let v = &mut self.rss[c as usize];
        *v = v.checked_sub(n).unwrap_or_else(|| panic!("mm counter {c:?} below zero"));
    }

    /// Resident pages (file + anon + shmem).
    pub fn rss_total(&self) -> u64 {
        self.rss(MmCounter::FilePages)
            + self.rss(MmCounter::AnonPages)
            + self.rss(MmCounter::ShmemPages)
    }

    /// The VMA containing `addr`, if any (`vma_lookup`).
    pub fn vma_at(&self, addr: VirtAddr, end_of: impl Fn(VmaId) -> VirtAddr) -> Option<VmaId> {
        let (_, &id) = self.vmas.range(..=addr.0).next_back()?;
        (addr < end_of(id)).then_some(id)
    }

    /// VMAs overlapping `[start, end)`, in address order (the walk of `for_each_vma_range`,
    /// `include/linux/mm.h`): the one containing `start`, then those starting inside the range.
    /// Ids are not addresses: top-down placement gives a newer VMA a higher id and a lower
    /// address, so the order comes from the start-address map alone.
    pub fn vmas_in(
        &self,
        start: VirtAddr,
        end: VirtAddr,
        end_of: impl Fn(VmaId) -> VirtAddr,
    ) -> Vec<VmaId> {
        let first = self.vma_at(start, &end_of);
        let rest = self.vmas.range(start.0 + 1..end.0).map(|(_, &id)| id);
        let vmas: Vec<VmaId> = first.into_iter().chain(rest).collect();
        debug_assert!(vmas.is_sorted_by_key(|&id| end_of(id)), "VMAs out of address order");
        vmas
    }

    /// `get_unmapped_area`, top-down: the highest `len`-byte gap below `MMAP_BASE`, aligned to
    /// `align`, with `bounds` giving each VMA's `[start, end)`.
    pub fn unmapped_area(
        &self,
        len: Bytes,
        align: Bytes,
        bounds: impl Fn(VmaId) -> (VirtAddr, VirtAddr),
    ) -> Option<VirtAddr> {
        let mut ceiling = MMAP_BASE;
        for (_, &id) in self.vmas.range(..MMAP_BASE).rev() {
            let (start, end) = bounds(id);
            if let Some(a) = fit_below(ceiling, end.0.max(MMAP_MIN), len, align) {
                return Some(a);
            }
            ceiling = ceiling.min(start.0);
        }
        fit_below(ceiling, MMAP_MIN, len, align)
    }
}

/// The highest `align`-aligned start of `len` bytes in `[floor, ceiling)`.
fn fit_below(ceiling: u64, floor: u64, len: Bytes, align: Bytes) -> Option<VirtAddr> {
    let start = ceiling.checked_sub(len.as_u64())? & !(align.as_u64() - 1);
    (start >= floor).then_some(VirtAddr(start))
}

/// The RSS counter a folio's pages count in (`mm_counter`): anonymous, shmem (swap-backed page
/// cache) or file.
pub(crate) fn mm_counter(folios: &Folios, head: Pfn) -> MmCounter {
    if folios.is_anon(head) {
        MmCounter::AnonPages
    } else if folios.test(head, pg::SWAPBACKED) {
        MmCounter::ShmemPages
    } else {
        MmCounter::FilePages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_top_down() {
        assert_eq!(
            fit_below(0x10_0000, 0x1000, Bytes(0x2000), Bytes::PAGE),
            Some(VirtAddr(0xfe000))
        );
        assert_eq!(fit_below(0x3000, 0x2000, Bytes(0x2000), Bytes::PAGE), None);
        assert_eq!(fit_below(0x40_1000, 0, Bytes::PMD, Bytes::PMD), Some(VirtAddr(0x20_0000)));
    }
}
