//! Getting and pinning user pages (`mm/gup.c`, `include/linux/mm.h`,
//! `Documentation/core-api/pin_user_pages.rst`, Linux v6.8; earlier eras where they differ).
//!
//! `get_user_pages` (FOLL_GET) takes one reference per page; `pin_user_pages` (FOLL_PIN) adds
//! `GUP_PIN_COUNTING_BIAS` (1024) to a small folio's refcount, or one reference and one `pincount`
//! to a large one, marks the mm `MMF_HAS_PINNED`, and counts `nr_foll_pin_acquired`. The fast
//! path walks the page tables without `mmap_lock` and takes the reference only if the PTE already
//! allows the access; otherwise the slow path takes `mmap_lock`, faults (a write fault for
//! FOLL_WRITE, an *unshare* fault where the era requires it) and retries.
//!
//! Unshare (v5.19+ `anon_exclusive`, `gup_must_unshare`): a read-only FOLL_PIN of an anonymous
//! page that is not PageAnonExclusive first makes it exclusive (copying it if shared); since
//! v6.2 a read-only FOLL_PIN|FOLL_LONGTERM of a non-anonymous page in a private mapping (the
//! zero page, a page-cache page) first replaces it with an anonymous copy. FOLL_GET never
//! unshares. The shared zero page is returned without taking a reference, as since v6.5.
//!
//! Forced COW break (v5.8 only, `era::gup_breaks_cow`, 17839856fd58 until a308c71bf1e6): every
//! GUP that takes references in a COW mapping (`is_cow_mapping`: private, may write) walks and
//! faults as a write, even for a read, after the VMA's permissions were checked for the access
//! asked (so read-only private VMAs can still be read). A read-only PTE takes a write fault,
//! which copies a shared page or reuses an exclusive one; in a VMA without `VM_WRITE` the page
//! is then mapped dirty but read-only (`maybe_mkwrite`), and the retry accepts a dirty PTE
//! (FOLL_COW, without the FOLL_FORCE that other eras ask for it). GUP-fast walks every range as
//! a write, so a read-only PTE sends any GUP to the slow path.
//!
//! Writable long-term pins of dirty-tracked files (v6.5+,
//! `era::longterm_write_pin_refuses_dirty_tracked_files`, 8ac268436e6d and a6e79df92e4a): a
//! FOLL_PIN|FOLL_LONGTERM|FOLL_WRITE of a shared writable file mapping whose file system tracks
//! dirty pages (`vma_needs_dirty_tracking`: ext4 in the model) fails with EFAULT in the slow
//! path's `check_vma_flags`; GUP-fast pins only anonymous and shmem folios that way
//! (`folio_fast_pin_allowed`) and leaves the rest to the slow path. Anonymous memory, private
//! mappings and tmpfs (memfd, shared anonymous memory) are exempt.
//!
//! FOLL_FORCE (`/proc/PID/mem` writes, ptrace): a forced write into a private mapping that may
//! be written but is not writable (`check_vma_flags`: only a COW mapping; a shared one is
//! EFAULT) takes a write fault, which copies the page (or reuses it) and maps it read-only,
//! dirty (`maybe_mkwrite`). How the retry accepts that read-only PTE is the `foll_force_cow`
//! switch: up to v4.8 FOLL_WRITE is dropped and any mapped page is taken, so a `MADV_DONTNEED`
//! in between makes the retry read-fault the page-cache page and return it (Dirty COW,
//! CVE-2016-5195); from v4.9 (19be0eaffa3a) FOLL_COW accepts only a dirty PTE; from v6.0
//! (5535be309971) only an exclusive anonymous page in a mapping without `VM_WRITE` whose
//! soft-dirty tracking needs no write fault. With a `cow_reuse` rule that tracks no
//! PageAnonExclusive (a combination no kernel shipped) the v6.0 test reads a mapcount of one as
//! exclusive. The retry loop reschedules between the fault and the retry (`cond_resched` at
//! `__get_user_pages`'s retry label), where the race above happens.
//!
//! GUP of a DAX mapping fails with EFAULT: the model keeps no `struct page` for persistent
//! memory, so nothing could hold a reference (the kernel takes ZONE_DEVICE page references, and
//! refuses FOLL_LONGTERM). Populating such a range faults it in normally.
//!
//! hugetlb (`follow_hugetlb_page`, later `hugetlb_follow_page_mask`; GUP-fast's `gup_huge_pmd`
//! on a hugetlb PMD leaf): both paths take the base pages of a huge page, each one reference on
//! the huge page and, for FOLL_PIN, one `_pincount` (`hugetlb/gup.rs`); the slow path faults
//! with FAULT_FLAG_WRITE, or FAULT_FLAG_UNSHARE for a read-only pin of an anonymous page that
//! is not exclusive (v5.19+; `hugetlb_wp`). Up to v6.5 that fault was `hugetlb_fault` called
//! from `follow_hugetlb_page`, not `handle_mm_fault`, so it counted nowhere (no `pgfault`, no
//! `min_flt`): populating, mlocking, pinning or `/proc/PID/mem` faults of hugetlb VMAs are
//! counted from v6.6 (`era::gup_hugetlb_faults_counted`, 4849807114b8), when hugetlb took the
//! common `faultin_page` path. An entry is followed for a write only when
//! writable, and a forced write into a hugetlb mapping without `VM_WRITE` is EFAULT
//! (`hugetlb_wp` refuses it with SIGSEGV). GUP-fast pins hugetlb folios long-term and writable
//! in every era (they need no dirty tracking). Approximations: a 1 GiB page is not taken by
//! GUP-fast (the kernel's `gup_huge_pud`): the slow path takes it; no hugetlb page migration
//! for FOLL_LONGTERM (`check_and_migrate_movable_pages` moves pages out of ZONE_MOVABLE/CMA,
//! which the model does not have).
//!
//! GUP-fast (`lockless_pages_from_mm`, `gup_pmd_range`, `gup_pte_range`) walks without locks,
//! then, in a later step, takes its reference (`try_grab_folio`, failing on a freed folio) and
//! re-checks what it walked: a PMD leaf always, a PTE always, and the PMD above the PTE table
//! from "mm: gup: fix the fast GUP race against THP collapse" (70cbc3cc78a9, v6.0 ~, switch
//! `gup_fast_recheck`); if anything changed it drops the reference and takes the slow path.
//! Approximation: the walk is not held off by the TLB flush of a concurrent `pmdp_collapse_flush`,
//! as on architectures whose flush sends no IPI to a CPU with interrupts disabled (arm64,
//! paravirtualised x86), where that race lived; page tables freed during the walk are read as
//! changed (the kernel keeps them alive by RCU or that IPI, 2ba99c5e0881).
//!
//! Also here: populating a range (`MAP_POPULATE`).

use crate::era::{FollForceCow, GupFastRecheck};
use crate::errno::{Errno, VmFault};
use crate::fault::{FaultAcct, handle_mm_fault};
use crate::folio::pg;
use crate::kernel::{Cx, KState};
use crate::memory::{FaultKind, vm_normal_page};
use crate::mm_struct::MMF_HAS_PINNED;
use crate::pgtable::{Level, Pte, Upper};
use crate::types::ids::HoldId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::mm_types::{GupFlags, GupPages, Hold};
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use simcore::{Bytes, Pfn, VirtAddr};

/// `is_cow_mapping`: a private mapping that may be written, where writes copy.
fn is_cow_mapping(flags: VmFlags) -> bool {
    flags.0 & (VmFlags::SHARED | VmFlags::MAYWRITE) == VmFlags::MAYWRITE
}

/// The flags a walk of `vma` uses: in the forced-COW-break era (v5.8, `should_force_cow_break`)
/// a GUP of a COW mapping asks for write access whatever the caller asked.
fn foll_flags(cx: &Cx, vma_flags: VmFlags, flags: GupFlags) -> GupFlags {
    let force = crate::era::gup_breaks_cow(cx.kernel().version) && is_cow_mapping(vma_flags);
    GupFlags { write: flags.write || force, ..flags }
}

/// `check_vma_flags`: whether `vma` allows the access asked (EFAULT otherwise), including, from
/// v6.5, the refusal of writable long-term pins of dirty-tracked file mappings
/// (`writable_file_mapping_allowed`).
fn check_vma_flags(cx: &Cx, st: &KState, vma: VmaId, flags: GupFlags) -> Result<(), Errno> {
    let v = st.vma(vma);
    if !flags.write {
        return if v.flags.has(VmFlags::READ) { Ok(()) } else { Err(Errno::EFAULT) };
    }
    let forced = flags.force && is_cow_mapping(v.flags);
    if !(v.flags.has(VmFlags::WRITE) || forced) {
        return Err(Errno::EFAULT);
    }
    // hugetlb takes no forced write into a mapping without `VM_WRITE` (`hugetlb_wp`'s SIGSEGV).
    if !v.flags.has(VmFlags::WRITE) && st.vma(vma).vm_ops.is_hugetlb() {
        return Err(Errno::EFAULT);
    }
    let refused = flags.pin
        && flags.longterm
        && !v.vm_ops.is_anonymous()
        && crate::era::longterm_write_pin_refuses_dirty_tracked_files(cx.kernel().version)
        && vma_needs_dirty_tracking(st, vma);
    if refused { Err(Errno::EFAULT) } else { Ok(()) }
}

/// `vma_needs_dirty_tracking`: a shared writable mapping whose file system must see writes
/// (`page_mkwrite`) or writes pages back. In the model the file systems that write back (ext4,
/// ext4-dax) are those with a `page_mkwrite`; tmpfs has neither.
fn vma_needs_dirty_tracking(st: &KState, vma: VmaId) -> bool {
    let v = st.vma(vma);
    v.is_shared() && v.flags.has(VmFlags::WRITE) && v.vm_ops.has_page_mkwrite(st, vma)
}

/// `folio_fast_pin_allowed` (v6.5+): GUP-fast takes a writable long-term pin only of an
/// anonymous, shmem or hugetlb folio (hugetlb needs no dirty tracking); any other leaves it to
/// the slow path.
fn folio_fast_pin_allowed(cx: &Cx, st: &KState, page: Pfn, flags: GupFlags) -> bool {
    let checked = flags.pin
        && flags.longterm
        && flags.write
        && crate::era::longterm_write_pin_refuses_dirty_tracked_files(cx.kernel().version);
    !checked
        || st.hugetlb_head(page).is_some()
        || st.folios.test(st.folios.head(page), pg::SWAPBACKED)
}

/// `can_follow_write_pte`: a write may use a writable PTE; in a VMA without `VM_WRITE` it may
/// use the read-only PTE a COW fault left, as the era's rule allows (module header): before
/// v6.0 (`foll_cow`, FOLL_COW set by that fault) a dirty one, from v6.0 one mapping an exclusive
/// anonymous page under FOLL_FORCE.
fn can_follow_write_pte(cx: &Cx, st: &KState, pte: Pte, vma_flags: VmFlags, walk: Walk) -> bool {
    if pte.write() {
        return true;
    }
    match cx.kernel().switches.foll_force_cow {
        FollForceCow::DropWrite | FollForceCow::FollCow => walk.foll_cow && pte.dirty(),
        FollForceCow::AnonExclusive => {
            let soft_dirty_ok = vma_flags.has(VmFlags::SOFTDIRTY) || pte.soft_dirty();
            walk.flags.force
                && is_cow_mapping(vma_flags)
                && !vma_flags.has(VmFlags::WRITE)
                && soft_dirty_ok
                && vm_normal_page(pte).is_some_and(|page| forced_write_exclusive(cx, st, page))
        }
    }
}

/// Whether a forced write may use `page` read-only mapped (v6.0 rule): an anonymous page that
/// is PageAnonExclusive, or, under a `cow_reuse` rule without that flag, mapped once.
fn forced_write_exclusive(cx: &Cx, st: &KState, page: Pfn) -> bool {
    let head = st.folios.head(page);
    if !st.folios.is_anon(head) {
        return false;
    }
    if cx.kernel().switches.cow_reuse.tracks_anon_exclusive() {
        st.folios.test(page, pg::ANON_EXCLUSIVE)
    } else {
        st.folios.page_mapcount(page) == 1
    }
}

/// A walk's access and what the slow path learned from its faults so far.
#[derive(Clone, Copy, Debug)]
struct Walk {
    flags: GupFlags,
    /// FOLL_COW: a write fault broke COW in a VMA without `VM_WRITE` (v4.9 to v5.19).
    foll_cow: bool,
}

/// Whether the access a GUP asks for needs an unshare fault first (`gup_must_unshare`).
fn must_unshare(
    cx: &Cx,
    st: &KState,
    vma_flags: VmFlags,
    page: Option<Pfn>,
    flags: GupFlags,
) -> bool {
    if flags.write || !flags.pin || !cx.kernel().switches.cow_reuse.tracks_anon_exclusive() {
        return false;
    }
    let cow_mapping = is_cow_mapping(vma_flags);
    match page.and_then(|p| anon_exclusive(st, p)) {
        Some(exclusive) => !exclusive,
        None => {
            flags.longterm
                && cow_mapping
                && crate::era::longterm_pin_unshares_cow_mappings(cx.kernel().version)
        }
    }
}

/// `PageAnonExclusive` of an anonymous page (a hugetlb page's is its head's), `None` for any
/// other page.
fn anon_exclusive(st: &KState, page: Pfn) -> Option<bool> {
    match st.hugetlb_head(page) {
        Some(head) => st.hugetlb_anon_exclusive(head),
        None => {
            let anon = st.folios.is_anon(st.folios.head(page));
            anon.then(|| st.folios.test(page, pg::ANON_EXCLUSIVE))
        }
    }
}

/// Looks up the page at `addr` without faulting (`follow_page_pte`): `Some(page)` if the PTE
/// already allows the access (the zero page for a read), `None` if a fault is needed.
fn follow_page(cx: &Cx, st: &KState, mm: MmId, addr: VirtAddr, walk: Walk) -> Option<Pfn> {
    let flags = walk.flags;
    let (pte, level) = st.pt.translate(st.mm(mm).pgd, addr)?;
    // DAX pages are not taken by GUP in the model (the slow path's EFAULT).
    let vma = st.find_vma(mm, addr).filter(|&v| !st.vma_is_dax(v))?;
    let vma_flags = st.vma(vma).flags;
    // A hugetlb entry is followed for a write only when writable (`follow_hugetlb_page`).
    let hugetlb = st.vma(vma).vm_ops.is_hugetlb();
    let writable = pte.write() || (!hugetlb && can_follow_write_pte(cx, st, pte, vma_flags, walk));
    if !pte.is_present() || (flags.write && !writable) {
        return None;
    }
    // A PMD leaf maps 512 pages (`follow_huge_pmd`), a PUD leaf 262144 (a 1 GiB hugetlb page):
    // this address's is the head's plus its offset.
    let offset = (addr.0 & ((1 << level.shift()) - 1)) >> 12;
    let page = vm_normal_page(pte).map(|head| head + offset);
    // A PMD-mapped THP is exclusive as a whole: its head carries PageAnonExclusive.
    if must_unshare(cx, st, vma_flags, vm_normal_page(pte), flags) {
        return None;
    }
    match page {
        Some(p) => Some(p),
        // The zero page, or a page of the huge zero page, for a read.
        None if st.is_zero_pfn(pte.pfn()) && !flags.write => Some(pte.pfn() + offset),
        None => None,
    }
}

impl GupPages {
    /// The page holding address `a` of a range taken from page-aligned `first`.
    pub(crate) fn page_for(&self, first: VirtAddr, a: VirtAddr) -> Pfn {
        self.pages[(a.align_down(Bytes::PAGE).offset_from(first).as_u64() >> 12) as usize]
    }

    /// What the held *physical* pages hold at `[buf, buf + n)` (a DMA reading them), whatever
    /// the page tables map there now.
    pub(crate) fn read_bytes(
        &self,
        st: &KState,
        first: VirtAddr,
        buf: VirtAddr,
        n: u64,
    ) -> Vec<u8> {
        let mut out = vec![0; n as usize];
        let mut off = 0u64;
        while off < n {
            let a = buf + Bytes(off);
            let chunk = (4096 - a.page_offset()).min(n - off);
            let page = self.page_for(first, a);
            let dst = &mut out[off as usize..(off + chunk) as usize];
            st.mem.read(page.0, a.page_offset() as usize, dst);
            off += chunk;
        }
        out
    }
}

/// Takes the reference a GUP holds (`try_grab_folio`).
fn grab(st: &mut KState, page: Pfn, flags: GupFlags) {
    if st.is_zero_pfn(page) {
        return;
    }
    if flags.pin {
        st.vmstat.inc(VmStat::NrFollPinAcquired);
    }
    if let Some(head) = st.hugetlb_head(page) {
        st.hugetlb_grab(head, flags.pin);
        return;
    }
    let head = st.folios.head(page);
    if flags.pin {
        st.folios.pin(head);
    } else {
        st.folios.get_extra(head);
    }
}

/// `get_user_pages` / `pin_user_pages` for `nr` pages from `start`: the fast path first, then
/// the slow path with faults. EFAULT when an address is not mapped with the needed access.
pub(crate) async fn get_user_pages(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    nr: u64,
    flags: GupFlags,
) -> Result<GupPages, Errno> {
    // Reserve a batch, not `nr`: a range far larger than memory fails at its first hole.
    let mut pages = Vec::with_capacity(nr.min(512) as usize);
    if flags.pin {
        cx.st().mm_mut(mm).flags |= MMF_HAS_PINNED;
    }
    for i in 0..nr {
        let addr = start + Bytes(i << 12);
        cx.preempt_point().await;
        let page = match gup_fast_one(cx, mm, addr, flags).await {
            Some(p) => p,
            None => match gup_slow(cx, mm, addr, flags).await {
                Ok(p) => p,
                Err(e) => {
                    release_pages(
                        cx,
                        &GupPages { flags, pages: std::mem::take(&mut pages) },
                        false,
                    );
                    return Err(e);
                }
            },
        };
        pages.push(page);
    }
    Ok(GupPages { flags, pages })
}

/// The GUP-fast walk of one page (`gup_pte_range`), without `mmap_lock` or a VMA: every walk
/// asks for write access in the forced-COW-break era (v5.8), and from v6.5 a writable
/// long-term pin takes only folios that need no dirty tracking.
fn gup_fast(cx: &Cx, st: &KState, mm: MmId, addr: VirtAddr, flags: GupFlags) -> Option<Pfn> {
    let walk = if crate::era::gup_breaks_cow(cx.kernel().version) {
        GupFlags { write: true, ..flags }
    } else {
        flags
    };
    follow_page(cx, st, mm, addr, Walk { flags: walk, foll_cow: false })
        .filter(|&page| folio_fast_pin_allowed(cx, st, page, flags))
}

/// What GUP-fast read locklessly before taking its reference: the PMD entry and, where it
/// points at a PTE table, the PTE (`gup_pmd_range`'s `pmd`, `gup_pte_range`'s `pte`).
#[derive(Clone, Copy)]
struct FastWalk {
    pmd: (PtId, usize, Upper),
    pte: Option<(PtId, usize, Pte)>,
}

fn fast_walk(st: &KState, mm: MmId, addr: VirtAddr) -> Option<FastWalk> {
    let (t, i) = st.pt.pmd_slot(st.mm(mm).pgd, addr)?;
    let pmd = st.pt.upper(t, i);
    let pte = match pmd {
        Upper::Table(pt) => {
            let j = Level::Pte.index(addr);
            Some((pt, j, st.pt.pte(pt, j)))
        }
        Upper::None | Upper::Leaf(_) => None,
    };
    Some(FastWalk { pmd: (t, i, pmd), pte })
}

/// Whether the entries GUP-fast walked still hold after it took its reference: a PMD leaf is
/// re-checked in every era (`gup_huge_pmd`), a PTE always, and the PMD above a PTE from
/// 70cbc3cc78a9 (`gup_fast_recheck`). A table freed meanwhile counts as changed.
fn fast_walk_holds(cx: &Cx, st: &KState, w: FastWalk) -> bool {
    let (t, i, pmd) = w.pmd;
    let pmd_holds = st.pt.is_live(t) && st.pt.upper(t, i) == pmd;
    match w.pte {
        None => pmd_holds,
        Some((pt, j, pte)) => {
            let pte_holds = st.pt.is_live(pt) && st.pt.pte(pt, j) == pte;
            let pmd_checked = cx.kernel().switches.gup_fast_recheck == GupFastRecheck::Pmd;
            pte_holds && (pmd_holds || !pmd_checked)
        }
    }
}

/// GUP-fast for one page: the lockless walk, then in a later step the reference
/// (`try_grab_folio`, which fails on a folio already freed) and the re-check of what was
/// walked; on a change the reference is dropped and the slow path runs.
async fn gup_fast_one(cx: &Cx, mm: MmId, addr: VirtAddr, flags: GupFlags) -> Option<Pfn> {
    let (page, walk) = {
        let st = cx.st();
        let page = gup_fast(cx, &st, mm, addr, flags)?;
        (page, fast_walk(&st, mm, addr)?)
    };
    cx.preempt_point().await;
    let mut st = cx.st();
    if !st.is_zero_pfn(page) && page_freed(&st, page) {
        return None;
    }
    grab(&mut st, page, flags);
    if fast_walk_holds(cx, &st, walk) {
        return Some(page);
    }
    if !st.is_zero_pfn(page) {
        put_ref(&mut st, page, flags.pin);
    }
    None
}

/// Whether the page GUP-fast walked to was freed before it took its reference (a huge page back
/// in its pool or out of it).
fn page_freed(st: &KState, page: Pfn) -> bool {
    match st.hugetlb.containing(page) {
        Some((_, _, free)) => free,
        None => st.folios.refcount(st.folios.head(page)) == 0,
    }
}

/// The slow path for one page (`__get_user_pages`): `mmap_lock`, fault as needed (`faultin_page`,
/// which after a write-protect fault in a VMA without `VM_WRITE` sets FOLL_COW, or before v4.9
/// drops FOLL_WRITE), reschedule, retry, take the reference. As in the kernel the retries have
/// no bound: between a fault and its retry other tasks may run (reclaim may take the page
/// again), and a run that never progresses meets the events budget.
async fn gup_slow(cx: &Cx, mm: MmId, addr: VirtAddr, flags: GupFlags) -> Result<Pfn, Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let (mut foll_cow, mut write_dropped) = (false, false);
    let mut retry = false;
    loop {
        if retry {
            cx.preempt_point().await;
        }
        retry = true;
        let (vma, kind, wp_fault) = {
            let mut st = cx.st();
            let vma = st.find_vma(mm, addr).filter(|&v| !st.vma_is_dax(v)).ok_or(Errno::EFAULT)?;
            check_vma_flags(cx, &st, vma, flags)?;
            let vflags = st.vma(vma).flags;
            let mut walk = foll_flags(cx, vflags, flags);
            walk.write &= !write_dropped;
            if let Some(p) = follow_page(cx, &st, mm, addr, Walk { flags: walk, foll_cow }) {
                grab(&mut st, p, flags);
                return Ok(p);
            }
            let pte = st.pt.translate(st.mm(mm).pgd, addr).map_or(Pte::NONE, |(p, _)| p);
            let kind = match (walk.write, pte.is_present()) {
                (true, _) => FaultKind::Write,
                (false, true) => FaultKind::Unshare,
                (false, false) => FaultKind::Read,
            };
            // `do_wp_page` (and `do_swap_page`) report VM_FAULT_WRITE: the COW is broken.
            let wp_fault = walk.write && !pte.is_none() && !vflags.has(VmFlags::WRITE);
            (vma, kind, wp_fault)
        };
        let acct = if flags.remote { FaultAcct::Remote } else { FaultAcct::Current };
        let acct = gup_fault_acct(cx, vma, acct);
        handle_mm_fault(cx, mm, vma, addr, kind, acct).await.map_err(|_| Errno::EFAULT)?;
        if wp_fault && cx.kernel().switches.foll_force_cow == FollForceCow::DropWrite {
            write_dropped = true;
        }
        foll_cow |= wp_fault;
    }
}

/// How a fault GUP takes in `vma` counts, `acct` being the task it would count on: not at all
/// in a hugetlb VMA before v6.6, where `follow_hugetlb_page` called `hugetlb_fault` directly
/// (`era::gup_hugetlb_faults_counted`).
fn gup_fault_acct(cx: &Cx, vma: VmaId, acct: FaultAcct) -> FaultAcct {
    let hugetlb = cx.st().vma(vma).vm_ops.is_hugetlb();
    if hugetlb && !crate::era::gup_hugetlb_faults_counted(cx.kernel().version) {
        FaultAcct::Uncounted
    } else {
        acct
    }
}

/// `unpin_user_pages_dirty_lock` / `put_page`: drops the references; `dirty` marks the pages
/// dirty first (the holder wrote to them).
pub(crate) fn release_pages(cx: &Cx, gup: &GupPages, dirty: bool) {
    let mut st = cx.st();
    for &page in &gup.pages {
        if st.is_zero_pfn(page) {
            continue;
        }
        // A huge page has no dirty state in the model (hugetlbfs writes nothing back).
        if dirty && st.hugetlb_head(page).is_none() {
            let head = st.folios.head(page);
            if st.folios.is_anon(head) {
                st.folios.set(head, pg::DIRTY);
            } else {
                st.folio_mark_dirty(head);
            }
        }
        put_ref(&mut st, page, gup.flags.pin);
    }
}

/// Drops one GUP reference on the folio of `page` (`gup_put_folio`; a pipe's `put_page`).
pub(crate) fn put_ref(st: &mut KState, page: Pfn, pin: bool) {
    if pin {
        st.vmstat.inc(VmStat::NrFollPinReleased);
    }
    if let Some(head) = st.hugetlb_head(page) {
        st.hugetlb_put_gup(head, pin);
        return;
    }
    let head = st.folios.head(page);
    if pin {
        if st.folios.unpin(head) {
            st.free_folio(head);
        }
    } else {
        st.put_folio_extra(head);
    }
}

/// Takes `len` bytes from `start` with GUP and keeps them held.
pub(crate) async fn hold(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    len: u64,
    flags: GupFlags,
) -> Result<HoldId, Errno> {
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let first = start.align_down(Bytes::PAGE);
    let nr = (start + Bytes(len))
        .align_up(Bytes::PAGE)
        .ok_or(Errno::EINVAL)?
        .offset_from(first)
        .pages_ceil();
    let pages = get_user_pages(cx, mm, first, nr, flags).await?;
    Ok(cx.st().gup_holds.push(Some(Hold { start, len, pages })))
}

/// What the holder sees: the bytes of the held physical pages.
pub(crate) fn hold_read(st: &KState, id: HoldId) -> Result<Vec<u8>, Errno> {
    let h = st.gup_holds.get(id).and_then(Option::as_ref).ok_or(Errno::EINVAL)?;
    let mut out = vec![0; h.len as usize];
    let mut done = 0u64;
    while done < h.len {
        let a = h.start + Bytes(done);
        let n = (4096 - a.page_offset()).min(h.len - done);
        let page = h.pages.page_for(h.start.align_down(Bytes::PAGE), a);
        st.mem.read(page.0, a.page_offset() as usize, &mut out[done as usize..(done + n) as usize]);
        done += n;
    }
    Ok(out)
}

/// Drops a holder's pages.
pub(crate) fn hold_release(cx: &Cx, id: HoldId) -> Result<(), Errno> {
    let h = cx.st().gup_holds.get_mut(id).and_then(Option::take).ok_or(Errno::EINVAL)?;
    release_pages(cx, &h.pages, false);
    Ok(())
}

/// `mm_populate`: [`mm_populate`] of `[start, end)` with its errors ignored (`mmap`'s
/// `MAP_POPULATE` and `MAP_LOCKED`, `mlockall`, `brk` of a locked heap).
pub(crate) async fn populate(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    let _ = mm_populate(cx, mm, (start, end), true).await;
}

/// `__mm_populate`: faults in every page of `[start, end)` that is mapped by a VMA and not yet
/// present (`populate_vma_page_range`: writable private mappings with write faults, breaking
/// COW up front), VMA by VMA, holes passed over. `VM_IO`/`VM_PFNMAP` VMAs and lock-on-fault ones
/// are left alone; a VMA without any access cannot be populated (GUP forces access only to an
/// accessible one: EFAULT), and a fault that fails ends its VMA's walk (EFAULT; ENOMEM out of
/// memory). With `ignore_errors` the walk goes on at the next VMA; without (`mlock`) it stops
/// with the error, the VMAs before keeping their pages.
pub(crate) async fn mm_populate(
    cx: &Cx,
    mm: MmId,
    (start, end): (VirtAddr, VirtAddr),
    ignore_errors: bool,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let mut addr = start;
    while addr < end {
        let Some(vma) = cx.st().find_vma(mm, addr) else {
            addr = next_vma_start(&cx.st(), mm, addr, end);
            continue;
        };
        let (flags, vma_end) = {
            let st = cx.st();
            (st.vma(vma).flags, st.vma(vma).end)
        };
        let failed = if flags.has(VmFlags::IO | VmFlags::PFNMAP | VmFlags::LOCKONFAULT) {
            None
        } else if !flags.has(VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC) {
            Some(Errno::EFAULT)
        } else {
            populate_vma_range(cx, mm, vma, (addr, vma_end.min(end))).await.err()
        };
        if let Some(e) = failed.filter(|_| !ignore_errors) {
            return Err(e);
        }
        addr = vma_end;
    }
    Ok(())
}

/// `populate_vma_page_range`'s faults over `[start, end)` of `vma`, to the first that fails
/// (the caller holds `mmap_lock`).
pub(crate) async fn populate_vma_range(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    (start, end): (VirtAddr, VirtAddr),
) -> Result<(), Errno> {
    let mut addr = start;
    while addr < end {
        let (step, result) = faultin_one(cx, mm, vma, addr, None).await;
        result.map_err(|e| if e == VmFault::Oom { Errno::ENOMEM } else { Errno::EFAULT })?;
        addr = (addr + Bytes(step)).align_down(Bytes(step));
    }
    Ok(())
}

/// Where a walk of `[addr, end)` that met a hole at `addr` goes on: the start of the next VMA
/// there, else `end`.
fn next_vma_start(st: &KState, mm: MmId, addr: VirtAddr, end: VirtAddr) -> VirtAddr {
    let next = st.mm(mm).vmas_in(addr, end, |id| st.vma(id).end).first().copied();
    next.map_or(end, |v| st.vma(v).start)
}

/// One page of a populate walk: faults `addr` of `vma` in unless the PTE already allows the
/// access (`write`, or by default a write in a writable private mapping, else a read). Returns
/// the walk's step (a hugetlb VMA is populated one huge page at a time) and the fault's result.
async fn faultin_one(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    write: Option<bool>,
) -> (u64, Result<(), VmFault>) {
    let (write, present, step) = {
        let st = cx.st();
        let f = st.vma(vma).flags;
        let write = write.unwrap_or(f.0 & (VmFlags::WRITE | VmFlags::SHARED) == VmFlags::WRITE);
        let present = st
            .pt
            .translate(st.mm(mm).pgd, addr)
            .is_some_and(|(p, _)| p.is_present() && (!write || p.write()));
        (write, present, st.hstate_vma(vma).map_or(4096, |s| s.bytes()))
    };
    if present {
        return (step, Ok(()));
    }
    let kind = if write { FaultKind::Write } else { FaultKind::Read };
    let acct = gup_fault_acct(cx, vma, FaultAcct::Current);
    let result = handle_mm_fault(cx, mm, vma, addr, kind, acct).await;
    (step, result.map(|_| ()))
}

/// `MADV_POPULATE_READ`/`MADV_POPULATE_WRITE` (`madvise_populate`, v5.14, 4ca9b3859dac):
/// prefaults `[start, end)` as reads or writes through GUP's fault path, each fault counted in
/// the caller's `minflt`/`majflt` (a hugetlb VMA's from v6.6). A hole is ENOMEM: from v6.10 at
/// once; before, at the end, after the VMAs past it were populated too
/// (`era::madv_populate_skips_holes`, `madvise_walk_vmas`). A `VM_IO`/`VM_PFNMAP` VMA, or one
/// without the permission (`check_vma_flags`: a write into a read-only mapping, any access to
/// `PROT_NONE`), is EINVAL; a fault that raises SIGBUS or SIGSEGV EFAULT, one out of memory
/// ENOMEM; these stop the walk in every era. The pages before a failure stay populated.
pub(crate) async fn madvise_populate(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    write: bool,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let skips_holes = crate::era::madv_populate_skips_holes(cx.kernel().version);
    let mut hole = false;
    let mut addr = start;
    while addr < end {
        let vma = {
            let st = cx.st();
            let Some(vma) = st.find_vma(mm, addr) else {
                if !skips_holes {
                    return Err(Errno::ENOMEM);
                }
                hole = true;
                addr = next_vma_start(&st, mm, addr, end);
                continue;
            };
            let f = st.vma(vma).flags;
            let allowed = if write { VmFlags::WRITE } else { VmFlags::READ };
            if f.has(VmFlags::IO | VmFlags::PFNMAP) || !f.has(allowed) {
                return Err(Errno::EINVAL);
            }
            vma
        };
        let (step, result) = faultin_one(cx, mm, vma, addr, Some(write)).await;
        result.map_err(|f| match f {
            VmFault::Oom => Errno::ENOMEM,
            VmFault::SigBus | VmFault::SigSegv => Errno::EFAULT,
        })?;
        addr = (addr + Bytes(step)).align_down(Bytes(step));
    }
    if hole { Err(Errno::ENOMEM) } else { Ok(()) }
}
