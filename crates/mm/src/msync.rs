//! `msync(2)` (`mm/msync.c`, v6.8; the same rules since v2.6.19 made `MS_ASYNC` a no-op, and
//! the early stop of an `MS_ASYNC` call at a hole, v5.11, changes no result).
//!
//! Flags other than `MS_ASYNC`, `MS_INVALIDATE` and `MS_SYNC`, `MS_ASYNC` with `MS_SYNC`, or an
//! unaligned address are EINVAL; the length is rounded up to pages and a range that wraps is
//! ENOMEM; an empty one succeeds. The VMAs of the range are visited in order under `mmap_lock`
//! for read: `MS_INVALIDATE` on a `VM_LOCKED` VMA is EBUSY at once; `MS_SYNC` on a shared file
//! mapping writes the file's dirty pages back (`vfs_fsync_range`, datasync); a hole anywhere in
//! the range makes the call ENOMEM (after the VMAs before it were synced). Private and anonymous
//! mappings have nothing to write.
//!
//! Approximation: `MS_SYNC` writes back the whole file's dirty pages, not only the range's
//! (`filemap::writeback` works per file).

use crate::errno::Errno;
use crate::kernel::Cx;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// `msync` flags.
pub mod ms {
    pub const ASYNC: u32 = 1;
    pub const INVALIDATE: u32 = 2;
    pub const SYNC: u32 = 4;
}

/// `msync(2)`.
pub(crate) async fn do_msync(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: Bytes,
    flags: u32,
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    let sync_async = ms::ASYNC | ms::SYNC;
    if flags & !(sync_async | ms::INVALIDATE) != 0
        || !addr.is_aligned(Bytes::PAGE)
        || flags & sync_async == sync_async
    {
        return Err(Errno::EINVAL);
    }
    let len = len.align_up(Bytes::PAGE).ok_or(Errno::ENOMEM)?;
    let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
    let mut start = addr;
    let mut unmapped = false;
    while start < end {
        let lock = cx.st().mm(mm).mmap_lock;
        let g = lock.read(cx).await;
        let next = {
            let st = cx.st();
            let m = st.mm(mm);
            m.vmas_in(start, end, |id| st.vma(id).end).first().map(|&v| {
                let vma = st.vma(v);
                (vma.start, vma.end, vma.flags, vma.file)
            })
        };
        let Some((vm_start, vm_end, vm_flags, file)) = next else { return Err(Errno::ENOMEM) };
        if start < vm_start {
            // A hole: an `MS_ASYNC` call stops there, the others go on and fail at the end.
            if flags == ms::ASYNC {
                return Err(Errno::ENOMEM);
            }
            unmapped = true;
        }
        if flags & ms::INVALIDATE != 0 && vm_flags.has(VmFlags::LOCKED) {
            return Err(Errno::EBUSY);
        }
        start = vm_end;
        drop(g);
        if let Some(f) = file.filter(|_| flags & ms::SYNC != 0 && vm_flags.has(VmFlags::SHARED)) {
            let inode = cx.st().file(f).inode;
            crate::filemap::writeback(cx, inode).await;
        }
    }
    if unmapped { Err(Errno::ENOMEM) } else { Ok(()) }
}
