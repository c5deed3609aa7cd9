//! `UFFDIO_REGISTER` and `UFFDIO_UNREGISTER` (fs/userfaultfd.c `userfaultfd_register`,
//! `userfaultfd_unregister`, `vma_can_userfault`; Linux v4.3 to v6.19).
//!
//! Registration, under `mmap_lock` for write: the range must be page-aligned, non-empty and in
//! the user address space (`validate_range`, EINVAL), the mode non-zero with only known bits
//! (EINVAL; `MISSING`, `WP` from v5.7, `era::uffd_wp_anon`, and `MINOR` from v5.13,
//! `era::uffd_minor_hugetlbfs`). Every VMA overlapping the range must be one userfaultfd
//! can handle (`vma_can_userfault`): private anonymous memory in every era, and from v4.11
//! hugetlb and shmem (shared anonymous memory, tmpfs and memfd files, private or shared;
//! `era::uffd_missing_hugetlb_shmem`); in minor mode only hugetlb, and shmem from v5.14
//! (`era::uffd_minor_shmem`); in write-protect mode only anonymous memory (the model's, see
//! `userfaultfd/wp.rs`); else EINVAL; have `VM_MAYWRITE` from v4.20 (EPERM,
//! `era::uffd_register_needs_maywrite`); belong to no other userfaultfd (EBUSY); and a hugetlb
//! VMA's range edges inside it must be huge-page aligned (EINVAL). A range with no VMA is EINVAL.
//! Holes between VMAs are no error. Then each VMA not yet registered with those modes gets the
//! modes' flags (`VM_UFFD_MISSING`, `VM_UFFD_MINOR`, replacing the ones it had) and the context,
//! split at the range's edges and merged with compatible neighbours, as `mprotect` does
//! (`mmap.rs` `vma_merge_range`).
//!
//! Unregistration checks the range and the VMA kinds alike (no `VM_MAYWRITE` test), wakes the
//! faults waiting in each registered part (`wake_userfault`: they retry as ordinary faults),
//! clears the uffd-wp bits of a write-protect-registered part from v6.0
//! (`era::uffd_unregister_clears_wp`), and clears the flags and context, splitting and merging
//! the same way.
//!
//! Approximations: up to v6.0 the kernel's walk (`find_vma_prev`) made a range above every VMA
//! ENOMEM, where the model (as v6.1's maple-tree walk, `vma_find`) says EINVAL; the
//! `uffdio_register.ioctls` answer is not returned.

use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::types::ids::{InodeId, MmId, Pid, VmaId};
use crate::types::userfaultfd::register_mode;
use crate::userfaultfd::{RangeIoctl, VM_UFFD_FLAGS, range_ioctl, wake_userfault};
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// `UFFDIO_REGISTER` of `[start, start + len)` with `mode` on descriptor `fd` of `pid`.
pub(crate) async fn userfaultfd_register(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    (start, len): (VirtAddr, u64),
    mode: u64,
) -> Result<(), Errno> {
    let (ctx, end) = range_ioctl(cx, (pid, fd), (start, len), RangeIoctl::Other).await?;
    // An unknown mode and a bad range are both EINVAL: their order does not show.
    let vm_flags = mode_flags(cx.kernel().version, mode)?;
    let mm = cx.st().uffd_ctx(ctx).mm;
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    cx.charge(crate::sim::cost::Cost::VmaUpdate).await;
    let vmas = checked_vmas(&cx.st(), mm, (start, end), Some((ctx, vm_flags)))?;
    for v in vmas {
        let vma_flags = cx.st().vma(v).flags.0;
        if cx.st().vma(v).uffd == Some(ctx) && vma_flags & vm_flags == vm_flags {
            continue;
        }
        set_range_ctx(cx, mm, v, (start, end), Some((ctx, vm_flags))).await;
    }
    crate::mmap::vma_merge_range(cx, mm, start, end).await;
    Ok(())
}

/// `UFFDIO_UNREGISTER` of `[start, start + len)` on descriptor `fd` of `pid`.
pub(crate) async fn userfaultfd_unregister(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    (start, len): (VirtAddr, u64),
) -> Result<(), Errno> {
    let (ctx, end) = range_ioctl(cx, (pid, fd), (start, len), RangeIoctl::Other).await?;
    let mm = cx.st().uffd_ctx(ctx).mm;
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    cx.charge(crate::sim::cost::Cost::VmaUpdate).await;
    let vmas = checked_vmas(&cx.st(), mm, (start, end), None)?;
    for v in vmas {
        let Some(owner) = cx.st().vma(v).uffd else { continue };
        let (s, e) = {
            let st = cx.st();
            (st.vma(v).start.max(start), st.vma(v).end.min(end))
        };
        wake_userfault(cx, owner, s, e);
        let clear_wp = crate::era::uffd_unregister_clears_wp(cx.kernel().version);
        if clear_wp && cx.st().userfaultfd_wp(v) {
            crate::zap::split_huge_pmd_edges(cx, mm, s, e).await;
            crate::userfaultfd::wp::uffd_wp_range(&mut cx.st(), v, (s, e), false);
        }
        set_range_ctx(cx, mm, v, (start, end), None).await;
    }
    crate::mmap::vma_merge_range(cx, mm, start, end).await;
    Ok(())
}

/// The VMA flags of registration `mode`: EINVAL for no mode, an unknown bit, or a mode the
/// kernel lacks (`WP` before v5.7, `MINOR` before v5.13).
fn mode_flags(k: crate::era::KernelVersion, mode: u64) -> Result<u64, Errno> {
    let mut known = register_mode::MISSING;
    if crate::era::uffd_minor_hugetlbfs(k) {
        known |= register_mode::MINOR;
    }
    if crate::era::uffd_wp_anon(k) {
        known |= register_mode::WP;
    }
    if mode == 0 || mode & !known != 0 {
        return Err(Errno::EINVAL);
    }
    let flag = |bit: u64, vm: u64| if mode & bit != 0 { vm } else { 0 };
    Ok(flag(register_mode::MISSING, VmFlags::UFFD_MISSING)
        | flag(register_mode::MINOR, VmFlags::UFFD_MINOR)
        | flag(register_mode::WP, VmFlags::UFFD_WP))
}

/// The VMAs overlapping `[start, end)`, after the checks both ioctls make of each (registration,
/// `register` = `Some((ctx, vm_flags))`, adds the modes' VMA kinds, `VM_MAYWRITE` and
/// ownership).
fn checked_vmas(
    st: &KState,
    mm: MmId,
    (start, end): (VirtAddr, VirtAddr),
    register: Option<(InodeId, u64)>,
) -> Result<Vec<VmaId>, Errno> {
    let vmas = st.mm(mm).vmas_in(start, end, |id| st.vma(id).end);
    let Some(&first) = vmas.first() else { return Err(Errno::EINVAL) };
    if huge_misaligned(st, first, start) {
        return Err(Errno::EINVAL);
    }
    let k = st.thp.kernel;
    for &v in &vmas {
        let vma = st.vma(v);
        let vm_flags = register.map_or(VmFlags::UFFD_MISSING, |(_, f)| f);
        if !vma_can_userfault(st, v, vm_flags) {
            return Err(Errno::EINVAL);
        }
        let Some((ctx, _)) = register else { continue };
        if crate::era::uffd_register_needs_maywrite(k) && !vma.flags.has(VmFlags::MAYWRITE) {
            return Err(Errno::EPERM);
        }
        if end <= vma.end && end > vma.start && huge_misaligned(st, v, end) {
            return Err(Errno::EINVAL);
        }
        if vma.uffd.is_some_and(|c| c != ctx) {
            return Err(Errno::EBUSY);
        }
    }
    Ok(vmas)
}

/// Whether `addr` is not aligned to the huge page size of hugetlb VMA `v`.
fn huge_misaligned(st: &KState, v: VmaId, addr: VirtAddr) -> bool {
    st.hstate_vma(v).is_some_and(|h| !addr.is_aligned(Bytes(h.bytes())))
}

/// `vma_can_userfault` for the modes of `vm_flags`: anonymous memory, and from v4.11 hugetlb and
/// shmem; in minor mode hugetlb only (v5.13), and shmem from v5.14.
fn vma_can_userfault(st: &KState, v: VmaId, vm_flags: u64) -> bool {
    let vma = st.vma(v);
    let k = st.thp.kernel;
    let anon = vma.is_anonymous();
    let hugetlb = vma.vm_ops.is_hugetlb();
    let shmem = vma.file.is_some_and(|f| st.inodes[st.file(f).inode].fs.swap_backed());
    if vm_flags & VmFlags::UFFD_MINOR != 0
        && !(hugetlb || (shmem && crate::era::uffd_minor_shmem(k)))
    {
        return false;
    }
    // Write-protection of shmem and hugetlb (v5.19) is not modelled (`userfaultfd/wp.rs`).
    if vm_flags & VmFlags::UFFD_WP != 0 && !anon {
        return false;
    }
    anon || (crate::era::uffd_missing_hugetlb_shmem(k) && (hugetlb || shmem))
}

/// The part of `v` inside `[start, end)`, split off, gets context `ctx` and its mode flags
/// (replacing those it had), or loses them (`None`).
async fn set_range_ctx(
    cx: &Cx,
    mm: MmId,
    v: VmaId,
    (start, end): (VirtAddr, VirtAddr),
    ctx: Option<(InodeId, u64)>,
) {
    let (s, e) = {
        let st = cx.st();
        (st.vma(v).start.max(start), st.vma(v).end.min(end))
    };
    if !cx.st().vma(v).vm_ops.is_hugetlb() {
        crate::zap::split_huge_pmd_edges(cx, mm, s, e).await;
    }
    let parts = cx.st().vma_split_range(mm, s, e);
    let mut st = cx.st();
    for p in parts {
        let vma = st.vma_mut(p);
        vma.uffd = ctx.map(|(c, _)| c);
        vma.flags.0 = (vma.flags.0 & !VM_UFFD_FLAGS) | ctx.map_or(0, |(_, f)| f);
    }
}
