//! `mremap(2)` (`mm/mremap.c`, Linux v6.8; earlier eras where they differ).
//!
//! Arguments (`check_mremap_params`): unknown flags, an unaligned `addr`, a zero `new_len`, and
//! with `MREMAP_FIXED` or `MREMAP_DONTUNMAP` an unaligned `new_address`, no `MREMAP_MAYMOVE`, or
//! (`MREMAP_DONTUNMAP`) `old_len != new_len` are EINVAL. `MREMAP_DONTUNMAP` exists from v5.7
//! (e346b3813067, `era::has_mremap_dontunmap`), for private anonymous mappings only until v5.13
//! (a4609387859f, `era::mremap_dontunmap_any_mapping`), then for any mapping but a
//! `VM_DONTEXPAND`/`VM_PFNMAP` one.
//!
//! Under `mmap_lock` for write:
//! - from v5.16 (550a7d60bd5e, `era::mremap_handles_hugetlb`) the VMA at `addr` is looked up
//!   first (EFAULT without one) and a hugetlb VMA's lengths are rounded up to its huge page
//!   size; an unaligned `addr` or `new_address`, or growth, is EINVAL. Before v5.16 a shrink is
//!   only the munmap of the tail (so it succeeds over an unmapped range) and a hugetlb VMA is
//!   EINVAL wherever mremap needs the VMA (`vma_to_resize`).
//! - Without a new address: a shrink unmaps the tail; a growth checks the VMA (`remap_is_valid`:
//!   the old range must lie in one VMA, else EFAULT; `VM_DONTEXPAND`/`VM_PFNMAP` VMAs do not grow,
//!   EFAULT) and extends it in place when the range ends at the VMA's end and the gap above is
//!   free; otherwise it moves with `MREMAP_MAYMOVE` to a free area, or fails with ENOMEM.
//! - `mremap_to`: a new range past `TASK_SIZE` or overlapping the old one is EINVAL;
//!   `MREMAP_FIXED` unmaps the new range first; a shrink unmaps the old tail; then the VMA is
//!   checked as above and moved (to `new_address`, or with `MREMAP_DONTUNMAP` alone to a free
//!   area with `new_address` as a hint).
//!
//! The move (`move_vma`): a copy of the VMA at the new address keeps the file offset
//! (`vm_pgoff` of `addr`) and joins the old VMA's anon_vmas (`copy_vma`), so rmap finds every
//! page at its new address; `move_page_tables` then moves each entry, the pages with it: PTEs
//! (present, swap or other entries) and whole PMD leaves (`move_huge_pmd`: an anonymous THP with
//! its deposited table, a file THP, a DAX PMD) where both addresses are PMD-aligned and the
//! range covers the PMD, splitting the PMD otherwise. Refcounts, mapcounts and RSS do not change,
//! no page is copied and a later access does not fault; moved entries become soft-dirty
//! (`move_soft_dirty_pte`). The old range is then unmapped, or with `MREMAP_DONTUNMAP` stays
//! mapped and empty: `VM_LOCKED`/`VM_ACCOUNT` are cleared and, when the whole VMA moved, it
//! leaves its anon_vmas, so the next fault maps a new zero-filled page. Should a page-table page
//! not be had for the new range, the moved entries go back, the new VMA is unmapped, and the call
//! is ENOMEM (the kernel's `move_vma` error path).
//!
//! Merging: the moved VMA merges with compatible neighbours at its new address (`copy_vma`'s
//! `vma_merge`, every era; done in the model once the entries have moved and the old range is
//! unmapped), and from v6.1 a VMA grown in place merges with the VMA it now touches ("mm: add
//! merging after mremap resize", ca3d76b0aa80, `mremap_expand_merge`,
//! `era::mremap_expand_merges`); both through `mmap.rs`'s `vma_merge_new`.
//!
//! Approximations and what is left out: no commit accounting (`VM_ACCOUNT` charges) or `RLIMIT_AS`/`max_map_count`
//! checks; growing a `VM_LOCKED` VMA does not populate the new part (`mlock.rs`); no
//! userfaultfd events: a moved VMA a userfaultfd registered loses the registration from v5.0
//! (`mremap_userfaultfd_prep` without `UFFD_FEATURE_EVENT_REMAP`, `era::mremap_drops_uffd`) and
//! keeps it before; a new area is found with
//! mmap's page-aligned top-down search (no file-specific `get_unmapped_area`); an `old_len` of 0
//! (duplicating a shared mapping) is EINVAL for a private mapping (as since v4.17) and not
//! modelled for a shared one (EOPNOTSUPP). A hugetlb mapping moves only to a fixed address
//! (it cannot grow, and `MREMAP_DONTUNMAP` refuses its `VM_DONTEXPAND`), with hugetlb's own walk
//! (`hugetlb/mremap.rs`).

use crate::arch::tlbflush::flush_tlb_range;
use crate::era::{
    KernelVersion, has_mremap_dontunmap, mremap_dontunmap_any_mapping, mremap_expand_merges,
    mremap_handles_hugetlb,
};
use crate::errno::Errno;
use crate::hugetlb::mremap::move_hugetlb_page_tables;
use crate::kernel::{Cx, KState};
use crate::memory::{pmd_alloc, pte_alloc};
use crate::mmap::{MmapArgs, map, munmap_locked, unmap_locked};
use crate::pgtable::{Level, Pte, TASK_SIZE, Upper};
use crate::sim::cost::Cost;
use crate::types::hugetlb::HugeSize;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::zap::split_huge_pmd;
use simcore::{Bytes, VirtAddr};

/// `MREMAP_*`.
pub mod mremap_flags {
    pub const MAYMOVE: u32 = 1;
    pub const FIXED: u32 = 2;
    pub const DONTUNMAP: u32 = 4;
}

use mremap_flags as mf;

/// The arguments of `mremap(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MremapArgs {
    pub addr: VirtAddr,
    pub old_len: Bytes,
    pub new_len: Bytes,
    pub flags: u32,
    /// `new_address`: where `MREMAP_FIXED` moves to, a hint for `MREMAP_DONTUNMAP` alone.
    pub new_addr: Option<VirtAddr>,
}

/// One remap in progress (`struct vma_remap_struct`), lengths page-aligned (huge-page aligned in
/// a hugetlb VMA).
#[derive(Clone, Copy, Debug)]
struct Remap {
    mm: MmId,
    kernel: KernelVersion,
    addr: VirtAddr,
    old_len: Bytes,
    new_len: Bytes,
    flags: u32,
    new_addr: VirtAddr,
}

impl Remap {
    /// `vrm_implies_new_addr`.
    fn implies_new_addr(&self) -> bool {
        self.flags & (mf::FIXED | mf::DONTUNMAP) != 0
    }

    fn old_end(&self) -> VirtAddr {
        self.addr + self.old_len
    }
}

/// `check_mremap_params`, with the lengths page-aligned.
fn check_params(kernel: KernelVersion, mm: MmId, a: &MremapArgs) -> Result<Remap, Errno> {
    let dontunmap = if has_mremap_dontunmap(kernel) { mf::DONTUNMAP } else { 0 };
    if a.flags & !(mf::MAYMOVE | mf::FIXED | dontunmap) != 0 || !a.addr.is_aligned(Bytes::PAGE) {
        return Err(Errno::EINVAL);
    }
    let new_len = a.new_len.align_up(Bytes::PAGE).filter(|l| l.as_u64() != 0);
    let old_len = a.old_len.align_up(Bytes::PAGE);
    let (Some(new_len), Some(old_len)) = (new_len, old_len) else { return Err(Errno::EINVAL) };
    let r = Remap {
        mm,
        kernel,
        addr: a.addr,
        old_len,
        new_len,
        flags: a.flags,
        new_addr: a.new_addr.unwrap_or(VirtAddr(0)),
    };
    if r.implies_new_addr()
        && (!r.new_addr.is_aligned(Bytes::PAGE)
            || r.flags & mf::MAYMOVE == 0
            || (r.flags & mf::FIXED != 0 && a.new_addr.is_none())
            || (r.flags & mf::DONTUNMAP != 0 && old_len != new_len))
    {
        return Err(Errno::EINVAL);
    }
    Ok(r)
}

/// `mremap(2)`: the mapping's (new) address. The userfaultfd events the call queued are sent
/// once `mmap_lock` is dropped.
pub(crate) async fn do_mremap(cx: &Cx, mm: MmId, a: MremapArgs) -> Result<VirtAddr, Errno> {
    cx.charge(Cost::Syscall).await;
    let r = check_params(cx.kernel().version, mm, &a)?;
    let lock = cx.st().mm(mm).mmap_lock;
    let g = lock.write(cx).await;
    let moved = mremap_locked(cx, r).await;
    drop(g);
    crate::userfaultfd::events::userfaultfd_complete(cx).await;
    moved
}

/// `mremap(2)` under `mmap_lock` held for write.
async fn mremap_locked(cx: &Cx, mut r: Remap) -> Result<VirtAddr, Errno> {
    if crate::era::has_mseal(r.kernel) {
        let vma = lookup(&cx.st(), &r)?;
        crate::mseal::check_mremap(&cx.st(), r.kernel, r.mm, vma, r.addr, r.old_len)?;
    }
    if mremap_handles_hugetlb(r.kernel) {
        let vma = lookup(&cx.st(), &r)?;
        let huge = cx.st().hstate_vma(vma);
        if let Some(size) = huge {
            align_hugetlb(&mut r, size)?;
        }
    }
    if r.implies_new_addr() { mremap_to(cx, r).await } else { mremap_at(cx, r).await }
}

/// `vma_lookup(addr)`, EFAULT without one.
fn lookup(st: &KState, r: &Remap) -> Result<VmaId, Errno> {
    st.find_vma(r.mm, r.addr).ok_or(Errno::EFAULT)
}

/// `align_hugetlb` (v5.16+): lengths rounded up to the huge page size, addresses aligned to it,
/// no growth.
fn align_hugetlb(r: &mut Remap, size: HugeSize) -> Result<(), Errno> {
    let unit = Bytes(size.bytes());
    r.old_len = r.old_len.align_up(unit).ok_or(Errno::EINVAL)?;
    r.new_len = r.new_len.align_up(unit).ok_or(Errno::EINVAL)?;
    if !r.addr.is_aligned(unit) || !r.new_addr.is_aligned(unit) || r.new_len > r.old_len {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `remap_is_valid` (`vma_to_resize` before v6.16's rework): may VMA `vma` be moved or resized
/// as `r` asks?
fn remap_is_valid(st: &KState, r: &Remap, vma: VmaId) -> Result<(), Errno> {
    let v = st.vma(vma);
    if st.vma(vma).vm_ops.is_hugetlb() && !mremap_handles_hugetlb(r.kernel) {
        return Err(Errno::EINVAL);
    }
    if r.old_len.as_u64() == 0 {
        // Duplicating a shared mapping is not modelled; a private one is refused.
        return Err(if v.flags.has(VmFlags::SHARED | VmFlags::MAYSHARE) {
            Errno::EOPNOTSUPP
        } else {
            Errno::EINVAL
        });
    }
    if r.flags & mf::DONTUNMAP != 0 {
        let refused = if mremap_dontunmap_any_mapping(r.kernel) {
            v.flags.has(VmFlags::DONTEXPAND | VmFlags::PFNMAP)
        } else {
            !v.is_anonymous() || v.is_shared()
        };
        if refused {
            return Err(Errno::EINVAL);
        }
    }
    if r.old_len > v.end.offset_from(r.addr) {
        return Err(Errno::EFAULT);
    }
    if r.new_len != r.old_len && v.flags.has(VmFlags::DONTEXPAND | VmFlags::PFNMAP) {
        return Err(Errno::EFAULT);
    }
    Ok(())
}

/// `mremap_at`: resize in place, or move to a free area with `MREMAP_MAYMOVE`.
async fn mremap_at(cx: &Cx, r: Remap) -> Result<VirtAddr, Errno> {
    if r.new_len <= r.old_len {
        // "Always allow a shrinking remap": the tail's munmap.
        if r.new_len < r.old_len {
            munmap_locked(cx, r.mm, r.addr + r.new_len, r.old_end()).await?;
        }
        return Ok(r.addr);
    }
    let vma = lookup(&cx.st(), &r)?;
    remap_is_valid(&cx.st(), &r, vma)?;
    let grow_to = r.addr + r.new_len;
    let expandable = {
        let st = cx.st();
        let end = st.vma(vma).end;
        end == r.old_end()
            && grow_to.0 <= TASK_SIZE
            && st.mm(r.mm).vmas_in(end, grow_to, |id| st.vma(id).end).is_empty()
    };
    if expandable {
        cx.charge(Cost::VmaUpdate).await;
        let mut st = cx.st();
        st.vma_mut(vma).end = grow_to;
        if mremap_expand_merges(r.kernel) {
            st.vma_merge_new(vma, false);
        }
        return Ok(r.addr);
    }
    if r.flags & mf::MAYMOVE == 0 {
        return Err(Errno::ENOMEM);
    }
    let to = new_area(&cx.st(), &r, None)?;
    move_vma(cx, &r, vma, to).await
}

/// A free area of `new_len` bytes for the move (`vrm_set_new_addr` without `MREMAP_FIXED`).
fn new_area(st: &KState, r: &Remap, hint: Option<VirtAddr>) -> Result<VirtAddr, Errno> {
    let a =
        MmapArgs { addr: hint, len: r.new_len, prot: 0, flags: map::PRIVATE, fd: None, offset: 0 };
    st.get_unmapped_area(r.mm, &a, r.new_len, Bytes::PAGE)
}

/// `mremap_to`: move to `new_address` (`MREMAP_FIXED`) or elsewhere (`MREMAP_DONTUNMAP`).
async fn mremap_to(cx: &Cx, mut r: Remap) -> Result<VirtAddr, Errno> {
    let new_end = r.new_addr.checked_add(r.new_len).filter(|e| e.0 <= TASK_SIZE);
    let Some(new_end) = new_end else { return Err(Errno::EINVAL) };
    if r.addr < new_end && r.new_addr < r.old_end() {
        return Err(Errno::EINVAL);
    }
    let fixed = r.flags & mf::FIXED != 0;
    if fixed {
        munmap_locked(cx, r.mm, r.new_addr, new_end).await?;
    }
    if r.new_len < r.old_len {
        munmap_locked(cx, r.mm, r.addr + r.new_len, r.old_end()).await?;
        r.old_len = r.new_len;
    }
    let vma = lookup(&cx.st(), &r)?;
    remap_is_valid(&cx.st(), &r, vma)?;
    let to = if fixed { r.new_addr } else { new_area(&cx.st(), &r, Some(r.new_addr))? };
    move_vma(cx, &r, vma, to).await
}

/// `move_vma`: a copy of the VMA at `to`, the page tables moved into it, then the old range
/// unmapped (or left empty with `MREMAP_DONTUNMAP`).
async fn move_vma(cx: &Cx, r: &Remap, vma: VmaId, to: VirtAddr) -> Result<VirtAddr, Errno> {
    let (mm, from, len) = (r.mm, r.addr, r.old_len);
    cx.charge(Cost::VmaUpdate).await;
    let new = {
        let mut st = cx.st();
        let pgoff = st.vma(vma).page_index(from);
        let new = st.vma_dup(vma, to, to + r.new_len, pgoff);
        // `copy_vma` runs the new VMA's `->open`: hugetlb's shares the private reservations.
        st.hugetlb_vm_op_open(vma, new, true);
        let moved = (from, to, len.as_u64());
        crate::userfaultfd::events::mremap_userfaultfd_prep(cx, &mut st, new, moved);
        new
    };
    let huge = cx.st().vma(vma).vm_ops.is_hugetlb();
    if let Err(moved) = move_entries(cx, huge, (vma, from), (new, to), len).await {
        // Back to where they were (the old tables are still there), and the new VMA goes.
        move_entries(cx, huge, (new, to), (vma, from), moved)
            .await
            .expect("moving entries back needs no new page table");
        // The copy's reservations stay the old VMA's.
        cx.st().clear_vma_resv_huge_pages(new);
        let (s, e) = cx.st().vma_range(new);
        unmap_locked(cx, mm, s, e).await;
        return Err(Errno::ENOMEM);
    }
    if huge {
        cx.st().clear_vma_resv_huge_pages(vma);
    }
    if r.flags & mf::DONTUNMAP != 0 {
        let mut st = cx.st();
        let whole = st.vma_range(vma) == (from, from + len);
        let v = st.vma_mut(vma);
        v.flags = VmFlags(v.flags.0 & !(VmFlags::LOCKED | VmFlags::ACCOUNT));
        if whole {
            st.unlink_anon_vmas(vma);
        }
    } else {
        crate::userfaultfd::events::userfaultfd_unmap_prep(cx, &mut cx.st(), mm, from, from + len);
        unmap_locked(cx, mm, from, from + len).await;
    }
    cx.st().vma_merge_new(new, true);
    Ok(to)
}

/// `move_page_tables` of `len` bytes from `(vma, from)` to `(new, to)`, with the TLB flush:
/// hugetlb's own walk for a hugetlb VMA. On failure, the length moved.
async fn move_entries(
    cx: &Cx,
    huge: bool,
    (vma, from): (VmaId, VirtAddr),
    (new, to): (VmaId, VirtAddr),
    len: Bytes,
) -> Result<(), Bytes> {
    if huge {
        return move_hugetlb_page_tables(cx, vma, new, from, to, len).await;
    }
    let mm = cx.st().vma(vma).mm;
    let result = move_page_tables(cx, mm, from, to, len).await;
    flush_tlb_range(cx, mm, from, from + len).await;
    result
}

/// What the old range holds at an address.
enum OldEntry {
    /// Nothing up to this address.
    Empty(VirtAddr),
    Pte,
    HugePmd,
}

fn old_entry(st: &KState, mm: MmId, addr: VirtAddr) -> OldEntry {
    let pgd = st.mm(mm).pgd;
    match st.pt.pmd_slot(pgd, addr).map(|(t, i)| st.pt.upper(t, i)) {
        Some(Upper::Leaf(_)) => OldEntry::HugePmd,
        Some(Upper::Table(pt)) if !st.pt.pte(pt, Level::Pte.index(addr)).is_none() => OldEntry::Pte,
        _ => OldEntry::Empty(st.pt.skip_empty(pgd, addr)),
    }
}

/// `move_page_tables`: moves every entry of `[from, from + len)` to the same offset from `to`.
/// On failure to allocate a page table, the length moved so far.
async fn move_page_tables(
    cx: &Cx,
    mm: MmId,
    from: VirtAddr,
    to: VirtAddr,
    len: Bytes,
) -> Result<(), Bytes> {
    let mut off = 0;
    let mut moved = 0;
    while off < len.as_u64() {
        let (old, new) = (from + Bytes(off), to + Bytes(off));
        let entry = old_entry(&cx.st(), mm, old);
        off += match entry {
            OldEntry::Empty(next) => next.0.saturating_sub(old.0).max(Bytes::PAGE.as_u64()),
            OldEntry::Pte => {
                move_pte(cx, mm, old, new).await.map_err(|()| Bytes(off))?;
                moved += 1;
                Bytes::PAGE.as_u64()
            }
            OldEntry::HugePmd => {
                let whole = old.is_aligned(Bytes::PMD)
                    && new.is_aligned(Bytes::PMD)
                    && len.as_u64() - off >= Bytes::PMD.as_u64();
                if whole && move_huge_pmd(cx, mm, old, new).await.map_err(|()| Bytes(off))? {
                    moved += 1;
                    Bytes::PMD.as_u64()
                } else {
                    split_huge_pmd(cx, mm, old).await;
                    0
                }
            }
        };
    }
    cx.charge_n(Cost::PteUpdate, moved).await;
    Ok(())
}

/// Marks a moved entry soft-dirty (`move_soft_dirty_pte`), so that soft-dirty tracking sees it.
fn move_soft_dirty(pte: Pte) -> Pte {
    if pte.is_present() {
        pte.with(Pte::SOFT_DIRTY)
    } else if pte.is_swap() {
        pte.with(Pte::SWP_SOFT_DIRTY)
    } else {
        pte
    }
}

/// `move_ptes` for one entry, under the old table's lock; `Err` when the new range's page table
/// cannot be allocated.
async fn move_pte(cx: &Cx, mm: MmId, old: VirtAddr, new: VirtAddr) -> Result<(), ()> {
    let new_table = pte_alloc(cx, mm, new).await.map_err(|_| ())?;
    let new_table = new_table.expect("the destination of a move has no huge PMD");
    let pgd = cx.st().mm(mm).pgd;
    let Some((ot, oi)) = cx.st().pt.pte_slot(pgd, old) else { return Ok(()) };
    let ptl = cx.st().pt.ptl(ot);
    let _g = ptl.lock(cx).await;
    let mut st = cx.st();
    // The old table may have been retracted while this task waited (khugepaged).
    if !st.pt.is_live(ot) || !st.pt.is_live(new_table) || st.pt.pte_slot(pgd, old) != Some((ot, oi))
    {
        return Ok(());
    }
    let pte = st.pt.pte(ot, oi);
    let ni = Level::Pte.index(new);
    debug_assert!(st.pt.pte(new_table, ni).is_none(), "moving onto a mapped PTE at {new}");
    st.pt.set_pte(ot, oi, Pte::NONE);
    st.pt.set_pte(new_table, ni, move_soft_dirty(pte));
    Ok(())
}

/// `move_huge_pmd`: the PMD leaf at `old` (and the page table deposited for it) moves to `new`;
/// `false` when the new PMD slot is not empty, and the caller splits the old PMD instead.
async fn move_huge_pmd(cx: &Cx, mm: MmId, old: VirtAddr, new: VirtAddr) -> Result<bool, ()> {
    let new_table = pmd_alloc(cx, mm, new).await.map_err(|_| ())?;
    let pgd = cx.st().mm(mm).pgd;
    let Some((ot, oi)) = cx.st().pt.pmd_slot(pgd, old) else { return Ok(false) };
    let ptl = cx.st().pt.ptl(ot);
    let _g = ptl.lock(cx).await;
    let mut st = cx.st();
    let ni = Level::Pmd.index(new);
    let Upper::Leaf(leaf) = st.pt.upper(ot, oi) else { return Ok(false) };
    if st.pt.upper(new_table, ni) != Upper::None {
        return Ok(false);
    }
    st.pt.set_upper(ot, oi, Upper::None);
    st.pt.set_upper(new_table, ni, Upper::Leaf(move_soft_dirty(leaf)));
    let m = st.mm_mut(mm);
    if let Some(deposit) = m.deposited.remove(&(ot, oi)) {
        m.deposited.insert((new_table, ni), deposit);
    }
    Ok(true)
}
