//! KSM-placed zero pages (`include/linux/ksm.h`: `is_ksm_zero_pte`, `ksm_map_zero_page`,
//! `ksm_might_unmap_zero_page`; `mm/ksm.c`: `replace_page`, `break_ksm`; from v6.6,
//! `era::has_ksm_zero_pages`; read in v6.8 and v6.18).
//!
//! With `use_zero_pages`, ksmd maps the shared zero page in place of a page of zeros. From
//! v6.6 it marks that PTE dirty, which no other zero-page PTE is, and counts the page, machine
//! wide (`/sys/kernel/mm/ksm/ksm_zero_pages`) and per mm (`/proc/PID/ksm_stat`'s
//! `ksm_zero_pages`). The count drops when such a PTE goes: zapped (`munmap`, `MADV_DONTNEED`,
//! exit), replaced by a write fault's copy (`wp_page_copy`), or emptied by a collapse into a THP
//! (`__collapse_huge_page_copy_succeeded`). `break_ksm` treats such a PTE as a KSM page, so
//! `MADV_UNMERGEABLE` and `run` 2 unshare it (a fault gives the address a page of its own);
//! before v6.6 the zero pages KSM placed stay mapped through both.
//!
//! A fork copies the dirty zero-page PTEs with the rest; v6.18's `ksm_fork` gives the child the
//! parent's per-mm count (copied with the mm) and adds it to the machine's, which the model does
//! in every era from v6.6 (the releases between may count a forked child's pages differently:
//! the fix of that accounting was not pinned to a release here).

use crate::kernel::KState;
use crate::pgtable::Pte;
use crate::types::ids::MmId;

impl KState {
    /// `is_ksm_zero_pte`: `pte` maps the zero page KSM placed (v6.6+: its dirty bit says so).
    pub(crate) fn is_ksm_zero_pte(&self, pte: Pte) -> bool {
        crate::era::has_ksm_zero_pages(self.thp.kernel)
            && pte.is_present()
            && pte.pfn() == self.zero_pfn
            && pte.dirty()
    }

    /// The PTE bits beyond the VMA's that `replace_page` gives a zero page it maps: dirty from
    /// v6.6, to mark it as KSM's (x86's `pte_mkdirty` sets the soft-dirty bit too).
    pub(crate) fn ksm_zero_pte_bits(&self) -> u64 {
        if crate::era::has_ksm_zero_pages(self.thp.kernel) {
            Pte::DIRTY | Pte::SOFT_DIRTY
        } else {
            0
        }
    }

    /// `ksm_map_zero_page`: counts a zero page KSM mapped in `mm` (v6.6+).
    pub(crate) fn ksm_map_zero_page(&mut self, mm: MmId) {
        if crate::era::has_ksm_zero_pages(self.thp.kernel) {
            self.ksm.zero_pages += 1;
            self.mm_mut(mm).ksm_zero_pages += 1;
        }
    }

    /// `ksm_might_unmap_zero_page`: `pte`, just cleared or replaced in `mm`, uncounted if it
    /// was a KSM-placed zero page.
    pub(crate) fn ksm_might_unmap_zero_page(&mut self, mm: MmId, pte: Pte) {
        if self.is_ksm_zero_pte(pte) {
            self.ksm.zero_pages -= 1;
            self.mm_mut(mm).ksm_zero_pages -= 1;
        }
    }

    /// `ksm_fork`'s accounting: the child's count, copied with the mm, joins the machine's.
    pub(crate) fn ksm_fork_zero_pages(&mut self, child: MmId, parent: MmId) {
        let n = self.mm(parent).ksm_zero_pages;
        self.mm_mut(child).ksm_zero_pages = n;
        self.ksm.zero_pages += n;
    }
}
