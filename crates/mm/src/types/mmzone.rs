//! Zone and LRU state (`include/linux/mmzone.h`): the watermarks, the LRU's algorithm and
//! tunables, the multi-gen LRU's generations, tiers and Bloom filters (`struct lru_gen_folio`,
//! `struct lru_gen_mm_walk`'s filters) with the rules of its era, and reclaim's folio lists
//! (`mm/vmscan.c`'s on-stack lists, kept between passes). The code is in `vmscan.rs`,
//! `lru.rs` and `mglru.rs`.

use simcore::Pfn;

/// The zone watermarks, in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

/// Reclaim's folio lists (the kernel's on-stack `LIST_HEAD`s of isolated folios), kept between
/// passes so that reclaim allocates nothing in steady state: a pass takes a list and gives it
/// back; concurrent passes (kswapd and direct reclaimers) take different lists. Readahead's
/// batches of new folios (`readahead_control`'s pages) are kept the same way.
#[derive(Debug, Default)]
pub struct ReclaimLists {
    pub(crate) folios: Vec<Vec<Pfn>>,
    pub(crate) rejected: Vec<Vec<Rejected>>,
    pub(crate) reads: Vec<Vec<(u64, Pfn)>>,
}

/// What the LRU code needs to know about the kernel, the switches and the tunables, kept in
/// `KState` so that the synchronous list operations can read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LruConfig {
    pub reclaim: Reclaim,
    /// `fadv_noreuse = no_recency`: FMODE_NOREUSE takes recency away from mappings.
    pub noreuse: bool,
    /// `vma_has_recency` exists: the classic LRU ignores `VM_RAND_READ` too
    /// ([`crate::era::vma_has_recency`]).
    pub rand_read_has_no_recency: bool,
    /// The multi-gen LRU's rules of this era.
    pub lrugen: GenRules,
    /// `vm.swappiness`.
    pub swappiness: u64,
    /// `/sys/kernel/mm/lru_gen/min_ttl_ms`, in ns (0: off).
    pub min_ttl_ns: u64,
}

/// The page reclaim policy of a machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// The classic two-list LRU (`vmscan.rs`).
    Classic,
    /// The multi-gen LRU (`mglru.rs`).
    MultiGen,
    /// Not a kernel policy: the classic LRU reduced to one exact least-recently-used order
    /// (`lru_pure.rs`), to check page-cache replays against cache simulators.
    Pure,
}

/// A folio reclaim isolated but did not free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rejected {
    pub head: Pfn,
    pub activate: bool,
}

/// `struct lru_gen_folio` with the walk state of `struct lru_gen_mm_state`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LruGen {
    pub max_seq: u64,
    /// Oldest generation per type (anon, file).
    pub min_seq: [u64; 2],
    /// Birth of each generation, in ns of virtual time.
    pub timestamps: [u64; MAX_NR_GENS as usize],
    pub avg_refaulted: TierCounts,
    pub avg_total: TierCounts,
    pub refaulted: TierCounts,
    pub evicted: TierCounts,
    pub protected: TierCounts,
    /// Completed page-table walks (`mm_state->seq`).
    pub walk_seq: u64,
    /// The double-buffered Bloom filters, by `seq % 2`; `None` until first reset.
    pub(crate) filters: [Option<BloomFilter>; 2],
}

/// The multi-gen LRU's rules of a kernel era, chosen once from the version: the constants the
/// eras differ by (gains, the flags each step sets or clears), and where the v6.14 rework
/// changed an algorithm's shape, which era's algorithm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenRules {
    /// v6.14's reworked placement, tiers, type choice and aging trigger
    /// ([`crate::era::mglru_reworked_tiers`]).
    pub reworked: bool,
    /// Every refault into the evicting lruvec is counted, and every recent one (before v6.14)
    /// as an activation ([`crate::era::mglru_counts_every_refault`]).
    pub counts_every_refault: bool,
    /// v6.7's protection of the page cache ([`crate::era::mglru_protects_page_cache`]): the
    /// references a refault needs to be restored ([`GenRules::restore_refs`]) restore all its
    /// reference bits too, `sort_folio` protects a saturated folio, and the placement of new
    /// folios moves up.
    pub protects_page_cache: bool,
    /// The references (with `PG_workingset`) from which a refault outside a fault is restored
    /// as workingset (v6.1-v6.13).
    pub restore_refs: u64,
    /// `get_tier_idx`'s gains of the setpoint and of the process variable.
    pub tier_gains: (u64, u64),
    /// `LRU_REFS_FLAGS`: cleared with the reference counter when a folio changes generation.
    pub refs_flags: u16,
    /// What `isolate_folio` clears of every folio it isolates.
    pub isolate_clears: u16,
    /// What `isolate_folio` clears, with the counter, of a folio not referenced.
    pub isolate_unreferenced_clears: u16,
    /// What `folio_update_gen` sets on a folio it promotes.
    pub promotion_sets: u16,
    /// A folio first seen young (neither referenced nor workingset), by the aging or by reclaim,
    /// is only marked referenced: it takes two sightings.
    pub two_sightings: bool,
    /// A saturated folio (every reference and `PG_workingset`) was promoted lazily: `sort_folio`
    /// moves it up without counting it as protected.
    pub lazy_promotion: bool,
    /// `inc_min_seq` counts the folios it moves up, except lazily promoted ones, as protected in
    /// their tier.
    pub inc_min_seq_protects: bool,
    /// `sort_folio` counts a protected folio as a workingset activation.
    pub protection_activates: bool,
    /// The eviction's shadow keeps `PG_workingset` (else: whether the folio had references).
    pub shadow_keeps_workingset: bool,
    /// v6.1-v6.2: kswapd's `lru_gen_age_node` ages the lruvecs that need it, at every priority,
    /// and `get_nr_to_scan` leaves kswapd's aging to it while direct reclaim ages and evicts in
    /// one call; else the eviction ages, for both, below the default priority, and stops the
    /// lruvec's pass ([`crate::era::mglru_ages_in_eviction`]).
    pub kswapd_ages: bool,
    /// `set_initial_priority` (v6.3+): global reclaim of `MIN_LRU_BATCH` pages or more starts
    /// at the priority its target asks of the inactive pages.
    pub initial_priority: Option<InitialPriority>,
}

/// `set_initial_priority`'s constants: the priority is `fls(inactive / divisor) - 1 -
/// fls(nr_to_reclaim - 1)` clamped to `[floor, DEF_PRIORITY]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitialPriority {
    /// v6.3-v6.6 divide the inactive pages by `MEMCG_NR_GENS` (3); "mm/mglru: respect
    /// min_ttl_ms with memcgs" (8aa420617918, v6.7) dropped the division.
    pub divisor: u64,
    /// 0, or `DEF_PRIORITY / 2` ([`crate::era::mglru_initial_priority_floor`]).
    pub floor: u32,
}

/// A Bloom filter of PTE tables worth visiting (m = 2^15, k = 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloomFilter(pub(crate) Box<[u64]>);

/// `MAX_NR_GENS`.
pub const MAX_NR_GENS: u8 = 4;

/// Per type (anon, file) and tier.
pub(crate) type TierCounts = [[u64; MAX_NR_TIERS]; 2];

/// `MIN_NR_GENS`.
pub const MIN_NR_GENS: u64 = 2;

/// `MAX_NR_TIERS`.
pub const MAX_NR_TIERS: usize = 4;
