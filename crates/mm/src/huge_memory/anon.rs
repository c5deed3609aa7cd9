//! Anonymous transparent huge pages mapped by one PMD (`mm/huge_memory.c`
//! `do_huge_pmd_anonymous_page`, `__do_huge_pmd_anonymous_page`, `set_huge_zero_page`,
//! `do_huge_pmd_wp_page`, `__split_huge_pmd_locked`, `__split_huge_zero_page_pmd`,
//! `zap_huge_pmd`, `copy_huge_pmd`; `mm/rmap.c` `folio_add_new_anon_rmap`,
//! `folio_remove_rmap_pmd`; `mm/pgtable-generic.c` `pgtable_trans_huge_deposit`; Linux v6.8,
//! with the eras below).
//!
//! The fault (`VmOps::Anonymous`'s `huge_fault`, through [`anon_huge_fault`]) on an empty PMD
//! of a VMA the policy allows (`policy.rs`, `ThpCaller::Fault`) whose 2 MiB-aligned range
//! around the address lies inside the VMA:
//! - a read, with `use_zero_page`, maps the huge zero page read-only (allocated on first use,
//!   `thp_zero_page_alloc`);
//! - otherwise it allocates an order-9 folio (reclaiming directly only as `defrag` allows),
//!   zeroes it and maps it writable, dirty and exclusive (`thp_fault_alloc`); when none can be
//!   had it counts `thp_fault_fallback` and the fault goes on at the PTE level;
//! - in a VMA a userfaultfd registered, neither: the fault goes to its handler
//!   (`handle_userfault`, `userfaultfd.rs`).
//!
//! Each such PMD deposits a page-table page (counted in `VmPTE` and `nr_page_table_pages`),
//! which becomes the PTE table when the PMD is split; the subpages have no PTEs, no contents
//! (until written) and no table while the PMD stands, so a THP costs no host state per 4 KiB
//! (the folio table's frames aside, which every frame has).
//!
//! A write to a read-only PMD (`do_huge_pmd_wp_page`):
//! - the huge zero page: a new THP up to v5.7 and from v6.13 (~, 1ced09e0331f); from v5.8
//!   (3917c80280c9) to v6.12 the PMD is split into zero-page PTEs and the 4 KiB fault follows;
//! - an anonymous THP is reused in place when the era's rule says nobody else can see it:
//!   PageAnonExclusive, or a refcount of one (then marked exclusive) from v5.19
//!   (`anon_exclusive`); the refcount from v5.18 (3bff7e3f1f16) under `page_count`; before,
//!   `reuse_swap_page`'s total mapcount plus swap count (the `page_count` switch's v5.9-v5.17
//!   kernels kept it for THPs); the seed's `mapcount` rule by mapcount. An unshare fault (a
//!   read-only pin's) reuses without making the PMD writable;
//! - otherwise, from v5.8 the PMD is split (`thp_split_pmd`) and the 4 KiB page is copied by
//!   `do_wp_page`; up to v5.7 the whole 2 MiB is copied into a new THP (`thp_fault_alloc`).
//!   Approximation: when that THP cannot be had, v5.7 and earlier copied the 512 pages
//!   one by one into PTEs (`do_huge_pmd_wp_page_fallback`, `thp_fault_fallback`); mmsim counts
//!   the fallback and splits, so only the faulting page is copied.
//!
//! Splitting the PMD (`__split_huge_pmd_locked`; partial munmap, mprotect, `MADV_DONTNEED`, the
//! COW above, fork of a pinned THP) withdraws the deposited table and fills it with 512 PTEs
//! carrying the PMD's write, young and soft-dirty bits, and its dirty bit where the era carries
//! it (`era::split_ptes_dirty`: v6.0 and from v6.2; the folio takes it in every era,
//! `SetPageDirty`), each subpage mapped once
//! (PageAnonExclusive passes from the head to every subpage), and counts `thp_split_pmd`; the
//! folio stays one order-9 folio, mapped by PTEs. The huge zero page splits into zero-page PTEs.
//! `nr_anon_transparent_hugepages` and `AnonHugePages` count the folios a PMD maps.
//!
//! fork (`copy_huge_pmd`) shares the PMD write-protected in both (the huge zero page always);
//! from v5.9 (d042035eaf5f) a THP that may be pinned in an mm with pinned pages (v5.19+: an
//! exclusive one, as `folio_try_dup_anon_rmap_pmd` refuses) is split instead, and the PTE-level
//! copy gives the child its own copies of the pinned pages.
//!
//! A partially unmapped THP joins the deferred split queue, and `split_huge_page` splits the
//! folio itself (`split.rs`).
//!
//! Not modelled: reclaim of anonymous THPs (reclaim keeps them on the LRU: mmsim does not swap them out, whole
//! or split); `thp_fault_fallback_charge`; NUMA hinting on PMDs; PMD-level soft-dirty and
//! `clear_refs`; `mremap` of PMDs.

use crate::arch::tlbflush::flush_tlb_range;
use crate::cow;
use crate::era::{self, CowReuse};
use crate::errno::VmFault;
use crate::folio::pg;
use crate::huge_memory::huge_pmd_set_accessed;
use crate::kernel::{Cx, KState};
use crate::memory::{
    FaultKind, FaultOutcome, Vmf, anon_vma_prepare, get_huge_zero_page, pmd_install_lock, pte_bits,
};
use crate::mm_struct::MmCounter;
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::huge_mm::MthpStat;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::userfaultfd::UffdReason;
use crate::userfaultfd::handle_userfault;
use crate::vmstat::VmStat;
use simcore::{Bytes, Order, Pfn, VirtAddr};

/// Pages in a PMD-sized folio (`HPAGE_PMD_NR`).
const HPAGE_PMD_NR: u64 = 512;

/// The PMD level of a fault in anonymous memory (`create_huge_pmd`, `wp_huge_pmd`,
/// `huge_pmd_set_accessed`): `None` when the fault goes on at the PTE level.
pub(crate) async fn anon_huge_fault(vmf: &Vmf<'_>) -> Result<Option<FaultOutcome>, VmFault> {
    let pmd_table = vmf.pmd;
    match vmf.orig_pmd {
        Upper::Table(_) => Ok(None),
        Upper::Leaf(leaf) if vmf.kind == FaultKind::Read || leaf.write() => {
            Ok(Some(huge_pmd_set_accessed(vmf, pmd_table, leaf).await))
        }
        Upper::Leaf(leaf) => do_huge_pmd_wp_page(vmf, pmd_table, leaf).await,
        Upper::None => do_huge_pmd_anonymous_page(vmf, pmd_table).await,
    }
}

/// The 2 MiB-aligned address of the fault's range, when that range lies inside the VMA
/// (`thp_vma_suitable_order`; the policy, `thp_vma_allowable_order`, was asked before the PMD
/// level was: `WalkOps::asks_pmd_level`).
fn fault_haddr(st: &KState, vma: VmaId, addr: VirtAddr) -> Option<VirtAddr> {
    let v = st.vma(vma);
    let haddr = addr.align_down(Bytes::PMD);
    (haddr >= v.start && haddr + Bytes::PMD <= v.end).then_some(haddr)
}

/// `do_huge_pmd_anonymous_page`: the huge zero page for a read, a new THP otherwise; `None` to
/// fall back to the PTE level.
async fn do_huge_pmd_anonymous_page(
    vmf: &Vmf<'_>,
    pmd_table: PtId,
) -> Result<Option<FaultOutcome>, VmFault> {
    let cx = vmf.cx;
    let Some(haddr) = fault_haddr(&cx.st(), vmf.vma, vmf.address) else { return Ok(None) };
    anon_vma_prepare(cx, vmf.mm, vmf.vma).await;
    crate::khugepaged::khugepaged_enter_vma(cx, vmf.vma);
    // A userfaultfd's missing page: the kernel asks under the PMD lock, after allocating (the
    // huge zero page, or the THP, which it then frees); the model asks first.
    if cx.st().userfaultfd_missing(vmf.vma) {
        let why = (vmf.kind.write(), UffdReason::Missing);
        let waiter = handle_userfault(cx, vmf.vma, vmf.address, why)?;
        return Ok(Some(FaultOutcome::Retry(waiter)));
    }
    let use_zero = cx.st().thp.settings.use_zero_page;
    if vmf.kind == FaultKind::Read && use_zero {
        let Some(zero) = get_huge_zero_page(cx).await else {
            cx.st().vmstat.inc(VmStat::ThpFaultFallback);
            return Ok(None);
        };
        let _g = pmd_install_lock(vmf, pmd_table).await;
        let mut st = cx.st();
        let flags = st.vma(vmf.vma).flags;
        let leaf = Pte::new(zero, pte_bits(flags, false, false) | Pte::PSE | Pte::SPECIAL);
        install_pmd(&mut st, vmf.mm, pmd_table, Level::Pmd.index(haddr), leaf)
            .ok_or(VmFault::Oom)?;
        return Ok(Some(FaultOutcome::Minor));
    }
    let Some(head) = alloc_thp(cx, vmf.vma).await else { return Ok(None) };
    cx.charge_n(Cost::ZeroPage4k, HPAGE_PMD_NR).await;
    let _g = pmd_install_lock(vmf, pmd_table).await;
    cx.charge(Cost::LruAdd).await;
    let mut st = cx.st();
    map_new_anon_pmd(&mut st, vmf.vma, haddr, pmd_table, head, cx.in_lru_fault())
        .ok_or(VmFault::Oom)?;
    Ok(Some(FaultOutcome::Minor))
}

/// Allocates an order-9 folio for a fault in `vma`, reclaiming directly only as `defrag` lets it
/// (`vma_thp_gfp_mask`); counts `thp_fault_alloc`, or `thp_fault_fallback` when none is had, and
/// the PMD size's `anon_fault_*` counters.
async fn alloc_thp(cx: &Cx, vma: VmaId) -> Option<Pfn> {
    let may_reclaim = {
        let st = cx.st();
        st.thp.settings.fault_may_reclaim(st.vma(vma).flags)
    };
    let got = crate::page_alloc::alloc_thp_folio(cx, Order::PMD, may_reclaim).await;
    let mut st = cx.st();
    match got {
        Ok(_) => {
            st.vmstat.inc(VmStat::ThpFaultAlloc);
            st.count_mthp_stat(Order::PMD, MthpStat::AnonFaultAlloc);
        }
        Err(why) => {
            st.vmstat.inc(VmStat::ThpFaultFallback);
            st.count_mthp_stat(Order::PMD, MthpStat::AnonFaultFallback);
            if why == crate::page_alloc::AllocFailure::Charge {
                st.count_mthp_stat(Order::PMD, MthpStat::AnonFaultFallbackCharge);
            }
        }
    }
    got.ok()
}

/// Under the PMD lock: sets `leaf` at `idx` of `pmd_table` if the slot is still empty,
/// depositing a new page-table page (`pte_alloc_one`, taken here rather than before the lock,
/// which the model's allocator allows). Returns whether it was set; `None` when no page could be
/// had for the deposit (`VM_FAULT_OOM`).
fn install_pmd(st: &mut KState, mm: MmId, pmd_table: PtId, idx: usize, leaf: Pte) -> Option<bool> {
    if st.pt.upper(pmd_table, idx) != Upper::None {
        return Some(false);
    }
    let deposit = st.alloc_pgtable_frame()?;
    st.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf));
    let m = st.mm_mut(mm);
    m.deposited.insert((pmd_table, idx), deposit);
    m.pgtable_inc(Level::Pte);
    Some(true)
}

/// `map_anon_folio_pmd`: maps the new THP `head` (the allocation's reference becomes the
/// mapping's) writable, dirty and exclusive at `haddr`, or frees it when another fault filled
/// the PMD first; `None` (folio freed) when no page-table page could be deposited.
fn map_new_anon_pmd(
    st: &mut KState,
    vma: VmaId,
    haddr: VirtAddr,
    pmd_table: PtId,
    head: Pfn,
    in_lru_fault: bool,
) -> Option<()> {
    let (mm, flags) = (st.vma(vma).mm, st.vma(vma).flags);
    let leaf = Pte::new(head, pte_bits(flags, true, true) | Pte::PSE);
    if install_pmd(st, mm, pmd_table, Level::Pmd.index(haddr), leaf) != Some(true) {
        st.put_folio_extra(head);
        return install_pmd_failed(st, pmd_table, Level::Pmd.index(haddr));
    }
    st.folios.extra_to_mapping(head);
    st.rmap_add_new_anon_pmd(head, vma, haddr);
    st.folio_add_lru_new_anon(head, vma, in_lru_fault);
    st.mm_mut(mm).add_rss(MmCounter::AnonPages, HPAGE_PMD_NR);
    Some(())
}

/// After an install that did not happen: `Some` when another fault won the slot, `None` when
/// the deposit could not be allocated (the slot is still empty).
fn install_pmd_failed(st: &KState, pmd_table: PtId, idx: usize) -> Option<()> {
    (st.pt.upper(pmd_table, idx) != Upper::None).then_some(())
}

impl KState {
    /// `folio_add_new_anon_rmap` of a PMD-mapped THP: its anon_vma and index, exclusive,
    /// one entire mapping; all 512 pages count in `nr_anon_pages`, the folio in
    /// `nr_anon_transparent_hugepages`.
    pub(crate) fn rmap_add_new_anon_pmd(&mut self, head: Pfn, vma: VmaId, haddr: VirtAddr) {
        let v = self.vma(vma);
        let av = v.anon_vma.expect("anon fault without anon_vma_prepare");
        let index = v.page_index(haddr);
        let rel = u32::try_from(index - self.anon_vmas[av].base).expect("anon index out of range");
        self.folios.set_mapping(head, crate::folio::Mapping::Anon(av), rel);
        self.folios.set(head, pg::ANON_EXCLUSIVE | pg::SWAPBACKED);
        self.folios.inc_entire_mapcount(head);
        self.vmstat.add(VmStat::NrAnonPages, HPAGE_PMD_NR);
        self.vmstat.inc(VmStat::NrAnonTransparentHugepages);
    }

    /// `folio_remove_rmap_pmd` of an anonymous THP: the pages no PTE maps leave
    /// `nr_anon_pages` with the last PMD mapping, and the folio `nr_anon_transparent_hugepages`.
    pub(crate) fn rmap_remove_anon_pmd(&mut self, head: Pfn) {
        if self.folios.dec_entire_mapcount(head) {
            let unmapped =
                (0..HPAGE_PMD_NR).filter(|&i| self.folios.page_mapcount(head + i) == 0).count();
            self.vmstat.sub(VmStat::NrAnonPages, unmapped as u64);
            self.vmstat.sub(VmStat::NrAnonTransparentHugepages, 1);
            if unmapped > 0 && (unmapped as u64) < HPAGE_PMD_NR {
                self.deferred_split_folio(head);
            }
        }
    }

    /// Withdraws the page-table page deposited for the PMD at `idx` of `pmd_table`
    /// (`pgtable_trans_huge_withdraw`), if one was.
    pub(crate) fn withdraw_pgtable(
        &mut self,
        mm: MmId,
        pmd_table: PtId,
        idx: usize,
    ) -> Option<Pfn> {
        self.mm_mut(mm).deposited.remove(&(pmd_table, idx))
    }

    /// `zap_huge_pmd` of an anonymous PMD (a THP or the huge zero page) under the PMD lock:
    /// clears it and frees its deposit; a THP's pages leave the rmap and RSS counts, and its
    /// mapping reference becomes the caller's, to drop after the TLB flush. `None` when no
    /// table was deposited there (not an anonymous PMD).
    pub(crate) fn zap_anon_pmd(
        &mut self,
        mm: MmId,
        pmd_table: PtId,
        idx: usize,
        leaf: Pte,
    ) -> Option<Option<Pfn>> {
        let deposit = self.withdraw_pgtable(mm, pmd_table, idx)?;
        self.free_pgtable_frame(deposit);
        self.mm_mut(mm).pgtable_dec(Level::Pte);
        self.pt.set_upper(pmd_table, idx, Upper::None);
        if leaf.special() {
            return Some(None);
        }
        let head = leaf.pfn();
        self.rmap_remove_anon_pmd(head);
        self.folios.mapping_to_extra(head);
        self.mm_mut(mm).sub_rss(MmCounter::AnonPages, HPAGE_PMD_NR);
        Some(Some(head))
    }

    /// `__split_huge_pmd_locked` of an anonymous PMD: the deposited table replaces it, with 512
    /// PTEs mapping the subpages (or the zero page) with the PMD's bits. Returns false when no
    /// table was deposited there (not an anonymous PMD). The caller flushes the range.
    pub(crate) fn split_anon_pmd(
        &mut self,
        handle: &engine::Handle,
        mm: MmId,
        pmd_table: PtId,
        idx: usize,
        leaf: Pte,
    ) -> bool {
        let Some(frame) = self.withdraw_pgtable(mm, pmd_table, idx) else { return false };
        let table = self.pt.alloc(Level::Pte, frame, || handle.spin_lock("ptlock"));
        let keep =
            Pte::RW | Pte::DIRTY | Pte::ACCESSED | Pte::SOFT_DIRTY | Pte::SPECIAL | Pte::UFFD_WP;
        let mut bits = leaf.0 & (keep | Pte::USER | Pte::NX);
        if !era::split_ptes_dirty(self.thp.kernel) {
            bits &= !Pte::DIRTY;
        }
        if leaf.special() {
            let zero = self.zero_pfn;
            for i in 0..512 {
                self.pt.set_pte(table, i, Pte::new(zero, bits));
            }
        } else {
            let head = leaf.pfn();
            if leaf.dirty() {
                self.folios.set(head, pg::DIRTY); // the PMD's dirty bit passes to the folio
            }
            let exclusive = self.folios.test(head, pg::ANON_EXCLUSIVE);
            for i in 0..HPAGE_PMD_NR {
                let page = head + i;
                self.folios.inc_mapcount(page);
                if exclusive {
                    self.folios.set(page, pg::ANON_EXCLUSIVE);
                }
                self.pt.set_pte(table, i as usize, Pte::new(page, bits));
            }
            // One reference per PTE where the PMD held one (`page_ref_add(HPAGE_PMD_NR - 1)`).
            self.folios.get(head, HPAGE_PMD_NR as u32 - 1);
            if self.folios.dec_entire_mapcount(head) {
                self.vmstat.sub(VmStat::NrAnonTransparentHugepages, 1);
            }
        }
        self.pt.set_upper(pmd_table, idx, Upper::Table(table));
        self.vmstat.inc(VmStat::ThpSplitPmd);
        true
    }
}

/// Whether the era's rule lets a write (or unshare) fault reuse the PMD-mapped THP `head` in
/// place (the module note lists the rules).
fn can_reuse_huge(st: &mut KState, rule: CowReuse, k: era::KernelVersion, head: Pfn) -> bool {
    let by_refcount = match rule {
        CowReuse::AnonExclusive => true,
        CowReuse::PageCount => era::thp_wp_reuses_by_page_count(k),
        CowReuse::Mapcount | CowReuse::MapcountSwapcount => false,
    };
    if rule.tracks_anon_exclusive() && st.folios.test(head, pg::ANON_EXCLUSIVE) {
        return true;
    }
    if !by_refcount {
        // `reuse_swap_page` on the THP: total mapcount plus swap count (it marks it exclusive).
        return cow::can_reuse_anon(st, CowReuse::MapcountSwapcount, false, head, head);
    }
    // Nobody else holds it: not another mapping, a pin or a GUP reference.
    let reuse = st.folios.refcount(head) == 1;
    if reuse {
        st.folios.set(head, pg::ANON_EXCLUSIVE);
    }
    reuse
}

/// `do_huge_pmd_wp_page`: a write (or unshare) fault on the read-only PMD `leaf`. `None` when
/// the PMD was split and the fault goes on at the PTE level.
async fn do_huge_pmd_wp_page(
    vmf: &Vmf<'_>,
    pmd_table: PtId,
    leaf: Pte,
) -> Result<Option<FaultOutcome>, VmFault> {
    let cx = vmf.cx;
    let k = cx.kernel().version;
    // `wp_huge_pmd`: a write to a write-protected PMD goes to the userfaultfd handler.
    if !vmf.unshare() && leaf.uffd_wp() && cx.st().userfaultfd_wp(vmf.vma) {
        let why = (true, UffdReason::Wp);
        return handle_userfault(cx, vmf.vma, vmf.address, why)
            .map(|w| Some(FaultOutcome::Retry(w)));
    }
    if leaf.special() {
        // The huge zero page (`do_huge_zero_wp_pmd` in the eras that allocate).
        if vmf.kind.write() && era::huge_zero_wp_allocates_thp(k) {
            return Ok(Some(replace_pmd_with_thp(vmf, pmd_table, leaf).await?));
        }
        crate::zap::split_huge_pmd(cx, vmf.mm, vmf.address).await;
        return Ok(None);
    }
    let idx = Level::Pmd.index(vmf.address);
    let ptl = cx.st().pt.ptl(pmd_table);
    let guard = ptl.lock(cx).await;
    {
        let mut st = cx.st();
        if st.pt.upper(pmd_table, idx) != Upper::Leaf(leaf) {
            return Ok(Some(FaultOutcome::Minor));
        }
        let head = leaf.pfn();
        if can_reuse_huge(&mut st, cx.kernel().switches.cow_reuse, k, head) {
            st.rmap_move_anon(head, vmf.vma);
            let flags = st.vma(vmf.vma).flags;
            let bits = if vmf.unshare() {
                Pte::ACCESSED
            } else {
                Pte::ACCESSED | Pte::DIRTY | Pte::SOFT_DIRTY | crate::memory::maybe_mkwrite(flags)
            };
            st.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf.with(bits)));
            return Ok(Some(FaultOutcome::Minor));
        }
    }
    drop(guard);
    if era::thp_cow_splits_pmd(k) || !vmf.kind.write() {
        crate::zap::split_huge_pmd(cx, vmf.mm, vmf.address).await;
        return Ok(None);
    }
    Ok(Some(replace_pmd_with_thp(vmf, pmd_table, leaf).await?))
}

/// The whole-PMD COW of v5.7 and earlier (and of the huge zero page where the era allocates):
/// a new THP holding a copy of what `leaf` maps replaces it; when none can be had the PMD is
/// split and the fault retries at the PTE level (see the module note).
async fn replace_pmd_with_thp(
    vmf: &Vmf<'_>,
    pmd_table: PtId,
    leaf: Pte,
) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let Some(new) = alloc_thp(cx, vmf.vma).await else {
        crate::zap::split_huge_pmd(cx, vmf.mm, vmf.address).await;
        return Ok(FaultOutcome::Minor);
    };
    let zero = leaf.special();
    let cost = if zero { Cost::ZeroPage4k } else { Cost::CopyPage4k };
    cx.charge_n(cost, HPAGE_PMD_NR).await;
    let (haddr, idx) = (vmf.address.align_down(Bytes::PMD), Level::Pmd.index(vmf.address));
    let ptl = cx.st().pt.ptl(pmd_table);
    let old = {
        let _g = ptl.lock(cx).await;
        let mut st = cx.st();
        if st.pt.upper(pmd_table, idx) != Upper::Leaf(leaf) {
            st.put_folio_extra(new);
            return Ok(FaultOutcome::Minor);
        }
        if !zero {
            for i in 0..HPAGE_PMD_NR {
                st.mem.copy(leaf.pfn().0 + i, new.0 + i);
            }
        }
        let old = st.zap_anon_pmd(vmf.mm, pmd_table, idx, leaf).expect("an anonymous PMD");
        // The deposit just freed is there to be taken again.
        let mapped = map_new_anon_pmd(&mut st, vmf.vma, haddr, pmd_table, new, cx.in_lru_fault());
        assert!(mapped.is_some(), "the page-table page just freed is free");
        old
    };
    flush_tlb_range(cx, vmf.mm, haddr, haddr + Bytes::PMD).await;
    if let Some(old) = old {
        cx.st().put_folio_extra(old);
    }
    Ok(FaultOutcome::Minor)
}

/// What fork does with a source PMD leaf (`copy_huge_pmd`).
pub(crate) enum CopyHuge {
    /// Not an anonymous PMD (a file THP or DAX): the child refaults it.
    NotAnon,
    /// Shared with the child, write-protected in both; whether the source was writable.
    Shared(bool),
    /// Split in the source (a possibly pinned THP): copy at the PTE level (`-EAGAIN`).
    Split,
}

/// `copy_huge_pmd`: copies the anonymous PMD at `addr` of `src_mm` into `dst_mm` (whose PMD
/// table is `dst_pmd`), or splits it when the child must get its own copy of pinned pages.
pub(crate) async fn copy_huge_pmd(
    cx: &Cx,
    dst_mm: MmId,
    dst_pmd: PtId,
    src_mm: MmId,
    addr: VirtAddr,
) -> Result<CopyHuge, crate::Errno> {
    let Some((src_pmd, idx)) = ({
        let st = cx.st();
        st.pt.pmd_slot(st.mm(src_mm).pgd, addr)
    }) else {
        return Ok(CopyHuge::NotAnon);
    };
    if !cx.st().mm(src_mm).deposited.contains_key(&(src_pmd, idx)) {
        return Ok(CopyHuge::NotAnon);
    }
    let (dst_ptl, src_ptl) = {
        let st = cx.st();
        (st.pt.ptl(dst_pmd), st.pt.ptl(src_pmd))
    };
    {
        let _d = dst_ptl.lock(cx).await;
        let _s = src_ptl.lock_nested(cx, 1).await;
        let mut st = cx.st();
        let Upper::Leaf(leaf) = st.pt.upper(src_pmd, idx) else {
            return Ok(CopyHuge::NotAnon);
        };
        if leaf.special() || !st.fork_must_split_pmd(src_mm, leaf.pfn(), cx) {
            let shared = st.share_pmd_with_child(dst_mm, dst_pmd, src_pmd, idx, leaf);
            return shared.map(CopyHuge::Shared).ok_or(crate::Errno::ENOMEM);
        }
    }
    crate::zap::split_huge_pmd(cx, src_mm, addr).await;
    Ok(CopyHuge::Split)
}

impl KState {
    /// Whether fork must split the source PMD of THP `head` (the module note): from v5.9 a
    /// possibly pinned THP in an mm with pinned pages, v5.19+ only an exclusive one.
    fn fork_must_split_pmd(&self, mm: MmId, head: Pfn, cx: &Cx) -> bool {
        let (rule, k) = (cx.kernel().switches.cow_reuse, cx.kernel().version);
        era::fork_splits_pinned_huge_pmd(k)
            && self.mm(mm).flags & crate::mm_struct::MMF_HAS_PINNED != 0
            && self.folios.maybe_dma_pinned(head)
            && (!rule.tracks_anon_exclusive() || self.folios.test(head, pg::ANON_EXCLUSIVE))
    }

    /// The child maps the parent's PMD too, both write-protected; the THP is no longer
    /// exclusive. Returns whether the source was writable; `None` (nothing changed) when no
    /// page could be had for the child's deposit.
    fn share_pmd_with_child(
        &mut self,
        dst_mm: MmId,
        dst_pmd: PtId,
        src_pmd: PtId,
        idx: usize,
        leaf: Pte,
    ) -> Option<bool> {
        let child = leaf.wrprotect().without(Pte::ACCESSED);
        let installed = install_pmd(self, dst_mm, dst_pmd, idx, child)?;
        assert!(installed, "the child's PMD is empty at fork");
        self.pt.set_upper(src_pmd, idx, Upper::Leaf(leaf.wrprotect()));
        if !leaf.special() {
            let head = leaf.pfn();
            self.folios.get(head, 1);
            self.folios.clear_flag(head, pg::ANON_EXCLUSIVE);
            self.folios.inc_entire_mapcount(head);
            self.mm_mut(dst_mm).add_rss(MmCounter::AnonPages, HPAGE_PMD_NR);
        }
        Some(leaf.write())
    }
}
