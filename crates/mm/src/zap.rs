//! Unmapping pages and freeing page tables (`mm/memory.c` `zap_pte_range`, `unmap_vmas`,
//! `free_pgtables`, `unmap_mapping_range`; `mm/mmu_gather.c`; Linux v6.8).
//!
//! A zap clears the PTEs of a range under each PTE table's lock, moves a dirty PTE's state into
//! its page-cache page, drops the rmap and RSS counts, and — as the kernel's `mmu_gather` does —
//! frees the pages only after the TLB flush, so no CPU can still reach a freed frame.
//!
//! Guard markers (`madvise.rs`, v6.13) survive every zap but an unmap's and `exit_mmap`'s
//! (`ZAP_FLAG_DROP_MARKER`, which `unmap_vmas` passes): `MADV_DONTNEED`, `MADV_FREE`,
//! truncation and hole punching leave them (`zap_nonpresent_ptes`, mm/memory.c v6.13).
//!
//! `unmap_mapping_range` zaps every mapping of a file range found through `i_mmap` (truncation);
//! with `even_cows = false` it leaves private anonymous copies in place, with `true` (truncate) it
//! removes them too.
//!
//! Huge PMDs map DAX memory (the huge zero page and 2 MiB pmem extents, special mappings
//! without refcounts) or file THPs (`huge_memory.rs`): a zap that touches part of one clears all
//! of it and flushes its whole range, as `__split_huge_pmd` does for `vma_is_special_huge` VMAs
//! and file folios, whose faults refill the rest with PTEs; a file THP's reference is dropped
//! after the flush, like a page's. `split_huge_pmd_edges` clears those that straddle a VMA edge before the
//! VMA is split (`vma_adjust_trans_huge`).

use crate::arch::tlbflush::flush_tlb_range;
use crate::kernel::{Cx, KState};
use crate::memory::vm_normal_page;
use crate::mm_struct::mm_counter;
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use simcore::{Bytes, Pfn, VirtAddr};

/// Which pages a zap may remove (`struct zap_details`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ZapDetails {
    /// Only pages of this file (truncation); anonymous copies only if `even_cows`.
    pub file_only: Option<InodeId>,
    pub even_cows: bool,
    /// `ZAP_FLAG_DROP_MARKER`: guard markers go too (an unmap, `exit_mmap`); any other zap
    /// (`MADV_DONTNEED`, `MADV_GUARD_INSTALL`'s, truncation) leaves them.
    pub drop_markers: bool,
}

impl ZapDetails {
    /// `unmap_vmas`' details: everything goes, markers included.
    pub(crate) const UNMAP: ZapDetails =
        ZapDetails { file_only: None, even_cows: false, drop_markers: true };
}

/// Zaps `[start, end)` of `vma` (inside one VMA); flushes the TLB, then frees the pages.
pub(crate) async fn zap_vma_range(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    start: VirtAddr,
    end: VirtAddr,
    details: ZapDetails,
) {
    // `unmap_region`, `exit_mmap` and `zap_page_range_single` drain this CPU's LRU batches
    // before they zap (`lru.rs`).
    crate::lru::lru_add_drain(cx);
    if cx.st().vma(vma).vm_ops.is_hugetlb() {
        return crate::hugetlb::unmap_hugepage_range(cx, vma, start, end).await;
    }
    let mut freed: Vec<Pfn> = Vec::new();
    let mut cleared = 0;
    let (mut flush_start, mut flush_end) = (start, end);
    let mut addr = start;
    while addr < end {
        let next = (addr + Bytes::PMD).align_down(Bytes::PMD).min(end);
        let pmd = {
            let st = cx.st();
            st.pt.pmd_slot(st.mm(mm).pgd, addr).map(|(t, i)| (t, i, st.pt.upper(t, i)))
        };
        match pmd {
            Some((_, _, Upper::Table(table))) => {
                cleared += zap_pte_range(cx, vma, table, addr, next, details, &mut freed).await;
            }
            Some((pmd_table, idx, Upper::Leaf(_))) => {
                // Part of an anonymous PMD: split it, then zap the PTEs of the part.
                let partial = !addr.is_aligned(Bytes::PMD) || next < addr + Bytes::PMD;
                if partial && split_huge_pmd(cx, mm, addr).await {
                    continue;
                }
                let (n, folio) = zap_huge_pmd(cx, mm, pmd_table, idx).await;
                cleared += n;
                freed.extend(folio);
                flush_start = flush_start.min(addr.align_down(Bytes::PMD));
                flush_end = flush_end.max(addr.align_down(Bytes::PMD) + Bytes::PMD);
            }
            Some((_, _, Upper::None)) | None => {}
        }
        addr = next;
    }
    // Any cleared entry may be cached, the zero page's too (`tlb->end > tlb->start`).
    if cleared == 0 {
        return;
    }
    flush_tlb_range(cx, mm, flush_start, flush_end).await;
    cx.charge_n(Cost::PageFree, freed.len() as u64).await;
    let mut st = cx.st();
    for page in freed {
        let head = st.folios.head(page);
        st.put_folio_extra(head);
    }
}

/// Zaps the PTEs of `[start, end)` in `table`, a PTE table of `vma`; the pages it unmaps go to
/// `freed` (the `mmu_gather`'s batch), to be freed after the TLB flush.
async fn zap_pte_range(
    cx: &Cx,
    vma: VmaId,
    table: PtId,
    start: VirtAddr,
    end: VirtAddr,
    details: ZapDetails,
    freed: &mut Vec<Pfn>,
) -> u64 {
    let mm = cx.st().vma(vma).mm;
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    let mut cleared = 0;
    {
        let mut st = cx.st();
        // The large anonymous folio whose pages this batch unmapped (`folio_pte_batch`: the
        // kernel removes a run of PTEs of one folio at once, then decides its deferred split).
        let mut batch: Option<Pfn> = None;
        let mut addr = start;
        while addr < end {
            let idx = Level::Pte.index(addr);
            let pte = st.pt.pte(table, idx);
            addr = addr + Bytes::PAGE;
            if pte.is_none() {
                continue;
            }
            if pte.is_marker() {
                // `zap_nonpresent_ptes`: a guard marker stays unless markers are dropped.
                if details.drop_markers {
                    st.pt.set_pte(table, idx, Pte::NONE);
                    cleared += 1;
                }
                continue;
            }
            if pte.is_swap() {
                // `free_swap_and_cache`: the entry goes; a swap-cache folio nobody maps any more
                // leaves the cache (a file's swap entries, shmem's, are freed by truncation from
                // the page cache, `shmem.rs`).
                if details.file_only.is_some() && !details.even_cows {
                    continue;
                }
                st.zap_swap_pte(mm, table, idx);
                cleared += 1;
                continue;
            }
            let page = vm_normal_page(pte);
            if let (Some(p), Some(inode)) = (page, details.file_only) {
                let head = st.folios.head(p);
                let is_file_page = st.folios.mapping(head) == crate::folio::Mapping::File(inode);
                let cow_to_zap = details.even_cows && st.folios.is_anon(head);
                if !is_file_page && !cow_to_zap {
                    continue;
                }
            }
            st.pt.set_pte(table, idx, Pte::NONE);
            cleared += 1;
            st.ksm_might_unmap_zero_page(mm, pte);
            let Some(p) = page else { continue };
            st.zap_present_page((mm, vma), pte, p, &mut batch);
            freed.push(p);
        }
        if let Some(head) = batch {
            st.deferred_split_unmapped(head);
        }
    }
    cx.charge_n(Cost::PteUpdate, cleared).await;
    cleared
}

impl KState {
    /// `zap_present_ptes`' work on the page `page` whose PTE `pte` was just cleared: a file
    /// folio takes the PTE's dirty and young bits, the rmap loses the mapping (a large anonymous
    /// folio's deferred split is decided once per run of its pages, `batch`), the mapping's
    /// reference is kept until the TLB flush, and the RSS counter drops.
    fn zap_present_page(
        &mut self,
        (mm, vma): (MmId, VmaId),
        pte: Pte,
        page: Pfn,
        batch: &mut Option<Pfn>,
    ) {
        let head = self.folios.head(page);
        if !self.folios.is_anon(head) {
            if pte.dirty() {
                self.folio_mark_dirty(head);
            }
            if pte.young() && self.vma_has_recency_now(vma) {
                self.folio_mark_accessed(head);
                self.events.inc(crate::vmstat::MmEvent::ZapMarkAccessed);
            }
        }
        if let Some(unmapped) = self.rmap_unmap_pte(page)
            && let Some(previous) = batch.replace(unmapped)
            && previous != unmapped
        {
            self.deferred_split_unmapped(previous);
        }
        self.folios.mapping_to_extra(head);
        let counter = mm_counter(&self.folios, head);
        self.mm_mut(mm).sub_rss(counter, 1);
    }
}

/// `zap_huge_pmd`: clears a huge PMD under the PMD lock. Returns the entries cleared and, for
/// a file THP, the folio whose mapping reference the caller drops after the TLB flush (a special
/// PMD has none).
async fn zap_huge_pmd(cx: &Cx, mm: MmId, pmd_table: PtId, idx: usize) -> (u64, Option<Pfn>) {
    let ptl = cx.st().pt.ptl(pmd_table);
    let _g = ptl.lock(cx).await;
    let (cleared, folio) = {
        let mut st = cx.st();
        match st.pt.upper(pmd_table, idx) {
            Upper::Leaf(leaf) if let Some(folio) = st.zap_anon_pmd(mm, pmd_table, idx, leaf) => {
                (1, folio)
            }
            Upper::Leaf(leaf) if leaf.special() => {
                st.pt.set_upper(pmd_table, idx, Upper::None);
                (1, None)
            }
            Upper::Leaf(leaf) => {
                st.zap_file_pmd(mm, pmd_table, idx, leaf);
                st.folios.mapping_to_extra(leaf.pfn());
                (1, Some(leaf.pfn()))
            }
            _ => (0, None),
        }
    };
    cx.charge_n(Cost::PteUpdate, cleared).await;
    (cleared, folio)
}

/// `__split_huge_pmd` of the huge PMD mapping `addr` in `mm`, if any: an anonymous PMD (a THP
/// or the huge zero page) becomes a PTE table mapping the same pages (`huge_memory/anon.rs`);
/// for a DAX VMA or a file THP the PMD is only cleared (and its range flushed, then the
/// folio's reference dropped), and faults map the pages again. Returns whether the PMD now
/// points to a PTE table.
pub(crate) async fn split_huge_pmd(cx: &Cx, mm: MmId, addr: VirtAddr) -> bool {
    let slot = {
        let st = cx.st();
        st.pt
            .pmd_slot(st.mm(mm).pgd, addr)
            .filter(|&(t, i)| matches!(st.pt.upper(t, i), Upper::Leaf(_)))
    };
    let Some((pmd_table, idx)) = slot else { return false };
    let haddr = addr.align_down(Bytes::PMD);
    let ptl = cx.st().pt.ptl(pmd_table);
    let split = {
        let _g = ptl.lock(cx).await;
        let handle: &engine::Handle = cx;
        let mut st = cx.st();
        match st.pt.upper(pmd_table, idx) {
            Upper::Leaf(leaf) => st.split_anon_pmd(handle, mm, pmd_table, idx, leaf),
            _ => return false,
        }
    };
    if split {
        cx.charge_n(Cost::PteUpdate, 512).await;
        flush_tlb_range(cx, mm, haddr, haddr + Bytes::PMD).await;
        return true;
    }
    let (cleared, folio) = zap_huge_pmd(cx, mm, pmd_table, idx).await;
    if cleared > 0 {
        flush_tlb_range(cx, mm, haddr, haddr + Bytes::PMD).await;
    }
    if let Some(head) = folio {
        cx.st().put_folio_extra(head);
    }
    false
}

/// `vma_adjust_trans_huge`: splits the huge PMDs that `start` or `end` would cut, before VMAs are
/// split there.
pub(crate) async fn split_huge_pmd_edges(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    for edge in [start, end] {
        if !edge.is_aligned(Bytes::PMD) {
            split_huge_pmd(cx, mm, edge).await;
        }
    }
}

impl KState {
    /// Clears the swap entry at `idx` of PTE table `table` in `mm` (`free_swap_and_cache`): the
    /// entry goes; a swap-cache folio nobody maps any more leaves the cache.
    pub(crate) fn zap_swap_pte(&mut self, mm: MmId, table: PtId, idx: usize) {
        let (_, slot) = self.pt.pte(table, idx).swap_entry();
        self.pt.set_pte(table, idx, Pte::NONE);
        self.mm_mut(mm).sub_rss(crate::mm_struct::MmCounter::SwapEnts, 1);
        self.free_swap_and_cache(slot);
    }

    /// `free_pgtables`: frees the page tables under `[start, end)` that no VMA of `mm` still
    /// needs. The caller holds `mmap_lock` for write and has zapped the range. Only existing
    /// tables are visited.
    pub(crate) fn free_pgtables(&mut self, mm: MmId, start: VirtAddr, end: VirtAddr) {
        let pgd = self.mm(mm).pgd;
        self.free_tables_below(mm, pgd, Level::Pgd, VirtAddr(0), start, end);
        // The kernel's `freed_tables` flush: no walk cache may point at a freed table.
        self.tlb.flush_walk_caches(mm);
    }

    /// Frees the child tables of `table` (of `level`, covering addresses from `base`) inside
    /// `[start, end)` that no VMA overlaps, deepest first.
    fn free_tables_below(
        &mut self,
        mm: MmId,
        table: PtId,
        level: Level,
        base: VirtAddr,
        start: VirtAddr,
        end: VirtAddr,
    ) {
        let span = 1u64 << level.shift();
        let first = (start.0.max(base.0) - base.0) / span;
        let last = ((end.0 - 1).min(base.0 + (span << 9) - 1) - base.0) / span;
        for idx in first..=last {
            let Upper::Table(child) = self.pt.upper(table, idx as usize) else { continue };
            let lo = VirtAddr(base.0 + idx * span);
            let hi = lo + Bytes(span);
            if level.below() != Level::Pte {
                self.free_tables_below(mm, child, level.below(), lo, start, end);
            }
            if !self.mm(mm).vmas_in(lo, hi, |id| self.vma(id).end).is_empty() {
                continue;
            }
            let left = self.pt.table(child).used;
            assert_eq!(left, 0, "page table under {lo} outlives its VMAs with {left} entries");
            self.pt.set_upper(table, idx as usize, Upper::None);
            let frame = self.pt.free(child);
            self.free_pgtable_frame(frame);
            self.mm_mut(mm).pgtable_dec(level.below());
        }
    }
}

/// `unmap_mapping_range`: zaps every mapping of pages `[first, last)` of `inode`.
pub(crate) async fn unmap_mapping_range(
    cx: &Cx,
    inode: InodeId,
    first: u64,
    last: Option<u64>,
    even_cows: bool,
) {
    let lock = cx.st().inodes[inode].mapping.i_mmap_rwsem;
    let _g = lock.read(cx).await;
    let targets = cx.st().i_mmap_ranges(inode, first, last);
    let details = ZapDetails { file_only: Some(inode), even_cows, drop_markers: false };
    for (vma, start, end) in targets {
        let mm = cx.st().vma(vma).mm;
        zap_vma_range(cx, mm, vma, start, end, details).await;
    }
}

impl KState {
    /// The VMAs of `inode`'s `i_mmap` that map pages `[first, last)` (`None`: to the end), each
    /// with the address range it maps them at (`vma_interval_tree_foreach`).
    pub(crate) fn i_mmap_ranges(
        &self,
        inode: InodeId,
        first: u64,
        last: Option<u64>,
    ) -> Vec<(VmaId, VirtAddr, VirtAddr)> {
        self.inodes[inode]
            .mapping
            .i_mmap
            .iter()
            .filter_map(|&id| {
                let v = self.vma(id);
                let lo = first.max(v.pgoff);
                let hi = last.unwrap_or(u64::MAX).min(v.pgoff + (v.len().as_u64() >> 12));
                // A VMA wholly after the range has `hi` below its own offset: no range.
                (lo < hi).then(|| {
                    let end = v.start + Bytes((hi - v.pgoff) << 12);
                    (id, v.address_of(lo).expect("in range"), end)
                })
            })
            .collect()
    }
}
