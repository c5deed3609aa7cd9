//! Process-wide KSM: `prctl(PR_SET_MEMORY_MERGE)` and `PR_GET_MEMORY_MERGE` (`kernel/sys.c`;
//! `mm/ksm.c`: `ksm_enable_merge_any`, `ksm_disable_merge_any`, `ksm_add_vmas`,
//! `ksm_del_vmas`, `ksm_add_vma`/`ksm_vma_flags`, `ksm_fork`), v6.4 ("mm: add new api to
//! enable ksm per process", d7597f59d1d3, with "mm/ksm: unmerge and clear VM_MERGEABLE when
//! setting PR_SET_MEMORY_MERGE=0", 24139c07f413, from the same series; read in v6.8 and
//! v6.18, the same there). Before v6.4 both options are unknown (EINVAL).
//!
//! Setting it registers the mm with ksmd if it is not yet (`__ksm_enter`), sets
//! `MMF_VM_MERGE_ANY` and makes every VMA that `MADV_MERGEABLE` would accept `VM_MERGEABLE`
//! (not shared, special, hugetlb or DAX: `ksm_compatible`); every later mapping of the mm that
//! qualifies is made mergeable too. Clearing it unmerges the KSM pages of every mergeable VMA
//! and clears `VM_MERGEABLE` everywhere, where `MADV_MERGEABLE` set it too, then the flag (an
//! unmerge that fails makes the VMAs mergeable again and returns its error). Either is a no-op
//! when the flag already says so. Both run under `mmap_lock` for write; the get reads the
//! flag. A forked child inherits the flag (`ksm_fork`).
//!
//! Approximations: a new mapping is made mergeable with the flags it is created with, so it may
//! merge with a mergeable neighbour, as v6.18 does (`ksm_vma_flags`); v6.4 to at least v6.12
//! set the flag after linking the VMA (`ksm_add_vma`), which could keep the two apart. From v6.7
//! ("mm/ksm: support fork/exec for prctl", 3c6f33b7273a) `exec` keeps the flag (`mm_init`
//! copies it with `MMF_INIT_MASK`): the new mm joins ksmd's list (`ksm_execve`) and the image's
//! mappings but the stack are mergeable (`fs/exec.rs`); before, the new mm is without it.
//! `brk`'s new heap VMA is not made mergeable (`do_brk_flags` calls `ksm_add_vma` too).

use super::{MMF_VM_MERGEABLE, ksm_enter, ksm_should_add_vma, unmerge_ksm_pages};
use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::types::ids::{MmId, VmaId};
use crate::vma::VmFlags;

/// `MMF_VM_MERGE_ANY`: `PR_SET_MEMORY_MERGE` is in force for the mm.
pub const MMF_VM_MERGE_ANY: u32 = 1 << 4;

/// `prctl(PR_SET_MEMORY_MERGE, enable)` for `mm`.
pub(crate) async fn prctl_set_memory_merge(cx: &Cx, mm: MmId, enable: bool) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    if prctl_get_memory_merge(&cx.st(), mm) == enable {
        return Ok(());
    }
    if enable {
        if cx.st().mm(mm).flags & MMF_VM_MERGEABLE == 0 {
            ksm_enter(cx, mm);
        }
        let mut st = cx.st();
        st.mm_mut(mm).flags |= MMF_VM_MERGE_ANY;
        st.ksm_add_vmas(mm);
        return Ok(());
    }
    if let Err(e) = ksm_del_vmas(cx, mm).await {
        cx.st().ksm_add_vmas(mm);
        return Err(e);
    }
    cx.st().mm_mut(mm).flags &= !MMF_VM_MERGE_ANY;
    Ok(())
}

/// `prctl(PR_GET_MEMORY_MERGE)`: whether `MMF_VM_MERGE_ANY` is set.
pub(crate) fn prctl_get_memory_merge(st: &KState, mm: MmId) -> bool {
    st.mm(mm).flags & MMF_VM_MERGE_ANY != 0
}

/// `ksm_vma_flags`: the flags `vm` of a new mapping of `mm`, with `VM_MERGEABLE` when the mm
/// merges any and the mapping qualifies (the mm registered again if ksmd had let it go).
pub(crate) fn ksm_vma_flags(cx: &Cx, mm: MmId, vm: VmFlags, dax: bool) -> VmFlags {
    let flags = cx.st().mm(mm).flags;
    if flags & MMF_VM_MERGE_ANY == 0 || !ksm_should_add_vma(vm, dax) {
        return vm;
    }
    if flags & MMF_VM_MERGEABLE == 0 {
        ksm_enter(cx, mm);
    }
    VmFlags(vm.0 | VmFlags::MERGEABLE)
}

/// Whether the image `exec` gives a task whose mm is `old` merges any: `MMF_VM_MERGE_ANY` is in
/// `MMF_INIT_MASK` from v6.7 (3c6f33b7273a), so `mm_init` copies it to the new mm.
pub(crate) fn exec_keeps_merge_any(st: &KState, old: MmId) -> bool {
    crate::era::ksm_merge_any_survives_exec(st.thp.kernel) && prctl_get_memory_merge(st, old)
}

/// `ksm_execve`: the new mm of an exec that keeps `MMF_VM_MERGE_ANY` gets it and joins ksmd's
/// list before the loader maps anything.
pub(crate) fn ksm_execve(cx: &Cx, mm: MmId) {
    cx.st().mm_mut(mm).flags |= MMF_VM_MERGE_ANY;
    ksm_enter(cx, mm);
}

/// `ksm_fork`'s part: a child of an mm that merges any does too.
pub(crate) fn inherit_merge_any(st: &mut KState, child: MmId, parent: MmId) {
    let any = st.mm(parent).flags & MMF_VM_MERGE_ANY;
    st.mm_mut(child).flags |= any;
}

impl KState {
    /// `ksm_add_vmas`: every VMA of `mm` KSM may merge becomes `VM_MERGEABLE`.
    fn ksm_add_vmas(&mut self, mm: MmId) {
        let vmas: Vec<VmaId> = self.mm(mm).vmas.values().copied().collect();
        for v in vmas {
            let (flags, dax) = (self.vma(v).flags, self.vma_is_dax(v));
            if ksm_should_add_vma(flags, dax) {
                self.vma_mut(v).flags = VmFlags(flags.0 | VmFlags::MERGEABLE);
            }
        }
    }
}

/// `ksm_del_vmas`: every mergeable VMA of `mm` unmerged and made unmergeable.
async fn ksm_del_vmas(cx: &Cx, mm: MmId) -> Result<(), Errno> {
    let vmas: Vec<VmaId> = cx.st().mm(mm).vmas.values().copied().collect();
    for v in vmas {
        let (start, end, flags, anon_vma) = {
            let st = cx.st();
            let vma = st.vma(v);
            (vma.start, vma.end, vma.flags, vma.anon_vma.is_some())
        };
        if !flags.has(VmFlags::MERGEABLE) {
            continue;
        }
        if anon_vma {
            unmerge_ksm_pages(cx, mm, v, start, end).await?;
        }
        cx.st().vma_mut(v).flags = VmFlags(flags.0 & !VmFlags::MERGEABLE);
    }
    Ok(())
}
