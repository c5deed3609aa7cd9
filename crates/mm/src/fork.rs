//! `fork` and address-space teardown (`kernel/fork.c` `dup_mmap`, `mm/memory.c`
//! `copy_page_range`/`copy_present_pte`, `mm/mmap.c` `exit_mmap`; Linux v6.8).
//!
//! Fork takes the parent's `mmap_lock` for write, then the child's (nested, as the kernel
//! annotates it), copies each VMA (skipping `VM_DONTCOPY`), chains the child VMA into the
//! parent's anon_vmas, links file VMAs into `i_mmap`, and copies page tables only for VMAs that
//! have anonymous pages (file pages fault back in, as `vma_needs_copy` decides). Copying a PTE of
//! an anonymous page in a COW mapping write-protects it in both processes and clears
//! `PageAnonExclusive` (`folio_try_dup_anon_rmap_pte`); the destination PTE table lock is taken
//! first, the source's nested. The parent's TLB is flushed at the end.
//!
//! A possibly pinned exclusive anonymous page of an mm that has pinned pages is copied for the
//! child instead of shared ("mm: Do early cow for pinned pages during fork()", v5.9; under every
//! `cow_reuse` rule but `mapcount_swapcount`, which ends with v5.8). A swap entry is shared with
//! one more swap reference; a guard marker (v6.13) is copied as it is, and `MADV_GUARD_INSTALL`
//! gives its VMA an anon_vma, so that the VMA's tables are copied even when it maps a file (v6.15).

use crate::arch::tlbflush::flush_tlb_range;
use crate::era::CowReuse;
use crate::errno::Errno;
use crate::folio::pg;
use crate::huge_memory::anon::{CopyHuge, copy_huge_pmd};
use crate::hugetlb::copy_hugetlb_page_range;
use crate::kernel::{Cx, KState};
use crate::memory::{pmd_alloc, pte_alloc, vm_normal_page};
use crate::mm_struct::mm_counter;
use crate::mm_struct::{MmCounter, MmStruct};
use crate::pgtable::{Level, Pte};
use crate::process::Process;
use crate::sim::cost::Cost;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::Pid;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::vma::{VmFlags, Vma};
use crate::zap::{ZapDetails, zap_vma_range};
use simcore::{Bytes, Pfn, VirtAddr};
use std::collections::BTreeMap;

impl KState {
    /// `mm_alloc`: an empty address space with its PGD.
    pub(crate) fn mm_alloc(&mut self, handle: &engine::Handle, owner: Pid) -> Result<MmId, Errno> {
        let frame = self.alloc_pgtable_frame().ok_or(Errno::ENOMEM)?;
        let pgd = self.pt.alloc(Level::Pgd, frame, || handle.spin_lock("ptlock"));
        let mm = MmStruct {
            owner,
            pgd,
            mmap_lock: handle.rwsem("mmap_lock"),
            page_table_lock: handle.spin_lock("page_table_lock"),
            vmas: Default::default(),
            rss: [0; 4],
            hiwater_rss: 0,
            flags: 0,
            cpumask: Default::default(),
            exe_file: None,
            pgtables: [0; 3],
            deposited: BTreeMap::new(),
            def_flags: 0,
            start_brk: VirtAddr(0),
            brk: VirtAddr(0),
            ksm_zero_pages: 0,
        };
        Ok(self.mms.push(Some(Box::new(mm))))
    }
}

impl KState {
    /// The child's address space (`dup_mm`'s `mm_init`): empty, with the flags it inherits.
    fn mm_alloc_child(
        &mut self,
        handle: &engine::Handle,
        child: Pid,
        parent: MmId,
    ) -> Result<MmId, Errno> {
        let new = self.mm_alloc(handle, child)?;
        self.procs[child].mm = Some(new);
        let flags = self.mm_init_flags(parent);
        self.mm_inherit_flags(new, flags);
        let (start_brk, brk) = (self.mm(parent).start_brk, self.mm(parent).brk);
        let child_mm = self.mm_mut(new);
        (child_mm.start_brk, child_mm.brk) = (start_brk, brk);
        Ok(new)
    }
}

/// The child's `mm->exe_file`: the parent's, with write denied once more unless the
/// `exec_deny_write` era allows writers.
fn copy_exe_file(st: &mut KState, old: MmId, new: MmId, deny: bool) {
    let Some(exe) = st.mm(old).exe_file else { return };
    st.file_mut(exe).refs += 1;
    let inode = st.file(exe).inode;
    if deny {
        st.inodes[inode].deny_write_access().expect("the parent already denies writes");
    }
    st.mm_mut(new).exe_file = Some(exe);
}

/// `fork()`: a child process with a copy of `parent`'s address space and file table.
pub(crate) async fn do_fork(cx: &Cx, parent: Pid) -> Result<Pid, Errno> {
    cx.charge(Cost::Syscall).await;
    cx.charge(Cost::ForkBase).await;
    let old = cx.st().procs[parent].mm.ok_or(Errno::EINVAL)?;
    let child = {
        let mut st = cx.st();
        let fds = st.procs[parent].fds.clone();
        for &f in fds.values() {
            st.file_mut(f).refs += 1;
        }
        let name = st.procs[parent].name.clone();
        // `copy_process` starts the child's fault counts at zero.
        st.procs.push(Process { fds, ..Process::new(name, Some(parent)) })
    };
    cx.st().mem_cgroup_fork(parent, child);
    let new = cx.st().mm_alloc_child(cx, child, old)?;
    crate::ksm::ksm_fork(cx, new, old);
    let forks = dup_mmap(cx, old, new).await?;
    // `dup_userfaultfd_complete`, once both `mmap_lock`s are dropped.
    crate::userfaultfd::events::dup_userfaultfd_complete(cx, forks).await;
    Ok(child)
}

/// `dup_mmap`: the parent's VMAs (of `old`) and their pages copied into the child's `new`
/// under both `mmap_lock`s; returns the userfaultfd contexts made for the child (parent's,
/// child's) whose `UFFD_EVENT_FORK` the parent owes.
async fn dup_mmap(cx: &Cx, old: MmId, new: MmId) -> Result<Vec<(InodeId, InodeId)>, Errno> {
    let (old_lock, new_lock) = {
        let st = cx.st();
        (st.mm(old).mmap_lock, st.mm(new).mmap_lock)
    };
    let _old = old_lock.write(cx).await;
    let _new = new_lock.write_nested(cx, 1).await;
    let deny = crate::fs::exec::exec_denies_write(cx);
    copy_exe_file(&mut cx.st(), old, new, deny);
    let parents: Vec<VmaId> = cx.st().mm(old).vmas.values().copied().collect();
    let mut wrprotected = false;
    let mut forks = Vec::new();
    for pv in parents {
        let (copy, needs_pages, i_mmap) = {
            let mut st = cx.st();
            let p = st.vma(pv);
            if p.flags.has(VmFlags::DONTCOPY) {
                continue;
            }
            let mut copy = Vma { mm: new, anon_vma: None, anon_vma_chain: Vec::new(), ..p.clone() };
            // `dup_mmap`: the child's VMAs are not locked; a userfaultfd's registration goes
            // with them only under `UFFD_FEATURE_EVENT_FORK` (`dup_userfaultfd`).
            copy.flags.0 &= !(VmFlags::LOCKED | VmFlags::LOCKONFAULT);
            let pages = p.anon_vma.is_some() || st.hugetlb_copies_at_fork(pv);
            let needs = pages && !p.flags.has(VmFlags::WIPEONFORK);
            let i_mmap = p.file.map(|f| st.inodes[st.file(f).inode].mapping.i_mmap_rwsem);
            crate::userfaultfd::events::dup_userfaultfd(cx, &mut st, &mut copy, &mut forks);
            if let Some(f) = copy.file {
                st.file_mut(f).refs += 1;
            }
            (copy, needs, i_mmap)
        };
        cx.charge(Cost::VmaUpdate).await;
        let cv = link_child_vma(cx, copy, i_mmap, pv).await;
        if needs_pages {
            cx.st().anon_vma_fork(cv, pv);
            let hugetlb = cx.st().vma(pv).vm_ops.is_hugetlb();
            wrprotected |= if hugetlb {
                copy_hugetlb_page_range(cx, new, cv, old, pv).await?
            } else {
                copy_page_range(cx, new, cv, old, pv).await?
            };
        }
    }
    if wrprotected {
        flush_tlb_range(cx, old, VirtAddr(0), VirtAddr(crate::pgtable::TASK_SIZE)).await;
    }
    Ok(forks)
}

/// Links the child's copy of VMA `pv` (under `i_mmap_rwsem` for a file's) and gives a hugetlb
/// copy its own private data (`hugetlb_dup_vma_private`, then `->open`).
async fn link_child_vma(cx: &Cx, copy: Vma, i_mmap: Option<engine::RwSem>, pv: VmaId) -> VmaId {
    let _g = match i_mmap {
        Some(l) => Some(l.write(cx).await),
        None => None,
    };
    let cv = cx.st().vma_link(copy);
    cx.st().hugetlb_vm_op_open(pv, cv, false);
    cv
}

/// Copies the PTEs of `src` (in `src_mm`) into `dst` (in `dst_mm`); returns whether any source
/// PTE was write-protected.
async fn copy_page_range(
    cx: &Cx,
    dst_mm: MmId,
    dst: VmaId,
    src_mm: MmId,
    src: VmaId,
) -> Result<bool, Errno> {
    let (start, end, cow) = {
        let st = cx.st();
        let v = st.vma(src);
        (v.start, v.end, v.is_cow_mapping())
    };
    let mut wrprotected = false;
    let mut addr = start;
    while addr < end {
        let next = (addr + Bytes::PMD).align_down(Bytes::PMD).min(end);
        if copy_pmd_leaf(cx, (dst_mm, dst), (src_mm, src), addr, &mut wrprotected).await? {
            addr = next;
            continue;
        }
        let src_table = {
            let st = cx.st();
            st.pt.pte_slot(st.mm(src_mm).pgd, addr).map(|(t, _)| t)
        };
        let Some(src_table) = src_table else {
            addr = next;
            continue;
        };
        let dst_table = pte_alloc(cx, dst_mm, addr)
            .await
            .map_err(|_| Errno::ENOMEM)?
            .expect("a new address space has no huge PMDs");
        // Pages the child must get a copy of (possibly pinned exclusive anonymous pages) are
        // allocated first, outside the locks, as `copy_pte_range` preallocates.
        let needed = cx.st().pinned_pages_to_copy(
            src_mm,
            src_table,
            addr,
            next,
            cow,
            cx.kernel().switches.cow_reuse,
        );
        let mut prealloc = preallocate(cx, needed).await?;
        let (dst_ptl, src_ptl) = {
            let st = cx.st();
            (st.pt.ptl(dst_table), st.pt.ptl(src_table))
        };
        let _d = dst_ptl.lock(cx).await;
        let _s = src_ptl.lock_nested(cx, 1).await;
        let range = PteRange {
            src_mm,
            dst_mm,
            dst,
            keep_uffd_wp: fork_keeps_uffd_wp(&cx.st(), cx.kernel().version, src, dst),
            src_table,
            dst_table,
            start: addr,
            end: next,
            cow,
            rule: cx.kernel().switches.cow_reuse,
            in_lru_fault: cx.in_lru_fault(),
        };
        let (copied, page_copies, wrprotects) = cx.st().copy_pte_range(&range, &mut prealloc);
        wrprotected |= wrprotects;
        cx.charge_n(Cost::PteUpdate, copied).await;
        cx.charge_n(Cost::CopyPage4k, page_copies).await;
        addr = next;
    }
    Ok(wrprotected)
}

/// The PMD level of `copy_pmd_range`: a huge PMD at `addr` of `src_mm` is shared with the
/// child if anonymous (`copy_huge_pmd`, `huge_memory/anon.rs`) or left for the child to refault
/// (file THPs, DAX); returns whether the PMD is done, false when there was none or it was split
/// for the PTE-level copy.
async fn copy_pmd_leaf(
    cx: &Cx,
    (dst_mm, dst): (MmId, VmaId),
    (src_mm, src): (MmId, VmaId),
    addr: VirtAddr,
    wrprotected: &mut bool,
) -> Result<bool, Errno> {
    let leaf = {
        let st = cx.st();
        st.pt
            .pmd_slot(st.mm(src_mm).pgd, addr)
            .is_some_and(|(t, i)| matches!(st.pt.upper(t, i), crate::pgtable::Upper::Leaf(_)))
    };
    if !leaf {
        return Ok(false);
    }
    let dst_pmd = pmd_alloc(cx, dst_mm, addr).await.map_err(|_| Errno::ENOMEM)?;
    match copy_huge_pmd(cx, dst_mm, dst_pmd, src_mm, addr).await? {
        CopyHuge::NotAnon => Ok(true),
        CopyHuge::Shared(was_writable) => {
            *wrprotected |= was_writable;
            clear_child_pmd_uffd_wp(&mut cx.st(), cx.kernel().version, (src, dst), addr);
            cx.charge(Cost::PteUpdate).await;
            Ok(true)
        }
        CopyHuge::Split => Ok(false),
    }
}

/// `copy_huge_pmd`'s uffd-wp rule: the child's PMD at `addr` loses the bit unless it keeps
/// it ([`fork_keeps_uffd_wp`]).
fn clear_child_pmd_uffd_wp(
    st: &mut KState,
    k: crate::era::KernelVersion,
    (src, dst): (VmaId, VmaId),
    addr: VirtAddr,
) {
    if fork_keeps_uffd_wp(st, k, src, dst) {
        return;
    }
    let pgd = st.mm(st.vma(dst).mm).pgd;
    if let Some((t, i)) = st.pt.pmd_slot(pgd, addr)
        && let crate::pgtable::Upper::Leaf(leaf) = st.pt.upper(t, i)
        && leaf.uffd_wp()
    {
        st.pt.set_upper(t, i, crate::pgtable::Upper::Leaf(leaf.with_uffd_wp(false)));
    }
}

/// `needed` fresh pages for the copies fork must make (`folio_prealloc`).
async fn preallocate(cx: &Cx, needed: usize) -> Result<Vec<Pfn>, Errno> {
    let mut prealloc = Vec::with_capacity(needed);
    for _ in 0..needed {
        prealloc.push(
            crate::page_alloc::alloc_folio(cx, simcore::Order::BASE).await.ok_or(Errno::ENOMEM)?,
        );
    }
    Ok(prealloc)
}

/// One PTE table's share of a VMA being copied at fork, with what the copy needs to know.
struct PteRange {
    src_mm: MmId,
    dst_mm: MmId,
    dst: VmaId,
    src_table: PtId,
    dst_table: PtId,
    start: VirtAddr,
    end: VirtAddr,
    cow: bool,
    rule: CowReuse,
    in_lru_fault: bool,
    /// The child's entries keep their uffd-wp bits ([`fork_keeps_uffd_wp`]).
    keep_uffd_wp: bool,
}

/// Whether the child's copies of `src`'s entries (in `dst`) keep their uffd-wp bits: when the
/// child's VMA is registered for write-protection (`UFFD_FEATURE_EVENT_FORK`) from v5.16, when
/// the parent's is before (`era::fork_uffd_wp_follows_child`; `userfaultfd/wp.rs`).
fn fork_keeps_uffd_wp(st: &KState, k: crate::era::KernelVersion, src: VmaId, dst: VmaId) -> bool {
    let by = if crate::era::fork_uffd_wp_follows_child(k) { dst } else { src };
    st.userfaultfd_wp(by)
}

impl KState {
    /// `copy_pte_range` under both PTE locks: copies every entry of the range into the child's
    /// table, giving possibly pinned exclusive pages a copy from `prealloc` and freeing what is
    /// left of it. Returns the entries copied, the pages copied and whether a writable PTE of a
    /// COW mapping was write-protected.
    fn copy_pte_range(&mut self, r: &PteRange, prealloc: &mut Vec<Pfn>) -> (u64, u64, bool) {
        let (mut copied, mut page_copies, mut wrprotected) = (0u64, 0u64, false);
        let mut a = r.start;
        while a < r.end {
            let at = a;
            a = a + Bytes::PAGE;
            let idx = Level::Pte.index(at);
            let pte = self.pt.pte(r.src_table, idx);
            if pte.is_none() {
                continue;
            }
            copied += 1;
            if pte.is_marker() {
                // `copy_nonpresent_pte`: a guard marker is copied as it is (`copy_pte_marker`).
                self.pt.set_pte(r.dst_table, idx, pte);
                continue;
            }
            if pte.is_swap() {
                self.copy_swap_pte(r, idx, pte);
                continue;
            }
            let mut child_pte = pte.without(Pte::ACCESSED);
            if !r.keep_uffd_wp {
                child_pte = child_pte.with_uffd_wp(false);
            }
            if let Some(page) = vm_normal_page(pte) {
                let head = self.folios.head(page);
                if self.needs_cow_for_dma(r.src_mm, head, page, r.cow, r.rule) {
                    // `copy_present_page`: the child gets its own copy; the pinned page stays
                    // the parent's, writable and exclusive.
                    let new = prealloc.pop().expect("preallocated for every pinned page");
                    self.mem.copy(page.0, new.0);
                    let dst = r.dst;
                    crate::memory::map_new_anon(
                        self,
                        dst,
                        at,
                        r.dst_table,
                        new,
                        true,
                        r.in_lru_fault,
                    );
                    page_copies += 1;
                    continue;
                }
                self.share_page_with_child(r.dst_mm, head, page);
            }
            if r.cow && pte.write() {
                self.pt.set_pte(r.src_table, idx, pte.wrprotect());
                child_pte = child_pte.wrprotect();
                wrprotected = true;
            }
            if self.vma(r.dst).is_shared() {
                child_pte = child_pte.without(Pte::DIRTY);
            }
            self.pt.set_pte(r.dst_table, idx, child_pte);
        }
        for unused in prealloc.drain(..) {
            self.put_folio_extra(unused);
        }
        (copied, page_copies, wrprotected)
    }

    /// A swap entry copied at fork: one more swap reference; under `anon_exclusive` both sides
    /// lose the entry's exclusive mark.
    fn copy_swap_pte(&mut self, r: &PteRange, idx: usize, pte: Pte) {
        let (_, slot) = pte.swap_entry();
        self.swap_duplicate(slot);
        let shared = Pte::swap(0, slot, false, pte.soft_dirty()).with_uffd_wp(pte.uffd_wp());
        if r.rule.tracks_anon_exclusive() && pte.swap_exclusive() {
            self.pt.set_pte(r.src_table, idx, shared);
        }
        self.pt.set_pte(r.dst_table, idx, shared.with_uffd_wp(pte.uffd_wp() && r.keep_uffd_wp));
        self.mm_mut(r.dst_mm).add_rss(MmCounter::SwapEnts, 1);
    }

    /// The child maps the parent's page too: a reference, a mapcount, its RSS, and an anonymous
    /// page is no longer exclusive.
    fn share_page_with_child(&mut self, dst_mm: MmId, head: Pfn, page: Pfn) {
        self.folios.get(head, 1);
        if self.folios.is_anon(head) {
            self.folios.clear_flag(page, pg::ANON_EXCLUSIVE);
        }
        self.rmap_add_pte(page);
        let counter = mm_counter(&self.folios, head);
        self.mm_mut(dst_mm).add_rss(counter, 1);
    }
}

impl KState {
    /// `folio_needs_cow_for_dma`: a possibly pinned exclusive anonymous page in a COW mapping
    /// of an mm that has pinned pages is copied for the child at fork (v5.9+).
    fn needs_cow_for_dma(&self, mm: MmId, head: Pfn, page: Pfn, cow: bool, rule: CowReuse) -> bool {
        cow && crate::cow::fork_copies_pinned(rule)
            && self.mm(mm).flags & crate::mm_struct::MMF_HAS_PINNED != 0
            && self.folios.is_anon(head)
            && self.folios.maybe_dma_pinned(head)
            && (!rule.tracks_anon_exclusive() || self.folios.test(page, pg::ANON_EXCLUSIVE))
    }

    /// How many pages of `[start, end)` in `table` fork must copy for the child.
    fn pinned_pages_to_copy(
        &self,
        mm: MmId,
        table: PtId,
        start: VirtAddr,
        end: VirtAddr,
        cow: bool,
        rule: CowReuse,
    ) -> usize {
        let mut n = 0;
        let mut a = start;
        while a < end {
            let pte = self.pt.pte(table, Level::Pte.index(a));
            if let Some(page) = vm_normal_page(pte) {
                n += usize::from(self.needs_cow_for_dma(
                    mm,
                    self.folios.head(page),
                    page,
                    cow,
                    rule,
                ));
            }
            a = a + Bytes::PAGE;
        }
        n
    }
}

/// `exit_mmap`: unmaps every VMA, frees the page tables and the mm.
pub(crate) async fn exit_mmap(cx: &Cx, mm: MmId) {
    let lock = cx.st().mm(mm).mmap_lock;
    let guard = lock.write(cx).await;
    let vmas: Vec<VmaId> = cx.st().mm(mm).vmas.values().copied().collect();
    for &v in &vmas {
        cx.st().hugetlb_vma_dying(v);
        let (s, e) = cx.st().vma_range(v);
        zap_vma_range(cx, mm, v, s, e, ZapDetails::UNMAP).await;
    }
    for &v in &vmas {
        cx.st().vma_detach(v);
    }
    cx.st().mlock_drain();
    cx.st().free_pgtables(mm, VirtAddr(0), VirtAddr(crate::pgtable::TASK_SIZE));
    for v in vmas {
        let _g = crate::mmap::file_rmap_write(cx, v).await;
        cx.st().vma_free(v);
    }
    drop(guard);
    let deny = crate::fs::exec::exec_denies_write(cx);
    let mut st = cx.st();
    if let Some(exe) = st.mm(mm).exe_file {
        let inode = st.file(exe).inode;
        if deny {
            st.inodes[inode].allow_write_access();
        }
        st.file_put(exe);
    }
    let m = st.mm(mm);
    assert_eq!(m.rss_total() + m.rss(MmCounter::SwapEnts), 0, "mm {mm} dies with pages");
    let pgd = m.pgd;
    let frame = st.pt.free(pgd);
    st.free_pgtable_frame(frame);
    assert_eq!(st.mm(mm).nr_pgtables_total(), 0, "mm {mm} dies with page tables");
    st.mms[mm] = None;
}
