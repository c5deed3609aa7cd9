//! Memory-cgroup state (`include/linux/memcontrol.h`: `struct mem_cgroup` with its limit,
//! usage, statistics and events, and the `struct lruvec` it owns). The code is in
//! `memcontrol.rs`, `lru.rs` and `mglru.rs`.

use crate::types::ids::MemcgId;
use crate::types::mmzone::LruGen;
use crate::vmstat::VmStats;

/// `struct mem_cgroup`.
#[derive(Debug)]
pub struct MemCgroup {
    /// The cgroup's path (`/` for the root).
    pub path: String,
    pub parent: Option<MemcgId>,
    /// `memory.max` in pages; `None` is `max`.
    pub max: Option<u64>,
    /// Pages charged to this cgroup and its descendants (`memory.current`).
    pub usage: u64,
    /// Events and LRU counters of this cgroup alone, by their `/proc/vmstat` names.
    pub stat: VmStats,
    /// `memory.events`: `max` (the limit was hit) and `oom_kill`.
    pub events_max: u64,
    pub events_oom: u64,
    pub lruvec: Lruvec,
}

/// The per-node LRU state of a memory cgroup (`struct lruvec`).
#[derive(Debug, Default)]
pub struct Lruvec {
    /// Pages evicted or activated (`nonresident_age`, the clock of refault distances).
    pub nonresident_age: u64,
    /// `WORKINGSET_ACTIVATE_{ANON,FILE}` when reclaim last finished (`lruvec->refaults`).
    pub refaults: [u64; 2],
    /// The multi-gen LRU state (`lruvec->lrugen`).
    pub lrugen: LruGen,
}
