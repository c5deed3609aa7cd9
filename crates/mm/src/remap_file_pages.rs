//! `remap_file_pages(2)` (`mm/mmap.c`, Linux v6.8; emulated since v4.0, "mm: replace
//! remap_file_pages() syscall with emulation", c8d78c1823f4): the pages of a shared file mapping
//! are rearranged by mapping `[start, start + size)` again, `MAP_FIXED`, at file page `pgoff`, so
//! the range becomes a VMA of its own (non-linear mappings are gone).
//!
//! The call, in the kernel's order: `prot` other than 0 is EINVAL; `start` and `size` are
//! rounded down to pages, and an empty or wrapping range, or a page offset that wraps, is
//! EINVAL; under `mmap_lock` the VMA holding `start` must be `VM_SHARED` (a shared mapping of a
//! file opened read-only is not) and the range must lie in it or in VMAs that follow it without
//! a hole, of the same file and the same flags (EINVAL otherwise). The new mapping takes the
//! VMA's protection, `MAP_SHARED | MAP_FIXED | MAP_POPULATE` (`MAP_LOCKED` for a locked VMA;
//! `MAP_NONBLOCK`, the one flag kept, turns the populate off) and is then populated. No
//! userfaultfd unmap event is sent (the kernel passes no list to `do_mmap`).
//!
//! Approximation: the kernel checks and maps under one hold of `mmap_lock`; the model checks
//! under it, drops it and maps through `do_mmap`'s path, which takes it again, so a task that
//! changes the range in between is not excluded.

use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::mmap::{MmapArgs, map};
use crate::sim::cost::Cost;
use crate::types::ids::{FileId, MmId, Pid};
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// `remap_file_pages(start, size, prot, pgoff, flags)` by `pid` in `mm`.
pub(crate) async fn do_remap_file_pages(
    cx: &Cx,
    (pid, mm): (Pid, MmId),
    (start, size): (VirtAddr, u64),
    (prot_asked, pgoff, flags): (u32, u64, u32),
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    if prot_asked != 0 {
        return Err(Errno::EINVAL);
    }
    let (start, size) = (VirtAddr(start.0 & !0xfff), size & !0xfff);
    let end = start.0.checked_add(size).filter(|&e| e > start.0).ok_or(Errno::EINVAL)?;
    pgoff.checked_add(size >> 12).ok_or(Errno::EINVAL)?;
    let (file, vm) = {
        let lock = cx.st().mm(mm).mmap_lock;
        let _g = lock.write(cx).await;
        shared_file_range(&cx.st(), mm, start, VirtAddr(end)).ok_or(Errno::EINVAL)?
    };
    let locked = if vm & VmFlags::LOCKED != 0 { map::LOCKED } else { 0 };
    let flags = flags & map::NONBLOCK | map::SHARED | map::FIXED | map::POPULATE | locked;
    let (len, prot) = (Bytes(size), crate::mmap::vm_prot(vm));
    let args = MmapArgs { addr: Some(start), len, prot, flags, fd: None, offset: pgoff << 12 };
    cx.st().file_mut(file).refs += 1; // `get_file` for the call
    let mapped = crate::mmap::do_mmap_file(cx, pid, args, Some(file)).await;
    cx.st().file_put(file);
    mapped.map(drop)
}

/// The file and flags of the `VM_SHARED` VMA holding `start`, when `[start, end)` lies in it and
/// in the VMAs that follow it without a hole, of the same file and the same flags.
fn shared_file_range(
    st: &KState,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Option<(FileId, u64)> {
    let first = st.vma(st.find_vma(mm, start)?);
    let (file, flags) = (first.file?, first.flags);
    if !flags.has(VmFlags::SHARED) {
        return None;
    }
    let mut reach = first.end;
    if reach < end {
        for v in st.mm(mm).vmas_in(reach, end, |id| st.vma(id).end) {
            let next = st.vma(v);
            if next.start != reach || next.file != Some(file) || next.flags != flags {
                return None;
            }
            reach = next.end;
            if reach >= end {
                break;
            }
        }
    }
    (reach >= end).then_some((file, flags.0))
}
