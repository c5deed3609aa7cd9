//! Page faults (`arch/x86/mm/fault.c` `do_user_addr_fault`; `mm/memory.c` `handle_mm_fault`,
//! `do_anonymous_page`, `do_read_fault`, `do_cow_fault`, `do_shared_fault`, `do_fault_around`,
//! `do_swap_page`, `do_wp_page`, `wp_page_copy`; Linux v6.8, with the earlier eras the
//! `cow_reuse` switch selects).
//!
//! The order of locks and charges follows the kernel: the fault entry cost, `mmap_lock` for read,
//! page-table population under `page_table_lock` (upper levels) or the PMD's split lock (a new PTE
//! table), allocation and clearing of a new page *before* the PTE lock, then the PTE lock around
//! the check that the PTE is still what the fault saw and the update. A fault that loses a race
//! (the PTE changed while it slept) backs out and lets the access retry, as the kernel does.
//! Allocation goes through the allocator's slow path (`vmscan::alloc_folio`): kswapd, direct
//! reclaim, or OOM.
//!
//! Modelled: anonymous read faults map the shared zero page; anonymous write faults allocate a
//! zeroed exclusive page; file read faults go through the page cache with fault-around; private
//! file write faults copy into anonymous memory; shared file write faults dirty the page-cache
//! page; swap entries fault through the swap cache (`do_swap_page`, reusing the page for a
//! write by the era's rule); write-protect faults reuse or copy by the `cow_reuse` rule
//! (`cow.rs`), replace the zero page, or make a shared page writable; *unshare* faults (GUP
//! read pins, v5.19+) make an anonymous page exclusive without making it writable. PTEs get
//! x86's bits: young on the faulting address, dirty and soft-dirty when written.
//!
//! DAX VMAs go to `dax.rs`: their PMD level first (`create_huge_pmd`, `wp_huge_pmd`), then
//! `do_fault` and the shared write-protect fault; a private write copies a DAX block from the
//! device.
//!
//! File VMAs that are not DAX try their PMD level in `huge_memory.rs` (read-only file THPs for
//! executable text, under the `exec_text_thp` switch) before the PTE level.
//!
//! Not yet modelled: anonymous transparent huge pages (THP is `never` for them), userfaultfd, stack expansion of
//! `VM_GROWSDOWN` VMAs (an access below a stack VMA is SIGSEGV), swap readahead.

use crate::cost::Cost;
use crate::cow;
use crate::errno::VmFault;
use crate::filemap::{FaultPage, filemap_fault, folio_lock, folio_unlock};
use crate::folio::{InodeId, pg};
use crate::fs::FsType;
use crate::kernel::{Cx, KState};
use crate::mm_struct::{MmCounter, MmId};
use crate::pgtable::{Level, PtId, Pte, Upper};
use crate::tlbflush::flush_tlb_page;
use crate::vma::{VmFlags, VmaId};
use crate::vmscan::alloc_folio;
use crate::vmstat::{MmEvent, VmStat};
use engine::LockGuard;
use simcore::{Order, Pfn, VirtAddr};

/// The kind of user access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// An instruction fetch.
    Exec,
}

impl Access {
    pub fn is_write(self) -> bool {
        self == Access::Write
    }
}

/// What a fault asks for (`FAULT_FLAG_WRITE`, `FAULT_FLAG_UNSHARE`, or neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Read,
    Write,
    /// Make an anonymous page exclusive (or replace it with an anonymous copy) without making
    /// the PTE writable: GUP's read-only pins in the `anon_exclusive` era.
    Unshare,
}

impl FaultKind {
    fn write(self) -> bool {
        self == FaultKind::Write
    }
}

/// Whether the fault read from the backing store or swap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOutcome {
    Minor,
    Major,
}

/// The PTE bits a mapping of `vma` gets (`vm_get_page_prot` plus the fault's `maybe_mkwrite`).
pub(crate) fn pte_bits(flags: VmFlags, writable: bool, dirty: bool) -> u64 {
    let mut bits = Pte::USER | Pte::ACCESSED;
    if !flags.has(VmFlags::EXEC) {
        bits |= Pte::NX;
    }
    if writable {
        bits |= Pte::RW;
    }
    if dirty {
        bits |= Pte::DIRTY | Pte::SOFT_DIRTY;
    }
    bits
}

/// `vma_wants_writenotify` for the cases modelled: a shared writable mapping of a disk file is
/// mapped read-only so that the first write is seen (dirty accounting, `page_mkwrite`).
pub(crate) fn wants_writenotify(st: &KState, vma: VmaId) -> bool {
    let v = st.vma(vma);
    if !v.is_shared() || !v.flags.has(VmFlags::WRITE) {
        return false;
    }
    v.file.is_some_and(|f| matches!(st.inodes[st.file(f).inode].fs, FsType::Disk | FsType::Dax))
}

/// `vm_normal_page`: the page a PTE maps, or `None` for special mappings (the zero page).
pub(crate) fn vm_normal_page(pte: Pte) -> Option<Pfn> {
    (pte.is_present() && !pte.special()).then(|| pte.pfn())
}

/// The RSS counter a page counts in (`mm_counter`).
pub(crate) fn mm_counter(st: &KState, head: Pfn) -> MmCounter {
    if st.folios.is_anon(head) {
        MmCounter::AnonPages
    } else if st.folios.test(head, pg::SWAPBACKED) {
        MmCounter::ShmemPages
    } else {
        MmCounter::FilePages
    }
}

/// The x86 page-fault handler for a user access: returns once the access can be retried.
pub(crate) async fn do_user_addr_fault(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    access: Access,
) -> Result<FaultOutcome, VmFault> {
    cx.charge(Cost::FaultEntry).await;
    let mmap_lock = cx.st().mm(mm).mmap_lock;
    let _mmap = mmap_lock.read(cx).await;
    let vma = {
        let st = cx.st();
        let vma = st.find_vma(mm, addr).ok_or(VmFault::SigSegv)?;
        let flags = st.vma(vma).flags;
        let allowed = match access {
            Access::Write => flags.has(VmFlags::WRITE),
            Access::Exec => flags.has(VmFlags::EXEC),
            Access::Read => flags.has(VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC),
        };
        if !allowed {
            return Err(VmFault::SigSegv);
        }
        vma
    };
    let kind = if access.is_write() { FaultKind::Write } else { FaultKind::Read };
    handle_mm_fault(cx, mm, vma, addr, kind).await
}

/// `handle_mm_fault`: resolves a fault at `addr` of `vma`; the caller holds `mmap_lock`.
pub(crate) async fn handle_mm_fault(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    kind: FaultKind,
) -> Result<FaultOutcome, VmFault> {
    cx.st().vmstat.inc(VmStat::Pgfault);
    // `lru_gen_enter_fault`: the multi-gen LRU places folios this fault adds by recency.
    let recency = {
        let st = cx.st();
        st.vma_has_recency(vma, st.lru.noreuse, true)
    };
    let _lru = cx.lru_fault_scope(recency);
    let addr = addr.align_down(simcore::Bytes::PAGE);
    if let Some(done) = crate::dax::dax_huge_fault(cx, mm, vma, addr, kind).await? {
        return Ok(done);
    }
    if let Some(done) = crate::huge_memory::file_huge_fault(cx, mm, vma, addr, kind).await? {
        return Ok(done);
    }
    let Some(pte_table) = pte_alloc(cx, mm, addr).await? else {
        // A huge PMD appeared meanwhile: the access retries (`handle_pte_fault` returns 0).
        return Ok(FaultOutcome::Minor);
    };
    let idx = Level::Pte.index(addr);
    let orig = cx.st().pt.pte(pte_table, idx);
    if orig.is_none() {
        let anonymous = cx.st().vma(vma).is_anonymous();
        return if anonymous {
            do_anonymous_page(cx, mm, vma, addr, pte_table, kind.write()).await
        } else {
            do_fault(cx, mm, vma, addr, pte_table, kind).await
        };
    }
    if orig.is_swap() {
        return do_swap_page(cx, mm, vma, addr, pte_table, orig, kind).await;
    }
    let ptl = cx.st().pt.ptl(pte_table);
    let guard = ptl.lock(cx).await;
    let cur = cx.st().pt.pte(pte_table, idx);
    if cur != orig {
        return Ok(FaultOutcome::Minor);
    }
    match kind {
        FaultKind::Write if !cur.write() => {
            return do_wp_page(cx, mm, vma, addr, pte_table, guard, false).await;
        }
        FaultKind::Unshare => return do_wp_page(cx, mm, vma, addr, pte_table, guard, true).await,
        _ => {}
    }
    // Spurious fault (another CPU fixed it up) or an access bit to set.
    let bits =
        if kind.write() { Pte::ACCESSED | Pte::DIRTY | Pte::SOFT_DIRTY } else { Pte::ACCESSED };
    cx.st().pt.set_pte(pte_table, idx, cur.with(bits));
    Ok(FaultOutcome::Minor)
}

/// Makes sure the table below `parent`'s entry for `addr` exists (`__pud_alloc`, `__pmd_alloc`,
/// `__pte_alloc`): the page is allocated before the lock, installed under it unless another task
/// won the race. `None` when a huge leaf (a DAX PMD) maps `addr` instead.
async fn table_alloc(
    cx: &Cx,
    mm: MmId,
    parent: PtId,
    level: Level,
    addr: VirtAddr,
) -> Result<Option<PtId>, VmFault> {
    let idx = level.index(addr);
    let entry = cx.st().pt.upper(parent, idx);
    match entry {
        Upper::Table(t) => return Ok(Some(t)),
        Upper::Leaf(_) => return Ok(None),
        Upper::None => {}
    }
    cx.charge(Cost::PgtableAlloc).await;
    let lock =
        if level == Level::Pmd { cx.st().pt.ptl(parent) } else { cx.st().mm(mm).page_table_lock };
    let _g = lock.lock(cx).await;
    let mut st = cx.st();
    match st.pt.upper(parent, idx) {
        Upper::Table(t) => return Ok(Some(t)),
        Upper::Leaf(_) => return Ok(None),
        Upper::None => {}
    }
    let frame = st.alloc_pgtable_frame().ok_or(VmFault::Oom)?;
    st.mm_mut(mm).nr_ptes += 1;
    let handle: &engine::Handle = cx;
    let t = st.pt.alloc(level.below(), frame, || handle.spin_lock("ptlock"));
    st.pt.set_upper(parent, idx, Upper::Table(t));
    Ok(Some(t))
}

/// Walks to the PMD table covering `addr`, populating the levels above it (`pud_alloc`,
/// `pmd_alloc`).
pub(crate) async fn pmd_alloc(cx: &Cx, mm: MmId, addr: VirtAddr) -> Result<PtId, VmFault> {
    let mut table = cx.st().mm(mm).pgd;
    for level in [Level::Pgd, Level::Pud] {
        table = table_alloc(cx, mm, table, level, addr).await?.expect("no PUD leaves");
    }
    Ok(table)
}

/// Walks to the PTE table covering `addr`, populating the levels that are missing; `None` when
/// a huge PMD maps `addr`.
pub(crate) async fn pte_alloc(cx: &Cx, mm: MmId, addr: VirtAddr) -> Result<Option<PtId>, VmFault> {
    let pmd_table = pmd_alloc(cx, mm, addr).await?;
    table_alloc(cx, mm, pmd_table, Level::Pmd, addr).await
}

/// `__anon_vma_prepare`: gives the VMA an anon_vma before its first anonymous page.
pub(crate) async fn anon_vma_prepare(cx: &Cx, mm: MmId, vma: VmaId) {
    if cx.st().vma(vma).anon_vma.is_some() {
        return;
    }
    let lock = cx.rwsem("anon_vma");
    let _a = lock.write(cx).await;
    let ptl = cx.st().mm(mm).page_table_lock;
    let _p = ptl.lock(cx).await;
    let mut st = cx.st();
    if st.vma(vma).anon_vma.is_none() {
        st.anon_vma_attach_new(vma, lock);
    }
}

/// Allocates a page for a fault, or `VM_FAULT_OOM`.
pub(crate) async fn fault_alloc(cx: &Cx) -> Result<Pfn, VmFault> {
    cx.charge(Cost::PageAlloc).await;
    alloc_folio(cx, Order::BASE).await.ok_or(VmFault::Oom)
}

/// Maps a new exclusive anonymous page at `addr` (the tail of `do_anonymous_page`,
/// `do_cow_fault`, `wp_page_copy`), handing the allocation's reference to the mapping.
pub(crate) fn map_new_anon(
    st: &mut KState,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    folio: Pfn,
    writable: bool,
) {
    let flags = st.vma(vma).flags;
    st.folios.extra_to_mapping(folio);
    st.rmap_add_new_anon(folio, vma, addr);
    st.folio_add_lru(folio);
    st.mm_mut(mm).add_rss(MmCounter::AnonPages, 1);
    st.pt.set_pte(
        table,
        Level::Pte.index(addr),
        Pte::new(folio, pte_bits(flags, writable, writable)),
    );
}

async fn do_anonymous_page(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    write: bool,
) -> Result<FaultOutcome, VmFault> {
    let idx = Level::Pte.index(addr);
    let ptl = cx.st().pt.ptl(table);
    let flags = cx.st().vma(vma).flags;
    if !write {
        let _g = ptl.lock(cx).await;
        cx.charge(Cost::PteInstall).await;
        let mut st = cx.st();
        if st.pt.pte(table, idx).is_none() {
            let zero = Pte::new(st.zero_pfn, pte_bits(flags, false, false) | Pte::SPECIAL);
            st.pt.set_pte(table, idx, zero);
        }
        return Ok(FaultOutcome::Minor);
    }
    anon_vma_prepare(cx, mm, vma).await;
    let folio = fault_alloc(cx).await?;
    cx.charge(Cost::ZeroPage4k).await;
    install_new_anon(cx, mm, vma, addr, table, folio, true).await;
    Ok(FaultOutcome::Minor)
}

/// The tail of `do_anonymous_page`, `do_cow_fault` and DAX's private copy: under the PTE lock,
/// maps the new anonymous page if the PTE is still empty, or frees it (another fault won).
pub(crate) async fn install_new_anon(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    folio: Pfn,
    writable: bool,
) {
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::LruAdd).await;
    cx.charge(Cost::PteInstall).await;
    let mut st = cx.st();
    if st.pt.pte(table, Level::Pte.index(addr)).is_none() {
        map_new_anon(&mut st, mm, vma, addr, table, folio, writable);
    } else {
        st.put_folio_extra(folio);
    }
}

/// `do_fault`: a file-backed VMA with no PTE at `addr`.
async fn do_fault(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    kind: FaultKind,
) -> Result<FaultOutcome, VmFault> {
    let (inode, index, shared, readaround) = {
        let st = cx.st();
        let v = st.vma(vma);
        let inode = st.file(v.file.expect("file VMA")).inode;
        let file = st.file(v.file.expect("file VMA"));
        let ra = if v.flags.has(VmFlags::RAND_READ) { 1 } else { file.ra.ra_pages.max(1) };
        (inode, v.page_index(addr), v.is_shared(), ra)
    };
    if cx.st().vma_is_dax(vma) {
        return crate::dax::dax_pte_fault(cx, mm, vma, addr, table, kind).await;
    }
    if kind == FaultKind::Read {
        if do_fault_around(cx, mm, vma, addr, table, inode).await {
            return Ok(FaultOutcome::Minor);
        }
        let fp = filemap_fault(cx, inode, index, readaround).await?;
        let outcome = finish_fault(cx, mm, vma, addr, table, fp, false).await;
        folio_unlock(cx, fp.head);
        return outcome;
    }
    if !shared {
        let writable = kind.write();
        return do_cow_fault(cx, mm, vma, addr, table, inode, index, readaround, writable).await;
    }
    let fp = filemap_fault(cx, inode, index, readaround).await?;
    if kind.write() {
        cx.st().folio_mark_dirty(fp.head);
    }
    let outcome = finish_fault(cx, mm, vma, addr, table, fp, kind.write()).await;
    folio_unlock(cx, fp.head);
    outcome
}

/// `finish_fault` for a page-cache page: maps it (writable only for a shared write), giving the
/// fault's reference to the mapping.
async fn finish_fault(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    fp: FaultPage,
    write: bool,
) -> Result<FaultOutcome, VmFault> {
    let idx = Level::Pte.index(addr);
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let mut st = cx.st();
    if !st.pt.pte(table, idx).is_none() {
        st.put_folio_extra(fp.head);
        return Ok(outcome_of(fp.major));
    }
    let flags = st.vma(vma).flags;
    let shared_writable = flags.has(VmFlags::SHARED) && flags.has(VmFlags::WRITE);
    let writable = write || (shared_writable && !wants_writenotify(&st, vma));
    st.folios.extra_to_mapping(fp.head);
    st.rmap_add_pte(fp.page);
    let counter = mm_counter(&st, fp.head);
    st.mm_mut(mm).add_rss(counter, 1);
    st.pt.set_pte(table, idx, Pte::new(fp.page, pte_bits(flags, writable, write)));
    Ok(outcome_of(fp.major))
}

fn outcome_of(major: bool) -> FaultOutcome {
    if major { FaultOutcome::Major } else { FaultOutcome::Minor }
}

/// `do_fault_around`: maps the cached, uptodate, unlocked pages of the fault-around window that
/// have no PTE yet. Returns whether the faulting address got mapped.
async fn do_fault_around(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    inode: InodeId,
) -> bool {
    let window = cx.kernel().tunables.fault_around_pages;
    if window <= 1 {
        return false;
    }
    let (start, end, flags, writable) = {
        let st = cx.st();
        let v = st.vma(vma);
        let bytes = simcore::Bytes(window << 12);
        let pmd_start = addr.align_down(simcore::Bytes::PMD);
        let eof = v.address_of(st.inodes[inode].size_pages()).unwrap_or(v.end);
        let window_start = addr.align_down(bytes);
        let start = window_start.max(v.start).max(pmd_start);
        let end = (window_start + bytes)
            .min(v.end)
            .min(pmd_start + simcore::Bytes::PMD)
            .min(eof.max(v.start));
        let writable = v.flags.has(VmFlags::SHARED)
            && v.flags.has(VmFlags::WRITE)
            && !wants_writenotify(&st, vma);
        (start, end, v.flags, writable)
    };
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    let (mapped, hit) = {
        let mut st = cx.st();
        let mut mapped = 0;
        let mut hit = false;
        let mut a = start;
        while a < end {
            let idx = Level::Pte.index(a);
            let index = st.vma(vma).page_index(a);
            let head = st.page_cache_get(inode, index);
            if let Some(head) = head.filter(|&h| {
                st.pt.pte(table, idx).is_none()
                    && st.folios.test(h, pg::UPTODATE)
                    && !st.folios.test(h, pg::LOCKED)
            }) {
                let page = head + (index - st.folio_index(head));
                st.folios.get(head, 1);
                st.rmap_add_pte(page);
                let counter = mm_counter(&st, head);
                st.mm_mut(mm).add_rss(counter, 1);
                st.pt.set_pte(table, idx, Pte::new(page, pte_bits(flags, writable, false)));
                mapped += 1;
                hit |= a == addr;
            }
            a = a + simcore::Bytes::PAGE;
        }
        (mapped, hit)
    };
    cx.charge_n(Cost::FaultAroundPage, mapped).await;
    hit
}

/// `do_cow_fault`: a write (or unshare) to a private file mapping with no PTE: copies the file
/// page into a new anonymous page.
#[allow(clippy::too_many_arguments)]
async fn do_cow_fault(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    inode: InodeId,
    index: u64,
    readaround: u64,
    writable: bool,
) -> Result<FaultOutcome, VmFault> {
    anon_vma_prepare(cx, mm, vma).await;
    let new = fault_alloc(cx).await?;
    let fp = match filemap_fault(cx, inode, index, readaround).await {
        Ok(fp) => fp,
        Err(e) => {
            cx.st().put_folio_extra(new);
            return Err(e);
        }
    };
    cx.charge(Cost::CopyPage4k).await;
    cx.st().mem.copy(fp.page.0, new.0);
    folio_unlock(cx, fp.head);
    cx.st().put_folio_extra(fp.head);
    install_new_anon(cx, mm, vma, addr, table, new, writable).await;
    Ok(outcome_of(fp.major))
}

/// Whether a write fault may reuse the anonymous page (the era's rule).
fn can_reuse(cx: &Cx, st: &mut KState, head: Pfn, page: Pfn) -> bool {
    cow::can_reuse_anon(st, cx.kernel().switches.cow_reuse, cx.kernel().at_least(5, 18), head, page)
}

/// `do_swap_page`: a PTE holding a swap entry. Finds the page in the swap cache or reads it from
/// the device, maps it, and — for a write — reuses it in place when the era allows, making the
/// PTE writable; otherwise maps it read-only and a later write takes the write-protect path.
async fn do_swap_page(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    orig: Pte,
    kind: FaultKind,
) -> Result<FaultOutcome, VmFault> {
    let (_, slot) = orig.swap_entry();
    let idx = Level::Pte.index(addr);
    let cached = cx.st().swap.cached(slot);
    let (head, major) = match cached {
        Some(h) => (h, false),
        None => {
            let new = fault_alloc(cx).await?;
            let raced = {
                let mut st = cx.st();
                if st.swap.cached(slot).is_some() || st.pt.pte(table, idx) != orig {
                    st.put_folio_extra(new);
                    true
                } else {
                    st.swapin_new(slot, new);
                    st.put_folio_extra(new);
                    false
                }
            };
            if raced {
                return Ok(FaultOutcome::Minor);
            }
            cx.sleep(cx.block_io(1)).await;
            {
                let mut st = cx.st();
                let memcg = st.folio_memcg(new);
                st.count_event(memcg, VmStat::Pgmajfault, 1);
            }
            folio_unlock(cx, new);
            (new, true)
        }
    };
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    let ptl = cx.st().pt.ptl(table);
    let g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let writable = {
        let mut st = cx.st();
        if st.pt.pte(table, idx) != orig || st.swap.slot_of(head) != Some(slot) {
            drop(st);
            drop(g);
            folio_unlock(cx, head);
            cx.st().put_folio_extra(head);
            return Ok(outcome_of(major));
        }
        // Map it: the fault's reference becomes the mapping's.
        st.folios.extra_to_mapping(head);
        if st.folios.is_anon(head) {
            st.rmap_add_pte(head);
        } else {
            st.rmap_add_new_anon(head, vma, addr);
        }
        st.folios.clear_flag(head, pg::ANON_EXCLUSIVE);
        st.mm_mut(mm).sub_rss(MmCounter::SwapEnts, 1);
        st.mm_mut(mm).add_rss(MmCounter::AnonPages, 1);
        st.swap_free(slot);
        let writable = if cx.kernel().switches.cow_reuse == crate::era::CowReuse::AnonExclusive {
            // `should_try_to_free_swap`, then exclusive if the swap PTE said so or nobody else
            // holds the page.
            if st.swap.is_full() || (kind.write() && st.folios.refcount(head) == 2) {
                st.folio_free_swap(head);
            }
            let exclusive = orig.swap_exclusive() || st.folios.refcount(head) == 1;
            if exclusive {
                st.folios.set(head, pg::ANON_EXCLUSIVE);
            }
            exclusive && kind.write()
        } else {
            if st.swap.is_full() {
                st.folio_free_swap(head);
            }
            // Up to v5.17 do_swap_page reused by `reuse_swap_page` in every era.
            kind.write() && cow::reuse_swap_page(&mut st, head, head)
        };
        let flags = st.vma(vma).flags;
        let soft_dirty = if orig.soft_dirty() { Pte::SOFT_DIRTY } else { 0 };
        st.pt.set_pte(
            table,
            idx,
            Pte::new(head, pte_bits(flags, writable, writable)).with(soft_dirty),
        );
        writable
    };
    folio_unlock(cx, head);
    if kind.write() && !writable {
        // Not reusable: the write takes the write-protect path at once, as the kernel's
        // do_swap_page calls do_wp_page with the PTE lock still held.
        do_wp_page(cx, mm, vma, addr, table, g, false).await?;
    }
    Ok(outcome_of(major))
}

/// `do_wp_page`: a write to a present, read-only PTE, or an unshare request. Entered with the
/// PTE lock held.
#[allow(clippy::too_many_arguments)]
async fn do_wp_page(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    ptl: LockGuard<'_>,
    unshare: bool,
) -> Result<FaultOutcome, VmFault> {
    let idx = Level::Pte.index(addr);
    let (orig, shared, page) = {
        let st = cx.st();
        let pte = st.pt.pte(table, idx);
        (pte, st.vma(vma).is_shared(), vm_normal_page(pte))
    };
    if shared {
        if unshare {
            return Ok(FaultOutcome::Minor);
        }
        if cx.st().vma_is_dax(vma) {
            drop(ptl);
            return crate::dax::dax_wp_shared(cx, mm, vma, addr, table, orig).await;
        }
        let page = page.expect("shared mappings map normal pages");
        let head = cx.st().folios.head(page);
        drop(ptl);
        return wp_page_shared(cx, vma, table, idx, orig, head).await;
    }
    if let Some(page) = page {
        let mut st = cx.st();
        let head = st.folios.head(page);
        if st.folios.is_anon(head) && can_reuse(cx, &mut st, head, page) {
            // `wp_page_reuse`: an unshare leaves the PTE read-only.
            if !unshare {
                st.vmstat.inc(VmStat::Pgreuse);
                st.pt.set_pte(
                    table,
                    idx,
                    orig.with(Pte::RW | Pte::DIRTY | Pte::SOFT_DIRTY | Pte::ACCESSED),
                );
            }
            st.rmap_move_anon(head, vma);
            return Ok(FaultOutcome::Minor);
        }
    }
    wp_page_copy(cx, mm, vma, addr, table, orig, ptl, unshare).await
}

/// `wp_page_shared`: the first write through a write-notify shared mapping dirties the page.
async fn wp_page_shared(
    cx: &Cx,
    vma: VmaId,
    table: PtId,
    idx: usize,
    orig: Pte,
    head: Pfn,
) -> Result<FaultOutcome, VmFault> {
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    cx.st().folio_mark_dirty(head);
    let ptl = cx.st().pt.ptl(table);
    let g = ptl.lock(cx).await;
    {
        let mut st = cx.st();
        if st.pt.pte(table, idx) == orig {
            debug_assert!(st.vma(vma).is_shared());
            st.pt.set_pte(
                table,
                idx,
                orig.with(Pte::RW | Pte::DIRTY | Pte::SOFT_DIRTY | Pte::ACCESSED),
            );
        }
    }
    drop(g);
    folio_unlock(cx, head);
    cx.st().put_folio_extra(head);
    Ok(FaultOutcome::Minor)
}

/// `wp_page_copy`: gives the faulting mapping its own copy (of the zero page: a zeroed page; of
/// a DAX block: a copy read from the device). An unshare maps the copy read-only.
#[allow(clippy::too_many_arguments)]
async fn wp_page_copy(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    orig: Pte,
    ptl: LockGuard<'_>,
    unshare: bool,
) -> Result<FaultOutcome, VmFault> {
    let idx = Level::Pte.index(addr);
    let old = vm_normal_page(orig);
    let pmem = (old.is_none() && cx.st().is_pmem_pfn(orig.pfn())).then(|| orig.pfn());
    let old_head = old.map(|p| {
        let mut st = cx.st();
        let h = st.folios.head(p);
        st.folios.get_extra(h);
        h
    });
    drop(ptl);
    anon_vma_prepare(cx, mm, vma).await;
    let new = match fault_alloc(cx).await {
        Ok(n) => n,
        Err(e) => {
            if let Some(h) = old_head {
                cx.st().put_folio_extra(h);
            }
            return Err(e);
        }
    };
    let cost = match (old, pmem) {
        (Some(_), _) => Cost::CopyPage4k,
        (None, Some(_)) => Cost::PmemRead4k,
        (None, None) => Cost::ZeroPage4k,
    };
    cx.charge(cost).await;
    if let Some(p) = old.or(pmem) {
        cx.st().mem.copy(p.0, new.0);
    }
    let lock = cx.st().pt.ptl(table);
    let g = lock.lock(cx).await;
    cx.charge(Cost::LruAdd).await;
    cx.charge(Cost::PteInstall).await;
    let replaced = {
        let mut st = cx.st();
        if st.pt.pte(table, idx) != orig {
            st.put_folio_extra(new);
            false
        } else {
            if let (Some(p), Some(h)) = (old, old_head) {
                st.events.inc(MmEvent::WpPageCopy);
                if st.folios.test(h, pg::SWAPCACHE) {
                    st.events.inc(MmEvent::WpCopySwapcache);
                }
                st.rmap_remove_pte(p);
                st.folios.mapping_to_extra(h);
                let counter = mm_counter(&st, h);
                st.mm_mut(mm).sub_rss(counter, 1);
            }
            map_new_anon(&mut st, mm, vma, addr, table, new, !unshare);
            true
        }
    };
    if replaced {
        flush_tlb_page(cx, mm, addr).await;
    }
    drop(g);
    if let Some(h) = old_head {
        let mut st = cx.st();
        if replaced {
            st.put_folio_extra(h); // the old PTE's reference, gathered until the flush
        }
        let rule = cx.kernel().switches.cow_reuse;
        if cow::frees_idle_swapcache_after_copy(rule, cx.kernel().at_least(5, 14))
            && st.folios.test(h, pg::SWAPCACHE)
            && st.folios.folio_mapcount(h) == 0
            && crate::filemap::folio_trylock(&mut st, h)
        {
            st.folio_free_swap(h);
            st.folios.clear_flag(h, pg::LOCKED);
        }
        st.put_folio_extra(h);
    }
    Ok(FaultOutcome::Minor)
}
