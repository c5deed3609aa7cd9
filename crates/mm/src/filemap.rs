//! The page cache (`mm/filemap.c`, `mm/readahead.c`, `mm/shmem.c`, `mm/swap.c`, Linux v6.8).
//!
//! - Lookup, insertion and deletion of folios in an inode's `address_space`; a cached folio holds
//!   one reference per page and sits on an LRU list (file pages on the file lists; tmpfs pages,
//!   being swap-backed, on the anon lists, as in the kernel).
//! - The folio lock: the `PG_locked` bit plus the hashed `folio_waitqueue`s; waiters re-check
//!   after every wake-up, as `folio_wait_bit_common` does.
//! - Reading from the backing store: missing pages of a window are allocated, inserted locked
//!   and not uptodate, read with one device request (latency plus per-page transfer), then
//!   unlocked. A PMD-sized folio of executable text (`huge_memory.rs`) is read the same way and
//!   counted in `nr_file_hugepages` and the mapping's `nr_thps`. Tasks that find a locked folio wait for the read.
//!   The page holding the end of the file reads zeros past `i_size` (`block_read_full_folio`).
//! - `filemap_fault` with mmap read-around (`ra_pages` centred on the fault; one page with
//!   `MADV_RANDOM`), tmpfs faults allocating zeroed pages, fault-around (`filemap_map_pages`,
//!   the page cache's `map_pages` in `vm_ops.rs`), and the `read()`/`write()` paths.
//! - `read()` marks each page it copies accessed (`lru.rs`) and reads what is missing in
//!   windows of the file's `ra_pages`; a file advised `POSIX_FADV_RANDOM` (or a device without
//!   readahead) reads only what was asked, in pieces of at most 2 MiB.
//!
//! `read()` and `write()` of a DAX file go to `dax.rs` instead.
//!
//! `cachestat(2)` ("cachestat: implement cachestat syscall", cf264e1329fb, v6.5; ENOSYS before,
//! `era::has_cachestat`; `filemap_cachestat` and `SYSCALL_DEFINE4(cachestat)`, read in v6.8,
//! v6.12 and v6.18): EBADF for a descriptor that is not open, EFAULT when the range cannot be
//! read, EOPNOTSUPP for a hugetlbfs file (`is_file_hugepages`), EINVAL for any flag, then a walk
//! of the page cache's entries from the range's first page to its last (`off + len - 1`
//! wrapping as the kernel's unsigned sum does; a `len` of 0 is every index from `off` on), and
//! EFAULT when the result cannot be written. A folio counts the pages of it the range covers in
//! `nr_cache`, and in `nr_dirty` and `nr_writeback` by the xarray's tags: shmem never tags a
//! folio dirty (`noop_dirty_folio`), so a tmpfs or memfd page is never counted dirty. A shadow
//! entry counts in `nr_evicted`, and in `nr_recently_evicted` when `workingset_test_recent`
//! holds for it asked as a file page (`lru.rs`, the classic test or `lru_gen_test_recent`);
//! shmem's swap entries count as evicted, recently when the swap slot holds a shadow that
//! passes the same test (a slot whose folio is still in the swap cache has none: not recent,
//! as the check "mm: cachestat: fix folio read-after-free in cache walk" added after v6.8
//! (absent from the v6.8 mirror, present in v6.11; its id not verified); before, the kernel
//! handed `workingset_test_recent` a NULL shadow, which names no memory cgroup and is not
//! recent either). Every file has a mapping to
//! walk, so a pipe, a userfaultfd, an empty or a DAX file answers zeros.
//! From v6.13 (backported to 6.12.y) a caller that could not write the file is EPERM
//! (`can_do_cachestat`, after the hugetlbfs test): the model's tasks run as root, whom
//! `inode_owner_or_capable` lets through, so no era differs there.
//! Approximations: a shadow counts one page (the model's shadow of an evicted large folio sits
//! at its first index, not over all of its slots), and a poisoned shmem swap entry (a failed
//! swap-in) is not modelled.
//!
//! Approximations: readahead is a fixed window (no ramp-up, no async `PG_readahead` marker);
//! LRU additions are not batched per CPU; writeback is synchronous (`fsync`).

use crate::era;
use crate::errno::Errno;
use crate::errno::VmFault;
use crate::folio::folio_trylock;
use crate::folio::{Mapping, pg};
use crate::fs::ops::PageFill;
use crate::kernel::{Cx, KState};
use crate::memory::{Vmf, pte_bits, set_pte_range, wants_writenotify};
use crate::page_alloc::alloc_folio;
use crate::pgtable::Level;
use crate::sim::cost::Cost;
use crate::types::ids::{FileId, InodeId};
use crate::types::swap::{Shadow, ShadowSlot};
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use crate::xarray::Entry;
use simcore::{Bytes, Order, Pfn, VirtAddr};

impl KState {
    /// The head of the cached folio covering page `index`, if any.
    pub fn page_cache_get(&self, inode: InodeId, index: u64) -> Option<Pfn> {
        let m = &self.inodes[inode].mapping;
        if let Some(&head) = m.pages.get(&index) {
            return Some(head); // a folio starting here: most lookups, and cheaper than a search
        }
        if m.nr_large == 0 {
            return None;
        }
        let (start, head) = m.pages.folio_before(index)?;
        (index < start + self.folios.order(head).pages()).then_some(head)
    }

    /// Whether `head`, cached in `inode`, is a PMD-sized folio of a disk file: counted in
    /// `nr_file_hugepages` (`NR_FILE_THPS`; `__filemap_add_folio`, `filemap_unaccount_folio`).
    pub(crate) fn is_file_thp(&self, inode: InodeId, head: Pfn) -> bool {
        self.folios.order(head) == Order::PMD && self.inodes[inode].fs.read_only_thps()
    }

    /// Whether `head`, cached in `inode`, is a shmem THP (`NR_SHMEM_THPS`).
    pub(crate) fn is_shmem_thp(&self, inode: InodeId, head: Pfn) -> bool {
        self.folios.order(head) == Order::PMD && self.inodes[inode].fs.tmpfs_mount().is_some()
    }

    /// Whether such a THP also counts in the mapping's `nr_thps`: only where the file system
    /// has no large folios of its own (`filemap_nr_thps_inc`, `mapping_large_folio_support`).
    pub(crate) fn counts_in_nr_thps(&self, inode: InodeId, head: Pfn) -> bool {
        self.is_file_thp(inode, head) && !self.inodes[inode].fs.large_folios(self.thp.kernel)
    }

    /// `folio_mark_dirty` for a page-cache folio. One that truncation has already taken out of
    /// the cache (a pin's holder writing after a truncate or hole punch) only gets the flag:
    /// without a mapping the kernel takes `noop_dirty_folio`, and `__folio_mark_dirty` accounts
    /// only while `folio->mapping` is set (mm/page-writeback.c, v6.8).
    pub(crate) fn folio_mark_dirty(&mut self, head: Pfn) {
        let cached = matches!(self.folios.mapping(head), Mapping::File(_));
        if !self.folios.test_and_set(head, pg::DIRTY) && cached {
            let nr = self.folios.order(head).pages();
            self.vmstat.add(VmStat::NrDirty, nr);
            self.vmstat.add(VmStat::NrDirtied, nr);
        }
    }

    /// Inserts a new folio at `index` (`filemap_add_folio`): the cache's references, the
    /// mapping, the counters, then the LRU. A shadow entry left in the slot by reclaim is
    /// replaced (`__filemap_add_folio` returns it through `shadowp`), and unless the folio is being created by a write (`__GFP_WRITE`) the refault is
    /// evaluated (`workingset_refault`) before the folio joins its list; `in_lru_fault` is the
    /// inserting task's hint ([`Cx::in_lru_fault`]).
    pub(crate) fn page_cache_insert(
        &mut self,
        inode: InodeId,
        index: u64,
        head: Pfn,
        write: bool,
        in_lru_fault: bool,
    ) {
        // The folio takes the shadow's slot in one store (`xas_store` over the value entry).
        let shadow = self.page_cache_store_folio(inode, index, head);
        if let Some(s) = &shadow {
            self.workingset_forget(s);
        }
        if let Some(shadow) = shadow
            && !write
        {
            self.workingset_refault(head, shadow, in_lru_fault);
        }
        self.folio_add_lru(head, in_lru_fault);
    }

    /// The page cache's part of an insertion (`__filemap_add_folio`; `shmem_add_to_page_cache`
    /// for a folio shmem swapped in, which is on its LRU already): the cache's references, the
    /// mapping, the counters.
    pub(crate) fn page_cache_add(&mut self, inode: InodeId, index: u64, head: Pfn) {
        let shadow = self.page_cache_store_folio(inode, index, head);
        debug_assert!(shadow.is_none(), "a folio added over a shadow");
    }

    /// [`KState::page_cache_add`] over whatever shadow entry the slot holds: the shadow.
    fn page_cache_store_folio(&mut self, inode: InodeId, index: u64, head: Pfn) -> Option<Shadow> {
        let nr = self.folios.order(head).pages();
        debug_assert!(self.page_cache_get(inode, index).is_none());
        debug_assert!(!self.inodes[inode].mapping.swapped.contains_key(&index));
        let index32 = u32::try_from(index).expect("file index beyond 16 TiB");
        self.folios.set_mapping(head, Mapping::File(inode), index32);
        self.folios.get(head, nr as u32);
        self.vmstat.add(VmStat::NrFilePages, nr);
        if self.inodes[inode].fs.swap_backed() {
            self.folios.set(head, pg::SWAPBACKED);
            self.vmstat.add(VmStat::NrShmem, nr);
        }
        let (thp, counted) = (self.is_file_thp(inode, head), self.counts_in_nr_thps(inode, head));
        if thp {
            self.vmstat.inc(VmStat::NrFileHugepages);
        }
        if self.is_shmem_thp(inode, head) {
            self.vmstat.inc(VmStat::NrShmemHugepages);
        }
        let m = &mut self.inodes[inode].mapping;
        let old = m.pages.store(index, Some(Entry::Folio(head)));
        m.nrpages += nr;
        m.nr_thps += u64::from(counted);
        m.nr_large += u64::from(nr > 1);
        match old {
            None => None,
            Some(Entry::Shadow(s)) => Some(s),
            Some(Entry::Folio(f)) => panic!("folio {head} added over cached folio {f}"),
        }
    }

    /// Removes a folio from the page cache (`filemap_remove_folio`), dropping the cache's
    /// references; the folio is freed if nobody else holds it.
    pub(crate) fn page_cache_delete(&mut self, inode: InodeId, head: Pfn) {
        self.page_cache_replace_folio(inode, head, None);
    }

    /// [`KState::page_cache_delete`] leaving `shadow` (stamped by the workingset) in the folio's
    /// slot in the same store, as `page_cache_delete` does with `xas_store(&xas, shadow)`.
    pub(crate) fn page_cache_replace_folio(
        &mut self,
        inode: InodeId,
        head: Pfn,
        shadow: Option<Shadow>,
    ) {
        let nr = self.folios.order(head).pages();
        let index = self.folio_index(head);
        let (thp, counted) = (self.is_file_thp(inode, head), self.counts_in_nr_thps(inode, head));
        if thp {
            self.vmstat.sub(VmStat::NrFileHugepages, 1);
        }
        if self.is_shmem_thp(inode, head) {
            self.vmstat.sub(VmStat::NrShmemHugepages, 1);
        }
        let m = &mut self.inodes[inode].mapping;
        let old = m.pages.store(index, shadow.map(Entry::Shadow));
        assert_eq!(old, Some(Entry::Folio(head)), "deleting a folio not in the cache");
        m.nrpages -= nr;
        m.nr_thps -= u64::from(counted);
        m.nr_large -= u64::from(nr > 1);
        self.vmstat.sub(VmStat::NrFilePages, nr);
        if self.inodes[inode].fs.swap_backed() {
            self.vmstat.sub(VmStat::NrShmem, nr);
        }
        if self.folios.test(head, pg::DIRTY) {
            self.folios.clear_flag(head, pg::DIRTY);
            self.vmstat.sub(VmStat::NrDirty, nr);
        }
        self.folios.set_mapping(head, Mapping::None, 0);
        self.put_folio(head, nr as u32);
    }

    /// Writes a dirty folio back to the backing store (synchronous writeback).
    pub(crate) fn writeback_folio(&mut self, inode: InodeId, head: Pfn) {
        if !self.folios.test(head, pg::DIRTY) {
            return;
        }
        let index = self.folio_index(head);
        let nr = self.folios.order(head).pages();
        for i in 0..nr {
            let content = self.mem.get((head + i).0).cloned();
            self.inodes[inode].backing.write(index + i, content);
        }
        self.folios.clear_flag(head, pg::DIRTY);
        self.vmstat.sub(VmStat::NrDirty, nr);
        self.vmstat.add(VmStat::NrWritten, nr);
        self.vmstat.add(VmStat::Pgpgout, nr * 4);
    }
}

/// `folio_lock`: sleeps until the folio's lock is free, then takes it.
pub(crate) async fn folio_lock(cx: &Cx, head: Pfn) {
    cx.preempt_point().await;
    while !folio_trylock(&mut cx.st().folios, head) {
        cx.kernel().folio_waitqueue(head).wait(cx).await;
    }
}

/// `folio_unlock`: releases the lock and wakes the waiters of its hashed queue.
pub(crate) fn folio_unlock(cx: &Cx, head: Pfn) {
    let mut st = cx.st();
    assert!(st.folios.test(head, pg::LOCKED), "unlocking unlocked folio {head}");
    st.folios.clear_flag(head, pg::LOCKED);
    drop(st);
    cx.kernel().folio_waitqueue(head).wake_up_all(cx);
}

/// Brings the missing pages of `[start, end)` of a disk file into the page cache and reads them
/// with one device request. Pages already cached are left alone. Returns the pages read.
pub(crate) async fn read_pages(
    cx: &Cx,
    inode: InodeId,
    start: u64,
    end: u64,
) -> Result<u64, VmFault> {
    debug_assert_eq!(cx.st().inodes[inode].fs.page_fill(), Some(PageFill::ReadFolio));
    let batch = add_readahead_folios(cx, inode, start, end).await;
    let n = batch.len() as u64;
    if n == 0 {
        cx.st().reclaim_lists.give_reads(batch);
        // Nothing was missing, or not even one page could be allocated.
        let wanted_missing = (start..end).any(|i| cx.st().page_cache_get(inode, i).is_none());
        return if wanted_missing { Err(VmFault::Oom) } else { Ok(0) };
    }
    cx.charge_n(Cost::PageAlloc, n).await;
    read_folios(cx, inode, &batch).await;
    cx.st().reclaim_lists.give_reads(batch);
    Ok(n)
}

/// Allocates and inserts, locked and not uptodate, the missing pages of `[start, end)`
/// (`page_cache_ra_unbounded`). From v5.15 this holds the mapping's `invalidate_lock` shared, so
/// a hole punch cannot run between the insertion and its own removal of the range. The window
/// was sized from an `i_size` read before, as `do_page_cache_ra` reads it outside the lock: a
/// truncation in between leaves pages past the new end (zero-filled by the read, harmless).
async fn add_readahead_folios(cx: &Cx, inode: InodeId, start: u64, end: u64) -> Vec<(u64, Pfn)> {
    let invalidate = era::readahead_takes_invalidate_lock(cx.kernel().version)
        .then(|| cx.st().inodes[inode].mapping.invalidate_lock);
    let _shared = match invalidate {
        Some(lock) => Some(lock.read(cx).await),
        None => None,
    };
    let mut batch = cx.st().reclaim_lists.take_reads();
    for index in start..end {
        if cx.st().page_cache_get(inode, index).is_some() {
            continue;
        }
        let Some(head) = alloc_folio(cx, Order::BASE).await else {
            break;
        };
        let mut st = cx.st();
        if st.page_cache_get(inode, index).is_some() {
            st.put_folio_extra(head);
            continue;
        }
        st.folios.set(head, pg::LOCKED);
        st.page_cache_insert(inode, index, head, false, cx.in_lru_fault());
        st.put_folio_extra(head); // the allocation reference; the cache holds its own
        batch.push((index, head));
    }
    batch
}

/// Reads folios just inserted locked and not uptodate at their indexes with one device request
/// (latency plus per-page transfer), marks them uptodate and unlocks them.
pub(crate) async fn read_folios(cx: &Cx, inode: InodeId, batch: &[(u64, Pfn)]) {
    let n: u64 = {
        let st = cx.st();
        batch.iter().map(|&(_, head)| st.folios.order(head).pages()).sum()
    };
    cx.charge_n(Cost::PageCacheInsert, batch.len() as u64).await;
    let io = cx.block_io(n);
    cx.sleep(io).await;
    {
        let mut st = cx.st();
        let size = st.inodes[inode].size;
        for &(index, head) in batch {
            for i in 0..st.folios.order(head).pages() {
                let content = st.inodes[inode].backing.read(index + i);
                st.mem.set((head + i).0, content);
                zero_past_eof(&mut st, head + i, index + i, size);
            }
            st.folios.set(head, pg::UPTODATE);
        }
        st.vmstat.add(VmStat::Pgpgin, n * 4);
    }
    for &(_, head) in batch {
        folio_unlock(cx, head);
    }
}

/// The read of the page holding the end of the file zeroes the bytes past `i_size`
/// (`block_read_full_folio`, `ext4_mpage_readpages`' `zero_user_segment`): a mapping of that page
/// reads zeros there whatever the block holds.
fn zero_past_eof(st: &mut KState, pfn: Pfn, index: u64, size: u64) {
    let tail = (size % 4096) as usize;
    if index == size / 4096 && tail != 0 && st.mem.get(pfn.0).is_some() {
        st.mem.write(pfn.0, tail, &[0; 4096][tail..]);
    }
}

/// Allocates a tmpfs page at `index` (`shmem_get_folio` for a missing page), zeroed unless the
/// file was made with contents ([`KState::shmem_fill`]).
pub(crate) async fn shmem_alloc_page(cx: &Cx, inode: InodeId, index: u64) -> Result<(), VmFault> {
    cx.charge(Cost::PageAlloc).await;
    cx.charge(Cost::ZeroPage4k).await;
    let head = alloc_folio(cx, Order::BASE).await.ok_or(VmFault::Oom)?;
    let mut st = cx.st();
    if st.page_cache_get(inode, index).is_some() {
        st.put_folio_extra(head);
        return Ok(());
    }
    st.shmem_fill(inode, index, head);
    st.folios.set(head, pg::UPTODATE);
    st.page_cache_insert(inode, index, head, false, cx.in_lru_fault());
    st.put_folio_extra(head);
    Ok(())
}

impl KState {
    /// The contents of a tmpfs folio `head` allocated at `index`: a file made with contents (a
    /// scenario's `[[file]]` with `content`, which the kernel would hold in its page cache from
    /// the start) shows them where no hole was punched, zeros past `i_size`; any other page is
    /// zeroed. Approximation: such a file's pages are allocated at their first use, not when the
    /// file is made, so `Shmem` and the page cache count them only then.
    pub(crate) fn shmem_fill(&mut self, inode: InodeId, index: u64, head: Pfn) {
        let size = self.inodes[inode].size;
        for i in 0..self.folios.order(head).pages() {
            let content = self.inodes[inode].backing.read(index + i);
            let past_eof = (index + i) * 4096 >= size;
            self.mem.set((head + i).0, if past_eof { None } else { content });
            zero_past_eof(self, head + i, index + i, size);
        }
    }
}

/// `shmem_get_folio` for a page missing from a tmpfs file's page cache: swaps it in where
/// reclaim left a swap entry (`shmem_swapin_folio`, `shmem.rs`), else allocates a zeroed page.
/// Returns whether the page was read from the swap device (a major fault, for a fault).
pub(crate) async fn shmem_get_page(cx: &Cx, inode: InodeId, index: u64) -> Result<bool, VmFault> {
    if cx.st().inodes[inode].mapping.swapped.contains_key(&index) {
        return crate::shmem::shmem_swapin(cx, inode, index).await;
    }
    shmem_alloc_page(cx, inode, index).await?;
    Ok(false)
}

/// What `filemap_fault` returns: the page, locked, with a reference for the caller.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaultPage {
    pub head: Pfn,
    pub page: Pfn,
    pub major: bool,
}

/// `filemap_fault` / `shmem_fault`: finds or reads page `index` of `inode`, returns it locked.
/// `readaround` is the read-around window in pages (1 for `MADV_RANDOM`).
pub(crate) async fn filemap_fault(
    cx: &Cx,
    inode: InodeId,
    index: u64,
    readaround: u64,
) -> Result<FaultPage, VmFault> {
    let mut major = false;
    // Read-around runs once per fault (`do_sync_mmap_readahead`); a page still missing after it
    // (reclaim took it back before the fault's lookup: a memcg of a few pages) is then created
    // and read alone, as `__filemap_get_folio(FGP_CREAT)` does, so the fault makes progress.
    let mut window = readaround;
    loop {
        cx.charge(Cost::PageCacheLookup).await;
        let (found, fs, size) = {
            let st = cx.st();
            let i = &st.inodes[inode];
            (st.page_cache_get(inode, index), i.fs, i.size_pages())
        };
        if index >= size {
            return Err(VmFault::SigBus);
        }
        let Some(head) = found else {
            match fs.page_fill().expect("a page-cache fault maps a file with a page cache") {
                // A new zeroed tmpfs page is a minor fault; a swap-in is major
                // (`shmem_swapin_folio` sets `VM_FAULT_MAJOR`).
                PageFill::AllocZeroed => major |= shmem_get_page(cx, inode, index).await?,
                PageFill::ReadFolio => {
                    major = true;
                    let start = index.saturating_sub(window / 2);
                    let end = (start + window).min(size).max(index + 1);
                    read_pages(cx, inode, start, end).await?;
                    window = 1;
                }
            }
            continue;
        };
        if !lock_faulted_folio(cx, inode, head, index + 1, major).await {
            continue; // truncated while we slept: look again (or SIGBUS past the new EOF)
        }
        let page = head + (index - cx.st().folio_index(head));
        return Ok(FaultPage { head, page, major });
    }
}

/// Takes a reference on the cached, uptodate folio `head` of `inode` that a fault found and
/// locks it, then checks that it is still in `inode`'s cache with its pages below `end` inside
/// the file (truncation may have run while the fault slept on the lock). True with the folio
/// locked and referenced, a major fault counted if `major`; false with both dropped again.
pub(crate) async fn lock_faulted_folio(
    cx: &Cx,
    inode: InodeId,
    head: Pfn,
    end: u64,
    major: bool,
) -> bool {
    cx.st().folios.get_extra(head);
    folio_lock(cx, head).await;
    let mut st = cx.st();
    if st.folios.mapping(head) != Mapping::File(inode) || end > st.inodes[inode].size_pages() {
        drop(st);
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
        return false;
    }
    debug_assert!(st.folios.test(head, pg::UPTODATE));
    if major {
        let memcg = st.folio_memcg(head);
        st.count_event(memcg, VmStat::Pgmajfault, 1);
    }
    true
}

/// `filemap_map_pages`, the page cache's `->map_pages`: maps the cached, uptodate, unlocked
/// pages of `[start, end)` (clamped to the end of the file) that have no PTE yet, each with a
/// reference of its own, under the PTE lock. Returns whether the faulting address got mapped.
pub(crate) async fn filemap_map_pages(vmf: &Vmf<'_>, start: VirtAddr, end: VirtAddr) -> bool {
    let cx = vmf.cx;
    let (inode, end, flags, writable) = {
        let st = cx.st();
        let v = st.vma(vmf.vma);
        let inode = st.file(v.file.expect("page-cache VMAs map files")).inode;
        let eof = v.address_of(st.inodes[inode].size_pages()).unwrap_or(v.end);
        let writable = v.flags.has(VmFlags::SHARED)
            && v.flags.has(VmFlags::WRITE)
            && !wants_writenotify(&st, vmf.vma);
        (inode, end.min(eof.max(v.start)), v.flags, writable)
    };
    let table = vmf.table();
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    let (mapped, hit) = {
        let mut st = cx.st();
        let mut mapped = 0;
        let mut hit = false;
        let mut a = start;
        while a < end {
            let idx = Level::Pte.index(a);
            let index = st.vma(vmf.vma).page_index(a);
            let head = st.page_cache_get(inode, index);
            if let Some(head) = head.filter(|&h| {
                st.pt.pte(table, idx).is_none()
                    && st.folios.test(h, pg::UPTODATE)
                    && !st.folios.test(h, pg::LOCKED)
            }) {
                let page = head + (index - st.folio_index(head));
                st.folios.get(head, 1);
                set_pte_range(&mut st, vmf, a, head, page, pte_bits(flags, writable, false));
                mapped += 1;
                hit |= a == vmf.address;
            }
            a = a + Bytes::PAGE;
        }
        (mapped, hit)
    };
    cx.charge_n(Cost::FaultAroundPage, mapped).await;
    hit
}

/// What a `read()` finds at one page of the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadLookup {
    /// Cached and readable; marked accessed.
    Hit(Pfn),
    /// Cached but locked (under IO or truncation).
    Busy(Pfn),
    Missing,
}

impl KState {
    /// `filemap_get_pages` for one page: a cached, unlocked folio is a hit and is marked accessed
    /// (`folio_mark_accessed`, as `filemap_read` does for each folio it copies from).
    pub(crate) fn filemap_read_lookup(&mut self, inode: InodeId, index: u64) -> ReadLookup {
        match self.page_cache_get(inode, index) {
            None => ReadLookup::Missing,
            Some(h) if self.folios.test(h, pg::LOCKED) => ReadLookup::Busy(h),
            Some(h) => {
                self.folio_mark_accessed(h);
                ReadLookup::Hit(h)
            }
        }
    }
}

/// Reads `len` bytes at `pos` of `inode` through the page cache (`filemap_read`), marking each
/// page accessed. Returns the bytes (`None` when `want_data` is false: the caller only needs the
/// accounting, and no bytes are generated) with their count. As `filemap_read` reads `i_size` again after each
/// batch of pages, a truncation during the read ends it at the new size: the readahead window is
/// clamped to `i_size`, so without that check a read of a page past the new end would find it
/// missing and ask for it again without end.
pub(crate) async fn file_read(
    cx: &Cx,
    inode: InodeId,
    pos: u64,
    len: u64,
    ra_pages: u64,
    want_data: bool,
) -> Result<(u64, Option<Vec<u8>>), VmFault> {
    let size = cx.st().inodes[inode].size;
    if pos >= size || len == 0 {
        return Ok((0, want_data.then(Vec::new)));
    }
    let mut end = (pos + len).min(size);
    let mut out = want_data.then(|| Vec::with_capacity((end - pos) as usize));
    let mut off = pos;
    while off < end {
        end = end.min(cx.st().inodes[inode].size);
        if off >= end {
            break;
        }
        let index = off / 4096;
        cx.charge(Cost::PageCacheLookup).await;
        let lookup = cx.st().filemap_read_lookup(inode, index);
        let head = match lookup {
            ReadLookup::Hit(h) => h,
            ReadLookup::Missing => {
                let fs = cx.st().inodes[inode].fs;
                match fs.page_fill().expect("pipe and DAX reads do not use the page cache") {
                    PageFill::AllocZeroed => {
                        shmem_get_page(cx, inode, index).await?;
                    }
                    PageFill::ReadFolio => {
                        // The readahead window; without one (FMODE_RANDOM, `read_ahead_kb` 0)
                        // the request itself, at most 2 MiB at a time (`force_page_cache_ra`).
                        let last = end.div_ceil(4096);
                        let window = if ra_pages == 0 { (last - index).min(512) } else { ra_pages };
                        let stop = (index + window).min(cx.st().inodes[inode].size_pages());
                        read_pages(cx, inode, index, stop).await?;
                    }
                }
                continue;
            }
            ReadLookup::Busy(h) => {
                // Under IO or truncation: wait for it, then look again.
                folio_lock(cx, h).await;
                folio_unlock(cx, h);
                continue;
            }
        };
        let chunk_end = ((index + 1) * 4096).min(end);
        let n = (chunk_end - off) as usize;
        {
            let st = cx.st();
            if let Some(out) = out.as_mut() {
                let page = head + (index - st.folio_index(head));
                let at = out.len();
                out.resize(at + n, 0);
                st.mem.read(page.0, (off % 4096) as usize, &mut out[at..]);
            }
        }
        cx.charge(Cost::UserCopy4k).await;
        off = chunk_end;
    }
    Ok((off - pos, out))
}

/// Writes `data` at `pos` of `inode` through the page cache (`generic_perform_write`): each page
/// is found or created, read first if partially overwritten and not cached, locked, copied into,
/// marked dirty. Extends `i_size`. The whole write holds the inode's `i_rwsem` for write, as
/// `generic_file_write_iter` (and ext4's and shmem's write_iter) take `inode_lock`, so truncation
/// and hole punching, which take it too, never remove a page the write is filling.
pub(crate) async fn file_write(
    cx: &Cx,
    inode: InodeId,
    pos: u64,
    data: &[u8],
) -> Result<(), VmFault> {
    let i_rwsem = cx.st().inodes[inode].i_rwsem;
    let _i = i_rwsem.write(cx).await;
    let end = pos + data.len() as u64;
    extend_unallocated(cx, inode, end);
    let mut off = pos;
    while off < end {
        let index = off / 4096;
        let chunk_end = ((index + 1) * 4096).min(end);
        let whole_page = off.is_multiple_of(4096) && chunk_end - off == 4096;
        cx.charge(Cost::PageCacheLookup).await;
        let Some(head) = cx.st().page_cache_get(inode, index) else {
            write_begin_fill(cx, inode, index, whole_page).await?;
            continue;
        };
        cx.st().folios.get_extra(head);
        folio_lock(cx, head).await;
        let still_cached = cx.st().page_cache_get(inode, index) == Some(head);
        if still_cached {
            cx.charge(Cost::UserCopy4k).await;
            let from = (off - pos) as usize;
            write_chunk(cx, inode, head, off, &data[from..from + (chunk_end - off) as usize]);
            off = chunk_end;
        }
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
    }
    Ok(())
}

/// A write reaching `end` past the end of the file: the pages it adds, and those between the old
/// end and the write, have no blocks yet (a gap reads as zeros; written pages get their blocks at
/// writeback, delayed allocation).
fn extend_unallocated(cx: &Cx, inode: InodeId, end: u64) {
    let mut st = cx.st();
    let i = &mut st.inodes[inode];
    if end > i.size {
        i.backing.punch(i.size.div_ceil(4096), end.div_ceil(4096));
    }
}

/// The page `index` of `inode` is not cached: reads it when the write covers it partly and it
/// lies inside the file, else adds a new up-to-date page (`write_begin`'s fill).
async fn write_begin_fill(
    cx: &Cx,
    inode: InodeId,
    index: u64,
    whole_page: bool,
) -> Result<(), VmFault> {
    let (fs, size) = {
        let st = cx.st();
        (st.inodes[inode].fs, st.inodes[inode].size)
    };
    let beyond_eof = index * 4096 >= size;
    if cx.st().inodes[inode].mapping.swapped.contains_key(&index) {
        // `shmem_write_begin` (SGP_WRITE) swaps the page in, whether overwritten whole or not.
        crate::shmem::shmem_swapin(cx, inode, index).await?;
        return Ok(());
    }
    if let Some(PageFill::ReadFolio) = fs.page_fill()
        && !whole_page
        && !beyond_eof
    {
        read_pages(cx, inode, index, index + 1).await?;
        return Ok(());
    }
    cx.charge(Cost::PageAlloc).await;
    let head = alloc_folio(cx, Order::BASE).await.ok_or(VmFault::Oom)?;
    let mut st = cx.st();
    if st.page_cache_get(inode, index).is_none() {
        st.folios.set(head, pg::UPTODATE);
        st.page_cache_insert(inode, index, head, true, cx.in_lru_fault());
    }
    st.put_folio_extra(head);
    Ok(())
}

/// Copies `bytes` to file offset `off` in the locked, cached folio `head`, marks it dirty and
/// extends `i_size` (`copy_page_from_iter_atomic`, `write_end`).
fn write_chunk(cx: &Cx, inode: InodeId, head: Pfn, off: u64, bytes: &[u8]) {
    let mut st = cx.st();
    let page = head + (off / 4096 - st.folio_index(head));
    st.mem.write(page.0, (off % 4096) as usize, bytes);
    st.folio_mark_dirty(head);
    let i = &mut st.inodes[inode];
    i.size = i.size.max(off + bytes.len() as u64);
}

/// Writes every dirty page of `inode` back (`filemap_write_and_wait`): one device request.
pub(crate) async fn writeback(cx: &Cx, inode: InodeId) {
    let dirty: Vec<Pfn> = {
        let st = cx.st();
        if !st.inodes[inode].fs.can_writeback() {
            return;
        }
        st.inodes[inode]
            .mapping
            .pages
            .values()
            .copied()
            .filter(|&h| st.folios.test(h, pg::DIRTY))
            .collect()
    };
    if dirty.is_empty() {
        return;
    }
    // `folio_clear_dirty_for_io`: the shared mappings are cleaned and write-protected before
    // the write (their dirty bits already moved to the folio, which is dirty).
    for &head in &dirty {
        crate::rmap::folio_mkclean(cx, head).await;
    }
    let io = cx.block_io(dirty.len() as u64);
    cx.sleep(io).await;
    let mut st = cx.st();
    for head in dirty {
        if st.folios.mapping(head) == Mapping::File(inode) {
            st.writeback_folio(inode, head);
        }
    }
}

/// `struct cachestat_range`: the bytes `cachestat(2)` asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachestatRange {
    pub off: u64,
    pub len: u64,
}

/// `struct cachestat`: what `cachestat(2)` counts, in pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cachestat {
    pub nr_cache: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub nr_evicted: u64,
    pub nr_recently_evicted: u64,
}

/// `sys_cachestat` on the descriptor `f` resolved to (its lookup's EBADF comes after ENOSYS);
/// `range` is `None` and `cstat` false for a pointer the kernel cannot copy through (EFAULT).
pub(crate) async fn cachestat(
    cx: &Cx,
    f: Result<FileId, Errno>,
    range: Option<CachestatRange>,
    cstat: bool,
    flags: u32,
) -> Result<Cachestat, Errno> {
    cx.charge(Cost::Syscall).await;
    if !era::has_cachestat(cx.kernel().version) {
        return Err(Errno::ENOSYS);
    }
    let f = f?;
    let range = range.ok_or(Errno::EFAULT)?;
    let inode = cx.st().file(f).inode;
    if cx.st().inodes[inode].fs.hugetlb_size().is_some() {
        return Err(Errno::EOPNOTSUPP);
    }
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let first = range.off >> simcore::units::PAGE_SHIFT;
    let last = match range.len {
        0 => u64::MAX,
        len => range.off.wrapping_add(len).wrapping_sub(1) >> simcore::units::PAGE_SHIFT,
    };
    let (stat, entries) = cx.st().filemap_cachestat(inode, first, last);
    cx.charge_n(Cost::PageCacheLookup, entries).await;
    if !cstat {
        return Err(Errno::EFAULT);
    }
    Ok(stat)
}

impl KState {
    /// `filemap_cachestat`: the statistics of `inode`'s page-cache pages `[first, last]`, and
    /// how many entries the walk met.
    fn filemap_cachestat(&self, inode: InodeId, first: u64, last: u64) -> (Cachestat, u64) {
        let mut cs = Cachestat::default();
        if first > last {
            return (cs, 0);
        }
        let (m, tags_dirty) = (&self.inodes[inode].mapping, self.inodes[inode].fs.can_writeback());
        // The pages of `[start, start + nr)` inside the range (a folio may straddle its ends).
        let covered = |start: u64, nr: u64| (start + nr - 1).min(last) - start.max(first) + 1;
        // `xas_for_each` from `first` meets a large folio that starts before it.
        let straddling = self.page_cache_get(inode, first).map(|h| (self.folio_index(h), h));
        let straddling = straddling.filter(|&(start, _)| start < first);
        let entries = straddling.map(|(s, h)| (s, Entry::Folio(h))).into_iter();
        let mut walked = 0;
        for (index, entry) in entries.chain(m.pages.entries(first..=last)) {
            walked += 1;
            match entry {
                Entry::Folio(head) => {
                    let nr = covered(index, self.folios.order(head).pages());
                    cs.nr_cache += nr;
                    if tags_dirty && self.folios.test(head, pg::DIRTY) {
                        cs.nr_dirty += nr;
                    }
                    if self.folios.test(head, pg::WRITEBACK) {
                        cs.nr_writeback += nr;
                    }
                }
                Entry::Shadow(shadow) => self.cachestat_evicted(&mut cs, Some(shadow)),
            }
        }
        for (_, &slot) in m.swapped.range(first..=last) {
            walked += 1;
            self.cachestat_evicted(&mut cs, self.shadow_at(ShadowSlot::Swap(slot)));
        }
        (cs, walked)
    }

    /// Counts an evicted page whose shadow, if any, is `shadow` (`filemap_cachestat` asks
    /// `workingset_test_recent` as for a file page, whatever the page was).
    fn cachestat_evicted(&self, cs: &mut Cachestat, shadow: Option<Shadow>) {
        cs.nr_evicted += 1;
        if shadow.is_some_and(|s| self.workingset_test_recent(&s, true)) {
            cs.nr_recently_evicted += 1;
        }
    }
}
