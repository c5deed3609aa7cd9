//! io_uring, natively, as the kernel's selftest `tools/testing/selftests/mm/cow.c` uses it
//! (through liburing there, raw system calls here): one ring per registered buffer.
//!
//! - `io_uring_register_buffers` is `io_uring_setup` of a one-entry ring and
//!   `IORING_REGISTER_BUFFERS` of one iovec (a long-term writable `FOLL_PIN` of the range); the
//!   ring's descriptor is the hold's value. A ring takes one buffer table, so each registration
//!   has a ring of its own, as the model registers one buffer per call.
//! - `io_uring_unregister_buffers` is `IORING_UNREGISTER_BUFFERS` (the pages are unpinned before it
//!   returns), then the ring is closed.
//! - `read_fixed` and `write_fixed` are `IORING_OP_READ_FIXED`/`WRITE_FIXED` with buffer index 0,
//!   submitted and waited for with one `io_uring_enter`: the ring's three areas are mapped for
//!   the operation and unmapped after it, so no ring mapping stays in the scenario's process
//!   (`io_uring/memmap.c` inserts the ring's pages with `vm_insert_pages` in v6.11 and v6.12,
//!   which counts them in `VmRSS`; v6.8 used `remap_pfn_range`).
//! - `pin_read` of a registered buffer is `WRITE_FIXED` of the range into a scratch memfd,
//!   read back: what the pinned pages hold, as the selftest compares them.
//!
//! The layouts are `include/uapi/linux/io_uring.h`'s (stable since v5.1).

#![allow(unsafe_code)]

use crate::sys::{self, SysErr, SysResult};
use mm::Errno;
use std::sync::atomic::{AtomicU32, Ordering};

const REGISTER_BUFFERS: u64 = 0;
const UNREGISTER_BUFFERS: u64 = 1;
const OP_READ_FIXED: u8 = 4;
const OP_WRITE_FIXED: u8 = 5;
const ENTER_GETEVENTS: u64 = 1;
const OFF_SQ_RING: u64 = 0;
const OFF_CQ_RING: u64 = 0x800_0000;
const OFF_SQES: u64 = 0x1000_0000;
const SQE_SIZE: u64 = 64;
const CQE_SIZE: u64 = 16;

/// `struct io_uring_params` as its 30 words: the counts, then `io_sqring_offsets` from word 10
/// and `io_cqring_offsets` from word 20.
type Params = [u32; 30];
const SQ_ENTRIES: usize = 0;
const CQ_ENTRIES: usize = 1;
const SQ_TAIL: usize = 11;
const SQ_MASK: usize = 12;
const SQ_ARRAY: usize = 16;
const CQ_HEAD: usize = 20;
const CQ_TAIL: usize = 21;
const CQ_MASK: usize = 22;
const CQ_CQES: usize = 25;

/// A ring holding one registered buffer `[addr, addr + len)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ring {
    pub fd: i32,
    pub addr: u64,
    pub len: u64,
    params: Params,
}

/// Whether this kernel runs io_uring: the reason when it does not (built without
/// `CONFIG_IO_URING`, or `kernel.io_uring_disabled` set, v6.6).
pub(crate) fn unavailable() -> Option<String> {
    let mut p: Params = [0; 30];
    match setup(&mut p) {
        Ok(fd) => {
            let _ = sys::close(fd);
            None
        }
        Err(e) => Some(format!("io_uring_setup fails with {e} on this kernel")),
    }
}

fn setup(p: &mut Params) -> SysResult<i32> {
    let a = [1, p.as_mut_ptr() as u64, 0, 0, 0, 0];
    sys::raw(libc::SYS_io_uring_setup, a).map(|fd| fd as i32)
}

fn register_op(fd: i32, opcode: u64, arg: u64, nr: u64) -> SysResult<u64> {
    sys::raw(libc::SYS_io_uring_register, [fd as u64, opcode, arg, nr, 0, 0])
}

/// `IORING_REGISTER_BUFFERS` of `[addr, addr + len)` on a ring of its own.
pub(crate) fn register(addr: u64, len: u64) -> SysResult<Ring> {
    let mut params: Params = [0; 30];
    let fd = setup(&mut params)?;
    let iov = [addr, len];
    match register_op(fd, REGISTER_BUFFERS, iov.as_ptr() as u64, 1) {
        Ok(_) => Ok(Ring { fd, addr, len, params }),
        Err(e) => {
            let _ = sys::close(fd);
            Err(e)
        }
    }
}

/// `IORING_UNREGISTER_BUFFERS`, then the ring closed.
pub(crate) fn unregister(ring: &Ring) -> SysResult<u64> {
    register_op(ring.fd, UNREGISTER_BUFFERS, 0, 0)?;
    sys::close(ring.fd)
}

/// One fixed-buffer request: `write` (`WRITE_FIXED`) or not, `len` bytes at `addr` of the
/// registered buffer, `fd` at `offset`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fixed {
    pub write: bool,
    pub addr: u64,
    pub len: u64,
    pub fd: i32,
    pub offset: u64,
}

/// The ring's submission ring, completion ring and entries, mapped for one request.
struct Mapped {
    sq: (u64, u64),
    cq: (u64, u64),
    sqes: (u64, u64),
}

impl Mapped {
    fn new(ring: &Ring) -> SysResult<Mapped> {
        let p = &ring.params;
        let sq_len = u64::from(p[SQ_ARRAY]) + 4 * u64::from(p[SQ_ENTRIES]);
        let cq_len = u64::from(p[CQ_CQES]) + CQE_SIZE * u64::from(p[CQ_ENTRIES]);
        let sqes_len = SQE_SIZE * u64::from(p[SQ_ENTRIES]);
        let map = |len, off| {
            let flags = (libc::MAP_SHARED | libc::MAP_POPULATE) as u32;
            let prot = (libc::PROT_READ | libc::PROT_WRITE) as u32;
            sys::mmap(0, len, prot, flags, ring.fd, off).map(|a| (a, len))
        };
        let sq = map(sq_len, OFF_SQ_RING)?;
        let mut m = Mapped { sq, cq: (0, 0), sqes: (0, 0) };
        m.cq = map(cq_len, OFF_CQ_RING)?;
        m.sqes = map(sqes_len, OFF_SQES)?;
        Ok(m)
    }

    fn word(&self, base: u64, off: u32) -> &AtomicU32 {
        // SAFETY: `base + off` is a 4-byte-aligned word inside a ring area this `Mapped` keeps
        // mapped for its lifetime (the offsets are the kernel's, from io_uring_setup).
        unsafe { &*((base + u64::from(off)) as *const AtomicU32) }
    }

    /// Queues `req` as the only entry and returns the completion's result.
    fn submit(&self, ring: &Ring, req: &Fixed) -> (u32, u32) {
        let p = &ring.params;
        let mut sqe = [0u8; SQE_SIZE as usize];
        sqe[0] = if req.write { OP_WRITE_FIXED } else { OP_READ_FIXED };
        sqe[4..8].copy_from_slice(&req.fd.to_ne_bytes());
        sqe[8..16].copy_from_slice(&req.offset.to_ne_bytes());
        sqe[16..24].copy_from_slice(&req.addr.to_ne_bytes());
        sqe[24..28].copy_from_slice(&(req.len as u32).to_ne_bytes());
        sqe[32..40].copy_from_slice(&1u64.to_ne_bytes());
        // buf_index (bytes 40..42) is 0: the ring's only buffer.
        // SAFETY: the entries area holds `sq_entries` (at least one) 64-byte entries.
        unsafe { std::ptr::copy_nonoverlapping(sqe.as_ptr(), self.sqes.0 as *mut u8, sqe.len()) };
        let tail = self.word(self.sq.0, p[SQ_TAIL]).load(Ordering::Acquire);
        let mask = self.word(self.sq.0, p[SQ_MASK]).load(Ordering::Relaxed);
        let slot = p[SQ_ARRAY] + 4 * (tail & mask);
        self.word(self.sq.0, slot).store(0, Ordering::Relaxed);
        self.word(self.sq.0, p[SQ_TAIL]).store(tail.wrapping_add(1), Ordering::Release);
        let head = self.word(self.cq.0, p[CQ_HEAD]).load(Ordering::Acquire);
        (head, self.word(self.cq.0, p[CQ_MASK]).load(Ordering::Relaxed))
    }

    /// The completion at `head` (the request's result), consumed.
    fn reap(&self, ring: &Ring, head: u32, mask: u32) -> SysResult<u64> {
        let p = &ring.params;
        if self.word(self.cq.0, p[CQ_TAIL]).load(Ordering::Acquire) == head {
            return Err(SysErr::Errno(Errno::EAGAIN));
        }
        let cqe = p[CQ_CQES] + CQE_SIZE as u32 * (head & mask);
        let res = self.word(self.cq.0, cqe + 8).load(Ordering::Relaxed) as i32;
        self.word(self.cq.0, p[CQ_HEAD]).store(head.wrapping_add(1), Ordering::Release);
        if res >= 0 { Ok(res as u64) } else { Err(errno(-res)) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        for (a, len) in [self.sq, self.cq, self.sqes] {
            if len > 0 {
                let _ = sys::munmap(a, len);
            }
        }
    }
}

fn errno(n: i32) -> SysErr {
    Errno::ALL.iter().find(|e| **e as i32 == n).map_or(SysErr::Raw(n), |e| SysErr::Errno(*e))
}

/// A request queued on its ring's mapped areas, not yet submitted.
pub(crate) struct Queued<'a> {
    ring: &'a Ring,
    m: Mapped,
    head: u32,
    mask: u32,
}

/// Queues `req` on `ring`.
pub(crate) fn queue<'a>(ring: &'a Ring, req: &Fixed) -> SysResult<Queued<'a>> {
    let m = Mapped::new(ring)?;
    let (head, mask) = m.submit(ring, req);
    Ok(Queued { ring, m, head, mask })
}

impl Queued<'_> {
    /// `io_uring_enter`: submits the request and waits for its completion (the operation's own
    /// system call, whose faults the caller counts).
    pub(crate) fn enter(&self) -> SysResult<u64> {
        let a = [self.ring.fd as u64, 1, 1, ENTER_GETEVENTS, 0, 0];
        sys::raw(libc::SYS_io_uring_enter, a)
    }

    /// The request's result: the bytes moved.
    pub(crate) fn result(self) -> SysResult<u64> {
        self.m.reap(self.ring, self.head, self.mask)
    }
}

/// What the pinned pages of `ring`'s buffer hold at `[offset, offset + len)` (clipped to the
/// buffer, as the model reads a hold), written out by `WRITE_FIXED` into a scratch memfd.
pub(crate) fn pinned_bytes(ring: &Ring, offset: u64, len: Option<u64>) -> SysResult<Vec<u8>> {
    let start = offset.min(ring.len);
    let n = len.map_or(ring.len - start, |l| l.min(ring.len - start));
    let mut out = sys::own_buffer(n);
    if n == 0 {
        return Ok(out);
    }
    let scratch = sys::memfd_create("mmsim-pin-read", 0)?;
    let req = Fixed { write: true, addr: ring.addr + start, len: n, fd: scratch, offset: 0 };
    let q = queue(ring, &req);
    let written = q.and_then(|q| {
        q.enter()?;
        q.result()
    });
    let read = written.and_then(|_| sys::read_to(scratch, out.as_mut_ptr() as u64, n, Some(0)));
    let _ = sys::close(scratch);
    read.map(|_| out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registered buffer's pinned pages are what the process wrote; a fixed read lands in
    /// them and a request outside the buffer is EFAULT. Skipped where io_uring does not run.
    #[test]
    fn fixed_requests_move_the_pinned_pages() {
        if unavailable().is_some() {
            return;
        }
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u32;
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        let buf = sys::mmap(0, 8192, prot, flags, -1, 0).expect("an anonymous mapping");
        // SAFETY: `buf` is a fresh private mapping of 8 KiB that nothing else uses.
        unsafe { std::ptr::write_bytes(buf as *mut u8, 7, 8192) };
        let ring = register(buf, 8192).expect("io_uring_register_buffers");
        assert_eq!(pinned_bytes(&ring, 4095, Some(2)).unwrap(), vec![7, 7]);
        let file = sys::memfd_create("mmsim-uring-test", 0).expect("a memfd");
        sys::write_from(file, b"abc", Some(0)).expect("pwrite");
        let read = Fixed { write: false, addr: buf + 4096, len: 3, fd: file, offset: 0 };
        let q = queue(&ring, &read).expect("queued");
        q.enter().expect("io_uring_enter");
        assert_eq!(q.result(), Ok(3));
        assert_eq!(pinned_bytes(&ring, 4096, Some(4)).unwrap(), b"abc\x07".to_vec());
        let outside = Fixed { write: true, addr: buf + 8190, len: 4, fd: file, offset: 0 };
        let q = queue(&ring, &outside).expect("queued");
        q.enter().expect("io_uring_enter");
        assert_eq!(q.result(), Err(SysErr::Errno(Errno::EFAULT)));
        unregister(&ring).expect("unregister");
        let _ = sys::close(file);
        let _ = sys::munmap(buf, 8192);
    }
}
