//! io_uring's registered buffers (`io_uring/rsrc.c` `io_sqe_buffer_register`,
//! `io_uring/rw.c` `io_prep_rw_fixed`/`io_import_fixed`; Linux v6.8, earlier eras where they
//! differ).
//!
//! `IORING_REGISTER_BUFFERS` takes each buffer's pages with a long-term writable pin
//! (FOLL_WRITE | FOLL_PIN | FOLL_LONGTERM) and keeps them until `IORING_UNREGISTER_BUFFERS`;
//! `IORING_OP_READ_FIXED` and `WRITE_FIXED` then do their IO through the *pinned pages*, never
//! through the page tables: a buffer whose PTE was replaced since (a COW after fork, a write
//! fault that copied the page) is read and written where the process no longer looks. This is
//! the `iouring` case of the kernel's `tools/testing/selftests/mm/cow.c` (`do_test_iouring`).
//!
//! Eras (`era::io_uring`, `era::io_uring_file_buffers`): no io_uring before v5.1 (ENOSYS);
//! a buffer in a file mapping other than hugetlbfs is refused with EOPNOTSUPP (v5.1), shmem
//! allowed from v5.14, and from v6.5 GUP's long-term pin decides (EFAULT for dirty-tracked file
//! mappings, `gup.rs`).
//!
//! Approximations: one registered buffer per `register` (the kernel registers a table of
//! iovecs); no ring: a fixed read or write runs to completion when issued; a fixed read copies
//! through the page cache (as a buffered read, whatever the descriptor's O_DIRECT); the pinned
//! pages are not charged to RLIMIT_MEMLOCK; hugetlb buffers are not coalesced.

use crate::era::{IoUringFileBuffers, io_uring, io_uring_file_buffers};
use crate::errno::Errno;
use crate::gup::hold;
use crate::kernel::{Cx, KState};
use crate::types::ids::HoldId;
use crate::types::ids::MmId;
use crate::types::mm_types::{GupFlags, Hold};
use simcore::{Bytes, VirtAddr};

/// ENOSYS on a kernel without io_uring.
pub(crate) fn check_io_uring(cx: &Cx) -> Result<(), Errno> {
    if io_uring(cx.kernel().version) { Ok(()) } else { Err(Errno::ENOSYS) }
}

/// The largest buffer `IORING_REGISTER_BUFFERS` takes (`io_buffer_validate`'s `SZ_1G`).
const MAX_BUFFER: u64 = 1 << 30;

/// `IORING_REGISTER_BUFFERS` of `[addr, addr + len)`: a long-term writable pin, refused per era
/// for file mappings.
pub(crate) async fn register_buffers(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: u64,
) -> Result<HoldId, Errno> {
    check_io_uring(cx)?;
    // `io_buffer_validate`: an empty buffer or one over 1 GiB is EFAULT before anything is
    // pinned (the limit since fixed buffers arrived, v5.1).
    if len > MAX_BUFFER {
        return Err(Errno::EFAULT);
    }
    let end = addr.0.checked_add(len).filter(|_| len > 0).ok_or(Errno::EFAULT)?;
    let refused = {
        let st = cx.st();
        let rule = io_uring_file_buffers(cx.kernel().version);
        let vmas = st.mm(mm).vmas_in(addr, VirtAddr(end), |id| st.vma(id).end);
        vmas.into_iter().any(|id| refuses_file(&st, rule, id))
    };
    if refused {
        return Err(Errno::EOPNOTSUPP);
    }
    let flags = GupFlags { write: true, pin: true, longterm: true, ..GupFlags::default() };
    hold(cx, mm, addr, len, flags).await
}

/// Whether io_uring itself refuses a buffer in VMA `id` (before v6.5).
fn refuses_file(st: &KState, rule: IoUringFileBuffers, id: crate::types::ids::VmaId) -> bool {
    let Some(file) = st.vma(id).file else { return false };
    let fs = st.inodes[st.file(file).inode].fs;
    let exempt = fs.hugetlb_size().is_some();
    match rule {
        IoUringFileBuffers::Gup => false,
        IoUringFileBuffers::RefuseAllButHugetlb => !exempt,
        IoUringFileBuffers::RefuseAllButHugetlbShmem => !exempt && fs.tmpfs_mount().is_none(),
    }
}

/// Where `[addr, addr + len)` lies in registered buffer `id` (`io_import_fixed`: EFAULT when
/// outside it): the byte offset into the buffer.
pub(crate) fn fixed_offset(
    st: &KState,
    id: HoldId,
    addr: VirtAddr,
    len: u64,
) -> Result<u64, Errno> {
    let h: &Hold = st.gup_holds.get(id).and_then(Option::as_ref).ok_or(Errno::EINVAL)?;
    let off = addr.0.checked_sub(h.start.0).ok_or(Errno::EFAULT)?;
    if off.checked_add(len).is_none_or(|e| e > h.len) {
        return Err(Errno::EFAULT);
    }
    Ok(off)
}

/// `IORING_OP_READ_FIXED`'s copy: `data` into the pinned pages of `id` from byte `off`.
pub(crate) fn copy_to_fixed(cx: &Cx, id: HoldId, off: u64, data: &[u8]) -> Result<(), Errno> {
    let mut st = cx.st();
    let h = st.gup_holds.get(id).and_then(Option::as_ref).ok_or(Errno::EINVAL)?.clone();
    let first = h.start.align_down(Bytes::PAGE);
    let mut done = 0u64;
    while done < data.len() as u64 {
        let a = h.start + Bytes(off + done);
        let chunk = (4096 - a.page_offset()).min(data.len() as u64 - done);
        let page = h.pages.page_for(first, a);
        let end = (done + chunk) as usize;
        st.mem.write(page.0, a.page_offset() as usize, &data[done as usize..end]);
        done += chunk;
    }
    Ok(())
}
