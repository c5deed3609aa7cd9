//! File collapse: khugepaged and `MADV_COLLAPSE` on read-only disk files
//! (CONFIG_READ_ONLY_THP_FOR_FS; `mm/khugepaged.c` `hpage_collapse_scan_file` (earlier
//! `khugepaged_scan_file`), `collapse_file`, `retract_page_tables`, `collapse_pte_mapped_thp`,
//! `khugepaged_collapse_pte_mapped_thps`; Linux v6.8 with the eras below).
//!
//! The scan (`hpage_collapse_scan_file`) looks at the page cache of the PMD-aligned range
//! `[start, start + 512)`, not at page tables: a PMD-sized folio starting at `start` is
//! `SCAN_PTE_MAPPED_HUGEPAGE` (an earlier collapse whose mappings are still PTEs), any other large
//! folio `SCAN_PAGE_COMPOUND`; a page off the LRU `SCAN_PAGE_LRU`; a page with references beyond
//! the cache's and its mappings' (a pin, GUP, a reader) `SCAN_PAGE_COUNT`; for khugepaged only,
//! fewer than `512 - max_ptes_none` cached pages `SCAN_EXCEED_NONE_PTE` ("present" means in the
//! page cache: the kernel's selftest sets `read_ahead_kb` to 0 for that reason).
//!
//! The collapse (`collapse_file`, the non-shmem branch): allocate the THP (`thp_collapse_alloc`
//! or `thp_collapse_alloc_failed`), then page by page: a missing page is read synchronously
//! (`page_cache_sync_readahead`) and locked (`filemap_lock_folio`, which looks again when the
//! page was truncated while it waited for the lock), failing with `SCAN_FAIL` when nothing can be
//! read or found (beyond EOF, also when a truncation cut the file during the collapse); a dirty
//! page starts writeback of the file (`filemap_flush`) and fails with `SCAN_FAIL` ("khugepaged
//! only works on read-only fd"), one under writeback fails too; a page whose lock is held is
//! `SCAN_PAGE_LOCK`; once locked, one not uptodate is `SCAN_FAIL`, one that cannot be isolated
//! from the LRU `SCAN_DEL_PAGE_LRU` (the kernel's `SCAN_TRUNCATED` check of a locked page's
//! mapping cannot fire for disk files: each page is locked from a lookup that found it cached); a mapped page is unmapped (`try_to_unmap`), and then it must hold only
//! the cache's and the isolation's references (`folio_ref_freeze(folio, 3)` with the
//! lookup's, which mmsim's lock does not take), else `SCAN_PAGE_COUNT`. Then the writer check of
//! seed 000 (eb6ecbed0aa2, v5.14): the THP is counted in `nr_thps` (unless the file system has
//! large folios: XFS from v5.18, ext4 from v6.16, `fs/ops.rs`) and, after a full barrier,
//! `i_writecount` is read; a writer fails the collapse (`SCAN_FAIL`, the count taken back). The
//! opener for write does the mirror image in `do_dentry_open` (`huge_memory.rs`), so at least
//! one of the two sees the other; mmsim may preempt either between its store and its load, and
//! the broken variant `thp_writer_barrier = reordered` lets each load pass its store
//! (`scenarios/races/collapse-open-write.toml`). After the check, in one step, the contents are
//! copied and the old pages leave the cache for the THP, which takes over the count
//! (`nr_file_hugepages` too). Since the check's load and the exchange are one step, an opener
//! whose store came first fails the collapse (its truncation waits on the locked old pages
//! until the rollback unlocks them), and a collapse whose check came first has its THP cached
//! before the opener looks at `nr_thps`.
//! Before v5.14 (`file_thp = denywrite`) there is no such check: only `VM_DENYWRITE` mappings
//! were collapsed, and a deny-written file cannot be opened for write. Every failure rolls back:
//! the old pages go back to the LRU, unlocked, still cached (those unmapped refault), the THP is
//! freed; no data changes. A truncation that meets the locked old pages waits on their lock
//! and, after the rollback, removes them (`scenarios/races/collapse-truncate.toml`; mmsim counts
//! such rollbacks in `collapse_truncated_rollbacks`, which no kernel interface shows).
//!
//! `retract_page_tables` (still holding the new THP's lock, so no fault maps it meanwhile):
//! every VMA mapping the range at a PMD-aligned address, without an anon_vma (no private COW
//! copies), loses the PTE table of that range (emptied by the unmapping above), so its next fault
//! maps the THP with one PMD (`do_set_pmd`, `huge_memory.rs`). Its era shape:
//! - before v6.6 it needs each mm's `mmap_lock` for write and only tries it
//!   (`mmap_write_trylock`); an mm whose lock is busy gets the address in its deferred
//!   `pte_mapped_thp` slots (at most 8, `MAX_PTE_MAPPED_THP`), which khugepaged retries
//!   (`khugepaged_collapse_pte_mapped_thps`, again with `mmap_write_trylock`) the next time it
//!   scans that mm;
//! - from v6.6 ("mm/khugepaged: retract_page_tables() without mmap or vma lock", 1d65b771bc08)
//!   it takes no mmap_lock: `i_mmap_rwsem` for read, then the PMD lock and the PTE lock, and
//!   re-checks the anon_vma under them; khugepaged itself calls `collapse_pte_mapped_thp` under
//!   `mmap_lock` for read when its scan finds a THP still mapped by PTEs.
//!
//! The page cache during the collapse, in two eras (`era::collapse_replaces_per_index`):
//! - before v6.4 each page taken (and each shmem hole passed) gives its slot to the new page at
//!   once, and a rollback gives each slot its old page back, one index after another with the
//!   xa_lock dropped between two, before it unlocks the new page (whose mapping it clears);
//!   truncation's lookups meet the new page in those slots (`xarray::CollapseSlots`,
//!   `truncate.rs`, `scenarios/races/collapse-rollback-truncate.toml`);
//! - from v6.4 ("mm/khugepaged: maintain page cache uptodate flag", a2e17cc2efc7) the old pages
//!   stay in their slots, locked, and the whole range is replaced in one store on success.
//!
//! Other lookups (faults, `read`, `mincore`) see the old pages, locked, in both eras: mmsim
//! shows the slots to truncation only (an approximation; before v6.4 a reader would find the
//! new page, not uptodate, and wait on its lock).
//!
//! `collapse_pte_mapped_thp`: for a PMD range whose page-cache THP is mapped by PTEs (or by
//! nothing), checks that every present PTE maps the THP's own page at its offset (else
//! `SCAN_FAIL`), clears them and frees the table; with `install_pmd` (`MADV_COLLAPSE`) it maps
//! the THP by a PMD at once. `MADV_COLLAPSE` calls it after every successful file collapse
//! (v6.6's `collapse_file` reports `SCAN_PTE_MAPPED_HUGEPAGE` to it), under `mmap_lock` for
//! write before v6.6 and for read from v6.6.
//!
//! Approximations: `filemap_flush` is synchronous (the retry after it finds the page clean); no
//! `SCAN_PAGE_HAS_PRIVATE` (mmsim's pages carry no buffer heads), no `SCAN_COPY_MC`, no
//! userfaultfd-wp; v6.1-v6.5's `MADV_COLLAPSE` retracted its own mm's table in
//! `retract_page_tables` itself, which mmsim does as v6.6 does.
//!
//! shmem (`collapse_file`'s `is_shmem` branch, v4.8 f3f0e1d2150b; eligibility in `shmem.rs`): the
//! scan is the same (a page missing from the cache counts against `max_ptes_none` for
//! khugepaged); the collapse takes a missing page as a hole that the THP fills with zeros (the
//! kernel's `nr_none`, charged to the file as `NR_SHMEM`), accepts dirty pages (a shmem page has
//! no other copy; the THP is dirty), makes no writer check and counts no `nr_thps`; a range with
//! nothing cached fails with `SCAN_TRUNCATED`; the THP counts in `nr_shmem_hugepages`, and its
//! PMD mappings in `nr_shmem_pmdmapped`. Swapped-out shmem pages (`shmem.rs`): the scan counts
//! the range's swap entries and khugepaged (not `MADV_COLLAPSE`, whose `cc->is_khugepaged` is
//! false, v6.1+) fails with `SCAN_EXCEED_SWAP_PTE` past `max_ptes_swap`; they are not present,
//! so they also count against `max_ptes_none`; the collapse swaps each in
//! (`shmem_get_folio(SGP_NOALLOC)`) before it takes it. (Read in mainline's
//! `hpage_collapse_scan_file`; the count and the swap-in are in the shmem collapse since it
//! came, f3f0e1d2150b, v4.8, recalled rather than re-read per release; the selftest's swap cases,
//! `collapse_swapin_single_pte` and `collapse_max_ptes_swap`, run on anonymous memory only.)
//! Approximations: a range reaching past the end of the file fails
//! (`SCAN_FAIL`, mmsim's: it makes no THP past EOF).

use crate::era::ThpWriterBarrier;
use crate::filemap::{folio_lock, folio_unlock, read_pages, writeback};
use crate::folio::folio_trylock;
use crate::folio::pg;
use crate::kernel::{Cx, KState};
use crate::khugepaged::{Collapser, HPAGE_PMD_NR, ScanResult, alloc_collapse_page};
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::xarray::CollapseSlots;
use simcore::{Bytes, Order, Pfn, VirtAddr};

/// The deferred `pte_mapped_thp` slots of one mm (`MAX_PTE_MAPPED_THP`, before v6.6).
const MAX_PTE_MAPPED_THP: usize = 8;

/// A PMD-aligned range of a file's page cache: the file and its first page index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileRange {
    pub inode: InodeId,
    pub start: u64,
}

/// The file range a page-cache VMA maps at `haddr`; `None` for any other VMA.
pub(super) fn file_range(st: &KState, vma: VmaId, haddr: VirtAddr) -> Option<FileRange> {
    let v = st.vma(vma);
    if !v.vm_ops.maps_page_cache() {
        return None;
    }
    let inode = st.file(v.file?).inode;
    Some(FileRange { inode, start: v.page_index(haddr) })
}

/// `hpage_collapse_scan_file`: whether the page cache of `r` can be collapsed (the module note
/// lists the checks).
pub(super) fn hpage_collapse_scan_file(st: &KState, r: FileRange, who: Collapser) -> ScanResult {
    let end = r.start + HPAGE_PMD_NR;
    // shmem's swap entries, in index order with the pages: the first past `max_ptes_swap`
    // ends khugepaged's scan there (not `MADV_COLLAPSE`'s); they are not present.
    let swap_limit = (who == Collapser::Khugepaged)
        .then(|| {
            let swapped = st.shmem_swapped_in(r.inode, r.start, end);
            swapped.get(st.thp.settings.max_ptes_swap as usize).copied()
        })
        .flatten();
    let pages = &st.inodes[r.inode].mapping.pages;
    let mut present = 0;
    for (&index, &head) in pages.range(r.start..swap_limit.unwrap_or(end)) {
        let order = st.folios.order(head);
        if order == Order::PMD && index == r.start {
            return ScanResult::PteMappedHugepage;
        }
        if order != Order::BASE {
            return ScanResult::PageCompound;
        }
        if !st.folios.test(head, pg::LRU) {
            return ScanResult::PageLru;
        }
        if st.folios.refcount(head) != 1 + st.folios.folio_mapcount(head) {
            return ScanResult::PageCount;
        }
        present += 1;
    }
    if swap_limit.is_some() {
        return ScanResult::ExceedSwapPte;
    }
    let max_none = st.thp.settings.max_ptes_none;
    if who == Collapser::Khugepaged && present < HPAGE_PMD_NR - max_none {
        return ScanResult::ExceedNonePte;
    }
    ScanResult::Succeed
}

/// Why taking one page for the collapse failed, and whether the file needs a flush.
struct TakeFailed(ScanResult, bool);

/// Finds (reading it if missing) and locks the page at `index`, checks it and isolates it
/// from the LRU: the page, locked and isolated, or why not (the page left unlocked). A page
/// missing from a shmem file is a hole (`None`), which the THP fills with zeros.
async fn take_page(
    cx: &Cx,
    inode: InodeId,
    index: u64,
    end: u64,
) -> Result<Option<Pfn>, TakeFailed> {
    cx.charge(Cost::PageCacheLookup).await;
    let (cached, shmem) = {
        let st = cx.st();
        (st.page_cache_get(inode, index), st.inodes[inode].fs.tmpfs_mount().is_some())
    };
    let swapped = cx.st().inodes[inode].mapping.swapped.contains_key(&index);
    let head = match cached {
        None if shmem && swapped => {
            // `shmem_get_folio(SGP_NOALLOC)` swaps the page in.
            if crate::shmem::shmem_swapin(cx, inode, index).await.is_err() {
                return Err(TakeFailed(ScanResult::Fail, false));
            }
            filemap_lock_folio(cx, inode, index).await.ok_or(TakeFailed(ScanResult::Fail, false))?
        }
        None if shmem => return Ok(None),
        Some(head) => {
            let mut st = cx.st();
            if !shmem && st.folios.test(head, pg::DIRTY) {
                return Err(TakeFailed(ScanResult::Fail, true));
            }
            if !shmem && st.folios.test(head, pg::WRITEBACK) {
                return Err(TakeFailed(ScanResult::Fail, false));
            }
            if !folio_trylock(&mut st.folios, head) {
                return Err(TakeFailed(ScanResult::PageLock, false));
            }
            head
        }
        None => {
            let size = cx.st().inodes[inode].size_pages();
            if index >= size || read_pages(cx, inode, index, end.min(size)).await.is_err() {
                return Err(TakeFailed(ScanResult::Fail, false));
            }
            filemap_lock_folio(cx, inode, index).await.ok_or(TakeFailed(ScanResult::Fail, false))?
        }
    };
    let failed = check_locked_page(&cx.st(), head, shmem);
    if let Some(r) = failed {
        folio_unlock(cx, head);
        return Err(TakeFailed(r, false));
    }
    cx.st().folio_isolate_lru(head);
    Ok(Some(head))
}

/// `filemap_lock_folio`: the page cached at `index`, locked, or `None` once the lookup finds
/// nothing. A page truncated while this waited for its lock is let go and looked up again, as
/// `__filemap_get_folio` does with `FGP_LOCK`; the lookup's reference keeps the frame from being
/// freed meanwhile and is dropped once the page is locked in the cache.
async fn filemap_lock_folio(cx: &Cx, inode: InodeId, index: u64) -> Option<Pfn> {
    loop {
        let head = cx.st().page_cache_get(inode, index)?;
        cx.st().folios.get_extra(head);
        folio_lock(cx, head).await;
        let cached = cx.st().page_cache_get(inode, index) == Some(head);
        if !cached {
            folio_unlock(cx, head);
        }
        cx.st().put_folio_extra(head);
        if cached {
            return Some(head);
        }
    }
}

/// `collapse_file`'s checks of a page it has locked (a shmem page may be dirty). The kernel's
/// check that the page is still in this mapping (`SCAN_TRUNCATED`) is not repeated here: both
/// ways of taking the page hold its lock from a lookup that found it cached (`folio_trylock`
/// under the xarray lock, or `filemap_lock_folio`), so it cannot have been truncated.
fn check_locked_page(st: &KState, head: Pfn, shmem: bool) -> Option<ScanResult> {
    if !st.folios.test(head, pg::UPTODATE) {
        return Some(ScanResult::Fail);
    }
    if st.folios.order(head) != Order::BASE {
        return Some(ScanResult::PageCompound);
    }
    if !shmem && (st.folios.test(head, pg::DIRTY) || st.folios.test(head, pg::WRITEBACK)) {
        return Some(ScanResult::Fail);
    }
    (!st.folios.test(head, pg::LRU)).then_some(ScanResult::DelPageLru)
}

/// `collapse_file` for a disk or shmem file: the module note has the steps. The caller holds no
/// `mmap_lock`.
pub(super) async fn collapse_file(cx: &Cx, r: FileRange, who: Collapser) -> ScanResult {
    let Some(new) = alloc_collapse_page(cx, who).await else {
        return ScanResult::AllocHugePageFail;
    };
    cx.st().folios.set(new, pg::LOCKED);
    if crate::era::collapse_replaces_per_index(cx.kernel().version) {
        let (start, from, filled) = (r.start, r.start, r.start);
        cx.st().inodes[r.inode].mapping.collapse_slots =
            Some(CollapseSlots { new, start, from, filled });
    }
    let size_before = cx.st().inodes[r.inode].size_pages();
    let (taken, mut result, flush) = take_range(cx, r).await;
    if result == ScanResult::Succeed && writer_present(cx, r.inode).await {
        result = ScanResult::Fail;
    }
    if result == ScanResult::Succeed {
        replace_pages(cx, r, &taken, new);
    }
    if result != ScanResult::Succeed {
        rollback(cx, r, &taken, new).await;
        count_truncated_rollback(&mut cx.st(), r, size_before);
        if flush {
            writeback(cx, r.inode).await;
        }
        return result;
    }
    cx.charge_n(Cost::CopyPage4k, taken.len() as u64).await;
    let holes = HPAGE_PMD_NR - taken.len() as u64;
    if holes > 0 {
        cx.charge_n(Cost::ZeroPage4k, holes).await;
    }
    retract_page_tables(cx, r).await;
    folio_unlock(cx, new);
    cx.st().put_folio_extra(new);
    ScanResult::Succeed
}

/// A page taken for a collapse: its offset in the range, and the page.
type Taken = (u64, Pfn);

/// Takes every page of `r` for the collapse, each locked, isolated and unmapped (the module
/// note): the pages taken, the result, and whether the file needs a flush.
async fn take_range(cx: &Cx, r: FileRange) -> (Vec<Taken>, ScanResult, bool) {
    let mut taken = Vec::with_capacity(HPAGE_PMD_NR as usize);
    if let Some(why) = shmem_range_fails(&cx.st(), r) {
        return (taken, why, false);
    }
    for index in r.start..r.start + HPAGE_PMD_NR {
        let head = match take_page(cx, r.inode, index, r.start + HPAGE_PMD_NR).await {
            Ok(None) => {
                fill_slot(&mut cx.st(), r, index);
                continue;
            }
            Ok(Some(head)) => head,
            Err(TakeFailed(why, dirty)) => return (taken, why, dirty),
        };
        taken.push((index - r.start, head));
        if cx.st().folios.folio_mapcount(head) > 0 {
            crate::rmap::try_to_unmap(cx, head, false).await;
        }
        // The cache's reference and the isolation's: nobody else may hold the page.
        if cx.st().folios.refcount(head) != 2 {
            return (taken, ScanResult::PageCount, false);
        }
        fill_slot(&mut cx.st(), r, index);
    }
    (taken, ScanResult::Succeed, false)
}

/// Before v6.4 the new page takes the slot of `index` as soon as its old page is taken (or its
/// hole passed): `xas_store` of the new page under the xa_lock.
fn fill_slot(st: &mut KState, r: FileRange, index: u64) {
    if let Some(slots) = st.inodes[r.inode].mapping.collapse_slots.as_mut() {
        slots.filled = index + 1;
    }
}

/// For a shmem range, why its collapse fails before any page is taken: nothing cached or
/// swapped out in it (`SCAN_TRUNCATED`: "stop if extent has been truncated or hole-punched, and is now completely
/// empty"), or it reaches past the end of the file (`SCAN_FAIL`, mmsim's: it has no THP past
/// EOF, `shmem.rs`).
fn shmem_range_fails(st: &KState, r: FileRange) -> Option<ScanResult> {
    let i = &st.inodes[r.inode];
    i.fs.tmpfs_mount()?;
    if r.start + HPAGE_PMD_NR > i.size_pages() {
        return Some(ScanResult::Fail);
    }
    // A swap entry is an entry too (`xas_next_entry` finds value entries).
    let end = r.start + HPAGE_PMD_NR;
    let empty = i.mapping.pages.range(r.start..end).next().is_none()
        && i.mapping.swapped.range(r.start..end).next().is_none();
    empty.then_some(ScanResult::Truncated)
}

/// Seed 000's writer check (eb6ecbed0aa2, v5.14): count the THP in `nr_thps`, then look for
/// an opener for write, which fails the collapse and takes the count back. The opener does the
/// mirror image (`open_for_write_drop_thps`), so with the kernel's barriers at least one of the
/// two sees the other; between the store and the load either may be preempted. Under the broken
/// `thp_writer_barrier = reordered` each side's load passes its store.
async fn writer_present(cx: &Cx, inode: InodeId) -> bool {
    let shmem = cx.st().inodes[inode].fs.tmpfs_mount().is_some();
    if shmem || !cx.st().thp.file_thp.collapse_checks_writer() {
        return false;
    }
    let reordered = cx.kernel().switches.thp_writer_barrier == ThpWriterBarrier::Reordered;
    let early = reordered.then(|| cx.st().inodes[inode].is_open_for_write());
    // `filemap_nr_thps_inc` counts nothing where the mapping supports large folios.
    let n = {
        let st = cx.st();
        let fs = st.inodes[inode].fs;
        u64::from(fs.read_only_thps() && !fs.large_folios(st.thp.kernel))
    };
    let count = |st: &mut KState| {
        let m = &mut st.inodes[inode].mapping;
        (m.nr_thps, m.collapsing) = (m.nr_thps + n, m.collapsing + n);
    };
    if !reordered {
        count(&mut cx.st());
    }
    cx.preempt_point().await;
    if reordered {
        count(&mut cx.st());
    }
    let mut st = cx.st();
    let writer = early.unwrap_or_else(|| st.inodes[inode].is_open_for_write());
    let m = &mut st.inodes[inode].mapping;
    m.collapsing -= n;
    if writer {
        m.nr_thps -= n;
    }
    writer
}

/// The end of a collapse that took every page and passed the writer check, in one step: the
/// copy (zeros for a shmem file's holes) and the exchange of the old pages for the THP `new` in
/// the page cache, which takes over the `nr_thps` count the check made; a shmem THP is dirty
/// (it has no other copy).
fn replace_pages(cx: &Cx, r: FileRange, taken: &[Taken], new: Pfn) {
    let mut st = cx.st();
    let counted = st.thp.file_thp.collapse_checks_writer() && st.counts_in_nr_thps(r.inode, new);
    if taken.len() < HPAGE_PMD_NR as usize {
        st.mem.zero_range(new, HPAGE_PMD_NR);
    }
    for &(off, head) in taken {
        st.mem.copy(head.0, new.0 + off);
        st.page_cache_delete(r.inode, head);
        st.folios.clear_flag(head, pg::LOCKED);
    }
    st.folios.set(new, pg::UPTODATE);
    st.inodes[r.inode].mapping.collapse_slots = None;
    st.inodes[r.inode].mapping.nr_thps -= u64::from(counted);
    st.page_cache_insert(r.inode, r.start, new, false, cx.in_lru_fault());
    if st.is_shmem_thp(r.inode, new) {
        st.folio_mark_dirty(new);
    }
    drop(st);
    for &(_, head) in taken {
        cx.kernel().folio_waitqueue(head).wake_up_all(cx);
        cx.st().put_folio_extra(head); // the isolation's: the page is freed
    }
}

/// A failed collapse: the pages taken go back to the LRU, unlocked; the THP is unlocked and
/// freed. Before v6.4 each old page first takes its slot back from the new page, one index after
/// another with the xa_lock dropped between two (mmsim lets others run every 64 pages, one xarray
/// node); the holes a shmem collapse filled are emptied with them. A truncation that found the
/// new page in a slot and waits on its lock wakes when it is unlocked, after the last slot.
async fn rollback(cx: &Cx, r: FileRange, taken: &[Taken], new: Pfn) {
    let per_index = cx.st().inodes[r.inode].mapping.collapse_slots.is_some();
    for (n, &(off, head)) in taken.iter().enumerate() {
        if let Some(slots) = cx.st().inodes[r.inode].mapping.collapse_slots.as_mut() {
            slots.from = r.start + off + 1;
        }
        folio_unlock(cx, head);
        cx.st().folio_putback_lru(head, false);
        if per_index && n % 64 == 63 {
            cx.preempt_point().await;
        }
    }
    cx.st().inodes[r.inode].mapping.collapse_slots = None;
    folio_unlock(cx, new);
    cx.st().put_folio_extra(new);
}

/// Counts a rolled-back collapse during which a truncation cut the file short of the range it
/// had when the collapse began (mmsim's own count, no kernel interface: the kernel reports such
/// a collapse as `SCAN_FAIL`, like any other missing page or a writer).
fn count_truncated_rollback(st: &mut KState, r: FileRange, size_before: u64) {
    let size = st.inodes[r.inode].size_pages();
    if size < size_before && size < r.start + HPAGE_PMD_NR {
        st.thp.khugepaged.truncated_rollbacks += 1;
    }
}

/// The PMD-aligned address at which `vma` maps page `start` of its file with the whole 2 MiB
/// inside it, if it does.
fn vma_pmd_address(st: &KState, vma: VmaId, start: u64) -> Option<VirtAddr> {
    let v = st.vma(vma);
    let off = start.checked_sub(v.pgoff)?;
    let addr = v.start + Bytes(off << 12);
    (addr.is_aligned(Bytes::PMD) && addr >= v.start && addr + Bytes::PMD <= v.end).then_some(addr)
}

/// `retract_page_tables` in its era shape (the module note).
async fn retract_page_tables(cx: &Cx, r: FileRange) {
    let without_mmap_lock = crate::era::retract_without_mmap_lock(cx.st().thp.kernel);
    let rwsem = cx.st().inodes[r.inode].mapping.i_mmap_rwsem;
    let _i = rwsem.read(cx).await;
    let vmas: Vec<VmaId> = cx.st().inodes[r.inode].mapping.i_mmap.iter().copied().collect();
    for vma in vmas {
        let target = {
            let st = cx.st();
            let v = st.vma(vma);
            (v.anon_vma.is_none()).then(|| vma_pmd_address(&st, vma, r.start)).flatten()
        };
        let Some(haddr) = target else { continue };
        let mm = cx.st().vma(vma).mm;
        if without_mmap_lock {
            retract_one(cx, mm, vma, haddr).await;
            continue;
        }
        let lock = cx.st().mm(mm).mmap_lock;
        match lock.try_write(cx).await {
            Some(_w) => retract_one(cx, mm, vma, haddr).await,
            None => defer_pte_mapped_thp(&mut cx.st(), mm, haddr),
        }
    }
}

/// `khugepaged_add_pte_mapped_thp`: remembers `haddr` for khugepaged's next visit to `mm`.
pub(super) fn defer_pte_mapped_thp(st: &mut KState, mm: MmId, haddr: VirtAddr) {
    let slots = st.thp.khugepaged.pte_mapped_thp.entry(mm).or_default();
    if slots.len() < MAX_PTE_MAPPED_THP && !slots.contains(&haddr) {
        slots.push(haddr);
    }
}

/// The PMD slot of `haddr` in `mm` and the PTE table it points at, if any.
fn pte_table_at(st: &KState, mm: MmId, haddr: VirtAddr) -> Option<(PtId, usize, PtId)> {
    let (pmd_table, idx) = st.pt.pmd_slot(st.mm(mm).pgd, haddr)?;
    match st.pt.upper(pmd_table, idx) {
        Upper::Table(t) => Some((pmd_table, idx, t)),
        _ => None,
    }
}

/// Clears the PMD of `vma` at `haddr` that points at an empty PTE table and frees the table,
/// under the PMD lock and the PTE lock; skipped if the VMA gained an anon_vma or the table is
/// not empty.
async fn retract_one(cx: &Cx, mm: MmId, vma: VmaId, haddr: VirtAddr) {
    let Some((pmd_table, _, table)) = pte_table_at(&cx.st(), mm, haddr) else { return };
    let pml = cx.st().pt.ptl(pmd_table);
    let _p = pml.lock(cx).await;
    let ptl = cx.st().pt.ptl(table);
    let g = ptl.lock(cx).await;
    {
        let mut st = cx.st();
        let Some((pmd_table, idx, t)) = pte_table_at(&st, mm, haddr) else { return };
        let alive = st.mm(mm).vmas.values().any(|&v| v == vma);
        if t != table || !alive || st.vma(vma).anon_vma.is_some() || st.pt.table(t).used != 0 {
            return;
        }
        st.free_pte_table(mm, pmd_table, idx, t);
    }
    drop(g);
    crate::arch::tlbflush::flush_tlb_range(cx, mm, haddr, haddr + Bytes::PMD).await;
}

impl KState {
    /// Takes the empty PTE table `table` out of slot `idx` of `pmd_table` in `mm` and frees it
    /// (`pmdp_collapse_flush` and `pte_free_defer`; the caller flushes the TLB).
    fn free_pte_table(&mut self, mm: MmId, pmd_table: PtId, idx: usize, table: PtId) {
        self.pt.set_upper(pmd_table, idx, Upper::None);
        let frame = self.pt.free(table);
        self.free_pgtable_frame(frame);
        self.mm_mut(mm).pgtable_dec(Level::Pte);
    }

    /// Clears every PTE of `table` that maps a page of the THP `head` (each at its offset),
    /// dropping their rmap, RSS and references; false, touching nothing, if a PTE maps anything
    /// else or is not present (a guard marker).
    fn clear_thp_ptes(&mut self, mm: MmId, table: PtId, head: Pfn) -> bool {
        let maps_own_page = |i: usize, pte: Pte| {
            pte.is_none() || (pte.is_present() && pte.pfn() == head + i as u64)
        };
        if !(0..512).all(|i| maps_own_page(i, self.pt.pte(table, i))) {
            return false;
        }
        for i in 0..512 {
            let pte = self.pt.pte(table, i);
            if pte.is_none() {
                continue;
            }
            if pte.dirty() {
                self.folio_mark_dirty(head);
            }
            self.pt.set_pte(table, i, Pte::NONE);
            self.rmap_remove_pte(pte.pfn());
            let counter = crate::mm_struct::mm_counter(&self.folios, head);
            self.mm_mut(mm).sub_rss(counter, 1);
            self.put_folio(head, 1);
        }
        true
    }
}

/// The page-cache THP that `vma` maps at `haddr`, if the VMA may hold one there
/// (`thp_vma_allowable_order` without the sysfs gate).
fn cached_thp_for(st: &KState, vma: VmaId, haddr: VirtAddr) -> Result<(InodeId, Pfn), ScanResult> {
    let caller = crate::huge_memory::policy::ThpCaller::Collapse;
    if vma_pmd_address(st, vma, st.vma(vma).page_index(haddr)) != Some(haddr)
        || !crate::huge_memory::policy::thp_vma_allowable(st, vma, caller)
    {
        return Err(ScanResult::VmaCheck);
    }
    let r = file_range(st, vma, haddr).ok_or(ScanResult::VmaCheck)?;
    let head = st.page_cache_get(r.inode, r.start).ok_or(ScanResult::PageNull)?;
    if st.folios.order(head) != Order::PMD || st.folio_index(head) != r.start {
        return Err(ScanResult::PageCompound);
    }
    Ok((r.inode, head))
}

/// `collapse_pte_mapped_thp`: the caller holds `mmap_lock` (for write before v6.6, for read
/// from v6.6). Replaces the PTE table at `haddr` of `mm` that maps the page-cache THP there by
/// nothing, or with `install_pmd` by a PMD mapping it.
pub(super) async fn collapse_pte_mapped_thp(
    cx: &Cx,
    mm: MmId,
    haddr: VirtAddr,
    install_pmd: bool,
) -> ScanResult {
    let Some(vma) = cx.st().find_vma(mm, haddr) else { return ScanResult::VmaNull };
    let (inode, head) = match cached_thp_for(&cx.st(), vma, haddr) {
        Ok(found) => found,
        Err(r) => return r,
    };
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    let cached = {
        let st = cx.st();
        st.page_cache_get(inode, st.folio_index(head)) == Some(head)
    };
    let r = if !cached {
        ScanResult::Truncated
    } else {
        pte_mapped_thp_locked(cx, mm, vma, haddr, head, install_pmd).await
    };
    folio_unlock(cx, head);
    cx.st().put_folio_extra(head);
    r
}

/// The part of `collapse_pte_mapped_thp` under the THP's lock.
async fn pte_mapped_thp_locked(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    haddr: VirtAddr,
    head: Pfn,
    install_pmd: bool,
) -> ScanResult {
    let slot = {
        let st = cx.st();
        st.pt.pmd_slot(st.mm(mm).pgd, haddr).map(|(t, i)| (t, i, st.pt.upper(t, i)))
    };
    let Some((pmd_table, idx, entry)) = slot else { return ScanResult::PmdNull };
    let pml = cx.st().pt.ptl(pmd_table);
    match entry {
        Upper::Leaf(_) => return ScanResult::PmdMapped,
        Upper::None => {}
        Upper::Table(table) => {
            let _p = pml.lock(cx).await;
            let ptl = cx.st().pt.ptl(table);
            let _g = ptl.lock(cx).await;
            let mut st = cx.st();
            if st.pt.upper(pmd_table, idx) != Upper::Table(table)
                || !st.clear_thp_ptes(mm, table, head)
            {
                return ScanResult::Fail;
            }
            st.free_pte_table(mm, pmd_table, idx, table);
        }
    }
    crate::arch::tlbflush::flush_tlb_range(cx, mm, haddr, haddr + Bytes::PMD).await;
    if !install_pmd {
        return ScanResult::Succeed;
    }
    let _p = pml.lock(cx).await;
    let mut st = cx.st();
    if st.pt.upper(pmd_table, idx) != Upper::None {
        return ScanResult::Fail;
    }
    st.folios.get_extra(head);
    st.set_file_pmd(mm, vma, (pmd_table, idx), head, false);
    ScanResult::Succeed
}

/// `khugepaged_collapse_pte_mapped_thps` (before v6.6): retries the deferred slots of `mm`
/// under `mmap_lock` for write, if it can be had at once.
pub(super) async fn collapse_deferred_pte_mapped_thps(cx: &Cx, mm: MmId) {
    let slots = cx.st().thp.khugepaged.pte_mapped_thp.get(&mm).cloned().unwrap_or_default();
    if slots.is_empty() {
        return;
    }
    let Some(lock) = cx.st().live_mmap_lock(mm) else {
        cx.st().thp.khugepaged.pte_mapped_thp.remove(&mm);
        return;
    };
    let Some(_w) = lock.try_write(cx).await else { return };
    cx.st().thp.khugepaged.pte_mapped_thp.remove(&mm);
    for haddr in slots {
        if super::mm_exited(&cx.st(), mm) {
            return;
        }
        collapse_pte_mapped_thp(cx, mm, haddr, false).await;
    }
}
