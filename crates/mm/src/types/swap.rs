//! Swap and workingset state (`include/linux/swap.h`: the swap device's map, counts, cache and
//! contents, `struct swap_info_struct`; `mm/workingset.c`: shadow entries and where they are
//! kept). The code is in `swap.rs` and `workingset.rs`.

use crate::sim::content::Content;
use crate::types::ids::InodeId;
use crate::types::ids::MemcgId;
use simcore::Pfn;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::VecDeque;

/// A shadow entry (`pack_shadow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shadow {
    pub memcg: MemcgId,
    /// Classic: `nonresident_age` at the eviction. Multi-gen: `min_seq << 2 | (refs - 1)`.
    pub eviction: u64,
    pub workingset: bool,
    /// Creation order, for the shrinker.
    pub(crate) stamp: u64,
}

/// The swap cache's shadow entries, and the shrinker's order and counts of every shadow; the
/// page-cache shadows sit in their mapping's slots (`xarray.rs`).
#[derive(Debug, Default)]
pub struct Workingset {
    /// Swap-cache shadows by slot.
    pub(crate) swap: BTreeMap<u64, Shadow>,
    /// The shrinker's view of each memory cgroup's shadows, by cgroup id (a vector: every
    /// eviction and refault asks, and the ids are small and dense).
    pub(crate) per_memcg: Vec<MemcgShadows>,
    pub(crate) next_stamp: u64,
}

/// The machine's swap device.
#[derive(Debug, Default)]
pub struct SwapDevice {
    /// Slots on the device.
    pub(crate) slots: u64,
    /// Per slot used so far: PTE references in the low bits, `HAS_CACHE` for a swap-cache
    /// folio. It grows as slots are first used, so the host pays for the slots a run uses, not
    /// for the device's size; every slot past its end is free.
    pub(crate) map: Vec<u8>,
    /// References past `SWAP_MAP_MAX`, of the slots whose map byte is full (the module note).
    pub(crate) continued: BTreeMap<u64, u32>,
    /// Free slots below the end of `map`.
    pub(crate) free: BTreeSet<u64>,
    /// Contents written to each slot.
    pub(crate) data: BTreeMap<u64, Content>,
    /// Slots whose folio was all zeros when written, and was not written (`si->zeromap`,
    /// v6.12: `swap.rs`).
    pub(crate) zeromap: BTreeSet<u64>,
    /// The swap cache: slot to folio.
    pub(crate) cache: BTreeMap<u64, Pfn>,
    /// Slot of each swap-cache folio.
    pub(crate) slot_of: BTreeMap<u64, u64>,
}

/// One memory cgroup's shadows for the shrinker.
#[derive(Debug, Default)]
pub(crate) struct MemcgShadows {
    /// Shadows in eviction order (entries whose shadow is gone are skipped).
    pub(crate) order: VecDeque<(ShadowSlot, u64)>,
    /// Live shadows.
    pub(crate) count: u64,
}

/// Where a shadow lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShadowSlot {
    PageCache(InodeId, u64),
    Swap(u64),
}
