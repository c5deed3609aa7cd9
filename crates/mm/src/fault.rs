//! Page faults (`arch/x86/mm/fault.c` `do_user_addr_fault`; `mm/memory.c` `handle_mm_fault`,
//! `__handle_mm_fault`, `handle_pte_fault`, `do_anonymous_page`, `do_fault`, `do_read_fault`,
//! `do_cow_fault`, `do_shared_fault`, `do_fault_around`, `do_swap_page`, `do_wp_page`,
//! `wp_page_shared`, `wp_page_copy`; Linux v6.8, with the earlier eras the `cow_reuse` switch
//! selects).
//!
//! The path, as the kernel reads it: `do_user_addr_fault` checks the access against the VMA and
//! calls `handle_mm_fault`, which builds the fault's [`Vmf`] and asks the VMA's operations
//! (`vm_ops.rs`) for the PMD level (`huge_fault`), then walks to the PTE table and dispatches on
//! the entry it finds: none (the operations' `fault`: `do_anonymous_page`, the page cache's
//! `do_fault`, or another kind's own), a swap entry (`do_swap_page`; a guard region's PTE marker
//! there is `VM_FAULT_SIGSEGV`, `handle_pte_marker`, v6.13), or a present PTE that a
//! write must make writable (`do_wp_page`; a shared mapping's goes to the operations'
//! `page_mkwrite`). Shared helpers live in `memory.rs`.
//!
//! The order of locks and charges follows the kernel: the fault entry cost, `mmap_lock` for read,
//! page-table population under `page_table_lock` (upper levels) or the PMD's split lock (a new PTE
//! table), allocation and clearing of a new page *before* the PTE lock, then the PTE lock around
//! the check that the PTE is still what the fault saw and the update. A fault that loses a race
//! (the PTE changed while it slept) backs out and lets the access retry, as the kernel does.
//! Allocation goes through the allocator's slow path (`page_alloc::alloc_folio`): kswapd, direct
//! reclaim, or OOM.
//!
//! Modelled: anonymous read faults map the shared zero page; anonymous write faults allocate a
//! zeroed exclusive page; page-cache read faults go through `filemap_fault` with fault-around
//! (`map_pages`); private file write faults copy into anonymous memory; shared file write faults
//! dirty the page-cache page; swap entries fault through the swap cache (`do_swap_page`, reusing
//! the page for a write by the era's rule; a page swapped in that is not exclusive to the faulting
//! VMA belongs to the root anon_vma, so rmap still finds it in every forked VMA that maps it later:
//! `__page_set_anon_rmap`, mm/rmap.c v6.1, and v5.8's `do_page_add_anon_rmap`); write-protect faults reuse or copy by the `cow_reuse`
//! rule (`cow.rs`), replace the zero page, or make a shared page writable; *unshare* faults (GUP
//! read pins, v5.19+) make an anonymous page exclusive without making it writable. PTEs get
//! x86's bits: young on the faulting address, dirty and soft-dirty when written. A write fault in
//! a private VMA without `VM_WRITE` (only GUP's forced COW break of v5.8 causes one) copies or
//! reuses as any write does but maps the page dirty and read-only (`maybe_mkwrite`).
//!
//! Anonymous THPs are the PMD level's (`VmOps::huge_fault`); a fault that falls back comes here.
//! From v6.8 a write fault here may allocate a multi-size THP ([`alloc_anon_folio`]; the
//! per-size knobs are `huge_memory/policy.rs`'s): the largest enabled order below the PMD's
//! whose aligned range lies in the VMA with every PTE empty, mapped by one PTE per page, each
//! page exclusive; a read still maps the zero page, and a COW copy is always one page. Not
//! modelled: `init_on_alloc`'s skipped clearing (v6.13). The choice skips a VMA a userfaultfd
//! is armed on (`userfaultfd_armed`: in missing mode the handler fills the page, in
//! write-protect mode the fault takes one page).
//!
//! An access just below a `VM_GROWSDOWN` VMA grows it (`expand_stack`, from v4.20; the
//! method's note has the limits). Not yet modelled: swap readahead.
//!
//! A write to a uffd-wp PTE of a VMA registered for write-protection goes to the handler from
//! `do_wp_page` before any reuse or copy (`userfaultfd/wp.rs`).
//! A missing page of a VMA registered with a userfaultfd (`userfaultfd.rs`) goes to its handler:
//! `do_anonymous_page` asks under the PTE lock for a read (before allocating for a write), a
//! shmem fault before `filemap_fault` (`missing_userfault`); the fault returns
//! `FaultOutcome::Retry`, and `do_user_addr_fault` sleeps without `mmap_lock` and retries.

use crate::arch::tlbflush::flush_tlb_page;
use crate::cow;
use crate::errno::VmFault;
use crate::filemap::{filemap_fault, folio_lock, folio_unlock};
use crate::folio::pg;
use crate::kernel::{Cx, KState, UffdFlag};
use crate::memory::{
    FaultKind, FaultOutcome, Vmf, anon_vma_prepare, fault_alloc, finish_fault, install_new_anon,
    map_new_anon, maybe_mkwrite, outcome_of, pte_alloc_below, pte_bits, pte_range_none,
    vm_normal_page,
};
use crate::mm_struct::MmCounter;
use crate::mm_struct::mm_counter;
use crate::page_alloc::{AllocFailure, alloc_thp_folio};
use crate::pgtable::{Access, Level, Pte};
use crate::sim::cost::Cost;
use crate::types::huge_mm::MthpStat;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::types::mm_types::WalkOps;
use crate::types::userfaultfd::UffdReason;
use crate::userfaultfd::{handle_userfault, userfaultfd_wait};
use crate::vma::VmFlags;
use crate::vmstat::{MmEvent, VmStat};
use engine::LockGuard;
use simcore::{Bytes, Order, Pfn, VirtAddr};

/// The x86 page-fault handler for a user access: returns once the access can be retried.
///
/// A fault a userfaultfd must resolve returns `FaultOutcome::Retry` from `handle_mm_fault`:
/// `mmap_lock` is dropped, the task sleeps until the handler resolves it, and the fault runs
/// again with `FAULT_FLAG_TRIED` (`userfaultfd.rs`).
pub(crate) async fn do_user_addr_fault(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    access: Access,
) -> Result<FaultOutcome, VmFault> {
    let _retry = cx.uffd_scope(UffdFlag::AllowRetry, true);
    let _first = cx.uffd_scope(UffdFlag::Tried, false);
    cx.set_fault_address(addr);
    let mut waiter = match lock_mm_and_fault(cx, mm, addr, access).await? {
        FaultOutcome::Retry(w) => w,
        done => return Ok(done),
    };
    let tried = !crate::userfaultfd::wp::retry_counts_minor(cx, waiter);
    let _tried = cx.uffd_scope(UffdFlag::Tried, tried);
    loop {
        userfaultfd_wait(cx, waiter).await;
        match lock_mm_and_fault(cx, mm, addr, access).await? {
            FaultOutcome::Retry(w) => waiter = w,
            done => return Ok(done),
        }
    }
}

/// One pass of `do_user_addr_fault`: `mmap_lock` for read, the access checked against the VMA,
/// `handle_mm_fault`.
async fn lock_mm_and_fault(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    access: Access,
) -> Result<FaultOutcome, VmFault> {
    cx.charge(Cost::FaultEntry).await;
    let mmap_lock = cx.st().mm(mm).mmap_lock;
    let _mmap = mmap_lock.read(cx).await;
    let vma = {
        let mut st = cx.st();
        let found = st.find_vma(mm, addr);
        let vma = found.or_else(|| st.expand_stack(mm, addr)).ok_or(VmFault::SigSegv)?;
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
    handle_mm_fault(cx, mm, vma, addr, kind, FaultAcct::Current).await
}

/// `RLIMIT_STACK`'s default soft limit (8 MiB), which a growing stack may not pass
/// (`acct_stack_growth`).
const RLIMIT_STACK: u64 = 8 << 20;

impl KState {
    /// `expand_stack` for an access at `addr` that no VMA holds: the `VM_GROWSDOWN` VMA right
    /// above it grows down to `addr`'s page (`expand_downwards`), unless that would bring it
    /// within `stack_guard_gap` of the VMA below (256 pages from v4.12, a page before: the
    /// `brk` era fact), past `RLIMIT_STACK`, or below `mmap_min_addr`. Before v4.20 x86 refused
    /// an access more than 64 KiB below the user stack pointer ("x86/mm/fault: Allow stack access
    /// below %rsp", 1d8ca3be86eb, v4.20); mmsim keeps no register state and takes the
    /// stack pointer to be in the task's own stack, above every mapping `mmap` makes, so those
    /// kernels refuse it. Approximations: the expansion happens under `mmap_lock` for read (the
    /// kernel takes it for write from v6.5, 8d7071af8907), and a VMA that is not accessible
    /// below the stack counts against the gap too.
    pub(crate) fn expand_stack(&mut self, mm: MmId, addr: VirtAddr) -> Option<VmaId> {
        let k = self.thp.kernel;
        if !crate::era::stack_grows_without_sp_check(k) {
            return None;
        }
        let (next, prev_end) = {
            let m = self.mm(mm);
            let next = m.vmas.range(addr.0..).next().map(|(_, &id)| id)?;
            let prev = m.vmas.range(..addr.0).next_back().map(|(_, &id)| self.vma(id).end);
            (next, prev.unwrap_or(VirtAddr(0)))
        };
        let new_start = addr.align_down(Bytes::PAGE);
        let v = self.vma(next);
        let gap = if crate::era::brk_respects_stack_guard_gap(k) { 256 << 12 } else { 4096 };
        if !v.flags.has(VmFlags::GROWSDOWN)
            || v.end.0 - new_start.0 > RLIMIT_STACK
            || new_start.0 < crate::mm_struct::MMAP_MIN
            || new_start.0 < prev_end.0.saturating_add(gap)
        {
            return None;
        }
        let old_start = v.start;
        assert_eq!(self.mm_mut(mm).vmas.remove(&old_start.0), Some(next));
        let grown = (old_start.0 - new_start.0) >> 12;
        let vma = self.vma_mut(next);
        vma.start = new_start;
        vma.pgoff -= grown;
        self.mm_mut(mm).vmas.insert(new_start.0, next);
        Some(next)
    }
}

/// Whose `min_flt`/`maj_flt` a fault counts in (`mm_account_fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultAcct {
    /// The current task's: a user access, or a GUP for the current task's own memory.
    Current,
    /// A GUP for `access_remote_vm` (`/proc/PID/mem`): counted on the current task from v5.9,
    /// nowhere before (`era::remote_gup_faults_counted`).
    Remote,
    /// Not a counted fault at all, neither `pgfault` nor any task's `min_flt`/`maj_flt`: GUP's
    /// fault of a hugetlb VMA before v6.6, which `follow_hugetlb_page` took by calling
    /// `hugetlb_fault` itself, outside `handle_mm_fault` (`era::gup_hugetlb_faults_counted`).
    Uncounted,
}

/// `mm_account_fault` (`mm/memory.c`, v5.9, bce617edecad; before it the same rule in x86's
/// `do_user_addr_fault` and GUP's `faultin_page`): a fault that completed counts once, major when
/// it read from storage or swap, in the current task's `maj_flt`, else in `min_flt`. A failed
/// fault (SIGSEGV, SIGBUS, OOM) counts nowhere, nor does a kernel daemon's (khugepaged's
/// swap-in) in any process. A fault that returned `VM_FAULT_RETRY` (a userfault) counts
/// nowhere, and its retry (`FAULT_FLAG_TRIED`) counts major from v5.9
/// (`era::retried_fault_counts_major`); before, the last pass counted as it went.
fn mm_account_fault(cx: &Cx, outcome: FaultOutcome, acct: FaultAcct) {
    let Some(pid) = cx.current_process() else { return };
    let tried = cx.uffd_flag(UffdFlag::Tried)
        && crate::era::retried_fault_counts_major(cx.kernel().version);
    let counted = match acct {
        FaultAcct::Current => true,
        FaultAcct::Remote => crate::era::remote_gup_faults_counted(cx.kernel().version),
        FaultAcct::Uncounted => false,
    };
    if !counted {
        return;
    }
    let mut st = cx.st();
    let p = &mut st.procs[pid];
    match outcome {
        FaultOutcome::Retry(_) => {}
        FaultOutcome::Major => p.maj_flt += 1,
        FaultOutcome::Minor if tried => p.maj_flt += 1,
        FaultOutcome::Minor => p.min_flt += 1,
    }
}

/// `handle_mm_fault`: resolves a fault at `addr` of `vma` and accounts it to the task `acct`
/// names; the caller holds `mmap_lock`.
pub(crate) async fn handle_mm_fault(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    kind: FaultKind,
    acct: FaultAcct,
) -> Result<FaultOutcome, VmFault> {
    let outcome = resolve_fault(cx, mm, vma, addr, kind, acct).await?;
    mm_account_fault(cx, outcome, acct);
    cx.st().mlock_after_fault(vma, addr);
    Ok(outcome)
}

/// `__handle_mm_fault` with the `pgfault` event (none for a fault `acct` leaves uncounted) and
/// the multi-gen LRU's fault scope.
async fn resolve_fault(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    kind: FaultKind,
    acct: FaultAcct,
) -> Result<FaultOutcome, VmFault> {
    if acct != FaultAcct::Uncounted {
        cx.st().vmstat.inc(VmStat::Pgfault);
    }
    // `lru_gen_enter_fault`: the multi-gen LRU places folios this fault adds by recency.
    let recency = {
        let st = cx.st();
        st.vma_has_recency(vma, st.lru.noreuse, crate::era::MGLRU_IGNORES_RAND_READ)
    };
    let _lru = cx.lru_fault_scope(recency);
    let vm_ops = cx.st().vma(vma).vm_ops;
    vm_ops.handle_fault(cx, (mm, vma), addr, kind).await
}

/// `__handle_mm_fault`: one walk to the PMD table, the PMD level when the entry there asks for
/// it, then the PTE level below the same PMD.
pub(crate) async fn handle_walked_fault(
    cx: &Cx,
    (mm, vma): (MmId, VmaId),
    ops: WalkOps,
    addr: VirtAddr,
    kind: FaultKind,
) -> Result<FaultOutcome, VmFault> {
    let mut vmf = Vmf::walk(cx, (mm, vma), ops, addr, kind).await?;
    if ops.asks_pmd_level(&cx.st(), vma, vmf.orig_pmd)
        && let Some(done) = ops.huge_fault(&vmf).await?
    {
        return Ok(done);
    }
    handle_pte_fault(&mut vmf).await
}

/// `handle_pte_fault`: walks to the PTE table and dispatches on the entry found there.
async fn handle_pte_fault(vmf: &mut Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let Some(table) = pte_alloc_below(cx, vmf.mm, vmf.pmd, vmf.address).await? else {
        // A huge PMD appeared meanwhile: the access retries (`handle_pte_fault` returns 0).
        return Ok(FaultOutcome::Minor);
    };
    let idx = Level::Pte.index(vmf.address);
    vmf.pte_table = Some(table);
    vmf.orig_pte = cx.st().pt.pte(table, idx);
    if vmf.orig_pte.is_none() {
        // `do_pte_missing`.
        return vmf.vm_ops.fault(vmf).await;
    }
    if vmf.orig_pte.is_guard() {
        // `do_swap_page` -> `handle_pte_marker`: a guard region's page is always fatal (v6.13).
        return Err(VmFault::SigSegv);
    }
    if vmf.orig_pte.is_swap() {
        return do_swap_page(vmf).await;
    }
    let ptl = cx.st().pt.ptl(table);
    let guard = ptl.lock(cx).await;
    let cur = cx.st().pt.pte(table, idx);
    if cur != vmf.orig_pte {
        return Ok(FaultOutcome::Minor);
    }
    match vmf.kind {
        FaultKind::Write if !cur.write() => return do_wp_page(vmf, guard).await,
        FaultKind::Unshare => return do_wp_page(vmf, guard).await,
        _ => {}
    }
    // Spurious fault (another CPU fixed it up) or an access bit to set.
    let bits =
        if vmf.kind.write() { Pte::ACCESSED | Pte::DIRTY | Pte::SOFT_DIRTY } else { Pte::ACCESSED };
    cx.st().pt.set_pte(table, idx, cur.with(bits));
    Ok(FaultOutcome::Minor)
}

/// `do_anonymous_page`: the no-page fault of anonymous memory (`VmOps::Anonymous`).
pub(crate) async fn do_anonymous_page(vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (table, idx) = (vmf.table(), vmf.pte_index());
    let ptl = cx.st().pt.ptl(table);
    let flags = cx.st().vma(vmf.vma).flags;
    if !vmf.kind.write() {
        let _g = ptl.lock(cx).await;
        cx.charge(Cost::PteInstall).await;
        let mut st = cx.st();
        if st.pt.pte(table, idx).is_none() {
            // Deliver the fault to the userfaultfd, checked under the PTE lock.
            if st.userfaultfd_missing(vmf.vma) {
                drop(st);
                let why = (false, UffdReason::Missing);
                return handle_userfault(cx, vmf.vma, vmf.address, why).map(FaultOutcome::Retry);
            }
            let zero = Pte::new(st.zero_pfn, pte_bits(flags, false, false) | Pte::SPECIAL);
            st.pt.set_pte(table, idx, zero);
        }
        return Ok(FaultOutcome::Minor);
    }
    // The kernel allocates the page first and asks under the PTE lock (then frees it); the
    // model asks before allocating.
    if cx.st().userfaultfd_missing(vmf.vma) {
        let why = (true, UffdReason::Missing);
        return handle_userfault(cx, vmf.vma, vmf.address, why).map(FaultOutcome::Retry);
    }
    anon_vma_prepare(cx, vmf.mm, vmf.vma).await;
    let folio = alloc_anon_folio(vmf).await?;
    let order = cx.st().folios.order(folio);
    cx.charge_n(Cost::ZeroPage4k, order.pages()).await;
    // Writable and dirty only with VM_WRITE: GUP's forced COW break (v5.8) write-faults
    // read-only private VMAs, and gets a clean read-only page that its retry write-faults again.
    if install_new_anon(vmf, folio, flags.has(VmFlags::WRITE)).await {
        cx.st().count_mthp_stat(order, MthpStat::AnonFaultAlloc);
    }
    Ok(FaultOutcome::Minor)
}

/// `alloc_anon_folio` (v6.8+, `era::has_mthp`): the largest enabled anonymous order below the
/// PMD's whose aligned range lies in the VMA and has every PTE empty, tried from the highest
/// down with the THP gfp mask (`defrag`); each order that fails counts `anon_fault_fallback`.
/// A failed memory cgroup charge falls back too from v6.9 (`anon_fault_fallback_charge`); in
/// v6.8 it is an OOM. Without such an order, an order-0 page.
async fn alloc_anon_folio(vmf: &Vmf<'_>) -> Result<Pfn, VmFault> {
    let cx = vmf.cx;
    let k = cx.kernel().version;
    let (mut orders, may_reclaim) = {
        let st = cx.st();
        // `userfaultfd_armed`: no large folio in a registered VMA (a write-protect one here).
        let armed = st.vma(vmf.vma).uffd.is_some();
        let orders =
            if armed { 0 } else { vmf.vm_ops.anon_fault_orders(&st, vmf.vma, vmf.address) };
        (orders, st.thp.settings.fault_may_reclaim(st.vma(vmf.vma).flags))
    };
    while let Some(order) = highest_order(orders) {
        let start = vmf.address.align_down(Bytes(order.pages() << 12));
        if pte_range_none(&cx.st(), vmf.table(), start, order.pages()) {
            break;
        }
        orders &= !(1 << order.0);
    }
    while let Some(order) = highest_order(orders) {
        match alloc_thp_folio(cx, order, may_reclaim).await {
            Ok(folio) => return Ok(folio),
            Err(why) => {
                let mut st = cx.st();
                st.count_mthp_stat(order, MthpStat::AnonFaultFallback);
                if why == AllocFailure::Charge {
                    if !crate::era::mthp_charge_falls_back(k) {
                        return Err(VmFault::Oom);
                    }
                    st.count_mthp_stat(order, MthpStat::AnonFaultFallbackCharge);
                }
            }
        }
        orders &= !(1 << order.0);
    }
    fault_alloc(cx).await
}

/// The highest order in a mask of orders (`highest_order`).
fn highest_order(orders: u16) -> Option<Order> {
    (orders != 0).then(|| Order(15 - orders.leading_zeros() as u8))
}

/// `do_fault`: the no-page fault of a page-cache mapping (`VmOps::PageCache`): `do_read_fault`
/// (fault-around, then `filemap_fault`), `do_cow_fault` or `do_shared_fault`.
pub(crate) async fn do_fault(vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (inode, shared, readaround) = {
        let st = cx.st();
        let v = st.vma(vmf.vma);
        let file = st.file(v.file.expect("file VMA"));
        let ra = if v.flags.has(VmFlags::RAND_READ) { 1 } else { file.ra.ra_pages.max(1) };
        (file.inode, v.is_shared(), ra)
    };
    if vmf.kind == FaultKind::Read {
        // `uffd_disable_fault_around`: a minor-registered VMA maps nothing around (v5.14), and
        // `UFFDIO_CONTINUE`'s own fault maps its one page.
        let alone = cx.st().userfaultfd_minor(vmf.vma) || cx.uffd_flag(UffdFlag::Fill);
        if !alone && do_fault_around(vmf).await {
            return Ok(FaultOutcome::Minor);
        }
        if let Some(userfault) = shmem_userfault(vmf, inode) {
            return userfault;
        }
        let fp = filemap_fault(cx, inode, vmf.pgoff, readaround).await?;
        let outcome = finish_fault(vmf, fp).await;
        folio_unlock(cx, fp.head);
        return outcome;
    }
    if let Some(userfault) = shmem_userfault(vmf, inode) {
        return userfault;
    }
    if !shared {
        return do_cow_fault(vmf, inode, readaround).await;
    }
    let fp = filemap_fault(cx, inode, vmf.pgoff, readaround).await?;
    if vmf.kind.write() {
        cx.st().folio_mark_dirty(fp.head);
    }
    let outcome = finish_fault(vmf, fp).await;
    folio_unlock(cx, fp.head);
    outcome
}

/// The userfaultfd tests of `shmem_get_folio_gfp` (a registered page-cache VMA maps shmem:
/// registration refuses other files), unless the fault is a fill's own (`UffdFlag::Fill`): a
/// page inside the file, neither cached nor swapped, goes to the VMA's userfaultfd as missing;
/// a cached or swapped one as minor in a minor-registered VMA.
fn shmem_userfault(vmf: &Vmf<'_>, inode: InodeId) -> Option<Result<FaultOutcome, VmFault>> {
    let cx = vmf.cx;
    let reason = {
        let st = cx.st();
        let i = &st.inodes[inode];
        let present = st.page_cache_get(inode, vmf.pgoff).is_some()
            || i.mapping.swapped.contains_key(&vmf.pgoff);
        let armed = !cx.uffd_flag(UffdFlag::Fill) && vmf.pgoff < i.size_pages();
        match (present, armed) {
            (false, true) if st.userfaultfd_missing(vmf.vma) => Some(UffdReason::Missing),
            (true, true) if st.userfaultfd_minor(vmf.vma) => Some(UffdReason::Minor),
            _ => None,
        }
    }?;
    let why = (vmf.kind.write(), reason);
    Some(handle_userfault(cx, vmf.vma, vmf.address, why).map(FaultOutcome::Retry))
}

/// `do_fault_around`: the window of `fault_around_bytes` handed to the operations' `map_pages`.
/// Returns whether the faulting address got mapped.
///
/// The window (mm/memory.c, the same rule from v3.15's 8c6e50b0290c through v6.4's rework into
/// `fault_around_pages`, 53d36a56d8c4, to v6.18): it starts at the faulting address aligned down
/// to the window size, or at the VMA's start when that is higher, and spans the window size from
/// that start, cut at the VMA's end and at the end of the PTE table. A mapping that starts inside
/// an aligned window thus gets a whole window from its first page, not the rest of the aligned
/// one. The kernel keeps the tunable a power of two (`fault_around_bytes_set` rounds down).
async fn do_fault_around(vmf: &Vmf<'_>) -> bool {
    let pages = vmf.cx.kernel().tunables.fault_around_pages;
    if pages <= 1 {
        return false;
    }
    let (start, end) = {
        let st = vmf.cx.st();
        let v = st.vma(vmf.vma);
        let bytes = Bytes((1u64 << pages.ilog2()) << 12);
        let pmd_start = vmf.address.align_down(Bytes::PMD);
        let start = vmf.address.align_down(bytes).max(v.start).max(pmd_start);
        let end = (start + bytes).min(v.end).min(pmd_start + Bytes::PMD);
        (start, end)
    };
    vmf.vm_ops.map_pages(vmf, start, end).await
}

/// `do_cow_fault`: a write (or unshare) to a private file mapping with no PTE: copies the file
/// page into a new anonymous page.
async fn do_cow_fault(
    vmf: &Vmf<'_>,
    inode: InodeId,
    readaround: u64,
) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    anon_vma_prepare(cx, vmf.mm, vmf.vma).await;
    let new = fault_alloc(cx).await?;
    let fp = match filemap_fault(cx, inode, vmf.pgoff, readaround).await {
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
    install_new_anon(vmf, new, vmf.kind.write()).await;
    Ok(outcome_of(fp.major))
}

/// Whether a write fault in `mm` may reuse the anonymous page (the era's rule; a large folio's
/// from v6.15 under `anon_exclusive`, `cow::large_anon_reuse`).
fn can_reuse(cx: &Cx, st: &mut KState, mm: MmId, (head, page): (Pfn, Pfn)) -> bool {
    let rule = cx.kernel().switches.cow_reuse;
    if st.folios.large(head).is_some()
        && rule == crate::era::CowReuse::AnonExclusive
        && !st.folios.test(page, pg::ANON_EXCLUSIVE)
        && crate::era::reuses_large_anon_folios(cx.kernel().version)
    {
        return cow::large_anon_reuse(st, mm, head, page);
    }
    cow::can_reuse_anon(
        st,
        rule,
        crate::era::page_count_reuse_drops_swapcache(cx.kernel().version),
        head,
        page,
    )
}

/// `do_swap_page`: a PTE holding a swap entry. Finds the page in the swap cache or reads it from
/// the device, maps it, and — for a write — reuses it in place when the era allows, making the
/// PTE writable; otherwise maps it read-only and a later write takes the write-protect path.
async fn do_swap_page(vmf: &mut Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (_, slot) = vmf.orig_pte.swap_entry();
    let Some((head, major)) = swapin(vmf, slot).await? else {
        return Ok(FaultOutcome::Minor);
    };
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    if cx.st().folios.large(head).is_some() {
        crate::swap::split_swapcache_thp(cx, head).await;
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
        return Ok(outcome_of(major));
    }
    let table = vmf.table();
    let ptl = cx.st().pt.ptl(table);
    let g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let mapped = {
        let mut st = cx.st();
        let raced = st.pt.pte(table, vmf.pte_index()) != vmf.orig_pte
            || st.swap.slot_of(head) != Some(slot);
        (!raced).then(|| map_swap_pte(&mut st, vmf, head, slot))
    };
    let Some(pte) = mapped else {
        drop(g);
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
        return Ok(outcome_of(major));
    };
    folio_unlock(cx, head);
    vmf.orig_pte = pte;
    if vmf.kind.write() && !pte.write() {
        // Not reusable: the write takes the write-protect path at once, as the kernel's
        // do_swap_page calls do_wp_page with the PTE lock still held; a write-protected page
        // goes to the userfaultfd handler from there.
        if let retry @ FaultOutcome::Retry(_) = do_wp_page(vmf, g).await? {
            return Ok(retry);
        }
    }
    Ok(outcome_of(major))
}

/// The swap cache's folio for `slot`, or a new one read from the device (`swapin_readahead`
/// without the readahead), and whether it was read. `None` when another fault swapped it in or
/// changed the PTE meanwhile: the access retries.
async fn swapin(vmf: &Vmf<'_>, slot: u64) -> Result<Option<(Pfn, bool)>, VmFault> {
    let cx = vmf.cx;
    let cached = cx.st().swap.cached(slot);
    if let Some(h) = cached {
        return Ok(Some((h, false)));
    }
    let new = fault_alloc(cx).await?;
    let raced = {
        let mut st = cx.st();
        if st.swap.cached(slot).is_some() || st.pt.pte(vmf.table(), vmf.pte_index()) != vmf.orig_pte
        {
            st.put_folio_extra(new);
            true
        } else {
            st.swapin_new(slot, new, cx.in_lru_fault());
            st.put_folio_extra(new);
            false
        }
    };
    if raced {
        return Ok(None);
    }
    crate::page_io::swap_read_folio(cx, new).await;
    {
        let mut st = cx.st();
        let memcg = st.folio_memcg(new);
        st.count_event(memcg, VmStat::Pgmajfault, 1);
    }
    folio_unlock(cx, new);
    Ok(Some((new, true)))
}

/// Under the PTE lock, maps the swapped-in folio `head` in place of the swap entry the fault
/// saw (the fault's reference becomes the mapping's), writable for a write when the era's rule
/// lets it reuse the page. A folio mapped for the first time that is not exclusive to this VMA
/// goes to the root anon_vma (`page_add_anon_rmap` without `RMAP_EXCLUSIVE`). Returns the new
/// PTE.
fn map_swap_pte(st: &mut KState, vmf: &Vmf<'_>, head: Pfn, slot: u64) -> Pte {
    let orig = vmf.orig_pte;
    st.folios.extra_to_mapping(head);
    let first = !st.folios.is_anon(head);
    if first {
        st.rmap_add_new_anon(head, vmf.vma, vmf.address);
    } else {
        st.rmap_add_pte(head);
    }
    st.folios.clear_flag(head, pg::ANON_EXCLUSIVE);
    st.mm_mut(vmf.mm).sub_rss(MmCounter::SwapEnts, 1);
    st.mm_mut(vmf.mm).add_rss(MmCounter::AnonPages, 1);
    st.swap_free(slot);
    let (exclusive, writable) = swapin_exclusive(st, vmf, head);
    if first && !exclusive {
        st.rmap_set_anon_root(head, vmf.vma);
    }
    let flags = st.vma(vmf.vma).flags;
    let soft_dirty = if orig.soft_dirty() { Pte::SOFT_DIRTY } else { 0 };
    // A uffd-wp swap entry maps read-only with the bit (`pte_mkuffd_wp`), and the write goes
    // on to `do_wp_page`, which sends it to the handler.
    let writable = writable && !orig.uffd_wp();
    let pte = Pte::new(head, pte_bits(flags, writable, writable))
        .with(soft_dirty)
        .with_uffd_wp(orig.uffd_wp());
    st.pt.set_pte(vmf.table(), vmf.pte_index(), pte);
    pte
}

/// Whether the swapped-in `head` is exclusive to the faulting VMA (do_swap_page's
/// `RMAP_EXCLUSIVE`), and whether its PTE may be writable, by era.
fn swapin_exclusive(st: &mut KState, vmf: &Vmf<'_>, head: Pfn) -> (bool, bool) {
    let (orig, write) = (vmf.orig_pte, vmf.kind.write());
    if vmf.cx.kernel().switches.cow_reuse.tracks_anon_exclusive() {
        // `should_try_to_free_swap`, then exclusive if the swap PTE said so or nobody else
        // holds the page.
        if st.swap.is_full() || (write && st.folios.refcount(head) == 2) {
            st.folio_free_swap(head);
        }
        let exclusive = orig.swap_exclusive() || st.folios.refcount(head) == 1;
        if exclusive {
            st.folios.set(head, pg::ANON_EXCLUSIVE);
        }
        (exclusive, exclusive && write)
    } else {
        if st.swap.is_full() {
            st.folio_free_swap(head);
        }
        // Up to v5.17 do_swap_page reused by `reuse_swap_page` in every era, and only a reused
        // page was added exclusively (`do_page_add_anon_rmap`'s `exclusive`).
        let reuse = write && cow::reuse_swap_page(st, head, head);
        (reuse, reuse)
    }
}

/// `do_wp_page`: a write to a present, read-only PTE (`vmf.orig_pte`), or an unshare request.
/// Entered with the PTE lock held.
async fn do_wp_page(vmf: &Vmf<'_>, ptl: LockGuard<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (table, idx, orig) = (vmf.table(), vmf.pte_index(), vmf.orig_pte);
    let (shared, page, uffd_wp) = {
        let st = cx.st();
        debug_assert_eq!(st.pt.pte(table, idx), orig, "the PTE lock keeps what the fault saw");
        let uffd_wp = st.userfaultfd_wp(vmf.vma) && orig.uffd_wp();
        (st.vma(vmf.vma).is_shared(), vm_normal_page(orig), uffd_wp)
    };
    // `userfaultfd_pte_wp`: a write to a write-protected page goes to the handler before any
    // reuse or copy (`userfaultfd/wp.rs`).
    if uffd_wp && !vmf.unshare() {
        drop(ptl);
        let why = (true, UffdReason::Wp);
        return handle_userfault(cx, vmf.vma, vmf.address, why).map(FaultOutcome::Retry);
    }
    if shared {
        if vmf.unshare() {
            return Ok(FaultOutcome::Minor);
        }
        drop(ptl);
        return vmf.vm_ops.page_mkwrite(vmf).await;
    }
    if let Some(page) = page {
        let mut st = cx.st();
        let head = st.folios.head(page);
        let reuse = if st.folios.is_ksm(head) {
            crate::ksm::reuse_ksm_page(&mut st, cx.kernel(), head, vmf.vma, vmf.address)
        } else {
            st.folios.is_anon(head) && can_reuse(cx, &mut st, vmf.mm, (head, page))
        };
        if reuse {
            // `wp_page_reuse`: an unshare leaves the PTE read-only.
            if !vmf.unshare() {
                st.vmstat.inc(VmStat::Pgreuse);
                let mkwrite = maybe_mkwrite(st.vma(vmf.vma).flags);
                st.pt.set_pte(
                    table,
                    idx,
                    orig.with(mkwrite | Pte::DIRTY | Pte::SOFT_DIRTY | Pte::ACCESSED),
                );
            }
            st.rmap_move_anon(head, vmf.vma);
            return Ok(FaultOutcome::Minor);
        }
    }
    wp_page_copy(vmf, ptl).await
}

/// `wp_page_shared`: the first write through a write-notify shared mapping of the page cache
/// (its `page_mkwrite`) dirties the page.
pub(crate) async fn wp_page_shared(vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (table, idx, orig) = (vmf.table(), vmf.pte_index(), vmf.orig_pte);
    let page = vm_normal_page(orig).expect("shared mappings map normal pages");
    let head = cx.st().folios.head(page);
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    cx.st().folio_mark_dirty(head);
    let ptl = cx.st().pt.ptl(table);
    let g = ptl.lock(cx).await;
    {
        let mut st = cx.st();
        if st.pt.pte(table, idx) == orig {
            debug_assert!(st.vma(vmf.vma).is_shared());
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
/// a device block: a copy read from the device). An unshare maps the copy read-only.
async fn wp_page_copy(vmf: &Vmf<'_>, ptl: LockGuard<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (table, idx, orig) = (vmf.table(), vmf.pte_index(), vmf.orig_pte);
    let old = vm_normal_page(orig);
    let pmem = (old.is_none() && cx.st().is_pmem_pfn(orig.pfn())).then(|| orig.pfn());
    let old_head = old.map(|p| {
        let mut st = cx.st();
        let h = st.folios.head(p);
        st.folios.get_extra(h);
        h
    });
    drop(ptl);
    anon_vma_prepare(cx, vmf.mm, vmf.vma).await;
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
        let replaced = st.pt.pte(table, idx) == orig;
        if replaced {
            if let (Some(p), Some(h)) = (old, old_head) {
                unmap_old_page(&mut st, vmf.mm, p, h);
            }
            st.ksm_might_unmap_zero_page(vmf.mm, orig);
            let in_lru_fault = cx.in_lru_fault();
            map_new_anon(&mut st, vmf.vma, vmf.address, table, new, !vmf.unshare(), in_lru_fault);
        } else {
            st.put_folio_extra(new);
        }
        replaced
    };
    if replaced {
        flush_tlb_page(cx, vmf.mm, vmf.address).await;
    }
    drop(g);
    if let Some(h) = old_head {
        release_old_page(cx, h, replaced);
    }
    Ok(FaultOutcome::Minor)
}

/// The old page's side of `wp_page_copy`'s PTE replacement: counted, taken out of the rmap and
/// the RSS; the PTE's reference is kept until the TLB flush.
fn unmap_old_page(st: &mut KState, mm: MmId, page: Pfn, head: Pfn) {
    st.events.inc(MmEvent::WpPageCopy);
    if st.folios.test(head, pg::SWAPCACHE) {
        st.events.inc(MmEvent::WpCopySwapcache);
    }
    st.rmap_remove_pte(page);
    st.folios.mapping_to_extra(head);
    let counter = mm_counter(&st.folios, head);
    st.mm_mut(mm).sub_rss(counter, 1);
}

/// The end of `wp_page_copy`: drops the old page's references (the replaced PTE's, gathered
/// until the flush, and the fault's), freeing an idle swap-cache copy first where the era does.
fn release_old_page(cx: &Cx, head: Pfn, replaced: bool) {
    let mut st = cx.st();
    if replaced {
        st.put_folio_extra(head); // the old PTE's reference, gathered until the flush
    }
    let rule = cx.kernel().switches.cow_reuse;
    if cow::frees_idle_swapcache_after_copy(
        rule,
        crate::era::frees_idle_swapcache_after_cow(cx.kernel().version),
    ) && st.folios.test(head, pg::SWAPCACHE)
        && st.folios.folio_mapcount(head) == 0
        && crate::folio::folio_trylock(&mut st.folios, head)
    {
        st.folio_free_swap(head);
        st.folios.clear_flag(head, pg::LOCKED);
    }
    st.put_folio_extra(head);
}
