//! O_DIRECT reads and writes (`fs/iomap/direct-io.c` `iomap_dio_rw`, `block/bio.c`
//! `bio_iov_iter_get_pages`, `mm/filemap.c` `kiocb_invalidate_pages`; Linux v6.8, FOLL_GET
//! before v6.5).
//!
//! The read flushes the file's dirty page-cache pages, takes the user buffer's pages with GUP
//! (FOLL_WRITE; FOLL_GET up to v6.4 — which is why O_DIRECT kept losing reads under the
//! `page_count` rule even after pinned pages were protected — and FOLL_PIN from v6.5, when block
//! IO moved to `iov_iter_extract_pages`; the `odirect_gup` switch, which a scenario may set to
//! either value in any era), and submits the IO. The device is its own task: after
//! the device latency it writes the data into the held *physical* pages, marks them dirty,
//! releases them and completes the request; the reading thread sleeps until then. A page that a
//! COW fault replaced in the page tables meanwhile receives the data where nobody looks any more:
//! the read is lost, as on real hardware.
//!
//! Asynchronous reads (`io_submit`, io_uring): [`submit_read`] does everything up to handing
//! the request to the device and returns it in flight; [`end_io`] is the device's completion,
//! run when the caller says (`Thread::dio_complete`), so that anything (fork, munmap, a COW
//! fault, clear_refs) can happen between DMA start and DMA end. The synchronous read is the same
//! two halves with the device task between them.
//!
//! A write ([`direct_write`]) writes the range's dirty cached pages back, unmaps and drops the
//! cached pages over it (`kiocb_invalidate_pages`), takes the buffer's pages for reading (no
//! FOLL_WRITE; FOLL_GET or FOLL_PIN as a read does), and the device, after its latency, copies
//! what the held physical pages hold then to the file's blocks, extending the file past its end
//! (a block device's write stops at the device's end: ENOSPC there); the pages cached over the
//! range meanwhile are dropped again (`kiocb_invalidate_post_direct_write`). A buffer page that
//! a COW fault replaced before the DMA is written as it was when taken.
//!
//! A DAX file ignores O_DIRECT, as `ext4_file_read_iter` does: the read copies from the device,
//! and the write copies to it.
//!
//! Approximations: the IO is one request; alignment is checked against 512-byte logical blocks,
//! the buffer's address too (from v6.0 the kernel checks the buffer against the device's DMA
//! alignment, "block: relax direct io memory alignment", b1a000d3b8ec, which is 511 on most
//! disks and less on some: a virtio disk takes any address);
//! a cached page that cannot be invalidated (the kernel falls back to a buffered write) does not
//! arise, as the range was written back and unmapped first.

use crate::era::OdirectGup;
use crate::errno::{Errno, SysError};
use crate::filemap::writeback;
use crate::gup::{get_user_pages, release_pages};
use crate::kernel::Cx;
use crate::sim::content::Content;
use crate::types::fs::{DioRead, Submitted};
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::mm_types::GupFlags;
use simcore::{Bytes, VirtAddr};

/// The logical block size O_DIRECT aligns to.
const LOGICAL_BLOCK: u64 = 512;

/// Whether the buffer, length and offset sit on logical blocks (else EINVAL).
fn aligned(buf: VirtAddr, len: u64, pos: u64) -> bool {
    [buf.0, len, pos].iter().all(|v| v.is_multiple_of(LOGICAL_BLOCK))
}

/// The first page of `[buf, buf + n)` and how many pages it spans (EFAULT past the top).
fn span(buf: VirtAddr, n: u64) -> Result<(VirtAddr, u64), Errno> {
    let first = buf.align_down(Bytes::PAGE);
    let end = (buf + Bytes(n)).align_up(Bytes::PAGE).ok_or(Errno::EFAULT)?;
    Ok((first, end.offset_from(first).pages_ceil()))
}

/// `pread` on an O_DIRECT descriptor into `buf`: the submission, then the device as its own
/// task, which writes the held pages after the device latency; the reader sleeps until then.
pub(crate) async fn direct_read(
    cx: &Cx,
    mm: MmId,
    inode: InodeId,
    buf: VirtAddr,
    len: u64,
    pos: u64,
) -> Result<u64, SysError> {
    let req = match submit_read(cx, mm, inode, buf, len, pos).await? {
        Submitted::Done(n) => return Ok(n),
        Submitted::InFlight(req) => req,
    };
    let n = req.n;
    let done = cx.completion("dio_done");
    let io = cx.block_io(n.div_ceil(4096));
    cx.spawn_kthread("dio", move |dev| async move {
        dev.sleep(io).await;
        end_io(&dev, req);
        done.complete(&dev);
    });
    done.wait(cx).await;
    Ok(n)
}

/// Submits an O_DIRECT read into `buf` (`iomap_dio_rw` up to `submit_bio`): checks alignment,
/// flushes the file's dirty page-cache pages and takes the buffer's pages for the device.
pub(crate) async fn submit_read(
    cx: &Cx,
    mm: MmId,
    inode: InodeId,
    buf: VirtAddr,
    len: u64,
    pos: u64,
) -> Result<Submitted, SysError> {
    if cx.st().inodes[inode].fs.is_dax() {
        let (n, data) =
            crate::fs::dax::dax_read(cx, inode, pos, len, true).await.map_err(|e| e.signal())?;
        let data = data.expect("asked for the data");
        crate::arch::uaccess::write_user(cx, mm, buf, &data).await?;
        return Ok(Submitted::Done(n));
    }
    if !aligned(buf, len, pos) {
        return Err(Errno::EINVAL.into());
    }
    let size = cx.st().inodes[inode].size;
    let n = len.min(size.saturating_sub(pos));
    if n == 0 {
        return Ok(Submitted::Done(0));
    }
    writeback(cx, inode).await;
    let (first, nr) = span(buf, n)?;
    let flags = GupFlags {
        write: true,
        pin: cx.kernel().switches.odirect_gup == OdirectGup::Pin,
        ..GupFlags::default()
    };
    let held = get_user_pages(cx, mm, first, nr, flags).await?;
    Ok(Submitted::InFlight(DioRead { inode, buf, pos, n, held }))
}

/// The device's end of a read (`iomap_dio_bio_end_io`, `bio_release_pages`): writes the data
/// into the held *physical* pages, whatever the page tables map now, marks them dirty and
/// releases them. Returns the bytes read.
pub(crate) fn end_io(cx: &Cx, req: DioRead) -> u64 {
    let DioRead { inode, buf, pos, n, held } = req;
    let first = buf.align_down(Bytes::PAGE);
    {
        let mut st = cx.st();
        let data = file_bytes(&st.inodes[inode].backing, pos, n);
        let mut off = 0u64;
        while off < n {
            let a = buf + Bytes(off);
            let chunk = (4096 - a.page_offset()).min(n - off);
            let page = held.page_for(first, a);
            st.mem.write(
                page.0,
                a.page_offset() as usize,
                &data[off as usize..(off + chunk) as usize],
            );
            off += chunk;
        }
    }
    release_pages(cx, &held, true);
    n
}

/// `n` bytes at `pos` of a file's backing store.
fn file_bytes(backing: &crate::types::fs::Backing, pos: u64, n: u64) -> Vec<u8> {
    let mut out = vec![0; n as usize];
    let mut off = 0u64;
    while off < n {
        let p = pos + off;
        let chunk = (4096 - p % 4096).min(n - off);
        Content::read(
            backing.read(p / 4096).as_ref(),
            (p % 4096) as usize,
            &mut out[off as usize..(off + chunk) as usize],
        );
        off += chunk;
    }
    out
}

/// `pwrite` on an O_DIRECT descriptor from `buf`: the invalidation, the pages taken for reading,
/// the device as its own task copying them to the file's blocks after the device latency; the
/// writer sleeps until then. Returns the bytes written.
pub(crate) async fn direct_write(
    cx: &Cx,
    mm: MmId,
    inode: InodeId,
    buf: VirtAddr,
    len: u64,
    pos: u64,
) -> Result<u64, SysError> {
    let fs = cx.st().inodes[inode].fs;
    if fs.is_dax() {
        let data = crate::arch::uaccess::read_user(cx, mm, buf, len).await?;
        return Ok(fs.write_iter(cx, inode, pos, &data).await?);
    }
    if !aligned(buf, len, pos) {
        return Err(Errno::EINVAL.into());
    }
    let size = cx.st().inodes[inode].size;
    let n = if fs.is_blkdev() {
        len.min(size.checked_sub(pos).filter(|&r| r > 0).ok_or(Errno::ENOSPC)?)
    } else {
        len
    };
    if n == 0 {
        return Ok(0);
    }
    invalidate_range(cx, inode, pos, n).await;
    let (first, nr) = span(buf, n)?;
    let flags = GupFlags {
        pin: cx.kernel().switches.odirect_gup == OdirectGup::Pin,
        ..GupFlags::default()
    };
    let held = get_user_pages(cx, mm, first, nr, flags).await?;
    let done = cx.completion("dio_done");
    let io = cx.block_io(n.div_ceil(4096));
    cx.spawn_kthread("dio", move |dev| async move {
        dev.sleep(io).await;
        let data = held.read_bytes(&dev.st(), first, buf, n);
        write_blocks(&dev, inode, pos, &data);
        release_pages(&dev, &held, false);
        done.complete(&dev);
    });
    done.wait(cx).await;
    invalidate_range(cx, inode, pos, n).await;
    Ok(n)
}

/// `kiocb_invalidate_pages`: the range's dirty pages written back, its cached pages unmapped and
/// dropped.
async fn invalidate_range(cx: &Cx, inode: InodeId, pos: u64, n: u64) {
    writeback(cx, inode).await;
    let (first, last) = (pos / 4096, (pos + n).div_ceil(4096));
    crate::zap::unmap_mapping_range(cx, inode, first, Some(last), false).await;
    crate::truncate::truncate_inode_pages_range(cx, inode, first * 4096, Some(last * 4096)).await;
}

/// The device writing `data` at `pos` of the file's blocks, extending the file past its end.
fn write_blocks(cx: &Cx, inode: InodeId, pos: u64, data: &[u8]) {
    let mut st = cx.st();
    let i = &mut st.inodes[inode];
    let mut off = 0u64;
    while off < data.len() as u64 {
        let p = pos + off;
        let chunk = (4096 - p % 4096).min(data.len() as u64 - off);
        let mut slot = i.backing.read(p / 4096);
        Content::write(&mut slot, (p % 4096) as usize, &data[off as usize..(off + chunk) as usize]);
        i.backing.write(p / 4096, slot);
        off += chunk;
    }
    i.size = i.size.max(pos + data.len() as u64);
}
