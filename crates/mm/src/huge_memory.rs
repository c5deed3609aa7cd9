//! Read-only file THPs: 2 MiB page-cache folios mapped by one PMD (`mm/memory.c` `do_set_pmd`;
//! `mm/filemap.c` `filemap_map_pmd`; `mm/huge_memory.c` `file_thp_enabled`,
//! `__split_huge_pmd_locked`, `zap_huge_pmd`; `mm/rmap.c` `folio_add_file_rmap_pmd`; `fs/open.c`
//! `do_dentry_open`; CONFIG_READ_ONLY_THP_FOR_FS, Linux v5.4-v6.8).
//!
//! Such folios come only from khugepaged's or `MADV_COLLAPSE`'s `collapse_file`
//! (`khugepaged/file.rs`), which counts them in the page cache, in `nr_file_hugepages` and in the
//! mapping's `nr_thps`. `file_huge_fault` is the page cache's `huge_fault` (`VmOps::PageCache`
//! in `vm_ops.rs`): a read or instruction fetch that faults on an empty PMD whose 2 MiB-aligned
//! range lies inside the VMA and the file, at a file offset of the same 2 MiB colour
//! (`thp_vma_suitable_order`), maps the THP cached there, if any, with one PMD leaf
//! (`filemap_map_pmd` → `do_set_pmd`: entire mapcount, `nr_file_pmdmapped`, 512 pages of
//! `RssFile`, `thp_file_mapped`; smaps shows it as `FilePmdMapped`). Otherwise the fault goes on
//! at the PTE level, at no cost; a PMD whose PTE table exists maps the folio's pages with PTEs,
//! as `filemap_map_pages` does.
//!
//! A zap, munmap, mprotect or madvise that covers part of such a PMD splits it, which for a file
//! folio means clearing it (the dirty and young bits pass to the folio) and dropping its
//! mapping; later faults map the pages that remain with PTEs. A write fault on one (after
//! `mprotect(PROT_WRITE)` of a private mapping) splits it too, then copies the 4 KiB page.
//! Reclaim unmaps the PMD the same way (`TTU_SPLIT_HUGE_PMD`) and evicts the whole folio; it
//! never splits the folio itself. Opening the file for write drops its page cache if it holds
//! THPs counted in `nr_thps` (`do_dentry_open`; a file system with large folios, XFS from v5.18
//! and ext4 from v6.16, counts none there and keeps them, `fs/ops.rs` `large_folios`): `unmap_mapping_range` of the shared mappings and
//! `truncate_inode_pages` from v5.16 (`open_write_truncate = keep_private`, "mm, thp: fix
//! incorrect unmap behavior for private pages", 8468e937df1f), `truncate_pagecache` (private COW
//! copies too) before; from v5.16 under `invalidate_lock` ("mm, thp: lock filemap when
//! truncating page cache", 55fc0d917467). The opener loads `nr_thps` after its `i_writecount`
//! store and `collapse_file` loads `i_writecount` after its `nr_thps` store, so one of the two
//! always sees the other (seed 000's `smp_mb()` pair; `khugepaged/file.rs`). The bug that lock
//! fixed, two openers truncating at once until one's lockless lookup met a slot of a THP the
//! other was emptying and handed its tail page to `truncate_inode_page`
//! (`VM_BUG_ON_PAGE(PageTail)`), arises on v5.4-v5.15 (`truncate.rs`,
//! `scenarios/races/thp-two-openers.toml`).
//!
//! shmem's THPs take the same paths (`shmem.rs`: a fault may also allocate one, and a shared
//! write maps it writable at once); their PMD mappings count in `nr_shmem_pmdmapped`
//! (`ShmemPmdMapped`) instead of `nr_file_pmdmapped`.
//!
//! Approximations: no deposited page table (x86 needs none for file THPs), no PMD-level `MADV_COLD`, `clear_refs`
//! or multi-gen LRU page-table aging (they visit PTE tables only), and a fork does not copy the
//! PMD (the child refaults, as for any file VMA without anonymous pages); v6.12's refusal of
//! `do_set_pmd` in VMAs with THP disabled is not modelled.

pub(crate) mod anon;
pub mod policy;
pub mod split;

use crate::era::{FileThp, OpenWriteTruncate, ThpWriterBarrier};
use crate::errno::VmFault;
use crate::filemap::{folio_unlock, lock_faulted_folio};
use crate::folio::pg;
use crate::kernel::{Cx, KState};
use crate::memory::{
    FaultKind, FaultOutcome, Vmf, outcome_of, pmd_install_lock, pte_bits, wants_writenotify,
};
use crate::mm_struct::mm_counter;
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::truncate::truncate_inode_pages_range;
use crate::types::huge_mm::{MTHP_MIN_ORDER, MthpStat};
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use crate::zap::{split_huge_pmd, unmap_mapping_range};
use simcore::{Bytes, Order, Pfn, VirtAddr};

/// Pages in a PMD-sized folio (`HPAGE_PMD_NR`).
pub(crate) const HPAGE_PMD_NR: u64 = 512;

/// Allocates a PMD-sized folio (`vma_alloc_folio` with the THP gfp mask), charging the
/// allocation and its per-page work; it reclaims directly only when `may_reclaim` (what
/// `defrag`, or the collapser, allows). The caller counts the success or fallback in its own
/// counter (`thp_fault_*`, `thp_file_*`, `thp_collapse_*`).
pub(crate) async fn alloc_pmd_folio(cx: &Cx, may_reclaim: bool) -> Option<Pfn> {
    crate::page_alloc::alloc_thp_folio(cx, Order::PMD, may_reclaim).await.ok()
}

impl KState {
    /// `count_mthp_stat`: one more `stat` in the per-size counters of `order` (order 0 and orders
    /// without a `hugepages-<N>kB/` directory count nothing; which files show them is the era's,
    /// `huge_memory/policy.rs`).
    pub(crate) fn count_mthp_stat(&mut self, order: Order, stat: MthpStat) {
        if let Some(row) = self.thp.mthp_stats.get_mut(usize::from(order.0))
            && order.0 >= MTHP_MIN_ORDER
        {
            row[stat as usize] += 1;
        }
    }
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
        if !i.fs.pmd_mappable_thps() || haddr < v.start || haddr + Bytes::PMD > v.end {
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

    /// The PMD-sized folio cached at `index` of `inode`, if one starts there.
    fn cached_thp(&self, inode: InodeId, index: u64) -> Option<Pfn> {
        let head = *self.inodes[inode].mapping.pages.get(&index)?;
        (self.folios.order(head) == Order::PMD).then_some(head)
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
        let counter = mm_counter(&self.folios, head);
        self.mm_mut(mm).sub_rss(counter, HPAGE_PMD_NR);
    }
}

/// The PMD level of a fault in a page-cache VMA (the page cache's `huge_fault`:
/// `create_huge_pmd`, `wp_huge_pmd`, `huge_pmd_set_accessed` for file THPs): `None` when the
/// fault goes on at the PTE level.
pub(crate) async fn file_huge_fault(vmf: &Vmf<'_>) -> Result<Option<FaultOutcome>, VmFault> {
    let (cx, mm, addr) = (vmf.cx, vmf.mm, vmf.address);
    let (pmd_table, entry) = (vmf.pmd, vmf.orig_pmd);
    match entry {
        Upper::Table(_) => Ok(None),
        Upper::Leaf(_) if vmf.kind != FaultKind::Read => {
            // `do_huge_pmd_wp_page` on a file folio: split, and copy at the PTE level.
            split_huge_pmd(cx, mm, addr).await;
            Ok(None)
        }
        Upper::Leaf(leaf) => Ok(Some(huge_pmd_set_accessed(vmf, pmd_table, leaf).await)),
        Upper::None if vmf.kind == FaultKind::Read => filemap_map_pmd(vmf, pmd_table).await,
        // A shared write maps a shmem THP writable at once (`finish_fault`'s `do_set_pmd`).
        Upper::None if shmem_shared(&cx.st(), vmf.vma) => filemap_map_pmd(vmf, pmd_table).await,
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

/// Whether `vma` is a shared mapping of a shmem file.
fn shmem_shared(st: &KState, vma: VmaId) -> bool {
    st.vma(vma).is_shared() && st.vma_shmem_inode(vma).is_some()
}

/// `filemap_map_pmd` for a fault on an empty PMD (a read, or a shared write of shmem): maps the
/// THP cached for the range, if any, or for shmem one it may allocate (`shmem.rs`); `None` (the
/// PTE level) otherwise.
async fn filemap_map_pmd(vmf: &Vmf<'_>, pmd_table: PtId) -> Result<Option<FaultOutcome>, VmFault> {
    let cx = vmf.cx;
    let Some((inode, index)) = cx.st().thp_fault_target(vmf.vma, vmf.address) else {
        return Ok(None);
    };
    loop {
        let Some(head) = cx.st().cached_thp(inode, index) else {
            if crate::shmem::shmem_alloc_huge(vmf, inode, index).await {
                continue;
            }
            return Ok(None); // nothing to map: the PTE level, at no cost
        };
        cx.charge(Cost::PageCacheLookup).await;
        if lock_faulted_folio(cx, inode, head, index + HPAGE_PMD_NR, false).await {
            let mapped = do_set_pmd(vmf, pmd_table, head).await;
            folio_unlock(cx, head);
            return Ok(mapped.then_some(outcome_of(false)));
        }
        // Truncated while we slept: look again.
    }
}

/// `do_set_pmd`: maps the locked THP `head` over the fault's PMD with one leaf (dirty for a
/// write fault, which is a shared one), handing the caller's reference to the mapping; false
/// (reference dropped) when the PMD is no longer empty.
async fn do_set_pmd(vmf: &Vmf<'_>, pmd_table: PtId, head: Pfn) -> bool {
    let cx = vmf.cx;
    let idx = Level::Pmd.index(vmf.address);
    let _g = pmd_install_lock(vmf, pmd_table).await;
    let mut st = cx.st();
    if st.pt.upper(pmd_table, idx) != Upper::None {
        st.put_folio_extra(head);
        return false;
    }
    let write = vmf.kind.write();
    if write {
        st.folio_mark_dirty(head);
    }
    st.set_file_pmd(vmf.mm, vmf.vma, (pmd_table, idx), head, write);
    true
}

impl KState {
    /// Maps the file THP `head` at the empty slot `idx` of `pmd_table` in `vma` of `mm` with one
    /// leaf (`do_set_pmd`, `set_huge_pmd`), handing the caller's extra reference to the
    /// mapping. The leaf is writable, as `finish_fault` makes a PTE, for a write (then also
    /// dirty) or in a shared writable mapping without write-notify (shmem's: `vm_page_prot` is
    /// writable there).
    pub(crate) fn set_file_pmd(
        &mut self,
        mm: MmId,
        vma: VmaId,
        (pmd_table, idx): (PtId, usize),
        head: Pfn,
        write: bool,
    ) {
        let flags = self.vma(vma).flags;
        let shared_writable = flags.has(VmFlags::SHARED) && flags.has(VmFlags::WRITE);
        let writable = write || (shared_writable && !wants_writenotify(self, vma));
        self.folios.extra_to_mapping(head);
        self.rmap_add_pmd(head);
        let counter = mm_counter(&self.folios, head);
        self.mm_mut(mm).add_rss(counter, HPAGE_PMD_NR);
        let leaf = Pte::new(head, pte_bits(flags, writable, write) | Pte::PSE);
        self.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf));
        self.vmstat.inc(VmStat::ThpFileMapped);
    }
}

/// The load an opener for write makes of `nr_thps` before its `i_writecount` store is visible,
/// under the broken `thp_writer_barrier = reordered` only (`None` otherwise): the opener's half
/// of the Dekker pair with `collapse_file`'s writer check (`khugepaged/file.rs`).
pub(crate) async fn thps_seen_before_open(cx: &Cx, inode: InodeId) -> Option<bool> {
    if cx.kernel().switches.thp_writer_barrier != ThpWriterBarrier::Reordered {
        return None;
    }
    let seen = cx.st().inodes[inode].mapping.nr_thps > 0;
    cx.preempt_point().await;
    Some(seen)
}

/// The THP part of `do_dentry_open` for a file just opened for write (its `i_writecount`
/// raised): if its page cache holds THPs, drop the whole page cache (the shared mappings
/// first), as the era does. `seen` is the early load of `thps_seen_before_open`; without it the
/// opener may be preempted between its store and its load, as the kernel's may.
pub(crate) async fn open_for_write_drop_thps(cx: &Cx, inode: InodeId, seen: Option<bool>) {
    if seen.is_none() && cx.st().inodes[inode].fs.read_only_thps() {
        cx.preempt_point().await;
    }
    if !seen.unwrap_or_else(|| cx.st().inodes[inode].mapping.nr_thps > 0) {
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
