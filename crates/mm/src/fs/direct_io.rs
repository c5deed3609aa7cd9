//! O_DIRECT reads (`fs/iomap/direct-io.c` `iomap_dio_rw`, `block/bio.c`
//! `bio_iov_iter_get_pages`; Linux v6.8, FOLL_GET before v6.5).
//!
//! The read flushes the file's dirty page-cache pages, takes the user buffer's pages with GUP
//! (FOLL_WRITE; FOLL_GET up to v6.4 — which is why O_DIRECT kept losing reads under the
//! `page_count` rule even after pinned pages were protected — and FOLL_PIN from v6.5, when block
//! IO moved to `iov_iter_extract_pages`), and submits the IO. The device is its own task: after
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
//! A DAX file ignores O_DIRECT, as `ext4_file_read_iter` does: the read copies from the device.
//!
//! Approximations: the IO is one request; alignment is checked against 512-byte logical blocks.

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
    if ![buf.0, len, pos].iter().all(|v| v.is_multiple_of(LOGICAL_BLOCK)) {
        return Err(Errno::EINVAL.into());
    }
    let size = cx.st().inodes[inode].size;
    let n = len.min(size.saturating_sub(pos));
    if n == 0 {
        return Ok(Submitted::Done(0));
    }
    writeback(cx, inode).await;
    let first = buf.align_down(Bytes::PAGE);
    let nr = (buf + Bytes(n))
        .align_up(Bytes::PAGE)
        .ok_or(Errno::EFAULT)?
        .offset_from(first)
        .pages_ceil();
    let flags = GupFlags {
        write: true,
        pin: crate::era::odirect_pins(cx.kernel().version),
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
