//! hugetlb pages: the per-size pools and their pages (`mm/hugetlb.c` `struct hstate`,
//! `alloc_fresh_hugetlb_folio`, `dequeue_hugetlb_folio_node_exact`, `free_huge_folio`,
//! `set_max_huge_pages`, `alloc_surplus_hugetlb_folio`; Linux v6.1, with the v5.7-v6.0 and
//! "revert" synchronisation of seed `001` selected by the `hugetlb_sync` switch; every kernel
//! from v4.0 to v6.19, as the eras below say).
//!
//! Eras. Up to v5.6 the fault path held only the fault mutex (`huge_pmd_share` takes
//! `i_mmap_rwsem` by itself, for write up to v5.4, `era::huge_pmd_share_i_mmap_write`;
//! truncation takes the fault mutex for every page it removes; the fault re-checks i_size under
//! the page-table lock): the state the seed's patches 1-2 (188a39725ad7, 3a47c54f09c4) returned
//! to, so those kernels run the `revert` scheme. v5.7 brought c0d0381ade79 ("hugetlbfs: use
//! i_mmap_rwsem for more pmd sharing synchronization") and 87bf91d39bb5 (`i_mmap_rwsem`), v6.1
//! the vma-lock series (40549ba8f8e0 and its follow-ups). The later changes that alter what a
//! scenario sees each have an era predicate: PMD unsharing when a split leaves a shared range
//! unaligned (`era::hugetlb_split_unshares_pmds`, v6.2), the vma lock for private mappings
//! (`era::hugetlb_private_vma_lock`, v6.6) and the reservation a private unmap gives back
//! (`era::hugetlb_zap_restores_reserve`, v6.9). The others need no mechanism of their own,
//! because the model's page-table walks, splits and faults are already what they made the
//! kernel's:
//! - "mm/hugetlb: introduce hugetlb_walk()" (9c67a20704e7), "mm/hugetlb: make
//!   walk_hugetlb_range() safe to pmd unshare" (dd361e5033cf), "mm/hugetlb: make
//!   follow_hugetlb_page() safe to pmd unshare" (eefc7fa53608) and "mm/hugetlb: make
//!   hugetlb_follow_page_mask() safe to pmd unshare" (7d049f3a03ea), v6.3 (mm-stable merged
//!   after v6.2, not v6.2): walks and GUP take the vma lock for read. The model's walks
//!   (smaps, pagemap, the dump) and GUP's follow of a hugetlb entry (`gup.rs`) read the
//!   tables in one step, which nothing can interleave with, and take no vma lock in any era;
//!   so the pre-v6.3 window where a walk reads a table an unshare frees is not reproduced, and
//!   a v6.3+ walk does not wait for an unmapper holding the lock for write (timing only).
//! - "hugetlb: allow faults to be handled under the VMA lock" (7c43a553792a, v6.9): the model
//!   takes `mmap_lock` for read for every fault in every era (no per-VMA mmap lock), which is
//!   what hugetlb faults did before v6.9 (they fell back from `FAULT_FLAG_VMA_LOCK`).
//! - "mm: hugetlb: independent PMD page table shared count" (59d9094df3d7, v6.13): the share
//!   count moves from the PMD table page's refcount to `ptdesc->pt_share_count`; the model
//!   always kept its own count ([`crate::types::hugetlb::Hugetlb`]`::pmd_share`). Nothing a process
//!   can see changes.
//! - "mm/hugetlb: unshare page tables during VMA split, not before" (081056dc00a2, v6.16): the
//!   unshare of `era::hugetlb_split_unshares_pmds` moves from `->may_split` (before the VMA
//!   locks) into the split itself. The model's split is one step under `mmap_lock` for write,
//!   so both eras behave as v6.16 does; the v6.2-v6.15 window in which a per-VMA-lock fault
//!   re-shares the table between the unshare and the split is not reproduced.
//! - "mm/hugetlb: fix huge_pmd_unshare() vs GUP-fast race" (1013af4f585f, v6.16): an unshare
//!   also waits for lockless walkers (`tlb_remove_table_sync_one`, an IPI to every CPU). The
//!   model's GUP-fast re-checks the PMD it walked after taking its reference (`gup.rs`), and the
//!   IPI is not charged.
//!
//! Two page sizes, as on x86-64: 2 MiB (mapped by a PMD leaf) and 1 GiB (a PUD leaf). Each size
//! has a pool (`struct hstate`): `nr_hugepages` pages, of which `free` sit on the free list,
//! `resv` of the free ones are promised to mappings (`HugePages_Rsvd`), and `surplus` were
//! allocated beyond `nr_hugepages` up to `nr_overcommit_hugepages` and go back to the page
//! allocator when freed. Pool pages are taken from the page allocator when the pool grows
//! (`nr_hugepages` written, at boot from the machine's configuration) and returned when it
//! shrinks.
//!
//! Host cost, the kernel's own trick (the HugeTLB vmemmap optimisation frees the tail `struct
//! page`s): a huge page is one [`HPage`] of a few dozen bytes, whatever its size; its frames have
//! no per-frame state ([`crate::folio`]), zeroing is a charged cost, and contents are stored only
//! where written ([`crate::sim::content`]).
//!
//! Submodules: `resv.rs` (reservation maps), `reserve.rs` (reservation accounting and the
//! allocation a fault makes), `gup.rs` (GUP references and pins on huge pages,
//! `PageAnonExclusive`, fork's early copy of pinned pages, v5.12), `hugetlb_fault.rs` (`hugetlb_fault`, `hugetlb_no_page`, `hugetlb_wp`),
//! `pmd_share.rs` (`huge_pmd_share`, `huge_pmd_unshare`), `unmap.rs` (zapping, fork's copy),
//! `mremap.rs` (moving a mapping's entries, v5.16+),
//! `check.rs` (the checker). The file system is `fs/hugetlbfs.rs`.
//!
//! Approximations: one NUMA node; pool pages come from the top of never-used memory
//! ([`crate::page_alloc::buddy::BuddyAllocator::take_top`]), so a pool cannot grow once that region has
//! been handed out (the kernel's allocation can fail the same way when memory is fragmented, and
//! `nr_hugepages` then reads back what was allocated); a page freed from the middle of the
//! hugetlb region stays with hugetlb as a spare frame block (not counted in `MemFree`) until the
//! pool grows again; no cgroup hugetlb controller, no hugetlb page migration or poisoning; one
//! hugetlbfs mount with options (`subpool.rs`). Before v5.2 a private mapping's
//! fault mutex was hashed by (mm, address) rather than (mapping, index) ("hugetlb: use same
//! fault hash key for shared and private mappings", v5.2, id not verified); the model hashes
//! every era the later way, which only changes which private faults contend.

pub mod check;
mod gup;
pub(crate) mod hugetlb_fault;
pub(crate) mod mremap;
mod pmd_share;
pub(crate) mod reserve;
pub mod resv;
mod subpool;
mod sysfs;
pub(crate) mod unmap;

pub(crate) use hugetlb_fault::hugetlb_fault;
pub(crate) use unmap::{copy_hugetlb_page_range, hugetlb_split_prepare, unmap_hugepage_range};

use crate::era::{HugetlbSync, KernelVersion};
use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::pgtable::Level;
use crate::types::fs::FsType;
use crate::types::hugetlb::{HInode, HPage, Hstate, HugeSize, Hugetlb, Owner};
use crate::types::ids::InodeId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use engine::{Mutex, RwSem};
use resv::RegionMap;
use simcore::{Pfn, SimDuration, VirtAddr};
use std::collections::BTreeMap;

impl HugeSize {
    pub const ALL: [HugeSize; 2] = [HugeSize::Size2M, HugeSize::Size1G];

    /// `huge_page_shift`.
    pub fn shift(self) -> u32 {
        match self {
            HugeSize::Size2M => 21,
            HugeSize::Size1G => 30,
        }
    }

    pub fn bytes(self) -> u64 {
        1 << self.shift()
    }

    /// Base pages per huge page (`pages_per_huge_page`).
    pub fn pages(self) -> u64 {
        self.bytes() >> 12
    }

    pub fn kb(self) -> u64 {
        self.bytes() >> 10
    }

    /// The page-table level whose leaf maps one page of this size.
    pub fn level(self) -> Level {
        match self {
            HugeSize::Size2M => Level::Pmd,
            HugeSize::Size1G => Level::Pud,
        }
    }

    /// The size of `bytes`, if it is a huge page size.
    pub fn of_bytes(bytes: u64) -> Option<HugeSize> {
        HugeSize::ALL.into_iter().find(|s| s.bytes() == bytes)
    }

    /// The size `MAP_HUGETLB` asks for: `log2` in bits 26-31 of the flags (`MAP_HUGE_SHIFT`),
    /// zero for the default size.
    pub fn of_map_flags(flags: u32) -> Option<HugeSize> {
        match flags >> MAP_HUGE_SHIFT {
            0 => Some(HugeSize::Size2M),
            log => HugeSize::ALL.into_iter().find(|s| s.shift() == log),
        }
    }

    pub(crate) fn idx(self) -> usize {
        self as usize
    }

    /// The `hugepages-<N>kB` directory name under `/sys/kernel/mm/hugepages`.
    pub fn sysfs_name(self) -> String {
        format!("hugepages-{}kB", self.kb())
    }
}

/// `MAP_HUGE_SHIFT`: where `MAP_HUGETLB` encodes the page size's log2.
pub const MAP_HUGE_SHIFT: u32 = 26;

impl Hugetlb {
    /// The pools of a machine booting `kernel` with the `sync` scheme (a switch).
    pub(crate) fn new(kernel: KernelVersion, sync: HugetlbSync, handle: engine::Handle) -> Hugetlb {
        Hugetlb {
            sync,
            handle,
            lazy_fork_copy: crate::era::hugetlb_lazy_fork_copy(kernel),
            madv_dontneed: crate::era::hugetlb_madv_dontneed(kernel),
            split_unshares: crate::era::hugetlb_split_unshares_pmds(kernel),
            private_vma_lock: crate::era::hugetlb_private_vma_lock(kernel),
            zap_restores_reserve: crate::era::hugetlb_zap_restores_reserve(kernel),
            has_min_size: crate::era::hugetlbfs_has_min_size(kernel),
            hstates: Default::default(),
            pages: BTreeMap::new(),
            inodes: BTreeMap::new(),
            vmas: BTreeMap::new(),
            resv_maps: BTreeMap::new(),
            next_resv: 0,
            fault_mutexes: Vec::new(),
            subpool: None,
            gup: BTreeMap::new(),
            pmd_share: BTreeMap::new(),
            usage: BTreeMap::new(),
            lines: BTreeMap::new(),
            stale_ptep: None,
        }
    }

    pub fn hstate(&self, size: HugeSize) -> &Hstate {
        &self.hstates[size.idx()]
    }

    pub(crate) fn hstate_mut(&mut self, size: HugeSize) -> &mut Hstate {
        &mut self.hstates[size.idx()]
    }

    /// Whether any hugetlb state exists (nothing to print or check otherwise).
    pub fn in_use(&self) -> bool {
        !self.pages.is_empty() || !self.inodes.is_empty()
    }

    /// The page at `pfn`, if `pfn` is the head of a pool page.
    pub(crate) fn page(&self, pfn: Pfn) -> Option<&HPage> {
        self.pages.get(&pfn.0)
    }

    pub(crate) fn page_mut(&mut self, pfn: Pfn) -> &mut HPage {
        self.pages.get_mut(&pfn.0).expect("a hugetlb page")
    }

    /// The pool page containing frame `pfn`, if any: `(head, page)`.
    pub fn containing(&self, pfn: Pfn) -> Option<(Pfn, HugeSize, bool)> {
        let (&head, p) = self.pages.range(..=pfn.0).next_back()?;
        (pfn.0 < head + p.size.pages()).then_some((Pfn(head), p.size, p.owner == Owner::Free))
    }

    /// Host bytes of hugetlb state per pool page (the `O(1)` per huge page budget).
    pub fn host_bytes_per_page() -> usize {
        // A BTreeMap entry costs its key and value plus about half again in node overhead.
        (size_of::<u64>() + size_of::<HPage>()) * 3 / 2
    }

    /// `hugetlb_vma_lock_alloc`.
    pub(crate) fn new_vma_lock(&self) -> RwSem {
        self.handle.rwsem("hugetlb_vma_lock")
    }

    pub(crate) fn new_resv_map(&mut self) -> u32 {
        let id = self.next_resv;
        self.next_resv += 1;
        self.resv_maps.insert(id, (RegionMap::default(), 1));
        id
    }

    /// Drops a reference to a private reservation map (`resv_map_release` on the last).
    pub(crate) fn put_resv_map(&mut self, id: u32) {
        let (_, refs) = self.resv_maps.get_mut(&id).expect("a live reservation map");
        *refs -= 1;
        if *refs == 0 {
            self.resv_maps.remove(&id);
        }
    }

    pub(crate) fn resv_map_mut(&mut self, id: u32) -> &mut RegionMap {
        &mut self.resv_maps.get_mut(&id).expect("a live reservation map").0
    }
}

impl KState {
    /// The huge page size of `inode`'s file system, if it is hugetlbfs.
    pub(crate) fn hugetlb_size_of(&self, inode: InodeId) -> Option<HugeSize> {
        self.inodes[inode].fs.hugetlb_size()
    }

    /// The huge page size a VMA maps, if it is a hugetlb VMA (`hstate_vma`).
    pub(crate) fn hstate_vma(&self, vma: VmaId) -> Option<HugeSize> {
        let f = self.vma(vma).file?;
        self.hugetlb_size_of(self.file(f).inode)
    }

    /// `alloc_fresh_hugetlb_folio` plus `prep_new_hugetlb_folio`: a new page for the pool, off
    /// the free list (the caller enqueues or uses it).
    fn hugetlb_alloc_fresh(&mut self, size: HugeSize) -> Option<Pfn> {
        let h = &mut self.hugetlb.hstates[size.idx()];
        let pfn = match h.spare.pop_first() {
            Some(p) => Pfn(p),
            None => {
                let pfn = self.buddy.take_top(size.pages())?;
                self.vmstat.sub(VmStat::NrFreePages, size.pages());
                pfn
            }
        };
        let page = HPage {
            size,
            owner: Owner::New,
            refs: 0,
            mapcount: 0,
            locked: false,
            restore_reserve: false,
            anon_exclusive: false,
            spool: false,
        };
        self.hugetlb.pages.insert(pfn.0, page);
        self.hugetlb.hstate_mut(size).nr += 1;
        Some(pfn)
    }

    /// `update_and_free_hugetlb_folio`: a page leaves the pool for the page allocator.
    fn hugetlb_release(&mut self, pfn: Pfn) {
        let page = self.hugetlb.pages.remove(&pfn.0).expect("a hugetlb page");
        let size = page.size;
        self.mem.zero_range(pfn, size.pages());
        self.hugetlb.hstate_mut(size).nr -= 1;
        if self.buddy.give_top(pfn, size.pages()) {
            self.vmstat.add(VmStat::NrFreePages, size.pages());
            self.hugetlb_return_spares();
        } else {
            self.hugetlb.hstate_mut(size).spare.insert(pfn.0);
        }
    }

    /// Gives spare blocks that now lie at the top of the page allocator's memory back to it.
    fn hugetlb_return_spares(&mut self) {
        loop {
            let top = self.buddy.total_pages();
            let Some(size) = HugeSize::ALL
                .into_iter()
                .find(|&s| self.hugetlb.hstates[s.idx()].spare.contains(&top))
            else {
                return;
            };
            self.hugetlb.hstate_mut(size).spare.remove(&top);
            assert!(self.buddy.give_top(Pfn(top), size.pages()));
            self.vmstat.add(VmStat::NrFreePages, size.pages());
        }
    }

    /// `enqueue_hugetlb_folio`.
    fn hugetlb_enqueue(&mut self, pfn: Pfn) {
        let page = self.hugetlb.page_mut(pfn);
        page.owner = Owner::Free;
        page.restore_reserve = false;
        page.anon_exclusive = false;
        page.spool = false;
        let size = page.size;
        self.mem.zero_range(pfn, size.pages());
        let h = self.hugetlb.hstate_mut(size);
        h.free_list.insert(pfn.0);
        h.free += 1;
    }

    /// `dequeue_hugetlb_folio_node_exact`: the lowest free page, off the free list.
    pub(crate) fn hugetlb_dequeue(&mut self, size: HugeSize) -> Option<Pfn> {
        let h = self.hugetlb.hstate_mut(size);
        let pfn = Pfn(h.free_list.pop_first()?);
        h.free -= 1;
        self.hugetlb.page_mut(pfn).owner = Owner::New;
        Some(pfn)
    }

    /// `alloc_surplus_hugetlb_folio`: a page beyond the pool, if overcommit allows one.
    pub(crate) fn hugetlb_alloc_surplus(&mut self, size: HugeSize) -> Option<Pfn> {
        let h = self.hugetlb.hstate(size);
        if h.surplus >= h.overcommit {
            return None;
        }
        let pfn = self.hugetlb_alloc_fresh(size)?;
        self.hugetlb.hstate_mut(size).surplus += 1;
        Some(pfn)
    }

    /// `free_huge_folio`: the last reference to a page is gone. A reservation the page had not
    /// committed is restored; a surplus page leaves the pool, any other goes back on the free
    /// list.
    pub(crate) fn free_huge_folio(&mut self, pfn: Pfn) {
        let page = self.hugetlb.page(pfn).expect("a hugetlb page").clone();
        assert!(page.refs == 0 && page.mapcount == 0, "freeing a used huge page {pfn}: {page:?}");
        let restore = page.restore_reserve || self.subpool_put_freed(page.spool);
        let h = self.hugetlb.hstate_mut(page.size);
        if restore {
            h.resv += 1;
        }
        if h.surplus > 0 {
            h.surplus -= 1;
            self.hugetlb_release(pfn);
        } else {
            self.hugetlb_enqueue(pfn);
        }
    }

    /// Drops `n` references to a page, freeing it on the last.
    pub(crate) fn put_huge_folio(&mut self, pfn: Pfn, n: u32) {
        let page = self.hugetlb.page_mut(pfn);
        page.refs = page.refs.checked_sub(n).expect("huge page refcount underflow");
        if page.refs == 0 {
            self.free_huge_folio(pfn);
        }
    }

    /// `set_max_huge_pages`: writing `nr_hugepages`. Growing converts surplus pages first, then
    /// allocates until the target or the first failure; shrinking frees free pages not
    /// promised to reservations, then turns what must stay in use into surplus.
    pub fn set_nr_hugepages(&mut self, size: HugeSize, count: u64) {
        loop {
            let h = self.hugetlb.hstate(size);
            if h.surplus == 0 || count <= h.nr - h.surplus {
                break;
            }
            self.hugetlb.hstate_mut(size).surplus -= 1;
        }
        while self.hugetlb.hstate(size).nr - self.hugetlb.hstate(size).surplus < count {
            match self.hugetlb_alloc_fresh(size) {
                Some(pfn) => self.hugetlb_enqueue(pfn),
                None => break,
            }
        }
        let h = self.hugetlb.hstate(size);
        let min_count = (h.resv + h.nr - h.free).max(count);
        while self.hugetlb.hstate(size).nr > min_count {
            let Some(pfn) = self.hugetlb.hstate(size).free_list.first().copied() else { break };
            let h = self.hugetlb.hstate_mut(size);
            h.free_list.remove(&pfn);
            h.free -= 1;
            self.hugetlb_release(Pfn(pfn));
        }
        let h = self.hugetlb.hstate_mut(size);
        while h.nr - h.surplus > count {
            h.surplus += 1;
        }
    }

    /// `nr_overcommit_hugepages`.
    pub fn set_nr_overcommit_hugepages(&mut self, size: HugeSize, count: u64) {
        self.hugetlb.hstate_mut(size).overcommit = count;
    }

    /// The hugetlbfs state of `inode` (created with the inode).
    pub(crate) fn hinode(&self, inode: InodeId) -> &HInode {
        self.hugetlb.inodes.get(&inode).expect("a hugetlbfs inode")
    }

    pub(crate) fn hinode_mut(&mut self, inode: InodeId) -> &mut HInode {
        self.hugetlb.inodes.get_mut(&inode).expect("a hugetlbfs inode")
    }

    /// Makes the hugetlb state of a new hugetlbfs inode.
    pub(crate) fn hugetlbfs_inode_init(&mut self, inode: InodeId, fs: FsType) {
        if let Some(size) = fs.hugetlb_size() {
            let resv = RegionMap::default();
            let hi =
                HInode { size, cache: BTreeMap::new(), resv, busy: 0, kept_end: 0, spool: false };
            self.hugetlb.inodes.insert(inode, hi);
        }
    }

    /// `madvise_dontneed_free_valid_vma`: the part of `[start, end)` that `MADV_DONTNEED` zaps in
    /// `vma`. EINVAL for a PFN-mapped VMA, and a locked one unless `locked` (the advice is
    /// `MADV_DONTNEED_LOCKED`); a hugetlb VMA (EINVAL before v5.18) needs a huge-page aligned
    /// start (EINVAL) and drops a partial huge page at the end.
    pub(crate) fn madvise_dontneed_range(
        &self,
        vma: VmaId,
        start: VirtAddr,
        end: VirtAddr,
        locked: bool,
    ) -> Result<Option<(VirtAddr, VirtAddr)>, Errno> {
        let v = self.vma(vma);
        let (start, end) = (v.start.max(start), v.end.min(end));
        let forbidden = if locked { VmFlags::PFNMAP } else { VmFlags::LOCKED | VmFlags::PFNMAP };
        if v.flags.has(forbidden) {
            return Err(Errno::EINVAL);
        }
        let Some(size) = self.hstate_vma(vma) else { return Ok(Some((start, end))) };
        let unit = simcore::Bytes(size.bytes());
        if !self.hugetlb.madv_dontneed || !start.is_aligned(unit) {
            return Err(Errno::EINVAL);
        }
        let end = end.align_down(unit);
        Ok((start < end).then_some((start, end)))
    }

    /// The span of one page-table entry of `vma`'s mappings: a huge page for a hugetlb VMA.
    pub(crate) fn page_step(&self, vma: VmaId) -> simcore::Bytes {
        self.hstate_vma(vma).map_or(simcore::Bytes::PAGE, |s| simcore::Bytes(s.bytes()))
    }

    /// Whether fork copies hugetlb VMA `vma`'s entries even without private pages (before
    /// v6.0's lazy copy).
    pub(crate) fn hugetlb_copies_at_fork(&self, vma: VmaId) -> bool {
        self.vma(vma).vm_ops.is_hugetlb() && !self.hugetlb.lazy_fork_copy
    }

    /// The huge-page index of `addr` in `vma`'s file (`vma_hugecache_offset`).
    pub(crate) fn huge_index(&self, vma: VmaId, addr: VirtAddr, size: HugeSize) -> u64 {
        self.vma(vma).page_index(addr) >> (size.shift() - 12)
    }
}

/// The lock order of the scheme, outermost first (`mm/rmap.c`'s hugetlb lines of v5.7 and
/// v6.1), declared to lockdep when the fault mutex table is made.
fn lock_order(sync: HugetlbSync) -> &'static [&'static str] {
    match sync {
        HugetlbSync::IMmapRwsem => &["mmap_lock", "i_mmap_rwsem", "hugetlb_fault_mutex", "ptlock"],
        HugetlbSync::Revert => &["mmap_lock", "hugetlb_fault_mutex", "i_mmap_rwsem", "ptlock"],
        HugetlbSync::VmaLock | HugetlbSync::VmaLockBlocking => {
            &["mmap_lock", "hugetlb_fault_mutex", "hugetlb_vma_lock", "i_mmap_rwsem", "ptlock"]
        }
    }
}

/// The fault mutex of index `idx` of `inode` (`hugetlb_fault_mutex_hash`). The table, of
/// `roundup_pow_of_two(8 * CPUs)` mutexes (`hugetlb_init`), is made on first use.
pub(crate) fn fault_mutex(cx: &Cx, inode: InodeId, idx: u64) -> Mutex {
    let handle: &engine::Handle = cx;
    let mut st = cx.st();
    if st.hugetlb.fault_mutexes.is_empty() {
        let n = (8 * u64::from(handle.cpus())).next_power_of_two();
        st.hugetlb.fault_mutexes = (0..n).map(|_| handle.mutex("hugetlb_fault_mutex")).collect();
        handle.declare_lock_order(lock_order(st.hugetlb.sync));
        handle.declare_lock_order(&["i_rwsem", "hugetlb_fault_mutex"]);
    }
    let key = (u64::from(inode.0) << 40) ^ idx;
    let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    let table = &st.hugetlb.fault_mutexes;
    table[(h % table.len() as u64) as usize]
}

impl KState {
    /// The pools at boot (`hugepages=` per `hugepagesz=`), then the scenario files' hugetlbfs
    /// mount with its options; a mount that fails (ENOMEM for `min_size=`) fails the boot.
    pub(crate) fn hugetlb_boot(&mut self, t: &crate::kernel::Tunables) -> Result<(), String> {
        for size in HugeSize::ALL {
            self.set_nr_hugepages(size, t.nr_hugepages[size.idx()]);
            self.set_nr_overcommit_hugepages(size, t.nr_overcommit_hugepages[size.idx()]);
        }
        if t.hugetlbfs_min_size.is_some() && !self.hugetlb.has_min_size {
            return Err("hugetlbfs has no `min_size=` mount option before v4.1".into());
        }
        self.hugetlbfs_mount(HugeSize::Size2M, t.hugetlbfs_size, t.hugetlbfs_min_size).map_err(
            |e| format!("mounting hugetlbfs with min_size: {e:?} (the pool cannot promise it)"),
        )
    }

    /// A scenario file made on the 2 MiB hugetlbfs mount joins its subpool, if it has one.
    pub(crate) fn hugetlbfs_join_mount(&mut self, inode: InodeId) {
        let on_mount = self.hugetlb_size_of(inode) == Some(HugeSize::Size2M);
        if on_mount && self.hugetlb.subpool.is_some() {
            self.hinode_mut(inode).spool = true;
        }
    }
}

/// This task's CPU maps or unmaps huge page `page` (`hugetlb_no_page`'s folio lock, reference
/// and mapcount; the zap's mapcount and the gather's reference): how long its writes wait for
/// the page's two lines, which the last CPU to map or unmap it holds.
pub(crate) fn folio_lines_write(cx: &Cx, page: Pfn) -> SimDuration {
    let mut st = cx.st();
    let lines = st.hugetlb.lines.entry(page.0).or_default();
    cx.line_write(&mut lines.head) + cx.line_write(&mut lines.mapcount)
}

impl Hugetlb {
    /// Adds the hugetlb state, if any, to a fingerprint of the kernel state (the explorer's
    /// visited-state cache; O(state)).
    pub fn fingerprint_into(&self, d: &mut simcore::Digest) {
        if self.in_use() {
            d.write_str(&format!(
                "{:?}{:?}{:?}{:?}{:?}{:?}{:?}{:?}",
                self.gup,
                self.hstates,
                self.pages,
                self.inodes,
                self.resv_maps,
                self.pmd_share,
                self.usage,
                self.subpool
            ));
        }
    }
}
