//! userfaultfd write-protection of anonymous memory (fs/userfaultfd.c `userfaultfd_writeprotect`;
//! mm/userfaultfd.c `mwriteprotect_range`, `uffd_wp_range`; mm/mprotect.c `change_pte_range`'s
//! `MM_CP_UFFD_WP`/`MM_CP_UFFD_WP_RESOLVE`; mm/memory.c `do_wp_page`'s `userfaultfd_pte_wp`;
//! Linux v5.7 to v6.19, `era::uffd_wp_anon`). The ioctl is `userfaultfd/writeprotect.rs`; this
//! file holds the page-table walk and the fault path's tests, which the fault path, fork and
//! the release reach without the ioctl's imports.
//!
//! A VMA registered with `UFFDIO_REGISTER_MODE_WP` (`VM_UFFD_WP`, private anonymous memory
//! only) lets the handler write-protect its pages: `UFFDIO_WRITEPROTECT` with
//! `UFFDIO_WRITEPROTECT_MODE_WP` sets the uffd-wp bit of every PTE in the range (x86's
//! `_PAGE_UFFD_WP`, software bit 10; the PTE is made read-only with it) and of every swap entry
//! (`_PAGE_SWP_UFFD_WP`, bit 2); without the mode bit it clears them ("resolves"), and then wakes
//! the faults waiting in the range unless `UFFDIO_WRITEPROTECT_MODE_DONTWAKE` (both mode bits
//! together are EINVAL, as is any other bit). Empty PTEs stay empty: a write there is an
//! ordinary fault (or a missing one, in missing mode). `UFFDIO_COPY_MODE_WP` installs the copied
//! page write-protected (`userfaultfd/mfill.rs`).
//!
//! A write to a uffd-wp PTE of such a VMA takes the write-protect fault, and `do_wp_page` sends
//! it to the handler before anything else (`handle_userfault(vmf, VM_UFFD_WP)`: the message
//! carries `UFFD_PAGEFAULT_FLAG_WP | UFFD_PAGEFAULT_FLAG_WRITE`), so COW reuse never sees the
//! page: a write-protected anonymous page is never made writable in place by `wp_page_reuse`,
//! whatever the `cow_reuse` rule says (mm/memory.c v6.18 `do_wp_page`: the
//! `userfaultfd_pte_wp` test precedes `wp_can_reuse_anon_folio`; an unshare fault, which maps
//! nothing writable, passes). The same holds for an anonymous THP's PMD (`wp_huge_pmd`). The
//! bit is kept where the PTE moves: swap-out and swap-in (`try_to_unmap_one`, `do_swap_page`,
//! which then maps the page read-only), `mprotect` (which never makes such a PTE writable,
//! `can_change_pte_writable`), a THP's PMD split (each PTE gets the PMD's bit); `fork` keeps it
//! in the child only where the child's VMA stays registered (`UFFD_FEATURE_EVENT_FORK`) from
//! v5.16, where the parent's is registered before (`era::fork_uffd_wp_follows_child`).
//! `UFFDIO_UNREGISTER` clears the bits of the range from v6.0 (`era::uffd_unregister_clears_wp`),
//! the descriptor's release those of its VMAs from v6.11 (`era::uffd_release_clears_wp`).
//! Resolving makes the PTE of an exclusive anonymous page writable at once from v6.3
//! (`era::uffd_wp_resolve_makes_writable`); before, and for a shared page, the PTE stays
//! read-only and the next write takes an ordinary write fault. Up to v6.4 the range must lie in
//! one registered VMA (`find_dst_vma`, ENOENT otherwise); from v6.5 it may span several, holes
//! skipped (`era::uffd_writeprotect_spans_vmas`).
//!
//! Approximations: write-protection of shmem and hugetlb (v5.19, PTE markers,
//! `UFFD_FEATURE_WP_HUGETLBFS_SHMEM`), `UFFD_FEATURE_WP_UNPOPULATED` (v6.4),
//! `UFFD_FEATURE_WP_ASYNC` (v6.7) and `UFFDIO_CONTINUE_MODE_WP` (v6.5) are not modelled:
//! registering a shmem or hugetlb VMA in write-protect mode is EINVAL in every era (the kernel
//! takes it from v5.19), and the features are refused by name in scenarios. `mremap` keeps the
//! bits of the moved PTEs even where the moved VMA loses its registration. A pinned page that
//! `fork` copies for the child is mapped without the bit. khugepaged does not look at the bit
//! (the kernel's `hpage_collapse_scan_pmd` refuses a range with a uffd-wp PTE,
//! `SCAN_PTE_UFFD_WP`), nor does `MADV_COLLAPSE`.

use crate::kernel::{Cx, KState};
use crate::pgtable::{Pte, Upper};
use crate::types::ids::VmaId;
use crate::types::userfaultfd::UffdWaiter;
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// Whether the fault `w` waits for is a write-protect fault taken under the per-VMA lock, whose
/// retry comes without `FAULT_FLAG_TRIED` and counts minor (v6.7,
/// `era::uffd_wp_retry_counts_minor`).
pub(crate) fn retry_counts_minor(cx: &Cx, w: UffdWaiter) -> bool {
    let st = cx.st();
    let wp = st
        .uffd
        .ctxs
        .get(&w.ctx)
        .and_then(|c| c.faults.get(&w.id))
        .is_some_and(|f| f.flags & crate::types::userfaultfd::PAGEFAULT_FLAG_WP != 0);
    wp && crate::era::uffd_wp_retry_counts_minor(cx.kernel().version)
}

/// `uffd_wp_range`: `change_protection` of `[start, end)` of VMA `v` (PMD leaves inside it
/// whole) with `MM_CP_UFFD_WP` (`enable`) or `MM_CP_UFFD_WP_RESOLVE`; returns the entries
/// changed. A resolved present PTE takes the VMA's `vm_page_prot` again (read-only in a private
/// VMA), and from v6.3 is made writable when `can_change_pte_writable` allows.
pub(crate) fn uffd_wp_range(
    st: &mut KState,
    v: VmaId,
    (start, end): (VirtAddr, VirtAddr),
    enable: bool,
) -> u64 {
    let (mm, flags) = (st.vma(v).mm, st.vma(v).flags);
    let k = st.thp.kernel;
    let upgrade =
        !enable && flags.has(VmFlags::WRITE) && crate::era::uffd_wp_resolve_makes_writable(k);
    let pgd = st.mm(mm).pgd;
    let mut n = 0;
    let mut addr = start;
    while addr < end {
        if let Some((t, i)) = st.pt.pmd_slot(pgd, addr)
            && let Upper::Leaf(leaf) = st.pt.upper(t, i)
        {
            st.pt.set_upper(t, i, Upper::Leaf(wp_entry(leaf, enable)));
            n += 1;
            addr = addr.align_down(Bytes::PMD) + Bytes::PMD;
            continue;
        }
        let Some((t, i)) = st.pt.pte_slot(pgd, addr) else {
            addr = st.pt.skip_empty(pgd, addr);
            continue;
        };
        let pte = st.pt.pte(t, i);
        if !pte.is_none() {
            let mut new = wp_entry(pte, enable);
            if upgrade && new.is_present() && crate::cow::can_change_pte_writable(st, k, flags, new)
            {
                new = new.with(Pte::RW);
            }
            st.pt.set_pte(t, i, new);
            n += 1;
        }
        addr = addr + Bytes::PAGE;
    }
    n
}

/// One entry write-protected (`pte_mkuffd_wp`, read-only) or resolved (`pte_clear_uffd_wp`,
/// read-only as the private VMA's `vm_page_prot` is); a swap entry's bit alike.
fn wp_entry(e: Pte, enable: bool) -> Pte {
    let e = e.with_uffd_wp(enable);
    if e.is_present() { e.wrprotect() } else { e }
}
