//! Memory sealing: `mseal(2)` and what a sealed VMA refuses (`mm/mseal.c`; the checks sit in
//! `mm/mprotect.c`, `mm/mmap.c`/`mm/vma.c`, `mm/mremap.c` and `mm/madvise.c`), Linux v6.10 to
//! v6.18, with the eras below.
//!
//! `mseal(start, len, 0)` ("mseal: add mseal syscall", 8be7258aad44, v6.10; ENOSYS before,
//! `era::has_mseal`) marks every VMA of `[start, start + len)` `VM_SEALED` (smaps' `sl`),
//! splitting VMAs at the range's edges and merging sealed neighbours whose flags agree. Flags
//! other than 0 are EINVAL, as are an unaligned `start`, a length that rounds up past the end
//! of the address space and a range that wraps; a zero length succeeds and does nothing. Any
//! gap in the range is ENOMEM before anything is sealed (`check_mm_seal` in v6.10-v6.11,
//! `range_contains_unmapped` later). Sealing is idempotent and permanent: `fork` copies the
//! flag (the child's VMAs are sealed too), and only the process's exit removes the mappings.
//!
//! What a sealed VMA refuses, with EPERM:
//! - `munmap`, and everything that unmaps through it: `MAP_FIXED` over it, `brk` shrinking the
//!   heap across it, `mremap`'s unmap of a `MREMAP_FIXED` destination or of a shrunk tail.
//!   Nothing in the range is unmapped (v6.10-v6.11 check the whole range first, `can_modify_mm`;
//!   from v6.12 `vms_gather_munmap_vmas` checks VMA by VMA while gathering, before anything is
//!   unmapped).
//! - `mprotect`: v6.10-v6.11 check the whole range after finding its first VMA, before the
//!   walk, so nothing changes; from v6.12 (`mprotect_fixup` checks its VMA: "mm/mprotect:
//!   replace can_modify_mm with can_modify_vma", Pedro Falcato's series) the walk changes the
//!   VMAs before the sealed one, then stops with EPERM, as it stops at a gap or at EACCES.
//! - `mremap` of a sealed source: v6.10-v6.11 check every VMA of `[addr, addr + old_len)`,
//!   v6.12+ the VMA at `addr` (`vma_lookup`'s), after EFAULT for no VMA there.
//! - The advice that discards data (`MADV_FREE`, `MADV_DONTNEED`, `MADV_REMOVE`,
//!   `MADV_DONTFORK`, `MADV_WIPEONFORK`, and from v6.13 `MADV_GUARD_INSTALL`, which zaps;
//!   `is_madv_discard`) on a sealed VMA that is private,
//!   anonymous and not writable (`is_ro_anon`: no file, not shared, no `VM_WRITE`; a file
//!   mapping, private or shared, is allowed). v6.10-v6.11 refuse before any advice is given;
//!   from v6.12 ("mseal: replace can_modify_mm_madv with a vma variant") the walk advises the
//!   VMAs before the refused one, then stops with EPERM (a gap before it gives EPERM too, the
//!   walk's own error winning over its remembered ENOMEM). v6.18 words the test as "anonymous
//!   and not writable" (`can_madvise_modify`), the same VMAs for the mappings mmsim makes.
//!
//! Everything else is allowed on a sealed VMA: `mlock`/`munlock`, the advice that only changes
//! flags or reads ahead, userfaultfd registration, page faults, reclaim.
//!
//! Approximations: the checks of `munmap`, `MAP_FIXED` and `mremap` come before the hugetlb
//! alignment checks and the file's mmap checks (the kernel's order differs in corner cases that
//! fail both ways); from v6.12 an unmap refused by a later sealed VMA leaves the range's first
//! VMA split where the range started, as the kernel's gather does ([`split_refused_unmap`];
//! checked against 6.18), except a hugetlb VMA cut inside a huge page (EINVAL in the kernel);
//! `mseal` itself refuses a hugetlb range cut inside a huge page before sealing anything, where
//! the kernel may have sealed the VMAs before the cut one; `shmdt` of a sealed attach (the
//! kernel ignores the unmap's error and returns 0 with the mapping left) is not modelled; the
//! madvise gate runs before the advice takes `mmap_lock`; memory protection keys (the
//! `arch_vma_access_permitted` part of `is_ro_anon`) are not modelled. `VM_SEALED` has bit 63
//! here (v6.10-v6.17; bit 42 in v6.18, which prints the same `sl`).

use crate::era::KernelVersion;
use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::mmap::{madv, vma_merge_range, vmas_before_hole};
use crate::sim::cost::Cost;
use crate::types::ids::{MmId, VmaId};
use crate::vma::VmFlags;
use crate::zap::split_huge_pmd_edges;
use simcore::{Bytes, VirtAddr};

/// `mseal(2)`.
pub(crate) async fn do_mseal(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: Bytes,
    flags: u64,
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    if !crate::era::has_mseal(cx.kernel().version) {
        return Err(Errno::ENOSYS);
    }
    let Some((start, end)) = seal_range(addr, len, flags)? else { return Ok(()) };
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    if vmas_before_hole(&cx.st(), mm, start, end).1 {
        return Err(Errno::ENOMEM);
    }
    crate::hugetlb::hugetlb_split_prepare(cx, mm, start, end).await?;
    split_huge_pmd_edges(cx, mm, start, end).await;
    let vmas = cx.st().vma_split_range(mm, start, end);
    for v in vmas {
        if !is_sealed(&cx.st(), v) {
            cx.charge(Cost::VmaUpdate).await;
            cx.st().vma_mut(v).flags.0 |= VmFlags::SEALED;
        }
    }
    vma_merge_range(cx, mm, start, end).await;
    Ok(())
}

/// `do_mseal`'s argument checks: the range to seal, `None` for an empty one.
fn seal_range(
    addr: VirtAddr,
    len: Bytes,
    flags: u64,
) -> Result<Option<(VirtAddr, VirtAddr)>, Errno> {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    crate::mmap::range_or_empty(addr, len, Errno::EINVAL)
}

/// Whether VMA `v` is sealed (`vma_is_sealed`).
pub(crate) fn is_sealed(st: &KState, v: VmaId) -> bool {
    st.vma(v).flags.has(VmFlags::SEALED)
}

/// The first sealed VMA of `[start, end)`, in address order.
fn first_sealed(st: &KState, mm: MmId, start: VirtAddr, end: VirtAddr) -> Option<VmaId> {
    st.mm(mm).vmas_in(start, end, |id| st.vma(id).end).into_iter().find(|&v| is_sealed(st, v))
}

/// An unmap of `[start, end)` (`munmap`, `MAP_FIXED`, `brk`, `mremap`): EPERM when a VMA of the
/// range is sealed, nothing unmapped.
pub(crate) fn check_unmap(
    st: &KState,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    match first_sealed(st, mm, start, end) {
        Some(_) => Err(Errno::EPERM),
        None => Ok(()),
    }
}

/// What a refused unmap of `[start, ..)` leaves from v6.12: `vms_gather_munmap_vmas` splits the
/// range's first VMA at `start` (unless that VMA is the sealed one) before it meets a later
/// sealed VMA, and the split stays (a `maps` line more). A hugetlb VMA that cannot be split
/// there is left whole.
pub(crate) async fn split_refused_unmap(cx: &Cx, mm: MmId, start: VirtAddr) {
    if !crate::era::mseal_checks_each_vma(cx.kernel().version) {
        return;
    }
    let first = {
        let st = cx.st();
        let v = st.find_vma(mm, start).filter(|&v| !is_sealed(&st, v) && st.vma(v).start < start);
        v.map(|v| st.vma(v).end)
    };
    let Some(end) = first else { return };
    if crate::hugetlb::hugetlb_split_prepare(cx, mm, start, end).await.is_err() {
        return;
    }
    split_huge_pmd_edges(cx, mm, start, end).await;
    cx.st().vma_split_range(mm, start, end);
}

/// `mprotect`'s whole-range check of v6.10-v6.11 (`can_modify_mm`), made after its first VMA
/// is found; from v6.12 the walk checks each VMA instead ([`refuses_mprotect`]).
pub(crate) fn check_mprotect_range(
    st: &KState,
    k: KernelVersion,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    if crate::era::mseal_checks_each_vma(k) {
        return Ok(());
    }
    check_unmap(st, mm, start, end)
}

/// Whether `mprotect_fixup` refuses VMA `v` (v6.12+; the earlier check is
/// [`check_mprotect_range`]).
pub(crate) fn refuses_mprotect(st: &KState, k: KernelVersion, v: VmaId) -> bool {
    crate::era::mseal_checks_each_vma(k) && is_sealed(st, v)
}

/// `mremap`'s check of its source, after `vma_lookup` found `vma` at `addr`.
pub(crate) fn check_mremap(
    st: &KState,
    k: KernelVersion,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    old_len: Bytes,
) -> Result<(), Errno> {
    if crate::era::mseal_checks_each_vma(k) {
        return if is_sealed(st, vma) { Err(Errno::EPERM) } else { Ok(()) };
    }
    let end = addr.checked_add(old_len).unwrap_or(VirtAddr(u64::MAX));
    check_unmap(st, mm, addr, end.max(addr + Bytes::PAGE))
}

/// `is_madv_discard`: the advice a sealed read-only anonymous VMA refuses.
fn discards(advice: u32) -> bool {
    matches!(
        advice,
        madv::FREE
            | madv::DONTNEED
            | madv::DONTNEED_LOCKED
            | madv::REMOVE
            | madv::DONTFORK
            | madv::WIPEONFORK
            | madv::GUARD_INSTALL
    )
}

/// `is_ro_anon`: private anonymous memory the process cannot write.
fn is_ro_anon(st: &KState, v: VmaId) -> bool {
    let vma = st.vma(v);
    vma.file.is_none() && !vma.flags.has(VmFlags::SHARED) && !vma.flags.has(VmFlags::WRITE)
}

/// How `madvise(advice)` over `[start, end)` meets the seals: `Ok(None)` when no VMA refuses
/// it; `Err(EPERM)` when v6.10-v6.11 refuse it whole; `Ok(Some(at))` from v6.12, where the
/// advice is given to `[start, at)` and then EPERM returned.
pub(crate) fn madvise_stop(
    st: &KState,
    k: KernelVersion,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    advice: u32,
) -> Result<Option<VirtAddr>, Errno> {
    if !discards(advice) {
        return Ok(None);
    }
    let vmas = st.mm(mm).vmas_in(start, end, |id| st.vma(id).end);
    let Some(v) = vmas.into_iter().find(|&v| is_sealed(st, v) && is_ro_anon(st, v)) else {
        return Ok(None);
    };
    if !crate::era::mseal_checks_each_vma(k) {
        return Err(Errno::EPERM);
    }
    Ok(Some(st.vma(v).start.max(start)))
}
