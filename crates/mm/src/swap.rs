//! Anonymous swap: the swap device, its slot map, and the swap cache (`mm/swapfile.c`,
//! `mm/swap_state.c`, `mm/page_io.c`; Linux v6.8, with v6.12's zeromap).
//!
//! A swap slot counts the PTEs that hold its swap entry (`swap_map`), plus a flag while a folio
//! for it sits in the swap cache (`SWAP_HAS_CACHE`). The swap cache maps slots to folios; a folio
//! in it has `PG_swapcache`, its slot recorded beside it, and one cache reference per page, as a
//! page-cache folio has. The device stores the contents written to each slot.
//!
//! A slot whose folio reclaim evicted keeps a shadow entry (`workingset.rs`) until the slot is
//! freed; a swap-in finds it and evaluates the refault before the folio joins its LRU.
//!
//! Slot 0 holds the swap header and is never allocated (`setup_swap_map` marks it
//! `SWAP_MAP_BAD` and `nr_good_pages` leaves it out, mm/swapfile.c v6.8), so a device of N pages
//! has N - 1 usable slots, and no swap entry is ever all zero bits (type 0, offset 0), which a
//! PTE could not tell from `pte_none`.
//!
//! A PMD-sized anonymous THP that reclaim swaps out whole (v4.13+, `CONFIG_THP_SWAP`,
//! `era::thp_swap_out`) takes one swap cluster: 512 free slots aligned to 512
//! (`SWAPFILE_CLUSTER`, `get_swap_pages` with `swap_alloc_cluster`; cluster 0 holds the header
//! and is never whole). The swap cache then maps each of its slots to the one folio (the
//! kernel's per-index entries of a large folio), and its slot is the first; written whole it
//! counts `pswpout` per page and `thp_swpout` once (`count_swpout_vm_event`, v4.14+). When no
//! cluster is free the caller falls back to splitting. Swap-in stays per 4 KiB page: no
//! anonymous THP swap-in before the mTHP swap-in of v6.10+, which the model does not have.
//!
//! A slot's map byte counts up to `SWAP_MAP_MAX` (0x3e) references; past it the kernel carries
//! the count on continuation pages (`add_swap_count_continuation`, `COUNT_CONTINUED`), so a swap
//! entry can be shared by any number of forks. The model keeps the carried part beside the map
//! (`continued`), one number per slot where the kernel keeps digits on chained pages; the
//! continuation page's allocation (which can fail and make `copy_pte_range` retry) is not
//! modelled.
//!
//! Zero-filled folios (v6.12, "mm: store zero pages to be swapped out in a bitmap", 0ca0c24e3211,
//! `era::swap_zeromap`): `swap_writepage` (mm/page_io.c) looks at a swap-cache folio's contents
//! before it writes, and a folio of zeros is not written: its slots are marked in the device's
//! zeromap, `swpout_zero` counts its pages, and neither `pswpout` nor `thp_swpout` nor the
//! per-size `swpout` counts it (those are counted where the write is issued,
//! `__swap_writepage`). The slots stay allocated and the PTEs hold their swap entries as usual.
//! A folio with data clears its slots' marks and is written. A swap-in of a marked slot
//! (`swap_read_folio_zeromap`) fills the page with zeros without a read: `swpin_zero`, no
//! `pswpin`, and the fault is still major. Freeing a slot clears its mark (`swap_range_free`).
//! Shmem swaps out through the same `swap_writepage` (`shmem_writepage`).
//!
//! Approximations: one swap device of type 0; slots are allocated lowest-first (the kernel uses
//! per-CPU clusters); no swap readahead (`page-cluster`) and no zswap. A zero-filled folio that
//! the zeromap spares the write still waits for the device as a written one does (the callers'
//! I/O waits, `vmscan.rs`, `fault.rs`, `shmem.rs`, `madvise.rs`, do not ask), and still passes
//! through writeback in reclaim, where the kernel's folio stays clean and unlocked.

use crate::folio::pg;
use crate::kernel::{Cx, KState};
use crate::sim::content::Content;
use crate::types::swap::ShadowSlot;
use crate::types::swap::SwapDevice;
use crate::vmstat::VmStat;
use simcore::Pfn;

/// `SWAP_HAS_CACHE` in the slot map.
const HAS_CACHE: u8 = 0x40;
/// `SWAP_MAP_MAX`: the most references a map byte holds before the count continues.
const SWAP_MAP_MAX: u8 = 0x3e;

impl SwapDevice {
    /// A device of `slots` pages (0: no swap), the first of them its header.
    pub fn new(slots: u64) -> SwapDevice {
        // The header's slot is used from the start: never in `free`, never freed.
        let map = if slots > 0 { vec![0] } else { Vec::new() };
        SwapDevice { slots, map, ..SwapDevice::default() }
    }

    /// Usable slots (`SwapTotal`): every page but the header.
    pub fn total(&self) -> u64 {
        self.slots.saturating_sub(1)
    }

    /// Slots used at some point of the run (those past it have never been used).
    pub fn high_water(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn nr_free(&self) -> u64 {
        self.free.len() as u64 + (self.slots - self.high_water())
    }

    /// The lowest free slot, taken (`None` when the device is full).
    fn take_free(&mut self) -> Option<u64> {
        if let Some(slot) = self.free.pop_first() {
            return Some(slot);
        }
        (self.high_water() < self.slots).then(|| {
            self.map.push(0);
            self.high_water() - 1
        })
    }

    /// Whether `slot` has never been used or was freed.
    fn is_free(&self, slot: u64) -> bool {
        slot >= self.high_water() || self.free.contains(&slot)
    }

    /// The lowest free, aligned cluster of `nr` slots, taken (`swap_alloc_cluster`).
    fn take_cluster(&mut self, nr: u64) -> Option<u64> {
        let first = (1..self.slots / nr)
            .map(|c| c * nr)
            .find(|&lo| (lo..lo + nr).all(|s| self.is_free(s)))?;
        while self.high_water() < first + nr {
            let s = self.high_water();
            self.map.push(0);
            self.free.insert(s);
        }
        for s in first..first + nr {
            self.free.remove(&s);
        }
        Some(first)
    }

    /// PTE references of a slot (`swap_count`, with its continuation).
    pub fn count(&self, slot: u64) -> u32 {
        u32::from(self.map[slot as usize] & !HAS_CACHE)
            + self.continued.get(&slot).copied().unwrap_or(0)
    }

    pub fn has_cache(&self, slot: u64) -> bool {
        self.map[slot as usize] & HAS_CACHE != 0
    }

    /// The swap-cache folio of a slot.
    pub fn cached(&self, slot: u64) -> Option<Pfn> {
        self.cache.get(&slot).copied()
    }

    pub fn slot_of(&self, folio: Pfn) -> Option<u64> {
        self.slot_of.get(&folio.0).copied()
    }

    /// Every swap-cache folio with its slot.
    pub fn cache_iter(&self) -> impl Iterator<Item = (u64, Pfn)> + '_ {
        self.cache.iter().map(|(&s, &p)| (s, p))
    }

    pub fn read(&self, slot: u64) -> Option<&Content> {
        self.data.get(&slot)
    }

    /// A split swap-cache folio's `page` owns `slot` now.
    pub(crate) fn split_cached(&mut self, page: Pfn, slot: u64) {
        self.cache.insert(slot, page);
        self.slot_of.insert(page.0, slot);
    }

    /// Usage above half the device (`mem_cgroup_swap_full` without memcg limits).
    pub fn is_full(&self) -> bool {
        self.nr_free() * 2 < self.total()
    }

    /// Frees the slot if nothing refers to it; returns whether it did.
    fn maybe_free(&mut self, slot: u64) -> bool {
        if self.map[slot as usize] == 0 {
            self.data.remove(&slot);
            self.zeromap.remove(&slot);
            self.free.insert(slot);
            return true;
        }
        false
    }
}

impl KState {
    /// `folio_alloc_swap` + `add_to_swap_cache`: gives a swap-backed folio (anonymous, or shmem
    /// in `shmem_writepage`) a slot and puts it in the swap cache; `None` when swap is full (or
    /// there is none: `shmem_writepage` checks `total_swap_pages` first).
    /// A large folio takes a whole cluster (the module note).
    pub(crate) fn add_to_swap(&mut self, head: Pfn) -> Option<u64> {
        debug_assert!(
            self.folios.test(head, pg::SWAPBACKED) && !self.folios.test(head, pg::SWAPCACHE)
        );
        let nr = self.folios.order(head).pages();
        let slot = if nr == 1 { self.swap.take_free()? } else { self.swap.take_cluster(nr)? };
        for s in slot..slot + nr {
            self.swap.map[s as usize] = HAS_CACHE;
        }
        self.swap_cache_insert(head, slot);
        self.folios.set(head, pg::DIRTY);
        Some(slot)
    }

    /// Puts `head` in the swap cache at `slot` and the slots after it, one per page (the
    /// caller set `HAS_CACHE`).
    pub(crate) fn swap_cache_insert(&mut self, head: Pfn, slot: u64) {
        let nr = self.folios.order(head).pages();
        for s in slot..slot + nr {
            self.swap.cache.insert(s, head);
        }
        self.swap.slot_of.insert(head.0, slot);
        self.folios.set(head, pg::SWAPCACHE | pg::SWAPBACKED);
        self.folios.get(head, nr as u32);
        self.vmstat.add(VmStat::NrSwapcached, nr);
    }

    /// `delete_from_swap_cache`: drops the cache's reference and the slot's cache flag.
    pub(crate) fn swap_cache_delete(&mut self, head: Pfn) {
        let first = self.swap.slot_of.remove(&head.0).expect("folio is not in the swap cache");
        self.folios.clear_flag(head, pg::SWAPCACHE);
        let nr = self.folios.order(head).pages();
        for slot in first..first + nr {
            assert_eq!(self.swap.cache.remove(&slot), Some(head));
            self.swap.map[slot as usize] &= !HAS_CACHE;
            if self.swap.maybe_free(slot) {
                self.workingset.clear_swap(slot);
            }
        }
        self.vmstat.sub(VmStat::NrSwapcached, nr);
        self.put_folio(head, nr as u32);
    }

    /// `folio_free_swap`: if no PTE refers to the folio's slot any more, drops it from the swap
    /// cache (and frees the slot). Returns whether it did.
    pub(crate) fn folio_free_swap(&mut self, head: Pfn) -> bool {
        let Some(slot) = self.swap.slot_of(head) else { return false };
        let nr = self.folios.order(head).pages();
        if (slot..slot + nr).any(|s| self.swap.count(s) != 0)
            || self.folios.test(head, pg::WRITEBACK)
        {
            return false;
        }
        self.swap_cache_delete(head);
        self.folios.set(head, pg::DIRTY);
        true
    }

    /// `swap_duplicate`: one more PTE refers to `slot`; past `SWAP_MAP_MAX` the count continues
    /// (`swap_count_continued`).
    pub(crate) fn swap_duplicate(&mut self, slot: u64) {
        let m = &mut self.swap.map[slot as usize];
        if *m & !HAS_CACHE < SWAP_MAP_MAX {
            *m += 1;
        } else {
            *self.swap.continued.entry(slot).or_insert(0) += 1;
        }
    }

    /// `swap_free`: a PTE no longer refers to `slot` (the continued count first).
    pub(crate) fn swap_free(&mut self, slot: u64) {
        if let Some(c) = self.swap.continued.get_mut(&slot) {
            *c -= 1;
            if *c == 0 {
                self.swap.continued.remove(&slot);
            }
            return;
        }
        let m = &mut self.swap.map[slot as usize];
        assert!(*m & !HAS_CACHE > 0, "swap_free of unused slot {slot}");
        *m -= 1;
        if self.swap.maybe_free(slot) {
            self.workingset.clear_swap(slot);
        }
    }

    /// `free_swap_and_cache`: a swap entry goes (from a PTE or from shmem's page cache); a
    /// swap-cache folio nobody maps or refers to any more leaves the cache if its lock can be
    /// had at once (`__try_to_reclaim_swap`).
    pub(crate) fn free_swap_and_cache(&mut self, slot: u64) {
        self.swap_free(slot);
        if let Some(head) = self.swap.cached(slot)
            && self.swap.count(slot) == 0
            && self.folios.folio_mapcount(head) == 0
        {
            self.folios.get_extra(head);
            if crate::folio::folio_trylock(&mut self.folios, head) {
                self.folio_free_swap(head);
                self.folios.clear_flag(head, pg::LOCKED);
            }
            self.put_folio_extra(head);
        }
    }

    /// `swap_writepage` of a swap-cache folio: from v6.12 a folio of zeros only marks its slots
    /// in the zeromap (`swap_zeromap_folio_set`, counting `swpout_zero`); any other folio clears
    /// its slots' marks (`swap_zeromap_folio_clear`) and its contents are written to them,
    /// counting `pswpout` per page and, for a THP, `thp_swpout` (`__swap_writepage`,
    /// `count_swpout_vm_event`). The module note.
    pub(crate) fn swap_write(&mut self, head: Pfn) {
        let first = self.swap.slot_of(head).expect("writing a folio not in the swap cache");
        let nr = self.folios.order(head).pages();
        self.folios.clear_flag(head, pg::DIRTY);
        if crate::era::swap_zeromap(self.thp.kernel) && self.folio_zero_filled(head) {
            for slot in first..first + nr {
                self.swap.data.remove(&slot);
                self.swap.zeromap.insert(slot);
            }
            let memcg = self.folio_memcg(head);
            self.count_event(memcg, VmStat::SwpoutZero, nr);
            return;
        }
        for i in 0..nr {
            let slot = first + i;
            self.swap.zeromap.remove(&slot);
            match self.mem.get(head.0 + i).cloned() {
                Some(c) => {
                    self.swap.data.insert(slot, c);
                }
                None => {
                    self.swap.data.remove(&slot);
                }
            }
        }
        self.vmstat.add(VmStat::Pswpout, nr);
        let order = self.folios.order(head);
        if order == simcore::Order::PMD {
            self.vmstat.inc(VmStat::ThpSwpout);
        }
        self.count_mthp_stat(order, crate::types::huge_mm::MthpStat::Swpout);
    }

    /// `is_folio_zero_filled`: every page of the folio `head` reads as zeros.
    pub(crate) fn folio_zero_filled(&self, head: Pfn) -> bool {
        (0..self.folios.order(head).pages()).all(|i| self.page_zero_filled(head + i))
    }

    /// Whether `page` holds only zeros (`memchr_inv` over it). The content store keeps nothing
    /// for such a page, but explicit bytes can be zeros (a file block written as zeros, copied
    /// by a COW); a pattern never is (its words come from a bijection of distinct inputs, so at
    /// most one of them is zero).
    pub(crate) fn page_zero_filled(&self, page: Pfn) -> bool {
        match self.mem.get(page.0) {
            None => true,
            Some(Content::Bytes(bytes)) => bytes.iter().all(|&b| b == 0),
            Some(Content::Pattern(_)) => false,
        }
    }

    /// Puts a newly allocated folio in the swap cache for `slot` and fills it from the device
    /// (`__read_swap_cache_async` + `swap_read_folio`); the folio is locked until the caller has
    /// waited for the IO. A slot in the zeromap (v6.12) is filled with zeros without a read,
    /// counting `swpin_zero` instead of `pswpin` (`swap_read_folio_zeromap`). `in_lru_fault` is
    /// the faulting task's hint (`Cx::in_lru_fault`).
    pub(crate) fn swapin_new(&mut self, slot: u64, head: Pfn, in_lru_fault: bool) {
        debug_assert!(self.swap.cached(slot).is_none());
        self.swap.map[slot as usize] |= HAS_CACHE;
        self.swap_cache_insert(head, slot);
        let content = self.swap.read(slot).cloned();
        self.mem.set(head.0, content);
        self.folios.set(head, pg::LOCKED | pg::UPTODATE);
        if let Some(shadow) = self.take_shadow(ShadowSlot::Swap(slot)) {
            self.workingset_refault(head, shadow, in_lru_fault);
        }
        self.folio_add_lru(head, in_lru_fault);
        if self.swap.zeromap.contains(&slot) {
            let memcg = self.folio_memcg(head);
            self.count_event(memcg, VmStat::SwpinZero, 1);
        } else {
            self.vmstat.inc(VmStat::Pswpin);
        }
    }
}

/// A THP that reclaim wrote whole (v4.14+) and could not free is still in the swap cache: the
/// kernel maps the one page the fault wants from the large folio; the model splits it (once its
/// writeback has ended) and the fault retries, finding that page's own folio (an
/// approximation: the split the kernel does not do counts `thp_split_page`; a split that fails
/// is retried by the next fault). Entered with the folio locked and held by the fault.
pub(crate) async fn split_swapcache_thp(cx: &Cx, head: Pfn) {
    while cx.st().folios.test(head, pg::WRITEBACK) {
        cx.kernel().folio_waitqueue(head).wait(cx).await;
    }
    // `EAGAIN` (someone else holds it): the access retries.
    let _ = crate::huge_memory::split::split_folio(cx, head).await;
}
