//! GUP references and pins on hugetlb pages (`mm/gup.c` `try_grab_folio` and `gup_put_folio` on
//! a hugetlb folio, `mm/hugetlb.c` `follow_hugetlb_page`, then `hugetlb_follow_page_mask` from
//! 57a196a58421 "hugetlb: simplify hugetlb handling in follow_page_mask" (its version not
//! checked; both walks take the same references); `include/linux/mm.h`
//! `folio_maybe_dma_pinned`).
//!
//! A huge page is a large folio: FOLL_GET takes one reference per base page taken, FOLL_PIN one
//! reference and one `_pincount` per base page (the exact pin count of large folios, "mm/gup:
//! page->hpage_pinned_refcount: exact pin counts for huge pages", 47e29d32afba, v5.7, id not verified; the model
//! counts pins this way in every era, as it does for THPs). They are kept beside the page's
//! [`HPage`], only for pages that have any ([`HugeGup`]), and are inside its `refs`.
//!
//! `PageAnonExclusive` on hugetlb pages (v5.19, 6c287605fd56 "mm: remember exclusively mapped
//! anonymous pages with PG_anon_exclusive", which covers hugetlb too): a new anonymous page is exclusive; fork clears the
//! flag of a page it shares (`page_try_dup_anon_rmap`); `hugetlb_wp` sets it again when it
//! reuses a page mapped once. The flag is kept in every era and read only under the
//! `anon_exclusive` `cow_reuse` rule.
//!
//! Fork and pins: from "hugetlb: do early cow when page pinned on src mm" (4eae4efa2c29, v5.12,
//! `era::hugetlb_fork_copies_pinned`) fork gives the child its own copy of a possibly pinned
//! anonymous page of a COW mapping in an mm that has pinned pages (`page_needs_cow_for_dma`;
//! under the v5.19 rule only an exclusive one), mapped writable, and leaves the parent's entry
//! writable; before, the page is shared write-protected and the parent's next write copies it,
//! so the pin no longer sees what the parent writes (the `cow.c` hugetlb failures). The kernel
//! drops the page-table locks to allocate and copy and then re-checks the source entry; the
//! model allocates and copies under them, in one step. v5.12 checks `page_needs_cow_for_dma`
//! for any page of the mapping; the model copies only anonymous pages (the v5.19 shape).

use crate::kernel::KState;
use crate::mm_struct::MMF_HAS_PINNED;
use crate::types::hugetlb::HugeGup;
use crate::types::hugetlb::{HPage, Owner};
use crate::types::ids::MmId;
use simcore::Pfn;

impl super::Hugetlb {
    /// The GUP references on huge page `head`.
    pub(crate) fn gup_of(&self, head: Pfn) -> HugeGup {
        self.gup.get(&head.0).copied().unwrap_or_default()
    }
}

impl KState {
    /// The head of the hugetlb page holding frame `pfn`, if it is one (in use).
    pub(crate) fn hugetlb_head(&self, pfn: Pfn) -> Option<Pfn> {
        self.hugetlb.containing(pfn).filter(|&(_, _, free)| !free).map(|(head, _, _)| head)
    }

    /// `try_grab_folio` on a huge page: one reference, and one pin for FOLL_PIN.
    pub(crate) fn hugetlb_grab(&mut self, head: Pfn, pin: bool) {
        self.hugetlb.page_mut(head).refs += 1;
        let g = self.hugetlb.gup.entry(head.0).or_default();
        g.refs += 1;
        g.pins += u32::from(pin);
    }

    /// `gup_put_folio` (or a pipe's `put_page`) on a huge page; frees it on the last reference.
    pub(crate) fn hugetlb_put_gup(&mut self, head: Pfn, pin: bool) {
        let g = self.hugetlb.gup.get_mut(&head.0).expect("a GUP reference on the huge page");
        g.refs -= 1;
        if pin {
            g.pins = g.pins.checked_sub(1).expect("unpin of an unpinned huge page");
        }
        if g.refs == 0 {
            self.hugetlb.gup.remove(&head.0);
        }
        self.put_huge_folio(head, 1);
    }

    /// Whether GUP may take huge page `head` without unsharing it first (`gup_must_unshare`'s
    /// anonymous case): `None` for a page that is not anonymous, else its `PageAnonExclusive`.
    pub(crate) fn hugetlb_anon_exclusive(&self, head: Pfn) -> Option<bool> {
        let p = self.huge_page(head);
        (p.owner == Owner::Anon).then_some(p.anon_exclusive)
    }

    /// `page_needs_cow_for_dma` for a hugetlb page at fork: an anonymous page that may be
    /// pinned, in an mm that has pinned pages, exclusive under the v5.19 rule.
    pub(crate) fn hugetlb_needs_cow_for_dma(&self, src_mm: MmId, head: Pfn, rule: bool) -> bool {
        let page: &HPage = self.huge_page(head);
        self.mm(src_mm).flags & MMF_HAS_PINNED != 0
            && page.owner == Owner::Anon
            && self.hugetlb.gup_of(head).pins > 0
            && (!rule || page.anon_exclusive)
    }
}
