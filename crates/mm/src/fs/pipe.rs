//! Pipes and `vmsplice` (`fs/pipe.c`, `fs/splice.c`, Linux v6.8).
//!
//! A pipe is a pseudo-inode with a queue of buffers. `write()` copies data into a buffer;
//! `vmsplice()` instead takes the user pages with GUP (FOLL_GET, read-only: what `iter_to_pipe`
//! does through `iov_iter_get_pages`) and queues references to them, so the reader later gets the
//! pages' contents *as they are when it reads*. That is the vmsplice child-to-parent leak
//! (CVE-2020-29374): if the page is still the parent's after the child unmaps it, and the parent
//! writes to it instead of copying, the pipe delivers the parent's new data.
//!
//! Approximation: reads never block: an empty pipe with writers returns EAGAIN (as with
//! O_NONBLOCK), an empty pipe without writers returns 0 (end of file).

use crate::errno::Errno;
use crate::fs::fmode;
use crate::gup::get_user_pages;
use crate::kernel::{Cx, KState};
use crate::types::fs::FsType;
use crate::types::fs::{Pipe, PipeBuf};
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::mm_types::GupFlags;
use simcore::{Bytes, VirtAddr};
use std::collections::VecDeque;

impl KState {
    /// `pipe()`: a pipe inode and its read and write ends.
    pub(crate) fn pipe_create(&mut self, handle: &engine::Handle) -> (FileId, FileId) {
        let inode = self.new_inode(handle, "pipe:".into(), FsType::Pipe, 0, None);
        self.pipes.insert(inode, Pipe { bufs: VecDeque::new(), readers: 1, writers: 1 });
        let r =
            self.open_file(inode, fmode::READ, false, false).expect("pipes are never write-denied");
        self.inodes[inode].writecount = 0;
        let w = self
            .open_file(inode, fmode::WRITE, false, false)
            .expect("pipes are never write-denied");
        (r, w)
    }

    /// Called when the last reference to one end of a pipe goes: drops the buffers once both
    /// ends are closed.
    pub(crate) fn pipe_release(&mut self, inode: InodeId, mode: u32) {
        let Some(p) = self.pipes.get_mut(&inode) else { return };
        if mode & fmode::READ != 0 {
            p.readers -= 1;
        }
        if mode & fmode::WRITE != 0 {
            p.writers -= 1;
        }
        if p.readers == 0 && p.writers == 0 {
            let p = self.pipes.remove(&inode).expect("present");
            for b in p.bufs {
                if let PipeBuf::Page { page, .. } = b {
                    crate::gup::put_ref(self, page, false);
                }
            }
        }
    }

    /// `pipe_write`: queues a copy of `data`.
    pub(crate) fn pipe_write(&mut self, inode: InodeId, data: &[u8]) -> Result<u64, Errno> {
        let p = self.pipes.get_mut(&inode).ok_or(Errno::EBADF)?;
        if p.readers == 0 {
            return Err(Errno::EPERM);
        }
        p.bufs.push_back(PipeBuf::Data(data.to_vec()));
        Ok(data.len() as u64)
    }

    /// `pipe_read`: up to `len` bytes from the queued buffers, spliced pages read now.
    pub(crate) fn pipe_read(&mut self, inode: InodeId, len: u64) -> Result<Vec<u8>, Errno> {
        let p = self.pipes.get_mut(&inode).ok_or(Errno::EBADF)?;
        if p.bufs.is_empty() {
            return if p.writers > 0 { Err(Errno::EAGAIN) } else { Ok(Vec::new()) };
        }
        let mut out = Vec::new();
        while (out.len() as u64) < len {
            let want = len as usize - out.len();
            let p = self.pipes.get_mut(&inode).expect("present");
            let Some(buf) = p.bufs.pop_front() else { break };
            match buf {
                PipeBuf::Data(mut d) => {
                    if d.len() > want {
                        let rest = d.split_off(want);
                        p.bufs.push_front(PipeBuf::Data(rest));
                    }
                    out.extend_from_slice(&d);
                }
                PipeBuf::Page { page, offset, len: n } => {
                    let take = n.min(want);
                    let at = out.len();
                    out.resize(at + take, 0);
                    self.mem.read(page.0, offset, &mut out[at..]);
                    if take < n {
                        let p = self.pipes.get_mut(&inode).expect("present");
                        p.bufs.push_front(PipeBuf::Page {
                            page,
                            offset: offset + take,
                            len: n - take,
                        });
                    } else {
                        crate::gup::put_ref(self, page, false);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// `vmsplice(fd, iov, SPLICE_F_*)` of `[addr, addr + len)` into the pipe `inode`.
pub(crate) async fn vmsplice(
    cx: &Cx,
    mm: MmId,
    inode: InodeId,
    addr: VirtAddr,
    len: u64,
) -> Result<u64, Errno> {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    if len == 0 {
        return Ok(0);
    }
    let first = addr.align_down(Bytes::PAGE);
    let nr = (addr + Bytes(len))
        .align_up(Bytes::PAGE)
        .ok_or(Errno::EFAULT)?
        .offset_from(first)
        .pages_ceil();
    let held = get_user_pages(cx, mm, first, nr, GupFlags::default()).await?;
    let mut st = cx.st();
    let Some(p) = st.pipes.get_mut(&inode) else {
        drop(st);
        crate::gup::release_pages(cx, &held, false);
        return Err(Errno::EBADF);
    };
    let mut done = 0u64;
    for (i, &page) in held.pages.iter().enumerate() {
        let page_start = first + Bytes((i as u64) << 12);
        let from = addr.max(page_start);
        let to = (addr + Bytes(len)).min(page_start + Bytes::PAGE);
        let n = to.offset_from(from).as_u64() as usize;
        p.bufs.push_back(PipeBuf::Page { page, offset: from.page_offset() as usize, len: n });
        done += n as u64;
    }
    Ok(done)
}
