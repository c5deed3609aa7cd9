//! Translation lookaside buffers, paging-structure caches and the hardware page walk: the MMU's
//! side of address translation (Intel SDM Vol. 3A §4.10 "Caching Translation Information";
//! AMD64 APM Vol. 2 §5.5; Arm Cortex-A76 TRM, chapter A5), with the kernel's per-CPU ASID
//! management from `arch/x86/mm/tlb.c` (Linux v6.8).
//!
//! Each CPU has a two-level hierarchy configured by the machine profile ([`TlbGeometry`]):
//! first-level instruction and data TLBs made of arrays that each hold some page sizes (Intel
//! keeps one array per size, AMD and the Cortex-A76 one array for all), a second level that is
//! either unified or split into an instruction and a data side, and three paging-structure
//! caches that remember the upper-level entries of recent walks (PGD, PUD and PMD entries: the
//! PML4E, PDPTE and PDE caches of the SDM). Arrays are set-associative with true LRU or bit-PLRU
//! replacement; every entry carries an ASID tag.
//!
//! The files: `geometry.rs` (what a profile describes), `array.rs` (the set-associative arrays
//! and their replacement), `cpu.rs` (one CPU's hierarchy and the translation of one access),
//! `walk_cache.rs` (the PML4E, PDPTE and PDE caches), `walk.rs` (the hardware page walk and the
//! entries it makes), `asid.rs` (ASID slots, `tlb_gen` and the flushes), `check.rs` (the TLB
//! checkers).
//!
//! Approximations: one lookup per reference the caller passes (instruction fetch blocks, where a
//! profile has them, are the trace replay's: `trace::replay`; no split loads beyond what the
//! caller asks); no prefetching of translations, no speculative walks, no accessed-bit-only walks;
//! a hit sets no accessed bit (x86's `ptep_clear_flush_young` does not flush either); walk
//! latency is a fixed cost per entry read, without modelling the data caches that hold the tables;
//! ASIDs and the deferred flush are Linux x86's on every profile (arm64's global ASID allocator
//! rarely flushes on a switch, which a large slot count stands for). The hot path (a hit) is
//! synchronous; only faults enter the async mechanisms.

mod array;
mod asid;
mod check;
mod cpu;
mod geometry;
mod translate;
mod walk;
mod walk_cache;

pub(crate) use asid::FlushKind;
pub use asid::Tlbs;
pub use cpu::CpuTlb;
pub use geometry::{ArrayGeometry, PageSize, Replacement, SecondLevel, TlbGeometry, sizes};

use crate::pgtable::Access;

simcore::counter_keys! {
    /// Per-CPU translation events, named as `perf stat` names them where it has a name.
    pub enum TlbEvent {
        /// Instruction fetches translated: one per fetch block the front end fetches, or per
        /// instruction on a profile without fetch blocks (a faulting attempt counts at its
        /// retry).
        ItlbLoads = "iTLB-loads",
        /// Instruction fetches that missed the first level.
        ItlbLoadMisses = "iTLB-load-misses",
        /// Loads translated: one per retired load.
        DtlbLoads = "dTLB-loads",
        /// Loads that missed the first level.
        DtlbLoadMisses = "dTLB-load-misses",
        /// Stores translated: one per retired store.
        DtlbStores = "dTLB-stores",
        /// Stores that missed the first level.
        DtlbStoreMisses = "dTLB-store-misses",
        /// First-level misses that missed the second level and walked (successfully or not).
        ItlbWalks = "itlb_walks",
        DtlbWalks = "dtlb_walks",
        /// Cycles spent walking.
        WalkCycles = "walk_cycles",
        /// Page-table entries read by walks.
        WalkRefs = "walk_refs",
        /// Walks that started below the PGD thanks to a walk-cache hit.
        WalkCacheHits = "walk_cache_hits",
        /// Stores that hit an entry whose dirty bit was clear and set it in the PTE.
        DirtyAssists = "dirty_assists",
        /// Whole-ASID flushes: more than the single-page ceiling, a new ASID, or a switch back
        /// to an mm whose generation moved on.
        AsidFlushes = "asid_flushes",
        /// Pages invalidated one by one (`invlpg`).
        PageFlushes = "page_flushes",
        /// Shootdown IPIs this CPU handled.
        ShootdownsReceived = "shootdowns_received",
    }
}

/// Translation event counters.
pub type TlbStats = simcore::Counters<TlbEvent>;
