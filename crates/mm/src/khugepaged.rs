//! khugepaged and `MADV_COLLAPSE`, anonymous memory here, files in `khugepaged/file.rs`
//! (`mm/khugepaged.c`: `khugepaged_enter_vma`, `khugepaged`, `khugepaged_do_scan`,
//! `khugepaged_scan_mm_slot`, `hpage_collapse_scan_pmd`, `collapse_huge_page`,
//! `__collapse_huge_page_isolate`, `__collapse_huge_page_copy`, `madvise_collapse`,
//! `madvise_collapse_errno`; Linux v6.8, with the eras below).
//!
//! Registration (`khugepaged_enter_vma`): an anonymous THP fault, `MADV_HUGEPAGE` and, from v5.19,
//! every new mapping (`mmap_region` and the ELF loader, 613bec092fe7) put the mm
//! on khugepaged's list (`MMF_VM_HUGEPAGE`) when the policy allows PMD THPs there for
//! khugepaged (`ThpCaller::Khugepaged`: the sysfs gate, and an anon_vma, so only faulted VMAs)
//! and `enabled` is not `never`. The daemon starts with the first registration (the kernel starts
//! it at boot, where it sleeps until an mm registers: nothing observable differs).
//!
//! The daemon: each round (`khugepaged_do_scan`) scans up to `pages_to_scan` pages, going round
//! the list from a cursor (mm, address); a VMA it skips counts 1, a PMD range 512. An mm whose
//! `mmap_lock` it cannot take for read is passed over. Reaching the end of the list counts a
//! full scan (`full_scans`). After a failed THP allocation it sleeps `alloc_sleep_millisecs` once
//! and ends the round at the second; between rounds it sleeps `scan_sleep_millisecs`, or until
//! an mm registers when none is left or `enabled` is `never`.
//!
//! The scan of one PMD range (`hpage_collapse_scan_pmd`, under the PTE lock), first failure wins:
//! no PTE table (`SCAN_PMD_NULL`) or already a THP (`SCAN_PMD_MAPPED`); more swap entries than
//! `max_ptes_swap` (`SCAN_EXCEED_SWAP_PTE`), more none or zero-page PTEs than `max_ptes_none`
//! (`SCAN_EXCEED_NONE_PTE`), more pages mapped elsewhere too than `max_ptes_shared`
//! (`SCAN_EXCEED_SHARED_PTE`) — khugepaged's limits only; a page off the LRU (`SCAN_PAGE_LRU`),
//! locked (`SCAN_PAGE_LOCK`) or with references beyond its mappings and the swap cache, a pin
//! or GUP reference (`SCAN_PAGE_COUNT`); no writable PTE (`SCAN_PAGE_RO`, before v6.18:
//! `era::collapse_needs_writable_pte`); for khugepaged no
//! young PTE or referenced page, or swap entries with fewer than 256 referenced
//! (`SCAN_LACK_REFERENCED_PAGE`). Before v5.8 a page mapped twice fails with `SCAN_PAGE_COUNT` and
//! a page of a large folio with `SCAN_PAGE_COMPOUND` ("khugepaged: introduce 'max_ptes_shared'
//! tunable" 71a2c112a0f6 and "khugepaged: allow to collapse PTE-mapped compound pages"
//! 5503fbf2b0b8, v5.8).
//!
//! The collapse (`collapse_huge_page`): drops `mmap_lock`, allocates the THP (`thp_collapse_alloc`,
//! or `thp_collapse_alloc_failed` and `SCAN_ALLOC_HUGE_PAGE_FAIL`; khugepaged reclaims directly
//! only with its `defrag` on), swaps the range's swap entries in under `mmap_lock` for read, then
//! takes `mmap_lock` for write, revalidates the VMA (`SCAN_VMA_NULL`, `SCAN_VMA_CHECK`,
//! `SCAN_ADDRESS_RANGE`), takes the anon_vma lock for write and the PMD lock, clears the PMD and
//! flushes the range (`pmdp_collapse_flush`, which also stops GUP-fast), and re-checks every PTE
//! as the scan did (`__collapse_huge_page_isolate`); a failure puts the PTE table back as it was
//! (rollback: no THP, no data change). Then it copies the pages (zeroes for none and zero-page
//! PTEs), unmaps and releases the old pages (pages mapped elsewhere stay there), deposits the old
//! PTE table and maps the THP by a writable, dirty, exclusive PMD; `pages_collapsed` counts
//! khugepaged's successes.
//!
//! Races (`scenarios/races/collapse-gup-fast.toml`, `collapse-fork.toml`). `mmap_lock` for write
//! keeps fork out (`dup_mmap` holds the parent's for write): fork copies the range before the
//! collapse (whose re-check then finds the PTEs write-protected, `SCAN_PAGE_RO`, or from v6.18
//! the pages shared, which MADV_COLLAPSE copies and khugepaged leaves to `max_ptes_shared`) or the THP after
//! it; the `collapse_mmap_lock = none` variant, broken on purpose, lets fork copy an empty PMD.
//! GUP-fast takes no lock: clearing the PMD and flushing stops only walks that start later, and
//! a walk that read the PTE before may take its reference after the re-check of the page
//! counts, while the PTE is still in place; from v6.0 (~, 70cbc3cc78a9) GUP-fast re-checks the
//! PMD after taking the reference and backs off, before only the PTE, and it returned the old
//! page that the collapse then replaced (`gup.rs`, `gup_fast_recheck`). The table is deposited,
//! not freed, so GUP-fast never reads freed memory here (the file collapse's retraction needs
//! the IPI of 2ba99c5e0881 for that).
//!
//! `MADV_COLLAPSE` (v6.1, 7d8faaf15545; EINVAL before) runs the same scan and collapse
//! synchronously over every PMD range of the advised range, with the policy's
//! `ThpCaller::Collapse` (no sysfs gate, but `VM_NOHUGEPAGE` and `PR_SET_THP_DISABLE` refuse it
//! and the VMA needs an anon_vma), none of the `max_ptes_*` limits and no referenced test; a
//! range that is already a THP succeeds. It returns 0 when every range ended as a THP, else the
//! errno of the last failure (`madvise_collapse_errno`): ENOMEM for an allocation failure, EBUSY
//! for a cgroup charge or none-PTE failure, EAGAIN for a busy page (count, lock, LRU), EINVAL
//! otherwise (~ the EAGAIN cases date from v6.2 in the notes; mmsim uses them from v6.1).
//!
//! File VMAs take the second arm of the scan and of [`scan_and_collapse`]: `file.rs` has
//! `hpage_collapse_scan_file`, `collapse_file`, `retract_page_tables` and
//! `collapse_pte_mapped_thp` with their eras. khugepaged drops `mmap_lock` before a file scan
//! (the file pinned), and ends its visit of the mm after it, as the kernel does.
//!
//! A range of a VMA a userfaultfd registered collapses only without none or zero-page PTEs
//! (`SCAN_EXCEED_NONE_PTE`, khugepaged and `MADV_COLLAPSE` alike: `userfaultfd_armed`).
//!
//! Approximations: no per-node allocation or NUMA checks (`SCAN_SCAN_ABORT`), no
//! memcg charge failure (`SCAN_CGROUP_CHARGE_FAIL`: the charge reclaims or the allocation
//! fails), no `COPY_MC`; the scan runs under `mmap_lock` for read and the PTE lock as one step.

mod file;

use crate::era::CollapseMmapLock;
use crate::errno::Errno;
use crate::folio::pg;
use crate::huge_memory::policy::{ThpCaller, thp_vma_allowable};
use crate::kernel::{Cx, KState};
use crate::memory::{FaultKind, vm_normal_page};
use crate::mm_struct::{MMF_VM_HUGEPAGE, MmCounter};
use crate::pgtable::{Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::huge_mm::Khugepaged;
use crate::types::huge_mm::ThpEnabled;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::vmstat::VmStat;
use simcore::{Bytes, Pfn, SimDuration, VirtAddr};

/// Pages in a PMD-sized folio (`HPAGE_PMD_NR`).
const HPAGE_PMD_NR: u64 = 512;

/// The outcome of a scan or collapse (`enum scan_result`), by its kernel name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanResult {
    Succeed,
    PmdNull,
    PmdMapped,
    ExceedNonePte,
    ExceedSwapPte,
    ExceedSharedPte,
    PageRo,
    LackReferencedPage,
    PageAnon,
    PageCompound,
    PageLru,
    PageLock,
    PageCount,
    AllocHugePageFail,
    VmaNull,
    VmaCheck,
    AddressRange,
    DelPageLru,
    PteMappedHugepage,
    PageNull,
    Truncated,
    Fail,
}

impl ScanResult {
    /// The errno `MADV_COLLAPSE` reports for a failed range (`madvise_collapse_errno`).
    fn errno(self) -> Errno {
        match self {
            ScanResult::AllocHugePageFail => Errno::ENOMEM,
            ScanResult::ExceedNonePte => Errno::EBUSY,
            ScanResult::PageCount
            | ScanResult::PageLock
            | ScanResult::PageLru
            | ScanResult::DelPageLru => Errno::EAGAIN,
            _ => Errno::EINVAL,
        }
    }
}

impl Khugepaged {
    /// Adds what khugepaged's future depends on to a state fingerprint.
    pub(crate) fn fingerprint(&self, d: &mut simcore::Digest) {
        d.write_u64(self.pages_collapsed ^ self.full_scans.rotate_left(32));
        d.write_u64(self.cursor.map_or(0, |(s, a)| a.0 ^ (s as u64 + 1).rotate_left(48)));
        for &(mm, a) in self.isolated.keys() {
            d.write_u64(a.0 ^ u64::from(mm.0).rotate_left(48));
        }
        for (mm, slots) in &self.pte_mapped_thp {
            for a in slots {
                d.write_u64(a.0 ^ u64::from(mm.0).rotate_left(40));
            }
        }
    }
}

/// Who collapses (`struct collapse_control`): khugepaged enforces the `max_ptes_*` limits and
/// the referenced test, `MADV_COLLAPSE` does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Collapser {
    Khugepaged,
    Madvise,
}

/// `khugepaged_enter_vma`: registers `vma`'s mm with khugepaged when the policy allows THPs
/// there for it, starting the daemon on the first registration.
pub(crate) fn khugepaged_enter_vma(cx: &Cx, vma: VmaId) {
    let start = {
        let mut st = cx.st();
        let mm = st.vma(vma).mm;
        if st.mm(mm).flags & MMF_VM_HUGEPAGE != 0
            || st.thp.settings.enabled == ThpEnabled::Never
            || !thp_vma_allowable(&st, vma, ThpCaller::Khugepaged)
        {
            return;
        }
        st.mm_mut(mm).flags |= MMF_VM_HUGEPAGE;
        st.thp.khugepaged.mm_slots.push(mm);
        st.thp.khugepaged.wait.is_none()
    };
    if start {
        let handle: &engine::Handle = cx;
        let wait = handle.wait_queue("khugepaged_wait");
        cx.st().thp.khugepaged.wait = Some(wait);
        cx.spawn_kernel_daemon("khugepaged", khugepaged);
    }
    if let Some(wait) = cx.st().thp.khugepaged.wait {
        wait.wake_up_all(cx);
    }
}

/// Whether khugepaged has an mm to scan and THPs are on (`khugepaged_has_work`).
fn has_work(st: &KState) -> bool {
    st.thp.settings.enabled != ThpEnabled::Never && !st.thp.khugepaged.mm_slots.is_empty()
}

/// The body of khugepaged.
pub(crate) async fn khugepaged(cx: Cx) {
    loop {
        while !has_work(&cx.st()) {
            let wait = cx.st().thp.khugepaged.wait.expect("started with its wait queue");
            wait.wait(&cx).await;
        }
        khugepaged_do_scan(&cx).await;
        let sleep_ms = cx.st().thp.settings.scan_sleep_ms;
        cx.sleep(SimDuration::from_ms(sleep_ms)).await;
    }
}

/// `khugepaged_do_scan`: one round of up to `pages_to_scan` pages.
async fn khugepaged_do_scan(cx: &Cx) {
    if crate::era::khugepaged_drains_lru_batches(cx.kernel().version) {
        cx.st().lru_add_drain_all();
    }
    let pages = cx.st().thp.settings.pages_to_scan;
    let (mut progress, mut passes, mut may_sleep) = (0, 0, true);
    loop {
        cx.preempt_point().await;
        if cx.st().thp.khugepaged.cursor.is_none() {
            passes += 1;
        }
        if !has_work(&cx.st()) || passes >= 2 {
            break;
        }
        let (scanned, result) = khugepaged_scan_mm_slot(cx, pages - progress).await;
        progress += scanned;
        if progress >= pages {
            break;
        }
        if result == Some(ScanResult::AllocHugePageFail) {
            if !may_sleep {
                break;
            }
            may_sleep = false;
            let ms = cx.st().thp.settings.alloc_sleep_ms;
            cx.sleep(SimDuration::from_ms(ms)).await;
        }
    }
}

/// `hpage_collapse_test_exit`: whether `mm` exited, for instance while khugepaged waited for its
/// lock (the kernel's `mm_slot` keeps the `mm_struct` itself and tests `mm_users`; mmsim's is
/// gone).
pub(crate) fn mm_exited(st: &KState, mm: MmId) -> bool {
    st.mms.get(mm).is_none_or(|m| m.is_none())
}

/// Moves the cursor past the mm it points at (counting a full scan at the end of the list),
/// dropping the mm from the list if it has exited.
fn next_mm_slot(st: &mut KState, slot: usize) {
    let gone = mm_exited(st, st.thp.khugepaged.mm_slots[slot]);
    let k = &mut st.thp.khugepaged;
    if gone {
        k.mm_slots.remove(slot);
    }
    let next = if gone { slot } else { slot + 1 };
    if next < k.mm_slots.len() {
        k.cursor = Some((next, VirtAddr(0)));
    } else {
        k.cursor = None;
        k.full_scans += 1;
    }
}

/// `khugepaged_scan_mm_slot`: scans the cursor's mm from the cursor's address for up to
/// `pages` pages; returns the progress and the last scan result.
async fn khugepaged_scan_mm_slot(cx: &Cx, pages: u64) -> (u64, Option<ScanResult>) {
    let (slot, from) = {
        let mut st = cx.st();
        let c = st.thp.khugepaged.cursor.unwrap_or((0, VirtAddr(0)));
        st.thp.khugepaged.cursor = Some(c);
        c
    };
    let mm = cx.st().thp.khugepaged.mm_slots[slot];
    if !crate::era::retract_without_mmap_lock(cx.st().thp.kernel) {
        file::collapse_deferred_pte_mapped_thps(cx, mm).await;
    }
    let Some(lock) = cx.st().live_mmap_lock(mm) else {
        next_mm_slot(&mut cx.st(), slot);
        return (1, None);
    };
    let Some(guard) = lock.try_read(cx).await else {
        next_mm_slot(&mut cx.st(), slot);
        return (1, None);
    };
    if mm_exited(&cx.st(), mm) {
        drop(guard);
        next_mm_slot(&mut cx.st(), slot);
        return (1, None);
    }
    let (mut progress, mut result) = (0, None);
    let mut addr = from;
    loop {
        let Some((vma, hstart, hend)) = next_collapse_range(&cx.st(), mm, addr) else {
            drop(guard);
            next_mm_slot(&mut cx.st(), slot);
            return (progress + 1, result);
        };
        progress += 1;
        addr = addr.max(hstart);
        if addr >= hend || !thp_vma_allowable(&cx.st(), vma, ThpCaller::Khugepaged) {
            addr = hend.max(cx.st().vma(vma).end);
            continue;
        }
        let at = addr;
        addr = addr + Bytes::PMD;
        progress += HPAGE_PMD_NR;
        cx.st().thp.khugepaged.cursor = Some((slot, addr));
        let range = file::file_range(&cx.st(), vma, at);
        if let Some(range) = range {
            drop(guard);
            return (progress, Some(khugepaged_scan_file(cx, mm, at, range).await));
        }
        let r = hpage_collapse_scan_pmd(&cx.st(), mm, at, Collapser::Khugepaged);
        cx.st().count_scan_exceed(r);
        result = Some(r);
        if r == ScanResult::Succeed {
            drop(guard);
            let r = collapse_huge_page(cx, mm, at, Collapser::Khugepaged).await;
            if r == ScanResult::Succeed {
                cx.st().thp.khugepaged.pages_collapsed += 1;
            }
            return (progress, Some(r));
        }
        if progress >= pages {
            return (progress, result);
        }
    }
}

/// khugepaged's visit of one PMD range of a file VMA, `mmap_lock` dropped: the scan, the
/// collapse, and for a THP still mapped by PTEs `collapse_pte_mapped_thp` under `mmap_lock` for
/// read (v6.6+) or a deferred slot (before).
async fn khugepaged_scan_file(
    cx: &Cx,
    mm: MmId,
    haddr: VirtAddr,
    r: file::FileRange,
) -> ScanResult {
    let scanned = file::hpage_collapse_scan_file(&cx.st(), r, Collapser::Khugepaged);
    cx.st().count_scan_exceed(scanned);
    let result = match scanned {
        ScanResult::Succeed => file::collapse_file(cx, r, Collapser::Khugepaged).await,
        ScanResult::PteMappedHugepage => {
            if !crate::era::retract_without_mmap_lock(cx.st().thp.kernel) {
                file::defer_pte_mapped_thp(&mut cx.st(), mm, haddr);
                return scanned;
            }
            let lock = cx.st().live_mmap_lock(mm);
            let Some(lock) = lock else { return scanned };
            let _g = lock.read(cx).await;
            if mm_exited(&cx.st(), mm) {
                return scanned;
            }
            match file::collapse_pte_mapped_thp(cx, mm, haddr, false).await {
                ScanResult::PmdMapped => ScanResult::Succeed,
                r => r,
            }
        }
        r => r,
    };
    if result == ScanResult::Succeed && scanned == ScanResult::Succeed {
        cx.st().thp.khugepaged.pages_collapsed += 1;
    }
    result
}

/// The first VMA of `mm` ending after `addr`, with its first and last 2 MiB boundaries
/// (`hstart`, `hend`: the PMD ranges it wholly holds lie between them).
fn next_collapse_range(
    st: &KState,
    mm: MmId,
    addr: VirtAddr,
) -> Option<(VmaId, VirtAddr, VirtAddr)> {
    let id = st.mm(mm).vmas.values().copied().find(|&v| st.vma(v).end > addr)?;
    let v = st.vma(id);
    let hstart = (v.start + Bytes(Bytes::PMD.as_u64() - 1)).align_down(Bytes::PMD);
    Some((id, hstart, v.end.align_down(Bytes::PMD)))
}

impl KState {
    /// The event a scan that hit a `max_ptes_*` limit counts (`thp_scan_exceed_none_pte`,
    /// `_swap_pte`, `_share_pte`, v5.18: `vmstat::exists_on`).
    fn count_scan_exceed(&mut self, r: ScanResult) {
        let event = match r {
            ScanResult::ExceedNonePte => VmStat::ThpScanExceedNonePte,
            ScanResult::ExceedSwapPte => VmStat::ThpScanExceedSwapPte,
            ScanResult::ExceedSharedPte => VmStat::ThpScanExceedSharePte,
            _ => return,
        };
        if crate::vmstat::exists_on(event, self.thp.kernel) {
            self.vmstat.inc(event);
        }
    }
}

/// What the PTEs of one PMD range hold, as the scan counts them.
#[derive(Default)]
struct PteCensus {
    none_or_zero: u64,
    swap: u64,
    shared: u64,
    referenced: u64,
    writable: bool,
}

/// `hpage_collapse_scan_pmd`: whether the PMD range at `haddr` of `mm` can be collapsed (the
/// module note lists the checks), looking at the page tables as they are.
fn hpage_collapse_scan_pmd(st: &KState, mm: MmId, haddr: VirtAddr, who: Collapser) -> ScanResult {
    let Some((pmd_table, idx)) = st.pt.pmd_slot(st.mm(mm).pgd, haddr) else {
        return ScanResult::PmdNull;
    };
    let table = match st.pt.upper(pmd_table, idx) {
        Upper::Table(t) => t,
        Upper::Leaf(_) => return ScanResult::PmdMapped,
        Upper::None => return ScanResult::PmdNull,
    };
    let armed = st.find_vma(mm, haddr).is_some_and(|v| st.userfaultfd_missing(v));
    let needs_writable = crate::era::collapse_needs_writable_pte(st.thp.kernel);
    match census(st, table, who, armed) {
        Err(r) => r,
        Ok(c) if !c.writable && needs_writable => ScanResult::PageRo,
        Ok(c)
            if who == Collapser::Khugepaged
                && (c.referenced == 0 || (c.swap > 0 && c.referenced < HPAGE_PMD_NR / 2)) =>
        {
            ScanResult::LackReferencedPage
        }
        Ok(_) => ScanResult::Succeed,
    }
}

/// Counts the PTEs of `table` and checks each page (`hpage_collapse_scan_pmd`'s loop, and
/// `__collapse_huge_page_isolate`'s under the collapse): the first failure, or the census. In a
/// VMA a userfaultfd is `armed` on, any none or zero-page PTE fails, `MADV_COLLAPSE`'s too: the
/// collapse would fill pages the handler should.
fn census(st: &KState, table: PtId, who: Collapser, armed: bool) -> Result<PteCensus, ScanResult> {
    let s = &st.thp.settings;
    let limits = who == Collapser::Khugepaged;
    let shares = crate::era::khugepaged_collapses_shared_and_compound(st.thp.kernel);
    let mut c = PteCensus::default();
    for i in 0..512 {
        let pte = st.pt.pte(table, i);
        // `is_swap_pte`: a guard marker counts as swapped, and its swap-in fails the collapse.
        if pte.is_swap_pte() {
            c.swap += 1;
            if limits && c.swap > s.max_ptes_swap {
                return Err(ScanResult::ExceedSwapPte);
            }
            continue;
        }
        let Some(page) = vm_normal_page(pte) else {
            c.none_or_zero += 1;
            if armed || (limits && c.none_or_zero > s.max_ptes_none) {
                return Err(ScanResult::ExceedNonePte);
            }
            continue;
        };
        let head = st.folios.head(page);
        if !st.folios.is_anon(head) {
            return Err(ScanResult::PageAnon);
        }
        if st.folios.page_mapcount(page) > 1 {
            c.shared += 1;
            if !shares {
                return Err(ScanResult::PageCount);
            }
            if limits && c.shared > s.max_ptes_shared {
                return Err(ScanResult::ExceedSharedPte);
            }
        }
        if !shares && st.folios.large(head).is_some() {
            return Err(ScanResult::PageCompound);
        }
        check_page(st, head)?;
        c.writable |= pte.write();
        c.referenced += u64::from(pte.young() || st.folios.test(head, pg::REFERENCED));
    }
    Ok(c)
}

/// The per-folio checks: on the LRU, unlocked, and no references beyond its mappings and the
/// swap cache (`is_refcount_suitable`: a pin or a GUP reference fails).
fn check_page(st: &KState, head: Pfn) -> Result<(), ScanResult> {
    if !st.folios.test(head, pg::LRU) {
        return Err(ScanResult::PageLru);
    }
    if st.folios.test(head, pg::LOCKED) {
        return Err(ScanResult::PageLock);
    }
    let cache = if st.folios.test(head, pg::SWAPCACHE) { st.folios.order(head).pages() } else { 0 };
    if u64::from(st.folios.refcount(head)) != u64::from(st.folios.folio_mapcount(head)) + cache {
        return Err(ScanResult::PageCount);
    }
    Ok(())
}

/// `collapse_huge_page`: allocates, swaps in, then under `mmap_lock` for write re-checks and
/// replaces the PTE table at `haddr` of `mm` with a THP (the module note has the steps). The
/// caller has dropped `mmap_lock`.
async fn collapse_huge_page(cx: &Cx, mm: MmId, haddr: VirtAddr, who: Collapser) -> ScanResult {
    let Some(new) = alloc_collapse_page(cx, who).await else {
        return ScanResult::AllocHugePageFail;
    };
    let r = match swapin_range(cx, mm, haddr, who).await {
        ScanResult::Succeed => collapse_locked(cx, mm, haddr, new, who).await,
        r => r,
    };
    if r != ScanResult::Succeed {
        cx.st().put_folio_extra(new);
    }
    r
}

/// The THP a collapse copies into (`alloc_charge_folio`): khugepaged reclaims directly only
/// with its `defrag` on, `MADV_COLLAPSE` always.
async fn alloc_collapse_page(cx: &Cx, who: Collapser) -> Option<Pfn> {
    let reclaim = who == Collapser::Madvise || cx.st().thp.settings.khugepaged_defrag;
    let got = crate::huge_memory::alloc_pmd_folio(cx, reclaim).await;
    let stat =
        if got.is_some() { VmStat::ThpCollapseAlloc } else { VmStat::ThpCollapseAllocFailed };
    cx.st().vmstat.inc(stat);
    got
}

/// The VMA at `haddr` of `mm` if the collapse may still go on there (`hugepage_vma_revalidate`).
/// An mm that exited fails as its VMA would (the kernel's `SCAN_ANY_PROCESS`).
fn revalidate(st: &KState, mm: MmId, haddr: VirtAddr, who: Collapser) -> Result<VmaId, ScanResult> {
    if mm_exited(st, mm) {
        return Err(ScanResult::VmaNull);
    }
    let vma = st.find_vma(mm, haddr).ok_or(ScanResult::VmaNull)?;
    let v = st.vma(vma);
    if haddr < v.start || haddr + Bytes::PMD > v.end {
        return Err(ScanResult::AddressRange);
    }
    let caller =
        if who == Collapser::Khugepaged { ThpCaller::Khugepaged } else { ThpCaller::Collapse };
    if !thp_vma_allowable(st, vma, caller) {
        return Err(ScanResult::VmaCheck);
    }
    Ok(vma)
}

/// `__collapse_huge_page_swapin`: faults the range's swap entries in, under `mmap_lock` for read.
async fn swapin_range(cx: &Cx, mm: MmId, haddr: VirtAddr, who: Collapser) -> ScanResult {
    let Some(lock) = cx.st().live_mmap_lock(mm) else { return ScanResult::VmaNull };
    let _g = lock.read(cx).await;
    let vma = match revalidate(&cx.st(), mm, haddr, who) {
        Ok(v) => v,
        Err(r) => return r,
    };
    for i in 0..HPAGE_PMD_NR {
        let addr = haddr + Bytes(i << 12);
        let swapped = {
            let st = cx.st();
            st.pt.pte_slot(st.mm(mm).pgd, addr).is_some_and(|(t, j)| st.pt.pte(t, j).is_swap_pte())
        };
        if swapped && {
            let acct = crate::fault::FaultAcct::Current;
            crate::fault::handle_mm_fault(cx, mm, vma, addr, FaultKind::Read, acct).await.is_err()
        } {
            return ScanResult::ExceedSwapPte;
        }
    }
    ScanResult::Succeed
}

/// The locked part of the collapse: revalidate, clear and flush the PMD, re-check the PTEs
/// (putting the table back on failure), copy, and map the THP `new`.
async fn collapse_locked(
    cx: &Cx,
    mm: MmId,
    haddr: VirtAddr,
    new: Pfn,
    who: Collapser,
) -> ScanResult {
    let Some(lock) = cx.st().live_mmap_lock(mm) else { return ScanResult::VmaNull };
    let _w = match cx.kernel().switches.collapse_mmap_lock {
        CollapseMmapLock::Write => Some(lock.write(cx).await),
        CollapseMmapLock::None => None,
    };
    let vma = match revalidate(&cx.st(), mm, haddr, who) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some((pmd_table, idx, table)) = ({
        let st = cx.st();
        st.pt.pmd_slot(st.mm(mm).pgd, haddr).and_then(|(t, i)| match st.pt.upper(t, i) {
            Upper::Table(pt) => Some((t, i, pt)),
            _ => None,
        })
    }) else {
        return ScanResult::PmdNull;
    };
    let av_lock = {
        let st = cx.st();
        st.vma(vma).anon_vma.map(|av| st.anon_vmas[av].lock)
    };
    let Some(av_lock) = av_lock else { return ScanResult::VmaCheck };
    let _a = av_lock.write(cx).await;
    let ptl = cx.st().pt.ptl(pmd_table);
    let pmd_guard = ptl.lock(cx).await;
    // `pmdp_collapse_flush`: the PTE table leaves the PMD; no CPU or GUP-fast walk reaches it.
    {
        let mut st = cx.st();
        st.pt.set_upper(pmd_table, idx, Upper::None);
        st.thp.khugepaged.isolated.insert((mm, haddr), table);
    }
    drop(pmd_guard);
    crate::arch::tlbflush::flush_tlb_range(cx, mm, haddr, haddr + Bytes::PMD).await;
    // `__collapse_huge_page_isolate` under the PTE lock; the PTEs stay until the copy.
    let armed = cx.st().userfaultfd_missing(vma);
    let checked = collapse_isolate(cx, table, who, armed).await;
    // A GUP-fast that walked the table before the flush may take its reference here.
    cx.preempt_point().await;
    let _g = ptl.lock(cx).await;
    {
        let mut st = cx.st();
        st.thp.khugepaged.isolated.remove(&(mm, haddr));
        if let Err(r) = checked {
            // Rollback (`pmd_populate`): the old table is mapped again, untouched.
            st.pt.set_upper(pmd_table, idx, Upper::Table(table));
            return r;
        }
        let none_ptes = st.collapse_copy(mm, table, new);
        st.collapse_install(mm, vma, haddr, (pmd_table, idx, table), new, cx.in_lru_fault());
        st.mm_mut(mm).add_rss(MmCounter::AnonPages, none_ptes);
    }
    cx.charge_n(Cost::CopyPage4k, HPAGE_PMD_NR).await;
    ScanResult::Succeed
}

/// `__collapse_huge_page_isolate`'s checks of the PTEs of `table` under its lock, counting a
/// `max_ptes_*` limit they hit.
async fn collapse_isolate(
    cx: &Cx,
    table: PtId,
    who: Collapser,
    armed: bool,
) -> Result<(), ScanResult> {
    let pte_ptl = cx.st().pt.ptl(table);
    let _p = pte_ptl.lock(cx).await;
    let census = census(&cx.st(), table, who, armed);
    let needs_writable = crate::era::collapse_needs_writable_pte(cx.kernel().version);
    match census {
        Ok(c) if !c.writable && needs_writable => Err(ScanResult::PageRo),
        Ok(_) => Ok(()),
        Err(r) => {
            cx.st().count_scan_exceed(r);
            Err(r)
        }
    }
}

impl KState {
    /// `__collapse_huge_page_copy`: copies each page of `table` into `new` (a none or zero-page
    /// PTE leaves zeros), clears the PTEs and releases the old pages (those mapped elsewhere
    /// stay there). Returns the none and zero-page PTEs (pages the mm did not count yet).
    fn collapse_copy(&mut self, mm: MmId, table: PtId, new: Pfn) -> u64 {
        let mut none_ptes = 0;
        for i in 0..512 {
            let pte = self.pt.pte(table, i);
            self.pt.set_pte(table, i, Pte::NONE);
            self.ksm_might_unmap_zero_page(mm, pte);
            let Some(page) = vm_normal_page(pte) else {
                none_ptes += 1;
                continue;
            };
            self.mem.copy(page.0, new.0 + i as u64);
            let head = self.folios.head(page);
            self.rmap_remove_pte(page);
            self.folios.mapping_to_extra(head);
            self.put_folio_extra(head);
        }
        none_ptes
    }

    /// The end of `collapse_huge_page` under the PMD lock: deposits the emptied PTE table and
    /// maps `new` by a writable, dirty, exclusive PMD at `haddr` (`map_anon_folio_pmd`).
    fn collapse_install(
        &mut self,
        mm: MmId,
        vma: VmaId,
        haddr: VirtAddr,
        (pmd_table, idx, table): (PtId, usize, PtId),
        new: Pfn,
        in_lru_fault: bool,
    ) {
        let frame = self.pt.free(table);
        let flags = self.vma(vma).flags;
        let leaf = Pte::new(new, crate::memory::pte_bits(flags, true, true) | Pte::PSE);
        self.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf));
        self.mm_mut(mm).deposited.insert((pmd_table, idx), frame);
        self.folios.extra_to_mapping(new);
        self.rmap_add_new_anon_pmd(new, vma, haddr);
        self.folio_add_lru_new_anon(new, vma, in_lru_fault);
    }
}

/// `madvise(MADV_COLLAPSE)` over `[start, end)` of `mm` (v6.1+): the caller checked the era.
pub(crate) async fn madvise_collapse(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let first = {
        let _g = lock.read(cx).await;
        let st = cx.st();
        let vma = st.find_vma(mm, start).ok_or(Errno::ENOMEM)?;
        if !thp_vma_allowable(&st, vma, ThpCaller::Collapse) {
            return Err(Errno::EINVAL);
        }
        (start + Bytes(Bytes::PMD.as_u64() - 1)).align_down(Bytes::PMD)
    };
    // `madvise_collapse` drains every CPU's LRU batches first (v6.12's mm/khugepaged.c).
    cx.st().lru_add_drain_all();
    let (mut thps, mut ranges, mut last_fail) = (0, 0, None);
    let mut haddr = first;
    while haddr + Bytes::PMD <= end {
        ranges += 1;
        let r = scan_and_collapse(cx, mm, haddr).await;
        match r {
            ScanResult::Succeed | ScanResult::PmdMapped => thps += 1,
            r => last_fail = Some(r),
        }
        haddr = haddr + Bytes::PMD;
    }
    match last_fail {
        Some(r) if thps < ranges => Err(r.errno()),
        _ => Ok(()),
    }
}

/// One range of `MADV_COLLAPSE`: the scan under `mmap_lock` for read, then the collapse; a
/// file range's THP is then mapped by a PMD at once (`collapse_pte_mapped_thp` with
/// `install_pmd`, under `mmap_lock` for write before v6.6, for read from v6.6).
async fn scan_and_collapse(cx: &Cx, mm: MmId, haddr: VirtAddr) -> ScanResult {
    let lock = cx.st().mm(mm).mmap_lock;
    let (scanned, range) = {
        let _g = lock.read(cx).await;
        let st = cx.st();
        match revalidate(&st, mm, haddr, Collapser::Madvise) {
            Ok(vma) => match file::file_range(&st, vma, haddr) {
                Some(r) => (file::hpage_collapse_scan_file(&st, r, Collapser::Madvise), Some(r)),
                None => (hpage_collapse_scan_pmd(&st, mm, haddr, Collapser::Madvise), None),
            },
            Err(r) => (r, None),
        }
    };
    let Some(range) = range else {
        if scanned != ScanResult::Succeed {
            return scanned;
        }
        return collapse_huge_page(cx, mm, haddr, Collapser::Madvise).await;
    };
    let collapsed = match scanned {
        ScanResult::Succeed => file::collapse_file(cx, range, Collapser::Madvise).await,
        r => r,
    };
    if !matches!(collapsed, ScanResult::Succeed | ScanResult::PteMappedHugepage) {
        return collapsed;
    }
    if crate::era::retract_without_mmap_lock(cx.st().thp.kernel) {
        let _g = lock.read(cx).await;
        file::collapse_pte_mapped_thp(cx, mm, haddr, true).await
    } else {
        let _g = lock.write(cx).await;
        file::collapse_pte_mapped_thp(cx, mm, haddr, true).await
    }
}
