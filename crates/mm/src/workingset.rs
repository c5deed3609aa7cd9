//! Workingset detection: shadow entries and refault distances (`mm/workingset.c`, Linux v6.8,
//! with the multi-gen LRU's `lru_gen_eviction` / `lru_gen_refault` of v6.1-v6.6 and v6.7+;
//! `docs/reference/lru-semantics.md` sections 1 and 2).
//!
//! The design essay at the top of `mm/workingset.c` ("Double CLOCK lists") in short: every
//! lruvec counts the pages it evicted or activated (`nonresident_age`). When reclaim evicts a
//! page-cache folio, a *shadow entry* takes its place in the page cache (a swap-cache slot for an
//! anonymous folio) recording the memory cgroup, that counter and whether the folio was part of
//! the workingset (`PG_workingset`). When the page is faulted or read back (a *refault*), the
//! distance between the counter now and the one recorded is how many pages the page would have
//! needed to stay resident; if that fits in the workingset (the active file list, plus the anon
//! lists when swap can take anon pages; for an anon refault the file lists and active anon), the
//! refaulting folio goes straight to the active list and the lruvec's clock advances again.
//! `workingset_refault_*` counts every refault with a shadow, `workingset_activate_*` the
//! activated ones, `workingset_restore_*` those that had been workingset.
//!
//! The multi-gen LRU keeps a different token: the oldest generation's sequence number at the
//! eviction and the folio's reference count (its tier). A refault is *recent* when that
//! generation is still the oldest (v6.1-v6.13) or within `MAX_NR_GENS` of the youngest (v6.14);
//! recent refaults feed the tier's `refaulted` counter of the PID controller and restore the
//! folio's workingset bit or references; which refaults count as refaults, activations and
//! restores changed in v6.5, v6.7 and v6.14 (`mglru.rs`, `lru_gen_refault`).
//!
//! Shadow entries are bounded per memory cgroup as the shadow-node shrinker bounds them
//! (`count_shadow_nodes`: `pages >> 3` xarray nodes of 64 slots, so at most eight shadows per
//! page on the cgroup's LRU lists); the oldest shadows go first.
//!
//! Approximations: the eviction counter is stored whole (the kernel's `bucket_order` is zero
//! below 2^40 pages, so this loses nothing a simulated machine could show); the shrinker drops
//! single shadows in eviction order instead of whole xarray nodes in node-LRU order;
//! `lru_note_cost_refault` (the refault cost feeding `get_scan_count`) is not kept.

use crate::folio::{LruList, pg};
use crate::types::swap::{MemcgShadows, Shadow, ShadowSlot, Workingset};

use crate::kernel::KState;
use crate::memcontrol::ROOT_MEMCG;
use crate::types::fs::Inode;
use crate::types::ids::InodeId;
use crate::types::ids::MemcgId;
use crate::vmstat::VmStat;
use crate::xarray::Entry;
use simcore::{IdVec, Pfn};

/// The inodes, whose page caches hold the page-cache shadows.
type Inodes = IdVec<InodeId, Inode>;

/// `memcg`'s entry of `per_memcg`, made when missing.
fn shadows_of(per_memcg: &mut Vec<MemcgShadows>, memcg: MemcgId) -> &mut MemcgShadows {
    let i = memcg.0 as usize;
    if i >= per_memcg.len() {
        per_memcg.resize_with(i + 1, MemcgShadows::default);
    }
    &mut per_memcg[i]
}

impl Workingset {
    /// The shadow at a slot.
    pub fn get(&self, inodes: &Inodes, slot: ShadowSlot) -> Option<Shadow> {
        match slot {
            ShadowSlot::PageCache(i, idx) => inodes[i].mapping.pages.shadow(idx),
            ShadowSlot::Swap(s) => self.swap.get(&s).copied(),
        }
    }

    /// Every shadow with its slot (for checkers): page-cache ones by inode and index, then swap.
    pub fn iter<'a>(
        &'a self,
        inodes: &'a Inodes,
    ) -> impl Iterator<Item = (ShadowSlot, Shadow)> + 'a {
        let pc = inodes.iter().flat_map(|(i, inode)| {
            inode.mapping.pages.shadows(..).map(move |(x, s)| (ShadowSlot::PageCache(i, x), s))
        });
        pc.chain(self.swap.iter().map(|(&s, &sh)| (ShadowSlot::Swap(s), sh)))
    }

    /// Live shadows charged to `memcg`.
    pub fn count(&self, memcg: MemcgId) -> u64 {
        self.per_memcg.get(memcg.0 as usize).map_or(0, |m| m.count)
    }

    fn take(&mut self, inodes: &mut Inodes, slot: ShadowSlot) -> Option<Shadow> {
        self.take_stamped(inodes, slot, None)
    }

    /// Takes the shadow at `slot` if there is one (stamped `stamp`, when given).
    fn take_stamped(
        &mut self,
        inodes: &mut Inodes,
        slot: ShadowSlot,
        stamp: Option<u64>,
    ) -> Option<Shadow> {
        let wanted = |s: &Shadow| stamp.is_none_or(|t| s.stamp == t);
        let s = match slot {
            ShadowSlot::PageCache(i, idx) => {
                let pages = &mut inodes[i].mapping.pages;
                let shadow = pages.shadow(idx).filter(wanted)?;
                pages.store(idx, None);
                Some(shadow)
            }
            ShadowSlot::Swap(s) => {
                self.swap.get(&s).filter(|sh| wanted(sh))?;
                self.swap.remove(&s)
            }
        }?;
        self.uncount(&s);
        Some(s)
    }

    fn uncount(&mut self, shadow: &Shadow) {
        let m = self.per_memcg.get_mut(shadow.memcg.0 as usize).expect("a shadow is counted");
        m.count -= 1;
    }

    /// Stores `shadow` at `slot`: a page-cache slot must hold no folio (reclaim stores the
    /// shadow once the folio has left it).
    fn put(&mut self, inodes: &mut Inodes, slot: ShadowSlot, shadow: Shadow) {
        let shadow = self.stamped(shadow);
        let old = match slot {
            ShadowSlot::PageCache(i, idx) => {
                match inodes[i].mapping.pages.store(idx, Some(Entry::Shadow(shadow))) {
                    Some(Entry::Shadow(old)) => Some(old),
                    Some(Entry::Folio(_)) => panic!("a shadow stored over a cached folio"),
                    None => None,
                }
            }
            ShadowSlot::Swap(s) => self.swap.insert(s, shadow),
        };
        if let Some(old) = old {
            self.uncount(&old);
        }
        self.record(slot, shadow);
    }

    /// `shadow` with the next stamp: its place in the shrinker's order.
    fn stamped(&mut self, mut shadow: Shadow) -> Shadow {
        shadow.stamp = self.next_stamp;
        self.next_stamp += 1;
        shadow
    }

    /// Counts a stamped shadow just stored at `slot` (over no other shadow) and queues it for
    /// the shrinker.
    fn record(&mut self, slot: ShadowSlot, shadow: Shadow) {
        let m = shadows_of(&mut self.per_memcg, shadow.memcg);
        m.count += 1;
        m.order.push_back((slot, shadow.stamp));
    }

    /// Drops the oldest shadows of `memcg` beyond `limit`.
    fn shrink(&mut self, inodes: &mut Inodes, memcg: MemcgId, limit: u64) {
        while self.count(memcg) > limit {
            let Some((slot, stamp)) = shadows_of(&mut self.per_memcg, memcg).order.pop_front()
            else {
                return;
            };
            self.take_stamped(inodes, slot, Some(stamp));
        }
        // Keep the order queue proportional to the live shadows.
        let q = &mut shadows_of(&mut self.per_memcg, memcg).order;
        if q.len() as u64 > 2 * limit.max(64) {
            let swap = &self.swap;
            let live = |(slot, stamp): &(ShadowSlot, u64)| match *slot {
                ShadowSlot::PageCache(i, idx) => {
                    inodes[i].mapping.pages.shadow(idx).is_some_and(|s| s.stamp == *stamp)
                }
                ShadowSlot::Swap(s) => swap.get(&s).is_some_and(|sh| sh.stamp == *stamp),
            };
            q.retain(live);
        }
    }

    /// Drops the page-cache shadows of `inode` at pages `[from, end)` (truncation, hole punch).
    fn truncate(&mut self, inodes: &mut Inodes, inode: InodeId, from: u64, end: u64) {
        if from >= end {
            return;
        }
        let pages = &inodes[inode].mapping.pages;
        let keys: Vec<u64> = pages.shadows(from..end).map(|(idx, _)| idx).collect();
        for idx in keys {
            self.take(inodes, ShadowSlot::PageCache(inode, idx));
        }
    }

    /// Drops the shadow of a freed swap slot (`clear_shadow_from_swap_cache`).
    pub(crate) fn clear_swap(&mut self, slot: u64) {
        if let Some(s) = self.swap.remove(&slot) {
            self.uncount(&s);
        }
    }
}
impl KState {
    /// `workingset_age_nonresident`: advances the clock of `memcg`'s lruvec and its ancestors'.
    pub(crate) fn workingset_age_nonresident(&mut self, memcg: MemcgId, nr: u64) {
        self.memcg_for_each_ancestor(memcg, |_, m| m.lruvec.nonresident_age += nr);
        self.memcgs[ROOT_MEMCG].lruvec.nonresident_age += nr;
    }

    /// `workingset_activation`: an activation through `folio_mark_accessed` ages the lruvec.
    pub(crate) fn workingset_activation(&mut self, head: Pfn) {
        let nr = self.folios.order(head).pages();
        self.workingset_age_nonresident(self.folio_memcg(head), nr);
    }

    /// Stores the shadow `workingset_eviction` made of a folio (`lru_eviction_shadow`) in
    /// `slot`, which the folio has left, and applies the shrinker's bound to the shadow's memory
    /// cgroup (the folio's).
    pub(crate) fn workingset_store(&mut self, slot: ShadowSlot, shadow: Shadow) {
        self.workingset.put(&mut self.inodes, slot, shadow);
        self.workingset_shrink(shadow.memcg);
    }

    /// [`KState::workingset_store`] of a page-cache folio's shadow in the same store that takes
    /// the folio out of its slot (`page_cache_delete`'s `xas_store(&xas, shadow)`): the folio is
    /// deleted as [`KState::page_cache_delete`] does.
    pub(crate) fn page_cache_evict(&mut self, inode: InodeId, head: Pfn, shadow: Shadow) {
        let index = self.folio_index(head);
        let shadow = self.workingset.stamped(shadow);
        self.page_cache_replace_folio(inode, head, Some(shadow));
        self.workingset.record(ShadowSlot::PageCache(inode, index), shadow);
        self.workingset_shrink(shadow.memcg);
    }

    /// The shrinker's bound on the shadows of `memcg` (`count_shadow_nodes`: eight per page on
    /// its LRU lists).
    fn workingset_shrink(&mut self, memcg: MemcgId) {
        let limit = 8 * self.memcg_lru_pages(memcg).max(1);
        self.workingset.shrink(&mut self.inodes, memcg, limit);
    }

    /// A shadow a folio's insertion replaced in its slot (`__filemap_add_folio` hands it back
    /// for `workingset_refault`): no longer counted.
    pub(crate) fn workingset_forget(&mut self, shadow: &Shadow) {
        self.workingset.uncount(shadow);
    }

    /// The shadow at `slot`.
    pub fn shadow_at(&self, slot: ShadowSlot) -> Option<Shadow> {
        self.workingset.get(&self.inodes, slot)
    }

    /// Every shadow with its slot (for checkers).
    pub fn shadows(&self) -> impl Iterator<Item = (ShadowSlot, Shadow)> + '_ {
        self.workingset.iter(&self.inodes)
    }

    /// Drops the page-cache shadows of `inode` at pages `[from, end)` (truncation, hole punch).
    pub(crate) fn workingset_truncate(&mut self, inode: InodeId, from: u64, end: u64) {
        self.workingset.truncate(&mut self.inodes, inode, from, end);
    }

    /// The classic LRU's shadow of a folio being evicted: the lruvec's `nonresident_age`, after
    /// counting the eviction in it.
    pub(crate) fn workingset_shadow(&mut self, head: Pfn) -> Shadow {
        let memcg = self.folio_memcg(head);
        let nr = self.folios.order(head).pages();
        self.workingset_age_nonresident(memcg, nr);
        Shadow {
            memcg,
            eviction: self.memcgs[memcg].lruvec.nonresident_age,
            workingset: self.folios.test(head, pg::WORKINGSET),
            stamp: 0,
        }
    }

    /// Pages on every list of `memcg`'s lruvec.
    fn memcg_lru_pages(&self, memcg: MemcgId) -> u64 {
        self.lruvec_all_lists(memcg).map(|l| self.folios.list_pages(l)).sum()
    }

    /// A multi-gen LRU shadow (built by `mglru.rs`).
    pub(crate) fn make_shadow(memcg: MemcgId, eviction: u64, workingset: bool) -> Shadow {
        Shadow { memcg, eviction, workingset, stamp: 0 }
    }

    /// Takes the shadow at `slot`, if any (the folio now being added replaces it).
    pub(crate) fn take_shadow(&mut self, slot: ShadowSlot) -> Option<Shadow> {
        self.workingset.take(&mut self.inodes, slot)
    }

    /// `workingset_test_recent` for the classic LRU: whether the refault distance fits in the
    /// workingset of the lruvec the page was evicted from.
    pub(crate) fn workingset_test_recent_classic(&self, shadow: &Shadow, file: bool) -> bool {
        let m = shadow.memcg;
        let refault = self.memcgs[m].lruvec.nonresident_age;
        let distance = refault.wrapping_sub(shadow.eviction);
        let size =
            |l: LruList| self.memcg_subtree(m).map(|s| self.lruvec_lru_pages(s, l)).sum::<u64>();
        let mut workingset = size(LruList::ActiveFile);
        if !file {
            workingset += size(LruList::InactiveFile);
        }
        if self.swap.nr_free() > 0 {
            workingset += size(LruList::ActiveAnon);
            if file {
                workingset += size(LruList::InactiveAnon);
            }
        }
        distance <= workingset
    }

    /// Counts a refault of `head` (`WORKINGSET_REFAULT_{ANON,FILE}`).
    pub(crate) fn workingset_count_refault(&mut self, head: Pfn) {
        let file = self.folio_is_file_lru(head);
        let nr = self.folios.order(head).pages();
        let memcg = self.folio_memcg(head);
        self.count_event(memcg, Self::refault_keys(file).0, nr);
    }

    /// `workingset_refault` for the classic LRU: counted, then made active (before it is added
    /// to the LRU) if its refault distance fits in the workingset.
    pub(crate) fn workingset_refault_classic(&mut self, head: Pfn, shadow: Shadow) {
        self.workingset_count_refault(head);
        let file = self.folio_is_file_lru(head);
        let nr = self.folios.order(head).pages();
        let memcg = self.folio_memcg(head);
        let (_, activate, restore) = Self::refault_keys(file);
        if !self.workingset_test_recent_classic(&shadow, file) {
            return;
        }
        self.folios.set(head, pg::ACTIVE);
        self.workingset_age_nonresident(memcg, nr);
        self.count_event(memcg, activate, nr);
        if shadow.workingset {
            self.folios.set(head, pg::WORKINGSET);
            self.count_event(memcg, restore, nr);
        }
    }

    /// The refault counters of a type (for the multi-gen LRU's accounting).
    pub(crate) fn refault_keys(file: bool) -> (VmStat, VmStat, VmStat) {
        if file {
            (
                VmStat::WorkingsetRefaultFile,
                VmStat::WorkingsetActivateFile,
                VmStat::WorkingsetRestoreFile,
            )
        } else {
            (
                VmStat::WorkingsetRefaultAnon,
                VmStat::WorkingsetActivateAnon,
                VmStat::WorkingsetRestoreAnon,
            )
        }
    }
}
