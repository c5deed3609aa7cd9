//! Read-only file THPs for executable text: 2 MiB page-cache folios mapped by one PMD
//! (`mm/memory.c` `do_set_pmd`; `mm/filemap.c` `filemap_map_pmd`; `mm/huge_memory.c`
//! `file_thp_enabled`, `__split_huge_pmd_locked`, `zap_huge_pmd`; `mm/rmap.c`
//! `folio_add_file_rmap_pmd`; `fs/open.c` `do_dentry_open`; CONFIG_READ_ONLY_THP_FOR_FS,
//! Linux v5.4-v6.8).
//!
//! `file_huge_fault` is the page cache's `huge_fault` (`VmOps::PageCache` in `vm_ops.rs`): with
//! the `exec_text_thp = fault` switch, a read or instruction fetch that faults on an empty PMD of
//! an eligible VMA gets the whole 2 MiB as one order-9 page-cache folio: read from the
//! device with one request, counted in the page cache, in `nr_file_hugepages` and in the
//! mapping's `nr_thps`, and mapped by one PMD leaf (entire mapcount, `nr_file_pmdmapped`,
//! 512 pages of `RssFile`, `thp_file_mapped`; smaps shows it as `FilePmdMapped`). Eligible, as
//! READ_ONLY_THP_FOR_FS has it for khugepaged: a `VM_EXEC` mapping without `VM_WRITE` of a
//! regular file on the disk file system that nobody has open for write (under
//! `file_thp = denywrite`, v5.12 and before, only `VM_DENYWRITE` mappings), whose 2 MiB-aligned
//! range around the address lies inside the VMA and inside the file, at a file offset of the
//! same 2 MiB colour (`transhuge_vma_suitable`). Otherwise, or when the range already holds
//! small folios, or no order-9 block is free, the fault goes on with 4 KiB pages; a PMD whose
//! PTE table exists maps the folio's pages with PTEs, as `filemap_map_pages` does.
//!
//! A zap, munmap, mprotect or madvise that covers part of such a PMD splits it, which for a file
//! folio means clearing it (the dirty and young bits pass to the folio) and dropping its
//! mapping; later faults map the pages that remain with PTEs. A write fault on one (after
//! `mprotect(PROT_WRITE)` of a private mapping) splits it too, then copies the 4 KiB page.
//! Reclaim unmaps the PMD the same way (`TTU_SPLIT_HUGE_PMD`) and evicts the whole folio; it
//! never splits the folio itself. Opening the file for write drops its page cache if it holds
//! THPs (`do_dentry_open`): `unmap_mapping_range` of the shared mappings and
//! `truncate_inode_pages` from v5.16 (`open_write_truncate = keep_private`), `truncate_pagecache`
//! (private COW copies too) before. The fault re-checks `i_writecount` in the step that inserts
//! the folio and counts it in `nr_thps`, and the opener checks `nr_thps` after taking write
//! access, so one of the two always sees the other (the pairing `collapse_file` has).
//!
//! Approximations: the kernels of every era get such folios from khugepaged's `collapse_file`
//! (or, on file systems with large folios, from `page_cache_ra_order` under `VM_HUGEPAGE`), not
//! from the first fault; `fault` stands for a collapse already done, and is never set by a
//! kernel era. No `thp_file_alloc`/`thp_file_fallback` counts (those are shmem's), no deposited
//! page table (x86 needs none for file THPs), no PMD-level `MADV_COLD`, `clear_refs` or
//! multi-gen LRU page-table aging (they visit PTE tables only), and a fork does not copy the
//! PMD (the child refaults, as for any file VMA without anonymous pages).

pub(crate) mod anon;
pub mod policy;

use crate::era::{ExecTextThp, FileThp, OpenWriteTruncate};
use crate::errno::VmFault;
use crate::filemap::{folio_unlock, lock_faulted_folio, read_folios};
use crate::folio::{InodeId, pg};
use crate::kernel::{Cx, KState};
use crate::memory::{
    FaultKind, FaultOutcome, Vmf, fault_pmd, mm_counter, outcome_of, pmd_install_lock, pte_bits,
};
use crate::mm_struct::MmId;
use crate::pgtable::{Level, PtId, Pte, Upper};
use crate::sim::cost::Cost;
use crate::truncate::truncate_inode_pages_range;
use crate::vma::{VmFlags, VmaId};
use crate::vmscan::alloc_folio;
use crate::vmstat::VmStat;
use crate::zap::{split_huge_pmd, unmap_mapping_range};
use simcore::{Bytes, Order, Pfn, VirtAddr};

/// Pages in a PMD-sized folio (`HPAGE_PMD_NR`).
const HPAGE_PMD_NR: u64 = 512;

/// What the page cache holds over a PMD-aligned range of a file.
enum Cached {
    /// Nothing: a THP can be read there.
    Empty,
    /// A PMD-sized folio starting at the range's first index.
    Thp(Pfn),
    /// Small folios (only khugepaged could collapse them).
    Small,
}

impl KState {
    /// The file and the PMD-aligned page index a THP at `addr` of `vma` would cover, when the
    /// aligned range lies inside the VMA and the file at a file offset of the same 2 MiB colour
    /// (`thp_vma_suitable_order`, which `do_set_pmd` asks).
    fn thp_fault_target(&self, vma: VmaId, addr: VirtAddr) -> Option<(InodeId, u64)> {
        let v = self.vma(vma);
        let inode = self.file(v.file?).inode;
        let i = &self.inodes[inode];
        let haddr = addr.align_down(Bytes::PMD);
        if !i.fs.read_only_thps() || haddr < v.start || haddr + Bytes::PMD > v.end {
            return None;
        }
        let index = v.page_index(haddr);
        (index.is_multiple_of(HPAGE_PMD_NR) && index + HPAGE_PMD_NR <= i.size_pages())
            .then_some((inode, index))
    }

    /// `file_thp_enabled` (CONFIG_READ_ONLY_THP_FOR_FS) in the `file_thp` era: a mapping of a
    /// regular file on the disk file system that nobody has open for write, and under
    /// `denywrite` a `VM_DENYWRITE` mapping, under `exec_not_written` a `VM_EXEC` one.
    pub(crate) fn file_thp_enabled(&self, vma: VmaId, file_thp: FileThp) -> bool {
        let v = self.vma(vma);
        let Some(file) = v.file else { return false };
        let i = &self.inodes[self.file(file).inode];
        let by_era = match file_thp {
            FileThp::Denywrite => v.flags.has(VmFlags::DENYWRITE),
            FileThp::ExecNotWritten => v.flags.has(VmFlags::EXEC),
            FileThp::NotWritten => true,
        };
        i.fs.read_only_thps() && by_era && !i.is_open_for_write()
    }

    /// What the page cache of `inode` holds at `[index, index + 512)`.
    fn cached_thp(&self, inode: InodeId, index: u64) -> Cached {
        // Large folios are only ever PMD-aligned THPs, so none can start before `index` and
        // reach into the range.
        match self.inodes[inode].mapping.pages.range(index..index + HPAGE_PMD_NR).next() {
            None => Cached::Empty,
            Some((&at, &head)) if at == index && self.folios.order(head) == Order::PMD => {
                Cached::Thp(head)
            }
            Some(_) => Cached::Small,
        }
    }

    /// Whether a THP may still be added at `index` of `inode`: no writer, inside the file.
    fn thp_insert_allowed(&self, inode: InodeId, index: u64) -> bool {
        let i = &self.inodes[inode];
        !i.is_open_for_write() && index + HPAGE_PMD_NR <= i.size_pages()
    }

    /// Clears the PMD leaf `leaf` (at `idx` of `table` in `mm`) that maps a file THP, as a zap
    /// or a split does: the dirty and young bits pass to the folio, the rmap and RSS counts go.
    /// The mapping's folio reference is left to the caller (dropped at once, or after the TLB
    /// flush).
    pub(crate) fn zap_file_pmd(&mut self, mm: MmId, table: PtId, idx: usize, leaf: Pte) {
        let head = leaf.pfn();
        self.pt.set_upper(table, idx, Upper::None);
        if leaf.dirty() {
            self.folio_mark_dirty(head);
        }
        if leaf.young() {
            self.folios.set(head, pg::REFERENCED);
        }
        self.rmap_remove_pmd(head);
        let counter = mm_counter(self, head);
        self.mm_mut(mm).sub_rss(counter, HPAGE_PMD_NR);
    }
}

/// The PMD level of a fault in a page-cache VMA (the page cache's `huge_fault`:
/// `create_huge_pmd`, `wp_huge_pmd`, `huge_pmd_set_accessed` for file THPs): `None` when the
/// fault goes on at the PTE level.
pub(crate) async fn file_huge_fault(vmf: &Vmf<'_>) -> Result<Option<FaultOutcome>, VmFault> {
    let (cx, mm, addr) = (vmf.cx, vmf.mm, vmf.address);
    let (pmd_table, entry) = fault_pmd(vmf).await?;
    match entry {
        Upper::Table(_) => Ok(None),
        Upper::Leaf(_) if vmf.kind != FaultKind::Read => {
            // `do_huge_pmd_wp_page` on a file folio: split, and copy at the PTE level.
            split_huge_pmd(cx, mm, addr).await;
            Ok(None)
        }
        Upper::Leaf(leaf) => Ok(Some(huge_pmd_set_accessed(vmf, pmd_table, leaf).await)),
        Upper::None if vmf.kind == FaultKind::Read => text_thp_fault(vmf, pmd_table).await,
        Upper::None => Ok(None),
    }
}

/// `huge_pmd_set_accessed`: a fault on a PMD leaf that is already there (another CPU mapped it,
/// or only the accessed bit was missing) marks it young, and dirty for a write it allows.
pub(crate) async fn huge_pmd_set_accessed(
    vmf: &Vmf<'_>,
    pmd_table: PtId,
    leaf: Pte,
) -> FaultOutcome {
    let (cx, idx, write) = (vmf.cx, Level::Pmd.index(vmf.address), vmf.kind.write());
    let ptl = cx.st().pt.ptl(pmd_table);
    let _g = ptl.lock(cx).await;
    let mut st = cx.st();
    if st.pt.upper(pmd_table, idx) == Upper::Leaf(leaf) {
        let bits = if write { Pte::ACCESSED | Pte::DIRTY } else { Pte::ACCESSED };
        st.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf.with(bits)));
    }
    FaultOutcome::Minor
}

/// A read fault on an empty PMD: maps the range's THP, reading it first if the page cache has
/// nothing there; `None` (the 4 KiB path) when the switch is off or the range is not eligible.
async fn text_thp_fault(vmf: &Vmf<'_>, pmd_table: PtId) -> Result<Option<FaultOutcome>, VmFault> {
    let cx = vmf.cx;
    let switches = cx.kernel().switches;
    let Some((inode, index)) = cx.st().thp_fault_target(vmf.vma, vmf.address) else {
        return Ok(None);
    };
    let may_read = switches.exec_text_thp == ExecTextThp::Fault
        && cx.st().file_thp_enabled(vmf.vma, switches.file_thp);
    if !may_read && !matches!(cx.st().cached_thp(inode, index), Cached::Thp(_)) {
        return Ok(None); // nothing to map: the PTE level, at no cost
    }
    let Some((head, major)) = filemap_get_thp(cx, inode, index, may_read).await? else {
        return Ok(None);
    };
    let mapped = do_set_pmd(vmf, pmd_table, head).await;
    folio_unlock(cx, head);
    Ok(mapped.then_some(outcome_of(major)))
}

/// Finds the THP at `index` of `inode`, or reads one (one device request for 2 MiB); returns
/// it locked, with a reference for the caller, and whether it was read. `None` when small
/// folios are in the way, no order-9 folio can be had, or the file became ineligible.
async fn filemap_get_thp(
    cx: &Cx,
    inode: InodeId,
    index: u64,
    may_read: bool,
) -> Result<Option<(Pfn, bool)>, VmFault> {
    let mut major = false;
    loop {
        cx.charge(Cost::PageCacheLookup).await;
        let cached = cx.st().cached_thp(inode, index);
        match cached {
            Cached::Small => return Ok(None),
            Cached::Empty => {
                if !may_read || !cx.st().thp_insert_allowed(inode, index) {
                    return Ok(None);
                }
                cx.charge(Cost::PageAlloc).await;
                cx.charge_n(Cost::PageAllocHighOrderPerPage, HPAGE_PMD_NR).await;
                let Some(head) = alloc_folio(cx, Order::PMD).await else { return Ok(None) };
                {
                    let mut st = cx.st();
                    let free = matches!(st.cached_thp(inode, index), Cached::Empty);
                    if !free || !st.thp_insert_allowed(inode, index) {
                        st.put_folio_extra(head);
                        continue;
                    }
                    // Inserted and counted in `nr_thps` in the same step that saw no writer.
                    st.folios.set(head, pg::LOCKED);
                    st.page_cache_insert(inode, index, head, false, cx.in_lru_fault());
                    st.put_folio_extra(head); // the allocation's; the cache holds its own
                }
                read_folios(cx, inode, &[(index, head)]).await;
                major = true;
            }
            Cached::Thp(head) => {
                if !lock_faulted_folio(cx, inode, head, index + HPAGE_PMD_NR, major).await {
                    continue; // truncated while we slept: look again
                }
                return Ok(Some((head, major)));
            }
        }
    }
}

/// `do_set_pmd`: maps the locked THP `head` over the fault's PMD with one read-only leaf,
/// handing the caller's reference to the mapping; false (reference dropped) when the PMD is no
/// longer empty.
async fn do_set_pmd(vmf: &Vmf<'_>, pmd_table: PtId, head: Pfn) -> bool {
    let cx = vmf.cx;
    let idx = Level::Pmd.index(vmf.address);
    let _g = pmd_install_lock(vmf, pmd_table).await;
    let mut st = cx.st();
    if st.pt.upper(pmd_table, idx) != Upper::None {
        st.put_folio_extra(head);
        return false;
    }
    st.set_file_pmd(vmf.mm, vmf.vma, (pmd_table, idx), head);
    true
}

impl KState {
    /// Maps the file THP `head` at the empty slot `idx` of `pmd_table` in `vma` of `mm` with one
    /// read-only leaf (`do_set_pmd`, `set_huge_pmd`), handing the caller's extra reference to
    /// the mapping.
    pub(crate) fn set_file_pmd(
        &mut self,
        mm: MmId,
        vma: VmaId,
        (pmd_table, idx): (PtId, usize),
        head: Pfn,
    ) {
        let flags = self.vma(vma).flags;
        self.folios.extra_to_mapping(head);
        self.rmap_add_pmd(head);
        let counter = mm_counter(self, head);
        self.mm_mut(mm).add_rss(counter, HPAGE_PMD_NR);
        let leaf = Pte::new(head, pte_bits(flags, false, false) | Pte::PSE);
        self.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf));
        self.vmstat.inc(VmStat::ThpFileMapped);
    }
}

/// The THP part of `do_dentry_open` for a file just opened for write: if its page cache holds
/// THPs, drop the whole page cache (the shared mappings first), as the era does.
pub(crate) async fn open_for_write_drop_thps(cx: &Cx, inode: InodeId) {
    if cx.st().inodes[inode].mapping.nr_thps == 0 {
        return;
    }
    match cx.kernel().switches.open_write_truncate {
        OpenWriteTruncate::KeepPrivate => {
            let invalidate = cx.st().inodes[inode].mapping.invalidate_lock;
            let _inv = invalidate.write(cx).await;
            unmap_mapping_range(cx, inode, 0, None, false).await;
            truncate_inode_pages_range(cx, inode, 0, None).await;
        }
        OpenWriteTruncate::All => {
            // `truncate_pagecache(inode, 0)`: private COW copies go as well.
            unmap_mapping_range(cx, inode, 0, None, true).await;
            truncate_inode_pages_range(cx, inode, 0, None).await;
            unmap_mapping_range(cx, inode, 0, None, true).await;
        }
    }
}
