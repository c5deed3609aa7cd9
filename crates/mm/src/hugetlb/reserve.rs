//! Reservations and the allocation a fault makes (`mm/hugetlb.c` `hugetlb_reserve_pages`,
//! `hugetlb_unreserve_pages`, `hugetlb_acct_memory`, `gather_surplus_pages`,
//! `return_unused_surplus_pages`, `vma_needs_reservation`, `vma_commit_reservation`,
//! `vma_add_reservation`, `vma_has_reserves`, `alloc_hugetlb_folio`,
//! `dequeue_hugetlb_folio_vma`, `restore_reserve_on_error`, `hugetlb_vm_op_open`,
//! `hugetlb_vm_op_close`, `hugetlb_dup_vma_private`, `hugetlb_vm_op_split`; Linux v6.1).
//!
//! `mmap` of a hugetlb file reserves, up front, a page for every index the mapping could fault
//! (unless `MAP_NORESERVE`), so that faults never fail for lack of pages: a shared mapping
//! records its indexes in the inode's reservation map (an index already there, reserved by an
//! earlier mapping or holding a page, is not reserved twice); a private mapping reserves its
//! whole length and becomes the owner (`HPAGE_RESV_OWNER`) of a map of the indexes whose
//! reservation it has consumed. `HugePages_Rsvd` (`resv_huge_pages`) counts promised free
//! pages: it rises when a mapping reserves (with surplus pages allocated if the free pages do
//! not cover it, within overcommit, or ENOMEM) and falls as faults consume reservations, as
//! truncation or hole punching removes reserved indexes that never got a page, and as a private
//! owner's VMA closes with reservations it never used.
//!
//! A fault allocates with the reservation if the mapping has one for the index; otherwise only
//! a free page beyond the reserved ones, or a surplus page, will do, else the fault fails with
//! SIGBUS (`-ENOSPC`). A forked child's private mapping has no reservations at all.
//!
//! On a hugetlbfs mount with `size=` or `min_size=` every reservation, and every allocation
//! without one, first asks the mount's subpool, and what is given back returns through it
//! (`subpool.rs`). Approximation kept from the kernel: an allocation without a reservation by a
//! mapping that cannot use one (a forked child, a private `MAP_NORESERVE` mapping) may take a
//! page of the subpool's minimum without consuming a global reservation, which the checker's
//! `HugePages_Rsvd` balance would report; no scenario does it.

use crate::errno::{Errno, VmFault};
use crate::kernel::KState;
use crate::types::hugetlb::{HPage, HVma, HugeSize, Owner};
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use simcore::{Pfn, VirtAddr};

/// What the reservation rules ask of a mapping: shared or private, `VM_NORESERVE`, and a
/// private mapping's own reservation map. `fallocate` allocates as a shared mapping would
/// (its pseudo-VMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResvCtx {
    pub shared: bool,
    pub noreserve: bool,
    pub owner: Option<u32>,
}

impl ResvCtx {
    /// `hugetlbfs_fallocate`'s pseudo-VMA.
    pub(crate) const FALLOCATE: ResvCtx = ResvCtx { shared: true, noreserve: false, owner: None };

    /// `vma_has_reserves`.
    fn has_reserves(self, chg: u64) -> bool {
        if self.noreserve {
            return self.shared && chg == 0;
        }
        (self.shared || self.owner.is_some()) && chg == 0
    }
}

impl KState {
    /// `hugetlb_acct_memory`: changes `resv_huge_pages` by `delta`, allocating surplus pages
    /// when the free pages cannot cover an increase.
    pub(crate) fn hugetlb_acct_memory(&mut self, size: HugeSize, delta: i64) -> Result<(), Errno> {
        if delta >= 0 {
            return self.gather_surplus_pages(size, delta.unsigned_abs());
        }
        self.return_unused_surplus_pages(size, delta.unsigned_abs());
        Ok(())
    }

    /// `gather_surplus_pages`.
    fn gather_surplus_pages(&mut self, size: HugeSize, delta: u64) -> Result<(), Errno> {
        let h = self.hugetlb.hstate(size);
        let needed = (h.resv + delta).saturating_sub(h.free);
        let mut got = Vec::new();
        for _ in 0..needed {
            match self.hugetlb_alloc_surplus(size) {
                Some(pfn) => got.push(pfn),
                None => {
                    for pfn in got {
                        self.hugetlb.page_mut(pfn).owner = Owner::New;
                        self.free_huge_folio(pfn);
                    }
                    return Err(Errno::ENOMEM);
                }
            }
        }
        for pfn in got {
            self.hugetlb_enqueue(pfn);
        }
        self.hugetlb.hstate_mut(size).resv += delta;
        Ok(())
    }

    /// `return_unused_surplus_pages`: drops `unused` reservations and frees as many free
    /// surplus pages.
    fn return_unused_surplus_pages(&mut self, size: HugeSize, unused: u64) {
        let h = self.hugetlb.hstate_mut(size);
        h.resv = h.resv.checked_sub(unused).expect("HugePages_Rsvd underflow");
        let n = unused.min(h.surplus);
        for _ in 0..n {
            let h = self.hugetlb.hstate_mut(size);
            let Some(pfn) = h.free_list.pop_first() else { break };
            h.free -= 1;
            h.surplus -= 1;
            self.hugetlb_release(Pfn(pfn));
        }
    }

    /// `hugetlb_reserve_pages` for huge indexes `[from, to)` of `inode`, for `vma` (its flags
    /// `vm_flags`). ENOMEM when the pool cannot promise them.
    pub(crate) fn hugetlb_reserve_pages(
        &mut self,
        inode: InodeId,
        from: u64,
        to: u64,
        vma: VmaId,
    ) -> Result<(), Errno> {
        let flags = self.vma(vma).flags;
        if flags.has(VmFlags::NORESERVE) {
            return Ok(());
        }
        if flags.has(VmFlags::MAYSHARE) {
            return self.hugetlb_reserve_file(inode, from, to);
        }
        let size = self.hinode(inode).size;
        let gbl = self.subpool_get(inode, to - from)?;
        let id = self.hugetlb.new_resv_map();
        self.hugetlb.vmas.entry(vma).or_default().resv = Some(id);
        if self.hugetlb_acct_memory(size, gbl as i64).is_err() {
            // `out_put_pages`: the subpool gets back what it gave, the count it returns unused.
            self.subpool_put(inode, to - from);
            if let Some(id) = self.hugetlb.vmas.get_mut(&vma).and_then(|v| v.resv.take()) {
                self.hugetlb.put_resv_map(id);
            }
            return Err(Errno::ENOMEM);
        }
        Ok(())
    }

    /// `hugetlb_reserve_pages` of a shared mapping, or of no mapping at all (a SysV segment's
    /// file, `hugetlb_file_setup`): the indexes `[from, to)` not yet in the file's reservation
    /// map are promised and added to it. ENOMEM when the pool cannot promise them.
    pub(crate) fn hugetlb_reserve_file(
        &mut self,
        inode: InodeId,
        from: u64,
        to: u64,
    ) -> Result<(), Errno> {
        let size = self.hinode(inode).size;
        let chg = self.hinode(inode).resv.chg(from, to);
        let gbl = self.subpool_get(inode, chg)?;
        if self.hugetlb_acct_memory(size, gbl as i64).is_err() {
            self.subpool_put(inode, chg);
            return Err(Errno::ENOMEM);
        }
        let added = self.hinode_mut(inode).resv.add(from, to);
        if chg > added {
            // Another mapping reserved some of them meanwhile.
            let back = self.subpool_put(inode, chg - added);
            self.hugetlb_acct_memory(size, -(back as i64)).expect("a decrease");
        }
        Ok(())
    }

    /// `hugetlb_unreserve_pages`: indexes `[start, end)` of `inode` lose their reservations;
    /// `freed` of them held pages (whose reservations were consumed).
    pub(crate) fn hugetlb_unreserve_pages(
        &mut self,
        inode: InodeId,
        start: u64,
        end: u64,
        freed: u64,
    ) {
        let size = self.hinode(inode).size;
        let chg = self.hinode_mut(inode).resv.del(start, end);
        let unused = chg.checked_sub(freed).expect("more pages freed than were in the map");
        let back = self.subpool_put(inode, unused);
        self.hugetlb_acct_memory(size, -(back as i64)).expect("a decrease");
    }

    /// What the reservation rules need of a VMA.
    pub(crate) fn resv_ctx(&self, vma: VmaId) -> ResvCtx {
        let flags = self.vma(vma).flags;
        ResvCtx {
            shared: flags.has(VmFlags::MAYSHARE),
            noreserve: flags.has(VmFlags::NORESERVE),
            owner: self.hugetlb.vmas.get(&vma).and_then(|v| v.resv),
        }
    }

    /// `vma_needs_reservation`: 0 when index `idx` has a reservation to consume.
    pub(crate) fn vma_needs_reservation(&self, c: ResvCtx, inode: InodeId, idx: u64) -> u64 {
        if c.shared {
            return self.hinode(inode).resv.chg(idx, idx + 1);
        }
        match c.owner {
            // A private map records consumed reservations.
            Some(id) => self.hugetlb.resv_maps[&id].0.count(idx, idx + 1),
            None => 1,
        }
    }

    /// `vma_commit_reservation`: index `idx` now has its page.
    fn vma_commit_reservation(&mut self, c: ResvCtx, inode: InodeId, idx: u64) {
        if c.shared {
            self.hinode_mut(inode).resv.add(idx, idx + 1);
        } else if let Some(id) = c.owner {
            self.hugetlb.resv_map_mut(id).add(idx, idx + 1);
        }
    }

    /// `restore_reserve_on_error`: a page allocated for index `idx` is being dropped before it
    /// was mapped or cached; its reservation goes back to the map (the page's
    /// `HPageRestoreReserve` gives the pool its count back when the page is freed).
    pub(crate) fn restore_reserve_on_error(
        &mut self,
        vma: VmaId,
        inode: InodeId,
        idx: u64,
        page: Pfn,
    ) {
        let c = self.resv_ctx(vma);
        let needs = self.vma_needs_reservation(c, inode, idx);
        let restore = self.hugetlb.page(page).is_some_and(|p| p.restore_reserve);
        // `vma_add_reservation` when the page consumed one (the index gets it back),
        // `vma_del_reservation` when it did not (the map must not claim one exists).
        let give_back = match (restore, needs) {
            (true, 1) => true,
            (false, 0) => false,
            _ => return,
        };
        if c.shared {
            self.hinode_mut(inode).resv.del(idx, idx + 1);
        } else if let Some(id) = c.owner {
            let map = self.hugetlb.resv_map_mut(id);
            if give_back {
                map.del(idx, idx + 1);
            } else {
                map.add(idx, idx + 1);
            }
        }
    }

    /// `alloc_hugetlb_folio`: a page for index `idx`, with the reservation if there is one
    /// (`avoid_reserve`: never, for the owner's copy-on-write of its own page); SIGBUS
    /// (`-ENOSPC`) when no page can be had. The page comes with one reference.
    pub(crate) fn alloc_hugetlb_folio(
        &mut self,
        c: ResvCtx,
        inode: InodeId,
        idx: u64,
        avoid_reserve: bool,
    ) -> Result<Pfn, VmFault> {
        let size = self.hinode(inode).size;
        let map_chg = self.vma_needs_reservation(c, inode, idx);
        let mut gbl_chg = u64::from(map_chg > 0 || avoid_reserve);
        if gbl_chg > 0 && self.hinode_has_subpool(inode) {
            // No reservation in the map: the subpool's (its minimum), if any, can serve.
            let from_pool = self.subpool_get(inode, 1).map_err(|_| VmFault::SigBus)?;
            gbl_chg = if avoid_reserve { 1 } else { from_pool };
        }
        let has_reserves = !avoid_reserve && c.has_reserves(gbl_chg);
        let h = self.hugetlb.hstate(size);
        let dequeued =
            if has_reserves || h.free > h.resv { self.hugetlb_dequeue(size) } else { None };
        let Some(pfn) = dequeued.or_else(|| self.hugetlb_alloc_surplus(size)) else {
            if map_chg > 0 || avoid_reserve {
                self.subpool_put(inode, 1);
            }
            return Err(VmFault::SigBus);
        };
        self.hugetlb.page_mut(pfn).spool = self.hinode_has_subpool(inode);
        if has_reserves {
            let h = self.hugetlb.hstate_mut(size);
            h.resv = h.resv.checked_sub(1).expect("HugePages_Rsvd underflow");
            self.hugetlb.page_mut(pfn).restore_reserve = true;
        }
        self.hugetlb.page_mut(pfn).refs = 1;
        self.vma_commit_reservation(c, inode, idx);
        Ok(pfn)
    }

    /// `hugetlb_vm_op_close`: a private owner gives back the reservations of its range it never
    /// consumed; the VMA's hugetlb data goes.
    pub(crate) fn hugetlb_vm_op_close(&mut self, vma: VmaId) {
        let Some(hv) = self.hugetlb.vmas.remove(&vma) else { return };
        let Some(id) = hv.resv else { return };
        let size = self.hstate_vma(vma).expect("a hugetlb VMA");
        let (start, end) = self.vma_range(vma);
        let from = self.huge_index(vma, start, size);
        let to = from + (end.offset_from(start).as_u64() >> size.shift());
        let consumed = self.hugetlb.resv_maps[&id].0.count(from, to);
        self.hugetlb.put_resv_map(id);
        let inode = self.file(self.vma(vma).file.expect("a hugetlb VMA")).inode;
        let back = self.subpool_put(inode, to - from - consumed);
        self.hugetlb_acct_memory(size, -(back as i64)).expect("a decrease");
    }

    /// `hugetlb_vm_op_open` for `new`, a copy of `old` made by a split (`fork` passes
    /// `private = false`: `hugetlb_dup_vma_private` leaves a private child without
    /// reservations). A shareable VMA gets its own vma lock (v6.1+); the half of a split private
    /// owner keeps the owner's (v6.6+, the lock is the shared reservation map's).
    pub(crate) fn hugetlb_vm_op_open(&mut self, old: VmaId, new: VmaId, split: bool) {
        let Some(hv) = self.hugetlb.vmas.get(&old).cloned() else { return };
        let resv = if split { hv.resv } else { None };
        if let Some(id) = resv {
            self.hugetlb.resv_maps.get_mut(&id).expect("a live reservation map").1 += 1;
        }
        // A shareable VMA's lock is its own; a private owner's is its reservation map's, which
        // the halves of a split share (a forked child owns neither).
        let lock = match (hv.lock, self.vma(old).flags.has(VmFlags::MAYSHARE)) {
            (Some(_), true) => Some(self.hugetlb.new_vma_lock()),
            (lock, false) if resv.is_some() => lock,
            _ => None,
        };
        let unmapped = split && hv.unmapped;
        self.hugetlb.vmas.insert(new, HVma { resv, unmapped, lock, dying: false });
    }

    /// `hugetlb_vm_op_open` after `__split_vma` made `new` from `old`.
    pub(crate) fn hugetlb_vm_op_split(&mut self, old: VmaId, new: VmaId) {
        self.hugetlb_vm_op_open(old, new, true);
    }

    /// `hugetlb_vm_op_split` for every VMA an operation on `[start, end)` would split: a
    /// hugetlb VMA splits only at a huge page boundary (EINVAL).
    pub(crate) fn hugetlb_check_split(
        &self,
        mm: MmId,
        start: VirtAddr,
        end: VirtAddr,
    ) -> Result<(), Errno> {
        for edge in [start, end] {
            if let Some(v) = self.find_vma(mm, edge).filter(|&v| self.vma(v).start < edge) {
                self.hugetlb_may_split(v, edge)?;
            }
        }
        Ok(())
    }

    /// `hugetlb_vm_op_split`: a hugetlb VMA splits only at a huge page boundary.
    pub(crate) fn hugetlb_may_split(&self, vma: VmaId, at: VirtAddr) -> Result<(), Errno> {
        match self.hstate_vma(vma) {
            Some(size) if !at.is_aligned(simcore::Bytes(size.bytes())) => Err(Errno::EINVAL),
            _ => Ok(()),
        }
    }

    /// A new page's state once a fault has it (for `Owner::New` pages: see [`HPage`]).
    pub(crate) fn huge_page(&self, pfn: Pfn) -> &HPage {
        self.hugetlb.page(pfn).expect("a hugetlb page")
    }
}
