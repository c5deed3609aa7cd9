//! The library half of `mm/memory.c` and `struct vm_fault` (`include/linux/mm.h`; Linux v6.8):
//! what every fault handler shares, whatever kind of mapping it serves.
//!
//! - [`Vmf`], one fault, as `struct vm_fault` is: the task context, the mm, the VMA and its
//!   operations, the page-aligned address, its page offset and what the fault asks for, set
//!   when `handle_mm_fault` starts; then the PTE table and the entry the fault saw
//!   (`vmf->pte`, `vmf->orig_pte`) once `handle_pte_fault` has walked to them. The table is an
//!   `Option`, as `vmf->pte` is NULL until then: the PMD level (`VmOps::huge_fault`) runs
//!   without one, and a handler at the PTE level takes it with [`Vmf::table`]. Handlers take
//!   `&Vmf`; only `do_swap_page` changes it (`&mut`), to record the PTE it mapped before it
//!   calls `do_wp_page`, as the kernel does.
//! - PTE bits (`vm_get_page_prot` and [`maybe_mkwrite`], [`wants_writenotify`]),
//!   [`vm_normal_page`].
//! - Table allocation (`__pud_alloc`, `__pmd_alloc`, `__pte_alloc`): the page is allocated
//!   before the lock, installed under it (`page_table_lock` for the upper levels, the PMD
//!   table's split lock for a PTE table) unless another task won the race.
//! - New anonymous pages (`__anon_vma_prepare`, the allocation, the install under the PTE lock)
//!   and new file PTEs (`set_pte_range`, `finish_fault`), and the outcome of a fault.
//!
//! Nothing here names a file system or a kind of mapping: per-kind behaviour is reached through
//! the VMA's operations (`vm_ops.rs`), never by testing what backs a VMA.

use crate::errno::VmFault;
use crate::filemap::FaultPage;
use crate::kernel::{Cx, KState};
use crate::mm_struct::{MmCounter, mm_counter};
use crate::page_alloc::alloc_folio;
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::mm_types::WalkOps;
use crate::vma::VmFlags;
use engine::LockGuard;
use simcore::{Bytes, Order, Pfn, VirtAddr};

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
    pub(crate) fn write(self) -> bool {
        self == FaultKind::Write
    }

    /// A GUP unshare fault (`FAULT_FLAG_UNSHARE`).
    pub(crate) fn unshare(self) -> bool {
        self == FaultKind::Unshare
    }
}

/// Whether the fault read from the backing store or swap, or must be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOutcome {
    Minor,
    Major,
    /// `VM_FAULT_RETRY` from `handle_userfault`: the fault posted a message to a userfaultfd;
    /// the caller drops `mmap_lock`, sleeps until a handler resolves it, and retries
    /// (`userfaultfd.rs`).
    Retry(crate::types::userfaultfd::UffdWaiter),
}

/// `VM_FAULT_MAJOR` or not.
pub(crate) fn outcome_of(major: bool) -> FaultOutcome {
    if major { FaultOutcome::Major } else { FaultOutcome::Minor }
}

/// One fault (`struct vm_fault`); see the module note for when each field is known.
pub(crate) struct Vmf<'a> {
    pub cx: &'a Cx,
    pub mm: MmId,
    pub vma: VmaId,
    /// The VMA's operations (`vmf->vma->vm_ops`), read once: they do not change while the
    /// fault holds `mmap_lock`.
    pub vm_ops: WalkOps,
    /// The faulting address, page-aligned (`vmf->address`).
    pub address: VirtAddr,
    /// The page index of `address` in the VMA's file, or its virtual page for anonymous
    /// memory (`vmf->pgoff`, `linear_page_index`).
    pub pgoff: u64,
    pub kind: FaultKind,
    /// The PMD table covering `address` (where `vmf->pmd` points), made by the one walk from
    /// the top that the fault takes, before its PMD level.
    pub pmd: PtId,
    /// The PMD entry the fault saw after that walk (`vmf->orig_pmd`).
    pub orig_pmd: Upper,
    /// The PTE table covering `address` (where `vmf->pte` points), once known.
    pub pte_table: Option<PtId>,
    /// The entry the fault saw (`vmf->orig_pte`); `Pte::NONE` until the PTE level.
    pub orig_pte: Pte,
}

impl<'a> Vmf<'a> {
    /// A fault at `address` of `vma`, as `__handle_mm_fault` fills `struct vm_fault`: the walk
    /// to the PMD table (`pud_alloc`, `pmd_alloc`), populating the levels that are missing.
    pub(crate) async fn walk(
        cx: &'a Cx,
        (mm, vma): (MmId, VmaId),
        vm_ops: WalkOps,
        address: VirtAddr,
        kind: FaultKind,
    ) -> Result<Self, VmFault> {
        let address = address.align_down(Bytes::PAGE);
        let pgoff = cx.st().vma(vma).page_index(address);
        let pmd = pmd_alloc(cx, mm, address).await?;
        let orig_pmd = cx.st().pt.upper(pmd, Level::Pmd.index(address));
        let pte_table = None;
        let orig_pte = Pte::NONE;
        Ok(Vmf { cx, mm, vma, vm_ops, address, pgoff, kind, pmd, orig_pmd, pte_table, orig_pte })
    }

    /// The PTE table of a fault at the PTE level.
    pub(crate) fn table(&self) -> PtId {
        self.pte_table.expect("a PTE-level fault knows its table")
    }

    /// The index of `address` in its PTE table.
    pub(crate) fn pte_index(&self) -> usize {
        Level::Pte.index(self.address)
    }

    /// An unshare request (`FAULT_FLAG_UNSHARE`).
    pub(crate) fn unshare(&self) -> bool {
        self.kind.unshare()
    }
}

/// The PTE bits a mapping of `vma` gets (`vm_get_page_prot` plus the fault's `maybe_mkwrite`).
pub(crate) fn pte_bits(flags: VmFlags, writable: bool, dirty: bool) -> u64 {
    let mut bits = Pte::USER | Pte::ACCESSED;
    if !flags.has(VmFlags::EXEC) {
        bits |= Pte::NX;
    }
    if writable {
        bits |= maybe_mkwrite(flags);
    }
    if dirty {
        bits |= Pte::DIRTY | Pte::SOFT_DIRTY;
    }
    bits
}

/// `maybe_mkwrite`: the write bit a PTE that a write fault installs or reuses gets: none in a
/// VMA without `VM_WRITE`, which only GUP's forced COW break (v5.8, `era::gup_breaks_cow`)
/// write-faults: its copy is mapped dirty but read-only.
pub(crate) fn maybe_mkwrite(flags: VmFlags) -> u64 {
    if flags.has(VmFlags::WRITE) { Pte::RW } else { 0 }
}

/// `vma_wants_writenotify` for the cases modelled: a shared writable mapping whose operations
/// have a `page_mkwrite` is mapped read-only so that the first write is seen (dirty accounting,
/// block allocation).
pub(crate) fn wants_writenotify(st: &KState, vma: VmaId) -> bool {
    let v = st.vma(vma);
    v.is_shared() && v.flags.has(VmFlags::WRITE) && v.vm_ops.has_page_mkwrite(st, vma)
}

/// `vm_normal_page`: the page a PTE maps, or `None` for special mappings (the zero page).
pub(crate) fn vm_normal_page(pte: Pte) -> Option<Pfn> {
    pte.normal_pfn()
}

/// Makes sure the table below `parent`'s entry for `addr` exists (`__pud_alloc`, `__pmd_alloc`,
/// `__pte_alloc`): the page is allocated before the lock, installed under it unless another task
/// won the race. `None` when a huge leaf maps `addr` instead.
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
    st.mm_mut(mm).pgtable_inc(level.below());
    let handle: &engine::Handle = cx;
    let t = st.pt.alloc(level.below(), frame, || handle.spin_lock("ptlock"));
    st.pt.set_upper(parent, idx, Upper::Table(t));
    Ok(Some(t))
}

/// Walks to the PMD table covering `addr`, populating the levels above it (`pud_alloc`,
/// `pmd_alloc`).
pub(crate) async fn pmd_alloc(cx: &Cx, mm: MmId, addr: VirtAddr) -> Result<PtId, VmFault> {
    let pud = pud_alloc(cx, mm, addr).await?;
    pmd_alloc_below(cx, mm, pud, addr).await
}

/// The PMD table below `pud`'s entry for `addr`, made if missing (`pmd_alloc` on a known
/// `pud`); the entry must not be a 1 GiB leaf.
pub(crate) async fn pmd_alloc_below(
    cx: &Cx,
    mm: MmId,
    pud: PtId,
    addr: VirtAddr,
) -> Result<PtId, VmFault> {
    Ok(table_alloc(cx, mm, pud, Level::Pud, addr).await?.expect("no PUD leaves"))
}

/// Walks to the PUD table covering `addr`, populating it if missing (`pud_alloc`): the start
/// of every walk from the top.
pub(crate) async fn pud_alloc(cx: &Cx, mm: MmId, addr: VirtAddr) -> Result<PtId, VmFault> {
    #[cfg(test)]
    tests::WALKS.with(|w| w.set(w.get() + 1));
    let pgd = cx.st().mm(mm).pgd;
    Ok(table_alloc(cx, mm, pgd, Level::Pgd, addr).await?.expect("no PGD leaves"))
}

/// Walks to the PTE table covering `addr`, populating the levels that are missing; `None` when
/// a huge PMD maps `addr`.
pub(crate) async fn pte_alloc(cx: &Cx, mm: MmId, addr: VirtAddr) -> Result<Option<PtId>, VmFault> {
    let pmd_table = pmd_alloc(cx, mm, addr).await?;
    pte_alloc_below(cx, mm, pmd_table, addr).await
}

/// The PTE table below `pmd_table`'s entry for `addr`, made if missing (`pte_alloc` on a
/// known `pmd`); `None` when a huge PMD maps `addr`.
pub(crate) async fn pte_alloc_below(
    cx: &Cx,
    mm: MmId,
    pmd_table: PtId,
    addr: VirtAddr,
) -> Result<Option<PtId>, VmFault> {
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

/// Maps a new exclusive anonymous folio at `addr` (the tail of `do_anonymous_page`,
/// `do_cow_fault`, `wp_page_copy`; a large folio from `addr`, its aligned start, one PTE per
/// page as `set_ptes` writes them), handing the allocation's reference to the mapping and taking
/// one more per further PTE (`folio_ref_add(nr - 1)`); `in_lru_fault` is the mapping task's hint
/// ([`Cx::in_lru_fault`]).
pub(crate) fn map_new_anon(
    st: &mut KState,
    vma: VmaId,
    addr: VirtAddr,
    table: PtId,
    folio: Pfn,
    writable: bool,
    in_lru_fault: bool,
) {
    let (mm, flags) = (st.vma(vma).mm, st.vma(vma).flags);
    let nr = st.folios.order(folio).pages();
    st.folios.extra_to_mapping(folio);
    if nr > 1 {
        st.folios.get(folio, (nr - 1) as u32);
    }
    st.rmap_add_new_anon(folio, vma, addr);
    st.folio_add_lru_new_anon(folio, vma, in_lru_fault);
    st.mm_mut(mm).add_rss(MmCounter::AnonPages, nr);
    let (first, bits) = (Level::Pte.index(addr), pte_bits(flags, writable, writable));
    for i in 0..nr {
        st.pt.set_pte(table, first + i as usize, Pte::new(folio + i, bits));
    }
}

/// The tail of `do_anonymous_page`, `do_cow_fault` and every private copy of a file page: under
/// the PTE lock, maps the new anonymous folio (from the fault's address aligned down to its
/// size) if every PTE it would take is still empty (`pte_range_none`), or frees it (another
/// fault won). Returns whether it was mapped.
pub(crate) async fn install_new_anon(vmf: &Vmf<'_>, folio: Pfn, writable: bool) -> bool {
    let cx = vmf.cx;
    let table = vmf.table();
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    let nr = cx.st().folios.order(folio).pages();
    let start = vmf.address.align_down(Bytes(nr << 12));
    cx.charge(Cost::LruAdd).await;
    cx.charge_n(Cost::PteInstall, nr).await;
    let mut st = cx.st();
    let mapped = pte_range_none(&st, table, start, nr);
    if mapped {
        map_new_anon(&mut st, vmf.vma, start, table, folio, writable, cx.in_lru_fault());
    } else {
        st.put_folio_extra(folio);
    }
    mapped
}

/// `pte_range_none`: whether the `nr` PTEs of `table` from `start`'s are all empty.
pub(crate) fn pte_range_none(st: &KState, table: PtId, start: VirtAddr, nr: u64) -> bool {
    let first = Level::Pte.index(start);
    (first..first + nr as usize).all(|i| st.pt.pte(table, i).is_none())
}

/// `set_pte_range` for one page of the file folio `head`: the rmap and RSS counts of a new
/// file mapping, and its PTE at `addr` of the fault's table. The caller has given the mapping
/// its folio reference.
pub(crate) fn set_pte_range(
    st: &mut KState,
    vmf: &Vmf<'_>,
    addr: VirtAddr,
    head: Pfn,
    page: Pfn,
    bits: u64,
) {
    st.rmap_add_pte(page);
    let counter = mm_counter(&st.folios, head);
    st.mm_mut(vmf.mm).add_rss(counter, 1);
    st.pt.set_pte(vmf.table(), Level::Pte.index(addr), Pte::new(page, bits));
}

/// Whether the fault's PTE table is still the one its PMD points at. From v6.6 khugepaged
/// retracts a file range's PTE table under the PMD and PTE locks without `mmap_lock`
/// (`khugepaged/file.rs`), so a fault that slept on the PTE lock may find the table gone; the
/// kernel's `finish_fault` then fails to map the PTE (`pte_offset_map_lock` sees the PMD
/// changed) and returns `VM_FAULT_NOPAGE`, and the access faults again.
fn pte_table_current(st: &KState, vmf: &Vmf<'_>) -> bool {
    st.pt
        .pmd_slot(st.mm(vmf.mm).pgd, vmf.address)
        .is_some_and(|(t, i)| matches!(st.pt.upper(t, i), Upper::Table(x) if x == vmf.table()))
}

/// `finish_fault` for a page-cache page that the fault's `->fault` returned: maps it (writable
/// only for a write, or in a shared writable mapping that wants no write notification), giving
/// the fault's reference to the mapping.
pub(crate) async fn finish_fault(vmf: &Vmf<'_>, fp: FaultPage) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let write = vmf.kind.write();
    let ptl = cx.st().pt.ptl(vmf.table());
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let mut st = cx.st();
    if !pte_table_current(&st, vmf) || !st.pt.pte(vmf.table(), vmf.pte_index()).is_none() {
        st.put_folio_extra(fp.head);
        return Ok(outcome_of(fp.major));
    }
    let flags = st.vma(vmf.vma).flags;
    let shared_writable = flags.has(VmFlags::SHARED) && flags.has(VmFlags::WRITE);
    let writable = write || (shared_writable && !wants_writenotify(&st, vmf.vma));
    st.folios.extra_to_mapping(fp.head);
    set_pte_range(&mut st, vmf, vmf.address, fp.head, fp.page, pte_bits(flags, writable, write));
    Ok(outcome_of(fp.major))
}

/// `pmd_lock` for installing a huge leaf at the fault's address (`do_set_pmd`,
/// `vmf_insert_pfn_pmd`, the huge zero page), with the install's cost; the caller re-checks the
/// entry under it.
pub(crate) async fn pmd_install_lock<'a>(vmf: &Vmf<'a>, pmd_table: PtId) -> LockGuard<'a> {
    let cx = vmf.cx;
    let ptl = cx.st().pt.ptl(pmd_table);
    let guard = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    guard
}

/// `mm_get_huge_zero_page`: the huge zero page, allocated, zeroed and counted
/// (`thp_zero_page_alloc`) by its first user; `None` when no order-9 block is free.
pub(crate) async fn get_huge_zero_page(cx: &Cx) -> Option<Pfn> {
    if cx.st().huge_zero_pfn.is_none() {
        let pages = Order::PMD.pages();
        cx.charge(Cost::PageAlloc).await;
        cx.charge_n(Cost::PageAllocHighOrderPerPage, pages).await;
        cx.charge_n(Cost::ZeroPage4k, pages).await;
    }
    cx.st().get_huge_zero_page()
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::types::fs::FsType;
    use crate::types::huge_mm::ThpEnabled;
    use crate::types::hugetlb::HugeSize;
    use crate::vmstat::VmStat;
    use crate::{FileSpec, Machine, MachineConfig, MmapArgs, OpenFlags, Profile, map, prot};
    use simcore::Bytes;
    use std::cell::Cell;

    thread_local! {
        /// Walks from the top of the page tables (`pud_alloc` calls) on this test's thread.
        pub(crate) static WALKS: Cell<u64> = const { Cell::new(0) };
    }

    /// One fault of each kind: a 4 MiB mapping of `fs` (anonymous memory for `None`), one
    /// access at its 2 MiB-aligned middle; returns the walks and the faults it took.
    fn walks_of_one_fault(fs: Option<FsType>, thp: bool, write: bool) -> (u64, u64) {
        let mut c = MachineConfig::new(Profile::named("tiny").unwrap(), "v6.8".parse().unwrap());
        c.pmem = Bytes::mib(64);
        c.tunables.nr_hugepages[0] = 4;
        c.tunables.thp.enabled = if thp { ThpEnabled::Always } else { ThpEnabled::Never };
        let mut m = Machine::new(c).unwrap();
        if let Some(fs) = fs {
            m.create_file("/f", &FileSpec { fs, ..FileSpec::zeros(Bytes::mib(4)) }).unwrap();
        }
        let pid = m.new_process("p").unwrap();
        m.spawn_thread(pid, 0, "t", move |t| async move {
            let (len, rw) = (Bytes::mib(4), prot::READ | prot::WRITE);
            let a = match fs {
                None => t.mmap_anon(len, rw).await.unwrap(),
                Some(_) => {
                    let fd = t.open("/f", OpenFlags::RDWR).await.unwrap();
                    let flags = map::SHARED;
                    let args =
                        MmapArgs { addr: None, len, prot: rw, flags, fd: Some(fd), offset: 0 };
                    t.mmap(args).await.unwrap()
                }
            };
            let at = simcore::VirtAddr((a.0 + Bytes::mib(2).as_u64()) & !(Bytes::PMD.as_u64() - 1));
            if write {
                t.write_bytes(at, &[1]).await.unwrap();
            } else {
                t.read_bytes(at, 1).await.unwrap();
            }
        })
        .unwrap();
        WALKS.with(|w| w.set(0));
        m.run_checked().unwrap();
        (WALKS.with(Cell::get), m.vmstat().get(VmStat::Pgfault))
    }

    /// Given a 4 KiB anonymous, page-cache, DAX, THP or hugetlb fault, when it is handled, then
    /// it walks the page tables from the top once (`__handle_mm_fault` fills `vmf->pmd` once and
    /// every level below reads it; hugetlb's fault walks only in `huge_pte_alloc`).
    #[test]
    fn a_fault_walks_the_page_tables_once() {
        let cases = [
            ("4 KiB anonymous", None, false, true),
            ("page cache", Some(FsType::Disk), false, false),
            ("DAX", Some(FsType::Dax), false, true),
            ("anonymous THP", None, true, true),
            ("hugetlb", Some(FsType::Hugetlbfs(HugeSize::Size2M)), false, true),
        ];
        for (name, fs, thp, write) in cases {
            let (walks, faults) = walks_of_one_fault(fs, thp, write);
            assert_eq!(faults, 1, "{name}: one fault");
            assert_eq!(walks, 1, "{name}: walks from the top per fault");
        }
    }
}
