//! Locking memory (`mm/mlock.c`, read in v6.8 and checked against v4.4 and v5.17 for the eras
//! below): `mlock`, `mlock2`, `munlock`, `mlockall`, `munlockall`, and the mlocked state of
//! pages.
//!
//! `mlock(addr, len)` rounds the range out to pages and needs it wholly mapped (ENOMEM, with
//! the VMAs before the first hole already changed and nothing populated). Each VMA
//! in it gets `VM_LOCKED` (`mlock_fixup`, splitting at the edges) unless it is `VM_SPECIAL`
//! (`VM_IO`, `VM_DONTEXPAND`, `VM_PFNMAP`, `VM_MIXEDMAP`), hugetlb or DAX, which are left as they
//! are and not counted. Then the range is populated (`__mm_populate`: writable private mappings
//! with write faults, so COW is broken up front). `mlock2(MLOCK_ONFAULT)` adds `VM_LOCKONFAULT`
//! and does not populate: pages are locked as they are faulted. `munlock` clears both flags.
//! `mlockall(MCL_CURRENT)` locks every VMA, `MCL_FUTURE` puts the flags in `mm->def_flags` so
//! later mappings are locked (and populated) at `mmap`, `MCL_ONFAULT` makes either on-fault;
//! flags other than these, no flag, or `MCL_ONFAULT` alone are EINVAL. `munlockall` clears the
//! flags of every VMA and of `def_flags`. `mmap(MAP_LOCKED)` is a locked mapping, populated.
//! `VmLck` (status) is the size of the `VM_LOCKED` VMAs (`mm->locked_vm`, computed here rather
//! than kept); smaps' `Locked` is their Pss.
//!
//! Eras: `mlock2`, `MLOCK_ONFAULT`, `MCL_ONFAULT` and `VM_LOCKONFAULT` came with "mm: mlock: add
//! new system call mlock2" and its series (a8ca5d0ecbdd, v4.4; ids of the series not
//! verified): before v4.4 `mlock2` is ENOSYS and `MCL_ONFAULT` EINVAL.
//!
//! Pages: a page mapped by a `VM_LOCKED` VMA is mlocked (`PG_mlocked`): it leaves the evictable
//! LRU lists for the unevictable one, counted in `nr_mlock` (meminfo `Mlocked`) and
//! `unevictable_pgs_mlocked`; reclaim never scans it. From v5.18 ("mm/munlock: rmap call
//! mlock_vma_page() munlock_vma_page()", Hugh Dickins' series, ids not verified) the rmap calls
//! keep a per-folio `mlock_count` and a page is munlocked when its last locked mapping goes
//! (`unevictable_pgs_munlocked`); a page freed while mlocked counts `unevictable_pgs_cleared`.
//! A large folio is mlocked only while a PMD maps it (a PTE-mapped THP stays evictable, v5.18+).
//!
//! Approximations: the v5.18+ rule in every era. Before v5.18 `munlock` walked rmap
//! (`try_to_munlock`) to keep pages another locked VMA maps, which gives the same state, but a
//! page that lost a locked mapping while still mapped elsewhere stayed mlocked until its last
//! unmapping (`clear_page_mlock` in `page_remove_rmap`); here it is munlocked at once. The
//! `mlock_count` is not stored: whether a page is still mapped by a locked VMA is asked of rmap
//! when one of its mappings goes (`mlock_fbatch` holds those folios until the operation's end,
//! as the kernel's per-CPU `mlock_fbatch` does until it drains). `PG_mlocked` and
//! `PG_unevictable` are one flag (nothing else makes a page unevictable in the model: no
//! `SHM_LOCK`, no ramfs). Processes are privileged (`CAP_IPC_LOCK`): `RLIMIT_MEMLOCK` is not
//! checked. `unevictable_pgs_culled`, `_scanned`, `_rescued` and `_stranded` are not kept.
//! `mremap` growing a locked VMA does not populate the new part as the kernel's does: its pages
//! are mlocked as they are faulted. VMAs that munlock split merge back (`vma_merge_range`),
//! as after mprotect and `madvise`.

use crate::errno::Errno;
use crate::folio::pg;
use crate::kernel::{Cx, KState};
use crate::memory::vm_normal_page;
use crate::pgtable::Level;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use simcore::{Bytes, Pfn, VirtAddr};

/// `mlock2` flags.
pub mod mlock_flags {
    pub const ONFAULT: u32 = 0x01;
}

/// `mlockall` flags.
pub mod mcl {
    pub const CURRENT: u32 = 1;
    pub const FUTURE: u32 = 2;
    pub const ONFAULT: u32 = 4;
}

/// `VM_LOCKED_MASK`.
const LOCKED_MASK: u64 = VmFlags::LOCKED | VmFlags::LOCKONFAULT;

impl KState {
    /// Whether `mlock_fixup` leaves `v` alone: special, hugetlb or DAX.
    fn mlock_skips(&self, v: VmaId) -> bool {
        let vma = self.vma(v);
        vma.flags.has(VmFlags::SPECIAL) || vma.vm_ops.mlock_skips()
    }

    /// `v`'s flags with `flags` as its lock flags, if that changes them and mlock does not leave
    /// `v` alone (`mlock_fixup`'s early return, taken before any split).
    fn mlock_new_flags(&self, v: VmaId, flags: u64) -> Option<u64> {
        let old = self.vma(v).flags.0;
        let new = (old & !LOCKED_MASK) | flags;
        (new != old && !self.mlock_skips(v)).then_some(new)
    }

    /// The flags a new mapping keeps of a requested `VM_LOCKED` (`mmap_region`): none on the
    /// VMAs mlock leaves alone.
    pub(crate) fn mmap_locked_fixup(&mut self, v: VmaId) {
        if self.vma(v).flags.has(VmFlags::LOCKED) && self.mlock_skips(v) {
            self.vma_mut(v).flags.0 &= !LOCKED_MASK;
        }
    }

    /// `VmLck`: the pages of `mm`'s `VM_LOCKED` VMAs.
    pub fn locked_vm(&self, mm: MmId) -> u64 {
        let m = self.mm(mm);
        let locked = m.vmas.values().map(|&v| self.vma(v)).filter(|v| v.flags.has(VmFlags::LOCKED));
        locked.map(|v| v.len().as_u64() >> 12).sum()
    }

    /// The folio mapped at `addr` of `vma` that mlock may lock: a normal small page, or the
    /// head of a folio a PMD maps.
    fn mlockable_at(&self, vma: VmaId, addr: VirtAddr) -> Option<Pfn> {
        let pgd = self.mm(self.vma(vma).mm).pgd;
        let (pte, level) = self.pt.translate(pgd, addr)?;
        if !pte.is_present() {
            return None;
        }
        let page = vm_normal_page(pte)?;
        let head = self.folios.head(page);
        let whole = self.folios.large(head).is_none() || (level == Level::Pmd && head == page);
        whole.then_some(head)
    }

    /// Whether a `VM_LOCKED` VMA still maps the folio `head` (what its `mlock_count` counts).
    fn mapped_locked(&self, head: Pfn) -> bool {
        self.rmap_walk(head).into_iter().any(|(_, v, addr)| {
            self.vma(v).flags.has(VmFlags::LOCKED) && self.mlockable_at(v, addr) == Some(head)
        })
    }

    /// `mlock_folio`: `head` leaves the evictable lists for the unevictable one.
    fn mlock_folio(&mut self, head: Pfn) {
        if !self.folios.test(head, pg::UNEVICTABLE) {
            self.folio_move_mlocked(head, true);
        }
    }

    /// `munlock_folio`: back to the evictable lists once no locked VMA maps `head`.
    fn munlock_folio(&mut self, head: Pfn) {
        if self.folios.test(head, pg::UNEVICTABLE) && !self.mapped_locked(head) {
            self.folio_move_mlocked(head, false);
        }
    }

    /// Sets or clears `head`'s mlocked state, moving it between the LRU lists if it is on one,
    /// and counts the change.
    fn folio_move_mlocked(&mut self, head: Pfn, mlocked: bool) {
        let on_lru = self.folios.test(head, pg::LRU);
        if on_lru {
            self.lruvec_del_folio(head, false);
        }
        if mlocked {
            self.folios.set(head, pg::UNEVICTABLE);
        } else {
            self.folios.clear_flag(head, pg::UNEVICTABLE);
        }
        if on_lru {
            self.lruvec_add_folio(head, false);
        }
        let nr = self.folios.order(head).pages();
        if mlocked {
            self.vmstat.add(VmStat::NrMlock, nr);
            self.vmstat.add(VmStat::UnevictablePgsMlocked, nr);
        } else {
            self.vmstat.sub(VmStat::NrMlock, nr);
            self.vmstat.add(VmStat::UnevictablePgsMunlocked, nr);
        }
    }

    /// A mapping of the mlocked folio `head` went: ask again at the operation's end.
    pub(crate) fn mlock_fbatch_add(&mut self, head: Pfn) {
        if self.folios.test(head, pg::UNEVICTABLE) && !self.mlock_fbatch.contains(&head) {
            self.mlock_fbatch.push(head);
        }
    }

    /// `mlock_drain_local`: munlocks the batched folios that no locked VMA maps any more (a
    /// folio freed meanwhile was cleared when it was freed).
    pub(crate) fn mlock_drain(&mut self) {
        for head in std::mem::take(&mut self.mlock_fbatch) {
            if self.folios.refcount(head) > 0 && self.folios.head(head) == head {
                self.munlock_folio(head);
            }
        }
    }

    /// A folio freed while mlocked (`__folio_put`'s `PG_mlocked` check).
    pub(crate) fn mlock_clear_on_free(&mut self, head: Pfn) {
        if self.folios.test(head, pg::UNEVICTABLE) {
            let nr = self.folios.order(head).pages();
            self.vmstat.sub(VmStat::NrMlock, nr);
            self.vmstat.add(VmStat::UnevictablePgsCleared, nr);
        }
    }

    /// After a fault at `addr` of `vma`: a page a locked VMA now maps is mlocked
    /// (`folio_add_*_rmap` → `mlock_vma_folio`), and a page the fault replaced is asked again.
    pub(crate) fn mlock_after_fault(&mut self, vma: VmaId, addr: VirtAddr) {
        if self.vma(vma).flags.has(VmFlags::LOCKED)
            && let Some(head) = self.mlockable_at(vma, addr.align_down(Bytes::PAGE))
        {
            self.mlock_folio(head);
        }
        self.mlock_drain();
    }

    /// `mlock_vma_pages_range`: after `v`'s flags changed, its present pages follow them.
    fn mlock_vma_pages_range(&mut self, v: VmaId) {
        let (start, end, locked) = {
            let vma = self.vma(v);
            (vma.start, vma.end, vma.flags.has(VmFlags::LOCKED))
        };
        let pgd = self.mm(self.vma(v).mm).pgd;
        let mut addr = start;
        while addr < end {
            if self.pt.translate(pgd, addr).is_none() {
                addr = self.pt.skip_empty(pgd, addr).min(end);
                continue;
            }
            if let Some(head) = self.mlockable_at(v, addr) {
                if locked { self.mlock_folio(head) } else { self.munlock_folio(head) }
            }
            addr = addr + Bytes::PAGE;
        }
    }
}

/// `apply_vma_lock_flags` under `mmap_lock` for write: every VMA of `[start, end)` gets `flags`
/// in place of its lock flags (`mlock_fixup`), in address order up to the first hole, which
/// makes the call ENOMEM with the VMAs before it changed (a hole at `start` changes nothing), as
/// the kernel's walk does in every modelled era. A VMA that keeps its flags, or that mlock
/// leaves alone (a hugetlb VMA, whose split inside a huge page the kernel never makes here), is
/// not split.
async fn apply_vma_lock_flags(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    flags: u64,
) -> Result<(), Errno> {
    let (vmas, hole) = crate::mmap::vmas_before_hole(&cx.st(), mm, start, end);
    for v in vmas {
        let (s, e, changes) = {
            let st = cx.st();
            let vma = st.vma(v);
            (vma.start.max(start), vma.end.min(end), st.mlock_new_flags(v, flags).is_some())
        };
        if !changes {
            continue;
        }
        crate::zap::split_huge_pmd_edges(cx, mm, s, e).await;
        let parts = cx.st().vma_split_range(mm, s, e);
        for p in parts {
            mlock_fixup(&mut cx.st(), p, flags);
        }
    }
    crate::mmap::vma_merge_range(cx, mm, start, end).await;
    if hole { Err(Errno::ENOMEM) } else { Ok(()) }
}

/// `mlock_fixup`: `v`'s lock flags become `flags`, and its present pages follow.
fn mlock_fixup(st: &mut KState, v: VmaId, flags: u64) {
    if let Some(new) = st.mlock_new_flags(v, flags) {
        st.vma_mut(v).flags.0 = new;
        st.mlock_vma_pages_range(v);
    }
}

/// `mlock(2)` (`flags` 0) and `mlock2(2)`: ENOSYS for `mlock2` before v4.4, EINVAL for an
/// unknown flag.
pub(crate) async fn do_mlock(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: Bytes,
    flags: Option<u32>,
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    if flags.is_some() && !crate::era::has_mlock2(cx.kernel().version) {
        return Err(Errno::ENOSYS);
    }
    let flags = flags.unwrap_or(0);
    if flags & !mlock_flags::ONFAULT != 0 {
        return Err(Errno::EINVAL);
    }
    let Some((start, end)) = page_range(addr, len)? else { return Ok(()) };
    let onfault = flags & mlock_flags::ONFAULT != 0;
    let vm = VmFlags::LOCKED | if onfault { VmFlags::LOCKONFAULT } else { 0 };
    let lock = cx.st().mm(mm).mmap_lock;
    {
        let _g = lock.write(cx).await;
        cx.charge(Cost::VmaUpdate).await;
        apply_vma_lock_flags(cx, mm, start, end, vm).await?;
    }
    if onfault {
        return Ok(());
    }
    // `__mm_populate` without ignoring errors; `__mlock_posix_error_return` turns its EFAULT
    // into ENOMEM and its ENOMEM into EAGAIN. The range stays locked either way.
    let populated = crate::gup::mm_populate(cx, mm, (start, end), false).await;
    populated.map_err(|e| if e == Errno::ENOMEM { Errno::EAGAIN } else { Errno::ENOMEM })
}

/// `munlock(2)`.
pub(crate) async fn do_munlock(cx: &Cx, mm: MmId, addr: VirtAddr, len: Bytes) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    let Some((start, end)) = page_range(addr, len)? else { return Ok(()) };
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    cx.charge(Cost::VmaUpdate).await;
    apply_vma_lock_flags(cx, mm, start, end, 0).await
}

/// mlock's range: `addr` rounded down and `addr + len` up to pages; `None` when empty, ENOMEM
/// when it wraps.
fn page_range(addr: VirtAddr, len: Bytes) -> Result<Option<(VirtAddr, VirtAddr)>, Errno> {
    let start = addr.align_down(Bytes::PAGE);
    let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
    let end = end.align_up(Bytes::PAGE).ok_or(Errno::ENOMEM)?;
    Ok((end > start).then_some((start, end)))
}

/// `mlockall(2)`: `MCL_FUTURE` sets `def_flags`, `MCL_CURRENT` locks every VMA (populated unless
/// on-fault).
pub(crate) async fn do_mlockall(cx: &Cx, mm: MmId, flags: u32) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    let known = mcl::CURRENT | mcl::FUTURE | mcl::ONFAULT;
    let onfault_ok = crate::era::has_mlock2(cx.kernel().version) || flags & mcl::ONFAULT == 0;
    if flags == 0 || flags & !known != 0 || flags == mcl::ONFAULT || !onfault_ok {
        return Err(Errno::EINVAL);
    }
    let vm = VmFlags::LOCKED | if flags & mcl::ONFAULT != 0 { VmFlags::LOCKONFAULT } else { 0 };
    apply_mlockall_flags(cx, mm, flags, vm).await;
    if flags & mcl::CURRENT != 0 && flags & mcl::ONFAULT == 0 {
        crate::gup::populate(cx, mm, VirtAddr(0), VirtAddr(crate::pgtable::TASK_SIZE)).await;
    }
    Ok(())
}

/// `munlockall(2)`.
pub(crate) async fn do_munlockall(cx: &Cx, mm: MmId) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    apply_mlockall_flags(cx, mm, mcl::CURRENT, 0).await;
    Ok(())
}

/// `apply_mlockall_flags`: `def_flags` follow `MCL_FUTURE`; with `MCL_CURRENT` every VMA's lock
/// flags become `vm`.
async fn apply_mlockall_flags(cx: &Cx, mm: MmId, flags: u32, vm: u64) {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    cx.charge(Cost::VmaUpdate).await;
    {
        let mut st = cx.st();
        let m = st.mm_mut(mm);
        m.def_flags &= !LOCKED_MASK;
        if flags & mcl::FUTURE != 0 {
            m.def_flags |= vm;
        }
    }
    if flags & mcl::CURRENT == 0 {
        return;
    }
    let vmas: Vec<VmaId> = cx.st().mm(mm).vmas.values().copied().collect();
    for &v in &vmas {
        mlock_fixup(&mut cx.st(), v, vm);
    }
    crate::mmap::vma_merge_range(cx, mm, VirtAddr(0), VirtAddr(crate::pgtable::TASK_SIZE)).await;
}
