//! Putting folios on LRU lists and marking them accessed (`mm/swap.c`, `include/linux/mm_inline.h`,
//! Linux v6.8 with the multi-gen LRU of v6.1-v6.13 and, from v6.14, its reworked tiers;
//! `docs/reference/lru-semantics.md` sections 1 and 2), and the reclaim policy seam.
//!
//! - Which list a folio belongs on: `folio_lru_list` for the classic LRU (unevictable; anon or
//!   file by `PG_swapbacked`; active by `PG_active`), a generation list for the multi-gen LRU
//!   (`lru_gen_add_folio` with `lru_gen_folio_seq`: the generation follows `PG_active`, the
//!   fault hint, the swap cache, `PG_reclaim` and, from v6.14, `PG_workingset`).
//! - `folio_add_lru`: a new folio goes to its lruvec (the one of the memory cgroup it is charged
//!   to). With the multi-gen LRU a folio added during a fault whose VMA has recency
//!   (`current->in_lru_fault`, set by `lru_gen_enter_fault`) is made active first, so it lands
//!   in a young generation. The hint is the task's (`Cx::in_lru_fault`): the paths that add a
//!   folio (`page_cache_insert`, `swapin_new`, `map_new_anon`) pass it in.
//! - `folio_mark_accessed` (the read/write path, unmap of a young PTE): the classic two-touch
//!   activation (bumping `nonresident_age` through `workingset_activation`), or the multi-generation
//!   LRU's reference counter (`lru_gen_inc_refs` / `folio_inc_refs`).
//! - `folio_deactivate` (`MADV_COLD`) and the isolation helpers reclaim uses.
//! - The per-CPU lazyfree batch (`cpu_fbatches.lru_lazyfree`; `folio_mark_lazyfree`,
//!   `lru_lazyfree`, `lru_add_drain_cpu`, `lru_add_drain`, `lru_add_drain_all`; read in the
//!   v6.8, v6.12 and v6.18 sources): since v4.12 ("mm: move MADV_FREE pages into
//!   LRU_INACTIVE_FILE list", f7ad2a6cb9f7) `MADV_FREE` does not move a folio itself but adds it,
//!   with a reference, to its CPU's batch, and only the batch's drain moves it to the inactive
//!   file list, clears `PG_swapbacked` (so smaps counts it in `LazyFree`) and counts
//!   `pglazyfree`, if it is still an evictable, swap-backed anonymous folio on an LRU list
//!   outside the swap cache. A batch drains when it fills (`era::lru_batch_size`: 14, 15 from
//!   v4.16, 31 from v6.9) or takes a large folio; `lru_add_drain` drains the calling task's CPU's
//!   batch (`madvise_free_single_vma`, `madvise_cold`, `madvise_pageout` before their walks,
//!   reclaim as it shrinks an lruvec, a zap before it frees pages, as `unmap_region`,
//!   `exit_mmap` and `zap_page_range_single` do), `lru_add_drain_all` every CPU's (ksmd at the
//!   start of a full scan, khugepaged at the start of a round and `MADV_COLLAPSE`).
//!
//! **The reclaim policy** ([`Reclaim`]) is chosen once per machine from the `lru` switch and
//! answers, here and only here, with exhaustive `match`es, every question on which the policies
//! differ: where a folio is added, what an access does, the shadow an eviction leaves and what a
//! refault does, what a young PTE found by rmap does, how one lruvec is shrunk, how a folio's
//! references are judged, kswapd's aging, the charge's reclaim target. Each policy's code lives
//! in its own module: the classic LRU in `vmscan.rs` (and the `mm/swap.c` parts here), the
//! multi-gen LRU in `mglru.rs`, the pure LRU in `lru_pure.rs`. A new policy is one variant and
//! one file; the compiler lists the questions it must answer.
//!
//! Approximations: the lazyfree batch is the only per-CPU LRU batch modelled; additions
//! (`lru_add`), activations, rotations and deactivations (`lru_deactivate`, so `MADV_COLD` and
//! v4.5-v4.11's `MADV_FREE` too) take effect at once. A batched folio keeps `PG_lru` as it did
//! up to v6.10 and again in v6.18 (v6.11 to v6.17 cleared it at once, 33dfe9204f29 and its
//! revert, so isolation skipped it until the drain). The classic LRU's reclaim drains before
//! `get_scan_count` rather than in `shrink_inactive_list`/`shrink_active_list`, and the other
//! `lru_add_drain` callers (mlock, swap readahead, migration, the `lru_add_drain_all` of
//! `memory.reclaim`'s last retry, ...) are not modelled. One zone.

use crate::era::{FadvNoreuse, KernelVersion, Lru, Switches};
use crate::folio::{ListIdx, LruList, pg};
use crate::kernel::{Cx, KState};
use crate::memcontrol::{lruvec_gen_list, lruvec_list};
use crate::types::ids::MemcgId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::mmzone::GenRules;
use crate::types::mmzone::{LruConfig, Reclaim};
use crate::types::swap::Shadow;
use crate::vmscan::{References, SWAP_CLUSTER_MAX, ScanControl};
use crate::vmstat::VmStat;
use simcore::{Pfn, VirtAddr};

impl Reclaim {
    /// The policy the `lru` switch selects.
    pub fn of(lru: Lru) -> Reclaim {
        match lru {
            Lru::Classic => Reclaim::Classic,
            Lru::Mglru => Reclaim::MultiGen,
            Lru::Pure => Reclaim::Pure,
        }
    }

    /// `lru_gen_enabled()`: folios live on generation lists rather than the classic lists.
    pub fn lru_gen_enabled(self) -> bool {
        match self {
            Reclaim::MultiGen => true,
            Reclaim::Classic | Reclaim::Pure => false,
        }
    }

    /// The pages a memory cgroup's charge asks its limit reclaim for, when it needs `nr`
    /// (`try_charge`: at least a batch).
    pub(crate) fn memcg_reclaim_target(self, nr: u64) -> u64 {
        match self {
            Reclaim::Classic | Reclaim::MultiGen => nr.max(SWAP_CLUSTER_MAX),
            Reclaim::Pure => crate::lru_pure::memcg_reclaim_target(nr),
        }
    }
}

impl LruConfig {
    pub fn new(switches: &Switches, kernel: KernelVersion, tunables: &crate::Tunables) -> Self {
        LruConfig {
            reclaim: Reclaim::of(switches.lru),
            noreuse: switches.fadv_noreuse == FadvNoreuse::NoRecency,
            rand_read_has_no_recency: crate::era::vma_has_recency(kernel),
            lrugen: GenRules::for_kernel(kernel),
            swappiness: tunables.swappiness,
            min_ttl_ns: tunables.lru_gen_min_ttl_ms * 1_000_000,
        }
    }
}

/// `shrink_lruvec` (`lru_gen_shrink_lruvec` with the multi-gen LRU): reclaims from one lruvec,
/// after draining the reclaiming CPU's batch (`lru_add_drain`, the module note).
pub(crate) async fn shrink_lruvec(cx: &Cx, memcg: MemcgId, sc: &mut ScanControl) {
    lru_add_drain(cx);
    let reclaim = cx.st().lru.reclaim;
    match reclaim {
        Reclaim::Classic => crate::vmscan::shrink_lruvec(cx, memcg, sc).await,
        Reclaim::MultiGen => crate::mglru::try_to_shrink_lruvec(cx, memcg, sc).await,
        Reclaim::Pure => crate::lru_pure::shrink_lruvec(cx, memcg, sc).await,
    }
}

/// `folio_check_references`: what reclaim does with a locked folio, by its references.
pub(crate) async fn folio_check_references(cx: &Cx, head: Pfn) -> References {
    let reclaim = cx.st().lru.reclaim;
    match reclaim {
        Reclaim::Classic => crate::vmscan::check_references(cx, head).await,
        Reclaim::MultiGen => crate::mglru::lru_gen_folio_check_references(cx, head).await,
        Reclaim::Pure => crate::lru_pure::check_references(cx, head).await,
    }
}

/// What global reclaim sets up before it shrinks the node: the multi-gen LRU's initial priority
/// (`lru_gen_shrink_node`'s `set_initial_priority`; the classic lists start at the default).
pub(crate) fn prepare_shrink_node(st: &KState, sc: &mut ScanControl) {
    if st.lru.reclaim == Reclaim::MultiGen && !sc.cgroup_reclaim() {
        crate::mglru::set_initial_priority(st, sc);
    }
}

/// kswapd's aging of the node before it shrinks it (`lru_gen_age_node`; the classic lists age
/// as they are shrunk).
pub(crate) async fn age_node(cx: &Cx, sc: &ScanControl) {
    let reclaim = cx.st().lru.reclaim;
    match reclaim {
        Reclaim::MultiGen => crate::mglru::lru_gen_age_node(cx, sc).await,
        Reclaim::Classic | Reclaim::Pure => {}
    }
}

/// `lru_add_drain`: drains the batches of the CPU `cx` runs on (the module note).
pub(crate) fn lru_add_drain(cx: &Cx) {
    cx.st().lru_add_drain_cpu(cx.cpu().0 as usize);
}

impl KState {
    /// `folio_is_file_lru`: file pages that are not swap-backed (tmpfs pages live on the anon
    /// lists).
    pub fn folio_is_file_lru(&self, head: Pfn) -> bool {
        !self.folios.test(head, pg::SWAPBACKED)
    }

    /// A lazyfree folio (`MADV_FREE`): anonymous but no longer swap-backed.
    pub(crate) fn folio_is_lazyfree(&self, head: Pfn) -> bool {
        self.folios.is_anon(head) && !self.folios.test(head, pg::SWAPBACKED)
    }

    /// `folio_lru_list`: the classic list a folio belongs on.
    pub fn folio_lru_list(&self, head: Pfn) -> LruList {
        if self.folios.test(head, pg::UNEVICTABLE) {
            return LruList::Unevictable;
        }
        LruList::of(self.folio_is_file_lru(head), self.folios.test(head, pg::ACTIVE))
    }

    /// The list a folio on an LRU is on now.
    pub(crate) fn folio_list_now(&self, head: Pfn) -> ListIdx {
        let memcg = self.folio_memcg(head);
        match self.folios.lru_gen(head) {
            Some(generation) => lruvec_gen_list(memcg, generation, self.folio_is_file_lru(head)),
            None => lruvec_list(memcg, self.folio_lru_list(head)),
        }
    }

    /// `lruvec_add_folio` (`lru_gen_add_folio` with the multi-gen LRU): puts a folio that is on
    /// no list on the list its state says; `reclaiming` is a putback by eviction.
    pub(crate) fn lruvec_add_folio(&mut self, head: Pfn, reclaiming: bool) {
        match self.lru.reclaim {
            Reclaim::MultiGen if !self.folios.test(head, pg::UNEVICTABLE) => {
                self.lru_gen_add_folio(head, reclaiming);
            }
            Reclaim::Classic | Reclaim::MultiGen | Reclaim::Pure => {
                let list = lruvec_list(self.folio_memcg(head), self.folio_lru_list(head));
                self.folios.list_add(head, list, false);
            }
        }
    }

    /// `lruvec_del_folio`: takes a folio off its list. With the multi-gen LRU a folio taken off
    /// for another reason than eviction keeps `PG_active` if it was in one of the two youngest
    /// generations (`lru_gen_del_folio`).
    pub(crate) fn lruvec_del_folio(&mut self, head: Pfn, reclaiming: bool) {
        let list = self.folio_list_now(head);
        self.folios.list_del(head, list);
        if let Some(generation) = self.folios.lru_gen(head) {
            let memcg = self.folio_memcg(head);
            let g = &self.memcgs[memcg].lruvec.lrugen;
            let active = !reclaiming && g.is_active(generation);
            self.folios.set_lru_gen(head, None);
            if active {
                self.folios.set(head, pg::ACTIVE);
            }
        }
    }

    /// `folio_add_lru`: a new folio joins its lruvec (made active first when added by a fault
    /// with recency under the multi-gen LRU: `in_lru_fault` is the adding task's
    /// `current->in_lru_fault`, [`Cx::in_lru_fault`]).
    pub(crate) fn folio_add_lru(&mut self, head: Pfn, in_lru_fault: bool) {
        match self.lru.reclaim {
            Reclaim::MultiGen => {
                if in_lru_fault && !self.folios.test(head, pg::UNEVICTABLE) {
                    self.folios.set(head, pg::ACTIVE);
                }
            }
            Reclaim::Classic | Reclaim::Pure => {}
        }
        self.lruvec_add_folio(head, false);
    }

    /// `lru_cache_add_inactive_or_unevictable` for a new anonymous folio of `vma`
    /// (`lru_cache_add_active_or_unevictable` before v5.9: with the classic LRU a new anonymous
    /// folio outside a `VM_LOCKED` VMA started on the active list; `era::new_anon_starts_active`).
    pub(crate) fn folio_add_lru_new_anon(&mut self, head: Pfn, vma: VmaId, in_lru_fault: bool) {
        let active_era = crate::era::new_anon_starts_active(self.thp.kernel);
        let locked = self.vma(vma).flags.has(crate::vma::VmFlags::LOCKED);
        if active_era && self.lru.reclaim == Reclaim::Classic && !locked {
            self.folios.set(head, pg::ACTIVE);
        }
        self.folio_add_lru(head, in_lru_fault);
    }

    /// `folio_mark_accessed`.
    pub(crate) fn folio_mark_accessed(&mut self, head: Pfn) {
        if self.folios.test(head, pg::UNEVICTABLE) {
            return;
        }
        match self.lru.reclaim {
            Reclaim::Classic => self.folio_mark_accessed_classic(head),
            Reclaim::MultiGen => self.lru_gen_inc_refs(head),
            Reclaim::Pure => self.lru_pure_mark_accessed(head),
        }
    }

    /// The classic two-touch `folio_mark_accessed`: a referenced inactive folio is activated,
    /// any other is marked referenced.
    fn folio_mark_accessed_classic(&mut self, head: Pfn) {
        let f = &self.folios;
        if !f.test(head, pg::ACTIVE) && f.test(head, pg::REFERENCED) {
            let on_lru = f.test(head, pg::LRU);
            if on_lru {
                self.lruvec_del_folio(head, false);
            }
            self.folios.set(head, pg::ACTIVE);
            self.folios.clear_flag(head, pg::REFERENCED);
            if on_lru {
                self.lruvec_add_folio(head, false);
            }
            let nr = self.folios.order(head).pages();
            let memcg = self.folio_memcg(head);
            self.count_event(memcg, VmStat::Pgactivate, nr);
            self.workingset_activation(head);
        } else {
            self.folios.set(head, pg::REFERENCED);
        }
    }

    /// `workingset_eviction`'s shadow of a folio reclaim is removing (`lru_gen_eviction` with
    /// the multi-gen LRU).
    pub(crate) fn lru_eviction_shadow(&mut self, head: Pfn) -> Shadow {
        match self.lru.reclaim {
            Reclaim::Classic | Reclaim::Pure => self.workingset_shadow(head),
            Reclaim::MultiGen => self.lru_gen_eviction(head),
        }
    }

    /// `workingset_refault`: a folio brought back where a shadow was; may make it active
    /// before it is added to the LRU (`lru_gen_refault` with the multi-gen LRU, which reads the
    /// task's `in_lru_fault`).
    pub(crate) fn workingset_refault(&mut self, head: Pfn, shadow: Shadow, in_lru_fault: bool) {
        match self.lru.reclaim {
            Reclaim::Classic => self.workingset_refault_classic(head, shadow),
            Reclaim::MultiGen => self.lru_gen_refault(head, shadow, in_lru_fault),
            Reclaim::Pure => self.lru_pure_refault(head),
        }
    }

    /// `workingset_test_recent`: whether the page `shadow` stands for was evicted recently
    /// enough that its refault would be activated (`lru_gen_test_recent` with the multi-gen
    /// LRU), asked about as a page of type `file`.
    pub(crate) fn workingset_test_recent(&self, shadow: &Shadow, file: bool) -> bool {
        match self.lru.reclaim {
            Reclaim::Classic | Reclaim::Pure => self.workingset_test_recent_classic(shadow, file),
            Reclaim::MultiGen => self.lru_gen_test_recent(shadow, file),
        }
    }

    /// `folio_referenced_one` cleared a young PTE of `head` mapped at `addr` of `table`, with
    /// the PTE lock held (`lru_gen_look_around` with the multi-gen LRU).
    pub(crate) fn lru_referenced_pte(
        &mut self,
        mm: MmId,
        vma: VmaId,
        table: PtId,
        addr: VirtAddr,
        head: Pfn,
    ) {
        match self.lru.reclaim {
            Reclaim::MultiGen => self.lru_gen_referenced_pte(mm, vma, table, addr, head),
            Reclaim::Classic | Reclaim::Pure => {}
        }
    }

    /// `folio_deactivate` (`MADV_COLD`): the folio goes to its inactive list (the oldest
    /// generation with the multi-gen LRU), unreferenced.
    pub(crate) fn folio_deactivate(&mut self, head: Pfn) {
        if !self.folios.test(head, pg::LRU) || self.folios.test(head, pg::UNEVICTABLE) {
            return;
        }
        let was_active = if self.lru.reclaim.lru_gen_enabled() {
            let generation = self.folios.lru_gen(head).expect("on a generation list");
            self.memcgs[self.folio_memcg(head)].lruvec.lrugen.is_active(generation)
        } else {
            self.folios.test(head, pg::ACTIVE)
        };
        self.lruvec_del_folio(head, true);
        self.folios.clear_flag(head, pg::ACTIVE | pg::REFERENCED);
        self.folios.set_lru_refs(head, 0);
        self.lruvec_add_folio(head, false);
        if was_active {
            let nr = self.folios.order(head).pages();
            let memcg = self.folio_memcg(head);
            self.count_event(memcg, VmStat::Pgdeactivate, nr);
        }
    }

    /// Whether `lru_lazyfree` moves `head`: an evictable, swap-backed anonymous folio on an LRU
    /// list and outside the swap cache (asked when the folio is batched and again at the drain).
    fn lazyfree_movable(&self, head: Pfn) -> bool {
        let f = &self.folios;
        f.is_anon(head)
            && f.test(head, pg::LRU)
            && f.test(head, pg::SWAPBACKED)
            && !f.test(head, pg::SWAPCACHE | pg::UNEVICTABLE)
    }

    /// `folio_mark_lazyfree` (`MADV_FREE`, v4.12+ f7ad2a6cb9f7): a folio `lru_lazyfree` would
    /// move joins CPU `cpu`'s batch with a reference; a full batch, or one just given a large
    /// folio, drains at once (`folio_batch_add_and_move`).
    pub(crate) fn folio_mark_lazyfree(&mut self, head: Pfn, cpu: usize) {
        if !self.lazyfree_movable(head) {
            return;
        }
        self.folios.get_extra(head);
        if self.lru_lazyfree.len() <= cpu {
            self.lru_lazyfree.resize_with(cpu + 1, Vec::new);
        }
        let batch = &mut self.lru_lazyfree[cpu];
        batch.push(head);
        let full = batch.len() >= crate::era::lru_batch_size(self.thp.kernel);
        if full || self.folios.large(head).is_some() {
            self.lru_add_drain_cpu(cpu);
        }
    }

    /// `lru_lazyfree`: a batched folio that is still movable stops being swap-backed and goes
    /// to the inactive file list (with the multi-gen LRU, a file generation), unreferenced,
    /// where reclaim discards it unless it is written again; counted in `pglazyfree`.
    fn lru_lazyfree(&mut self, head: Pfn) {
        if !self.lazyfree_movable(head) {
            return;
        }
        self.lruvec_del_folio(head, true);
        self.folios.clear_flag(head, pg::ACTIVE | pg::REFERENCED | pg::SWAPBACKED);
        self.folios.set_lru_refs(head, 0);
        self.lruvec_add_folio(head, false);
        let nr = self.folios.order(head).pages();
        let memcg = self.folio_memcg(head);
        self.count_event(memcg, VmStat::Pglazyfree, nr);
    }

    /// `lru_add_drain_cpu`: CPU `cpu`'s lazyfree batch moves (`folio_batch_move_lru`, which
    /// passes over a folio taken off its list meanwhile) and drops its references, freeing a
    /// folio that nothing else holds any more.
    pub(crate) fn lru_add_drain_cpu(&mut self, cpu: usize) {
        let Some(batch) = self.lru_lazyfree.get_mut(cpu) else { return };
        for head in std::mem::take(batch) {
            debug_assert!(self.folios.extra_refs(head) > 0, "a batched folio holds a reference");
            self.lru_lazyfree(head);
            self.put_folio_extra(head);
        }
    }

    /// `lru_add_drain_all`: every CPU's batches (`lru_add_drain_cpu` on each).
    pub(crate) fn lru_add_drain_all(&mut self) {
        for cpu in 0..self.lru_lazyfree.len() {
            self.lru_add_drain_cpu(cpu);
        }
    }

    /// Takes a folio off its list for reclaim with an isolation reference
    /// (`folio_isolate_lru`).
    pub(crate) fn folio_isolate_lru(&mut self, head: Pfn) {
        self.lruvec_del_folio(head, true);
        self.folios.get_extra(head);
    }

    /// Puts an isolated folio back (`folio_putback_lru` / `move_folios_to_lru`) and drops the
    /// isolation reference.
    pub(crate) fn folio_putback_lru(&mut self, head: Pfn, reclaiming: bool) {
        self.lruvec_add_folio(head, reclaiming);
        self.put_folio_extra(head);
    }
}
