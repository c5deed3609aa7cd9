//! Truncation (`mm/truncate.c` `truncate_pagecache`, `truncate_inode_pages_range`,
//! `truncate_inode_partial_folio`; `fs/open.c` `do_truncate`; Linux v6.8).
//!
//! Shrinking a file, under the inode's `i_rwsem` and `invalidate_lock`: set `i_size`, unmap the
//! pages beyond it from every mapping (private COW copies included, `even_cows`), remove them from
//! the page cache — each folio locked while it goes, so a fault that found it before the new size
//! waits and then sees it gone — zero the tail of a partial last page, unmap once more for faults
//! that raced in, then free the blocks. Growing a file only moves `i_size` (the new range is a
//! hole). Accesses beyond the new end of file then raise SIGBUS.

use crate::content::Content;
use crate::filemap::{folio_lock, folio_unlock};
use crate::folio::{InodeId, Mapping};
use crate::kernel::Cx;
use crate::zap::unmap_mapping_range;
use simcore::Pfn;

/// `do_truncate`: sets the size of `inode` to `size` bytes.
pub(crate) async fn do_truncate(cx: &Cx, inode: InodeId, size: u64) {
    let (i_rwsem, invalidate) = {
        let st = cx.st();
        let i = &st.inodes[inode];
        (i.i_rwsem, i.mapping.invalidate_lock)
    };
    let _i = i_rwsem.write(cx).await;
    let old = cx.st().inodes[inode].size;
    if size >= old {
        let mut st = cx.st();
        let i = &mut st.inodes[inode];
        let (from, to) = (old.div_ceil(4096), size.div_ceil(4096));
        i.backing.truncate(from, to);
        i.size = size;
        return;
    }
    cx.st().inodes[inode].size = size;
    let _inv = invalidate.write(cx).await;
    let first_gone = size.div_ceil(4096);
    unmap_mapping_range(cx, inode, first_gone, None, true).await;
    truncate_inode_pages(cx, inode, size).await;
    unmap_mapping_range(cx, inode, first_gone, None, true).await;
    let mut st = cx.st();
    let i = &mut st.inodes[inode];
    let end = old.div_ceil(4096);
    i.backing.truncate(first_gone, end);
    if !size.is_multiple_of(4096) {
        // The partial last block keeps its head; its tail reads as zeros from now on.
        let (last, off) = (size / 4096, (size % 4096) as usize);
        let mut slot = i.backing.read(last);
        if slot.is_some() {
            Content::write(&mut slot, off, &vec![0; 4096 - off]);
            i.backing.write(last, slot);
        }
    }
}

/// Removes the cached folios beyond `size` and zeroes the tail of a partial last page.
async fn truncate_inode_pages(cx: &Cx, inode: InodeId, size: u64) {
    let first_gone = size.div_ceil(4096);
    cx.st().workingset.truncate(inode, first_gone);
    let doomed: Vec<Pfn> =
        cx.st().inodes[inode].mapping.pages.range(first_gone..).map(|(_, &h)| h).collect();
    for head in doomed {
        cx.st().folios.get_extra(head);
        folio_lock(cx, head).await;
        let (still_cached, mapped, index, nr) = {
            let st = cx.st();
            let cached = st.folios.mapping(head) == Mapping::File(inode);
            (
                cached,
                st.folios.folio_mapcount(head) > 0,
                st.folio_index(head),
                st.folios.order(head).pages(),
            )
        };
        if still_cached {
            if mapped {
                // A fault mapped it after the first unmap (`unmap_mapping_folio`).
                unmap_mapping_range(cx, inode, index, Some(index + nr), false).await;
            }
            cx.st().page_cache_delete(inode, head);
        }
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
    }
    if !size.is_multiple_of(4096) {
        let last = size / 4096;
        let cached = cx.st().page_cache_get(inode, last);
        if let Some(head) = cached {
            cx.st().folios.get_extra(head);
            folio_lock(cx, head).await;
            {
                let mut st = cx.st();
                let off = (size % 4096) as usize;
                let page = head + (last - st.folio_index(head));
                st.mem.write(page.0, off, &vec![0; 4096 - off]);
            }
            folio_unlock(cx, head);
            cx.st().put_folio_extra(head);
        }
    }
}
