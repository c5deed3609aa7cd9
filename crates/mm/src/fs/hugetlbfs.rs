//! hugetlbfs (`fs/hugetlbfs/inode.c` `hugetlbfs_file_mmap`, `hugetlbfs_setattr`,
//! `hugetlb_vmtruncate`, `hugetlb_vmdelete_list`, `remove_inode_hugepages`,
//! `remove_inode_single_folio`, `hugetlb_unmap_file_folio`, `hugetlbfs_punch_hole`,
//! `hugetlbfs_fallocate`, `hugetlbfs_read_iter`; `mm/hugetlb.c` `hugetlb_file_setup`; Linux
//! v4.0-v6.19 by the `hugetlb_sync` switch (`revert` before v5.7; `fallocate` from v4.3; from
//! v6.6 the vma lock that truncation tries for each mapping exists for private reservation
//! owners too, [`crate::era::hugetlb_private_vma_lock`]; the eras in [`crate::hugetlb`]).
//!
//! A hugetlbfs file's pages are huge pages of its mount's size, held in its page cache by
//! huge-page index; `MAP_HUGETLB` maps an unlinked file of the internal mount of the size the
//! flags ask for (`hugetlb_file_setup`), private or shared. `mmap` needs a huge-page aligned
//! offset (EINVAL), reserves the pages of the range (ENOMEM), and a writable mapping extends
//! `i_size` to its end. `ftruncate` needs a huge-page multiple (EINVAL); `write` is EINVAL (no
//! `write_iter`); `read` copies from the page cache, holes reading as zeros.
//!
//! Truncation and hole punching by scheme (B.4 of the reference):
//! - `i_mmap_rwsem` (v5.7-v6.0): truncation sets `i_size` under `i_mmap_rwsem` for write while
//!   it unmaps every mapping of the range; removing the pages takes the fault mutex only when
//!   punching a hole, and a page a fault mapped meanwhile is unmapped again with the mutex
//!   dropped and retaken after `i_mmap_rwsem` (their order then).
//! - `revert` (the seed's patches 1-2): `i_size` is set before `i_mmap_rwsem` is taken; page
//!   removal takes the fault mutex for truncation too, and unmaps a raced-in page under
//!   `i_mmap_rwsem` for write while holding the mutex.
//! - `vma_lock` (v6.1): as `revert`, but each VMA is unmapped only if its vma lock can be taken
//!   for write without waiting (`hugetlb_vma_trylock_write`; the lock order puts it before
//!   `i_mmap_rwsem`); a page still mapped when it is removed is unmapped by
//!   `hugetlb_unmap_file_folio`, which, when a VMA's lock is busy, drops `i_mmap_rwsem`, waits
//!   for the vma lock, retakes `i_mmap_rwsem` and unmaps if the VMA still maps the page.
//!
//! Truncation releases the reservations of the removed range at the end; hole punching
//! releases them page by page. Unmapping zaps private copies too (`hugetlb-madvise.c` counts on
//! it).
//!
//! Approximations: no seals, no mount options (`size=`, `min_size=`, `nr_inodes=`), no partial
//! page zeroing at the edges of a hole (a later kernel's); the VMA lock's `kref` and
//! `vma_lock->vma` pointer are the VMA's presence in the kernel state.

use crate::era::HugetlbSync;
use crate::errno::{Errno, VmFault};
use crate::hugetlb::hugetlb_fault::{huge_folio_lock, huge_folio_unlock};
use crate::hugetlb::reserve::ResvCtx;
use crate::hugetlb::{fault_mutex, unmap::zap_huge_range};
use crate::kernel::{Cx, KState};
use crate::sim::cost::Cost;
use crate::types::hugetlb::{HugeSize, Owner};
use crate::types::ids::InodeId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use engine::{LockGuard, RwSem};
use simcore::{Pfn, VirtAddr};

impl KState {
    /// `hugetlbfs_file_mmap`, once the VMA exists: alignment, the vma lock (v6.1), the
    /// reservation, and `i_size` for a writable mapping.
    pub(crate) fn hugetlbfs_file_mmap(&mut self, vma: VmaId) -> Result<(), Errno> {
        let size = self.hstate_vma(vma).expect("a hugetlbfs mapping");
        let inode = self.file(self.vma(vma).file.expect("a file")).inode;
        let v = self.vma(vma);
        if !v.pgoff.is_multiple_of(size.pages()) {
            return Err(Errno::EINVAL);
        }
        let len = v.len().as_u64() + (v.pgoff << 12);
        let (from, writable) = (v.pgoff / size.pages(), v.flags.has(VmFlags::WRITE));
        let to = from + (v.len().as_u64() >> size.shift());
        let (vma_lock, shared) =
            (self.hugetlb_sync().has_vma_lock(), v.flags.has(VmFlags::MAYSHARE));
        if vma_lock && shared {
            let lock = self.hugetlb.new_vma_lock();
            self.hugetlb.vmas.entry(vma).or_default().lock = Some(lock);
        }
        self.hugetlb_reserve_pages(inode, from, to, vma)?;
        // v6.6: a private mapping that owns reservations locks with its reservation map's
        // `rw_sema` (bf4916922c60).
        let owner = self.hugetlb.vmas.get(&vma).is_some_and(|h| h.resv.is_some());
        if vma_lock && !shared && owner && self.hugetlb.private_vma_lock {
            let lock = self.hugetlb.new_vma_lock();
            self.hugetlb.vmas.entry(vma).or_default().lock = Some(lock);
        }
        let i = &mut self.inodes[inode];
        if writable && i.size < len {
            i.size = len;
        }
        Ok(())
    }

    /// Removes page `index` from `inode`'s page cache (`hugetlb_delete_from_page_cache`).
    fn hugetlb_delete_from_page_cache(&mut self, inode: InodeId, index: u64) -> Pfn {
        let page = self.hinode_mut(inode).cache.remove(&index).expect("a cached page");
        self.hugetlb.page_mut(page).owner = Owner::New;
        page
    }

    /// `hugetlbfs_read_iter`: `len` bytes from `pos`, up to `i_size`; holes read as zeros.
    pub(crate) fn hugetlbfs_read(&self, inode: InodeId, pos: u64, len: u64) -> Vec<u8> {
        let hi = self.hinode(inode);
        let end = pos.saturating_add(len).min(self.inodes[inode].size);
        let mut out = vec![0u8; end.saturating_sub(pos) as usize];
        let mut at = pos;
        while at < end {
            let n = (4096 - at % 4096).min(end - at);
            if let Some(&page) = hi.cache.get(&(at >> hi.size.shift())) {
                let frame = page.0 + ((at % hi.size.bytes()) >> 12);
                let o = (at - pos) as usize;
                self.mem.read(frame, (at % 4096) as usize, &mut out[o..o + n as usize]);
            }
            at += n;
        }
        out
    }
}

/// The VMAs of `inode` mapping huge indexes `[start, end)`, with the address range each maps.
fn mappings(
    st: &KState,
    inode: InodeId,
    start: u64,
    end: Option<u64>,
) -> Vec<(VmaId, VirtAddr, VirtAddr)> {
    let pages = st.hinode(inode).size.pages();
    st.i_mmap_ranges(inode, start * pages, end.map(|e| e.saturating_mul(pages)))
}

/// The vma lock a truncation must take to unmap `vma`, if the scheme has one.
fn vma_lock(st: &KState, vma: VmaId) -> Option<RwSem> {
    let lock = st.hugetlb.vmas.get(&vma).and_then(|h| h.lock);
    lock.filter(|_| st.hugetlb_sync().has_vma_lock())
}

/// A mapping's vma lock for write as truncation takes it (`hugetlb_vma_trylock_write`): `None`
/// when it is busy; the broken `vma_lock_blocking` waits for it instead.
async fn vma_lock_for_unmap(cx: &Cx, l: RwSem) -> Option<LockGuard<'_>> {
    let sync = cx.st().hugetlb_sync();
    match sync {
        HugetlbSync::VmaLockBlocking => Some(l.write(cx).await),
        _ => l.try_write(cx).await,
    }
}

/// `hugetlb_vmdelete_list`: unmaps huge indexes `[start, end)` from every mapping of `inode`;
/// the caller holds `i_mmap_rwsem` for write. Under `vma_lock` a VMA whose lock is busy is
/// skipped (`hugetlb_vma_trylock_write`).
async fn hugetlb_vmdelete_list(cx: &Cx, inode: InodeId, start: u64, end: Option<u64>) {
    let targets = mappings(&cx.st(), inode, start, end);
    for (vma, from, to) in targets {
        let lock = vma_lock(&cx.st(), vma);
        let guard = match lock {
            Some(l) => match vma_lock_for_unmap(cx, l).await {
                Some(g) => Some(g),
                None => continue,
            },
            None => None,
        };
        zap_huge_range(cx, vma, from, to, None).await;
        drop(guard);
    }
}

/// `hugetlb_unmap_file_folio` (v6.1): unmaps `page` (index `index`) from every VMA still mapping
/// it, taking each VMA's lock in order when a trylock fails.
async fn hugetlb_unmap_file_folio(cx: &Cx, inode: InodeId, index: u64, page: Pfn) {
    let i_mmap = cx.st().inodes[inode].mapping.i_mmap_rwsem;
    loop {
        let g = i_mmap.write(cx).await;
        let mut skipped = None;
        let targets = mappings(&cx.st(), inode, index, Some(index + 1));
        for (vma, from, to) in targets {
            if !maps_page(&cx.st(), vma, from, page) {
                continue;
            }
            let lock = vma_lock(&cx.st(), vma);
            let guard = match lock {
                Some(l) => match vma_lock_for_unmap(cx, l).await {
                    Some(g) => Some(g),
                    None => {
                        skipped = Some((vma, l, from, to));
                        break;
                    }
                },
                None => None,
            };
            zap_huge_range(cx, vma, from, to, None).await;
            drop(guard);
        }
        drop(g);
        let Some((vma, lock, from, to)) = skipped else { return };
        // Take the locks in order, then check that the VMA still has this lock and the page.
        let _v = lock.write(cx).await;
        let _g = i_mmap.write(cx).await;
        let alive = {
            let st = cx.st();
            st.hugetlb.vmas.get(&vma).is_some_and(|h| h.lock == Some(lock))
                && maps_page(&st, vma, from, page)
        };
        if alive {
            zap_huge_range(cx, vma, from, to, None).await;
        }
    }
}

/// `hugetlb_vma_maps_page`.
fn maps_page(st: &KState, vma: VmaId, addr: VirtAddr, page: Pfn) -> bool {
    let size = st.hstate_vma(vma).expect("a hugetlb VMA");
    let mm = st.vma(vma).mm;
    st.huge_pte_offset(mm, addr, size).is_some_and(|p| {
        let e = st.huge_ptep_get(p);
        !e.is_none() && e.pfn() == page
    })
}

/// Unmaps a page a fault mapped after the range was unmapped, by the scheme's rules; the
/// caller holds the index's fault mutex (under `i_mmap_rwsem`, only when punching).
async fn unmap_raced_page(cx: &Cx, inode: InodeId, index: u64, page: Pfn) {
    let sync = cx.st().hugetlb_sync();
    match sync {
        HugetlbSync::VmaLock | HugetlbSync::VmaLockBlocking => {
            hugetlb_unmap_file_folio(cx, inode, index, page).await
        }
        HugetlbSync::Revert | HugetlbSync::IMmapRwsem => {
            let l = cx.st().inodes[inode].mapping.i_mmap_rwsem;
            let _g = l.write(cx).await;
            hugetlb_vmdelete_list(cx, inode, index, Some(index + 1)).await;
        }
    }
}

/// `remove_inode_hugepages`: removes the cached pages of huge indexes `[start, end)` (`None`:
/// truncation to `start`), releasing reservations.
async fn remove_inode_hugepages(cx: &Cx, inode: InodeId, start: u64, end: Option<u64>) {
    let truncate = end.is_none();
    let sync = cx.st().hugetlb_sync();
    let found: Vec<(u64, Pfn)> = cx
        .st()
        .hinode(inode)
        .cache
        .range(start..end.unwrap_or(u64::MAX))
        .map(|(&i, &p)| (i, p))
        .collect();
    let mut freed = 0;
    for (index, page) in found {
        let mutex = fault_mutex(cx, inode, index);
        let m = if truncate && sync == HugetlbSync::IMmapRwsem {
            None
        } else {
            Some(mutex.lock(cx).await)
        };
        if cx.st().hinode(inode).cache.get(&index) != Some(&page) {
            continue;
        }
        if cx.st().huge_page(page).mapcount > 0 {
            assert!(
                !truncate || sync != HugetlbSync::IMmapRwsem,
                "a fault raced truncation under i_mmap_rwsem"
            );
            if sync == HugetlbSync::IMmapRwsem {
                // v5.7: drop the mutex to take `i_mmap_rwsem` first, then retake it.
                drop(m);
                let l = cx.st().inodes[inode].mapping.i_mmap_rwsem;
                let _g = l.write(cx).await;
                let _m = mutex.lock(cx).await;
                hugetlb_vmdelete_list(cx, inode, index, Some(index + 1)).await;
                drop(_g);
                remove_one(cx, inode, index, page, truncate).await;
                freed += 1;
                continue;
            }
            unmap_raced_page(cx, inode, index, page).await;
        }
        remove_one(cx, inode, index, page, truncate).await;
        freed += 1;
        drop(m);
    }
    if truncate {
        cx.st().hugetlb_unreserve_pages(inode, start, u64::MAX, freed);
    }
}

/// `remove_inode_single_folio`: the page leaves the page cache under its lock; a hole punch
/// releases its index's reservation.
async fn remove_one(cx: &Cx, inode: InodeId, index: u64, page: Pfn, truncate: bool) {
    huge_folio_lock(cx, page).await;
    cx.st().hugetlb_delete_from_page_cache(inode, index);
    if !truncate {
        cx.st().hugetlb_unreserve_pages(inode, index, index + 1, 1);
    }
    huge_folio_unlock(cx, page);
    cx.charge(Cost::PageFree).await;
    cx.st().put_huge_folio(page, 1);
}

/// `hugetlb_vmtruncate` for a new size `offset` (a huge-page multiple), under `i_rwsem`.
pub(crate) async fn hugetlb_vmtruncate(cx: &Cx, inode: InodeId, offset: u64) {
    let (size, i_mmap, sync) = {
        let st = cx.st();
        (st.hinode(inode).size, st.inodes[inode].mapping.i_mmap_rwsem, st.hugetlb_sync())
    };
    debug_assert_eq!(offset % size.bytes(), 0);
    cx.st().hinode_mut(inode).busy += 1;
    let start = offset >> size.shift();
    if sync != HugetlbSync::IMmapRwsem {
        cx.st().inodes[inode].size = offset;
    }
    let g = i_mmap.write(cx).await;
    if sync == HugetlbSync::IMmapRwsem {
        cx.st().inodes[inode].size = offset;
    }
    hugetlb_vmdelete_list(cx, inode, start, None).await;
    drop(g);
    remove_inode_hugepages(cx, inode, start, None).await;
    let mut st = cx.st();
    let hi = st.hinode_mut(inode);
    hi.busy -= 1;
    hi.kept_end = 0;
}

/// `hugetlbfs_setattr`'s size change: EINVAL unless a multiple of the huge page size.
pub(crate) fn check_truncate_size(st: &KState, inode: InodeId, size: u64) -> Result<(), Errno> {
    match st.hugetlb_size_of(inode) {
        Some(h) if !size.is_multiple_of(h.bytes()) => Err(Errno::EINVAL),
        _ => Ok(()),
    }
}

/// `hugetlbfs_fallocate`: punches a hole (whole huge pages inside the range) or allocates the
/// range's missing pages into the page cache (ENOSPC when the pool runs out), extending `i_size`
/// unless `keep_size`.
pub(crate) async fn hugetlbfs_fallocate(
    cx: &Cx,
    inode: InodeId,
    punch: bool,
    keep_size: bool,
    offset: u64,
    len: u64,
) -> Result<(), Errno> {
    let (size, i_rwsem) = {
        let st = cx.st();
        (st.hinode(inode).size, st.inodes[inode].i_rwsem)
    };
    let _i = i_rwsem.write(cx).await;
    if punch {
        hugetlbfs_punch_hole(cx, inode, size, offset, len).await;
        return Ok(());
    }
    cx.st().hinode_mut(inode).busy += 1;
    let done = fallocate_range(cx, inode, size, offset, len).await;
    cx.st().hinode_mut(inode).busy -= 1;
    done?;
    let mut st = cx.st();
    let i = &mut st.inodes[inode];
    if !keep_size && offset + len > i.size {
        i.size = offset + len;
    }
    if keep_size {
        let hi = st.hinode_mut(inode);
        hi.kept_end = hi.kept_end.max((offset + len).div_ceil(size.bytes()));
    }
    Ok(())
}

/// Allocates the missing pages of `[offset, offset + len)` into the page cache.
async fn fallocate_range(
    cx: &Cx,
    inode: InodeId,
    size: HugeSize,
    offset: u64,
    len: u64,
) -> Result<(), Errno> {
    let (start, end) = (offset >> size.shift(), (offset + len).div_ceil(size.bytes()));
    for index in start..end {
        let _m = fault_mutex(cx, inode, index).lock(cx).await;
        if cx.st().hinode(inode).cache.contains_key(&index) {
            continue;
        }
        let page = cx.st().alloc_hugetlb_folio(ResvCtx::FALLOCATE, inode, index, false);
        let page =
            page.map_err(|e| if e == VmFault::SigBus { Errno::ENOSPC } else { Errno::ENOMEM })?;
        cx.charge(Cost::PageAlloc).await;
        cx.charge_n(Cost::ZeroPage4k, size.pages()).await;
        cx.charge(Cost::PageCacheInsert).await;
        let mut st = cx.st();
        st.mem.zero_range(page, size.pages());
        let p = st.hugetlb.page_mut(page);
        p.owner = Owner::Cache { inode, index };
        p.restore_reserve = false;
        st.hinode_mut(inode).cache.insert(index, page);
    }
    Ok(())
}

/// `hugetlbfs_punch_hole`: the whole huge pages of `[offset, offset + len)`.
async fn hugetlbfs_punch_hole(cx: &Cx, inode: InodeId, size: HugeSize, offset: u64, len: u64) {
    let (start, end) = (offset.div_ceil(size.bytes()), (offset + len) / size.bytes());
    if start >= end {
        return;
    }
    cx.st().hinode_mut(inode).busy += 1;
    let i_mmap = cx.st().inodes[inode].mapping.i_mmap_rwsem;
    let g = i_mmap.write(cx).await;
    hugetlb_vmdelete_list(cx, inode, start, Some(end)).await;
    drop(g);
    remove_inode_hugepages(cx, inode, start, Some(end)).await;
    cx.st().hinode_mut(inode).busy -= 1;
}

/// `hugetlb_file_setup`: the unlinked hugetlbfs file behind a `MAP_HUGETLB` mapping of `len`
/// bytes (a multiple of the page size).
pub(crate) fn hugetlb_file_setup(
    st: &mut KState,
    handle: &engine::Handle,
    size: HugeSize,
    len: u64,
) -> crate::types::ids::FileId {
    let fs = crate::types::fs::FsType::Hugetlbfs(size);
    let inode = st.new_inode(handle, "/anon_hugepage (deleted)".into(), fs, len, None);
    st.open_file(inode, crate::fs::fmode::READ | crate::fs::fmode::WRITE, false, false)
        .expect("a new hugetlbfs inode is never write-denied")
}

impl KState {
    /// `hugetlbfs_evict_inode`: the last reference to an unlinked hugetlbfs file (a
    /// `MAP_HUGETLB` mapping's) is gone: its pages and reservations go with it
    /// (`remove_inode_hugepages` over the whole file, nobody left to race).
    pub(crate) fn hugetlbfs_evict_inode(&mut self, inode: InodeId) {
        if self.hugetlb_size_of(inode).is_none() || self.paths.values().any(|&i| i == inode) {
            return;
        }
        let cache = std::mem::take(&mut self.hinode_mut(inode).cache);
        let freed = cache.len() as u64;
        for (_, page) in cache {
            self.hugetlb.page_mut(page).owner = Owner::New;
            self.put_huge_folio(page, 1);
        }
        self.hugetlb_unreserve_pages(inode, 0, u64::MAX, freed);
    }

    /// Marks a hugetlb VMA that is going away: it is no longer a PMD-sharing candidate.
    pub(crate) fn hugetlb_vma_dying(&mut self, vma: VmaId) {
        if self.vma(vma).vm_ops.is_hugetlb() {
            self.hugetlb.vmas.entry(vma).or_default().dying = true;
        }
    }
}
