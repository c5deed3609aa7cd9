//! Unmapping and copying hugetlb mappings (`mm/hugetlb.c` `__unmap_hugepage_range`,
//! `__unmap_hugepage_range_final`, `unmap_hugepage_range`, `unmap_ref_private`,
//! `copy_hugetlb_page_range`, `hugetlb_vm_op_split`, `hugetlb_unshare_pmds`; `mm/memory.c`
//! `unmap_single_vma`, `copy_page_range`; Linux v4.0-v6.19, and the later changes below).
//!
//! Zapping visits the range one huge page at a time under the entry's page-table lock (where
//! no page table covers a stretch, the model steps over it at once and charges
//! `hugetlb_unmap_empty_gib` per GiB: since v6.0 the kernel's loop makes one step per PUD where
//! `huge_pte_offset` finds nothing, Mike Kravetz's "hugetlb: skip to end of PT page mapping when
//! pte not present", June 2022, read in v6.1-rc7 `mm/hugetlb.c`; v5.7-v5.19 stepped per huge
//! page, which the model does not tell apart: an approximation for those eras): a 2 MiB
//! entry in a shared PMD table is not cleared, the table is unshared instead and the rest of
//! its PUD range skipped (`huge_pmd_unshare`); any other entry is cleared, the page loses a
//! mapping and, after the TLB flush, the mapping's reference. munmap, exit and `MADV_DONTNEED`
//! (v5.18+) take the file's `i_mmap_rwsem` for write around the whole zap in every era (v6.0
//! `mm/memory.c` `unmap_single_vma`), and from v6.1 the VMA's hugetlb lock for write before it,
//! both inside `__unmap_hugepage_range_final` and held for the whole walk, empty stretches
//! included (v6.1-rc7, krr-io/linux-6.1.0 2a410d07e): these writers are what a fault holding
//! either lock for read waits on. Each entry cleared writes the page's two shared cache lines
//! (mapcount, and the reference the gather drops), paid per transfer (`line_transfer`).
//!
//! Fork copies a hugetlb VMA's entries when it has private pages (before v6.0, every hugetlb
//! VMA: bcd51a3c679d made the copy lazy): a private mapping's entries are write-protected in
//! both parent and child (the child has no reservations); a shared mapping's entries are
//! copied under `i_mmap_rwsem` for read (v5.7-v6.0) or the source VMA's lock for read (v6.1),
//! and where the child's new PMD table is the parent's shared one there is nothing to copy.
//!
//! Later kernels: from v6.2 a split of a shareable VMA inside a PUD range unshares that range
//! first (`hugetlb_split_prepare`); from v6.6 a private reservation owner's unmap takes its vma
//! lock too and `MADV_DONTNEED` keeps its locks until the zapped pages are back in the pool
//! (2820b0f09be9), so a fault on it waits for them; before, the pages are freed after the
//! locks are dropped (`tlb_finish_mmu` after `__unmap_hugepage_range_final`), and a fault
//! that got a lock in between finds the entry gone and the pool empty: SIGBUS, which the
//! selftest `hugetlb_fault_after_madv.c` dies of, on v5.18-v6.5 (`unmap_hugepage_range`;
//! truncation and `unmap_ref_private` free under their locks in every era); from v6.9 unmapping a private
//! owner's page gives its reservation back (`restore_private_reserve`).
//!
//! A possibly pinned anonymous page of a COW mapping is copied for the child at fork from v5.12
//! (`copy_pinned`, 4eae4efa2c29; `gup.rs` of this folder); a page fork shares loses
//! `PageAnonExclusive` (`page_try_dup_anon_rmap`, v5.19).
//!
//! Approximations: no uffd-wp markers.

use crate::arch::tlbflush::flush_tlb_range;
use crate::errno::Errno;
use crate::hugetlb::hugetlb_fault::Ptep;
use crate::hugetlb::pmd_share::huge_pte_alloc_at;
use crate::kernel::{Cx, KState};
use crate::pgtable::Pte;
use crate::sim::cost::Cost;
use crate::types::hugetlb::{HugeSize, Owner};
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use engine::LockGuard;
use simcore::{Bytes, Pfn, VirtAddr};

/// `PUD_SIZE`.
const PUD: Bytes = Bytes(1 << 30);

/// `unmap_hugepage_range` (`__unmap_hugepage_range` and `tlb_finish_mmu`): zaps `[start, end)`
/// of `vma` and frees what it unmapped; with `ref_page`, only the entry mapping that page,
/// marking the VMA `HPAGE_RESV_UNMAPPED`. The caller holds the era's locks.
pub(crate) async fn zap_huge_range(
    cx: &Cx,
    vma: VmaId,
    start: VirtAddr,
    end: VirtAddr,
    ref_page: Option<Pfn>,
) {
    zap_huge_gather(cx, vma, start, end, ref_page).await.finish(cx).await;
}

/// The pages a zap unmapped, still holding the gather's references after the TLB flush
/// (`struct mmu_gather`); their file counts as busy until [`HugeGather::finish`] frees them.
struct HugeGather {
    inode: InodeId,
    pages: Vec<Pfn>,
}

impl HugeGather {
    /// `tlb_finish_mmu`: the gather's references go, and with the last the pages.
    async fn finish(self, cx: &Cx) {
        cx.charge_n(Cost::PageFree, self.pages.len() as u64).await;
        let mut st = cx.st();
        for page in self.pages {
            st.put_huge_folio(page, 1);
        }
        st.hinode_mut(self.inode).busy -= 1;
    }
}

/// `__unmap_hugepage_range` with the TLB flush, the pages left in the gather.
async fn zap_huge_gather(
    cx: &Cx,
    vma: VmaId,
    start: VirtAddr,
    end: VirtAddr,
    ref_page: Option<Pfn>,
) -> HugeGather {
    let (mm, size, inode) = {
        let st = cx.st();
        let inode = st.file(st.vma(vma).file.expect("a hugetlb VMA")).inode;
        (st.vma(vma).mm, st.hstate_vma(vma).expect("a hugetlb VMA"), inode)
    };
    cx.st().hinode_mut(inode).busy += 1;
    let pages = zap_huge_entries(cx, vma, mm, size, start, end, ref_page).await;
    HugeGather { inode, pages }
}

/// The body of [`zap_huge_gather`]: returns the pages unmapped, after the TLB flush.
async fn zap_huge_entries(
    cx: &Cx,
    vma: VmaId,
    mm: MmId,
    size: HugeSize,
    start: VirtAddr,
    end: VirtAddr,
    ref_page: Option<Pfn>,
) -> Vec<Pfn> {
    let step = Bytes(size.bytes());
    let (mut flush_start, mut flush_end) = (start, end);
    let mut freed = Vec::new();
    let mut empty = 0u64;
    let mut addr = start;
    while addr < end {
        let next = addr + step;
        let Some(ptep) = cx.st().huge_pte_offset(mm, addr, size) else {
            // No table here: the kernel's loop steps through the hole one huge page at a time;
            // the model jumps it and charges the steps below.
            let st = cx.st();
            let hole_end = st.pt.skip_empty(st.mm(mm).pgd, addr).max(next).min(end);
            empty += hole_end.0 - addr.0;
            addr = hole_end;
            continue;
        };
        let ptl = cx.st().huge_pte_lockptr(mm, size, ptep);
        let g = ptl.lock(cx).await;
        if size == HugeSize::Size2M && cx.st().huge_pmd_unshare(mm, addr) {
            drop(g);
            flush_start = flush_start.min(addr.align_down(PUD));
            flush_end = flush_end.max(addr.align_down(PUD) + PUD);
            addr = addr.align_down(PUD) + PUD;
            continue;
        }
        let pte = cx.st().huge_ptep_get(ptep);
        if pte.is_none() || ref_page.is_some_and(|r| r != pte.pfn()) {
            addr = next;
            continue;
        }
        let lines = super::folio_lines_write(cx, pte.pfn());
        engine::Cx::charge(cx, cx.cost(Cost::PteUpdate) + lines).await;
        restore_private_reserve(&mut cx.st(), vma, addr, pte.pfn());
        clear_huge_entry(&mut cx.st(), mm, vma, ptep, pte);
        freed.push(pte.pfn());
        drop(g);
        if ref_page.is_some() {
            cx.st().hugetlb.vmas.entry(vma).or_default().unmapped = true;
            break;
        }
        addr = next;
    }
    let walk_ns =
        (u128::from(cx.cost(Cost::HugetlbUnmapEmptyGib).as_ns()) * u128::from(empty)) >> 30;
    if walk_ns > 0 {
        let d = simcore::SimDuration::from_ns(u64::try_from(walk_ns).unwrap_or(u64::MAX));
        engine::Cx::charge(cx, d).await;
    }
    if !freed.is_empty() || flush_start != start || flush_end != end {
        flush_tlb_range(cx, mm, flush_start, flush_end).await;
    }
    freed
}

/// v6.9 (df7a6d1f6405, [`crate::era::hugetlb_zap_restores_reserve`]): unmapping an anonymous
/// page of a private mapping that owns its reservations, with no surplus pages, marks the
/// page to give its reservation back when freed and the index reserved again. The model does
/// it only when this unmap frees the page (mapped once, no other reference); the kernel marks
/// the page even when a forked child still maps it, leaving `HugePages_Rsvd` below what the
/// maps promise until the child lets go.
fn restore_private_reserve(st: &mut KState, vma: VmaId, addr: VirtAddr, page: Pfn) {
    let Some(id) = st.hugetlb.vmas.get(&vma).and_then(|h| h.resv) else { return };
    let p = st.huge_page(page);
    let (size, sole) = (p.size, p.owner == Owner::Anon && p.mapcount == 1 && p.refs == 1);
    if !st.hugetlb.zap_restores_reserve || !sole || st.hugetlb.hstate(size).surplus > 0 {
        return;
    }
    let idx = st.huge_index(vma, addr, size);
    let map = st.hugetlb.resv_map_mut(id);
    if map.count(idx, idx + 1) == 1 {
        map.del(idx, idx + 1);
        st.hugetlb.page_mut(page).restore_reserve = true;
    }
}

/// Clears a present hugetlb entry: the page loses one mapping (its reference goes after the
/// flush) and the mm's `HugetlbPages` its size.
fn clear_huge_entry(st: &mut KState, mm: MmId, vma: VmaId, ptep: Ptep, pte: Pte) {
    let size = st.hstate_vma(vma).expect("a hugetlb VMA");
    st.set_huge_pte(ptep, Pte::NONE);
    let p = st.hugetlb.page_mut(pte.pfn());
    p.mapcount = p.mapcount.checked_sub(1).expect("huge page mapcount underflow");
    *st.hugetlb.usage.entry(mm).or_default() -= size.pages() as i64;
}

/// The era's locks around an unmap of `vma` (`unmap_single_vma` with
/// `__unmap_hugepage_range_final`): the vma lock for write (v6.1), then `i_mmap_rwsem` for
/// write (every era).
pub(super) async fn unmap_locks(cx: &Cx, vma: VmaId) -> (Option<LockGuard<'_>>, LockGuard<'_>) {
    let (vma_lock, i_mmap) = {
        let st = cx.st();
        let inode = st.file(st.vma(vma).file.expect("a hugetlb VMA")).inode;
        let lock = st.hugetlb.vmas.get(&vma).and_then(|v| v.lock);
        (lock.filter(|_| st.hugetlb_sync().has_vma_lock()), st.inodes[inode].mapping.i_mmap_rwsem)
    };
    let v = match vma_lock {
        Some(l) => Some(l.write(cx).await),
        None => None,
    };
    (v, i_mmap.write(cx).await)
}

/// `->may_split` (`hugetlb_vm_op_split`) for the VMAs an operation on `[start, end)` of `mm`
/// splits: a hugetlb VMA splits only at a huge page boundary (EINVAL); from v6.2 a shareable
/// VMA split inside a PUD range it covers first unshares that range's PMD table
/// (`hugetlb_unshare_pmds` under its vma lock and `i_mmap_rwsem` for write, then the TLB
/// flush: b30c14cd6102, [`crate::era::hugetlb_split_unshares_pmds`]).
pub(crate) async fn hugetlb_split_prepare(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    cx.st().hugetlb_check_split(mm, start, end)?;
    if !cx.st().hugetlb.split_unshares {
        return Ok(());
    }
    for edge in [start, end] {
        let (floor, ceil) = (edge.align_down(PUD), edge.align_down(PUD) + PUD);
        let vma = {
            let st = cx.st();
            st.find_vma(mm, edge).filter(|&v| {
                let x = st.vma(v);
                x.start < edge
                    && floor != edge
                    && x.start <= floor
                    && ceil <= x.end
                    && x.flags.has(VmFlags::MAYSHARE)
                    && st.hstate_vma(v) == Some(HugeSize::Size2M)
            })
        };
        let Some(vma) = vma else { continue };
        let _locks = unmap_locks(cx, vma).await;
        let Some(ptep) = cx.st().huge_pte_offset(mm, floor, HugeSize::Size2M) else { continue };
        let ptl = cx.st().huge_pte_lockptr(mm, HugeSize::Size2M, ptep);
        let g = ptl.lock(cx).await;
        let unshared = cx.st().huge_pmd_unshare(mm, floor);
        drop(g);
        if unshared {
            flush_tlb_range(cx, mm, floor, ceil).await;
        }
    }
    Ok(())
}

/// The zap of munmap, exit and `MADV_DONTNEED` on a hugetlb VMA, with the era's locks. Before
/// v6.6 `__unmap_hugepage_range_final` drops them before `tlb_finish_mmu` frees the pages, so a
/// fault can find the entry gone and the pool still empty; from v6.6 (2820b0f09be9,
/// [`crate::era::hugetlb_private_vma_lock`]) `MADV_DONTNEED` keeps them until the pages are
/// freed. The model keeps them for munmap and exit too from v6.6, an approximation: the
/// kernel's `unmap_vmas` still frees after dropping them, so another mapping's fault can find
/// the pool briefly empty there.
pub(crate) async fn unmap_hugepage_range(cx: &Cx, vma: VmaId, start: VirtAddr, end: VirtAddr) {
    let locks = unmap_locks(cx, vma).await;
    let gather = zap_huge_gather(cx, vma, start, end, None).await;
    if !cx.st().hugetlb.private_vma_lock {
        drop(locks);
    }
    gather.finish(cx).await;
}

/// `unmap_ref_private`: the owner of a private mapping's reservations takes `page` (index `idx`
/// of `inode`) back from every other private mapping of the file that does not own reservations
/// (a forked child), under `i_mmap_rwsem` for write.
pub(crate) async fn unmap_ref_private(cx: &Cx, vma: VmaId, inode: InodeId, idx: u64, page: Pfn) {
    let i_mmap = cx.st().inodes[inode].mapping.i_mmap_rwsem;
    let _g = i_mmap.write(cx).await;
    let targets: Vec<(VmaId, VirtAddr, Bytes)> = {
        let st = cx.st();
        st.inodes[inode]
            .mapping
            .i_mmap
            .iter()
            .filter(|&&v| v != vma && !st.vma(v).flags.has(VmFlags::MAYSHARE))
            .filter(|v| st.hugetlb.vmas.get(v).is_none_or(|h| h.resv.is_none()))
            .filter_map(|&v| {
                let size = st.hstate_vma(v)?;
                let a = st.vma(v).address_of(idx << (size.shift() - 12))?;
                Some((v, a, Bytes(size.bytes())))
            })
            .collect()
    };
    for (v, a, len) in targets {
        zap_huge_range(cx, v, a, a + len, Some(page)).await;
    }
}

/// `copy_hugetlb_page_range`: fork's copy of `src` (in `src_mm`) into `dst` (in `dst_mm`);
/// returns whether a source entry was write-protected.
pub(crate) async fn copy_hugetlb_page_range(
    cx: &Cx,
    dst_mm: MmId,
    dst: VmaId,
    src_mm: MmId,
    src: VmaId,
) -> Result<bool, Errno> {
    let (start, end, cow, size, inode, vma_lock) = {
        let st = cx.st();
        let v = st.vma(src);
        let inode = st.file(v.file.expect("a hugetlb VMA")).inode;
        let lock = st.hugetlb.vmas.get(&src).and_then(|h| h.lock);
        (v.start, v.end, v.is_cow_mapping(), st.hstate_vma(src).expect("hugetlb"), inode, lock)
    };
    // A shared mapping's tables could be unshared under the copy: hold off unmappers.
    let sync = cx.st().hugetlb_sync();
    let _guard = match (cow, sync, vma_lock) {
        (true, _, _) => None,
        (false, sync, Some(l)) if sync.has_vma_lock() => Some(l.read(cx).await),
        (false, _, _) => {
            let l = cx.st().inodes[inode].mapping.i_mmap_rwsem;
            Some(l.read(cx).await)
        }
    };
    let c = CopyCtx { dst_mm, dst, src_mm, size, inode, cow };
    let mut wrprotected = false;
    let mut addr = start;
    while addr < end {
        let next = addr + Bytes(size.bytes());
        let src_ptep = cx.st().huge_pte_offset(src_mm, addr, size);
        let Some(src_ptep) = src_ptep.filter(|&p| !cx.st().huge_ptep_get(p).is_none()) else {
            addr = next;
            continue;
        };
        let dst_ptep =
            huge_pte_alloc_at(cx, dst_mm, dst, addr, size).await.map_err(|_| Errno::ENOMEM)?;
        if dst_ptep.table == src_ptep.table {
            // The child shares the parent's PMD table: nothing to copy in this PUD range.
            addr = addr.align_down(PUD) + PUD;
            continue;
        }
        wrprotected |= copy_one(cx, &c, addr, src_ptep, dst_ptep).await?;
        addr = next;
    }
    Ok(wrprotected)
}

/// What fork's copy of one hugetlb VMA needs for each entry.
struct CopyCtx {
    dst_mm: MmId,
    dst: VmaId,
    src_mm: MmId,
    size: HugeSize,
    inode: InodeId,
    cow: bool,
}

/// Copies one entry under both page-table locks (the source's nested); returns whether the
/// source entry was write-protected. ENOMEM when a pinned page's copy finds no free page.
async fn copy_one(
    cx: &Cx,
    c: &CopyCtx,
    addr: VirtAddr,
    src: Ptep,
    dst: Ptep,
) -> Result<bool, Errno> {
    let (dl, sl) = {
        let st = cx.st();
        (st.huge_pte_lockptr(c.dst_mm, c.size, dst), st.huge_pte_lockptr(c.src_mm, c.size, src))
    };
    let _d = dl.lock(cx).await;
    let _s = if sl == dl { None } else { Some(sl.lock_nested(cx, 1).await) };
    cx.charge(Cost::PteUpdate).await;
    let entry = cx.st().huge_ptep_get(src);
    if entry.is_none() {
        return Ok(false);
    }
    if c.cow && needs_early_cow(cx, c.src_mm, entry.pfn()) {
        copy_pinned(&mut cx.st(), c, addr, dst, entry.pfn())?;
        cx.charge(Cost::PageAlloc).await;
        cx.charge_n(Cost::CopyPage4k, c.size.pages()).await;
        return Ok(false);
    }
    let mut st = cx.st();
    let p = st.hugetlb.page_mut(entry.pfn());
    p.refs += 1;
    p.mapcount += 1;
    let anon = p.owner == Owner::Anon;
    // `page_try_dup_anon_rmap`: a shared anonymous page is no longer exclusive.
    p.anon_exclusive &= !c.cow;
    let entry = if c.cow && (anon || entry.write()) {
        st.set_huge_pte(src, entry.wrprotect());
        entry.wrprotect()
    } else {
        entry
    };
    st.set_huge_pte(dst, entry);
    *st.hugetlb.usage.entry(c.dst_mm).or_default() += c.size.pages() as i64;
    Ok(c.cow)
}

/// Whether fork copies huge page `page` for the child now (v5.12+, `page_needs_cow_for_dma`).
fn needs_early_cow(cx: &Cx, src_mm: MmId, page: Pfn) -> bool {
    let k = cx.kernel();
    let rule = k.switches.cow_reuse;
    let st = cx.st();
    crate::era::hugetlb_fork_copies_pinned(k.version)
        && crate::cow::fork_copies_pinned(rule)
        && st.hugetlb_needs_cow_for_dma(src_mm, page, rule.tracks_anon_exclusive())
}

/// fork's early copy of a possibly pinned page (4eae4efa2c29): the child gets a page of its own,
/// allocated without a reservation (the child has none), exclusive and mapped writable; the
/// parent's entry stays as it was.
fn copy_pinned(
    st: &mut KState,
    c: &CopyCtx,
    addr: VirtAddr,
    dst: Ptep,
    old: Pfn,
) -> Result<(), Errno> {
    let idx = st.huge_index(c.dst, addr, c.size);
    let ctx = st.resv_ctx(c.dst);
    let new = st.alloc_hugetlb_folio(ctx, c.inode, idx, true).map_err(|_| Errno::ENOMEM)?;
    st.mem.copy_range(old, new, c.size.pages());
    let p = st.hugetlb.page_mut(new);
    p.owner = Owner::Anon;
    p.mapcount = 1;
    p.anon_exclusive = true;
    p.restore_reserve = false;
    let pte = st.make_huge_pte(c.dst, new, true);
    st.set_huge_pte(dst, pte);
    *st.hugetlb.usage.entry(c.dst_mm).or_default() += c.size.pages() as i64;
    Ok(())
}

/// `hugetlb_change_protection`: mprotect of a hugetlb VMA whose flags changed, under the unmap
/// locks (a shared PMD table is unshared rather than changed for everyone); returns the entries
/// visited. Each entry takes the new protection (`huge_pte_modify`): writable only in a shared
/// writable mapping; the user bit cleared for `PROT_NONE`.
pub(crate) async fn hugetlb_change_protection(cx: &Cx, vma: VmaId) -> u64 {
    let _locks = unmap_locks(cx, vma).await;
    let (mm, start, end, flags, size) = {
        let st = cx.st();
        let v = st.vma(vma);
        (v.mm, v.start, v.end, v.flags, st.hstate_vma(vma).expect("a hugetlb VMA"))
    };
    let writable = flags.has(VmFlags::WRITE) && flags.has(VmFlags::SHARED);
    let accessible = flags.has(VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC);
    let mut n = 0;
    let mut addr = start;
    while addr < end {
        let next = addr + Bytes(size.bytes());
        let Some(ptep) = cx.st().huge_pte_offset(mm, addr, size) else {
            addr = next;
            continue;
        };
        let ptl = cx.st().huge_pte_lockptr(mm, size, ptep);
        let _g = ptl.lock(cx).await;
        let mut st = cx.st();
        if size == HugeSize::Size2M && st.huge_pmd_unshare(mm, addr) {
            n += 1;
            addr = addr.align_down(PUD) + PUD;
            continue;
        }
        let pte = st.huge_ptep_get(ptep);
        if !pte.is_none() {
            let keep = pte.0 & (Pte::DIRTY | Pte::ACCESSED | Pte::PSE);
            let bits = crate::memory::pte_bits(flags, writable, false) & !Pte::ACCESSED | keep;
            let new = Pte::new(pte.pfn(), bits);
            st.set_huge_pte(ptep, if accessible { new } else { new.without(Pte::USER) });
            n += 1;
        }
        addr = next;
    }
    n
}
