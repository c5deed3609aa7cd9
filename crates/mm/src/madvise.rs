//! `MADV_FREE`, `MADV_COLD`/`MADV_PAGEOUT`, `MADV_REMOVE`, `MADV_WILLNEED` and the guard
//! regions' `MADV_GUARD_INSTALL`/`MADV_GUARD_REMOVE` (`mm/madvise.c`
//! `madvise_free_single_vma` and `madvise_free_pte_range`, `madvise_cold_or_pageout_pte_range`,
//! `mm/swap.c` `folio_mark_lazyfree`, Linux v6.8, with the eras below; the other advice is
//! dispatched by `mmap::do_madvise`).
//!
//! `MADV_FREE` (v4.5, 854e9ed09ded) tells the kernel that the anonymous pages of a range may be
//! dropped instead of swapped: each present page of a private anonymous VMA that only this
//! mapping maps has its PTE made clean and old and its folio clean. From v4.12 it goes to the
//! inactive *file* LRU as a lazyfree folio (no longer swap-backed, f7ad2a6cb9f7, counted in
//! `pglazyfree`), by way of the CPU's lazyfree batch (`lru.rs`): the advice drains the batch of
//! its CPU before each VMA's walk and fills it, so the folios it marks move (and smaps shows them
//! in `LazyFree`) only when the batch drains: when it fills, or when reclaim, a zap or the next
//! `MADV_FREE`, `MADV_COLD` or `MADV_PAGEOUT` on that CPU drains it. Reclaim then discards the
//! folio, without swap, unless it was written again
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
//! (the kernel frees its swap slot first when it can).
//!
//! A folio mapped more than once (COW-shared with a fork) is left as it is only when it is
//! `PG_dirty`: `madvise_free_pte_range` (v4.5 to v6.18) asks for a single mapping only of a
//! dirty or swap-cache folio, whose `PG_dirty` it must clear, so a clean one is advised through
//! this PTE like any other while the other mappings keep their PTEs, dirty ones included (fork
//! copies a private PTE's dirty bit). Reclaim then discards each clean mapping it meets until a
//! dirty one makes the folio swap-backed again, so what survives depends on the rmap walk's
//! order: the fork parent's mapping comes first and loses the page, the child keeps it (found
//! against Debian's 6.1 and 6.12, `scenarios/syscalls/madv-free.toml`).
//!
//! `MADV_COLD` and `MADV_PAGEOUT` (v5.4, 9c276cc65a58 and 1a4e58cce84e; `madvise_cold`,
//! `madvise_pageout`, `madvise_cold_or_pageout_pte_range`): EINVAL on a locked, PFN-mapped or
//! hugetlb VMA (`can_madv_lru_vma`); otherwise a page walk, PMD by PMD under `mmap_lock` for
//! read. A folio the walk takes loses its accessed bits and `PG_referenced`; `MADV_COLD`
//! deactivates it, `MADV_PAGEOUT` isolates it and reclaims the PMD's folios at the end of the
//! PMD (`reclaim_pages`, which swaps an anonymous THP whole where the era does, `vmscan.rs`).
//! Under the PMD's lock a PMD-mapped THP (not the huge zero page) that the era's sharing test
//! (`era::pageout_sharing`) finds mapped elsewhere is skipped; one the range covers whole is
//! taken whole; one it covers in part is locked (sleeping), split, and its PTEs walked. Under
//! the PTE table's lock: a page of a large folio is split first (trylock; a shared folio or a
//! failed lock or split ends the PMD's walk before v6.10 and skips the folio's PTEs from v6.10,
//! where a folio all of whose PTEs lie in the range is taken whole instead); a small folio (and
//! from v6.10 a whole large one) is taken when it is mapped only here (not asked in v5.4-v5.5).
//!
//! Approximations of the walk: the accessed bits are cleared for `MADV_PAGEOUT` too (later
//! kernels clear them only for `MADV_COLD`); a file THP cannot be split by the model, so a
//! partly covered one is left as it is (as a failed split leaves it); the caller is root, so
//! `can_do_file_pageout` and the anonymous-only filter (v6.2, fd3b1bc3c86e) never refuse a
//! file page; v6.9's "allow split while folio_estimated_sharers = 0" (cc864ebba5f6, version
//! not verified) is not modelled.
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
//!
//! Guard regions (v6.13, 662df3e5c376 "mm: madvise: implement lightweight guard page mechanism"
//! and its series; `era::has_madv_guard`, EINVAL before): `MADV_GUARD_INSTALL` puts a
//! `PTE_MARKER_GUARD` marker (`pgtable.rs`) in each PTE of the range, zapping what was mapped
//! there first (`madvise_guard_install`: a walk that installs markers into empty PTEs and stops
//! at anything else, a zap that leaves markers, and again); an access to a marker is SIGSEGV
//! (`fault.rs`), and GUP's fault there EFAULT (`MADV_POPULATE_*`, pins, O_DIRECT).
//! `MADV_GUARD_REMOVE` clears the markers, leaving every other entry. The markers survive
//! `MADV_DONTNEED`, `MADV_FREE`, `MADV_COLD`/`MADV_PAGEOUT`, truncation, hole punching and
//! `mprotect`, go with `munmap` and `exit_mmap` (`zap.rs`), are copied by fork (`fork.rs`; not
//! into a `VM_WIPEONFORK` VMA, whose tables fork never copies) and moved by `mremap`
//! (`mremap.rs`); pagemap shows them (`fs/proc.rs`). Installing is EINVAL on a `VM_SPECIAL`,
//! hugetlb or `VM_LOCKED` VMA (removing only on the first two); in v6.13-v6.14 also on a VMA
//! that is not anonymous or lacks `VM_MAYWRITE`; from v6.15 file, shmem and read-only mappings
//! take them too (`era::guard_regions_any_mapping`, f807123d578d). Installing gives the VMA an
//! anon_vma (`anon_vma_prepare`), so fork copies its tables whatever it maps. Approximations:
//! a khugepaged scan meets a marker as a swap entry whose swap-in fails (the kernel's
//! `SCAN_FAIL` is counted as `SCAN_EXCEED_SWAP_PTE`); `process_madvise` is not modelled.

use crate::arch::tlbflush::flush_tlb_range;
use crate::era::PageoutSharing;
use crate::errno::Errno;
use crate::fadvise::advice as fadv;
use crate::filemap::{folio_lock, folio_unlock};
use crate::folio::folio_trylock;
use crate::folio::pg;
use crate::fs::falloc;
use crate::kernel::{Cx, KState};
use crate::lru::lru_add_drain;
use crate::memory::vm_normal_page;
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::zap::{ZapDetails, split_huge_pmd_edges};
use simcore::{Bytes, Pfn, VirtAddr};

/// The part of `[start, end)` that VMA `v` covers; EINVAL when `refused` says the advice does not
/// apply to it.
fn clip(
    st: &KState,
    v: VmaId,
    start: VirtAddr,
    end: VirtAddr,
    refused: impl Fn(&KState, VmaId) -> bool,
) -> Result<(VirtAddr, VirtAddr), Errno> {
    if refused(st, v) {
        return Err(Errno::EINVAL);
    }
    let vma = st.vma(v);
    Ok((vma.start.max(start), vma.end.min(end)))
}

/// `MADV_FREE` over `[start, end)` of `mm`.
pub(crate) async fn madvise_free(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let (vmas, unmapped) = walk_vmas(&cx.st(), mm, start, end);
    for v in vmas {
        let (vs, ve) = clip(&cx.st(), v, start, end, |st, v| {
            let vma = st.vma(v);
            !vma.is_anonymous()
                || vma.is_shared()
                || vma.flags.has(VmFlags::LOCKED | VmFlags::PFNMAP)
        })?;
        split_huge_pmd_edges(cx, mm, vs, ve).await;
        // `madvise_free_single_vma` drains this CPU's batches before its walk.
        lru_add_drain(cx);
        let visited = free_pte_range(cx, mm, vs, ve).await;
        cx.charge_n(Cost::PteUpdate, visited).await;
        flush_tlb_range(cx, mm, vs, ve).await;
    }
    unmapped
}

/// `madvise_free_pte_range` over `[start, end)`; returns the entries changed.
async fn free_pte_range(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) -> u64 {
    let anon_lru = crate::era::lazyfree_on_anon_lru(cx.kernel().version);
    let cpu = cx.cpu().0 as usize;
    walk_ptes(cx, mm, start, end, |st, slot| st.madvise_free_pte(mm, slot, anon_lru, cpu)).await
}

/// Visits the PTEs of `[start, end)` of `mm` that PTE tables cover, one table at a time under
/// its lock, stepping over what no table covers (`walk_page_range` without `install_pte`);
/// `visit` says whether it changed the entry. Returns the entries changed.
async fn walk_ptes(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    mut visit: impl FnMut(&mut KState, (PtId, usize)) -> bool,
) -> u64 {
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
                changed += u64::from(visit(&mut st, (table, idx)));
                addr = addr + Bytes::PAGE;
            }
        }
        addr = table_end;
    }
    changed
}

impl KState {
    /// One PTE of `madvise_free_pte_range`: a swap entry is freed; a small anonymous folio that
    /// only this PTE maps is made clean and old and marked lazyfree (into CPU `cpu`'s batch,
    /// `lru.rs`), or with `anon_lru` (v4.5-v4.11) deactivated if it was active and the PTE young
    /// or dirty. Returns whether the entry changed.
    fn madvise_free_pte(
        &mut self,
        mm: MmId,
        (table, idx): (PtId, usize),
        anon_lru: bool,
        cpu: usize,
    ) -> bool {
        let pte = self.pt.pte(table, idx);
        if pte.is_swap() {
            self.zap_swap_pte(mm, table, idx);
            return true;
        }
        let Some(page) = vm_normal_page(pte) else { return false };
        let head = self.folios.head(page);
        let f = &self.folios;
        // Only a dirty (or swap-cache) folio is asked whether this PTE alone maps it: a clean
        // folio other PTEs map too is advised all the same (`madvise_free_pte_range`).
        if !f.is_anon(head)
            || f.large(head).is_some()
            || (f.test(head, pg::DIRTY) && f.folio_mapcount(head) != 1)
            || f.test(head, pg::SWAPCACHE)
        {
            return false;
        }
        self.folios.clear_flag(head, pg::DIRTY);
        self.pt.set_pte(table, idx, pte.without(Pte::DIRTY | Pte::ACCESSED));
        if !anon_lru {
            self.folio_mark_lazyfree(head, cpu);
        } else if (pte.young() || pte.dirty()) && self.folios.test(head, pg::ACTIVE) {
            self.folio_deactivate(head);
        }
        true
    }
}

/// The VMAs of `[start, end)` in address order, and what the walk returns once each took the
/// advice: ENOMEM when part of the range is unmapped (`madvise_walk_vmas`, mm/madvise.c v6.18;
/// the same `unmapped_error` rule in the loop of `do_madvise` before that function was split
/// out, and older than git). A hole does not stop the walk: the advice still goes to every VMA
/// of the range, on both sides of it, and the call returns ENOMEM at the end; an advice that
/// fails on a VMA returns its error at once, the VMAs after it untouched.
pub(crate) fn walk_vmas(
    st: &KState,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> (Vec<VmaId>, Result<(), Errno>) {
    let (_, hole) = crate::mmap::vmas_before_hole(st, mm, start, end);
    let unmapped = if hole { Err(Errno::ENOMEM) } else { Ok(()) };
    (st.mm(mm).vmas_in(start, end, |id| st.vma(id).end), unmapped)
}

/// `is_valid_guard_vma`: whether VMA `v` takes guard regions. Never a `VM_SPECIAL` or hugetlb
/// VMA, nor, unless `allow_locked` (removal), a `VM_LOCKED` one; in v6.13-v6.14 only an
/// anonymous VMA with `VM_MAYWRITE` (`era::guard_regions_any_mapping`).
fn is_valid_guard_vma(st: &KState, v: VmaId, allow_locked: bool) -> bool {
    let vma = st.vma(v);
    let locked = if allow_locked { 0 } else { VmFlags::LOCKED };
    if vma.flags.has(VmFlags::SPECIAL | VmFlags::HUGETLB | locked) || vma.vm_ops.is_hugetlb() {
        return false;
    }
    crate::era::guard_regions_any_mapping(st.thp.kernel)
        || (vma.is_anonymous() && vma.flags.has(VmFlags::MAYWRITE))
}

/// `MADV_GUARD_INSTALL` over `[start, end)` of `mm` (`madvise_guard_install`, v6.13), VMA by VMA
/// under `mmap_lock` for read: EINVAL for a VMA [`is_valid_guard_vma`] refuses; otherwise the
/// VMA gets an anon_vma (so fork copies its tables) and each empty PTE of the range a guard
/// marker, PTE tables made where missing. An entry that maps something (a page, a swap entry,
/// a huge PMD) stops the walk; the range is zapped (markers stay) and the walk starts again.
pub(crate) async fn madvise_guard_install(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let (vmas, unmapped) = walk_vmas(&cx.st(), mm, start, end);
    for v in vmas {
        let (vs, ve) = clip(&cx.st(), v, start, end, |st, v| !is_valid_guard_vma(st, v, false))?;
        crate::memory::anon_vma_prepare(cx, mm, v).await;
        // The kernel gives up after three walks and restarts the syscall: the same loop.
        while !install_guard_markers(cx, mm, vs, ve).await? {
            crate::zap::zap_vma_range(cx, mm, v, vs, ve, ZapDetails::default()).await;
        }
    }
    unmapped
}

/// One walk of `guard_install_walk_ops` over `[start, end)`: markers into the empty PTEs, up to
/// the first entry that is neither empty nor a guard marker (`Ok(false)`: zap and walk again).
async fn install_guard_markers(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<bool, Errno> {
    let (mut addr, mut installed, mut done) = (start, 0, true);
    while addr < end && done {
        // `walk_page_range_mm` with `install_pte` allocates the missing tables.
        let Some(table) =
            crate::memory::pte_alloc(cx, mm, addr).await.map_err(|_| Errno::ENOMEM)?
        else {
            done = false;
            break;
        };
        let table_end = (addr.align_down(Bytes::PMD) + Bytes::PMD).min(end);
        let ptl = cx.st().pt.ptl(table);
        let _g = ptl.lock(cx).await;
        let mut st = cx.st();
        if !st.pt.is_live(table) {
            continue;
        }
        while addr < table_end {
            let idx = Level::Pte.index(addr);
            let pte = st.pt.pte(table, idx);
            if pte.is_none() {
                st.pt.set_pte(table, idx, Pte::guard_marker());
                installed += 1;
            } else if !pte.is_guard() {
                done = false;
                break;
            }
            addr = addr + Bytes::PAGE;
        }
    }
    cx.charge_n(Cost::PteUpdate, installed).await;
    Ok(done)
}

/// `MADV_GUARD_REMOVE` over `[start, end)` of `mm` (`madvise_guard_remove`, v6.13): EINVAL for a
/// VMA [`is_valid_guard_vma`] refuses (a locked one is allowed); otherwise the guard markers of
/// the range's PTE tables are cleared, VMA by VMA under `mmap_lock` for read. A huge PMD has
/// none and is stepped over.
pub(crate) async fn madvise_guard_remove(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let (vmas, unmapped) = walk_vmas(&cx.st(), mm, start, end);
    for v in vmas {
        let (vs, ve) = clip(&cx.st(), v, start, end, |st, v| !is_valid_guard_vma(st, v, true))?;
        let cleared = walk_ptes(cx, mm, vs, ve, |st, (table, idx)| {
            let guard = st.pt.pte(table, idx).is_guard();
            if guard {
                st.pt.set_pte(table, idx, Pte::NONE);
            }
            guard
        })
        .await;
        cx.charge_n(Cost::PteUpdate, cleared).await;
    }
    unmapped
}

/// `MADV_REMOVE` over `[start, end)` of `mm`: the VMAs' file ranges under `mmap_lock`, the
/// hole punched after dropping it, as `madvise_remove` drops it around `vfs_fallocate`. A
/// hole in the range is ENOMEM after the VMAs around it were punched ([`walk_vmas`]).
pub(crate) async fn madvise_remove(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let (lock, k) = (cx.st().mm(mm).mmap_lock, cx.kernel().version);
    let (holes, unmapped) = {
        let _g = lock.read(cx).await;
        let st = cx.st();
        let mut holes = Vec::new();
        let (vmas, unmapped) = walk_vmas(&st, mm, start, end);
        for v in vmas {
            let vma = st.vma(v);
            // Up to v4.2 a hugetlb VMA was refused like a locked one (`era::hugetlbfs_has_fallocate`).
            let refused = vma.flags.has(VmFlags::LOCKED)
                || (vma.flags.has(VmFlags::HUGETLB) && !crate::era::hugetlbfs_has_fallocate(k));
            let file = vma.file.filter(|_| !refused).ok_or(Errno::EINVAL)?;
            if !vma.flags.has(VmFlags::SHARED) || !vma.flags.has(VmFlags::WRITE) {
                return Err(Errno::EACCES);
            }
            let (s, e) = (start.max(vma.start), end.min(vma.end));
            let from = vma.pgoff * 4096 + (s.0 - vma.start.0);
            // A VMA with `UFFD_FEATURE_EVENT_REMOVE` owes its event.
            let remove = crate::userfaultfd::events::userfaultfd_remove_ctx(&st, v);
            holes.push((file, from, e.0 - s.0, remove.map(|ctx| (ctx, s, e))));
        }
        (holes, unmapped)
    };
    for (file, from, len, remove) in holes {
        // `userfaultfd_remove`: `UFFD_EVENT_REMOVE` before the hole is punched.
        if let Some((ctx, s, e)) = remove {
            crate::userfaultfd::events::userfaultfd_remove(cx, ctx, s, e).await;
        }
        let mode = falloc::PUNCH_HOLE | falloc::KEEP_SIZE;
        crate::truncate::vfs_fallocate(cx, file, mode, from, len).await?;
    }
    unmapped
}

/// `MADV_WILLNEED` over `[start, end)` of `mm`, VMA by VMA: anonymous and shmem swap-ins under
/// `mmap_lock` for read, a file's readahead after dropping it (`madvise_willneed`). A hole in
/// the range is ENOMEM after the VMAs around it were read ahead ([`walk_vmas`]).
pub(crate) async fn madvise_willneed(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let mut readahead = Vec::new();
    let unmapped = {
        let _g = lock.read(cx).await;
        let (vmas, unmapped) = walk_vmas(&cx.st(), mm, start, end);
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
        unmapped
    };
    for (f, off, len) in readahead {
        let _ = crate::fadvise::vfs_fadvise(cx, f, off, len, fadv::WILLNEED).await;
    }
    unmapped
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
        crate::page_io::swap_read_folio(cx, new).await;
        folio_unlock(cx, new);
    }
}

/// Where a pass over one PTE table of `MADV_COLD`/`MADV_PAGEOUT` stopped.
enum PtePass {
    /// At the end of the range, or broken off (a shared or unsplittable large folio before
    /// v6.10).
    Done,
    /// At a large folio to split first: locked, with a reference held; `nr` PTEs from the
    /// current address map it.
    Split { head: Pfn, nr: u64 },
}

/// `madvise_cold` and `madvise_pageout` over `[start, end)` of `mm` (the module note).
pub(crate) async fn madvise_cold_or_pageout(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    pageout: bool,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let (vmas, unmapped) = walk_vmas(&cx.st(), mm, start, end);
    for v in vmas {
        // `can_madv_lru_vma`.
        let (vs, ve) = clip(&cx.st(), v, start, end, |st, v| {
            st.vma(v).flags.has(VmFlags::LOCKED | VmFlags::PFNMAP) || st.vma(v).vm_ops.is_hugetlb()
        })?;
        // `madvise_cold` and `madvise_pageout` drain this CPU's batches before the walk.
        lru_add_drain(cx);
        let mut addr = vs;
        while addr < ve {
            if let Some(end) = pmd_hole_end(&cx.st(), mm, addr) {
                addr = end.min(ve);
                continue;
            }
            let next = (addr.align_down(Bytes::PMD) + Bytes::PMD).min(ve);
            let taken = cold_or_pageout_pmd(cx, mm, addr, next, pageout).await;
            // `reclaim_pages` at the end of each PMD's walk, under `mmap_lock`.
            if !taken.is_empty() {
                crate::vmscan::reclaim_pages(cx, taken).await;
            }
            addr = next;
        }
        flush_tlb_range(cx, mm, vs, ve).await;
    }
    unmapped
}

/// Where the empty PMD entry (or upper-level hole) at `addr` ends, as the page walk skips
/// `pmd_none`; `None` when a PMD entry maps or points at something there.
fn pmd_hole_end(st: &KState, mm: MmId, addr: VirtAddr) -> Option<VirtAddr> {
    let pgd = st.mm(mm).pgd;
    let empty = match st.pt.pmd_slot(pgd, addr) {
        None => true,
        Some((t, i)) => matches!(st.pt.upper(t, i), Upper::None),
    };
    empty.then(|| st.pt.skip_empty(pgd, addr))
}

/// `madvise_cold_or_pageout_pte_range` over `[addr, next)`, inside one PMD: the PMD-mapped THP,
/// or the PTEs with their large folios split on the way. Returns the folios `MADV_PAGEOUT`
/// isolated.
async fn cold_or_pageout_pmd(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    next: VirtAddr,
    pageout: bool,
) -> Vec<Pfn> {
    let mut taken = Vec::new();
    if !cold_or_pageout_huge_pmd(cx, mm, addr, next, pageout, &mut taken).await {
        return taken;
    }
    let batched = crate::era::pageout_sharing(cx.kernel().version) == PageoutSharing::Batched;
    let mut at = addr;
    while let PtePass::Split { head, nr } =
        cold_or_pageout_ptes(cx, mm, &mut at, next, pageout, &mut taken).await
    {
        let split = crate::huge_memory::split::split_folio(cx, head).await.is_ok();
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
        if !split {
            if !batched {
                break;
            }
            at = at + Bytes(nr * Bytes::PAGE.as_u64());
        }
    }
    taken
}

/// The PMD half of the walk, under the PMD's lock: a THP mapped by the PMD is taken whole when
/// the range covers it, else locked and split (`false` when the PTE loop has nothing to do: no
/// PTE table, a THP taken, skipped or left unsplit).
async fn cold_or_pageout_huge_pmd(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    next: VirtAddr,
    pageout: bool,
    taken: &mut Vec<Pfn>,
) -> bool {
    let slot = {
        let st = cx.st();
        st.pt.pmd_slot(st.mm(mm).pgd, addr)
    };
    let Some((t, i)) = slot else { return false };
    let ptl = cx.st().pt.ptl(t);
    let g = ptl.lock(cx).await;
    let split = {
        let mut st = cx.st();
        let rule = crate::era::pageout_sharing(cx.kernel().version);
        match huge_pmd_decision(&mut st, (t, i), rule, addr, next) {
            HugePmd::Ptes => return true,
            HugePmd::Skip => return false,
            HugePmd::Take(head) => {
                take_folio(&mut st, head, pageout, taken);
                return false;
            }
            HugePmd::Split(head) => {
                st.folios.get_extra(head);
                head
            }
        }
    };
    drop(g);
    folio_lock(cx, split).await;
    let done = crate::huge_memory::split::split_folio(cx, split).await.is_ok();
    folio_unlock(cx, split);
    cx.st().put_folio_extra(split);
    done
}

/// What the walk does with the PMD entry `(t, i)` over `[addr, next)`.
enum HugePmd {
    /// A PTE table: walk it.
    Ptes,
    /// Nothing, a huge zero page, or a THP the era finds mapped elsewhere.
    Skip,
    /// A THP the range covers whole (its PMD made old).
    Take(Pfn),
    /// A THP the range covers in part.
    Split(Pfn),
}

fn huge_pmd_decision(
    st: &mut KState,
    (t, i): (PtId, usize),
    rule: PageoutSharing,
    addr: VirtAddr,
    next: VirtAddr,
) -> HugePmd {
    let e = match st.pt.upper(t, i) {
        Upper::Table(_) => return HugePmd::Ptes,
        Upper::None => return HugePmd::Skip,
        Upper::Leaf(e) => e,
    };
    if !e.is_present() || Some(e.pfn()) == st.huge_zero_pfn {
        return HugePmd::Skip;
    }
    let head = st.folios.head(e.pfn());
    let whole = addr.is_aligned(Bytes::PMD) && next.offset_from(addr) == Bytes::PMD;
    if (rule != PageoutSharing::Unasked || !whole) && mapped_elsewhere(st, rule, head, head) {
        return HugePmd::Skip;
    }
    if whole {
        st.pt.set_upper(t, i, Upper::Leaf(e.without(Pte::ACCESSED)));
        return HugePmd::Take(head);
    }
    HugePmd::Split(head)
}

/// The PTE loop from `*at` to `next` under the PTE table's lock (the module note).
async fn cold_or_pageout_ptes(
    cx: &Cx,
    mm: MmId,
    at: &mut VirtAddr,
    next: VirtAddr,
    pageout: bool,
    taken: &mut Vec<Pfn>,
) -> PtePass {
    let slot = {
        let st = cx.st();
        st.pt.pte_slot(st.mm(mm).pgd, *at)
    };
    let Some((table, _)) = slot else { return PtePass::Done };
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    let rule = crate::era::pageout_sharing(cx.kernel().version);
    let (pass, visited) = scan_ptes(&mut cx.st(), table, rule, at, next, pageout, taken);
    cx.charge_n(Cost::PteUpdate, visited).await;
    pass
}

/// The PTE loop's body over one table, until `next` or a large folio to split; returns where
/// it stopped and how many PTEs it made old.
fn scan_ptes(
    st: &mut KState,
    table: PtId,
    rule: PageoutSharing,
    at: &mut VirtAddr,
    next: VirtAddr,
    pageout: bool,
    taken: &mut Vec<Pfn>,
) -> (PtePass, u64) {
    let mut visited = 0;
    while *at < next && st.pt.is_live(table) {
        let i = Level::Pte.index(*at);
        let Some(page) = vm_normal_page(st.pt.pte(table, i)) else {
            *at = *at + Bytes::PAGE;
            continue;
        };
        let head = st.folios.head(page);
        let pages = st.folios.order(head).pages();
        let batched = rule == PageoutSharing::Batched;
        let nr = if batched { pte_batch(st, table, i, page, *at, next) } else { 1 };
        let step = Bytes(nr * Bytes::PAGE.as_u64());
        if pages > 1 && nr < pages {
            if mapped_elsewhere(st, rule, head, page) || !folio_trylock(&mut st.folios, head) {
                if !batched {
                    return (PtePass::Done, visited);
                }
                *at = *at + step;
                continue;
            }
            st.folios.get_extra(head);
            return (PtePass::Split { head, nr }, visited);
        }
        if rule == PageoutSharing::Unasked || u64::from(st.folios.folio_mapcount(head)) == pages {
            for j in i..i + nr as usize {
                let pte = st.pt.pte(table, j);
                st.pt.set_pte(table, j, pte.without(Pte::ACCESSED));
            }
            visited += nr;
            take_folio(st, head, pageout, taken);
        }
        *at = *at + step;
    }
    (PtePass::Done, visited)
}

/// `folio_pte_batch` from the PTE at `i` mapping `page`: how many PTEs in a row, up to `next`,
/// map the following pages of its folio (1 for a small folio).
fn pte_batch(st: &KState, table: PtId, i: usize, page: Pfn, at: VirtAddr, next: VirtAddr) -> u64 {
    let head = st.folios.head(page);
    let folio_end = head.0 + st.folios.order(head).pages();
    let max = (next.offset_from(at).as_u64() / Bytes::PAGE.as_u64()).min(folio_end - page.0);
    let mut nr = 1;
    while nr < max
        && (i + nr as usize) < 512
        && vm_normal_page(st.pt.pte(table, i + nr as usize)) == Some(page + nr)
    {
        nr += 1;
    }
    nr
}

/// The era's sharing test of `head`, reached through `page` (the PMD's page is the head).
fn mapped_elsewhere(st: &KState, rule: PageoutSharing, head: Pfn, page: Pfn) -> bool {
    let f = &st.folios;
    let precise = |p: Pfn| f.page_mapcount(p) + f.entire_mapcount(head);
    match rule {
        PageoutSharing::Unasked | PageoutSharing::PageMapcount => precise(page) != 1,
        PageoutSharing::FolioMapcount => f.folio_mapcount(head) != 1,
        PageoutSharing::FirstPage => precise(head) != 1,
        PageoutSharing::Batched => {
            // `folio_likely_mapped_shared`.
            let mapcount = f.folio_mapcount(head);
            if f.large(head).is_none() || mapcount <= 1 {
                return mapcount > 1;
            }
            f.entire_mapcount(head) > 0
                || u64::from(mapcount) > f.order(head).pages()
                || f.page_mapcount(head) > 1
        }
    }
}

/// A folio the walk takes: its `PG_referenced` cleared, then deactivated (`MADV_COLD`) or put
/// on the list to reclaim (`MADV_PAGEOUT`, once).
fn take_folio(st: &mut KState, head: Pfn, pageout: bool, taken: &mut Vec<Pfn>) {
    st.folios.clear_flag(head, pg::REFERENCED);
    if !pageout {
        st.folio_deactivate(head);
    } else if !taken.contains(&head) {
        taken.push(head);
    }
}
