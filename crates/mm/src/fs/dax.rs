//! DAX: file mappings of persistent memory (`fs/dax.c`; `mm/memory.c` `insert_pfn`,
//! `vmf_insert_mixed`, `vmf_insert_mixed_mkwrite`, `wp_pfn_shared`; `mm/huge_memory.c`
//! `vmf_insert_pfn_pmd`, `mm_get_huge_zero_page`; `mm/truncate.c`
//! `invalidate_inode_pages2_range`; Linux v6.8, and the v4.13 hole path that the `dax_hole`
//! switch selects).
//!
//! A DAX mapping has no page cache: its `address_space` index holds *DAX entries* instead of
//! folios (a block's pfn, a zero-page entry, or an empty placeholder; PTE- or PMD-sized), each
//! with a lock bit whose waiters sleep on a hashed wait table, as `grab_mapping_entry` and
//! `dax_unlock_entry` do. A fault locks the entry of its index (waiting while another task holds
//! it), asks the file system for the block (`iomap_begin`, which allocates for a write), records
//! what it maps in the entry (`dax_insert_entry`) and installs a special PTE or PMD for the pfn:
//! no folio, no rmap, no RSS (DAX pages count in Rss only from v6.15, which is not modelled).
//!
//! Holes, by the `dax_hole` switch:
//! - `pagecache_zero` (up to v4.13, `dax_load_hole` with `find_or_create_page`): a read of a
//!   hole allocates a zeroed page-cache page, which replaces the placeholder in the index and is
//!   mapped read-only like any file page (it counts in Rss, Cached and Mapped). A write fault
//!   over it allocates the block, unmaps the page from every mapping, deletes it from the cache
//!   and maps the block read-only; the write faults again and `dax_pfn_mkwrite` makes the PTE
//!   writable (every shared write to a new PTE took two faults in that era).
//! - `zero_page` (v4.14, the seed): a read of a hole records a zero entry and maps the shared
//!   zero page read-only; nothing is allocated. A write allocates the block, unmaps the zero
//!   page from every process mapping the index (`unmap_mapping_pages` in `dax_insert_entry`) and
//!   maps the block writable and dirty in the same fault (`vmf_insert_mixed_mkwrite`); a write
//!   to a read-only block PTE runs the whole fault again (`pfn_mkwrite` is `ext4_dax_fault`).
//!
//! PMD faults (`dax_iomap_pmd_fault`, tried whenever the PMD is empty, whatever the THP
//! setting): a read of a 2 MiB hole maps the huge zero page (allocated on first use, counted in
//! `thp_zero_page_alloc`), a written, aligned 2 MiB extent is mapped by one PMD, and a shared
//! write over a hole asks for a 2 MiB extent. Anything else falls back to PTEs
//! (`thp_fault_fallback`): the page offset's colour differs from the address's, a private write,
//! a PMD crossing the VMA or the end of file, PTE entries or hole pages in the range. A PTE
//! fault inside a PMD zero or empty entry downgrades it, unmapping the huge zero page from every
//! mapping of the range first; inside a PMD block entry it maps its 4 KiB piece.
//!
//! `MAP_SYNC` (v4.15, through `MAP_SHARED_VALIDATE`): a DAX file's mapping takes `VM_SYNC`
//! (smaps `sf`); ext4 and XFS refuse it on a file that is not DAX (EOPNOTSUPP, `mmap.rs`).
//! Approximation: the metadata commit a synchronous write fault makes before it maps a newly
//! allocated block (`dax_finish_sync_fault`'s `vfs_fsync_range`) is not charged, so such a
//! fault costs what it costs without `MAP_SYNC`; the model has no crash for the commit to
//! protect against.
//!
//! `write()` over newly allocated blocks invalidates that index range (waiting for locked
//! entries, deleting the others and any hole pages) and, from v4.12, unmaps the range from every
//! mapping so that nobody keeps reading zeros (`mm: fix data corruption due to stale mmap
//! reads`, cd656375f946). v4.10 and v4.11 called `iomap_begin` before locking the entry, so a
//! fault could map a hole that a concurrent `write()` had just filled (fixed in v4.12 by
//! 13e451fdc1af and 876f29460cbd); the kernel version selects that order.
//!
//! These are DAX's operations (`ext4_dax_vm_ops`; `VmOps::Dax` in `vm_ops.rs`): `dax_pte_fault`
//! its `fault`, `dax_huge_fault` its `huge_fault`, `dax_wp_shared` its `page_mkwrite`; each
//! takes the fault's `Vmf` (`memory.rs`).
//!
//! Costs are basic operations: index lookups and insertions (`PageCacheLookup`,
//! `PageCacheInsert`), PTE installs, and for the v4.13 hole page an allocation, clearing 4 KiB,
//! a page-cache insertion and an LRU add; block allocation and device reads and writes use the
//! profile's file system and pmem costs. Time spent inside `dax_load_hole` is counted in the
//! `dax_load_hole` and `dax_load_hole_ns` events (what the seed measured with ftrace).
//!
//! VMA flags (`FsType::mmap_vm_flags`): the DAX `->mmap` sets `VM_HUGEPAGE` and, up to v4.18,
//! `VM_MIXEDMAP` (`ext4_file_mmap` and `xfs_file_mmap` in v4.14; removed by e1fb4a086495, "dax:
//! remove VM_MIXEDMAP for fsdax and device dax", v4.19, after 785a3fab4adb "mm, dax: introduce
//! pfn_t_special()" made DAX PTEs special). The flag is shown in smaps and `vma.VM_MIXEDMAP`;
//! its other effects are not modelled, an approximation for v4.0-v4.18: there `vma_needs_copy`
//! copied a `VM_MIXEDMAP` VMA's page tables at fork (the model, as from v4.19, lets the child
//! fault them in again), `vm_normal_page` returned the devmap page of a non-special PTE (the
//! model's DAX PTEs are special in every era, and GUP of DAX is refused), and `VM_SPECIAL`
//! kept such VMAs from merging and from `mlock` population (the model has no `VM_SPECIAL`).
//!
//! Approximations: no DIRTY/TOWRITE tags and no `dax_writeback_mapping_range` (invalidation
//! deletes every unlocked entry, where the kernel keeps dirty ones); an unlock wakes every waiter
//! of its hashed queue and each re-checks (the kernel wakes one exclusive waiter); kernels before
//! v4.7 (no entry locks) run the v4.7 scheme; `MAP_SYNC`, shared extents (`IOMAP_F_SHARED`), PUD
//! faults and GUP of DAX mappings (refused with EFAULT) are not modelled.

use crate::era::DaxHole;
use crate::errno::{Errno, VmFault};
use crate::filemap::{folio_lock, folio_unlock};
use crate::folio::{Mapping, pg};
use crate::fs::daxfs::{Iomap, PMD_PAGES, iomap_begin};
use crate::huge_memory::huge_pmd_set_accessed;
use crate::kernel::{Cx, KState, Kernel};
use crate::memory::{
    FaultKind, FaultOutcome, Vmf, anon_vma_prepare, fault_alloc, get_huge_zero_page,
    install_new_anon, outcome_of, pmd_install_lock, pte_bits, set_pte_range, vm_normal_page,
};
use crate::page_alloc::alloc_folio;
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::fs::{DaxEntry, EntryKind};
use crate::types::ids::InodeId;
use crate::types::ids::PtId;
use crate::vmstat::{MmEvent, VmStat};
use crate::zap::{split_huge_pmd, unmap_mapping_range};
use simcore::{Bytes, Order, Pfn};

impl DaxEntry {
    pub fn pages(self) -> u64 {
        if self.pmd { PMD_PAGES } else { 1 }
    }

    /// The entry as one number (for state fingerprints).
    pub(crate) fn code(self) -> u64 {
        let kind = match self.kind {
            EntryKind::Empty => 1,
            EntryKind::Zero => 2,
            EntryKind::Block(pfn) => 3 | pfn.0 << 2,
        };
        kind << 2 | u64::from(self.pmd) << 1 | u64::from(self.locked)
    }
}

/// What a fault holds locked while it works on an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Locked {
    /// The DAX entry that starts at this index.
    Entry(u64),
    /// A hole's page-cache page (`pagecache_zero`), locked, with the fault's reference.
    HolePage(Pfn),
}

/// Which entry `grab_mapping_entry` wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// A PTE-sized entry, inserting an empty one if there is none.
    Pte,
    /// A PMD-sized entry, or nothing if smaller entries are in the way.
    Pmd,
    /// The existing block entry only (`dax_pfn_mkwrite`).
    Existing,
}

/// What one look at the index under the xarray lock found.
enum Found {
    Wait(engine::WaitQueue),
    Page(Pfn),
    /// A PMD zero or empty entry, now locked, to split for a PTE fault.
    Downgrade(u64, bool),
    Locked(u64),
    /// The wanted entry cannot be had (`VM_FAULT_FALLBACK` for a PMD, nothing for `Existing`).
    Refused,
}

impl KState {
    /// The DAX entry covering page `index` of `inode`: `(first index, entry)`.
    pub fn dax_entry(&self, inode: InodeId, index: u64) -> Option<(u64, DaxEntry)> {
        let (&start, &e) = self.dax.inode(inode).entries.range(..=index).next_back()?;
        (index < start + e.pages()).then_some((start, e))
    }

    fn dax_entry_mut(&mut self, inode: InodeId, start: u64) -> &mut DaxEntry {
        self.dax.inode_mut(inode).entries.get_mut(&start).expect("a locked entry stays")
    }

    /// Whether `pfn` is the zero page or a frame of the huge zero page.
    pub fn is_zero_pfn(&self, pfn: Pfn) -> bool {
        pfn == self.zero_pfn || self.huge_zero_pfn.is_some_and(|h| pfn >= h && pfn - h < PMD_PAGES)
    }

    /// `get_huge_zero_page`: the huge zero page, allocated (and counted) on first use.
    pub(crate) fn get_huge_zero_page(&mut self) -> Option<Pfn> {
        if let Some(h) = self.huge_zero_pfn {
            return Some(h);
        }
        let h = self.buddy.alloc(Order::PMD)?;
        self.folios.grow(self.buddy.high_water());
        self.folios.set(h, pg::RESERVED | pg::UPTODATE);
        self.vmstat.sub(VmStat::NrFreePages, PMD_PAGES);
        self.vmstat.inc(VmStat::ThpZeroPageAlloc);
        self.huge_zero_pfn = Some(h);
        Some(h)
    }

    /// One look at the entry for `index` (`get_unlocked_entry` and the locking part of
    /// `grab_mapping_entry`), with the xarray lock held.
    fn dax_grab_once(&mut self, k: &Kernel, inode: InodeId, index: u64, want: Want) -> Found {
        let lo = if want == Want::Pmd { index & !(PMD_PAGES - 1) } else { index };
        let hi = if want == Want::Pmd { lo + PMD_PAGES } else { index + 1 };
        if let Some(head) = (lo..hi).find_map(|i| self.page_cache_get(inode, i)) {
            if want != Want::Pte {
                return Found::Refused;
            }
            self.folios.get_extra(head);
            return Found::Page(head);
        }
        let entries = &self.dax.inode(inode).entries;
        let found = match want {
            Want::Pmd => entries.range(..hi).next_back().filter(|(s, e)| **s + e.pages() > lo),
            _ => entries.range(..=index).next_back().filter(|(s, e)| **s + e.pages() > index),
        }
        .map(|(&s, &e)| (s, e));
        match found {
            Some((_, e)) if want == Want::Pmd && !e.pmd => Found::Refused,
            Some((s, e)) if e.locked => Found::Wait(k.dax_waitqueue(inode, s)),
            Some((_, e)) if want == Want::Existing && !matches!(e.kind, EntryKind::Block(_)) => {
                Found::Refused
            }
            Some((s, e))
                if want == Want::Pte && e.pmd && !matches!(e.kind, EntryKind::Block(_)) =>
            {
                self.dax_entry_mut(inode, s).locked = true;
                Found::Downgrade(s, e.kind == EntryKind::Zero)
            }
            Some((s, _)) => {
                self.dax_entry_mut(inode, s).locked = true;
                Found::Locked(s)
            }
            None if want == Want::Existing => Found::Refused,
            None => {
                let entry =
                    DaxEntry { kind: EntryKind::Empty, pmd: want == Want::Pmd, locked: true };
                self.dax.inode_mut(inode).entries.insert(lo, entry);
                Found::Locked(lo)
            }
        }
    }
}

/// `grab_mapping_entry`: locks the entry for `index` — inserting an empty one if there is none,
/// waiting while another task holds it, splitting a PMD zero or empty entry for a PTE fault —
/// or locks the hole page a `pagecache_zero` read put there. `None` when a PMD entry cannot be
/// had (`VM_FAULT_FALLBACK`), or when `Existing` finds no block entry.
async fn grab_mapping_entry(cx: &Cx, inode: InodeId, index: u64, want: Want) -> Option<Locked> {
    let xa_lock = cx.st().inodes[inode].mapping.xa_lock;
    loop {
        let xa = xa_lock.lock(cx).await;
        cx.charge(Cost::PageCacheLookup).await;
        let found = cx.st().dax_grab_once(cx.kernel(), inode, index, want);
        drop(xa);
        match found {
            Found::Locked(start) => return Some(Locked::Entry(start)),
            Found::Refused => return None,
            Found::Wait(queue) => queue.wait(cx).await,
            Found::Page(head) => {
                folio_lock(cx, head).await;
                if cx.st().folios.mapping(head) == Mapping::File(inode) {
                    return Some(Locked::HolePage(head));
                }
                folio_unlock(cx, head);
                cx.st().put_folio_extra(head);
            }
            Found::Downgrade(start, zero) => {
                if zero {
                    unmap_mapping_range(cx, inode, start, Some(start + PMD_PAGES), false).await;
                }
                cx.st().dax.inode_mut(inode).entries.remove(&start);
                cx.kernel().dax_waitqueue(inode, start).wake_up_all(cx);
            }
        }
    }
}

/// `dax_unlock_entry` (or `unlock_page` and `put_page` of a hole page).
fn dax_unlock(cx: &Cx, inode: InodeId, locked: Locked) {
    match locked {
        Locked::Entry(start) => {
            cx.st().dax_entry_mut(inode, start).locked = false;
            cx.kernel().dax_waitqueue(inode, start).wake_up_all(cx);
        }
        Locked::HolePage(head) => {
            folio_unlock(cx, head);
            cx.st().put_folio_extra(head);
        }
    }
}

/// `dax_insert_entry`: the locked entry now maps `kind`. Replacing a zero entry (or a hole page)
/// with a block first unmaps the zero page (or the hole page) from every mapping of the range;
/// a PTE insert inside a PMD block entry leaves the entry alone. Returns what stays locked.
async fn dax_insert_entry(
    cx: &Cx,
    inode: InodeId,
    index: u64,
    locked: Locked,
    kind: EntryKind,
    pmd: bool,
) -> Locked {
    match locked {
        Locked::HolePage(head) => {
            // The v4.13 hole fill: the page is locked, so nobody maps it again meanwhile.
            unmap_mapping_range(cx, inode, index, Some(index + 1), false).await;
            cx.charge(Cost::PageCacheInsert).await;
            {
                let mut st = cx.st();
                st.page_cache_delete(inode, head);
                let entry = DaxEntry { kind, pmd: false, locked: true };
                st.dax.inode_mut(inode).entries.insert(index, entry);
            }
            folio_unlock(cx, head);
            cx.st().put_folio_extra(head);
            Locked::Entry(index)
        }
        Locked::Entry(start) => {
            let old = *cx.st().dax_entry_mut(inode, start);
            if old.kind == EntryKind::Zero && kind != EntryKind::Zero {
                let (first, end) =
                    if old.pmd { (start, start + PMD_PAGES) } else { (index, index + 1) };
                unmap_mapping_range(cx, inode, first, Some(end), false).await;
            }
            cx.charge(Cost::PageCacheInsert).await;
            let mut st = cx.st();
            let e = st.dax_entry_mut(inode, start);
            if matches!(e.kind, EntryKind::Zero | EntryKind::Empty) {
                debug_assert_eq!(e.pmd, pmd, "an entry changes kind, never size");
                e.kind = kind;
            }
            Locked::Entry(start)
        }
    }
}

/// `insert_pfn` under the PTE lock: maps `pfn` if the PTE is empty (writable and dirty with
/// `mkwrite`), or makes an existing mapping of the same pfn writable (`vmf_insert_mixed_mkwrite`).
async fn insert_pfn(vmf: &Vmf<'_>, pfn: Pfn, mkwrite: bool) {
    let cx = vmf.cx;
    let (table, idx) = (vmf.table(), vmf.pte_index());
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let mut st = cx.st();
    let flags = st.vma(vmf.vma).flags;
    let cur = st.pt.pte(table, idx);
    if cur.is_none() {
        st.pt.set_pte(table, idx, Pte::new(pfn, pte_bits(flags, mkwrite, mkwrite) | Pte::SPECIAL));
    } else if mkwrite && cur.is_present() && cur.pfn() == pfn {
        st.pt.set_pte(table, idx, cur.with(Pte::RW | Pte::DIRTY | Pte::SOFT_DIRTY | Pte::ACCESSED));
    }
}

/// Where a fault lands: the file, its page index, and whether the mapping is shared.
fn fault_target(st: &KState, vmf: &Vmf<'_>) -> (InodeId, u64, bool) {
    let v = st.vma(vmf.vma);
    (st.file(v.file.expect("DAX VMAs map files")).inode, vmf.pgoff, v.is_shared())
}

fn fs_error(e: Errno) -> VmFault {
    if e == Errno::ENOMEM { VmFault::Oom } else { VmFault::SigBus }
}

/// `ext4_dax_huge_fault` at order 0 and `dax_iomap_pte_fault`: a fault on an empty PTE of a DAX
/// VMA (or a write fault on a present one that must be redone, see [`dax_wp_shared`]).
pub(crate) async fn dax_pte_fault(vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let (inode, index, shared) = fault_target(&cx.st(), vmf);
    let write = vmf.kind == FaultKind::Write && shared;
    let cow = vmf.kind == FaultKind::Write && !shared;
    let invalidate = cx.st().inodes[inode].mapping.invalidate_lock;
    let _inv = invalidate.read(cx).await;
    if index >= cx.st().inodes[inode].size_pages() {
        return Err(VmFault::SigBus);
    }
    let early = if crate::era::dax_iomap_before_entry_lock(cx.kernel().version) {
        Some(iomap_begin(cx, inode, index, 1, write).await)
    } else {
        None
    };
    let locked =
        grab_mapping_entry(cx, inode, index, Want::Pte).await.expect("PTE entries are granted");
    let iomap = match early {
        Some(found) => found,
        None => iomap_begin(cx, inode, index, 1, write).await,
    };
    let iomap = match iomap {
        Ok(found) => found.expect("one page is always one extent"),
        Err(e) => {
            dax_unlock(cx, inode, locked);
            return Err(fs_error(e));
        }
    };
    let (locked, result) = if cow {
        (locked, dax_cow_fault(vmf, iomap).await)
    } else {
        match iomap {
            Iomap::Hole => match dax_load_hole(vmf, inode, locked).await {
                Ok(l) => (l, Ok(FaultOutcome::Minor)),
                Err(e) => (locked, Err(e)),
            },
            Iomap::Mapped { pfn, new } => {
                let locked =
                    dax_insert_entry(cx, inode, index, locked, EntryKind::Block(pfn), false).await;
                let mkwrite = write && cx.kernel().switches.dax_hole == DaxHole::ZeroPage;
                insert_pfn(vmf, pfn, mkwrite).await;
                if new {
                    cx.st().vmstat.inc(VmStat::Pgmajfault);
                }
                (locked, Ok(outcome_of(new)))
            }
        }
    };
    dax_unlock(cx, inode, locked);
    result
}

/// `dax_load_hole`: maps a hole for a read, by the era's rule (see the module note). Returns
/// what stays locked; on failure the caller's lock is untouched.
async fn dax_load_hole(vmf: &Vmf<'_>, inode: InodeId, locked: Locked) -> Result<Locked, VmFault> {
    let cx = vmf.cx;
    let index = vmf.pgoff;
    let start = cx.now();
    let locked = match cx.kernel().switches.dax_hole {
        DaxHole::ZeroPage => {
            let locked = dax_insert_entry(cx, inode, index, locked, EntryKind::Zero, false).await;
            let zero = cx.st().zero_pfn;
            insert_pfn(vmf, zero, false).await;
            locked
        }
        DaxHole::PagecacheZero => {
            let head = match locked {
                Locked::HolePage(head) => head,
                Locked::Entry(entry) => {
                    // `find_or_create_page(__GFP_ZERO)` replaces the locked placeholder.
                    cx.charge(Cost::PageAlloc).await;
                    let head = alloc_folio(cx, Order::BASE).await.ok_or(VmFault::Oom)?;
                    cx.charge(Cost::ZeroPage4k).await;
                    cx.charge(Cost::PageCacheInsert).await;
                    cx.charge(Cost::LruAdd).await;
                    {
                        let mut st = cx.st();
                        // The placeholder (in v4.10 and v4.11 whatever a racing write left).
                        st.dax.inode_mut(inode).entries.remove(&entry);
                        st.folios.set(head, pg::LOCKED | pg::UPTODATE);
                        st.page_cache_insert(inode, index, head, false, cx.in_lru_fault());
                    }
                    cx.kernel().dax_waitqueue(inode, entry).wake_up_all(cx);
                    head
                }
            };
            map_hole_page(vmf, head).await;
            Locked::HolePage(head)
        }
    };
    let mut st = cx.st();
    st.events.inc(MmEvent::DaxLoadHole);
    st.events.add(MmEvent::DaxLoadHoleNs, cx.now().since(start).as_ns());
    Ok(locked)
}

/// `finish_fault` for a hole page: maps it read-only with a reference of its own.
async fn map_hole_page(vmf: &Vmf<'_>, head: Pfn) {
    let cx = vmf.cx;
    let ptl = cx.st().pt.ptl(vmf.table());
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let mut st = cx.st();
    if !st.pt.pte(vmf.table(), vmf.pte_index()).is_none() {
        return;
    }
    let flags = st.vma(vmf.vma).flags;
    st.folios.get(head, 1);
    set_pte_range(&mut st, vmf, vmf.address, head, head, pte_bits(flags, false, false));
}

/// A write to a private DAX mapping with no PTE (`dax_fault_cow_page`): the new anonymous page
/// is zeroed for a hole or copied from the device; the file is left alone.
async fn dax_cow_fault(vmf: &Vmf<'_>, iomap: Iomap) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    anon_vma_prepare(cx, vmf.mm, vmf.vma).await;
    let new = fault_alloc(cx).await?;
    match iomap {
        Iomap::Hole => cx.charge(Cost::ZeroPage4k).await,
        Iomap::Mapped { pfn, .. } => {
            cx.charge(Cost::PmemRead4k).await;
            cx.st().mem.copy(pfn.0, new.0);
        }
    }
    install_new_anon(vmf, new, true).await;
    Ok(FaultOutcome::Minor)
}

/// A write to a read-only PTE of a shared DAX mapping (DAX's `page_mkwrite`, from `do_wp_page`):
/// the whole DAX fault again (`pfn_mkwrite`/`page_mkwrite` are `ext4_dax_fault`), except that a
/// block PTE of the `pagecache_zero` era only becomes writable (`dax_pfn_mkwrite`).
pub(crate) async fn dax_wp_shared(vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
    let cx = vmf.cx;
    let orig = vmf.orig_pte;
    let block = vm_normal_page(orig).is_none() && !cx.st().is_zero_pfn(orig.pfn());
    if block && cx.kernel().switches.dax_hole == DaxHole::PagecacheZero {
        let (inode, index, _) = fault_target(&cx.st(), vmf);
        if let Some(locked) = grab_mapping_entry(cx, inode, index, Want::Existing).await {
            let (table, idx) = (vmf.table(), vmf.pte_index());
            let ptl = cx.st().pt.ptl(table);
            let g = ptl.lock(cx).await;
            {
                let mut st = cx.st();
                if st.pt.pte(table, idx) == orig {
                    let bits = Pte::RW | Pte::DIRTY | Pte::SOFT_DIRTY | Pte::ACCESSED;
                    st.pt.set_pte(table, idx, orig.with(bits));
                }
            }
            drop(g);
            dax_unlock(cx, inode, locked);
        }
        return Ok(FaultOutcome::Minor);
    }
    debug_assert_eq!(vmf.kind, FaultKind::Write, "only a write reaches page_mkwrite");
    dax_pte_fault(vmf).await
}

/// The PMD level of a fault in a DAX VMA (DAX's `huge_fault`: `create_huge_pmd`,
/// `wp_huge_pmd`, `huge_pmd_set_accessed`): `None` when the fault goes on at the PTE level.
pub(crate) async fn dax_huge_fault(vmf: &Vmf<'_>) -> Result<Option<FaultOutcome>, VmFault> {
    let cx = vmf.cx;
    let pmd_table = vmf.pmd;
    let write = vmf.kind == FaultKind::Write;
    match vmf.orig_pmd {
        Upper::Table(_) => Ok(None),
        Upper::None => dax_pmd_fault(vmf, pmd_table).await,
        Upper::Leaf(leaf) if write && !leaf.write() => {
            if cx.st().vma(vmf.vma).is_shared()
                && let Some(done) = dax_pmd_fault(vmf, pmd_table).await?
            {
                return Ok(Some(done));
            }
            split_huge_pmd(cx, vmf.mm, vmf.address).await;
            Ok(None)
        }
        Upper::Leaf(leaf) => Ok(Some(huge_pmd_set_accessed(vmf, pmd_table, leaf).await)),
    }
}

/// `dax_iomap_pmd_fault`: maps 2 MiB with one PMD, or falls back (`None`).
async fn dax_pmd_fault(vmf: &Vmf<'_>, pmd_table: PtId) -> Result<Option<FaultOutcome>, VmFault> {
    let (cx, addr, write) = (vmf.cx, vmf.address, vmf.kind == FaultKind::Write);
    let (inode, pgoff, shared) = fault_target(&cx.st(), vmf);
    let index = pgoff & !(PMD_PAGES - 1);
    let haddr = addr.align_down(Bytes::PMD);
    let (start, end) = cx.st().vma_range(vmf.vma);
    let size = cx.st().inodes[inode].size_pages();
    if index >= size {
        return Err(VmFault::SigBus);
    }
    let colour = PMD_PAGES - 1;
    let fallback = pgoff & colour != (addr.0 >> 12) & colour
        || (write && !shared)
        || haddr < start
        || haddr + Bytes::PMD > end
        || index | colour >= size;
    if fallback {
        return Ok(pmd_fallback(vmf).await);
    }
    let invalidate = cx.st().inodes[inode].mapping.invalidate_lock;
    let inv = invalidate.read(cx).await;
    let early = if crate::era::dax_iomap_before_entry_lock(cx.kernel().version) {
        Some(iomap_begin(cx, inode, index, PMD_PAGES, write).await)
    } else {
        None
    };
    let Some(locked) = grab_mapping_entry(cx, inode, index, Want::Pmd).await else {
        drop(inv);
        return Ok(pmd_fallback(vmf).await);
    };
    let idx = Level::Pmd.index(addr);
    if matches!(cx.st().pt.upper(pmd_table, idx), Upper::Table(_)) {
        // A PTE fault filled the PMD meanwhile: retry the access.
        dax_unlock(cx, inode, locked);
        return Ok(Some(FaultOutcome::Minor));
    }
    let iomap = match early {
        Some(found) => found,
        None => iomap_begin(cx, inode, index, PMD_PAGES, write).await,
    };
    let (locked, done) = match iomap {
        Ok(Some(Iomap::Hole)) if !write => {
            dax_pmd_load_hole(vmf, pmd_table, inode, index, locked).await
        }
        Ok(Some(Iomap::Mapped { pfn, .. })) => {
            let locked =
                dax_insert_entry(cx, inode, index, locked, EntryKind::Block(pfn), true).await;
            insert_pfn_pmd(vmf, pmd_table, pfn, write).await;
            (locked, true)
        }
        // Too short an extent, no room for an aligned one, or a hole that a write could not
        // fill: PTEs will do it.
        Ok(_) | Err(_) => (locked, false),
    };
    dax_unlock(cx, inode, locked);
    drop(inv);
    if done { Ok(Some(FaultOutcome::Minor)) } else { Ok(pmd_fallback(vmf).await) }
}

/// `VM_FAULT_FALLBACK` from a PMD fault: the PMD is split (a DAX PMD is just cleared) and
/// `thp_fault_fallback` counted; the fault goes on with PTEs.
async fn pmd_fallback(vmf: &Vmf<'_>) -> Option<FaultOutcome> {
    split_huge_pmd(vmf.cx, vmf.mm, vmf.address).await;
    vmf.cx.st().vmstat.inc(VmStat::ThpFaultFallback);
    None
}

/// `dax_pmd_load_hole`: maps the huge zero page over a 2 MiB hole. Returns the lock and
/// whether it mapped (false: fall back).
async fn dax_pmd_load_hole(
    vmf: &Vmf<'_>,
    pmd_table: PtId,
    inode: InodeId,
    index: u64,
    locked: Locked,
) -> (Locked, bool) {
    let cx = vmf.cx;
    let Some(zero) = get_huge_zero_page(cx).await else { return (locked, false) };
    let locked = dax_insert_entry(cx, inode, index, locked, EntryKind::Zero, true).await;
    let idx = Level::Pmd.index(vmf.address);
    let _g = pmd_install_lock(vmf, pmd_table).await;
    let mut st = cx.st();
    if st.pt.upper(pmd_table, idx) != Upper::None {
        return (locked, false);
    }
    let flags = st.vma(vmf.vma).flags;
    let leaf = Pte::new(zero, pte_bits(flags, false, false) | Pte::PSE | Pte::SPECIAL);
    st.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf));
    (locked, true)
}

/// `vmf_insert_pfn_pmd` under the PMD lock: maps a 2 MiB extent (writable and dirty for a
/// write), or makes an existing mapping of it writable.
async fn insert_pfn_pmd(vmf: &Vmf<'_>, pmd_table: PtId, pfn: Pfn, write: bool) {
    let cx = vmf.cx;
    let idx = Level::Pmd.index(vmf.address);
    let _g = pmd_install_lock(vmf, pmd_table).await;
    let mut st = cx.st();
    let flags = st.vma(vmf.vma).flags;
    match st.pt.upper(pmd_table, idx) {
        Upper::None => {
            let leaf = Pte::new(pfn, pte_bits(flags, write, write) | Pte::PSE | Pte::SPECIAL);
            st.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf));
        }
        Upper::Leaf(leaf) if write && leaf.pfn() == pfn => {
            let bits = Pte::RW | Pte::DIRTY | Pte::SOFT_DIRTY | Pte::ACCESSED;
            st.pt.set_upper(pmd_table, idx, Upper::Leaf(leaf.with(bits)));
        }
        _ => {}
    }
}

/// `__dax_invalidate_entry` / `dax_delete_mapping_entry`: waits until the entry covering `index`
/// is unlocked, then deletes it. Returns the index after the entry (or after `index`).
async fn dax_delete_entry(cx: &Cx, inode: InodeId, index: u64) -> u64 {
    let xa_lock = cx.st().inodes[inode].mapping.xa_lock;
    loop {
        let xa = xa_lock.lock(cx).await;
        let found = cx.st().dax_entry(inode, index);
        match found {
            None => return index + 1,
            Some((start, e)) if e.locked => {
                drop(xa);
                cx.kernel().dax_waitqueue(inode, start).wait(cx).await;
            }
            Some((start, e)) => {
                cx.st().dax.inode_mut(inode).entries.remove(&start);
                drop(xa);
                cx.kernel().dax_waitqueue(inode, start).wake_up_all(cx);
                return start + e.pages();
            }
        }
    }
}

/// Deletes every DAX entry overlapping pages `[first, end)` (the DAX part of
/// `truncate_inode_pages_range`; `end = None`: to the end of the file). The caller has unmapped
/// the range and holds `invalidate_lock` for write.
pub(crate) async fn dax_delete_mapping_range(
    cx: &Cx,
    inode: InodeId,
    first: u64,
    end: Option<u64>,
) {
    let mut index = first;
    loop {
        let next = {
            let st = cx.st();
            let entries = &st.dax.inode(inode).entries;
            let covering = st.dax_entry(inode, index).map(|(s, _)| s);
            covering.or_else(|| entries.range(index..).next().map(|(&s, _)| s))
        };
        match next {
            Some(start) if end.is_none_or(|e| start < e) => {
                index = dax_delete_entry(cx, inode, start.max(index)).await;
            }
            _ => return,
        }
    }
}

/// `invalidate_inode_pages2_range` for pages `[first, end)` of a DAX file after `write()`
/// allocated them: drops hole pages (unmapping them) and DAX entries, then — from v4.12 — unmaps
/// the range from every mapping.
async fn invalidate_range(cx: &Cx, inode: InodeId, first: u64, end: u64) {
    for index in first..end {
        let page = cx.st().page_cache_get(inode, index);
        if let Some(head) = page {
            cx.st().folios.get_extra(head);
            folio_lock(cx, head).await;
            if cx.st().folios.mapping(head) == Mapping::File(inode) {
                if cx.st().folios.folio_mapcount(head) > 0 {
                    unmap_mapping_range(cx, inode, index, Some(index + 1), false).await;
                }
                cx.st().page_cache_delete(inode, head);
            }
            folio_unlock(cx, head);
            cx.st().put_folio_extra(head);
        }
    }
    dax_delete_mapping_range(cx, inode, first, Some(end)).await;
    if crate::era::dax_write_unmaps_range(cx.kernel().version) {
        unmap_mapping_range(cx, inode, first, Some(end), false).await;
    }
}

/// `read()` of a DAX file (`ext4_dax_read_iter`, `dax_iomap_rw`): holes read as zeros, written
/// blocks are copied from the device. Returns the count read (`i_size` is read under `i_rwsem`)
/// and the bytes, `None` when the caller does not want them.
pub(crate) async fn dax_read(
    cx: &Cx,
    inode: InodeId,
    pos: u64,
    len: u64,
    want_data: bool,
) -> Result<(u64, Option<Vec<u8>>), VmFault> {
    let i_rwsem = cx.st().inodes[inode].i_rwsem;
    let _i = i_rwsem.read(cx).await;
    let size = cx.st().inodes[inode].size;
    let end = pos.saturating_add(len).min(size);
    let mut out = want_data.then(Vec::new);
    let mut off = pos;
    while off < end {
        let index = off / 4096;
        let chunk_end = ((index + 1) * 4096).min(end);
        let iomap = iomap_begin(cx, inode, index, 1, false).await.map_err(fs_error)?;
        let from = match iomap.expect("one page is one extent") {
            Iomap::Hole => {
                cx.charge(Cost::UserCopy4k).await;
                None
            }
            Iomap::Mapped { pfn, .. } => {
                cx.charge(Cost::PmemRead4k).await;
                Some(pfn)
            }
        };
        if let Some(out) = out.as_mut() {
            let at = out.len();
            out.resize(at + (chunk_end - off) as usize, 0);
            if let Some(pfn) = from {
                cx.st().mem.read(pfn.0, (off % 4096) as usize, &mut out[at..]);
            }
        }
        off = chunk_end;
    }
    Ok((end.saturating_sub(pos), out))
}

/// `write()` to a DAX file (`ext4_dax_write_iter`, `dax_iomap_rw`): allocates what is missing,
/// invalidates what newly allocated blocks replace (hole pages, zero entries, zero-page
/// mappings), then copies the data to the device. Extends `i_size`.
pub(crate) async fn dax_write(
    cx: &Cx,
    inode: InodeId,
    pos: u64,
    data: &[u8],
) -> Result<(), VmFault> {
    let i_rwsem = cx.st().inodes[inode].i_rwsem;
    let _i = i_rwsem.write(cx).await;
    let end = pos + data.len() as u64;
    let mut off = pos;
    while off < end {
        let index = off / 4096;
        let chunk_end = ((index + 1) * 4096).min(end);
        let iomap = iomap_begin(cx, inode, index, 1, true).await.map_err(fs_error)?;
        let Some(Iomap::Mapped { pfn, new }) = iomap else { unreachable!("a write maps one page") };
        if new {
            invalidate_range(cx, inode, index, index + 1).await;
        }
        cx.charge(Cost::PmemWrite4k).await;
        let mut st = cx.st();
        let from = (off - pos) as usize;
        st.mem.write(pfn.0, (off % 4096) as usize, &data[from..from + (chunk_end - off) as usize]);
        let i = &mut st.inodes[inode];
        i.size = i.size.max(chunk_end);
        off = chunk_end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmap::{MmapArgs, map, prot};
    use crate::types::fs::FsType;
    use crate::{Access, FileSpec, Machine, MachineConfig, OpenFlags, Pid, Profile, Thread};
    use simcore::VirtAddr;
    use std::cell::RefCell;
    use std::future::Future;
    use std::rc::Rc;

    /// An address whose PMD colour differs from page offset 0: PTE faults only.
    const UNALIGNED: VirtAddr = VirtAddr(0x7f62_e72b_3000);

    /// A `tiny` machine with 64 MiB of pmem and a 4 MiB DAX file that is one hole.
    fn machine(kernel: &str) -> Machine {
        let mut c = MachineConfig::new(Profile::named("tiny").unwrap(), kernel.parse().unwrap());
        c.pmem = Bytes::mib(64);
        let mut m = Machine::new(c).unwrap();
        let spec = FileSpec {
            size: Bytes::mib(4),
            fs: FsType::Dax,
            pattern: None,
            holes: vec![(0, 1024)],
        };
        m.create_file("/pmem/f", &spec).unwrap();
        m
    }

    async fn map_file(t: &Thread, at: Option<VirtAddr>, len: Bytes) -> VirtAddr {
        let fd = t.open("/pmem/f", OpenFlags::RDWR).await.unwrap();
        let args = MmapArgs {
            addr: at,
            len,
            prot: prot::READ | prot::WRITE,
            flags: map::SHARED,
            fd: Some(fd),
            offset: 0,
        };
        t.mmap(args).await.unwrap()
    }

    /// Runs `f` as a thread of a new process named `name` to completion, checked at every step.
    fn run<F, Fut>(m: &mut Machine, name: &str, f: F) -> Pid
    where
        F: FnOnce(Thread) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let pid = m.new_process(name).unwrap();
        m.spawn_thread(pid, 0, name, f).unwrap();
        m.run_checked().unwrap();
        pid
    }

    fn smaps_kb(m: &Machine, pid: Pid, field: &str) -> u64 {
        let text = m.smaps(pid);
        let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn meminfo_kb(m: &Machine, field: &str) -> u64 {
        let text = m.meminfo();
        let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Given a hole read through a PTE-mapped DAX mapping, then v4.14+ maps the shared zero page
    /// (no memory, no Rss) where v4.13 filled the page cache with zeroed pages (Rss, Cached).
    #[test]
    fn hole_reads_map_the_zero_page_or_fill_the_page_cache() {
        for (kernel, rss_kb) in [("v6.8", 0), ("v4.14", 0), ("v4.13", 64)] {
            let mut m = machine(kernel);
            let cached = meminfo_kb(&m, "Cached");
            let pid = run(&mut m, "reader", |t| async move {
                let a = map_file(&t, Some(UNALIGNED), Bytes::kib(64)).await;
                t.touch(a, Bytes::kib(64), Access::Read).await.unwrap();
                assert_eq!(t.read_bytes(a + Bytes(100), 4).await.unwrap(), [0; 4]);
            });
            assert_eq!(smaps_kb(&m, pid, "Rss"), rss_kb, "{kernel}");
            assert_eq!(smaps_kb(&m, pid, "Private_Clean"), rss_kb, "{kernel}");
            assert_eq!(meminfo_kb(&m, "Cached") - cached, rss_kb, "{kernel}");
            let st = m.kernel().state();
            assert_eq!(st.events.get(MmEvent::DaxLoadHole), 16, "{kernel}");
            assert_eq!(st.vmstat.get(VmStat::ThpFaultFallback), 1, "{kernel}: one PMD try");
            let mm = st.procs[pid].mm.unwrap();
            let zero =
                st.pagemap(mm, UNALIGNED, 1)[0] & crate::fs::proc::PM_PFN_MASK == st.zero_pfn.0;
            assert_eq!(zero, rss_kb == 0, "{kernel}");
            assert!(st.dax.inode(InodeId(0)).blocks.is_empty(), "a read allocates no block");
        }
    }

    /// Given two processes that read the same hole, when one of them writes it through its
    /// mapping, then the other sees the data: the zero page (or hole page) was unmapped from
    /// both, and the block mapped writable in one fault (v4.14+) or two (v4.13).
    #[test]
    fn a_write_after_read_reaches_every_mapping() {
        for (kernel, write_faults) in [("v6.8", 1), ("v4.13", 2)] {
            let mut m = machine(kernel);
            let shared: Rc<RefCell<Vec<VirtAddr>>> = Rc::default();
            for name in ["a", "b"] {
                let s = shared.clone();
                run(&mut m, name, |t| async move {
                    let a = map_file(&t, Some(UNALIGNED), Bytes::kib(16)).await;
                    t.touch(a, Bytes::kib(16), Access::Read).await.unwrap();
                    s.borrow_mut().push(a);
                });
            }
            let faults = m.vmstat().get(VmStat::Pgfault);
            let (pa, pb) = (Pid(1), Pid(2));
            let addr = shared.borrow()[1] + Bytes::kib(4);
            m.spawn_thread(pb, 1, "writer", move |t| async move {
                t.write_bytes(addr, b"hello").await.unwrap();
            })
            .unwrap();
            m.run_checked().unwrap();
            assert_eq!(m.vmstat().get(VmStat::Pgfault) - faults, write_faults, "{kernel}");
            assert_eq!(m.vmstat().get(VmStat::Pgmajfault), 1, "{kernel}: the block was allocated");
            let addr = shared.borrow()[0] + Bytes::kib(4);
            let seen: Rc<RefCell<Vec<u8>>> = Rc::default();
            let s = seen.clone();
            m.spawn_thread(pa, 0, "reader", move |t| async move {
                *s.borrow_mut() = t.read_bytes(addr, 5).await.unwrap();
            })
            .unwrap();
            m.run_checked().unwrap();
            assert_eq!(&seen.borrow()[..], b"hello", "{kernel}");
            assert_eq!(smaps_kb(&m, pa, "Rss"), if kernel == "v4.13" { 12 } else { 0 }, "{kernel}");
        }
    }

    /// Given a PMD-aligned mapping of a 2 MiB hole, a read maps the huge zero page with one
    /// fault; a PTE fault in the same range from an unaligned mapping downgrades the PMD entry,
    /// tearing the huge zero page out of the first process too.
    #[test]
    fn pmd_holes_map_the_huge_zero_page_until_a_pte_fault_splits_them() {
        let mut m = machine("v6.8");
        let aligned: Rc<RefCell<Option<VirtAddr>>> = Rc::default();
        let s = aligned.clone();
        let pa = run(&mut m, "a", |t| async move {
            let a = map_file(&t, None, Bytes::mib(4)).await;
            assert!(a.is_aligned(Bytes::PMD), "DAX mappings are PMD-aligned");
            t.touch(a, Bytes::mib(2), Access::Read).await.unwrap();
            *s.borrow_mut() = Some(a);
        });
        let a = aligned.borrow().unwrap();
        {
            let st = m.kernel().state();
            assert_eq!(st.vmstat.get(VmStat::Pgfault), 1, "one fault maps 2 MiB");
            assert_eq!(st.vmstat.get(VmStat::ThpZeroPageAlloc), 1);
            let (pte, level) = st.pt.translate(st.mm(st.procs[pa].mm.unwrap()).pgd, a).unwrap();
            assert_eq!((level, Some(pte.pfn())), (Level::Pmd, st.huge_zero_pfn));
            assert!(
                st.dax_entry(InodeId(0), 0)
                    .is_some_and(|(_, e)| e.pmd && e.kind == EntryKind::Zero)
            );
        }
        assert_eq!(smaps_kb(&m, pa, "Rss"), 0);
        run(&mut m, "b", |t| async move {
            let b = map_file(&t, Some(UNALIGNED), Bytes::kib(8)).await;
            t.touch(b, Bytes::kib(8), Access::Read).await.unwrap();
        });
        let st = m.kernel().state();
        assert!(st.pt.translate(st.mm(st.procs[pa].mm.unwrap()).pgd, a).is_none(), "split");
        assert!(
            st.dax_entry(InodeId(0), 0).is_some_and(|(_, e)| !e.pmd && e.kind == EntryKind::Zero)
        );
    }

    /// Given huge zero PMDs, mprotect and munmap of a range that cuts one split it (the PMD is
    /// cleared and refaults as PTEs), a PMD wholly inside changes protection in place, and the
    /// rest of the mapping still reads.
    #[test]
    fn vma_edges_split_huge_pmds() {
        let mut m = machine("v6.8");
        let pid = run(&mut m, "p", |t| async move {
            let a = map_file(&t, None, Bytes::mib(4)).await;
            t.touch(a, Bytes::mib(4), Access::Read).await.unwrap();
            t.mprotect(a, Bytes::mib(2), prot::READ).await.unwrap();
            t.munmap(a + Bytes::mib(3), Bytes::mib(1)).await.unwrap();
            assert_eq!(t.read_bytes(a + Bytes::mib(2) + Bytes(5), 1).await.unwrap(), [0]);
            assert_eq!(t.write_bytes(a, b"x").await, Err(crate::Signal::SIGSEGV));
            assert_eq!(t.read_bytes(a + Bytes::mib(3), 1).await, Err(crate::Signal::SIGSEGV));
        });
        let st = m.kernel().state();
        let mm = st.procs[pid].mm.unwrap();
        let pgd = st.mm(mm).pgd;
        let a = st.mm(mm).vmas.keys().next().map(|&s| VirtAddr(s)).unwrap();
        let (leaf, level) = st.pt.translate(pgd, a).unwrap();
        assert_eq!(level, Level::Pmd, "the first PMD was not cut");
        assert!(!leaf.write());
        let (_, level) = st.pt.translate(pgd, a + Bytes::mib(2) + Bytes(5)).unwrap();
        assert_eq!(level, Level::Pte, "the cut PMD came back as PTEs");
    }

    /// Given a huge zero page mapped over a hole (fstests generic/428), when `write()` fills it,
    /// then the mapping reads the data from v4.12 on; v4.11 left the huge zero page mapped.
    #[test]
    fn write_syscall_tears_down_a_huge_zero_mapping_from_v4_12() {
        for (kernel, fixed) in [("v6.8", true), ("v4.13", true), ("v4.11", false)] {
            let mut m = machine(kernel);
            let seen: Rc<RefCell<Vec<u8>>> = Rc::default();
            let s = seen.clone();
            run(&mut m, "p", |t| async move {
                let a = map_file(&t, None, Bytes::mib(2)).await;
                t.touch(a, Bytes::PAGE, Access::Read).await.unwrap();
                let fd = t.open("/pmem/f", OpenFlags::RDWR).await.unwrap();
                t.pwrite_data(fd, b"data", 4096).await.unwrap();
                *s.borrow_mut() = t.read_bytes(a + Bytes::PAGE, 4).await.unwrap();
            });
            let expected: &[u8] = if fixed { b"data" } else { &[0; 4] };
            assert_eq!(&seen.borrow()[..], expected, "{kernel}");
        }
    }

    /// Given a private mapping of a hole and of a written block, writes copy into anonymous
    /// memory (zeroed, or read from the device) and the file is unchanged.
    #[test]
    fn private_writes_copy_and_leave_the_file_alone() {
        let mut m = machine("v6.8");
        run(&mut m, "p", |t| async move {
            let fd = t.open("/pmem/f", OpenFlags::RDWR).await.unwrap();
            t.pwrite_data(fd, b"file", 0).await.unwrap();
            let args = MmapArgs {
                addr: Some(UNALIGNED),
                len: Bytes::kib(8),
                prot: prot::READ | prot::WRITE,
                flags: map::PRIVATE,
                fd: Some(fd),
                offset: 0,
            };
            let a = t.mmap(args).await.unwrap();
            assert_eq!(t.read_bytes(a, 4).await.unwrap(), b"file");
            t.write_bytes(a, b"mine").await.unwrap();
            t.write_bytes(a + Bytes::PAGE, b"hole").await.unwrap();
            assert_eq!(t.read_bytes(a, 4).await.unwrap(), b"mine");
        });
        let st = m.kernel().state();
        assert_eq!(st.dax.inode(InodeId(0)).blocks.len(), 1, "only the write() allocated");
        let mut head = [0u8; 4];
        st.mem.read(st.dax.written_pfn(InodeId(0), 0).unwrap().0, 0, &mut head);
        assert_eq!(&head, b"file", "the block keeps the file's bytes");
        assert_eq!(st.vmstat.get(VmStat::NrAnonPages), 2, "two private copies");
    }

    /// Given written blocks, punching a hole frees them and unmaps them (the pages read zeros
    /// through the zero page again), and truncating makes accesses past the end SIGBUS.
    #[test]
    fn punch_hole_and_truncate_free_blocks_and_unmap() {
        let mut m = machine("v6.8");
        run(&mut m, "p", |t| async move {
            let a = map_file(&t, Some(UNALIGNED), Bytes::kib(16)).await;
            t.write_bytes(a, &[7; 16384]).await.unwrap();
            let fd = t.open("/pmem/f", OpenFlags::RDWR).await.unwrap();
            t.fallocate(
                fd,
                crate::fs::falloc::PUNCH_HOLE | crate::fs::falloc::KEEP_SIZE,
                100,
                8192,
            )
            .await
            .unwrap();
            assert_eq!(
                t.read_bytes(a + Bytes(99), 2).await.unwrap(),
                [7, 0],
                "partial head zeroed"
            );
            assert_eq!(t.read_bytes(a + Bytes(4096), 4).await.unwrap(), [0; 4], "punched page");
            assert_eq!(
                t.read_bytes(a + Bytes(8291), 2).await.unwrap(),
                [0, 7],
                "partial tail zeroed"
            );
            t.ftruncate(fd, 4096).await.unwrap();
            assert_eq!(t.read_bytes(a + Bytes(8192), 1).await, Err(crate::Signal::SIGBUS));
            t.fallocate(fd, 0, 0, 65536).await.unwrap();
            assert_eq!(
                t.read_bytes(a + Bytes(8192), 2).await.unwrap(),
                [0, 0],
                "unwritten reads zeros"
            );
        });
        let st = m.kernel().state();
        let blocks = &st.dax.inode(InodeId(0)).blocks;
        assert_eq!(blocks.len(), 16, "one written block kept, 15 unwritten allocated");
        assert_eq!(blocks.values().filter(|b| !b.unwritten).count(), 1);
        assert_eq!(st.inodes[InodeId(0)].size, 65536);
    }

    /// A DAX file needs the device, and the device's capacity.
    #[test]
    fn dax_files_need_room_on_a_pmem_device() {
        let mut c =
            MachineConfig::new(Profile::named("tiny").unwrap(), crate::KernelVersion::DEFAULT);
        let spec =
            FileSpec { size: Bytes::mib(2), fs: FsType::Dax, pattern: Some(3), holes: vec![] };
        assert_eq!(Machine::new(c.clone()).unwrap().create_file("/f", &spec), Err(Errno::ENODEV));
        c.pmem = Bytes::mib(1);
        assert_eq!(Machine::new(c.clone()).unwrap().create_file("/f", &spec), Err(Errno::ENOSPC));
        c.pmem = Bytes::mib(2);
        let mut m = Machine::new(c).unwrap();
        m.create_file("/f", &spec).unwrap();
        let st = m.kernel().state();
        let pfn = st.dax.written_pfn(InodeId(0), 3).unwrap();
        assert_eq!(
            st.mem.get(pfn.0),
            crate::types::fs::Backing { pattern: Some(3), ..Default::default() }.read(3).as_ref()
        );
    }
}
