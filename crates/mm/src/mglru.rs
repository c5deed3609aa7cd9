//! The multi-gen LRU (`mm/vmscan.c` `CONFIG_LRU_GEN` parts, `include/linux/mm_inline.h`
//! `lru_gen_*`, `mm/workingset.c` `lru_gen_eviction`/`lru_gen_refault`; Linux v6.1-v6.13, and
//! the v6.14 rework of tiers where the era says so; `docs/reference/lru-semantics.md`
//! section 2, `Documentation/mm/multigen_lru.rst`). What the eras change is one rules table
//! ([`GenRules`]: v6.1, v6.5, v6.7, v6.14), chosen once per machine.
//!
//! Per lruvec ([`LruGen`]): `max_seq` (the youngest generation, shared by anon and file),
//! `min_seq[type]` (the oldest per type), `MAX_NR_GENS` = 4 generation lists per type (list
//! `seq % 4`), the birth time of each generation, and the PID controller's counters per type and
//! tier (`refaulted`, `evicted`, `protected` and their moving averages; `NR_HIST_GENS` = 1).
//! Per folio: its generation, a 2-bit reference counter, `PG_referenced` and `PG_workingset`
//! (`folio.rs` keeps the generation and counter beside the links).
//!
//! - **Placement** (`lru_gen_folio_seq`): v6.1-v6.13 put an active folio (a fault with recency,
//!   an activation) in the youngest generation. v6.1-v6.6 put an anon folio outside the swap
//!   cache or a dirty folio under reclaim in the second oldest, everything else (`read()` and
//!   readahead, swap cache) in the oldest; v6.7-v6.13 ("mm/mglru: fix underprotected page
//!   cache", 081488051d28) put the former one below the youngest and the rest one above the
//!   oldest, unless reclaim puts it back or there are only `MIN_NR_GENS` generations. v6.14 puts
//!   active folios one generation below the youngest unless workingset, and the rest near the
//!   oldest (one up if workingset).
//! - **Accesses through file descriptors** raise the folio's tier (`folio_inc_refs` /
//!   `lru_gen_inc_refs`); moving between tiers changes only flags.
//! - **Aging** (`try_to_inc_max_seq`): walks the page tables of every mm in the cgroup
//!   (`walk_mm`, `mmap_lock` try-read), skipping VMAs without recency, locked or special ones,
//!   and anon VMAs when swappiness is 0. A PTE table is visited when the Bloom filter of the
//!   current generation says it had young entries (or on the first walk, when there is no
//!   filter); each young PTE is cleared and its folio promoted to `max_seq`
//!   (`folio_update_gen`; from v6.14 a folio with neither `PG_referenced` nor `PG_workingset` is
//!   only marked referenced the first time). Tables with at least one young PTE per eight
//!   entries (a cache line) are carried into the next filter. Then `inc_max_seq`: a type already
//!   at `MAX_NR_GENS` generations first has its oldest generation moved up (`inc_min_seq`), and
//!   the new generation is stamped with the time.
//! - **Eviction** (`evict_folios`): the type is the one with the older `min_seq`, else the one
//!   whose first tier refaults less (PID controller, gains swappiness : 200 - swappiness); the
//!   tiers to evict are those whose refault rate is within the gain (1:2, from v6.14 2:3) of
//!   the first tier's. A tier's total is its evicted pages plus the pages `sort_folio` protected
//!   in it (`read_ctrl_pos`, `reset_ctrl_pos`): v6.1-v6.13 keep tier `t`'s at
//!   `protected[hist][type][t - 1]` and add it for `t >= 1` only (tier 0 is never protected);
//!   v6.14 ("mm/mglru: rework aging feedback") index `protected` by tier and also count the
//!   folios `inc_min_seq` moves up. The oldest generation is scanned (`sort_folio`: promoted
//!   folios move to their generation, protected tiers and dirty or writeback file folios move up
//!   one, the rest are isolated; `isolate_folio` clears the tier of a folio without
//!   `PG_referenced`, v6.1-v6.13 with `LRU_REFS_MASK | LRU_REFS_FLAGS` where `LRU_REFS_FLAGS` is
//!   `PG_referenced | PG_workingset`, v6.14 the counter only, and v6.1-v6.13 then clear
//!   `PG_referenced` of every isolated folio "for shrink_folio_list()", which v6.14's "mm/mglru:
//!   rework workingset protection" dropped) and the isolated folios go through
//!   `shrink_folio_list`, where a young PTE
//!   triggers look-around over up to 64 neighbouring PTEs (`lru_gen_look_around`, promoting the
//!   young ones and feeding the Bloom filter) and activates the folio (v6.14: the first young
//!   sighting only marks it referenced). Evicted folios leave a shadow with their tier. The
//!   folios `shrink_folio_list` rejects go back (`move_folios_to_lru`) so as not to land in the
//!   oldest generation: v6.1-v6.13 put every one back active (the youngest generation) without
//!   its tier (the counter, `PG_referenced` and `PG_workingset` cleared), except one under
//!   reclaim that is dirty or under writeback, which goes back as it is; v6.14 sets active only
//!   one that would otherwise land in the oldest generation.
//! - **Aging trigger** (`should_run_aging`, `get_nr_to_scan`): aging is needed when eviction
//!   would leave fewer than `MIN_NR_GENS` generations; v6.1-v6.13 also age when the youngest
//!   generation holds more than half of the pages or the oldest less than a quarter. Who ages
//!   changed in v6.3 ("mm: multi-gen LRU: remove aging fairness safeguard", 7348cc91821b; "mm:
//!   multi-gen LRU: per-node lru_gen_folio lists", e4dde56cd208): v6.1-v6.2 leave kswapd's
//!   aging to `lru_gen_age_node`, which ages every lruvec that needs it before kswapd shrinks
//!   the node, at every priority, while direct reclaim below the default priority ages and
//!   evicts in one call; from v6.3 `lru_gen_age_node` only checks `min_ttl`, and
//!   `get_nr_to_scan` ages for kswapd and direct reclaim alike, below the default priority
//!   only, then stops scanning the lruvec for the pass (-1). v6.3 also added
//!   `set_initial_priority` (`lru_gen_shrink_node`): global reclaim that asks for
//!   `MIN_LRU_BATCH` pages or more (kswapd; direct reclaim asks for 32) starts at
//!   `fls(inactive) - 1 - fls(nr_to_reclaim - 1)` instead of `DEF_PRIORITY`, the inactive pages
//!   (all but the two youngest generations) divided by `MEMCG_NR_GENS` until "mm/mglru: respect
//!   min_ttl_ms with memcgs" (8aa420617918, v6.7), clamped at 0 (v6.8) and at `DEF_PRIORITY /
//!   2` by v6.11 (the change between is not identified; the model raises the floor at v6.11);
//!   kswapd's pass goes on from the priority it set. A lruvec whose pages are all in the two
//!   youngest generations (a fresh one, say) starts kswapd at the floor, where it ages at once.
//! - **`min_ttl`**: kswapd's `lru_gen_age_node` checks that some lruvec's oldest generation was
//!   born more than `min_ttl` ago; if none was, the kernel invokes the OOM killer.
//! - **Refaults** (`lru_gen_refault`; also `workingset.rs`): only a refault into the memory
//!   cgroup that evicted the folio counts. v6.1-v6.4 count a *recent* one (its generation still
//!   the oldest) in `workingset_refault_*` and nothing else as an activation: `sort_folio`
//!   counts `workingset_activate_*` for each folio its tier protects. From v6.5 ("Multi-gen LRU:
//!   fix workingset accounting", 3af0191a594d) every refault counts and every recent one is an
//!   activation, and protection no longer is. A recent refault in a fault, or with every
//!   reference (v6.7-v6.13: three or more, then restored with all of them), is restored as
//!   workingset (`workingset_restore_*`). v6.14 ("mm/mglru: rework refault detection",
//!   b1a71694fb00) makes recent mean within `MAX_NR_GENS` of the youngest generation, counts an
//!   activation only in a fault and restores a folio only if it was workingset when evicted
//!   (else its references). v6.7-v6.13's `sort_folio` also protects a folio with every
//!   reference.
//! - The `/sys/kernel/debug/lru_gen` file, read and written (`debugfs.rs`).
//!
//! Approximations: one zone, one node; memory cgroups are reclaimed in creation order (no memcg
//! LRU of `MEMCG_NR_GENS` bins); a promoted folio moves to its new generation list at once (the
//! kernel updates the flags and lets `sort_folio` move it later), so list order within a
//! generation differs; the walk visits one PTE table per step (`walk_pte_range` under the
//! table's lock) rather than batching across PMDs; no non-leaf PMD accessed bits; the OOM killer
//! is counted (`oom_kill`) but kills nothing; `folio_rotate_reclaimable`'s retry of clean
//! folios is not needed (writeback completes inside the pass).

use crate::folio::{LruList, pg};
use crate::kernel::{Cx, KState};
use crate::memcontrol::lruvec_gen_list;
use crate::pgtable::{Level, Pte};
use crate::sim::cost::Cost;
use crate::types::ids::MemcgId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::mmzone::{
    BloomFilter, GenRules, InitialPriority, LruGen, MAX_NR_GENS, MAX_NR_TIERS, MIN_NR_GENS,
};
use crate::types::swap::Shadow;
use crate::vma::VmFlags;
use crate::vmscan::{
    DEF_PRIORITY, Reclaimer, References, ScanControl, activate_rejected, shrink_folio_list,
    swappiness,
};
use crate::vmstat::VmStat;
use simcore::{Pfn, VirtAddr};

pub mod debugfs;

/// `MIN_LRU_BATCH` (`BITS_PER_LONG`).
pub const MIN_LRU_BATCH: u64 = 64;
/// `MAX_LRU_BATCH`.
pub const MAX_LRU_BATCH: u64 = MIN_LRU_BATCH * 64;
/// `MEMCG_NR_GENS`: the memcg LRU's generations, by which v6.3-v6.6's `set_initial_priority`
/// divides the inactive pages.
const MEMCG_NR_GENS: u64 = 3;
/// Bits of a Bloom filter (`BLOOM_FILTER_SHIFT` = 15).
const BLOOM_BITS: usize = 1 << 15;

impl GenRules {
    /// v6.1-v6.4.
    const V6_1: GenRules = GenRules {
        reworked: false,
        counts_every_refault: false,
        protects_page_cache: false,
        restore_refs: 4,
        tier_gains: (1, 2),
        refs_flags: pg::REFERENCED | pg::WORKINGSET,
        isolate_clears: pg::RECLAIM | pg::REFERENCED,
        isolate_unreferenced_clears: pg::REFERENCED | pg::WORKINGSET,
        promotion_sets: 0,
        two_sightings: false,
        lazy_promotion: false,
        inc_min_seq_protects: false,
        protection_activates: true,
        shadow_keeps_workingset: false,
        kswapd_ages: true,
        initial_priority: None,
    };

    /// v6.3-v6.4: the aging belongs to the eviction, and global reclaim sets its initial
    /// priority.
    const V6_3: GenRules = GenRules {
        kswapd_ages: false,
        initial_priority: Some(InitialPriority { divisor: MEMCG_NR_GENS, floor: 0 }),
        ..GenRules::V6_1
    };

    /// v6.5-v6.6: every refault counted, recent ones as activations, protection no longer.
    const V6_5: GenRules =
        GenRules { counts_every_refault: true, protection_activates: false, ..GenRules::V6_3 };

    /// v6.7-v6.13: the page cache protected; the initial priority from all inactive pages.
    const V6_7: GenRules = GenRules {
        protects_page_cache: true,
        restore_refs: 3,
        initial_priority: Some(InitialPriority { divisor: 1, floor: 0 }),
        ..GenRules::V6_5
    };

    /// v6.14 and later: the reworked tiers, workingset protection and aging feedback.
    const V6_14: GenRules = GenRules {
        reworked: true,
        counts_every_refault: true,
        protects_page_cache: true,
        restore_refs: 3,
        tier_gains: (2, 3),
        refs_flags: pg::REFERENCED,
        isolate_clears: pg::RECLAIM,
        isolate_unreferenced_clears: 0,
        promotion_sets: pg::WORKINGSET,
        two_sightings: true,
        lazy_promotion: true,
        inc_min_seq_protects: true,
        protection_activates: false,
        shadow_keeps_workingset: true,
        kswapd_ages: false,
        initial_priority: Some(InitialPriority { divisor: 1, floor: DEF_PRIORITY / 2 }),
    };

    /// The rules of kernel `k`.
    pub fn for_kernel(k: crate::era::KernelVersion) -> GenRules {
        let rules = if crate::era::mglru_reworked_tiers(k) {
            GenRules::V6_14
        } else if crate::era::mglru_protects_page_cache(k) {
            GenRules::V6_7
        } else if crate::era::mglru_counts_every_refault(k) {
            GenRules::V6_5
        } else if crate::era::mglru_ages_in_eviction(k) {
            GenRules::V6_3
        } else {
            GenRules::V6_1
        };
        let floor = if crate::era::mglru_initial_priority_floor(k) { DEF_PRIORITY / 2 } else { 0 };
        let initial_priority = rules.initial_priority.map(|p| InitialPriority { floor, ..p });
        GenRules { initial_priority, ..rules }
    }
}

impl BloomFilter {
    fn new() -> BloomFilter {
        BloomFilter(vec![0; BLOOM_BITS / 64].into_boxed_slice())
    }

    /// `get_item_key`: two 15-bit keys from a hash of the item.
    fn keys(mm: MmId, table: PtId) -> [usize; 2] {
        let x = (u64::from(mm.0) << 32 | u64::from(table.0)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let h = (x >> 34) as usize;
        [h & (BLOOM_BITS - 1), (h >> 15) & (BLOOM_BITS - 1)]
    }

    fn test(&self, mm: MmId, table: PtId) -> bool {
        Self::keys(mm, table).iter().all(|&k| self.0[k / 64] & 1 << (k % 64) != 0)
    }

    fn set(&mut self, mm: MmId, table: PtId) {
        for k in Self::keys(mm, table) {
            self.0[k / 64] |= 1 << (k % 64);
        }
    }
}

impl Default for LruGen {
    fn default() -> Self {
        LruGen::new(0)
    }
}

impl LruGen {
    /// `lru_gen_init_lruvec`: `max_seq` = `MIN_NR_GENS + 1`, every generation born now.
    pub fn new(now_ns: u64) -> LruGen {
        LruGen {
            max_seq: MIN_NR_GENS + 1,
            min_seq: [0; 2],
            timestamps: [now_ns; MAX_NR_GENS as usize],
            avg_refaulted: Default::default(),
            avg_total: Default::default(),
            refaulted: Default::default(),
            evicted: Default::default(),
            protected: Default::default(),
            walk_seq: 0,
            filters: [None, None],
        }
    }

    /// `lru_gen_from_seq`.
    pub fn gen_of(&self, seq: u64) -> u8 {
        (seq % u64::from(MAX_NR_GENS)) as u8
    }

    /// `lru_gen_is_active`: the two youngest generations.
    pub fn is_active(&self, generation: u8) -> bool {
        generation == self.gen_of(self.max_seq) || generation == self.gen_of(self.max_seq - 1)
    }

    /// `get_nr_gens`.
    pub fn nr_gens(&self, file: bool) -> u64 {
        self.max_seq - self.min_seq[usize::from(file)] + 1
    }

    /// The oldest evictable generation (`evictable_min_seq`).
    fn evictable_min_seq(&self, swappiness: u64) -> u64 {
        if swappiness == 0 { self.min_seq[1] } else { self.min_seq[0].min(self.min_seq[1]) }
    }

    /// `read_ctrl_pos`: refaulted and total of tiers `tiers` of a type, with a gain. The
    /// protected pages of tier `t` count in tier `t`'s total in every era; `protected` is
    /// indexed by tier (v6.1-v6.13 keep tier `t` at `protected[t - 1]`, an array one shorter,
    /// and read it back there for `t >= 1`, so tier 0 has none; v6.14 index it by tier).
    fn ctrl_pos(&self, file: bool, tiers: std::ops::Range<usize>, gain: u64) -> CtrlPos {
        let t = usize::from(file);
        let mut pos = CtrlPos { refaulted: 0, total: 0, gain };
        for i in tiers {
            pos.refaulted += self.avg_refaulted[t][i] + self.refaulted[t][i];
            pos.total += self.avg_total[t][i] + self.protected[t][i] + self.evicted[t][i];
        }
        pos
    }

    /// `reset_ctrl_pos` when `min_seq` advances: the averages absorb the current counters
    /// (`NR_HIST_GENS` = 1, so the current ones are then cleared).
    fn reset_ctrl_pos(&mut self, file: bool) {
        let t = usize::from(file);
        for tier in 0..MAX_NR_TIERS {
            self.avg_refaulted[t][tier] =
                (self.avg_refaulted[t][tier] + self.refaulted[t][tier]) / 2;
            self.avg_total[t][tier] =
                (self.avg_total[t][tier] + self.protected[t][tier] + self.evicted[t][tier]) / 2;
            self.refaulted[t][tier] = 0;
            self.evicted[t][tier] = 0;
            self.protected[t][tier] = 0;
        }
    }
}

/// `struct ctrl_pos`.
#[derive(Clone, Copy, Debug)]
struct CtrlPos {
    refaulted: u64,
    total: u64,
    gain: u64,
}

/// `positive_ctrl_err`: the process variable refaults no more than the setpoint (with the
/// gains), or too little to tell.
fn positive_ctrl_err(sp: CtrlPos, pv: CtrlPos) -> bool {
    pv.refaulted < MIN_LRU_BATCH
        || pv.refaulted * (sp.total + MIN_LRU_BATCH) * sp.gain
            <= (sp.refaulted + 1) * pv.total * pv.gain
}

/// `order_base_2`.
fn order_base_2(n: u64) -> usize {
    if n <= 1 { 0 } else { (64 - (n - 1).leading_zeros()) as usize }
}

impl KState {
    fn lrugen(&self, memcg: MemcgId) -> &LruGen {
        &self.memcgs[memcg].lruvec.lrugen
    }

    fn lrugen_mut(&mut self, memcg: MemcgId) -> &mut LruGen {
        &mut self.memcgs[memcg].lruvec.lrugen
    }

    /// `lru_gen_folio_seq`: the generation a folio being added goes to.
    fn lru_gen_folio_seq(&self, head: Pfn, reclaiming: bool) -> u64 {
        let file = self.folio_is_file_lru(head);
        let g = self.lrugen(self.folio_memcg(head));
        let f = &self.folios;
        let active = f.test(head, pg::ACTIVE);
        let ws = u64::from(f.test(head, pg::WORKINGSET));
        let cold_but_busy = (!file && !f.test(head, pg::SWAPCACHE))
            || (f.test(head, pg::RECLAIM)
                && (f.test(head, pg::DIRTY) || f.test(head, pg::WRITEBACK)));
        let min = g.min_seq[usize::from(file)];
        let rules = self.lru.lrugen;
        if !rules.reworked && !rules.protects_page_cache {
            return if active {
                g.max_seq
            } else if cold_but_busy {
                min + 1
            } else {
                min
            };
        }
        if !rules.reworked {
            return if active {
                g.max_seq
            } else if cold_but_busy {
                g.max_seq - 1
            } else if reclaiming || min + MIN_NR_GENS >= g.max_seq {
                min
            } else {
                min + 1
            };
        }
        let back = if active {
            MIN_NR_GENS - ws
        } else if reclaiming {
            u64::from(MAX_NR_GENS)
        } else if cold_but_busy {
            MIN_NR_GENS
        } else {
            u64::from(MAX_NR_GENS) - ws
        };
        (g.max_seq + 1).saturating_sub(back).max(min)
    }

    /// `lru_gen_add_folio`.
    pub(crate) fn lru_gen_add_folio(&mut self, head: Pfn, reclaiming: bool) {
        let seq = self.lru_gen_folio_seq(head, reclaiming);
        let memcg = self.folio_memcg(head);
        let generation = self.lrugen(memcg).gen_of(seq);
        let file = self.folio_is_file_lru(head);
        self.folios.clear_flag(head, pg::ACTIVE);
        self.folios.set_lru_gen(head, Some(generation));
        self.folios.list_add(head, lruvec_gen_list(memcg, generation, file), reclaiming);
    }

    /// Moves a folio on a generation list to generation `generation`.
    fn folio_move_gen(&mut self, head: Pfn, generation: u8, tail: bool) {
        let memcg = self.folio_memcg(head);
        let file = self.folio_is_file_lru(head);
        let old = self.folios.lru_gen(head).expect("on a generation list");
        self.folios.list_del(head, lruvec_gen_list(memcg, old, file));
        self.folios.set_lru_gen(head, Some(generation));
        self.folios.list_add(head, lruvec_gen_list(memcg, generation, file), tail);
    }

    /// `folio_inc_refs` (v6.1-v6.13) / `lru_gen_inc_refs` (v6.14): an access through a file
    /// descriptor.
    pub(crate) fn lru_gen_inc_refs(&mut self, head: Pfn) {
        let f = &mut self.folios;
        if !f.test(head, pg::REFERENCED) {
            f.set(head, pg::REFERENCED);
            return;
        }
        if !self.lru.lrugen.reworked {
            if !f.test(head, pg::WORKINGSET) {
                f.set(head, pg::WORKINGSET);
                return;
            }
            let r = f.lru_refs(head);
            f.set_lru_refs(head, (r + 1).min(3));
            return;
        }
        let r = (f.lru_refs(head) + 1).min(3);
        f.set_lru_refs(head, r);
        if r == 3 {
            f.set(head, pg::WORKINGSET);
        }
    }

    /// `folio_lru_refs` and `lru_tier_from_refs`: the folio's references and tier.
    pub(crate) fn folio_refs_tier(&self, head: Pfn) -> (u64, usize) {
        let f = &self.folios;
        let counter = u64::from(f.lru_refs(head));
        let ws = f.test(head, pg::WORKINGSET);
        if !self.lru.lrugen.reworked {
            // Accesses beyond the first: the counter plus the workingset bit.
            let refs = counter + u64::from(ws);
            return (refs, order_base_2(refs + 1));
        }
        let refs = if f.test(head, pg::REFERENCED) { counter + 1 } else { 0 };
        (refs, if ws { MAX_NR_TIERS - 1 } else { order_base_2(refs) })
    }

    /// Clears the reference state a generation change resets (`LRU_REFS_FLAGS`).
    fn clear_refs_flags(&mut self, head: Pfn) {
        self.folios.set_lru_refs(head, 0);
        self.folios.clear_flag(head, self.lru.lrugen.refs_flags);
    }

    /// `folio_update_gen`: the aging (or look-around) saw a young PTE of the folio.
    fn folio_update_gen(&mut self, head: Pfn, generation: u8) {
        let first_sighting = !self.folios.test(head, pg::REFERENCED | pg::WORKINGSET);
        let seen_once = self.lru.lrugen.two_sightings && first_sighting;
        if self.folios.lru_gen(head).is_none() || seen_once {
            // Isolated by reclaim (which will see PG_referenced), or seen once (v6.14).
            self.folios.set_lru_refs(head, 0);
            self.folios.set(head, pg::REFERENCED);
            return;
        }
        self.clear_refs_flags(head);
        self.folios.set(head, self.lru.lrugen.promotion_sets);
        if self.folios.lru_gen(head) != Some(generation) {
            self.folio_move_gen(head, generation, false);
        }
    }

    /// `folio_inc_gen`: moves a folio of the oldest generation one generation up; returns the
    /// generation it is in.
    fn folio_inc_gen(&mut self, head: Pfn, reclaiming: bool, tail: bool) -> u8 {
        let memcg = self.folio_memcg(head);
        let file = self.folio_is_file_lru(head);
        let g = self.lrugen(memcg);
        let old = g.gen_of(g.min_seq[usize::from(file)]);
        let cur = self.folios.lru_gen(head).expect("on a generation list");
        if cur != old {
            return cur;
        }
        let new = (old + 1) % MAX_NR_GENS;
        self.clear_refs_flags(head);
        if reclaiming {
            self.folios.set(head, pg::RECLAIM);
        }
        self.folio_move_gen(head, new, tail);
        new
    }

    /// `inc_min_seq`: empties the oldest generation of a type into the next one.
    fn inc_min_seq(&mut self, memcg: MemcgId, file: bool, swappiness: u64) {
        let t = usize::from(file);
        if file || swappiness > 0 {
            let g = self.lrugen(memcg);
            let list = lruvec_gen_list(memcg, g.gen_of(g.min_seq[t]), file);
            while let Some(head) = self.folios.list_tail(list) {
                let (refs, tier) = self.folio_refs_tier(head);
                let ws = self.folios.test(head, pg::WORKINGSET);
                self.folio_inc_gen(head, false, true);
                let lazily_promoted = refs + u64::from(ws) == 4 + 1;
                if self.lru.lrugen.inc_min_seq_protects && !lazily_promoted {
                    let nr = self.folios.order(head).pages();
                    self.lrugen_mut(memcg).protected[t][tier] += nr;
                }
            }
        }
        let g = self.lrugen_mut(memcg);
        g.reset_ctrl_pos(file);
        g.min_seq[t] += 1;
    }

    /// `try_to_inc_min_seq`: advances `min_seq` past empty generations, keeping anon and file
    /// close when both are evictable. Returns whether anything advanced.
    fn try_to_inc_min_seq(&mut self, memcg: MemcgId, swappiness: u64) -> bool {
        let g = self.lrugen(memcg).clone();
        let mut min_seq = g.min_seq;
        let types: &[bool] = if swappiness == 0 { &[true] } else { &[false, true] };
        for &file in types {
            let t = usize::from(file);
            while min_seq[t] + MIN_NR_GENS <= g.max_seq {
                let list = lruvec_gen_list(memcg, g.gen_of(min_seq[t]), file);
                if self.folios.list_pages(list) > 0 {
                    break;
                }
                min_seq[t] += 1;
            }
        }
        if swappiness > 0 {
            if self.lru.lrugen.reworked {
                let seq = g.max_seq - MIN_NR_GENS;
                if min_seq[0] > seq && min_seq[1] < seq {
                    min_seq[0] = seq;
                } else if min_seq[1] > seq && min_seq[0] < seq {
                    min_seq[1] = seq;
                }
            } else {
                min_seq[0] = min_seq[0].min(min_seq[1]);
                min_seq[1] = min_seq[0].max(g.min_seq[1]);
            }
        }
        let mut success = false;
        for &file in types {
            let t = usize::from(file);
            if min_seq[t] > g.min_seq[t] {
                let lg = self.lrugen_mut(memcg);
                lg.reset_ctrl_pos(file);
                lg.min_seq[t] = min_seq[t];
                success = true;
            }
        }
        success
    }

    /// `inc_max_seq`: a new youngest generation, born `now_ns`.
    fn inc_max_seq(&mut self, memcg: MemcgId, swappiness: u64, now_ns: u64) {
        for file in [false, true] {
            if self.lrugen(memcg).nr_gens(file) == u64::from(MAX_NR_GENS) {
                self.inc_min_seq(memcg, file, swappiness);
            }
        }
        let g = self.lrugen_mut(memcg);
        let next = g.gen_of(g.max_seq + 1);
        g.timestamps[next as usize] = now_ns;
        g.max_seq += 1;
    }

    /// `get_tier_idx`: the highest tier of a type to evict, comparing each tier with the
    /// setpoint `sp` (v6.1-v6.13: the first tier of the type, or of the other type when the
    /// type was chosen by the controller).
    fn tier_idx(&self, memcg: MemcgId, file: bool, sp: CtrlPos, pv_gain: u64) -> usize {
        let g = self.lrugen(memcg);
        (1..MAX_NR_TIERS)
            .find(|&t| !positive_ctrl_err(sp, g.ctrl_pos(file, t..t + 1, pv_gain)))
            .unwrap_or(MAX_NR_TIERS)
            - 1
    }

    /// The highest tier to evict of a type, with the era's gains and setpoint of its own first
    /// tier.
    fn own_tier_idx(&self, memcg: MemcgId, file: bool) -> usize {
        let (sp_gain, pv_gain) = self.lru.lrugen.tier_gains;
        let sp = self.lrugen(memcg).ctrl_pos(file, 0..1, sp_gain);
        self.tier_idx(memcg, file, sp, pv_gain)
    }

    /// `get_type_to_scan` (with `isolate_folios`' obvious choices): the type to evict and the
    /// highest tier to evict.
    fn type_and_tier(&self, memcg: MemcgId, swappiness: u64) -> (bool, usize) {
        let g = self.lrugen(memcg);
        if self.lru.lrugen.reworked {
            let file = if swappiness <= 1 {
                true
            } else if swappiness >= 200 {
                false
            } else {
                let sp = g.ctrl_pos(false, 0..MAX_NR_TIERS, swappiness);
                let pv = g.ctrl_pos(true, 0..MAX_NR_TIERS, 200 - swappiness);
                positive_ctrl_err(sp, pv)
            };
            return (file, self.own_tier_idx(memcg, file));
        }
        let obvious = if swappiness == 0 {
            Some(true)
        } else if g.min_seq[0] < g.min_seq[1] {
            Some(false)
        } else if swappiness == 1 {
            Some(true)
        } else if swappiness == 200 {
            Some(false)
        } else {
            None
        };
        if let Some(file) = obvious {
            return (file, self.own_tier_idx(memcg, file));
        }
        let gain = [swappiness, 200 - swappiness];
        let file =
            positive_ctrl_err(g.ctrl_pos(false, 0..1, gain[0]), g.ctrl_pos(true, 0..1, gain[1]));
        let sp = g.ctrl_pos(!file, 0..1, gain[usize::from(!file)]);
        (file, self.tier_idx(memcg, file, sp, gain[usize::from(file)]))
    }

    /// `evict_folios`' putback of a folio `shrink_folio_list` rejected (`move_folios_to_lru`,
    /// "don't add rejected folios to the oldest generation"). v6.1-v6.13: one under reclaim that
    /// is dirty or under writeback goes back as it is, with `PG_referenced` again if it is
    /// workingset ("restore LRU_REFS_FLAGS cleared by isolate_folio()"); every other one loses
    /// its tier (the counter, `PG_referenced` and `PG_workingset`) and goes back active, to the
    /// youngest generation, at the head of its list (a clean unmapped one the kernel first
    /// retries once, for `folio_rotate_reclaimable`'s race, ends there as well). v6.14: only one
    /// that would land in the oldest generation goes back active.
    fn lru_gen_putback_rejected(&mut self, head: Pfn) {
        if self.lru.lrugen.reworked {
            let seq = self.lru_gen_folio_seq(head, false);
            let g = self.lrugen(self.folio_memcg(head));
            if seq == g.min_seq[usize::from(self.folio_is_file_lru(head))] {
                self.folios.set(head, pg::ACTIVE);
            }
            self.folio_putback_lru(head, true);
            return;
        }
        let f = &mut self.folios;
        if f.test(head, pg::RECLAIM) && f.test(head, pg::DIRTY | pg::WRITEBACK) {
            if f.test(head, pg::WORKINGSET) {
                f.set(head, pg::REFERENCED);
            }
        } else {
            self.clear_refs_flags(head);
            self.folios.set(head, pg::ACTIVE);
        }
        self.folio_putback_lru(head, false);
    }

    /// `sort_folio`: true when the folio stays on the lists (moved); false to isolate it.
    fn sort_folio(&mut self, head: Pfn, tier_idx: usize) -> bool {
        let memcg = self.folio_memcg(head);
        let file = self.folio_is_file_lru(head);
        let t = usize::from(file);
        let g = self.lrugen(memcg);
        let generation = self.folios.lru_gen(head).expect("on a generation list");
        if generation != g.gen_of(g.min_seq[t]) {
            return true; // promoted (already on its list here)
        }
        let (refs, tier) = self.folio_refs_tier(head);
        let ws = self.folios.test(head, pg::WORKINGSET);
        let rules = self.lru.lrugen;
        let saturated = rules.lazy_promotion && refs + u64::from(ws) == 4 + 1;
        // v6.7-v6.13 also protect a folio with every reference (counted as protected).
        let full = !rules.reworked && rules.protects_page_cache && refs == 4;
        if tier > tier_idx || saturated || full {
            self.folio_inc_gen(head, false, false);
            if !saturated {
                let nr = self.folios.order(head).pages();
                self.lrugen_mut(memcg).protected[t][tier] += nr;
                if self.lru.lrugen.protection_activates {
                    let key = if file {
                        VmStat::WorkingsetActivateFile
                    } else {
                        VmStat::WorkingsetActivateAnon
                    };
                    self.count_event(memcg, key, nr);
                }
            }
            return true;
        }
        let dirty = self.folios.test(head, pg::DIRTY);
        if self.folios.test(head, pg::WRITEBACK) || (file && dirty) {
            self.folio_inc_gen(head, true, false);
            return true;
        }
        false
    }

    /// `isolate_folio`: takes a folio off its generation list for `shrink_folio_list`. A folio
    /// not referenced loses its tier (v6.1-v6.13: the counter, `PG_referenced` and
    /// `PG_workingset`, `LRU_REFS_MASK | LRU_REFS_FLAGS`; v6.14: the counter only); v6.1-v6.13
    /// then clear `PG_referenced` of every folio, so that a reference seen while it is isolated
    /// is a new one, and v6.14 keeps it as the folio's first reference.
    fn isolate_folio(&mut self, head: Pfn) {
        let rules = self.lru.lrugen;
        if !self.folios.test(head, pg::REFERENCED) {
            self.folios.set_lru_refs(head, 0);
            self.folios.clear_flag(head, rules.isolate_unreferenced_clears);
        }
        self.folios.clear_flag(head, rules.isolate_clears);
        self.folio_isolate_lru(head);
    }

    /// `scan_folios` + `isolate_folio`: sorts the oldest generation of a type and isolates up to
    /// `nr` pages' worth of folios. Returns (scanned, sorted, isolated folios).
    fn scan_folios(
        &mut self,
        memcg: MemcgId,
        file: bool,
        tier_idx: usize,
        nr: u64,
    ) -> (u64, u64, Vec<Pfn>) {
        let g = self.lrugen(memcg);
        if g.nr_gens(file) == MIN_NR_GENS {
            return (0, 0, Vec::new());
        }
        let list = lruvec_gen_list(memcg, g.gen_of(g.min_seq[usize::from(file)]), file);
        let mut remaining = nr.min(MAX_LRU_BATCH);
        let (mut scanned, mut sorted) = (0, 0);
        let mut isolated = self.reclaim_lists.take_folios();
        let mut isolated_pages = 0;
        while remaining > 0 {
            let Some(head) = self.folios.list_tail(list) else { break };
            let delta = self.folios.order(head).pages();
            scanned += delta;
            remaining -= 1;
            if self.sort_folio(head, tier_idx) {
                sorted += delta;
            } else {
                self.isolate_folio(head);
                isolated.push(head);
                isolated_pages += delta;
            }
            if isolated_pages >= MIN_LRU_BATCH {
                break;
            }
        }
        let scanned = if isolated.is_empty() && remaining > 0 { 0 } else { scanned };
        (scanned, sorted, isolated)
    }

    /// `isolate_folios`: tries the chosen type, then the other.
    fn isolate_folios(
        &mut self,
        memcg: MemcgId,
        nr: u64,
        swappiness: u64,
    ) -> (bool, u64, Vec<Pfn>) {
        let (mut file, mut tier) = self.type_and_tier(memcg, swappiness);
        let tries = if swappiness == 0 { 1 } else { 2 };
        for _ in 0..tries {
            let (scanned, sorted, isolated) = self.scan_folios(memcg, file, tier, nr);
            if sorted > 0 {
                self.count_event(memcg, VmStat::Pgrefill, sorted);
            }
            if scanned > 0 {
                return (file, scanned, isolated);
            }
            self.reclaim_lists.give_folios(isolated);
            file = !file;
            tier = self.own_tier_idx(memcg, file);
        }
        (file, 0, Vec::new())
    }

    /// `should_run_aging`: (must or should age, pages in evictable generations).
    fn should_run_aging(&self, memcg: MemcgId, swappiness: u64, priority: u32) -> (bool, u64) {
        let g = self.lrugen(memcg);
        let min = g.evictable_min_seq(swappiness);
        if min + MIN_NR_GENS > g.max_seq {
            return (true, 0);
        }
        let types: &[bool] = if swappiness == 0 { &[true] } else { &[false, true] };
        let (mut total, mut young, mut old) = (0, 0, 0);
        for &file in types {
            for seq in g.min_seq[usize::from(file)]..=g.max_seq {
                let size = self.folios.list_pages(lruvec_gen_list(memcg, g.gen_of(seq), file));
                total += size;
                if seq == g.max_seq {
                    young += size;
                } else if seq + MIN_NR_GENS == g.max_seq {
                    old += size;
                }
            }
        }
        if self.lru.lrugen.reworked {
            return (min + MIN_NR_GENS == g.max_seq && priority != DEF_PRIORITY, total);
        }
        if min + MIN_NR_GENS < g.max_seq {
            return (false, total);
        }
        (young * MIN_NR_GENS > total || old * (MIN_NR_GENS + 2) < total, total)
    }

    /// `lru_gen_look_around`: with the PTE lock of `table` held, a young PTE of the folio being
    /// reclaimed at `addr`; promotes the young neighbours within the PMD and the VMA, at most
    /// `MIN_LRU_BATCH` entries, and feeds the Bloom filter.
    fn lru_gen_look_around(
        &mut self,
        mm: MmId,
        vma: VmaId,
        table: PtId,
        addr: VirtAddr,
        memcg: MemcgId,
    ) {
        let (vs, ve) = self.vma_range(vma);
        if self.vma(vma).flags.has(VmFlags::PFNMAP) {
            return;
        }
        let pmd_start = addr.0 & !((1 << Level::Pmd.shift()) - 1);
        let mut start = vs.0.max(pmd_start);
        let mut end = ve.0.min(pmd_start + (1 << Level::Pmd.shift()));
        let span = MIN_LRU_BATCH * 4096;
        if end - start > span {
            if addr.0 - start < span / 2 {
                end = start + span;
            } else if end - addr.0 < span / 2 {
                start = end - span;
            } else {
                start = addr.0 - span / 2;
                end = addr.0 + span / 2;
            }
        }
        let g = self.lrugen(memcg);
        let generation = g.gen_of(g.max_seq);
        let max_seq = g.max_seq;
        let (mut total, mut young) = (0u64, 1u64);
        let mut a = start;
        while a < end {
            total += 1;
            let i = Level::Pte.index(VirtAddr(a));
            let pte = self.pt.pte(table, i);
            a += 4096;
            if !pte.is_present() || pte.special() || !pte.young() {
                continue;
            }
            let head = self.folios.head(pte.pfn());
            if self.folio_memcg(head) != memcg || self.folios.test(head, pg::RESERVED) {
                continue;
            }
            self.pt.set_pte(table, i, pte.without(Pte::ACCESSED));
            young += 1;
            self.folio_update_gen(head, generation);
        }
        if young * 8 >= total {
            let g = self.lrugen_mut(memcg);
            if let Some(f) = g.filters[(max_seq % 2) as usize].as_mut() {
                f.set(mm, table);
            }
        }
    }

    /// Called by `folio_referenced` for each young PTE it clears under the multi-gen LRU.
    pub(crate) fn lru_gen_referenced_pte(
        &mut self,
        mm: MmId,
        vma: VmaId,
        table: PtId,
        addr: VirtAddr,
        head: Pfn,
    ) {
        let memcg = self.folio_memcg(head);
        self.lru_gen_look_around(mm, vma, table, addr, memcg);
    }

    /// `should_skip_vma` for the page-table walk.
    fn should_skip_vma(&self, vma: VmaId, swappiness: u64) -> bool {
        let v = self.vma(vma);
        if !v.flags.has(VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC) {
            return true;
        }
        if v.flags.has(VmFlags::HUGETLB | VmFlags::LOCKED | VmFlags::PFNMAP) {
            return true;
        }
        if !self.vma_has_recency(vma, self.lru.noreuse, crate::era::MGLRU_IGNORES_RAND_READ) {
            return true;
        }
        let anon_like = v.is_anonymous()
            || v.file.is_some_and(|f| self.inodes[self.file(f).inode].fs.swap_backed());
        anon_like && swappiness == 0
    }

    /// Walks one PTE table of `vma` for the aging: clears young PTEs and promotes their folios;
    /// returns (entries, young).
    fn walk_pte_table(&mut self, memcg: MemcgId, table: PtId, from: u64, to: u64) -> (u64, u64) {
        let g = self.lrugen(memcg);
        let generation = g.gen_of(g.max_seq);
        let (mut total, mut young) = (0, 0);
        let mut a = from;
        while a < to {
            total += 1;
            let i = Level::Pte.index(VirtAddr(a));
            a += 4096;
            let pte = self.pt.pte(table, i);
            if !pte.is_present() || pte.special() || !pte.young() {
                continue;
            }
            let head = self.folios.head(pte.pfn());
            if self.folios.test(head, pg::RESERVED) || self.folio_memcg(head) != memcg {
                continue;
            }
            if self.folios.lru_gen(head).is_none() && self.folios.test(head, pg::LRU) {
                continue;
            }
            self.pt.set_pte(table, i, pte.without(Pte::ACCESSED));
            if pte.dirty() && !self.folios.is_anon(head) {
                self.folio_mark_dirty(head);
            }
            young += 1;
            self.folio_update_gen(head, generation);
        }
        (total, young)
    }

    /// The PTE tables a walk of `mm` visits: `(vma, table, from, to)` for each table covering
    /// part of a VMA the walk does not skip.
    fn walk_targets(&self, mm: MmId, swappiness: u64) -> Vec<(VmaId, PtId, u64, u64)> {
        let m = self.mm(mm);
        let mut out = Vec::new();
        for &v in m.vmas.values() {
            if self.should_skip_vma(v, swappiness) {
                continue;
            }
            let (vs, ve) = self.vma_range(v);
            let pmd = 1u64 << Level::Pmd.shift();
            let mut a = vs.0;
            while a < ve.0 {
                let next = ((a / pmd) + 1) * pmd;
                let to = next.min(ve.0);
                a = match self.pt.pte_slot(m.pgd, VirtAddr(a)) {
                    Some((t, _)) => {
                        out.push((v, t, a, to));
                        to
                    }
                    // No PTE table: step over every empty upper-level entry at once, as
                    // `walk_pud_range`/`walk_pmd_range` skip `pud_none`/`pmd_none`, so a sparse
                    // 8 TiB mapping costs its populated tables, not 4 M lookups.
                    None => self.pt.skip_empty(m.pgd, VirtAddr(a)).0.clamp(to, ve.0),
                };
            }
        }
        out
    }

    /// The mms whose pages this cgroup's aging walks (`get_mm_list`): those of its tasks.
    fn memcg_mms(&self, memcg: MemcgId) -> Vec<MmId> {
        self.mms
            .iter()
            .filter_map(|(id, m)| m.as_ref().map(|m| (id, m.owner)))
            .filter(|&(_, owner)| self.task_memcg(Some(owner)) == memcg)
            .map(|(id, _)| id)
            .collect()
    }

    /// `lru_gen_eviction`: the shadow token of a folio being evicted, and the eviction counted
    /// for its tier.
    pub(crate) fn lru_gen_eviction(&mut self, head: Pfn) -> Shadow {
        let memcg = self.folio_memcg(head);
        let file = self.folio_is_file_lru(head);
        let (refs, tier) = self.folio_refs_tier(head);
        let nr = self.folios.order(head).pages();
        let g = self.lrugen_mut(memcg);
        let min_seq = g.min_seq[usize::from(file)];
        g.evicted[usize::from(file)][tier] += nr;
        let ws = self.folios.test(head, pg::WORKINGSET);
        let token_refs = refs.saturating_sub(1);
        let workingset = if self.lru.lrugen.shadow_keeps_workingset { ws } else { refs > 0 };
        KState::make_shadow(memcg, min_seq << 2 | token_refs.min(3), workingset)
    }

    /// `lru_gen_test_recent`: whether a shadow's generation is still recent in the lruvec that
    /// evicted it: its sequence number is the oldest generation of type `file` (v6.1-v6.13), or
    /// within `MAX_NR_GENS` of the youngest (v6.14). `file` is the caller's word, not the
    /// shadow's: `filemap_cachestat` asks about a shmem page's shadow as file.
    pub(crate) fn lru_gen_test_recent(&self, shadow: &Shadow, file: bool) -> bool {
        let seq = shadow.eviction >> 2;
        let g = self.lrugen(shadow.memcg);
        if self.lru.lrugen.reworked {
            g.max_seq.abs_diff(seq) < u64::from(MAX_NR_GENS)
        } else {
            seq == g.min_seq[usize::from(file)]
        }
    }

    /// `lru_gen_refault`: a folio brought back where a multi-generation shadow was, by a task
    /// inside a fault with recency or not (`current->in_lru_fault`).
    pub(crate) fn lru_gen_refault(&mut self, head: Pfn, shadow: Shadow, in_fault: bool) {
        let memcg = self.folio_memcg(head);
        let file = self.folio_is_file_lru(head);
        let t = usize::from(file);
        let nr = self.folios.order(head).pages();
        let (refault_key, activate_key, restore_key) = KState::refault_keys(file);
        let token_refs = shadow.eviction & 3;
        let rules = self.lru.lrugen;
        // A refault into another memory cgroup than the one that evicted it counts nothing.
        if shadow.memcg != memcg {
            return;
        }
        let recent = self.lru_gen_test_recent(&shadow, file);
        if rules.counts_every_refault {
            self.count_event(memcg, refault_key, nr);
        }
        if !recent {
            return;
        }
        if !rules.counts_every_refault {
            self.count_event(memcg, refault_key, nr);
        }
        if !rules.reworked {
            let refs = token_refs + u64::from(shadow.workingset);
            let tier = order_base_2(refs + 1);
            self.lrugen_mut(memcg).refaulted[t][tier] += nr;
            if rules.counts_every_refault {
                self.count_event(memcg, activate_key, nr);
            }
            if in_fault || refs >= rules.restore_refs {
                self.folios.set(head, pg::WORKINGSET);
                if rules.protects_page_cache {
                    self.folios.set_lru_refs(head, 3);
                }
                self.count_event(memcg, restore_key, nr);
            }
            return;
        }
        let refs = token_refs + 1;
        let tier = if shadow.workingset { MAX_NR_TIERS - 1 } else { order_base_2(refs) };
        self.lrugen_mut(memcg).refaulted[t][tier] += nr;
        if in_fault {
            self.count_event(memcg, activate_key, nr);
        }
        if shadow.workingset {
            self.folios.set(head, pg::WORKINGSET);
            self.count_event(memcg, restore_key, nr);
        } else {
            self.folios.set(head, pg::REFERENCED);
            self.folios.set_lru_refs(head, token_refs as u8);
        }
    }
}

/// `lru_gen_folio_check_references` (v6.14) / the multi-generation branch of
/// `folio_check_references` (v6.1-v6.13): a young PTE (found with look-around) keeps the folio.
pub(crate) async fn lru_gen_folio_check_references(cx: &Cx, head: Pfn) -> References {
    let (young, flags) = crate::rmap::folio_referenced(cx, head).await;
    let mut st = cx.st();
    if flags.has(VmFlags::LOCKED) {
        return References::Activate;
    }
    if young == 0 {
        return References::Reclaim;
    }
    if !st.lru.lrugen.two_sightings {
        return References::Activate;
    }
    // `lru_gen_set_refs`.
    if !st.folios.test(head, pg::REFERENCED | pg::WORKINGSET) {
        st.folios.set_lru_refs(head, 0);
        st.folios.set(head, pg::REFERENCED);
        return References::Keep;
    }
    st.folios.set_lru_refs(head, 0);
    st.folios.clear_flag(head, pg::REFERENCED);
    st.folios.set(head, pg::WORKINGSET);
    References::Activate
}

/// `try_to_inc_max_seq`: walks the page tables of the cgroup's mms, then makes a new
/// generation. Returns false if another walker got there first.
async fn try_to_inc_max_seq(
    cx: &Cx,
    memcg: MemcgId,
    seq: u64,
    swappiness: u64,
    force: bool,
) -> bool {
    {
        let st = cx.st();
        let g = &st.memcgs[memcg].lruvec.lrugen;
        if seq < g.max_seq || seq <= g.walk_seq {
            return false;
        }
    }
    {
        // `iterate_mm_list` starting an iteration: a fresh filter for the next generation.
        let mut st = cx.st();
        let g = &mut st.memcgs[memcg].lruvec.lrugen;
        g.filters[((seq + 1) % 2) as usize] = Some(BloomFilter::new());
    }
    let mms = cx.st().memcg_mms(memcg);
    for mm in mms {
        let lock = match cx.st().mms.get(mm).and_then(Option::as_ref) {
            Some(m) => m.mmap_lock,
            None => continue,
        };
        let Some(_g) = lock.try_read(cx).await else { continue };
        let targets = {
            let st = cx.st();
            if st.mms.get(mm).and_then(Option::as_ref).is_none() {
                continue;
            }
            st.walk_targets(mm, swappiness)
        };
        for (vma, table, from, to) in targets {
            let visit = {
                let st = cx.st();
                let g = &st.memcgs[memcg].lruvec.lrugen;
                force || g.filters[(seq % 2) as usize].as_ref().is_none_or(|f| f.test(mm, table))
            };
            if !visit {
                continue;
            }
            let ptl = cx.st().pt.ptl(table);
            let Some(_p) = ptl.try_lock(cx).await else { continue };
            let (total, young) = {
                let mut st = cx.st();
                if st.vmas.get(vma).and_then(Option::as_ref).is_none() {
                    continue;
                }
                let r = st.walk_pte_table(memcg, table, from, to);
                if r.1 * 8 >= r.0 && r.1 > 0 {
                    let g = &mut st.memcgs[memcg].lruvec.lrugen;
                    if let Some(f) = g.filters[((seq + 1) % 2) as usize].as_mut() {
                        f.set(mm, table);
                    }
                }
                r
            };
            cx.charge_n(Cost::PteUpdate, total.div_ceil(8) + young).await;
        }
    }
    let mut st = cx.st();
    let now = cx.now().as_ns();
    let g = &st.memcgs[memcg].lruvec.lrugen;
    if g.max_seq != seq {
        return false;
    }
    st.memcgs[memcg].lruvec.lrugen.walk_seq = seq;
    st.inc_max_seq(memcg, swappiness, now);
    true
}

/// `get_nr_to_scan`: pages to scan, 0 to stop, or -1 when the lruvec was aged and should rest.
async fn get_nr_to_scan(cx: &Cx, memcg: MemcgId, sc: &ScanControl, swappiness: u64) -> i64 {
    let (need_aging, total, max_seq, rules) = {
        let st = cx.st();
        let (need, total) = st.should_run_aging(memcg, swappiness, sc.priority);
        (need, total, st.memcgs[memcg].lruvec.lrugen.max_seq, st.lru.lrugen)
    };
    let nr = (total >> sc.priority) as i64;
    if !rules.reworked && !rules.kswapd_ages {
        // v6.3-v6.13: skip the aging at the default priority (out of cold folios, `nr` is 0);
        // below it, age and stop scanning this lruvec.
        if !need_aging || sc.priority == DEF_PRIORITY {
            return nr;
        }
        let aged = try_to_inc_max_seq(cx, memcg, max_seq, swappiness, false).await;
        return if aged { -1 } else { 0 };
    }
    if rules.reworked {
        let must = {
            let st = cx.st();
            let g = &st.memcgs[memcg].lruvec.lrugen;
            g.evictable_min_seq(swappiness) + MIN_NR_GENS > g.max_seq
        };
        if !(need_aging || must) {
            return nr;
        }
        return if try_to_inc_max_seq(cx, memcg, max_seq, swappiness, false).await {
            -1
        } else {
            0
        };
    }
    if !need_aging {
        return nr;
    }
    let can_evict = |st: &KState| {
        let g = &st.memcgs[memcg].lruvec.lrugen;
        g.evictable_min_seq(swappiness) + MIN_NR_GENS <= g.max_seq
    };
    if sc.priority == DEF_PRIORITY {
        return if can_evict(&cx.st()) { nr } else { 0 };
    }
    if sc.who == Reclaimer::Kswapd {
        return 0; // left to `lru_gen_age_node`
    }
    try_to_inc_max_seq(cx, memcg, max_seq, swappiness, false).await;
    let st = cx.st();
    let (_, total) = st.should_run_aging(memcg, swappiness, sc.priority);
    if can_evict(&st) { (total >> sc.priority) as i64 } else { 0 }
}

/// `set_initial_priority` (v6.3+, `lru_gen_shrink_node`): global reclaim that asks for at least
/// `MIN_LRU_BATCH` pages at the default priority starts instead at the priority whose share of
/// the inactive pages (the generations below the two youngest) is its target, so kswapd scans a
/// large share of the oldest generations in its first pass, or, where everything is in the two
/// youngest, starts at the floor and ages at once; direct reclaim's 32 pages keep the default.
pub(crate) fn set_initial_priority(st: &KState, sc: &mut ScanControl) {
    let Some(rule) = st.lru.lrugen.initial_priority else { return };
    if sc.priority != DEF_PRIORITY || sc.nr_to_reclaim < MIN_LRU_BATCH {
        return;
    }
    let mut reclaimable = st.lru_pages(LruList::InactiveFile);
    if swappiness(st) > 0 {
        reclaimable += st.lru_pages(LruList::InactiveAnon);
    }
    sc.priority = initial_priority(reclaimable / rule.divisor, sc.nr_to_reclaim, rule.floor);
}

/// `fls_long(reclaimable) - 1 - fls_long(nr_to_reclaim - 1)` (the reclaimable pages rounded
/// down and the target rounded up to powers of two), clamped to `[floor, DEF_PRIORITY]`.
fn initial_priority(reclaimable: u64, nr_to_reclaim: u64, floor: u32) -> u32 {
    let fls = |n: u64| i64::from(64 - n.leading_zeros());
    let priority = fls(reclaimable) - 1 - fls(nr_to_reclaim - 1);
    priority.clamp(i64::from(floor), i64::from(DEF_PRIORITY)) as u32
}

/// `evict_folios`: one batch from the oldest generation; returns the pages scanned.
async fn evict_folios(
    cx: &Cx,
    memcg: MemcgId,
    nr: u64,
    sc: &mut ScanControl,
    swappiness: u64,
) -> u64 {
    let (file, scanned, list) = {
        let mut st = cx.st();
        let (file, scanned, list) = st.isolate_folios(memcg, nr, swappiness);
        let advanced = st.try_to_inc_min_seq(memcg, swappiness);
        let g = &st.memcgs[memcg].lruvec.lrugen;
        let scanned = scanned + u64::from(advanced);
        let scanned =
            if g.evictable_min_seq(swappiness) + MIN_NR_GENS > g.max_seq { 0 } else { scanned };
        sc.count(&mut st, memcg, true, file, list.len() as u64);
        (file, scanned, list)
    };
    if list.is_empty() {
        cx.st().reclaim_lists.give_folios(list);
        return scanned;
    }
    sc.nr_scanned += list.len() as u64;
    cx.charge_n(Cost::LruScan, list.len() as u64).await;
    let (reclaimed, rejected) = shrink_folio_list(cx, list, false).await;
    sc.nr_reclaimed += reclaimed;
    let mut st = cx.st();
    sc.count(&mut st, memcg, false, file, reclaimed);
    for &r in &rejected {
        if r.activate {
            activate_rejected(&mut st, r.head);
        }
        st.lru_gen_putback_rejected(r.head);
    }
    st.reclaim_lists.give_rejected(rejected);
    scanned
}

/// `try_to_shrink_lruvec`: evicts from one lruvec until it has scanned its share or the target
/// is met.
pub(crate) async fn try_to_shrink_lruvec(cx: &Cx, memcg: MemcgId, sc: &mut ScanControl) {
    let swappiness = swappiness(&cx.st());
    let mut scanned = 0u64;
    loop {
        let nr = get_nr_to_scan(cx, memcg, sc, swappiness).await;
        if nr <= 0 {
            break;
        }
        let nr = nr as u64;
        let delta = evict_folios(cx, memcg, nr, sc, swappiness).await;
        if delta == 0 {
            break;
        }
        scanned += delta;
        if scanned >= nr || sc.nr_reclaimed >= sc.nr_to_reclaim {
            break;
        }
    }
}

/// `lru_gen_age_node` (kswapd): ages the lruvecs that need it (v6.1-v6.2) and checks `min_ttl`.
pub(crate) async fn lru_gen_age_node(cx: &Cx, sc: &ScanControl) {
    let (memcgs, min_ttl, swappiness, kswapd_ages) = {
        let st = cx.st();
        (
            st.memcg_subtree(crate::memcontrol::ROOT_MEMCG).collect::<Vec<_>>(),
            st.lru.min_ttl_ns,
            swappiness(&st),
            st.lru.lrugen.kswapd_ages,
        )
    };
    let now = cx.now().as_ns();
    let mut reclaimable = min_ttl == 0;
    for memcg in memcgs {
        let (need, total, max_seq, birth) = {
            let st = cx.st();
            let (need, total) = st.should_run_aging(memcg, swappiness, sc.priority);
            let g = &st.memcgs[memcg].lruvec.lrugen;
            let birth = g.timestamps[g.gen_of(g.evictable_min_seq(swappiness)) as usize];
            (need, total, g.max_seq, birth)
        };
        if min_ttl > 0 {
            let old_enough = now >= birth + min_ttl;
            let sizable = total >> sc.priority != 0 || sc.priority == DEF_PRIORITY;
            if old_enough && sizable {
                reclaimable = true;
            }
            if !old_enough {
                continue;
            }
        }
        if need && kswapd_ages {
            try_to_inc_max_seq(cx, memcg, max_seq, swappiness, false).await;
        }
    }
    if !reclaimable {
        cx.st().vmstat.inc(VmStat::OomKill);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_and_tiers() {
        let sp = CtrlPos { refaulted: 100, total: 1000, gain: 1 };
        assert!(
            positive_ctrl_err(sp, CtrlPos { refaulted: 10, total: 10, gain: 2 }),
            "few refaults"
        );
        assert!(positive_ctrl_err(sp, CtrlPos { refaulted: 150, total: 1000, gain: 2 }));
        assert!(!positive_ctrl_err(sp, CtrlPos { refaulted: 300, total: 1000, gain: 2 }));
        assert_eq!([0, 1, 2, 3, 4, 5].map(order_base_2), [0, 0, 1, 2, 2, 3]);
        let mut g = LruGen::new(7);
        assert_eq!((g.max_seq, g.min_seq, g.nr_gens(true)), (3, [0, 0], 4));
        assert!(g.is_active(3) && g.is_active(2) && !g.is_active(1));
        g.evicted[1][0] = 10;
        g.refaulted[1][0] = 4;
        g.reset_ctrl_pos(true);
        assert_eq!((g.avg_total[1][0], g.avg_refaulted[1][0], g.evicted[1][0]), (5, 2, 0));
        let mut f = BloomFilter::new();
        assert!(!f.test(MmId(1), PtId(2)));
        f.set(MmId(1), PtId(2));
        assert!(f.test(MmId(1), PtId(2)));
    }

    const PAGES: u64 = 8;

    /// A multi-gen LRU machine running `kernel` whose root lruvec holds a file of `PAGES` pages
    /// read `times` times through a file descriptor (no readahead): every page in the oldest
    /// file generation, in the tier those reads give it.
    fn read_file(kernel: &str, times: u32) -> crate::Machine {
        use crate::{FileSpec, Machine, MachineConfig, OpenFlags, Profile};
        let mut c = MachineConfig::new(Profile::named("tiny").unwrap(), kernel.parse().unwrap());
        c.switches.set("lru", "mglru").unwrap();
        c.tunables.ra_pages = 0;
        let mut m = Machine::new(c).unwrap();
        m.create_file("/f", &FileSpec::zeros(simcore::Bytes(PAGES * 4096))).unwrap();
        let pid = m.new_process("reader").unwrap();
        m.spawn_thread(pid, 0, "reader", move |t| async move {
            let fd = t.open("/f", OpenFlags::RDONLY).await.unwrap();
            for _ in 0..times {
                for p in 0..PAGES {
                    t.pread(fd, None, 4096, p * 4096).await.unwrap();
                }
            }
        })
        .unwrap();
        m.run_checked().unwrap();
        m
    }

    /// The folios of the oldest file generation of the root lruvec, oldest first.
    fn oldest_file_folios(st: &KState) -> Vec<Pfn> {
        let g = st.lrugen(ROOT);
        st.folios.list_iter(lruvec_gen_list(ROOT, g.gen_of(g.min_seq[1]), true)).collect()
    }

    const ROOT: MemcgId = crate::memcontrol::ROOT_MEMCG;

    /// Pages `sort_folio` protects count in the total of their own tier, for the controller
    /// (`read_ctrl_pos`) and for its average (`reset_ctrl_pos`), in both eras: v6.1-v6.13 store
    /// and read tier `t` at `protected[t - 1]`, v6.14 at `protected[t]`.
    #[test]
    fn protected_pages_count_in_their_own_tier() {
        // v6.3: two reads give tier 1 (PG_referenced, then PG_workingset); v6.14: tier 1 too
        // (PG_referenced and a counter of 1: two references).
        for kernel in ["v6.3", "v6.14"] {
            let m = read_file(kernel, 2);
            let mut st = m.kernel().state_mut();
            let folios = oldest_file_folios(&st);
            assert_eq!(folios.len() as u64, PAGES, "{kernel}");
            for &head in &folios {
                assert_eq!(st.folio_refs_tier(head).1, 1, "{kernel}");
                assert!(st.sort_folio(head, 0), "tier 1 above tier_idx 0 is protected");
            }
            let g = st.lrugen(ROOT).clone();
            assert_eq!(g.ctrl_pos(true, 1..2, 1).total, PAGES, "{kernel}: tier 1");
            assert_eq!(g.ctrl_pos(true, 0..1, 1).total, 0, "{kernel}: tier 0");
            assert_eq!(g.ctrl_pos(true, 2..MAX_NR_TIERS, 1).total, 0, "{kernel}: tiers 2-3");
            let g = st.lrugen_mut(ROOT);
            g.reset_ctrl_pos(true);
            assert_eq!(g.avg_total[1], [0, PAGES / 2, 0, 0], "{kernel}");
        }
    }

    /// A machine running `kernel` (no swap: file pages only are evictable) whose root lruvec
    /// holds `PAGES` file pages faulted through a mapping, in the youngest generation, and whose
    /// file `min_seq` has moved up past the empty generations: out of cold folios, it must age
    /// before it can evict.
    fn out_of_cold(kernel: &str) -> (crate::Machine, crate::Pid) {
        use crate::{FileSpec, Machine, MachineConfig, MmapArgs, OpenFlags, Profile};
        let mut c = MachineConfig::new(Profile::named("tiny").unwrap(), kernel.parse().unwrap());
        c.switches.set("lru", "mglru").unwrap();
        let mut m = Machine::new(c).unwrap();
        m.create_file("/f", &FileSpec::zeros(simcore::Bytes(PAGES * 4096))).unwrap();
        let pid = m.new_process("mapper").unwrap();
        m.spawn_thread(pid, 0, "mapper", move |t| async move {
            let fd = t.open("/f", OpenFlags::RDONLY).await.unwrap();
            let len = simcore::Bytes(PAGES * 4096);
            let prot = crate::prot::READ;
            let args = MmapArgs {
                addr: None,
                len,
                prot,
                flags: crate::map::SHARED,
                fd: Some(fd),
                offset: 0,
            };
            let at = t.mmap(args).await.unwrap();
            t.touch(at, len, crate::Access::Read).await.unwrap();
        })
        .unwrap();
        m.run_checked().unwrap();
        {
            let mut st = m.kernel().state_mut();
            st.try_to_inc_min_seq(ROOT, 0);
            let g = st.lrugen(ROOT);
            assert_eq!((g.max_seq, g.min_seq[1]), (3, 2), "{kernel}");
        }
        (m, pid)
    }

    /// What a reclaimer calls on the lruvec.
    #[derive(Clone, Copy, Debug)]
    enum Call {
        /// kswapd's `lru_gen_age_node` at the default priority.
        AgeNode,
        /// `get_nr_to_scan` at a priority.
        NrToScan(Reclaimer, u32),
    }

    /// Runs `call` on [`out_of_cold`]'s lruvec: what `get_nr_to_scan` returned (0 for the
    /// aging of the node) and `max_seq` after.
    fn on_out_of_cold(kernel: &str, call: Call) -> (i64, u64) {
        let (mut m, pid) = out_of_cold(kernel);
        let out = std::rc::Rc::new(std::cell::Cell::new(0));
        let o = out.clone();
        m.spawn_thread(pid, 0, "reclaimer", move |t| async move {
            let (who, priority) = match call {
                Call::AgeNode => (Reclaimer::Kswapd, DEF_PRIORITY),
                Call::NrToScan(who, priority) => (who, priority),
            };
            let mut sc = ScanControl::new(who, ROOT, 512);
            sc.priority = priority;
            match call {
                Call::AgeNode => lru_gen_age_node(t.cx(), &sc).await,
                Call::NrToScan(..) => o.set(get_nr_to_scan(t.cx(), ROOT, &sc, 0).await),
            }
        })
        .unwrap();
        m.run_checked().unwrap();
        let max_seq = m.kernel().state().lrugen(ROOT).max_seq;
        (out.get(), max_seq)
    }

    /// Who ages a lruvec out of cold folios: v6.2's kswapd ages it in `lru_gen_age_node`, at the
    /// default priority too, and leaves it to that in `get_nr_to_scan`, where direct reclaim
    /// ages and goes on to evict; from v6.3 ("remove aging fairness safeguard", "per-node
    /// lru_gen_folio lists") `lru_gen_age_node` does not age, and `get_nr_to_scan` below the
    /// default priority ages for either and stops the lruvec's pass (-1).
    #[test]
    fn the_aging_moved_from_kswapd_to_the_eviction_in_v6_3() {
        use Reclaimer::{Direct, Kswapd};
        let at_default = Call::NrToScan(Kswapd, DEF_PRIORITY);
        let cases = [
            ("v6.2", Call::AgeNode, (0, 4)),
            ("v6.3", Call::AgeNode, (0, 3)),
            ("v6.8", Call::AgeNode, (0, 3)),
            ("v6.2", at_default, (0, 3)),
            ("v6.3", at_default, (0, 3)),
            ("v6.2", Call::NrToScan(Kswapd, 11), (0, 3)),
            ("v6.3", Call::NrToScan(Kswapd, 11), (-1, 4)),
            ("v6.8", Call::NrToScan(Kswapd, 11), (-1, 4)),
            ("v6.2", Call::NrToScan(Direct, 11), (0, 4)),
            ("v6.3", Call::NrToScan(Direct, 11), (-1, 4)),
        ];
        for (kernel, call, want) in cases {
            assert_eq!(on_out_of_cold(kernel, call), want, "{kernel} {call:?}");
        }
    }

    /// `set_initial_priority`: `fls(inactive) - 1 - fls(nr_to_reclaim - 1)` clamped, the
    /// inactive pages divided by 3 on v6.3-v6.6; only for global reclaim of 64 pages or more
    /// (kswapd), from v6.3.
    #[test]
    fn global_reclaim_starts_at_the_priority_its_target_asks() {
        assert_eq!(initial_priority(90_000 / 3, 1548, 0), 3);
        assert_eq!(initial_priority(90_000, 1548, 0), 5);
        assert_eq!(initial_priority(90_000, 1548, DEF_PRIORITY / 2), 6);
        assert_eq!(initial_priority(0, 1548, 0), 0, "nothing inactive: the floor");
        assert_eq!(initial_priority(u64::MAX, 64, 0), DEF_PRIORITY);
        // `read_file`'s pages are in the oldest generation, inactive.
        for (kernel, kswapd, direct) in [("v6.2", 12, 12), ("v6.3", 0, 12), ("v6.11", 6, 12)] {
            let m = read_file(kernel, 1);
            let st = m.kernel().state();
            assert_eq!(st.lru_pages(LruList::InactiveFile), PAGES, "{kernel}");
            for (who, nr, want) in
                [(Reclaimer::Kswapd, 64, kswapd), (Reclaimer::Direct, 32, direct)]
            {
                let mut sc = ScanControl::new(who, ROOT, nr);
                set_initial_priority(&st, &mut sc);
                assert_eq!(sc.priority, want, "{kernel} {who:?}");
            }
        }
    }

    /// The putback of folios `shrink_folio_list` rejected, v6.1-v6.13: a folio goes back to the
    /// youngest generation without its tier; one under reclaim and dirty goes where a cold but
    /// busy folio goes, referenced again if it is workingset.
    #[test]
    fn rejected_folios_go_back_young_without_their_tier() {
        for kernel in ["v6.3", "v6.8"] {
            let m = read_file(kernel, 2);
            let mut st = m.kernel().state_mut();
            // v6.7+ read the pages one generation above the oldest.
            let list = |g| lruvec_gen_list(ROOT, g, true);
            let folios: Vec<Pfn> =
                (0..MAX_NR_GENS).flat_map(|g| st.folios.list_iter(list(g))).collect();
            let (plain, dirty) = (folios[0], folios[1]);
            for head in [plain, dirty] {
                st.isolate_folio(head);
                assert_eq!(st.folio_refs_tier(head).1, 1, "{kernel}: PG_workingset kept");
            }
            st.folios.set(dirty, pg::RECLAIM | pg::DIRTY);
            st.lru_gen_putback_rejected(plain);
            st.lru_gen_putback_rejected(dirty);
            let g = st.lrugen(ROOT).clone();
            assert_eq!(st.folios.lru_gen(plain), Some(g.gen_of(g.max_seq)), "{kernel}");
            assert_eq!(st.folio_refs_tier(plain), (0, 0), "{kernel}: no tier");
            assert!(!st.folios.test(plain, pg::WORKINGSET | pg::REFERENCED), "{kernel}");
            // Placed as a cold but busy folio: v6.1-v6.6 above the oldest, v6.7+ below the
            // youngest.
            let busy = if kernel == "v6.3" { g.min_seq[1] + 1 } else { g.max_seq - 1 };
            assert_eq!(st.folios.lru_gen(dirty), Some(g.gen_of(busy)), "{kernel}");
            assert!(st.folios.test(dirty, pg::REFERENCED), "{kernel}: referenced again");
        }
    }

    /// `isolate_folio`: v6.1-v6.13 clear `PG_referenced` of every isolated folio, and the tier
    /// of one not referenced (its counter and `PG_workingset`); v6.14 clears the counter of one
    /// not referenced and keeps `PG_referenced`.
    #[test]
    fn isolation_clears_the_era_s_reference_flags() {
        for (kernel, referenced_after) in [("v6.3", false), ("v6.14", true)] {
            let m = read_file(kernel, 1);
            let mut st = m.kernel().state_mut();
            let folios = oldest_file_folios(&st);
            // A refault restores PG_workingset without PG_referenced (`lru_gen_refault`).
            let restored = folios[0];
            st.folios.clear_flag(restored, pg::REFERENCED);
            st.folios.set(restored, pg::WORKINGSET);
            let (_, _, isolated) = st.scan_folios(ROOT, true, MAX_NR_TIERS - 1, PAGES);
            assert_eq!(isolated, folios, "{kernel}: all isolated, oldest first");
            for &head in &folios[1..] {
                assert_eq!(st.folios.test(head, pg::REFERENCED), referenced_after, "{kernel}");
            }
            let ws = st.folios.test(restored, pg::WORKINGSET);
            assert_eq!(ws, referenced_after, "{kernel}: PG_workingset of a folio not referenced");
        }
    }
}
