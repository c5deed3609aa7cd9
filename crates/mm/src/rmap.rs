//! Reverse mapping: from a folio to the page-table entries that map it (`mm/rmap.c`, v6.8).
//!
//! Anonymous folios point at the `anon_vma` they were created in and carry their page index;
//! an `anon_vma` knows every VMA that may map its pages (the `anon_vma_chain`), including the VMAs
//! of forked children. File folios point at their inode; `i_mmap` lists the VMAs mapping the file.
//! An rmap walk visits each candidate VMA at the address where it would map the page.
//!
//! Counters kept here as in the kernel: `NR_ANON_MAPPED` (`nr_anon_pages`) and
//! `NR_FILE_MAPPED` (`nr_mapped`) count pages mapped at least once.
//!
//! The lock order of `mm/rmap.c`'s header comment is declared to the simulated lockdep by
//! [`declare_lock_order`]; mechanisms that take these locks in another order are reported.
//!
//! `folio_mkclean` write-protects and cleans a file folio's shared mappings before writeback
//! (found by `mmsim diff scenarios/shared-file.toml`: the host shows the page `Shared_Clean`
//! after `fsync`).
//!
//! Approximations: one anon_vma per VMA plus its chain (the kernel reuses anon_vmas across
//! generations when it can); the anon index is stored relative to its anon_vma's base so that it
//! fits the 32-bit index `crate::folio` keeps per frame.

use crate::folio::{Mapping, pg};
use crate::types::mm_types::AnonVma;

use crate::kernel::{Cx, KState};
use crate::pgtable::{Level, Pte, Upper};
use crate::types::ids::AnonVmaId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use engine::{Handle, RwSem};
use simcore::{Pfn, VirtAddr};

/// Lock classes in the order `mm/rmap.c` documents (outermost first). Two chains, because
/// `mm->page_table_lock` and the split PTE locks are alternatives at the same level.
pub const LOCK_ORDER: [&[&str]; 2] = [
    &[
        "i_rwsem",
        "mmap_lock",
        "invalidate_lock",
        "i_mmap_rwsem",
        "anon_vma",
        "page_table_lock",
        "xa_lock",
    ],
    &["i_mmap_rwsem", "anon_vma", "ptlock", "xa_lock"],
];

/// Declares [`LOCK_ORDER`] to the engine's lockdep.
pub fn declare_lock_order(handle: &Handle) {
    for chain in LOCK_ORDER {
        handle.declare_lock_order(chain);
    }
}

impl KState {
    /// `anon_vma_alloc` for a VMA that has none (part of `__anon_vma_prepare`).
    pub(crate) fn anon_vma_attach_new(&mut self, vma: VmaId, lock: RwSem) -> AnonVmaId {
        let pgoff = self.vma(vma).pgoff;
        let base = pgoff.saturating_sub(1 << 31);
        let id = AnonVmaId(self.anon_vmas.len() as u32);
        self.anon_vmas.push(AnonVma { root: id, lock, vmas: vec![vma], base });
        let v = self.vma_mut(vma);
        debug_assert!(v.anon_vma.is_none());
        v.anon_vma = Some(id);
        v.anon_vma_chain.push(id);
        id
    }

    /// `anon_vma_fork`: the child VMA joins every anon_vma of the parent VMA and gets its own,
    /// under the same root.
    pub(crate) fn anon_vma_fork(&mut self, child: VmaId, parent: VmaId) {
        let chain = self.vma(parent).anon_vma_chain.clone();
        let Some(&last) = self.vma(parent).anon_vma.as_ref() else { return };
        for &av in &chain {
            self.anon_vmas[av].vmas.push(child);
        }
        let root = self.anon_vmas[last].root;
        let (lock, base) = (self.anon_vmas[root].lock, self.anon_vmas[last].base);
        let id = AnonVmaId(self.anon_vmas.len() as u32);
        self.anon_vmas.push(AnonVma { root, lock, vmas: vec![child], base });
        let c = self.vma_mut(child);
        c.anon_vma_chain = chain;
        c.anon_vma_chain.push(id);
        c.anon_vma = Some(id);
    }

    /// `unlink_anon_vmas`: removes a dying VMA from every anon_vma it is chained to.
    pub(crate) fn unlink_anon_vmas(&mut self, vma: VmaId) {
        let chain = std::mem::take(&mut self.vma_mut(vma).anon_vma_chain);
        for av in chain {
            self.anon_vmas[av].vmas.retain(|&v| v != vma);
        }
        self.vma_mut(vma).anon_vma = None;
    }

    /// `folio_add_new_anon_rmap`: a new exclusive anonymous folio mapped by PTEs from `addr` of
    /// `vma`; every page of a large one is exclusive and mapped once (v6.8, 372cbd4d5a06).
    pub(crate) fn rmap_add_new_anon(&mut self, folio: Pfn, vma: VmaId, addr: VirtAddr) {
        let v = self.vma(vma);
        let av = v.anon_vma.expect("anon fault without anon_vma_prepare");
        let index = v.page_index(addr);
        let rel = u32::try_from(index - self.anon_vmas[av].base).expect("anon index out of range");
        let nr = self.folios.order(folio).pages();
        self.folios.set_mapping(folio, Mapping::Anon(av), rel);
        self.folios.set(folio, pg::SWAPBACKED);
        for page in (0..nr).map(|i| folio + i) {
            self.folios.set(page, pg::ANON_EXCLUSIVE);
            self.folios.inc_mapcount(page);
        }
        self.vmstat.add(VmStat::NrAnonPages, nr);
    }

    /// `folio_add_anon_rmap_pte` / `folio_add_file_rmap_pte` for an already-known folio. A page
    /// that a PMD already maps is already counted mapped.
    pub(crate) fn rmap_add_pte(&mut self, page: Pfn) {
        let head = self.folios.head(page);
        let first = self.folios.page_mapcount(page) == 0 && self.folios.entire_mapcount(head) == 0;
        self.folios.inc_mapcount(page);
        if first {
            let stat =
                if self.folios.is_anon(head) { VmStat::NrAnonPages } else { VmStat::NrMapped };
            self.vmstat.inc(stat);
        }
    }

    /// `folio_remove_rmap_pte`: one PTE mapping of `page` goes; a large anonymous folio left
    /// partially mapped is queued for a deferred split (the era's rule,
    /// [`deferred_split_unmapped`](KState::deferred_split_unmapped)).
    pub(crate) fn rmap_remove_pte(&mut self, page: Pfn) {
        if let Some(head) = self.rmap_unmap_pte(page) {
            self.deferred_split_unmapped(head);
        }
    }

    /// The accounting of `folio_remove_rmap_ptes` for one PTE of a batch: returns the folio's
    /// head when a large anonymous folio lost its last mapping of `page`, for the batch's
    /// deferred split decision.
    pub(crate) fn rmap_unmap_pte(&mut self, page: Pfn) -> Option<Pfn> {
        let head = self.folios.head(page);
        self.folios.dec_mapcount(page);
        let mut unmapped_large_anon = None;
        if self.folios.page_mapcount(page) == 0 && self.folios.entire_mapcount(head) == 0 {
            let anon = self.folios.is_anon(head);
            self.vmstat.sub(if anon { VmStat::NrAnonPages } else { VmStat::NrMapped }, 1);
            if anon && self.folios.large(head).is_some() {
                unmapped_large_anon = Some(head);
            }
        }
        self.mlock_fbatch_add(head);
        unmapped_large_anon
    }

    /// After a batch of PTE removals left pages of the large anonymous folio `head` unmapped:
    /// from v6.10 it is queued only while other pages stay mapped
    /// ([`crate::era::deferred_split_only_partial`]); before, always.
    pub(crate) fn deferred_split_unmapped(&mut self, head: Pfn) {
        let partial = self.folios.folio_mapcount(head) > 0;
        if partial || !crate::era::deferred_split_only_partial(self.thp.kernel) {
            self.deferred_split_folio(head);
        }
    }

    /// Pages of the large folio `head` that no PTE maps.
    fn pages_without_pte(&self, head: Pfn) -> u64 {
        let nr = self.folios.order(head).pages();
        (0..nr).filter(|&i| self.folios.page_mapcount(head + i) == 0).count() as u64
    }

    /// `folio_add_file_rmap_pmd`: the first PMD mapping counts the pages no PTE maps in
    /// `nr_mapped`, and the folio in `nr_shmem_pmdmapped` (swap-backed) or `nr_file_pmdmapped`.
    pub(crate) fn rmap_add_pmd(&mut self, head: Pfn) {
        assert!(!self.folios.is_anon(head), "anonymous THPs are not modelled");
        if self.folios.inc_entire_mapcount(head) {
            let newly_mapped = self.pages_without_pte(head);
            self.vmstat.add(VmStat::NrMapped, newly_mapped);
            self.vmstat.inc(self.pmdmapped_stat(head));
        }
    }

    /// The gauge counting `head` while a PMD maps it: shmem's or other files'.
    fn pmdmapped_stat(&self, head: Pfn) -> VmStat {
        if self.folios.test(head, pg::SWAPBACKED) {
            VmStat::NrShmemPmdmapped
        } else {
            VmStat::NrFilePmdmapped
        }
    }

    /// `folio_remove_rmap_pmd`.
    pub(crate) fn rmap_remove_pmd(&mut self, head: Pfn) {
        if self.folios.dec_entire_mapcount(head) {
            let unmapped = self.pages_without_pte(head);
            self.vmstat.sub(VmStat::NrMapped, unmapped);
            self.vmstat.sub(self.pmdmapped_stat(head), 1);
        }
        self.mlock_fbatch_add(head);
    }

    /// `folio_move_anon_rmap`: a reused folio now belongs to `vma`'s own anon_vma.
    pub(crate) fn rmap_move_anon(&mut self, folio: Pfn, vma: VmaId) {
        let av = self.vma(vma).anon_vma.expect("reuse in a VMA without anon_vma");
        self.set_anon_vma(folio, av);
    }

    /// The second half of `__page_set_anon_rmap` (v6.1; `__folio_set_anon` later) for a folio
    /// first mapped by a swap-in that is not exclusive to `vma`: it belongs to the oldest
    /// anon_vma, the root, whose chain holds every VMA forked from the one that made the page,
    /// since any of them may still hold its swap entry and map it later. (`vma`'s own anon_vma
    /// would hide those mappings from rmap, and so from reclaim.)
    pub(crate) fn rmap_set_anon_root(&mut self, folio: Pfn, vma: VmaId) {
        let own = self.vma(vma).anon_vma.expect("swap-in in a VMA without anon_vma");
        self.set_anon_vma(folio, self.anon_vmas[own].root);
    }

    /// Points the anonymous `folio` at `av`, keeping its page index.
    fn set_anon_vma(&mut self, folio: Pfn, av: AnonVmaId) {
        let Mapping::Anon(old) = self.folios.mapping(folio) else {
            panic!("moving a non-anon folio")
        };
        if old == av {
            return;
        }
        let index = self.folio_index(folio);
        let rel = u32::try_from(index - self.anon_vmas[av].base).expect("anon index out of range");
        self.folios.set_mapping(folio, Mapping::Anon(av), rel);
    }

    /// The absolute page index of a folio (`folio->index`).
    pub fn folio_index(&self, head: Pfn) -> u64 {
        let rel = u64::from(self.folios.index(head));
        match self.folios.mapping(head) {
            Mapping::Anon(av) => self.anon_vmas[av].base + rel,
            Mapping::Ksm(_) | Mapping::File(_) | Mapping::None => rel,
        }
    }

    /// Where `page` may be mapped: `(mm, vma, address)` for every candidate VMA covering it
    /// (`rmap_walk`); callers check the page table for an actual mapping.
    pub fn rmap_walk(&self, page: Pfn) -> Vec<(MmId, VmaId, VirtAddr)> {
        let head = self.folios.head(page);
        if let Mapping::Ksm(node) = self.folios.mapping(head) {
            return self.rmap_walk_ksm(node);
        }
        self.rmap_candidates(page).collect()
    }

    /// Whether the rmap walk of `page` reaches `addr` of `mm`, without collecting the walk
    /// (the checkers ask this of every mapped PTE after every step).
    pub(crate) fn rmap_reaches(&self, page: Pfn, mm: MmId, addr: VirtAddr) -> bool {
        let head = self.folios.head(page);
        if let Mapping::Ksm(node) = self.folios.mapping(head) {
            return self.rmap_walk_ksm(node).iter().any(|&(m, _, a)| m == mm && a == addr);
        }
        self.rmap_candidates(page).any(|(m, _, a)| m == mm && a == addr)
    }

    /// The anonymous or file rmap walk of `page` (not KSM's): each VMA of its `anon_vma` or
    /// `i_mmap` that covers the page's index, with the address there.
    fn rmap_candidates(&self, page: Pfn) -> impl Iterator<Item = (MmId, VmaId, VirtAddr)> + '_ {
        let head = self.folios.head(page);
        let index = self.folio_index(head) + (page.0 - head.0);
        let (anon, file) = match self.folios.mapping(head) {
            Mapping::Anon(av) => (Some(self.anon_vmas[av].vmas.iter()), None),
            Mapping::File(inode) => (None, Some(self.inodes[inode].mapping.i_mmap.iter())),
            Mapping::None | Mapping::Ksm(_) => (None, None),
        };
        anon.into_iter().flatten().chain(file.into_iter().flatten()).filter_map(move |&id| {
            let v = self.vma(id);
            v.address_of(index).map(|a| (v.mm, id, a))
        })
    }

    /// The entries that map `page` now (walks rmap candidates and checks their page tables):
    /// PTEs, and for the head of a PMD-mapped folio the PMDs (`huge`).
    pub fn rmap_mappers(&self, page: Pfn) -> Vec<Mapper> {
        self.rmap_walk(page)
            .into_iter()
            .filter_map(|(mm, vma, addr)| {
                let (pte, level) = self.pt.translate(self.mm(mm).pgd, addr)?;
                (pte.is_present() && !pte.special() && pte.pfn() == page).then_some(Mapper {
                    mm,
                    vma,
                    addr,
                    page,
                    huge: level == Level::Pmd,
                })
            })
            .collect()
    }
}

/// A page mapped at `addr` of `vma` in `mm`, found by an rmap walk: by a PTE, or (`huge`) the
/// head of a folio mapped whole by the PMD at `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapper {
    pub mm: MmId,
    pub vma: VmaId,
    pub addr: VirtAddr,
    pub page: Pfn,
    pub huge: bool,
}

impl KState {
    /// Every PTE or PMD mapping any page of folio `head` now. A folio that no entry maps is not
    /// walked, as `folio_referenced` returns before its rmap walk when `folio_mapcount` is 0
    /// (mm/rmap.c v6.8) and `shrink_folio_list` calls `try_to_unmap` only for a mapped folio.
    pub(crate) fn folio_mappers(&self, head: Pfn) -> Vec<Mapper> {
        if self.folios.folio_mapcount(head) == 0 {
            return Vec::new();
        }
        let nr = self.folios.order(head).pages();
        (0..nr).flat_map(|i| self.rmap_mappers(head + i)).collect()
    }

    /// `vma_has_recency` (v6.3+, `include/linux/mm_inline.h`): accesses through a VMA count for
    /// reclaim unless the VMA was advised sequential or random, or its file is NOREUSE (when the
    /// `fadv_noreuse` switch gives NOREUSE an effect). `rand_read_too` says whether random advice
    /// counts as well as sequential: before v6.3 the classic LRU's `folio_referenced` ignored only
    /// `VM_SEQ_READ` VMAs ([`crate::era::vma_has_recency`]); the multi-gen LRU always ignored both
    /// ([`crate::era::MGLRU_IGNORES_RAND_READ`]).
    pub(crate) fn vma_has_recency(
        &self,
        vma: VmaId,
        noreuse_effective: bool,
        rand_read_too: bool,
    ) -> bool {
        let v = self.vma(vma);
        let advised =
            if rand_read_too { VmFlags::SEQ_READ | VmFlags::RAND_READ } else { VmFlags::SEQ_READ };
        if v.flags.has(advised) {
            return false;
        }
        !(noreuse_effective
            && v.file.is_some_and(|f| self.file(f).mode & crate::fs::fmode::NOREUSE != 0))
    }

    /// `vma_has_recency` as this kernel's reclaim and unmap paths see it.
    pub(crate) fn vma_has_recency_now(&self, vma: VmaId) -> bool {
        self.vma_has_recency(vma, self.lru.noreuse, self.lru.rand_read_has_no_recency)
    }
}

/// The table and slot of `m`'s entry (a PTE, or a PMD leaf for a huge mapper), and the entry,
/// if the page is still mapped there.
fn mapped_entry(st: &KState, m: &Mapper) -> Option<(PtId, usize, Pte)> {
    let pgd = st.mm(m.mm).pgd;
    let (t, i, pte) = if m.huge {
        let (t, i) = st.pt.pmd_slot(pgd, m.addr)?;
        let Upper::Leaf(pte) = st.pt.upper(t, i) else { return None };
        (t, i, pte)
    } else {
        let (t, i) = st.pt.pte_slot(pgd, m.addr)?;
        (t, i, st.pt.pte(t, i))
    };
    (pte.is_present() && !pte.special() && pte.pfn() == m.page).then_some((t, i, pte))
}

/// Writes `m`'s entry back (`Pte::NONE` clears it).
fn set_entry(st: &mut KState, m: &Mapper, table: PtId, idx: usize, pte: Pte) {
    if !m.huge {
        st.pt.set_pte(table, idx, pte);
    } else if pte.is_none() {
        st.pt.set_upper(table, idx, Upper::None);
    } else {
        st.pt.set_upper(table, idx, Upper::Leaf(pte));
    }
}

/// `folio_referenced`: counts the young PTEs and PMDs mapping the folio and clears them,
/// skipping VMAs without recency; returns the count and the union of the flags of the VMAs that
/// referenced it. Each entry is examined under its page-table lock, as `page_vma_mapped_walk`
/// does. Under the multi-gen LRU each young PTE also looks around its neighbours
/// (`lru_gen_look_around`; not a PMD, as in the kernel).
pub(crate) async fn folio_referenced(cx: &Cx, head: Pfn) -> (u32, VmFlags) {
    let mappers = cx.st().folio_mappers(head);
    let (mut young, mut flags) = (0, 0u64);
    for m in mappers {
        if !cx.st().vma_has_recency_now(m.vma) {
            continue;
        }
        let Some((table, _, _)) = mapped_entry(&cx.st(), &m) else { continue };
        let ptl = cx.st().pt.ptl(table);
        let _g = ptl.lock(cx).await;
        let mut st = cx.st();
        if let Some((t, i, pte)) = mapped_entry(&st, &m)
            && pte.young()
        {
            set_entry(&mut st, &m, t, i, pte.without(Pte::ACCESSED));
            young += 1;
            flags |= st.vma(m.vma).flags.0;
            if !m.huge {
                st.lru_referenced_pte(m.mm, m.vma, t, m.addr, head);
            }
        }
    }
    (young, VmFlags(flags))
}

/// `folio_mkclean` (`mm/rmap.c`, `page_mkclean_one`; as old as `page_mkclean`, v2.6.19): before a
/// file folio is written back, every shared mapping's PTE (or PMD) of it is write-protected and
/// cleaned under its page-table lock, and its TLB entry flushed, so that the next write through
/// the mapping faults and dirties the folio again (`folio_clear_dirty_for_io`). Private mappings
/// are skipped, as `invalid_mkclean_vma` skips them. Returns how many entries were dirty or
/// writable (the caller moves that dirtiness to the folio first).
pub(crate) async fn folio_mkclean(cx: &Cx, head: Pfn) -> u32 {
    let mappers = cx.st().folio_mappers(head);
    let mut cleaned = 0;
    for m in mappers {
        if cx.st().vma(m.vma).flags.0 & VmFlags::SHARED == 0 {
            continue;
        }
        let Some((table, _, _)) = mapped_entry(&cx.st(), &m) else { continue };
        let ptl = cx.st().pt.ptl(table);
        let g = ptl.lock(cx).await;
        let changed = {
            let mut st = cx.st();
            match mapped_entry(&st, &m) {
                Some((t, i, pte)) if pte.dirty() || pte.write() => {
                    set_entry(&mut st, &m, t, i, pte.without(Pte::DIRTY | Pte::RW));
                    true
                }
                _ => false,
            }
        };
        drop(g);
        if changed {
            cleaned += 1;
            crate::arch::tlbflush::flush_tlb_page(cx, m.mm, m.addr).await;
        }
    }
    cleaned
}

impl KState {
    /// `try_to_unmap_one` of a lazyfree folio's PTE: discarded (the PTE cleared, the mapping's
    /// reference dropped) when neither it nor the folio was written again and nobody else holds
    /// it (refcount = mappings + the isolation reference); otherwise the folio is swap-backed
    /// again and stays mapped (false).
    fn try_to_unmap_lazyfree(&mut self, mm: MmId, page: Pfn, t: PtId, i: usize, pte: Pte) -> bool {
        let head = self.folios.head(page);
        let unused = self.folios.refcount(head) == self.folios.folio_mapcount(head) + 1;
        if pte.dirty() || self.folios.test(head, pg::DIRTY) || !unused {
            self.folios.set(head, pg::SWAPBACKED);
            return false;
        }
        self.discard_anon_pte(mm, page, t, i);
        true
    }

    /// Drops an anonymous page's PTE without a swap entry (`try_to_unmap_one`'s `discard`).
    fn discard_anon_pte(&mut self, mm: MmId, page: Pfn, t: PtId, i: usize) {
        self.pt.set_pte(t, i, Pte::NONE);
        self.mm_mut(mm).sub_rss(crate::mm_struct::MmCounter::AnonPages, 1);
        self.rmap_remove_pte(page);
        let head = self.folios.head(page);
        self.put_folio(head, 1);
    }

    /// `try_to_unmap_one` of a PTE of a folio that is not lazyfree: an anonymous page's becomes
    /// a swap entry, a file page's nothing (its dirty bit moved to the folio). With `lzfree`
    /// (`TTU_LZFREE`, v4.5-v4.11 `era::lazyfree_on_anon_lru`, for a folio reclaim has just put
    /// in the swap cache) a dirty PTE dirties the folio first, and the PTE of a folio still
    /// clean is dropped instead: the page was freed by `MADV_FREE` and not written since.
    fn try_to_unmap_pte(&mut self, m: &Mapper, head: Pfn, t: PtId, i: usize, pte: Pte, ttu: Ttu) {
        let anon = self.folios.is_anon(head);
        if anon && ttu.lzfree {
            if pte.dirty() {
                self.folios.set(head, pg::DIRTY);
            }
            if !self.folios.test(head, pg::DIRTY) {
                self.discard_anon_pte(m.mm, m.page, t, i);
                return;
            }
        }
        let counter = crate::mm_struct::mm_counter(&self.folios, head);
        self.mm_mut(m.mm).sub_rss(counter, 1);
        if anon {
            // A THP's page has its own slot in the folio's cluster.
            let slot =
                self.swap.slot_of(head).expect("anonymous folios are unmapped after add_to_swap")
                    + (m.page.0 - head.0);
            self.swap_duplicate(slot);
            let exclusive = self.folios.test(m.page, pg::ANON_EXCLUSIVE);
            let keep_exclusive = ttu.anon_exclusive && exclusive;
            let swp = Pte::swap(0, slot, keep_exclusive, pte.soft_dirty());
            self.pt.set_pte(t, i, swp.with_uffd_wp(pte.uffd_wp()));
            self.folios.clear_flag(m.page, pg::ANON_EXCLUSIVE);
            self.mm_mut(m.mm).add_rss(crate::mm_struct::MmCounter::SwapEnts, 1);
        } else {
            if pte.dirty() {
                self.folio_mark_dirty(head);
            }
            self.pt.set_pte(t, i, Pte::NONE);
        }
        self.rmap_remove_pte(m.page);
        self.put_folio(head, 1);
    }
}

/// How [`try_to_unmap`] treats anonymous pages.
#[derive(Clone, Copy, Debug)]
struct Ttu {
    /// The era tracks `PageAnonExclusive` (v5.19+, the `cow_reuse` switch).
    anon_exclusive: bool,
    /// `TTU_LZFREE` (v4.5-v4.11).
    lzfree: bool,
}

/// `try_to_unmap`: replaces every PTE of the folio with a swap entry (anonymous, in the swap
/// cache) or with nothing (file), under each PTE lock, then flushes the TLB. A PMD mapping of a
/// file folio is split, which for a file folio means cleared (`TTU_SPLIT_HUGE_PMD`,
/// `__split_huge_pmd_locked`). Returns false if an exclusive, possibly pinned anonymous page
/// must stay mapped (v5.19+ `anon_exclusive`: pinned pages are never unmapped to swap); the
/// folio may then be partly unmapped. `lzfree` is v4.5-v4.11's `TTU_LZFREE`
/// (`KState::try_to_unmap_pte`).
pub(crate) async fn try_to_unmap(cx: &Cx, head: Pfn, lzfree: bool) -> bool {
    let anon_exclusive = cx.kernel().switches.cow_reuse.tracks_anon_exclusive();
    let ttu = Ttu { anon_exclusive, lzfree };
    let mappers = cx.st().folio_mappers(head);
    for m in mappers {
        let Some((table, _, _)) = mapped_entry(&cx.st(), &m) else { continue };
        let ptl = cx.st().pt.ptl(table);
        let g = ptl.lock(cx).await;
        if m.huge {
            {
                let mut st = cx.st();
                let Some((t, i, pte)) = mapped_entry(&st, &m) else { continue };
                st.zap_file_pmd(m.mm, t, i, pte);
                st.put_folio(head, 1);
            }
            let haddr = m.addr.align_down(simcore::Bytes::PMD);
            crate::arch::tlbflush::flush_tlb_range(cx, m.mm, haddr, haddr + simcore::Bytes::PMD)
                .await;
            drop(g);
            continue;
        }
        let unmapped = {
            let mut st = cx.st();
            let Some((t, i, pte)) = mapped_entry(&st, &m) else { continue };
            let anon = st.folios.is_anon(head);
            let exclusive = st.folios.test(m.page, pg::ANON_EXCLUSIVE);
            if anon && anon_exclusive && exclusive && st.folios.maybe_dma_pinned(head) {
                false
            } else if st.folio_is_lazyfree(head) {
                st.try_to_unmap_lazyfree(m.mm, m.page, t, i, pte)
            } else {
                st.try_to_unmap_pte(&m, head, t, i, pte, ttu);
                true
            }
        };
        if !unmapped {
            return false;
        }
        crate::arch::tlbflush::flush_tlb_page(cx, m.mm, m.addr).await;
        drop(g);
    }
    cx.st().folios.folio_mapcount(head) == 0
}
