//! `/proc/kpageflags` and `/proc/kpagecount` (`fs/proc/page.c`, the bits of
//! `include/uapi/linux/kernel-page-flags.h`, `Documentation/admin-guide/mm/pagemap.rst`), read
//! at the frame pagemap gives for an address, as root reads them.
//!
//! `stable_page_flags` (v6.8): the `PG_*` flags shown as `KPF_*` bits (a THP's tail page shows
//! its own, none, before v6.10 and its folio's from then: `era::kpageflags_from_folio`;
//! `KPF_SWAPCACHE` is the folio's in every era), `KPF_MMAP` when the folio is mapped
//! (`page_mapped` of a compound page asks about the whole folio), `KPF_ANON` for anonymous folios, `KPF_COMPOUND_HEAD`/`TAIL` for the pages of a
//! large folio, `KPF_HUGE` for hugetlb pages, `KPF_THP` for the pages of a large folio that is
//! anonymous or on an LRU list (v6.8's rule, which marks multi-size THPs and large page-cache
//! folios too; v6.10's "large and rmappable" reads the same for the model's folios), `KPF_ZERO_PAGE` for
//! the zero page and the huge zero page (which also has `KPF_THP`), `KPF_BUDDY` for a free
//! frame (approximation: the model frees to the buddy lists at once, where the kernel first
//! keeps a freed order-0 page on a per-CPU list, `PageBuddy` unset, until the list drains: on a
//! real kernel a just-freed page usually shows no `KPF_BUDDY`), `KPF_NOPAGE` where there is no
//! frame. Every bit shown predates the modelled range
//! (v4.0): `KPF_ZERO_PAGE` came in v4.0 (56873f43abdc "mm: page_alloc: expose the zero page
//! in /proc/kpageflags", not verified); the later bits (`KPF_IDLE` v4.3, `KPF_PGTABLE` v4.19,
//! `KPF_OFFLINE` v5.0) are about state the model does not keep and are never set. A page KSM
//! merged shows `KPF_KSM` with `KPF_ANON` (a stable page's mapping is anonymous, `PageKsm`
//! compares both mapping bits). From v6.10 to the model's last version every anonymous page
//! shows `KPF_KSM`, merged or not (`era::kpageflags_ksm_for_every_anon`: the rewrite of
//! `stable_page_flags`, dee3d0bef2b0, tests only that some bit of `PAGE_MAPPING_KSM` is set;
//! fixed in v7.2 by 81401cebfc15, and in the stable series that took the fix: 6.18.y by
//! 6.18.44, 7.1.y, not 6.12.y as of 6.12.118).
//!
//! `kpagecount` is `page_mapcount()` of the page (v6.8: `folio_precise_page_mapcount` came
//! later with the folio mapcount rework, which for the model's folios reads the same: PTE
//! mappings of the page plus the folio's PMD mappings; not verified), 0 for a free frame, the
//! zero pages and a hole.

use crate::folio::pg;
use crate::kernel::KState;
use simcore::Pfn;
use std::fmt::Write;

/// `KPF_*` bit numbers by name, in bit order.
pub const KPF: [(&str, u32); 21] = [
    ("LOCKED", 0),
    ("REFERENCED", 2),
    ("UPTODATE", 3),
    ("DIRTY", 4),
    ("LRU", 5),
    ("ACTIVE", 6),
    ("WRITEBACK", 8),
    ("RECLAIM", 9),
    ("BUDDY", 10),
    ("MMAP", 11),
    ("ANON", 12),
    ("SWAPCACHE", 13),
    ("SWAPBACKED", 14),
    ("COMPOUND_HEAD", 15),
    ("COMPOUND_TAIL", 16),
    ("HUGE", 17),
    ("UNEVICTABLE", 18),
    ("NOPAGE", 20),
    ("KSM", 21),
    ("THP", 22),
    ("ZERO_PAGE", 24),
];

/// The bit of `KPF_<name>`.
pub fn kpf_bit(name: &str) -> Option<u32> {
    KPF.iter().find(|(n, _)| *n == name).map(|&(_, b)| b)
}

/// page-types' one-letter abbreviations of [`KPF`] (`tools/mm/page-types.c`).
const LETTERS: [char; 21] = [
    'L', 'R', 'U', 'D', 'l', 'A', 'W', 'I', 'B', 'M', 'a', 's', 'b', 'H', 'T', 'G', 'u', 'n', 'x',
    't', 'z',
];

impl KState {
    /// `/proc/kpageflags` of frame `pfn` (`None`: no frame, `KPF_NOPAGE`).
    pub fn kpageflags(&self, pfn: Option<Pfn>) -> u64 {
        let Some(pfn) = pfn else { return 1 << 20 };
        let bit = |name: &str| 1u64 << kpf_bit(name).expect("a KPF name");
        if self.is_zero_pfn(pfn) {
            let huge = Some(pfn) != Some(self.zero_pfn);
            return bit("ZERO_PAGE") | if huge { bit("THP") } else { 0 };
        }
        if let Some((head, _, free)) = self.hugetlb.containing(pfn) {
            let part = if head == pfn { bit("COMPOUND_HEAD") } else { bit("COMPOUND_TAIL") };
            return if free { bit("HUGE") | part } else { bit("HUGE") | part | bit("MMAP") };
        }
        if self.buddy.is_free(pfn) || self.is_pmem_pfn(pfn) {
            return if self.buddy.is_free(pfn) { bit("BUDDY") } else { 0 };
        }
        let (head, k) = (self.folios.head(pfn), self.thp.kernel);
        let folio_flags = self.folios.meta(head).flags;
        // Before v6.10 a tail page's own flags, which the model never sets.
        let from_folio = head == pfn || crate::era::kpageflags_from_folio(k);
        let flags = if from_folio { folio_flags } else { 0 };
        let mut u = 0;
        for (name, flag) in [
            ("LOCKED", pg::LOCKED),
            ("REFERENCED", pg::REFERENCED),
            ("UPTODATE", pg::UPTODATE),
            ("DIRTY", pg::DIRTY),
            ("LRU", pg::LRU),
            ("ACTIVE", pg::ACTIVE),
            ("WRITEBACK", pg::WRITEBACK),
            ("RECLAIM", pg::RECLAIM),
            ("SWAPBACKED", pg::SWAPBACKED),
            ("UNEVICTABLE", pg::UNEVICTABLE),
        ] {
            if flags & flag != 0 {
                u |= bit(name);
            }
        }
        if folio_flags & pg::SWAPCACHE != 0 {
            u |= bit("SWAPCACHE");
        }
        if self.folios.folio_mapcount(head) > 0 {
            u |= bit("MMAP");
        }
        if self.folios.is_anon(head) {
            u |= bit("ANON");
            // From v6.10 every anonymous page passes the KSM test (the module note).
            if self.folios.is_ksm(head) || crate::era::kpageflags_ksm_for_every_anon(k) {
                u |= bit("KSM");
            }
        }
        if self.folios.large(head).is_some() {
            u |= if head == pfn { bit("COMPOUND_HEAD") } else { bit("COMPOUND_TAIL") };
            if self.folios.is_anon(head) || folio_flags & pg::LRU != 0 {
                u |= bit("THP");
            }
        }
        u
    }

    /// `/proc/kpagecount` of frame `pfn`.
    pub fn kpagecount(&self, pfn: Option<Pfn>) -> u64 {
        let Some(pfn) = pfn else { return 0 };
        if self.is_zero_pfn(pfn) || self.buddy.is_free(pfn) || self.is_pmem_pfn(pfn) {
            return 0;
        }
        if let Some((head, ..)) = self.hugetlb.containing(pfn) {
            return u64::from(self.hugetlb.page(head).map_or(0, |p| p.mapcount));
        }
        let head = self.folios.head(pfn);
        u64::from(self.folios.page_mapcount(pfn) + self.folios.entire_mapcount(head))
    }

    /// What `page-types -L -p PID` prints for the present pages of the mapping `vma` of `mm`:
    /// per page its virtual page number, frame, kpagecount, flags in page-types' letters, and
    /// their long names.
    pub fn page_types(&self, mm: crate::types::ids::MmId, vma: crate::types::ids::VmaId) -> String {
        let v = self.vma(vma);
        let mut out = String::from("voffset\toffset\tcount\tflags\n");
        let pages = (v.end.0 - v.start.0) >> 12;
        let entries = self.pagemap(mm, v.start, pages);
        for (i, e) in entries.into_iter().enumerate() {
            if e & super::PM_PRESENT == 0 {
                continue;
            }
            let pfn = Pfn(e & super::PM_PFN_MASK);
            let u = self.kpageflags(Some(pfn));
            let letters: String = KPF
                .iter()
                .zip(LETTERS)
                .map(|(&(_, b), c)| if u & (1 << b) != 0 { c } else { '_' })
                .collect();
            let long: Vec<&str> =
                KPF.iter().filter(|&&(_, b)| u & (1 << b) != 0).map(|(n, _)| *n).collect();
            let count = self.kpagecount(Some(pfn));
            let vpn = (v.start.0 >> 12) + i as u64;
            let _ = writeln!(out, "{vpn:x}\t{:x}\t{count}\t{letters}\t{}", pfn.0, long.join(","));
        }
        out
    }
}
