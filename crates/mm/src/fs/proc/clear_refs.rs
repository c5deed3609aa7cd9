//! `/proc/PID/clear_refs` (`fs/proc/task_mmu.c` `clear_refs_write`, v5.11 and v6.8).
//!
//! Writing 4 resets soft-dirty tracking: each VMA loses `VM_SOFTDIRTY`, each present PTE is
//! write-protected and loses its soft-dirty bit (so the next write faults and sets it again), and
//! each swap PTE loses its swap soft-dirty bit. From v5.11 (9348b73c2e1b, kept by the v5.19 rule,
//! reverted by the seed) a writable PTE of a possibly pinned page in a COW mapping of an mm that
//! has pinned pages is left alone, since write-protecting it would let a COW fault move the page
//! away from the pin. Writing 1, 2 or 3 clears the accessed bits and PG_referenced of all,
//! anonymous or file-mapped pages; 5 resets the RSS high-water mark. Soft-dirty clearing takes
//! `mmap_lock` for write (as since v5.11), the others for read.
//!
//! A PMD leaf (an anonymous, file or DAX THP; hugetlb VMAs have no PMD arm) is handled whole
//! under its PMD lock, as `clear_refs_pte_range`'s `pmd_trans_huge_lock` arm: 4 write-protects
//! it and clears its soft-dirty bit (`clear_soft_dirty_pmd`, with "mm: soft-dirty bits for user
//! memory changes tracking", 0f8975ec4db2, v3.11, and its THP arm since; commit of the PMD arm
//! not verified), so the next write faults (`do_huge_pmd_wp_page`) and the hardware's dirty
//! update sets it again for every page the PMD maps (pagemap bit 55 of each subpage); 1-3
//! clear its accessed bit and the folio's PG_referenced. The pinned-page exception above is
//! applied to PTEs only (whether v5.11's `pte_is_pinned` has a PMD counterpart is not
//! verified).

use crate::arch::tlbflush::flush_tlb_range;
use crate::cow::clear_refs_skips_pinned;
use crate::errno::Errno;
use crate::folio::pg;
use crate::kernel::Cx;
use crate::memory::vm_normal_page;
use crate::mm_struct::MMF_HAS_PINNED;
use crate::pgtable::{Level, Pte, Upper};
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// What a write to `clear_refs` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClearRefs {
    All = 1,
    Anon = 2,
    Mapped = 3,
    SoftDirty = 4,
    MmHiwaterRss = 5,
}

impl ClearRefs {
    pub fn from_value(v: u64) -> Result<ClearRefs, Errno> {
        Ok(match v {
            1 => ClearRefs::All,
            2 => ClearRefs::Anon,
            3 => ClearRefs::Mapped,
            4 => ClearRefs::SoftDirty,
            5 => ClearRefs::MmHiwaterRss,
            _ => return Err(Errno::EINVAL),
        })
    }
}

/// `clear_refs_write` on `mm`.
pub(crate) async fn clear_refs(cx: &Cx, mm: MmId, kind: ClearRefs) {
    cx.charge(crate::sim::cost::Cost::Syscall).await;
    let lock = cx.st().mm(mm).mmap_lock;
    if kind == ClearRefs::MmHiwaterRss {
        let _g = lock.write(cx).await;
        let mut st = cx.st();
        let m = st.mm_mut(mm);
        m.hiwater_rss = m.rss_total();
        return;
    }
    let _g = if kind == ClearRefs::SoftDirty { lock.write(cx).await } else { lock.read(cx).await };
    let vmas: Vec<VmaId> = cx.st().mm(mm).vmas.values().copied().collect();
    let k = cx.kernel();
    let skip_pinned = clear_refs_skips_pinned(
        k.switches.cow_reuse,
        crate::era::clear_refs_keeps_pinned_writable(k.version),
    );
    for v in vmas {
        let (start, end, flags) = {
            let mut st = cx.st();
            if kind == ClearRefs::SoftDirty {
                st.vma_mut(v).flags.0 &= !VmFlags::SOFTDIRTY;
            }
            let vma = st.vma(v);
            (vma.start, vma.end, vma.flags)
        };
        let mut addr = start;
        while addr < end {
            let next = (addr + Bytes::PMD).align_down(Bytes::PMD).min(end);
            clear_table(cx, mm, flags, addr, next, kind, skip_pinned).await;
            addr = next;
        }
    }
    if kind == ClearRefs::SoftDirty {
        flush_tlb_range(cx, mm, VirtAddr(0), VirtAddr(crate::pgtable::TASK_SIZE)).await;
    }
}

/// Clears one PTE table's part of `[start, end)` under its lock.
async fn clear_table(
    cx: &Cx,
    mm: MmId,
    flags: VmFlags,
    start: VirtAddr,
    end: VirtAddr,
    kind: ClearRefs,
    skip_pinned: bool,
) {
    if !flags.has(VmFlags::HUGETLB) && clear_huge_pmd(cx, mm, start, kind).await {
        return;
    }
    let table = {
        let st = cx.st();
        st.pt.pte_slot(st.mm(mm).pgd, start).map(|(t, _)| t)
    };
    let Some(table) = table else { return };
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    let mut st = cx.st();
    let cow = flags.0 & (VmFlags::SHARED | VmFlags::MAYWRITE) == VmFlags::MAYWRITE;
    let has_pinned = st.mm(mm).flags & MMF_HAS_PINNED != 0;
    let mut addr = start;
    while addr < end {
        let idx = Level::Pte.index(addr);
        addr = addr + Bytes::PAGE;
        let pte = st.pt.pte(table, idx);
        if pte.is_none() {
            continue;
        }
        if kind == ClearRefs::SoftDirty {
            if pte.is_swap_pte() {
                st.pt.set_pte(table, idx, pte.without(Pte::SWP_SOFT_DIRTY));
                continue;
            }
            // `pte_is_pinned`.
            let pinned = pte.write()
                && cow
                && has_pinned
                && vm_normal_page(pte)
                    .is_some_and(|p| st.folios.maybe_dma_pinned(st.folios.head(p)));
            if skip_pinned && pinned {
                continue;
            }
            st.pt.set_pte(table, idx, pte.wrprotect().without(Pte::SOFT_DIRTY));
            continue;
        }
        if clear_young(&mut st, pte, kind) {
            st.pt.set_pte(table, idx, pte.without(Pte::ACCESSED));
        }
    }
}

/// Clears PG_referenced of the folio `entry` maps if `kind` wants it cleared (anonymous or
/// file-mapped); returns whether the entry's accessed bit goes too.
fn clear_young(st: &mut crate::kernel::KState, entry: Pte, kind: ClearRefs) -> bool {
    let Some(page) = vm_normal_page(entry) else { return false };
    let head = st.folios.head(page);
    let anon = st.folios.is_anon(head);
    let wanted = match kind {
        ClearRefs::Anon => anon,
        ClearRefs::Mapped => !anon,
        _ => true,
    };
    if wanted {
        st.folios.clear_flag(head, pg::REFERENCED);
    }
    wanted
}

/// The PMD arm (the module note): when a PMD leaf maps `addr`, clears it under the PMD lock and
/// returns true.
async fn clear_huge_pmd(cx: &Cx, mm: MmId, addr: VirtAddr, kind: ClearRefs) -> bool {
    let slot = {
        let st = cx.st();
        st.pt
            .pmd_slot(st.mm(mm).pgd, addr)
            .filter(|&(t, i)| matches!(st.pt.upper(t, i), Upper::Leaf(_)))
    };
    let Some((t, i)) = slot else { return false };
    let ptl = cx.st().pt.ptl(t);
    let _g = ptl.lock(cx).await;
    let mut st = cx.st();
    // A leaf split or zapped while we waited for the lock: the kernel retries the PTE arm; the
    // model skips it (an approximation).
    let Upper::Leaf(pmd) = st.pt.upper(t, i) else { return true };
    if kind == ClearRefs::SoftDirty {
        st.pt.set_upper(t, i, Upper::Leaf(pmd.wrprotect().without(Pte::SOFT_DIRTY)));
    } else if pmd.is_present() && clear_young(&mut st, pmd, kind) {
        st.pt.set_upper(t, i, Upper::Leaf(pmd.without(Pte::ACCESSED)));
    }
    true
}
