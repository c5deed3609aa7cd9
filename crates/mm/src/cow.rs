//! The copy-on-write reuse rule of `do_wp_page`, selected by the `cow_reuse` switch (seed `004`).
//!
//! When a write hits a read-only PTE of an anonymous page in a private mapping, the kernel either
//! *reuses* the page (makes the PTE writable) or *copies* it. The rules changed three times
//! (`shared/reference/kernel-semantics.md` section E); this module holds the decision, kept apart
//! from the fault mechanics in `fault.rs`.
//!
//! Implemented so far: `anon_exclusive` (v5.19 and later, `mm/memory.c` `wp_can_reuse_anon_folio`
//! as of v6.8): a page marked `PageAnonExclusive` is reused at once; otherwise a small, unlocked
//! folio whose only reference is this mapping (after dropping an unused swap-cache reference) is
//! reused and becomes exclusive; large folios are always copied. The other rules are refused by
//! `Switches::check_implemented` until they are modelled.

use crate::era::CowReuse;
use crate::filemap::folio_trylock;
use crate::folio::pg;
use crate::kernel::KState;
use simcore::Pfn;

/// Whether the write fault may reuse anonymous page `page` (of folio `head`) in place.
/// Called with the PTE lock held, as in the kernel.
pub(crate) fn can_reuse_anon(st: &mut KState, rule: CowReuse, head: Pfn, page: Pfn) -> bool {
    match rule {
        CowReuse::AnonExclusive => anon_exclusive_reuse(st, head, page),
        other => {
            panic!("cow_reuse = {other} is not modelled (Switches::check_implemented refuses it)")
        }
    }
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
    if !folio_trylock(st, head) {
        return false;
    }
    let exclusive = st.folios.refcount(head) == 1;
    if exclusive {
        st.folios.set(page, pg::ANON_EXCLUSIVE);
    }
    st.folios.clear_flag(head, pg::LOCKED);
    exclusive
}
