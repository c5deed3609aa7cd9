//! `MADV_FREE` (`mm/madvise.c` `madvise_free_single_vma` and `madvise_free_pte_range`,
//! `mm/swap.c` `folio_mark_lazyfree`, Linux v6.8; v4.5-v4.11 as `era::lazyfree_on_anon_lru`
//! describes; the other advice is dispatched by `mmap::do_madvise`).
//!
//! `MADV_FREE` (v4.5, 854e9ed09ded) tells the kernel that the anonymous pages of a range may be
//! dropped instead of swapped: each present page of a private anonymous VMA that only this
//! mapping maps has its PTE made clean and old and its folio clean. From v4.12 it goes to the
//! inactive *file* LRU as a lazyfree folio (no longer swap-backed, f7ad2a6cb9f7, counted in
//! `pglazyfree`). Reclaim then discards it, without swap, unless it was written again
//! (`try_to_unmap_one` finds the PTE dirty: the folio becomes swap-backed again and stays;
//! `pglazyfreed` counts the discarded pages). Until reclaim, a read returns the old data and a
//! write keeps the new; after it, the page reads zeros. Swap entries in the range are freed at
//! once (their data is gone). A VMA that is not private anonymous (file, shared, hugetlb) or is
//! `VM_LOCKED`/`VM_PFNMAP` is EINVAL, found VMA by VMA in address order; a hole is ENOMEM.
//!
//! v4.5-v4.11 (`era::lazyfree_on_anon_lru`): the advice is `MADV_DONTNEED` while no swap slot is
//! free (`mmap.rs`); otherwise the folio stays swap-backed on the anon LRU, and an active one
//! whose PTE was young or dirty is deactivated (`deactivate_page`, to the head of the inactive
//! anon list, `pgdeactivate`). Reclaim discards it with `TTU_LZFREE` after giving it a swap slot
//! (`vmscan.rs`, `rmap.rs`): as the anon LRU is scanned only with swap, and the slot is needed,
//! these kernels free lazyfree pages only while swap has room.
//!
//! Approximations: large folios are left as they are (the kernel splits a PTE-mapped large
//! folio or marks a wholly covered PMD-mapped THP lazyfree; mmsim cannot reclaim anonymous THPs
//! yet), PMDs cut by the range's edges are split first; a folio in the swap cache is skipped
//! (the kernel frees its swap slot first when it can). A folio mapped more than once is left
//! as it is in every era (v4.5-v4.11 still cleaned and deactivated its PTE, keeping only its
//! `PG_dirty`; what reclaim then did depended on the order of the rmap walk).
//!
//! `MADV_REMOVE` (`madvise_remove`) punches a hole in the file behind a shared writable mapping:
//! `vfs_fallocate(PUNCH_HOLE | KEEP_SIZE)` over the range's file offsets, VMA by VMA, so the
//! pages and blocks go from the file and every mapping of it (tmpfs, hugetlbfs and disk file
//! systems alike). EINVAL on an anonymous or `VM_LOCKED` VMA (and a hugetlb one up to v4.2), EACCES unless the VMA is shared
//! and writable (`VM_SHARED|VM_WRITE`; v6.8 reads `VM_MAYWRITE` through
//! `vma_is_shared_maywrite`, the same for the mappings mmsim makes).
//!
//! `MADV_WILLNEED` (`madvise_willneed`) reads ahead: a file VMA's range through `vfs_fadvise`
//! (`POSIX_FADV_WILLNEED`; DAX files ignore it), a shmem VMA's swapped pages back into the page
//! cache (`shmem_swapin_range`), an anonymous VMA's swapped pages into the swap cache
//! (`swapin_walk_ops`, `read_swap_cache_async`), left unmapped: a later fault finds them there
//! and is minor.

use crate::arch::tlbflush::flush_tlb_range;
use crate::errno::Errno;
use crate::fadvise::advice as fadv;
use crate::folio::pg;
use crate::fs::falloc;
use crate::kernel::{Cx, KState};
use crate::memory::vm_normal_page;
use crate::mm_struct::MmId;
use crate::mmap::covering;
use crate::pgtable::{Level, PtId, Pte};
use crate::sim::cost::Cost;
use crate::vma::VmFlags;
use crate::zap::split_huge_pmd_edges;
use simcore::{Bytes, VirtAddr};

/// `MADV_FREE` over `[start, end)` of `mm`.
pub(crate) async fn madvise_free(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let vmas = covering(&cx.st(), mm, start, end)?;
    for v in vmas {
        let (vs, ve) = {
            let st = cx.st();
            let vma = st.vma(v);
            if !vma.is_anonymous()
                || vma.is_shared()
                || vma.flags.has(VmFlags::LOCKED | VmFlags::PFNMAP)
            {
                return Err(Errno::EINVAL);
            }
            (vma.start.max(start), vma.end.min(end))
        };
        split_huge_pmd_edges(cx, mm, vs, ve).await;
        let visited = free_pte_range(cx, mm, vs, ve).await;
        cx.charge_n(Cost::PteUpdate, visited).await;
        flush_tlb_range(cx, mm, vs, ve).await;
    }
    Ok(())
}

/// `madvise_free_pte_range` over `[start, end)`, one PTE table at a time under its lock;
/// returns the entries changed.
async fn free_pte_range(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) -> u64 {
    let anon_lru = crate::era::lazyfree_on_anon_lru(cx.kernel().version);
    let mut changed = 0;
    let mut addr = start;
    while addr < end {
        let slot = {
            let st = cx.st();
            let pgd = st.mm(mm).pgd;
            st.pt.pte_slot(pgd, addr).ok_or_else(|| st.pt.skip_empty(pgd, addr))
        };
        let table = match slot {
            Ok((t, _)) => t,
            Err(next) => {
                addr = next;
                continue;
            }
        };
        let table_end = (addr.align_down(Bytes::PMD) + Bytes::PMD).min(end);
        let ptl = cx.st().pt.ptl(table);
        let _g = ptl.lock(cx).await;
        let mut st = cx.st();
        if st.pt.is_live(table) {
            while addr < table_end {
                let idx = Level::Pte.index(addr);
                changed += u64::from(st.madvise_free_pte(mm, table, idx, anon_lru));
                addr = addr + Bytes::PAGE;
            }
        }
        addr = table_end;
    }
    changed
}

impl KState {
    /// One PTE of `madvise_free_pte_range`: a swap entry is freed; a small anonymous folio that
    /// only this PTE maps is made clean and old and marked lazyfree, or with `anon_lru`
    /// (v4.5-v4.11) deactivated if it was active and the PTE young or dirty. Returns whether the
    /// entry changed.
    fn madvise_free_pte(&mut self, mm: MmId, table: PtId, idx: usize, anon_lru: bool) -> bool {
        let pte = self.pt.pte(table, idx);
        if pte.is_swap() {
            self.zap_swap_pte(mm, table, idx);
            return true;
        }
        let Some(page) = vm_normal_page(pte) else { return false };
        let head = self.folios.head(page);
        let f = &self.folios;
        if !f.is_anon(head)
            || f.large(head).is_some()
            || f.folio_mapcount(head) != 1
            || f.test(head, pg::SWAPCACHE)
        {
            return false;
        }
        self.folios.clear_flag(head, pg::DIRTY);
        self.pt.set_pte(table, idx, pte.without(Pte::DIRTY | Pte::ACCESSED));
        if !anon_lru {
            self.folio_mark_lazyfree(head);
        } else if (pte.young() || pte.dirty()) && self.folios.test(head, pg::ACTIVE) {
            self.folio_deactivate(head);
        }
        true
    }
}

/// `MADV_REMOVE` over `[start, end)` of `mm`: the VMAs' file ranges under `mmap_lock`, the
/// hole punched after dropping it, as `madvise_remove` drops it around `vfs_fallocate`.
pub(crate) async fn madvise_remove(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let (lock, k) = (cx.st().mm(mm).mmap_lock, cx.kernel().version);
    let holes = {
        let _g = lock.read(cx).await;
        let st = cx.st();
        let mut holes = Vec::new();
        for v in covering(&st, mm, start, end)? {
            let vma = st.vma(v);
            // Up to v4.2 a hugetlb VMA was refused like a locked one (`era::hugetlbfs_has_fallocate`).
            let refused = vma.flags.has(VmFlags::LOCKED)
                || (vma.flags.has(VmFlags::HUGETLB) && !crate::era::hugetlbfs_has_fallocate(k));
            let file = vma.file.filter(|_| !refused).ok_or(Errno::EINVAL)?;
            if !vma.flags.has(VmFlags::SHARED) || !vma.flags.has(VmFlags::WRITE) {
                return Err(Errno::EACCES);
            }
            let (s, e) = (start.max(vma.start), end.min(vma.end));
            holes.push((file, vma.pgoff * 4096 + (s.0 - vma.start.0), e.0 - s.0));
        }
        holes
    };
    for (file, from, len) in holes {
        let mode = falloc::PUNCH_HOLE | falloc::KEEP_SIZE;
        crate::truncate::vfs_fallocate(cx, file, mode, from, len).await?;
    }
    Ok(())
}

/// `MADV_WILLNEED` over `[start, end)` of `mm`, VMA by VMA: anonymous and shmem swap-ins under
/// `mmap_lock` for read, a file's readahead after dropping it (`madvise_willneed`).
pub(crate) async fn madvise_willneed(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let mut readahead = Vec::new();
    {
        let _g = lock.read(cx).await;
        let vmas = covering(&cx.st(), mm, start, end)?;
        for v in vmas {
            let (file, s, e, first) = {
                let st = cx.st();
                let vma = st.vma(v);
                let (s, e) = (start.max(vma.start), end.min(vma.end));
                (vma.file, s, e, vma.pgoff + (s.0 - vma.start.0) / 4096)
            };
            let Some(f) = file else {
                swapin_anon_range(cx, mm, s, e).await;
                continue;
            };
            let inode = cx.st().file(f).inode;
            if cx.st().inodes[inode].fs.swap_backed() {
                // `shmem_swapin_range` visits the swap entries of the range only.
                let last = first + (e.0 - s.0) / 4096;
                let swapped: Vec<u64> = {
                    let st = cx.st();
                    st.inodes[inode].mapping.swapped.range(first..last).map(|(&i, _)| i).collect()
                };
                for index in swapped {
                    let _ = crate::shmem::shmem_swapin(cx, inode, index).await;
                }
            } else if !cx.st().inodes[inode].fs.is_dax() {
                readahead.push((f, (first * 4096) as i64, (e.0 - s.0) as i64));
            }
        }
    }
    for (f, off, len) in readahead {
        let _ = crate::fadvise::vfs_fadvise(cx, f, off, len, fadv::WILLNEED).await;
    }
    Ok(())
}

/// `swapin_walk_ops`: reads each swapped page of `[start, end)` into the swap cache (where no
/// folio holds it yet) without mapping it; memory that cannot be had ends the walk quietly.
async fn swapin_anon_range(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    // The swap slot a PTE at `a` holds, or where the walk goes next (`skip_empty` steps over
    // what no PTE table covers, as `walk_page_range` does).
    let swap_slot = |st: &KState, a: VirtAddr| -> Result<Option<u64>, VirtAddr> {
        let pgd = st.mm(mm).pgd;
        let (t, i) = st.pt.pte_slot(pgd, a).ok_or_else(|| st.pt.skip_empty(pgd, a))?;
        let pte = st.pt.pte(t, i);
        Ok(Some(pte).filter(|p| p.is_swap() && p.swap_entry().0 == 0).map(|p| p.swap_entry().1))
    };
    let mut a = start;
    while a < end {
        let at = a;
        let slot = match swap_slot(&cx.st(), at) {
            Ok(slot) => slot,
            Err(next) => {
                a = next;
                continue;
            }
        };
        a = a + Bytes::PAGE;
        let Some(slot) = slot.filter(|&s| cx.st().swap.cached(s).is_none()) else { continue };
        let Ok(new) = crate::memory::fault_alloc(cx).await else { return };
        {
            let mut st = cx.st();
            // A fault or reclaim may have moved the entry while the allocation waited.
            let still = swap_slot(&st, at) == Ok(Some(slot)) && st.swap.cached(slot).is_none();
            if still {
                st.swapin_new(slot, new, false);
            }
            st.put_folio_extra(new);
            if !still {
                continue;
            }
        }
        cx.sleep(cx.block_io(1)).await;
        crate::filemap::folio_unlock(cx, new);
    }
}
