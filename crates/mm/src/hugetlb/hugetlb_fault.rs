//! The hugetlb fault (`mm/hugetlb.c` `hugetlb_fault`, `hugetlb_no_page`, `hugetlb_wp`,
//! `hugetlb_fault_mutex_hash`, `huge_pte_alloc`, `huge_pte_lockptr`, `make_huge_pte`,
//! `unmap_ref_private`; Linux v4.0-v6.19 by the `hugetlb_sync` switch, `revert` before v5.7;
//! from v6.6 the vma lock the fault takes for read exists for a private mapping that owns its
//! reservations too, `era::hugetlb_private_vma_lock`; the fault runs under `mmap_lock` in every
//! era, also from v6.9 when the kernel's runs under the per-VMA lock, 7c43a553792a, which the
//! model has for no fault; the eras in [`crate::hugetlb`]).
//!
//! `handle_mm_fault` sends a hugetlb VMA here (`is_vm_hugetlb_page`): the VMA's operations
//! answer at the PMD level (`vm_ops.rs`). The locks, by scheme (B.1-B.3 of the reference):
//!
//! - `i_mmap_rwsem` (v5.7-v6.0, c0d0381ade79 and 87bf91d39bb5): the file's `i_mmap_rwsem` for
//!   read across the whole fault, then the fault mutex; truncation changes `i_size` under
//!   `i_mmap_rwsem` for write, so one early `i_size` check suffices.
//! - `revert` (the state after the seed's patches 1-2, 188a39725ad7 and 3a47c54f09c4): the
//!   fault mutex only; `i_mmap_rwsem` for read only inside `huge_pmd_share`; `hugetlb_no_page`
//!   checks `i_size` before allocating and again under the page-table lock, backing out past it
//!   (the page it added to the page cache stays there).
//! - `vma_lock` (v6.1, 40549ba8f8e0 and the series' patch 9): the fault mutex, then the VMA's
//!   hugetlb lock for read across the fault; `i_mmap_rwsem` only inside `huge_pmd_share`; one
//!   early `i_size` check (truncation must take the vma lock for write to unmap).
//!
//! Then the folio lock and the page-table lock: `mm->page_table_lock` for a 1 GiB page, the PMD
//! table's split lock for a 2 MiB one (`huge_pte_lockptr`). The fault mutex table has
//! `roundup_pow_of_two(8 * CPUs)` entries (`hugetlb_init`), hashed by file and index.
//!
//! A private mapping's pages are anonymous: a missing page is allocated (or the page cache's is
//! mapped read-only), and a write copies unless the page is mapped once (`hugetlb_wp`). When
//! the owner of the reservations cannot get a page for its copy, it unmaps the page from the
//! other private mappings (a forked child), which get SIGBUS on their next fault
//! (`HPAGE_RESV_UNMAPPED`), and keeps the page; the fault mutex and the scheme's lock are
//! dropped around that unmap and retaken in order.
//!
//! The checker's view: a fault that finds, when it is about to write the entry, that the table
//! it looked up is no longer where its mm's page tables lead (unshared or freed under it, the
//! race of B.5) records the violation (B-INV4) instead of writing into another process's or a
//! freed table, which is what the kernel would do.
//!
//! Time: beyond the generic costs, a fault that maps a folio charges `hugetlb_fault_folio`
//! (measured on epyc-vm as what a map-write-unmap loop over cached pages spends beyond them) in
//! one piece under the page-table lock; the kernel spreads that work over the fault's locks and
//! the later unmap, so the fault mutex is held for longer here than it is there.
//!
//! A missing page of a VMA a userfaultfd registered goes to its handler (`missing_userfault`).
//!
//! Approximations: no migration or poison entries; the page is zeroed as one
//! charged span (`clear_huge_page` reschedules between subpages); the fault mutex hash is our
//! own mix of the inode and index (the kernel's is `jhash2` of the mapping and index).

use crate::era::HugetlbSync;
use crate::errno::VmFault;
use crate::hugetlb::pmd_share::huge_pte_alloc;
use crate::kernel::{Cx, KState, UffdFlag};
use crate::memory::{FaultKind, FaultOutcome, anon_vma_prepare, pte_bits};
use crate::pgtable::{Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::hugetlb::{HugeSize, Owner};
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::userfaultfd::UffdReason;
use crate::userfaultfd::handle_userfault;
use crate::vma::VmFlags;
use engine::{LockGuard, SpinLock};
use simcore::{Bytes, Pfn, VirtAddr};

/// One hugetlb fault: what `hugetlb_fault` computes on entry.
pub(crate) struct HugeVmf<'a> {
    pub cx: &'a Cx,
    pub mm: MmId,
    pub vma: VmaId,
    pub inode: InodeId,
    pub size: HugeSize,
    /// The huge-page-aligned faulting address.
    pub haddr: VirtAddr,
    /// The huge-page index in the file.
    pub idx: u64,
    pub write: bool,
    /// `FAULT_FLAG_UNSHARE` (v5.19+): GUP's read-only pin of a page that is not exclusive.
    pub unshare: bool,
    pub sync: HugetlbSync,
}

/// The slot of the entry that maps one huge page: a PMD table's (2 MiB) or a PUD table's (1 GiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ptep {
    pub table: PtId,
    pub idx: usize,
}

impl KState {
    /// `huge_pte_offset`: the slot mapping `addr`, if the tables above it exist.
    pub(crate) fn huge_pte_offset(&self, mm: MmId, addr: VirtAddr, size: HugeSize) -> Option<Ptep> {
        let level = size.level();
        let table = self.pt.find_table(self.mm(mm).pgd, addr, level)?;
        Some(Ptep { table, idx: level.index(addr) })
    }

    /// `huge_ptep_get`.
    pub(crate) fn huge_ptep_get(&self, p: Ptep) -> Pte {
        match self.pt.upper(p.table, p.idx) {
            Upper::None => Pte::NONE,
            Upper::Leaf(e) => e,
            Upper::Table(t) => panic!("hugetlb slot {p:?} holds table {t}"),
        }
    }

    pub(crate) fn set_huge_pte(&mut self, p: Ptep, e: Pte) {
        self.pt.set_upper(p.table, p.idx, if e.is_none() { Upper::None } else { Upper::Leaf(e) });
    }

    /// `huge_pte_lockptr`.
    pub(crate) fn huge_pte_lockptr(&self, mm: MmId, size: HugeSize, p: Ptep) -> SpinLock {
        match size {
            HugeSize::Size2M => self.pt.ptl(p.table),
            HugeSize::Size1G => self.mm(mm).page_table_lock,
        }
    }

    /// Whether `p` is still the slot `mm`'s page tables lead to for `addr`; records the first
    /// use of a stale one (B-INV4).
    fn ptep_still_ours(
        &mut self,
        mm: MmId,
        addr: VirtAddr,
        size: HugeSize,
        p: Ptep,
        what: &str,
    ) -> bool {
        if self.huge_pte_offset(mm, addr, size) == Some(p) {
            return true;
        }
        if self.hugetlb.stale_ptep.is_none() {
            self.hugetlb.stale_ptep = Some(format!(
                "{what} at {addr} of mm {mm} uses page table {} after it was unshared or freed",
                p.table
            ));
        }
        false
    }

    /// The PTE a hugetlb page gets (`make_huge_pte`): writable only in a shared writable
    /// mapping, young, and dirty when writable.
    pub(super) fn make_huge_pte(&self, vma: VmaId, page: Pfn, writable: bool) -> Pte {
        let flags = self.vma(vma).flags;
        Pte::new(page, pte_bits(flags, writable, writable) | Pte::PSE)
    }
}

impl<'a> HugeVmf<'a> {
    /// A fault at `address` of the hugetlb VMA `vma`, at the huge page's granularity: its
    /// aligned address and its index in the file in huge pages.
    pub(crate) fn new(
        cx: &'a Cx,
        (mm, vma): (MmId, VmaId),
        address: VirtAddr,
        kind: FaultKind,
    ) -> HugeVmf<'a> {
        let st = cx.st();
        let file = st.vma(vma).file.expect("hugetlb VMAs map hugetlbfs files");
        let inode = st.file(file).inode;
        let size = st.hstate_vma(vma).expect("a hugetlb VMA");
        let haddr = address.align_down(Bytes(size.bytes()));
        HugeVmf {
            cx,
            mm,
            vma,
            inode,
            size,
            haddr,
            idx: st.huge_index(vma, haddr, size),
            write: kind.write(),
            unshare: kind.unshare(),
            sync: st.hugetlb_sync(),
        }
    }

    fn shared(&self) -> bool {
        self.cx.st().vma(self.vma).flags.has(VmFlags::MAYSHARE)
    }

    fn ptl(&self, p: Ptep) -> SpinLock {
        self.cx.st().huge_pte_lockptr(self.mm, self.size, p)
    }
}

/// The scheme's locks a fault holds, outermost first.
pub(crate) struct FaultLocks<'a> {
    i_mmap: Option<LockGuard<'a>>,
    mutex: Option<LockGuard<'a>>,
    vma: Option<LockGuard<'a>>,
}

impl<'a> FaultLocks<'a> {
    /// Takes the scheme's locks in its order.
    async fn take(hv: &HugeVmf<'a>) -> FaultLocks<'a> {
        let cx = hv.cx;
        let (i_mmap, vma_lock) = {
            let st = cx.st();
            let lock = st.hugetlb.vmas.get(&hv.vma).and_then(|v| v.lock);
            (st.inodes[hv.inode].mapping.i_mmap_rwsem, lock)
        };
        let mutex = super::fault_mutex(cx, hv.inode, hv.idx);
        let i_mmap = match hv.sync {
            HugetlbSync::IMmapRwsem => Some(i_mmap.read(cx).await),
            HugetlbSync::Revert | HugetlbSync::VmaLock | HugetlbSync::VmaLockBlocking => None,
        };
        let mutex = Some(mutex.lock(cx).await);
        let vma = match (hv.sync, vma_lock) {
            (sync, Some(l)) if sync.has_vma_lock() => Some(l.read(cx).await),
            _ => None,
        };
        FaultLocks { i_mmap, mutex, vma }
    }

    /// Drops them innermost first (before `unmap_ref_private`, which takes `i_mmap_rwsem` for
    /// write).
    fn drop_all(&mut self) {
        drop(self.vma.take());
        drop(self.mutex.take());
        drop(self.i_mmap.take());
    }
}

/// `hugetlb_fault`: the whole fault of a hugetlb VMA, which `handle_mm_fault` enters before
/// any page-table walk (`VmOps::handle_fault`).
pub(crate) async fn hugetlb_fault(
    cx: &Cx,
    (mm, vma): (MmId, VmaId),
    address: VirtAddr,
    kind: FaultKind,
) -> Result<FaultOutcome, VmFault> {
    let hv = HugeVmf::new(cx, (mm, vma), address, kind);
    cx.st().hinode_mut(hv.inode).busy += 1;
    let done = hugetlb_fault_locked(&hv).await;
    cx.st().hinode_mut(hv.inode).busy -= 1;
    done
}

async fn hugetlb_fault_locked(hv: &HugeVmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = hv.cx;
    let mut locks = FaultLocks::take(hv).await;
    let ptep = huge_pte_alloc(hv).await?;
    let entry = cx.st().huge_ptep_get(ptep);
    if entry.is_none() {
        return hugetlb_no_page(hv, ptep, &mut locks).await;
    }
    let wp = (hv.write || hv.unshare) && !entry.write();
    // A private mapping's write looks up the page cache's page, locked, for `hugetlb_wp`.
    let cached = if wp && !hv.shared() {
        let c = cx.st().hinode(hv.inode).cache.get(&hv.idx).copied();
        if let Some(p) = c {
            huge_folio_lock(cx, p).await;
        }
        c
    } else {
        None
    };
    let ptl = hv.ptl(ptep).lock(cx).await;
    let same = cx.st().huge_ptep_get(ptep) == entry;
    let mut locked_page = None;
    let mut out = Ok(FaultOutcome::Minor);
    if same && cx.st().ptep_still_ours(hv.mm, hv.haddr, hv.size, ptep, "a fault") {
        let page = entry.pfn();
        if wp {
            if Some(page) != cached && !huge_folio_trylock(&mut cx.st(), page) {
                drop(ptl);
                release_cached(cx, cached);
                locks.drop_all();
                wait_huge_folio_unlocked(cx, page).await;
                return Ok(FaultOutcome::Minor);
            }
            locked_page = (Some(page) != cached).then_some(page);
            out = hugetlb_wp(hv, ptep, entry, ptl, cached, &mut locks).await;
        } else {
            let bits = if hv.write { Pte::ACCESSED | Pte::DIRTY } else { Pte::ACCESSED };
            cx.st().set_huge_pte(ptep, entry.with(bits));
            drop(ptl);
        }
    } else {
        drop(ptl);
    }
    if let Some(p) = locked_page {
        huge_folio_unlock(cx, p);
    }
    release_cached(cx, cached);
    out
}

/// Unlocks the page-cache page a private write fault looked up.
fn release_cached(cx: &Cx, cached: Option<Pfn>) {
    if let Some(p) = cached {
        huge_folio_unlock(cx, p);
    }
}

/// What `hugetlb_no_page` maps: the page, whether it is new and whether it went to the page cache.
struct NoPage {
    page: Pfn,
    new: bool,
    cached: bool,
}

/// `hugetlb_no_page`.
async fn hugetlb_no_page<'a>(
    hv: &HugeVmf<'a>,
    ptep: Ptep,
    locks: &mut FaultLocks<'a>,
) -> Result<FaultOutcome, VmFault> {
    let cx = hv.cx;
    if cx.st().hugetlb.vmas.get(&hv.vma).is_some_and(|v| v.unmapped) {
        // The owner of the reservations took this page back (`HPAGE_RESV_UNMAPPED`).
        return Err(VmFault::SigBus);
    }
    if let Some(userfault) = uffd_userfault(hv) {
        return userfault;
    }
    let Some(np) = find_or_alloc(hv).await? else {
        // The page went while we waited for its lock: the access retries.
        return Ok(FaultOutcome::Minor);
    };
    let ptl = hv.ptl(ptep).lock(cx).await;
    let past_eof = hv.sync == HugetlbSync::Revert && hv.idx >= i_size_huge(&cx.st(), hv.inode);
    let ok = !past_eof && {
        let mut st = cx.st();
        st.huge_ptep_get(ptep).is_none()
            && st.ptep_still_ours(hv.mm, hv.haddr, hv.size, ptep, "a fault")
    };
    if !ok {
        drop(ptl);
        backout(hv, &np);
        // Past the end of the file the fault fails (`ret` is still VM_FAULT_SIGBUS); a changed
        // entry lets the access retry.
        return if past_eof { Err(VmFault::SigBus) } else { Ok(FaultOutcome::Minor) };
    }
    let lines = super::folio_lines_write(cx, np.page);
    engine::Cx::charge(cx, cx.cost(Cost::HugetlbFaultFolio) + lines).await;
    cx.charge(Cost::PteInstall).await;
    let shared_writable = {
        let mut st = cx.st();
        let flags = st.vma(hv.vma).flags;
        let writable = flags.has(VmFlags::WRITE) && flags.has(VmFlags::SHARED);
        let pte = st.make_huge_pte(hv.vma, np.page, writable);
        st.set_huge_pte(ptep, pte);
        st.hugetlb.page_mut(np.page).mapcount += 1;
        if np.new {
            st.hugetlb.page_mut(np.page).restore_reserve = false;
        }
        *st.hugetlb.usage.entry(hv.mm).or_default() += hv.size.pages() as i64;
        writable
    };
    let private_write = hv.write && !cx.st().vma(hv.vma).flags.has(VmFlags::SHARED);
    let out = if private_write {
        let entry = cx.st().huge_ptep_get(ptep);
        hugetlb_wp(hv, ptep, entry, ptl, Some(np.page), locks).await
    } else {
        debug_assert!(!hv.write || shared_writable);
        drop(ptl);
        Ok(FaultOutcome::Minor)
    };
    huge_folio_unlock(cx, np.page);
    out
}

/// `hugetlb_no_page`'s userfaultfd tests, unless the fault is a fill's own: a page inside the
/// file and not in its page cache goes to a missing-registered VMA's userfaultfd, one in the
/// page cache to a minor-registered VMA's (v5.13) (`hugetlb_handle_userfault`, at the
/// huge-page aligned address; the fault mutex and the vma lock drop as the fault returns).
fn uffd_userfault(hv: &HugeVmf<'_>) -> Option<Result<FaultOutcome, VmFault>> {
    let cx = hv.cx;
    let reason = {
        let st = cx.st();
        let cached = st.hinode(hv.inode).cache.contains_key(&hv.idx);
        let armed = !cx.uffd_flag(UffdFlag::Fill) && hv.idx < i_size_huge(&st, hv.inode);
        match (cached, armed) {
            (false, true) if st.userfaultfd_missing(hv.vma) => Some(UffdReason::Missing),
            (true, true) if st.userfaultfd_minor(hv.vma) => Some(UffdReason::Minor),
            _ => None,
        }
    }?;
    Some(handle_userfault(cx, hv.vma, hv.haddr, (hv.write, reason)).map(FaultOutcome::Retry))
}

/// The file's size in huge pages.
fn i_size_huge(st: &KState, inode: InodeId) -> u64 {
    st.inodes[inode].size >> st.hinode(inode).size.shift()
}

/// The page `hugetlb_no_page` maps, locked: the page cache's, or a new zeroed one (added to the
/// page cache of a shared mapping).
async fn find_or_alloc(hv: &HugeVmf<'_>) -> Result<Option<NoPage>, VmFault> {
    let cx = hv.cx;
    // v5.7-v6.0 check `i_size` once, first: truncation cannot change it under `i_mmap_rwsem`.
    if hv.sync == HugetlbSync::IMmapRwsem && hv.idx >= i_size_huge(&cx.st(), hv.inode) {
        return Err(VmFault::SigBus);
    }
    cx.charge(Cost::PageCacheLookup).await;
    let cached = cx.st().hinode(hv.inode).cache.get(&hv.idx).copied();
    if let Some(page) = cached {
        huge_folio_lock(cx, page).await;
        // `filemap_lock_folio`: the page may have been removed while we waited.
        if cx.st().hinode(hv.inode).cache.get(&hv.idx) == Some(&page) {
            cx.st().hugetlb.page_mut(page).refs += 1;
            return Ok(Some(NoPage { page, new: false, cached: false }));
        }
        huge_folio_unlock(cx, page);
        return Ok(None);
    }
    if hv.idx >= i_size_huge(&cx.st(), hv.inode) {
        return Err(VmFault::SigBus);
    }
    let shared = hv.shared();
    if !shared {
        anon_vma_prepare(cx, hv.mm, hv.vma).await;
    }
    let page = {
        let mut st = cx.st();
        let c = st.resv_ctx(hv.vma);
        st.alloc_hugetlb_folio(c, hv.inode, hv.idx, false)?
    };
    cx.charge(Cost::PageAlloc).await;
    cx.charge_n(Cost::ZeroPage4k, hv.size.pages()).await;
    {
        let mut st = cx.st();
        st.mem.zero_range(page, hv.size.pages());
        let p = st.hugetlb.page_mut(page);
        p.locked = true;
        if shared {
            p.owner = Owner::Cache { inode: hv.inode, index: hv.idx };
            p.refs += 1;
            st.hinode_mut(hv.inode).cache.insert(hv.idx, page);
        } else {
            p.owner = Owner::Anon;
            p.anon_exclusive = true;
        }
    }
    if shared {
        cx.charge(Cost::PageCacheInsert).await;
    }
    Ok(Some(NoPage { page, new: true, cached: shared }))
}

/// The back-out of `hugetlb_no_page`: a new page that did not go to the page cache gives its
/// reservation back; the page's reference is dropped.
fn backout(hv: &HugeVmf<'_>, np: &NoPage) {
    let cx = hv.cx;
    if np.new && !np.cached {
        cx.st().restore_reserve_on_error(hv.vma, hv.inode, hv.idx, np.page);
    }
    huge_folio_unlock(cx, np.page);
    cx.st().put_huge_folio(np.page, 1);
}

/// `hugetlb_wp`: a write to a read-only entry (`orig`) of a private mapping (a shared mapping's
/// entry is just made writable), or an unshare (v5.19+: a shared mapping's entry is left as it
/// is; a private page mapped once is reused, made exclusive and left read-only; any other is
/// copied into an exclusive page mapped read-only). Entered and left with the page-table lock,
/// which it drops.
async fn hugetlb_wp<'a>(
    hv: &HugeVmf<'a>,
    ptep: Ptep,
    orig: Pte,
    ptl: LockGuard<'a>,
    pagecache: Option<Pfn>,
    locks: &mut FaultLocks<'a>,
) -> Result<FaultOutcome, VmFault> {
    let cx = hv.cx;
    let old = orig.pfn();
    let (shared, sole_anon) = {
        let st = cx.st();
        let p = st.huge_page(old);
        (st.vma(hv.vma).flags.has(VmFlags::MAYSHARE), p.mapcount == 1 && p.owner == Owner::Anon)
    };
    if shared || sole_anon {
        let mut st = cx.st();
        // `page_move_anon_rmap` marks the reused page exclusive.
        st.hugetlb.page_mut(old).anon_exclusive |= sole_anon;
        if !hv.unshare {
            st.set_huge_pte(ptep, orig.with(Pte::RW | Pte::DIRTY | Pte::ACCESSED));
        }
        drop(st);
        drop(ptl);
        return Ok(FaultOutcome::Minor);
    }
    let owner = cx.st().hugetlb.vmas.get(&hv.vma).is_some_and(|v| v.resv.is_some());
    let outside_reserve = owner && Some(old) != pagecache;
    cx.st().hugetlb.page_mut(old).refs += 1;
    drop(ptl);
    let new = {
        let mut st = cx.st();
        let c = st.resv_ctx(hv.vma);
        st.alloc_hugetlb_folio(c, hv.inode, hv.idx, outside_reserve)
    };
    let new = match new {
        Ok(p) => p,
        Err(e) => {
            cx.st().put_huge_folio(old, 1);
            if !outside_reserve {
                return Err(e);
            }
            return owner_takes_page_back(hv, ptep, orig, old, pagecache, locks).await;
        }
    };
    break_cow(hv, ptep, orig, old, new).await
}

/// The copy of `hugetlb_wp`: `new` gets `old`'s contents and replaces it in the entry, unless
/// the entry changed while the page-table lock was dropped.
async fn break_cow(
    hv: &HugeVmf<'_>,
    ptep: Ptep,
    orig: Pte,
    old: Pfn,
    new: Pfn,
) -> Result<FaultOutcome, VmFault> {
    let cx = hv.cx;
    anon_vma_prepare(cx, hv.mm, hv.vma).await;
    cx.charge(Cost::PageAlloc).await;
    cx.charge_n(Cost::CopyPage4k, hv.size.pages()).await;
    cx.st().mem.copy_range(old, new, hv.size.pages());
    let ptl = hv.ptl(ptep).lock(cx).await;
    let same = {
        let mut st = cx.st();
        st.huge_ptep_get(ptep) == orig
            && st.ptep_still_ours(hv.mm, hv.haddr, hv.size, ptep, "a copy-on-write fault")
    };
    let freed = if same {
        cx.charge(Cost::PteInstall).await;
        let mut st = cx.st();
        let p = st.hugetlb.page_mut(new);
        p.restore_reserve = false;
        p.owner = Owner::Anon;
        p.mapcount = 1;
        p.anon_exclusive = true;
        let pte = st.make_huge_pte(hv.vma, new, !hv.unshare);
        st.set_huge_pte(ptep, pte);
        st.hugetlb.page_mut(old).mapcount -= 1;
        // The old page loses the mapping's reference and ours.
        (old, 2)
    } else {
        cx.st().restore_reserve_on_error(hv.vma, hv.inode, hv.idx, new);
        cx.st().put_huge_folio(new, 1);
        (old, 1)
    };
    drop(ptl);
    if same {
        crate::arch::tlbflush::flush_tlb_range(
            cx,
            hv.mm,
            hv.haddr,
            hv.haddr + Bytes(hv.size.bytes()),
        )
        .await;
    }
    cx.st().put_huge_folio(freed.0, freed.1);
    Ok(FaultOutcome::Minor)
}

/// The owner of a private mapping's reservations could not get a page to copy into: it unmaps
/// the page from the other private mappings of the file at that index (`unmap_ref_private`),
/// with its fault locks dropped, then retries (now mapping the page once, it reuses it).
async fn owner_takes_page_back<'a>(
    hv: &HugeVmf<'a>,
    ptep: Ptep,
    orig: Pte,
    old: Pfn,
    pagecache: Option<Pfn>,
    locks: &mut FaultLocks<'a>,
) -> Result<FaultOutcome, VmFault> {
    let cx = hv.cx;
    locks.drop_all();
    super::unmap::unmap_ref_private(cx, hv.vma, hv.inode, hv.idx, old).await;
    *locks = FaultLocks::take(hv).await;
    let ptl = hv.ptl(ptep).lock(cx).await;
    if cx.st().huge_ptep_get(ptep) != orig {
        return Ok(FaultOutcome::Minor);
    }
    Box::pin(hugetlb_wp(hv, ptep, orig, ptl, pagecache, locks)).await
}

/// `folio_trylock` of a huge page.
fn huge_folio_trylock(st: &mut KState, page: Pfn) -> bool {
    let p = st.hugetlb.page_mut(page);
    !std::mem::replace(&mut p.locked, true)
}

/// `folio_lock` of a huge page (the folio lock's hashed wait queues).
pub(crate) async fn huge_folio_lock(cx: &Cx, page: Pfn) {
    cx.preempt_point().await;
    while !huge_folio_trylock(&mut cx.st(), page) {
        cx.kernel().folio_waitqueue(page).wait(cx).await;
    }
}

/// Waits until a huge page is unlocked (`folio_wait_locked`).
async fn wait_huge_folio_unlocked(cx: &Cx, page: Pfn) {
    while cx.st().hugetlb.page(page).is_some_and(|p| p.locked) {
        cx.kernel().folio_waitqueue(page).wait(cx).await;
    }
}

/// `folio_unlock` of a huge page.
pub(crate) fn huge_folio_unlock(cx: &Cx, page: Pfn) {
    let was = std::mem::replace(&mut cx.st().hugetlb.page_mut(page).locked, false);
    assert!(was, "unlocking unlocked huge page {page}");
    cx.kernel().folio_waitqueue(page).wake_up_all(cx);
}
