//! `posix_fadvise(2)` (`mm/fadvise.c` `generic_fadvise`, Linux v6.8; seed `003`, the
//! `fadv_noreuse` switch; `docs/reference/kernel-semantics.md` section D.1).
//!
//! - Errors: a bad descriptor is EBADF, a pipe ESPIPE, a negative length or an unknown advice
//!   value EINVAL (in that order, every era); a negative offset is accepted (the range it names
//!   holds no page). On tmpfs and hugetlbfs (no backing device) and on a DAX file every valid advice is
//!   accepted and does nothing.
//! - `NORMAL`: the file's readahead window back to the device default; clears FMODE_RANDOM and
//!   (v6.3+) FMODE_NOREUSE.
//! - `RANDOM`: sets FMODE_RANDOM (`read()` then reads only what it is asked for).
//! - `SEQUENTIAL`: twice the device's readahead window; clears FMODE_RANDOM.
//! - `WILLNEED`: reads the range into the page cache (`force_page_cache_readahead`).
//! - `DONTNEED`: starts writeback of the range's dirty pages, then drops the clean, unmapped,
//!   unlocked pages wholly inside the range (`invalidate_mapping_pages`; no shadow entries).
//! - `NOREUSE`: under `fadv_noreuse = no_recency` (v6.3+) sets FMODE_NOREUSE on the open file
//!   description, whatever the range; before, accepted and ignored. The flag lives on the
//!   `struct file`, so `dup` and `fork` share it, another `open` does not, and mappings read it
//!   live (`vma_has_recency`), including mappings made before the advice.
//!
//! `readahead(2)` (`mm/readahead.c` `ksys_readahead`) is EBADF on a descriptor not open for
//! reading; from v4.19 (`era::readahead_via_fadvise`) EINVAL on anything but a regular file
//! (or a block device: `era::readahead_takes_block_devices`), then `vfs_fadvise(WILLNEED)` of
//! `[offset, offset + count)` (a count of 0 is fadvise's "to the end"), so tmpfs and hugetlbfs
//! accept it and do nothing (LTP hugemmap30's reservation check); before, `do_readahead`: EINVAL
//! where the mapping has no `readpage` (tmpfs, hugetlbfs, a pipe), otherwise the pages of the
//! range read (a count of 0 reads none).
//!
//! Approximations: a DAX file's `readahead` succeeds and does nothing in every era;
//! `WILLNEED`'s reads are waited for (the kernel only submits them); the
//! writeback `DONTNEED` starts is completed at once, and the pages it wrote are left cached, as
//! the kernel leaves them under writeback.

use crate::errno::Errno;
use crate::filemap::{folio_unlock, read_pages};
use crate::folio::folio_trylock;
use crate::folio::{Mapping, pg};
use crate::fs::fmode;
use crate::fs::ops::Readahead;
use crate::kernel::Cx;
use crate::sim::cost::Cost;
use crate::types::ids::FileId;
use simcore::Pfn;

/// `POSIX_FADV_*`.
pub mod advice {
    pub const NORMAL: i32 = 0;
    pub const RANDOM: i32 = 1;
    pub const SEQUENTIAL: i32 = 2;
    pub const WILLNEED: i32 = 3;
    pub const DONTNEED: i32 = 4;
    pub const NOREUSE: i32 = 5;
}

/// `posix_fadvise(2)` on open file `f`.
pub(crate) async fn fadvise(
    cx: &Cx,
    f: FileId,
    offset: i64,
    len: i64,
    advice: i32,
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    vfs_fadvise(cx, f, offset, len, advice).await
}

/// `readahead(2)` on open file `f`.
pub(crate) async fn readahead(cx: &Cx, f: FileId, offset: u64, count: u64) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    let (readable, fs, inode) = {
        let st = cx.st();
        let file = st.file(f);
        (file.readable(), st.inodes[file.inode].fs, file.inode)
    };
    if !readable {
        return Err(Errno::EBADF);
    }
    match fs.readahead(cx.kernel().version)? {
        Readahead::Fadvise => {
            let len = i64::try_from(count).map_err(|_| Errno::EINVAL)?;
            return vfs_fadvise(cx, f, offset as i64, len, advice::WILLNEED).await;
        }
        Readahead::Nothing => return Ok(()),
        Readahead::ReadPages => {}
    }
    // `do_readahead`'s pages: from the offset's page to the page of its last byte.
    let start = offset / 4096;
    let last = offset.saturating_add(count).div_ceil(4096);
    let end = last.min(cx.st().inodes[inode].size_pages());
    if count > 0 && start < end {
        read_pages(cx, inode, start, end).await.map_err(|_| Errno::ENOMEM)?;
    }
    Ok(())
}

/// `vfs_fadvise` → `generic_fadvise` on open file `f` (the syscall's, and `MADV_WILLNEED`'s on
/// a file mapping).
pub(crate) async fn vfs_fadvise(
    cx: &Cx,
    f: FileId,
    offset: i64,
    len: i64,
    advice: i32,
) -> Result<(), Errno> {
    let (inode, fs) = {
        let st = cx.st();
        let inode = st.file(f).inode;
        (inode, st.inodes[inode].fs)
    };
    let acts = fs.fadvise_acts()?;
    if len < 0 || !(advice::NORMAL..=advice::NOREUSE).contains(&advice) {
        return Err(Errno::EINVAL);
    }
    // A negative offset is no error: its range starts past every page index, so `WILLNEED` and
    // `DONTNEED` find nothing (the other advice ignores the range).
    let ranged = matches!(advice, advice::WILLNEED | advice::DONTNEED);
    if !acts || (ranged && offset < 0) {
        return Ok(());
    }
    let offset = offset as u64;
    // `len == 0` means to the end of the file (and beyond).
    let endbyte = if len == 0 { u64::MAX } else { offset.saturating_add(len as u64 - 1) };
    match advice {
        advice::WILLNEED => {
            let size = cx.st().inodes[inode].size_pages();
            let start = offset / 4096;
            let end = (endbyte / 4096).saturating_add(1).min(size);
            if start < end {
                read_pages(cx, inode, start, end).await.map_err(|_| Errno::ENOMEM)?;
            }
        }
        advice::DONTNEED => {
            let start = offset.div_ceil(4096);
            // The last page only if the range covers it to its end.
            let end = if endbyte == u64::MAX || endbyte % 4096 == 4095 {
                endbyte / 4096
            } else if endbyte / 4096 == 0 {
                return Ok(());
            } else {
                endbyte / 4096 - 1
            };
            invalidate_mapping_pages(cx, inode, start, end).await;
        }
        _ => {
            let mut st = cx.st();
            let bdi = st.bdi_ra_pages;
            let noreuse_switch = st.lru.noreuse;
            let file = st.file_mut(f);
            match advice {
                advice::NORMAL => {
                    file.ra.ra_pages = bdi;
                    let noreuse = if noreuse_switch { fmode::NOREUSE } else { 0 };
                    file.mode &= !(fmode::RANDOM | noreuse);
                }
                advice::RANDOM => file.mode |= fmode::RANDOM,
                advice::SEQUENTIAL => {
                    file.ra.ra_pages = 2 * bdi;
                    file.mode &= !fmode::RANDOM;
                }
                // NOREUSE: before v6.3, accepted and ignored.
                _ if noreuse_switch => file.mode |= fmode::NOREUSE,
                _ => {}
            }
        }
    }
    Ok(())
}

/// `POSIX_FADV_DONTNEED`'s work on pages `[start, end]`: writeback started for the dirty ones,
/// then the clean, unmapped, unlocked folios wholly inside the range are dropped.
async fn invalidate_mapping_pages(
    cx: &Cx,
    inode: crate::types::ids::InodeId,
    start: u64,
    end: u64,
) {
    let folios: Vec<(u64, Pfn)> = {
        let st = cx.st();
        st.inodes[inode].mapping.pages.range(start..=end).map(|(&i, &h)| (i, h)).collect()
    };
    let dirty: Vec<Pfn> = {
        let st = cx.st();
        folios.iter().map(|&(_, h)| h).filter(|&h| st.folios.test(h, pg::DIRTY)).collect()
    };
    if !dirty.is_empty() {
        crate::filemap::writeback(cx, inode).await;
    }
    for (index, head) in folios {
        if dirty.contains(&head) {
            continue; // under writeback at this point in the kernel
        }
        let mut st = cx.st();
        let nr = st.folios.order(head).pages();
        let whole = index >= start && index + nr - 1 <= end;
        if st.folios.mapping(head) != Mapping::File(inode)
            || !whole
            || st.folios.test(head, pg::DIRTY | pg::WRITEBACK)
            || st.folios.folio_mapcount(head) > 0
            || !folio_trylock(&mut st.folios, head)
        {
            continue;
        }
        // `mapping_evict_folio`: only the cache and the LRU hold it.
        if st.folios.refcount(head) == nr as u32 {
            st.folios.get_extra(head);
            st.folios.clear_flag(head, pg::LOCKED);
            st.page_cache_delete(inode, head);
            st.put_folio_extra(head);
            drop(st);
            cx.kernel().folio_waitqueue(head).wake_up_all(cx);
        } else {
            drop(st);
            folio_unlock(cx, head);
        }
    }
}
