//! The copy-on-write reuse rule of `do_wp_page`, selected by the `cow_reuse` switch (seed `004`,
//! `docs/reference/kernel-semantics.md` section E).
//!
//! When a write (or an unshare request) hits a read-only PTE of an anonymous page in a private
//! mapping, the kernel either *reuses* the page or *copies* it. Four rules, called with the PTE
//! lock held:
//!
//! - `mapcount_swapcount` (up to v5.8, `reuse_swap_page`): reuse when the page's mapcount plus
//!   its swap count is at most 1; a reused page leaves the swap cache.
//! - `page_count` (v5.9 to v5.18, Linus Torvalds' `do_wp_page` simplification 09854ba94c6a):
//!   reuse only when the page's reference count is exactly 1 (so any extra reference — a GUP
//!   pin, the swap cache — forces a copy). From v5.18 an unused swap-cache reference is dropped
//!   first.
//! - `mapcount` (the seed: Andrea Arcangeli's "COW: restore full accuracy in page reuse"): the
//!   `reuse_swap_page` rule again, in a v5.9+ kernel; a GUP pin is an anchor, not a reason to copy.
//! - `anon_exclusive` (v5.19+, `wp_can_reuse_anon_folio`): a PageAnonExclusive page is reused at
//!   once; otherwise a small folio whose only reference is this mapping (after dropping an unused
//!   swap-cache reference) is reused and becomes exclusive; large folios are copied until v6.15,
//!   which reuses one mapped only by the faulting mm and referenced only by its mappings
//!   ([`large_anon_reuse`]).
//!
//! Approximation: where the kernel would sleep for the folio lock before deciding (the
//! `reuse_swap_page` rules), the model decides "copy" if the folio is locked at that instant.

use crate::era::CowReuse;
use crate::era::KernelVersion;
use crate::folio::folio_trylock;
use crate::folio::pg;
use crate::kernel::KState;
use crate::pgtable::Pte;
use crate::types::ids::MmId;
use crate::vma::VmFlags;
use simcore::Pfn;

/// Whether a write fault may reuse anonymous page `page` (of folio `head`) in place;
/// `drops_swapcache` is [`crate::era::page_count_reuse_drops_swapcache`].
pub(crate) fn can_reuse_anon(
    st: &mut KState,
    rule: CowReuse,
    drops_swapcache: bool,
    head: Pfn,
    page: Pfn,
) -> bool {
    match rule {
        CowReuse::MapcountSwapcount | CowReuse::Mapcount => {
            with_trylock(st, head, |st| reuse_swap_page(st, head, page))
        }
        CowReuse::PageCount => page_count_reuse(st, drops_swapcache, head, page),
        CowReuse::AnonExclusive => anon_exclusive_reuse(st, head, page),
    }
}

/// Runs `decide` with the folio locked (trylock); false if the lock is taken.
fn with_trylock(st: &mut KState, head: Pfn, decide: impl FnOnce(&mut KState) -> bool) -> bool {
    if !folio_trylock(&mut st.folios, head) {
        return false;
    }
    let reuse = decide(st);
    st.folios.clear_flag(head, pg::LOCKED);
    reuse
}

/// `reuse_swap_page` (v5.8), with the folio locked by the caller: mapcount + swapcount <= 1;
/// a reused page leaves the swap cache.
pub(crate) fn reuse_swap_page(st: &mut KState, head: Pfn, page: Pfn) -> bool {
    let swapcount = st.swap.slot_of(head).map_or(0, |slot| st.swap.count(slot));
    if st.folios.folio_mapcount(head) + swapcount > 1 {
        return false;
    }
    if st.folios.test(head, pg::SWAPCACHE) && !st.folios.test(head, pg::WRITEBACK) {
        st.folio_free_swap(head);
    }
    st.folios.set(page, pg::ANON_EXCLUSIVE);
    true
}

/// The v5.9 rule: `page_count() == 1`.
fn page_count_reuse(st: &mut KState, drops_swapcache: bool, head: Pfn, page: Pfn) -> bool {
    if st.folios.large(head).is_some() {
        return false;
    }
    let swapcache = u32::from(st.folios.test(head, pg::SWAPCACHE));
    if drops_swapcache && swapcache == 1 && st.folios.refcount(head) == 2 {
        with_trylock(st, head, |st| st.folio_free_swap(head));
    }
    if st.folios.refcount(head) != 1 {
        return false;
    }
    with_trylock(st, head, |st| {
        let reuse = st.folios.page_mapcount(page) == 1 && st.folios.refcount(head) == 1;
        if reuse {
            st.folios.set(page, pg::ANON_EXCLUSIVE);
        }
        reuse
    })
}

/// `wp_can_reuse_anon_folio` with the PageAnonExclusive fast path of `do_wp_page`.
fn anon_exclusive_reuse(st: &mut KState, head: Pfn, page: Pfn) -> bool {
    if st.folios.test(page, pg::ANON_EXCLUSIVE) {
        return true;
    }
    if st.folios.large(head).is_some() {
        return false;
    }
    let swapcache = u32::from(st.folios.test(head, pg::SWAPCACHE));
    if st.folios.refcount(head) > 1 + swapcache {
        return false;
    }
    with_trylock(st, head, |st| {
        if st.folios.test(head, pg::SWAPCACHE) {
            st.folio_free_swap(head);
        }
        let exclusive = st.folios.refcount(head) == 1;
        if exclusive {
            st.folios.set(page, pg::ANON_EXCLUSIVE);
        }
        exclusive
    })
}

/// `__wp_can_reuse_large_anon_folio` (v6.15, "mm: Copy-on-Write (COW) reuse support for
/// PTE-mapped THP", 1da190f4d0a6; `era::reuses_large_anon_folios`), for a page of a large
/// folio that is not exclusive: the folio is reused when more than one of its pages is mapped
/// (one left alone is copied, which frees the folio), every mapping is in `mm`'s page tables
/// (the kernel's per-folio MM ids are not shared) and, after an unused swap-cache reference is
/// dropped, every reference is a mapping. The faulting page alone becomes exclusive.
pub(crate) fn large_anon_reuse(st: &mut KState, mm: MmId, head: Pfn, page: Pfn) -> bool {
    let nr = st.folios.order(head).pages();
    if st.folios.folio_mapcount(head) <= 1
        || !(0..nr).all(|i| st.rmap_mappers(head + i).iter().all(|m| m.mm == mm))
    {
        return false;
    }
    if st.folios.test(head, pg::SWAPCACHE)
        && !with_trylock(st, head, |st| {
            st.folio_free_swap(head);
            true
        })
    {
        return false;
    }
    let exclusive = st.folios.folio_mapcount(head) == st.folios.refcount(head);
    if exclusive {
        st.folios.set(page, pg::ANON_EXCLUSIVE);
    }
    exclusive
}

/// Whether, after a COW copy, an old page left only in the swap cache is freed at once
/// ("mm: free idle swap cache page after COW", v5.14; the seed reverts it); `idle_freed` is
/// [`crate::era::frees_idle_swapcache_after_cow`].
pub(crate) fn frees_idle_swapcache_after_copy(rule: CowReuse, idle_freed: bool) -> bool {
    match rule {
        CowReuse::PageCount => idle_freed,
        CowReuse::AnonExclusive => true,
        CowReuse::MapcountSwapcount | CowReuse::Mapcount => false,
    }
}

/// Whether fork copies a possibly pinned exclusive anonymous page for the child instead of
/// sharing it ("mm: Do early cow for pinned pages during fork()", v5.9).
pub(crate) fn fork_copies_pinned(rule: CowReuse) -> bool {
    rule != CowReuse::MapcountSwapcount
}

/// Whether clear_refs leaves the PTE of a possibly pinned page writable (v5.11 9348b73c2e1b,
/// which the seed reverts; kept by the v5.19 rule); `keeps_pinned` is
/// [`crate::era::clear_refs_keeps_pinned_writable`].
pub(crate) fn clear_refs_skips_pinned(rule: CowReuse, keeps_pinned: bool) -> bool {
    match rule {
        CowReuse::PageCount => keeps_pinned,
        CowReuse::AnonExclusive => true,
        CowReuse::MapcountSwapcount | CowReuse::Mapcount => false,
    }
}

/// Whether `change_pte_range` maps the read-only `pte` of a VMA whose new flags are `flags`
/// writable at once (`can_change_pte_writable`), so that the next write does not fault; the
/// caller checked that the VMA allows writes and wants the test (`MM_CP_TRY_CHANGE_WRITABLE`).
pub(crate) fn can_change_pte_writable(
    st: &KState,
    kernel: KernelVersion,
    flags: VmFlags,
    pte: Pte,
) -> bool {
    let shared = flags.has(VmFlags::SHARED);
    if !crate::era::mprotect_upgrades_exclusive_anon(kernel) {
        // `dirty_accountable`: only shared mappings, with the soft-dirty test as written.
        return shared && pte.dirty() && (pte.soft_dirty() || !flags.has(VmFlags::SOFTDIRTY));
    }
    // `userfaultfd_pte_wp`: the handler must see the write (`userfaultfd/wp.rs`).
    if flags.has(VmFlags::UFFD_WP) && pte.uffd_wp() {
        return false;
    }
    // `vma_soft_dirty_enabled`: tracking is on while VM_SOFTDIRTY is clear.
    if !flags.has(VmFlags::SOFTDIRTY) && !pte.soft_dirty() {
        return false;
    }
    if shared {
        return pte.dirty();
    }
    let clean_ok = crate::era::mprotect_upgrades_clean_exclusive_anon(kernel);
    (pte.dirty() || clean_ok)
        && pte.normal_pfn().is_some_and(|page| {
            st.folios.is_anon(st.folios.head(page)) && st.folios.test(page, pg::ANON_EXCLUSIVE)
        })
}
