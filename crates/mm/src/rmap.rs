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
//! Approximations: one anon_vma per VMA plus its chain (the kernel reuses anon_vmas across
//! generations when it can); the anon index is stored relative to its anon_vma's base so that it
//! fits the 32-bit field of [`crate::folio::PageMeta`].

use crate::folio::{AnonVmaId, Mapping, pg};
use crate::kernel::KState;
use crate::mm_struct::MmId;
use crate::vma::VmaId;
use crate::vmstat::VmStat;
use engine::{Handle, RwSem};
use simcore::{Pfn, VirtAddr};

/// `struct anon_vma`.
#[derive(Debug)]
pub struct AnonVma {
    /// The anon_vma whose lock protects this tree (`anon_vma->root`).
    pub root: AnonVmaId,
    /// The root's rwsem (`anon_vma->root->rwsem`), copied for direct access.
    pub lock: RwSem,
    /// VMAs that may map pages of this anon_vma (its `anon_vma_chain` entries).
    pub vmas: Vec<VmaId>,
    /// Page indexes of this anon_vma are stored relative to this base.
    pub base: u64,
}

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

    /// `folio_add_new_anon_rmap`: a new exclusive anonymous folio mapped at `addr` of `vma`.
    pub(crate) fn rmap_add_new_anon(&mut self, folio: Pfn, vma: VmaId, addr: VirtAddr) {
        let v = self.vma(vma);
        let av = v.anon_vma.expect("anon fault without anon_vma_prepare");
        let index = v.page_index(addr);
        let rel = u32::try_from(index - self.anon_vmas[av].base).expect("anon index out of range");
        self.folios.set_mapping(folio, Mapping::Anon(av), rel);
        self.folios.set(folio, pg::ANON_EXCLUSIVE | pg::SWAPBACKED);
        self.folios.inc_mapcount(folio);
        self.vmstat.inc(VmStat::NrAnonPages);
    }

    /// `folio_add_anon_rmap_pte` / `folio_add_file_rmap_pte` for an already-known folio.
    pub(crate) fn rmap_add_pte(&mut self, page: Pfn) {
        let head = self.folios.head(page);
        let first = self.folios.page_mapcount(page) == 0;
        self.folios.inc_mapcount(page);
        if first {
            let stat =
                if self.folios.is_anon(head) { VmStat::NrAnonPages } else { VmStat::NrMapped };
            self.vmstat.inc(stat);
        }
    }

    /// `folio_remove_rmap_pte`.
    pub(crate) fn rmap_remove_pte(&mut self, page: Pfn) {
        let head = self.folios.head(page);
        self.folios.dec_mapcount(page);
        if self.folios.page_mapcount(page) == 0 {
            let stat =
                if self.folios.is_anon(head) { VmStat::NrAnonPages } else { VmStat::NrMapped };
            self.vmstat.sub(stat, 1);
        }
    }

    /// `folio_move_anon_rmap`: a reused folio now belongs to `vma`'s own anon_vma.
    pub(crate) fn rmap_move_anon(&mut self, folio: Pfn, vma: VmaId) {
        let v = self.vma(vma);
        let av = v.anon_vma.expect("reuse in a VMA without anon_vma");
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
        let rel = u64::from(self.folios.meta(head).index);
        match self.folios.mapping(head) {
            Mapping::Anon(av) => self.anon_vmas[av].base + rel,
            Mapping::File(_) | Mapping::None => rel,
        }
    }

    /// Where `page` may be mapped: `(mm, vma, address)` for every candidate VMA covering it
    /// (`rmap_walk`); callers check the page table for an actual mapping.
    pub fn rmap_walk(&self, page: Pfn) -> Vec<(MmId, VmaId, VirtAddr)> {
        let head = self.folios.head(page);
        let index = self.folio_index(head) + (page.0 - head.0);
        let candidates: Vec<VmaId> = match self.folios.mapping(head) {
            Mapping::None => Vec::new(),
            Mapping::Anon(av) => self.anon_vmas[av].vmas.clone(),
            Mapping::File(inode) => self.inodes[inode].mapping.i_mmap.iter().copied().collect(),
        };
        candidates
            .into_iter()
            .filter_map(|id| {
                let v = self.vma(id);
                v.address_of(index).map(|a| (v.mm, id, a))
            })
            .collect()
    }

    /// The PTEs that map `page` now (walks rmap candidates and checks their page tables).
    pub fn rmap_mappers(&self, page: Pfn) -> Vec<(MmId, VmaId, VirtAddr)> {
        self.rmap_walk(page)
            .into_iter()
            .filter(|&(mm, _, addr)| {
                self.pt
                    .translate(self.mm(mm).pgd, addr)
                    .is_some_and(|(pte, _)| pte.is_present() && !pte.special() && pte.pfn() == page)
            })
            .collect()
    }
}
