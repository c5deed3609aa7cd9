//! `UFFDIO_WRITEPROTECT` (fs/userfaultfd.c `userfaultfd_writeprotect`, mm/userfaultfd.c
//! `mwriteprotect_range`; Linux v5.7 to v6.19, `era::uffd_wp_anon`): the checks and the walk over
//! the range's VMAs; what write-protection does is `userfaultfd/wp.rs`.

use crate::errno::Errno;
use crate::kernel::Cx;
use crate::types::ids::{InodeId, Pid};
use crate::types::userfaultfd::writeprotect_mode;
use crate::userfaultfd::wp::uffd_wp_range;
use crate::userfaultfd::{RangeIoctl, range_ioctl, wake_userfault};
use simcore::VirtAddr;

/// `UFFDIO_WRITEPROTECT` of `[start, start + len)` with `mode` on descriptor `fd` of `pid`
/// (v5.7; EINVAL before, an unknown ioctl).
pub(crate) async fn userfaultfd_writeprotect(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    (start, len): (VirtAddr, u64),
    mode: u64,
) -> Result<(), Errno> {
    let known = crate::era::uffd_wp_anon(cx.kernel().version);
    let (ctx, end) = range_ioctl(cx, (pid, fd), (start, len), RangeIoctl::Fill { known }).await?;
    if mode & !(writeprotect_mode::WP | writeprotect_mode::DONTWAKE) != 0 {
        return Err(Errno::EINVAL);
    }
    let (wp, dontwake) =
        (mode & writeprotect_mode::WP != 0, mode & writeprotect_mode::DONTWAKE != 0);
    if wp && dontwake {
        return Err(Errno::EINVAL);
    }
    mwriteprotect_range(cx, ctx, (start, end), wp).await?;
    if !wp && !dontwake {
        wake_userfault(cx, ctx, start, end);
    }
    Ok(())
}

/// `mwriteprotect_range`: under `mmap_lock` for read, the uffd-wp bits of every registered VMA
/// of `[start, end)` set (`enable`) or cleared. EAGAIN while an event is delivered; ENOENT for
/// no VMA, or one not registered for write-protection (before v6.5: unless one such VMA covers
/// the whole range).
async fn mwriteprotect_range(
    cx: &Cx,
    ctx: InodeId,
    (start, end): (VirtAddr, VirtAddr),
    enable: bool,
) -> Result<(), Errno> {
    let mm = cx.st().uffd_ctx(ctx).mm;
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    if cx.st().uffd_ctx(ctx).mmap_changing != 0 {
        return Err(Errno::EAGAIN);
    }
    let vmas = {
        let st = cx.st();
        let vmas = st.mm(mm).vmas_in(start, end, |id| st.vma(id).end);
        let spans = crate::era::uffd_writeprotect_spans_vmas(cx.kernel().version);
        let covered =
            vmas.first().is_some_and(|&v| st.vma(v).start <= start && st.vma(v).end >= end);
        if vmas.is_empty() || (!spans && !covered) {
            return Err(Errno::ENOENT);
        }
        vmas
    };
    for v in vmas {
        if !cx.st().userfaultfd_wp(v) {
            return Err(Errno::ENOENT);
        }
        let (s, e) = {
            let st = cx.st();
            (st.vma(v).start.max(start), st.vma(v).end.min(end))
        };
        crate::zap::split_huge_pmd_edges(cx, mm, s, e).await;
        let changed = uffd_wp_range(&mut cx.st(), v, (s, e), enable);
        cx.charge_n(crate::sim::cost::Cost::PteUpdate, changed).await;
        crate::arch::tlbflush::flush_tlb_range(cx, mm, s, e).await;
    }
    Ok(())
}
