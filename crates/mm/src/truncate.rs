//! Truncation and `fallocate` (`mm/truncate.c` `truncate_pagecache`, `truncate_pagecache_range`,
//! `truncate_inode_pages_range`, `truncate_inode_partial_folio`; `fs/open.c` `do_truncate`,
//! `vfs_fallocate`; `fs/ext4/extents.c` `ext4_fallocate`, `ext4_punch_hole`; `mm/shmem.c`
//! `shmem_fallocate`; Linux v6.8).
//!
//! Shrinking a file, under the inode's `i_rwsem` and `invalidate_lock`: set `i_size`, unmap the
//! pages beyond it from every mapping (private COW copies included, `even_cows`), remove them from
//! the page cache — each folio locked while it goes, so a fault that found it before the new size
//! waits and then sees it gone — and a DAX file's entries, zero the tail of a partial last page,
//! unmap once more for faults that raced in, then free the blocks. Growing a file only moves
//! `i_size` (the new range is a hole). Accesses beyond the new end of file then raise SIGBUS.
//!
//! `fallocate` allocates the holes of a range (ext4: unwritten blocks, which read as zeros;
//! tmpfs: zeroed pages) and extends `i_size` unless `FALLOC_FL_KEEP_SIZE`; with
//! `FALLOC_FL_PUNCH_HOLE` (which requires `KEEP_SIZE`) it unmaps the whole pages of the range
//! from every mapping (private copies stay), removes them from the page cache (or the DAX
//! index), zeroes the partial pages at its edges and frees the whole blocks.
//!
//! Removal takes the kernel's two loops: the first removes at once every folio whose lock it can
//! take, the second looks up what is left without locks and sleeps for each folio's lock. Before
//! v5.17 a THP fills each of its 512 page-cache slots and its deletion empties them one after
//! another (`era::thp_cached_per_index`), so a second truncation's lockless lookup can meet a
//! later slot and get the tail page of that index (`find_get_entries` → `find_subpage`, Linux
//! v5.15 mm/filemap.c), which `truncate_inode_page` refuses with a `VM_BUG_ON_PAGE(PageTail)`
//! that mmsim records (the invariant `truncate_inode_page_not_tail`). From v5.16 openers for
//! write truncate under `invalidate_lock` (55fc0d917467), from v5.17 one multi-index entry
//! stands for the THP (6b24ca4a1a8d).
//!
//! A collapse in progress before v6.4 holds its new page in the slots of the pages it has taken
//! (`xarray::CollapseSlots`, `khugepaged/file.rs`): the first loop, meeting it, skips to the end
//! of its range (a locked large folio, or one starting before the range), and the second finds
//! it, before v5.17 as the tail page of that index, and sleeps on its lock; once the collapse has
//! rolled back, the new page is no longer the file's, and the loop looks again from the same
//! index, as the kernel's restart does (`scenarios/races/collapse-rollback-truncate.toml`).
//!
//! tmpfs pages that reclaim swapped out leave swap entries in the page cache (`shmem.rs`):
//! truncation and hole punching free those of their range, and a partial page at an edge is
//! swapped in to be zeroed.
//!
//! Approximations: allocation is per page, with no journal or extent-status cost beyond one file
//! system allocation per block. A THP's slots empty 64 at a time (one xarray node) rather than
//! one by one, so a racing lookup sees a tail at a node boundary (the kernel's report had
//! 0x7ff, the last slot). Insertions into the page cache do not wait for the deleter's
//! `xa_lock` as the kernel's do; while a THP's slots empty, a page added in its range is found
//! before them.

use crate::errno::Errno;
use crate::filemap::{folio_lock, folio_unlock};
use crate::folio::Mapping;
use crate::folio::folio_trylock;
use crate::fs::falloc;
use crate::kernel::{Cx, KState};
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::xarray::ClearingSlots;
use crate::zap::unmap_mapping_range;
use simcore::{Order, Pfn};

/// `vfs_fallocate` (`fs/open.c`) on open file `f`: the mode, access and range checks, then the
/// file system's `->fallocate` (hugetlbfs's own, or `do_fallocate`). `fallocate(2)` and
/// `MADV_REMOVE` come here.
pub(crate) async fn vfs_fallocate(
    cx: &Cx,
    f: FileId,
    mode: u32,
    offset: u64,
    len: u64,
) -> Result<(), Errno> {
    let (inode, writable) = {
        let st = cx.st();
        (st.file(f).inode, st.file(f).writable())
    };
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    if mode & !(falloc::KEEP_SIZE | falloc::PUNCH_HOLE) != 0
        || (mode & falloc::PUNCH_HOLE != 0 && mode & falloc::KEEP_SIZE == 0)
    {
        return Err(Errno::EOPNOTSUPP);
    }
    if !writable {
        return Err(Errno::EBADF);
    }
    if cx.st().inodes[inode].fs.is_fifo() {
        return Err(Errno::ESPIPE);
    }
    if offset.checked_add(len).is_none_or(|end| end > i64::MAX as u64) {
        return Err(Errno::EFBIG);
    }
    if cx.st().inodes[inode].fs.is_blkdev() {
        blkdev_fallocate_check(cx, inode, mode, offset, len)?;
        return do_fallocate(cx, inode, mode, offset, len).await;
    }
    if cx.st().hugetlb_size_of(inode).is_some() {
        if !crate::era::hugetlbfs_has_fallocate(cx.kernel().version) {
            return Err(Errno::EOPNOTSUPP);
        }
        let (punch, keep) = (mode & falloc::PUNCH_HOLE != 0, mode & falloc::KEEP_SIZE != 0);
        return crate::fs::hugetlbfs::hugetlbfs_fallocate(cx, inode, punch, keep, offset, len)
            .await;
    }
    do_fallocate(cx, inode, mode, offset, len).await
}

/// `blkdev_fallocate`'s checks (v4.9; EOPNOTSUPP before): only a punched hole (zeroed, the
/// page cache over it dropped) with `FALLOC_FL_KEEP_SIZE`, inside the device and aligned to its
/// 512-byte logical blocks.
fn blkdev_fallocate_check(
    cx: &Cx,
    inode: InodeId,
    mode: u32,
    offset: u64,
    len: u64,
) -> Result<(), Errno> {
    if !crate::era::blkdev_has_fallocate(cx.kernel().version) || mode & falloc::PUNCH_HOLE == 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let size = cx.st().inodes[inode].size;
    if offset + len > size || !offset.is_multiple_of(512) || !len.is_multiple_of(512) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `do_truncate`: sets the size of `inode` to `size` bytes.
pub(crate) async fn do_truncate(cx: &Cx, inode: InodeId, size: u64) {
    let (i_rwsem, invalidate) = {
        let st = cx.st();
        let i = &st.inodes[inode];
        (i.i_rwsem, i.mapping.invalidate_lock)
    };
    let _i = i_rwsem.write(cx).await;
    if cx.st().hugetlb_size_of(inode).is_some() {
        // `hugetlbfs_setattr`: the size is a huge page multiple (the syscall checked).
        return crate::fs::hugetlbfs::hugetlb_vmtruncate(cx, inode, size).await;
    }
    let old = cx.st().inodes[inode].size;
    if size >= old {
        let mut st = cx.st();
        let i = &mut st.inodes[inode];
        let (from, to) = (old.div_ceil(4096), size.div_ceil(4096));
        i.backing.punch(from, to);
        i.size = size;
        return;
    }
    cx.st().inodes[inode].size = size;
    let _inv = invalidate.write(cx).await;
    let first_gone = size.div_ceil(4096);
    unmap_mapping_range(cx, inode, first_gone, None, true).await;
    truncate_inode_pages_range(cx, inode, size, None).await;
    unmap_mapping_range(cx, inode, first_gone, None, true).await;
    let end = old.div_ceil(4096);
    free_backing(cx, inode, first_gone, end);
    if !size.is_multiple_of(4096) {
        // The partial last block keeps its head; its tail reads as zeros from now on.
        zero_backing(cx, inode, size / 4096, (size % 4096) as usize, 4096);
    }
}

/// Frees the blocks of pages `[first, end)` on the backing store, which read as a hole after.
fn free_backing(cx: &Cx, inode: InodeId, first: u64, end: u64) {
    let mut st = cx.st();
    let fs = st.inodes[inode].fs;
    fs.free_blocks(&mut st, inode, first, end);
}

/// Zeroes bytes `[from, to)` of page `index` on the backing store, if it has a block.
fn zero_backing(cx: &Cx, inode: InodeId, index: u64, from: usize, to: usize) {
    let mut st = cx.st();
    let fs = st.inodes[inode].fs;
    fs.zero_partial(&mut st, inode, index, from..to);
}

/// `truncate_inode_pages_range` for bytes `[lstart, lend)` (`None`: to the end of the file):
/// removes the cached folios wholly inside, zeroes the parts of the partial pages at the edges,
/// and deletes a DAX file's entries.
pub(crate) async fn truncate_inode_pages_range(
    cx: &Cx,
    inode: InodeId,
    lstart: u64,
    lend: Option<u64>,
) {
    let first = lstart.div_ceil(4096);
    let end = lend.map_or(u64::MAX, |e| e / 4096);
    {
        let mut st = cx.st();
        st.workingset_truncate(inode, first, end);
        st.shmem_free_swap_range(inode, first, end);
    }
    // The second loop makes one pass: the kernel's restarts from `start` until a lookup finds
    // nothing, which mmsim leaves out because not every exclusion that keeps a concurrent reader
    // from refilling the range (`invalidate_lock`, ext4's `i_mmap_sem`) is modelled, so a
    // restart could livelock against it (swarm seed 1009).
    if first < end {
        remove_cached(cx, inode, first, end).await;
    }
    if !lstart.is_multiple_of(4096) {
        shmem_partial_swapin(cx, inode, lstart / 4096).await;
        let to = lend.filter(|&e| e / 4096 == lstart / 4096).map_or(4096, |e| (e % 4096) as usize);
        zero_cached(cx, inode, lstart / 4096, (lstart % 4096) as usize, to).await;
    }
    if let Some(e) = lend.filter(|&e| !e.is_multiple_of(4096) && e / 4096 != lstart / 4096) {
        shmem_partial_swapin(cx, inode, e / 4096).await;
        zero_cached(cx, inode, e / 4096, 0, (e % 4096) as usize).await;
    }
    if cx.st().inodes[inode].fs.is_dax() && first < end {
        crate::fs::dax::dax_delete_mapping_range(cx, inode, first, lend.map(|e| e / 4096)).await;
    }
}

/// A partial page at the edge of the range that shmem swapped out comes back to be zeroed
/// (`shmem_undo_range` → `shmem_get_partial_folio`). Without memory for it the swapped copy is
/// left as it is (the kernel's lookup fails the same way and skips the page).
async fn shmem_partial_swapin(cx: &Cx, inode: InodeId, index: u64) {
    if cx.st().inodes[inode].mapping.swapped.contains_key(&index) {
        let _ = crate::shmem::shmem_swapin(cx, inode, index).await;
    }
}

/// `truncate_inode_pages_range`'s two loops over pages `[first, end)`. The first
/// (`find_lock_entries`, `truncate_cleanup_folio`, `delete_from_page_cache_batch`) removes every
/// folio whose lock it can take at once; the second (`find_get_entries`) looks up what is still
/// there without locks and removes each folio after sleeping for its lock.
async fn remove_cached(cx: &Cx, inode: InodeId, first: u64, end: u64) {
    // The folios are looked up, referenced and trylocked together, as `find_lock_entries` takes
    // a reference on each folio of its batch when it finds it: reclaim cannot free one while
    // truncation works on an earlier one (found by swarm testing, issue 22).
    let batch: Vec<Pfn> = {
        let mut st = cx.st();
        let heads = first_loop_heads(&st, inode, first, end);
        let locked: Vec<Pfn> =
            heads.into_iter().filter(|&h| folio_trylock(&mut st.folios, h)).collect();
        for &head in &locked {
            st.folios.get_extra(head);
        }
        locked
    };
    for &head in &batch {
        truncate_folio(cx, inode, head).await;
    }
    for head in batch {
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
    }
    let mut index = first;
    loop {
        let found = find_get_entry(&mut cx.st(), inode, index, end);
        let Some((at, page, head)) = found else { break };
        if cx.st().inodes[inode].mapping.collapse_slots.is_some_and(|c| c.new == head) {
            cx.st().thp.khugepaged.slot_truncations += 1;
        }
        folio_lock(cx, head).await;
        let left = cx.st().folios.mapping(head) != Mapping::File(inode);
        truncate_inode_page(cx, inode, at, page, head).await;
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
        // A folio that left the file while this waited for its lock (a rolled-back collapse's
        // new page among them) is looked past from the same index, as the kernel's restart
        // would find what stands there now.
        index = match (left, page == head) {
            (true, _) => at,
            (false, true) => at + cx.st().folios.order(head).pages(),
            (false, false) => at + 1,
        };
    }
}

/// The folios the first loop (`find_lock_entries`) meets in `[first, end)`. Where a collapse's
/// new page holds a slot of the range (before v6.4, `xarray::CollapseSlots`) the lookup finds a
/// locked large folio, or one starting before `first`, which it skips together with the rest of
/// its range (`xas_set` to the folio's end): the old pages still in the slots after it are left
/// to the second loop.
fn first_loop_heads(st: &KState, inode: InodeId, first: u64, end: u64) -> Vec<Pfn> {
    let m = &st.inodes[inode].mapping;
    let skip = m.collapse_slots.and_then(|c| {
        let at = c.first_at_or_after(first).filter(|&at| at < end)?;
        Some(at..c.start + Order::PMD.pages())
    });
    let skipped = |i: u64| skip.as_ref().is_some_and(|s| s.contains(&i));
    m.pages.range(first..end).filter(|&(&i, _)| !skipped(i)).map(|(_, &h)| h).collect()
}

/// The second loop's lockless lookup (`find_get_entries` for one entry): the first entry at or
/// after `index` and before `end`, referenced, as `(index, page, head)`. A large folio being
/// deleted is found at its first slot not yet emptied, which before v5.17 gives the page of
/// that index, a tail (`find_subpage`), where later kernels return the folio.
fn find_get_entry(
    st: &mut KState,
    inode: InodeId,
    index: u64,
    end: u64,
) -> Option<(u64, Pfn, Pfn)> {
    let m = &st.inodes[inode].mapping;
    let replaced = |at: u64| m.collapse_slots.is_some_and(|c| c.replaced(at));
    let cached = m.pages.range(index..end).find(|&(&at, _)| !replaced(at));
    let cached = cached.map(|(&at, &head)| (at, head, head));
    let clearing =
        m.clearing.map(|c| (c.next.max(index), c)).filter(|&(at, c)| at < c.end.min(end));
    let clearing = clearing.map(|(at, c)| (at, c.head + (at - c.index), c.head));
    let per_index = crate::era::thp_cached_per_index(st.thp.kernel);
    let collapsing = m.collapse_slots.and_then(|c| {
        let at = c.first_at_or_after(index).filter(|&at| at < end)?;
        let page = if per_index { c.new + (at - c.start) } else { c.new };
        Some((at, page, c.new))
    });
    // The lowest index wins; a cached folio before the others at the same index.
    let found = [cached, clearing, collapsing].into_iter().flatten().min_by_key(|&(at, ..)| at);
    if let Some((_, _, head)) = found {
        st.folios.get_extra(head);
    }
    found
}

/// `truncate_inode_page` for `page` at `index`, its folio `head` locked: removes the folio if
/// it is still this file's. Handed a tail page (possible only before v5.17, above) it hits
/// `VM_BUG_ON_PAGE(PageTail)` (mm/truncate.c), which mmsim records; without CONFIG_DEBUG_VM the
/// kernel goes on to find that the tail's mapping is not the file and returns -EIO.
async fn truncate_inode_page(cx: &Cx, inode: InodeId, index: u64, page: Pfn, head: Pfn) {
    if page != head {
        let mut st = cx.st();
        if st.vm_bug.is_none() {
            let order = st.folios.order(head).0;
            let msg = format!(
                "{}: truncate_inode_page given page {index:#x}, a tail of the order-{order} folio at {:#x}",
                st.inodes[inode].path,
                index - (page.0 - head.0),
            );
            st.vm_bug = Some((TAIL_BUG, msg));
        }
        return;
    }
    if cx.st().folios.mapping(head) == Mapping::File(inode) {
        truncate_folio(cx, inode, head).await;
    }
}

/// The `VM_BUG_ON` site of [`truncate_inode_page`], named as an invariant (`sim/check.rs`).
pub(crate) const TAIL_BUG: &str = "truncate_inode_page_not_tail";

/// Removes locked folio `head`, cached in `inode`: unmaps it if a fault mapped it after the
/// first unmap (`truncate_cleanup_folio`), then deletes it from the page cache
/// (`delete_from_page_cache_batch`). Before v5.17 a large folio's slots empty one node (64
/// indices) at a time under the xa_lock, and another CPU's lockless lookup may look between
/// two steps (mmsim samples the kernel's index-by-index stores at node boundaries); the folio's
/// accounting goes first, as `filemap_unaccount_folio` precedes `page_cache_delete_batch`.
async fn truncate_folio(cx: &Cx, inode: InodeId, head: Pfn) {
    let (mapped, index, nr) = {
        let st = cx.st();
        (st.folios.folio_mapcount(head) > 0, st.folio_index(head), st.folios.order(head).pages())
    };
    if mapped {
        unmap_mapping_range(cx, inode, index, Some(index + nr), false).await;
    }
    if nr == 1 || !crate::era::thp_cached_per_index(cx.kernel().version) {
        cx.st().page_cache_delete(inode, head);
        return;
    }
    let xa_lock = cx.st().inodes[inode].mapping.xa_lock;
    let _xa = xa_lock.lock(cx).await;
    cx.st().page_cache_delete(inode, head);
    for next in (index + 64..index + nr).step_by(64) {
        cx.st().inodes[inode].mapping.clearing =
            Some(ClearingSlots { head, index, next, end: index + nr });
        cx.preempt_point().await;
    }
    cx.st().inodes[inode].mapping.clearing = None;
}

/// `truncate_inode_partial_folio`: zeroes bytes `[from, to)` of cached page `index`, if cached.
async fn zero_cached(cx: &Cx, inode: InodeId, index: u64, from: usize, to: usize) {
    let cached = cx.st().page_cache_get(inode, index);
    let Some(head) = cached else { return };
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    {
        let mut st = cx.st();
        if st.folios.mapping(head) == Mapping::File(inode) {
            let page = head + (index - st.folio_index(head));
            st.mem.write(page.0, from, &vec![0; to - from]);
        }
    }
    folio_unlock(cx, head);
    cx.st().put_folio_extra(head);
}

/// `vfs_fallocate` on an open regular file: `mode` is a set of `falloc` flags.
async fn do_fallocate(
    cx: &Cx,
    inode: InodeId,
    mode: u32,
    offset: u64,
    len: u64,
) -> Result<(), Errno> {
    let (i_rwsem, invalidate) = {
        let st = cx.st();
        let i = &st.inodes[inode];
        (i.i_rwsem, i.mapping.invalidate_lock)
    };
    let _i = i_rwsem.write(cx).await;
    let end = offset + len;
    if mode & falloc::PUNCH_HOLE != 0 {
        let _inv = invalidate.write(cx).await;
        let size = cx.st().inodes[inode].size;
        if offset >= size {
            return Ok(());
        }
        let end = end.min(size);
        let (first, last) = (offset.div_ceil(4096), end / 4096);
        if first < last {
            unmap_mapping_range(cx, inode, first, Some(last), false).await;
        }
        truncate_inode_pages_range(cx, inode, offset, Some(end)).await;
        if first < last {
            free_backing(cx, inode, first, last);
        }
        if !offset.is_multiple_of(4096) {
            let to = if end / 4096 == offset / 4096 { (end % 4096) as usize } else { 4096 };
            zero_backing(cx, inode, offset / 4096, (offset % 4096) as usize, to);
        }
        if !end.is_multiple_of(4096) && end / 4096 != offset / 4096 {
            zero_backing(cx, inode, end / 4096, 0, (end % 4096) as usize);
        }
        return Ok(());
    }
    let (first, last) = (offset / 4096, end.div_ceil(4096));
    let fs = cx.st().inodes[inode].fs;
    let result = fs.fallocate(cx, inode, first, last).await;
    if result.is_ok() && mode & falloc::KEEP_SIZE == 0 {
        let mut st = cx.st();
        let i = &mut st.inodes[inode];
        i.size = i.size.max(end);
    }
    result
}
