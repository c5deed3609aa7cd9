//! `brk(2)`: the program break (`mm/mmap.c` `SYSCALL_DEFINE1(brk)` and `do_brk_flags`, Linux
//! v6.8; the same rules since v4.12).
//!
//! `exec` sets `mm->start_brk` and `mm->brk` to the page-aligned end of the executable's bss
//! (`fs/exec.rs`, `binfmt_elf.rs`). The model does not randomise the break: it is where the
//! kernel puts it when `randomize_va_space` is below 2 (`arch_randomize_brk` not called), so the
//! heap starts right after the bss.
//!
//! A call asks for a new break and returns the break in force afterwards — the new one, or the
//! old one when the request is refused (glibc's `brk()` turns that into ENOMEM; the raw syscall
//! has no errno). Under `mmap_lock` held for write:
//! - a break below `start_brk` is refused;
//! - when the page-aligned new and old breaks are the same page, only `mm->brk` moves;
//! - shrinking unmaps `[PAGE_ALIGN(brk), PAGE_ALIGN(old))` as `munmap` would (splitting VMAs,
//!   freeing pages and tables); a failed unmap keeps the old break;
//! - growing is refused when the next VMA begins less than a page after the new end — its
//!   `vm_start_gap`, which for a `VM_GROWSDOWN` stack includes `stack_guard_gap` (256 pages)
//!   from v4.12 ("mm: larger stack guard gap, between vmas", 1be7107fbe18); before, only a VMA
//!   intersecting `[old, new + PAGE_SIZE)` refused it (`find_vma_intersection`);
//! - otherwise `do_brk_flags` maps `[old, new)` anonymous, private, `VM_READ|VM_WRITE` with the
//!   `VM_MAY*` bits, `VM_ACCOUNT` and `mm->def_flags`: it stretches the VMA that ends at the old
//!   break when that VMA is anonymous with the same flags (ignoring `VM_SOFTDIRTY`,
//!   `can_vma_merge_after`), and makes a new one otherwise; either way the VMA becomes
//!   `VM_SOFTDIRTY`. With `mlockall(MCL_FUTURE)` in force (`VM_LOCKED` in `def_flags`) the new
//!   range is populated after the lock is dropped (`mm_populate`).
//!
//! `/proc/PID/maps` names `[heap]` the anonymous VMAs that meet `[start_brk, brk]`
//! (`vma_is_initial_heap`): touching at either end up to v6.6 (the test of "procfs: fix
//! /proc/<pid>/maps heap check", 0db0c01b53a1, 2011), overlapping from v6.7 ("mm: fix VMA heap
//! bounds checking", v6.7-rc6, id not verified), so before v6.7 the bss VMA that ends where the
//! heap begins is `[heap]` too (`era::heap_name_touching`).
//!
//! A process made without `exec` (a scenario's `[[process]]`) has no heap: its break is 0 and
//! every request is refused.
//!
//! Not modelled: `RLIMIT_DATA` (`check_data_rlimit`; unlimited) and `vm.max_map_count`; the
//! break of a process started by `exec` of an ELF file with an interpreter and no randomisation
//! is the executable's, as the kernel's is.

use crate::kernel::{Cx, KState};
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::types::mm_types::VmOps;
use crate::vma::{VmFlags, Vma, VmaRole};
use simcore::{Bytes, VirtAddr};

/// `stack_guard_gap`: 256 pages below a stack VMA that nothing else may map (v4.12+).
const STACK_GUARD_GAP: u64 = 256 << 12;

/// `brk(2)` of `mm`: returns the break in force afterwards.
pub(crate) async fn do_brk(cx: &Cx, mm: MmId, brk: VirtAddr) -> VirtAddr {
    cx.charge(Cost::Syscall).await;
    let lock = cx.st().mm(mm).mmap_lock;
    let guard = lock.write(cx).await;
    let (start_brk, origbrk) = {
        let st = cx.st();
        (st.mm(mm).start_brk, st.mm(mm).brk)
    };
    // A process made without `exec` has no heap (`start_brk` 0): every request is refused.
    if brk < start_brk || start_brk.0 == 0 {
        return origbrk;
    }
    let page = |a: VirtAddr| a.align_up(Bytes::PAGE);
    let (Some(newbrk), Some(oldbrk)) = (page(brk), page(origbrk)) else {
        return origbrk;
    };
    if newbrk == oldbrk {
        cx.st().mm_mut(mm).brk = brk;
        return brk;
    }
    if brk <= origbrk {
        cx.st().mm_mut(mm).brk = brk;
        if crate::mmap::munmap_locked(cx, mm, newbrk, oldbrk).await.is_err() {
            cx.st().mm_mut(mm).brk = origbrk;
            return origbrk;
        }
        drop(guard);
        cx.st().mlock_drain();
        crate::userfaultfd::events::userfaultfd_complete(cx).await;
        return brk;
    }
    let kernel = cx.kernel().version;
    if cx.st().brk_collides(mm, oldbrk, newbrk, kernel) {
        return origbrk;
    }
    do_brk_flags(cx, mm, oldbrk, newbrk);
    let populate = {
        let mut st = cx.st();
        st.mm_mut(mm).brk = brk;
        st.mm(mm).def_flags & VmFlags::LOCKED != 0
    };
    drop(guard);
    if populate {
        crate::gup::populate(cx, mm, oldbrk, newbrk).await;
    }
    brk
}

impl KState {
    /// `vma_is_initial_heap`: whether `/proc/PID/maps` names `vma` `[heap]`.
    pub(crate) fn vma_is_initial_heap(&self, vma: VmaId) -> bool {
        let v = self.vma(vma);
        let m = self.mm(v.mm);
        if crate::era::heap_name_touching(self.thp.kernel) {
            v.start <= m.brk && v.end >= m.start_brk
        } else {
            v.start < m.brk && v.end > m.start_brk
        }
    }

    /// Whether growing the break from `oldbrk` to `newbrk` would come within a page of the
    /// next VMA (or within its stack guard gap).
    fn brk_collides(
        &self,
        mm: MmId,
        oldbrk: VirtAddr,
        newbrk: VirtAddr,
        kernel: crate::KernelVersion,
    ) -> bool {
        let limit = newbrk.0.saturating_add(Bytes::PAGE.as_u64());
        let m = self.mm(mm);
        // `find_vma`: the first VMA ending after the old break.
        let end_of = |id| self.vma(id).end;
        let next =
            m.vma_at(oldbrk, end_of).or_else(|| m.vmas.range(oldbrk.0..).next().map(|(_, &id)| id));
        let Some(next) = next else {
            return false;
        };
        let v = self.vma(next);
        let gap = if crate::era::brk_respects_stack_guard_gap(kernel)
            && v.flags.has(VmFlags::GROWSDOWN)
        {
            STACK_GUARD_GAP
        } else {
            0
        };
        limit > v.start.0.saturating_sub(gap)
    }

    /// The VMA ending at `addr` that the break may stretch (`can_vma_merge_after`): anonymous,
    /// private, its flags the break's but for `VM_SOFTDIRTY`.
    fn brk_vma_before(&self, mm: MmId, addr: VirtAddr, flags: u64) -> Option<VmaId> {
        let m = self.mm(mm);
        let prev = m.vmas.range(..addr.0).next_back().map(|(_, &v)| v)?;
        let v = self.vma(prev);
        let same = v.flags.merge_equal(VmFlags(flags));
        (v.end == addr && v.file.is_none() && same).then_some(prev)
    }
}

/// `do_brk_flags`: maps `[start, end)` as the heap, stretching the VMA before it when it may.
fn do_brk_flags(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    let mut st = cx.st();
    let flags = VmFlags::READ
        | VmFlags::WRITE
        | VmFlags::MAYREAD
        | VmFlags::MAYWRITE
        | VmFlags::MAYEXEC
        | VmFlags::ACCOUNT
        | st.mm(mm).def_flags;
    let id = match st.brk_vma_before(mm, start, flags) {
        Some(v) => {
            st.vma_mut(v).end = end;
            v
        }
        None => {
            let vma = Vma {
                mm,
                start,
                end,
                flags: VmFlags(flags),
                pgoff: start.0 >> 12,
                file: None,
                vm_ops: VmOps::of(&st, None),
                anon_vma: None,
                anon_vma_chain: Vec::new(),
                role: VmaRole::Plain,
                uffd: None,
            };
            let id = st.vma_link(vma);
            st.mmap_locked_fixup(id);
            id
        }
    };
    st.vma_mut(id).flags.0 |= VmFlags::SOFTDIRTY;
    drop(st);
    if crate::era::mmap_registers_khugepaged(cx.kernel().version) {
        crate::khugepaged::khugepaged_enter_vma(cx, id);
    }
}
