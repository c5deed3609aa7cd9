//! Putting folios on LRU lists and marking them accessed (`mm/swap.c`, `include/linux/mm_inline.h`,
//! Linux v6.8 with the multi-gen LRU of v6.1-v6.13 and, from v6.14, its reworked tiers;
//! `docs/reference/lru-semantics.md` sections 1 and 2).
//!
//! - Which list a folio belongs on: `folio_lru_list` for the classic LRU (unevictable; anon or
//!   file by `PG_swapbacked`; active by `PG_active`), a generation list for the multi-gen LRU
//!   (`lru_gen_add_folio` with `lru_gen_folio_seq`: the generation follows `PG_active`, the
//!   fault hint, the swap cache, `PG_reclaim` and, from v6.14, `PG_workingset`).
//! - `folio_add_lru`: a new folio goes to its lruvec (the one of the memory cgroup it is charged
//!   to). With the multi-gen LRU a folio added during a fault whose VMA has recency
//!   (`current->in_lru_fault`, set by `lru_gen_enter_fault`) is made active first, so it lands
//!   in a young generation.
//! - `folio_mark_accessed` (the read/write path, unmap of a young PTE): the classic two-touch
//!   activation (bumping `nonresident_age` through `workingset_activation`), or the multi-generation
//!   LRU's reference counter (`lru_gen_inc_refs` / `folio_inc_refs`).
//! - `folio_deactivate` (`MADV_COLD`) and the isolation helpers reclaim uses.
//!
//! The *pure LRU* configuration ([`LruConfig::pure`], `Tunables::lru_pure`) is not a kernel
//! setting: it reduces the classic LRU to one exact least-recently-used order (an access moves
//! the folio to the head of its list, reclaim takes the tail with no second chance), which is
//! what cache simulators call LRU; the replay checks the model against them with it.
//!
//! Approximations: no per-CPU LRU batches (`folio_batch`), so additions and activations take
//! effect at once; one zone.

use crate::era::{FadvNoreuse, KernelVersion, Lru, Switches};
use crate::folio::{ListIdx, LruList, pg};
use crate::kernel::KState;
use crate::memcontrol::{lruvec_gen_list, lruvec_list};
use crate::vmstat::VmStat;
use simcore::Pfn;

/// What the LRU code needs to know about the kernel, the switches and the tunables, kept in
/// `KState` so that the synchronous list operations can read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LruConfig {
    pub lru: Lru,
    /// `fadv_noreuse = no_recency`: FMODE_NOREUSE takes recency away from mappings.
    pub noreuse: bool,
    /// `vma_has_recency` exists (v6.3+): the classic LRU ignores `VM_RAND_READ` too.
    pub v6_3: bool,
    /// The multi-gen LRU's refault test looks at the distance to `max_seq` (v6.7+) rather than
    /// at `min_seq` alone.
    pub v6_7: bool,
    /// The multi-gen LRU's reworked tiers and placement (v6.14+).
    pub v6_14: bool,
    /// `vm.swappiness`.
    pub swappiness: u64,
    /// `/sys/kernel/mm/lru_gen/min_ttl_ms`, in ns (0: off).
    pub min_ttl_ns: u64,
    /// Exact LRU for validation (see the module note).
    pub pure: bool,
    /// `current->in_lru_fault` of the task now borrowing the state (set by `Cx::st`).
    pub in_fault: bool,
}

impl LruConfig {
    pub fn new(switches: &Switches, kernel: KernelVersion, tunables: &crate::Tunables) -> Self {
        LruConfig {
            lru: switches.lru,
            noreuse: switches.fadv_noreuse == FadvNoreuse::NoRecency,
            v6_3: kernel >= KernelVersion::new(6, 3),
            v6_7: kernel >= KernelVersion::new(6, 7),
            v6_14: kernel >= KernelVersion::new(6, 14),
            swappiness: tunables.swappiness,
            min_ttl_ns: tunables.lru_gen_min_ttl_ms * 1_000_000,
            pure: tunables.lru_pure,
            in_fault: false,
        }
    }

    pub fn is_mglru(&self) -> bool {
        self.lru == Lru::Mglru
    }
}

impl KState {
    /// `folio_is_file_lru`: file pages that are not swap-backed (tmpfs pages live on the anon
    /// lists).
    pub fn folio_is_file_lru(&self, head: Pfn) -> bool {
        !self.folios.test(head, pg::SWAPBACKED)
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
        if self.lru.is_mglru() && !self.folios.test(head, pg::UNEVICTABLE) {
            self.lru_gen_add_folio(head, reclaiming);
            return;
        }
        let list = lruvec_list(self.folio_memcg(head), self.folio_lru_list(head));
        self.folios.list_add(head, list, false);
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
    /// with recency under the multi-gen LRU).
    pub(crate) fn folio_add_lru(&mut self, head: Pfn) {
        if self.lru.is_mglru() && self.lru.in_fault && !self.folios.test(head, pg::UNEVICTABLE) {
            self.folios.set(head, pg::ACTIVE);
        }
        self.lruvec_add_folio(head, false);
    }

    /// `folio_mark_accessed`.
    pub(crate) fn folio_mark_accessed(&mut self, head: Pfn) {
        if self.folios.test(head, pg::UNEVICTABLE) {
            return;
        }
        if self.lru.pure {
            if self.folios.test(head, pg::LRU) {
                let list = self.folio_list_now(head);
                self.folios.list_del(head, list);
                self.folios.list_add(head, list, false);
            }
            return;
        }
        if self.lru.is_mglru() {
            self.lru_gen_inc_refs(head);
            return;
        }
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

    /// `folio_deactivate` (`MADV_COLD`): the folio goes to its inactive list (the oldest
    /// generation with the multi-gen LRU), unreferenced.
    pub(crate) fn folio_deactivate(&mut self, head: Pfn) {
        if !self.folios.test(head, pg::LRU) || self.folios.test(head, pg::UNEVICTABLE) {
            return;
        }
        let was_active = if self.lru.is_mglru() {
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
