//! hugetlb's part of `mremap` (`mm/hugetlb.c` `move_hugetlb_page_tables`, `move_huge_pte`,
//! `clear_vma_resv_huge_pages`; "mm, hugepages: add mremap() support for hugepage backed vma",
//! 550a7d60bd5e, v5.16; `era::mremap_handles_hugetlb`).
//!
//! Under the VMA's hugetlb lock for write (v6.1) and the file's `i_mmap_rwsem` for write (every
//! era from v5.16), the old range is walked a huge page at a time. An entry in a shared PMD table
//! is not moved: the table is unshared (`huge_pmd_unshare`) and the rest of its PUD range
//! skipped, so those pages stay in the page cache and the new range faults them in again. Any
//! other present entry moves, under the old and new entries' page-table locks, to the slot
//! `huge_pte_alloc` makes for the new VMA (which may share another process's PMD table there).
//! Pages keep their mapcounts and references; `HugetlbPages` does not change. Where no table
//! covers a stretch the walk jumps to the next PUD, as the kernel's `last_addr_mask` does.
//!
//! A private mapping's reservations go with the move: the new VMA took a reference to the old
//! one's reservation map when it was made (`hugetlb_vm_op_open`), and the old VMA drops its own
//! without giving reservations back (`clear_vma_resv_huge_pages`), so unmapping the old range
//! returns none.

use crate::arch::tlbflush::flush_tlb_range;
use crate::hugetlb::hugetlb_fault::Ptep;
use crate::hugetlb::pmd_share::huge_pte_alloc_at;
use crate::hugetlb::unmap::unmap_locks;
use crate::kernel::{Cx, KState};
use crate::pgtable::Pte;
use crate::sim::cost::Cost;
use crate::types::hugetlb::HugeSize;
use crate::types::ids::VmaId;
use simcore::{Bytes, VirtAddr};

/// `PUD_SIZE`.
const PUD: Bytes = Bytes(1 << 30);

/// `move_hugetlb_page_tables`: moves the entries of `[from, from + len)` of `vma` to the same
/// offsets from `to` in `new_vma`. On failure to allocate a page table, the length moved so far.
pub(crate) async fn move_hugetlb_page_tables(
    cx: &Cx,
    vma: VmaId,
    new_vma: VmaId,
    from: VirtAddr,
    to: VirtAddr,
    len: Bytes,
) -> Result<(), Bytes> {
    let (mm, size) = {
        let st = cx.st();
        (st.vma(vma).mm, st.hstate_vma(vma).expect("a hugetlb VMA"))
    };
    let locks = unmap_locks(cx, vma).await;
    let step = size.bytes();
    let mut off = 0;
    let mut moved = 0;
    let mut result = Ok(());
    while off < len.as_u64() {
        let (old, new) = (from + Bytes(off), to + Bytes(off));
        let next_pud = old.align_down(PUD).0 + PUD.as_u64() - from.0;
        let Some(src) = cx.st().huge_pte_offset(mm, old, size) else {
            off = next_pud;
            continue;
        };
        if cx.st().huge_ptep_get(src).is_none() {
            off += step;
            continue;
        }
        if size == HugeSize::Size2M && cx.st().huge_pmd_unshare(mm, old) {
            off = next_pud;
            continue;
        }
        let Ok(dst) = huge_pte_alloc_at(cx, mm, new_vma, new, size).await else {
            result = Err(Bytes(off));
            break;
        };
        let (src_ptl, dst_ptl) = {
            let st = cx.st();
            (st.huge_pte_lockptr(mm, size, src), st.huge_pte_lockptr(mm, size, dst))
        };
        let _s = src_ptl.lock(cx).await;
        let _d = if dst_ptl == src_ptl { None } else { Some(dst_ptl.lock(cx).await) };
        move_huge_pte(&mut cx.st(), src, dst);
        moved += 1;
        off += step;
    }
    cx.charge_n(Cost::PteUpdate, moved).await;
    flush_tlb_range(cx, mm, from, from + len).await;
    drop(locks);
    result
}

/// `move_huge_pte`: the entry at `src` moves to the empty `dst`.
fn move_huge_pte(st: &mut KState, src: Ptep, dst: Ptep) {
    let pte = st.huge_ptep_get(src);
    debug_assert!(st.huge_ptep_get(dst).is_none(), "moving onto a mapped hugetlb entry");
    st.set_huge_pte(src, Pte::NONE);
    st.set_huge_pte(dst, pte);
}

impl KState {
    /// `clear_vma_resv_huge_pages`: after a move, the old VMA drops its reference to its private
    /// reservation map without returning reservations (the new VMA owns them now).
    pub(crate) fn clear_vma_resv_huge_pages(&mut self, vma: VmaId) {
        let resv = self.hugetlb.vmas.get_mut(&vma).and_then(|h| h.resv.take());
        if let Some(id) = resv {
            self.hugetlb.put_resv_map(id);
        }
    }
}
