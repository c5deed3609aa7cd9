//! KSM state (`mm/ksm.c`: `struct ksm_rmap_item`, `struct ksm_stable_node`, the mm slots
//! ksmd walks, its cursor, its stable and unstable trees, and the knobs of `/sys/kernel/mm/ksm/`).
//! The code is in `ksm.rs`.

use crate::types::ids::AnonVmaId;
use crate::types::ids::MmId;
use crate::types::ids::StableNodeId;
use simcore::Pfn;
use simcore::SimTime;
use simcore::VirtAddr;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// ksmd's state, lists, trees and knobs.
#[derive(Clone, Debug)]
pub struct Ksm {
    /// `run`: 0 stop, 1 merge, 2 unmerge (`KSM_RUN_*`).
    pub run: u64,
    pub pages_to_scan: u64,
    pub sleep_millisecs: u64,
    pub merge_across_nodes: u64,
    pub use_zero_pages: bool,
    /// `smart_scan` (v6.7+, on by default): ksmd skips pages that never merged (`ksm.rs`).
    pub smart_scan: bool,
    /// `pages_skipped` (v6.7+): pages smart scan skipped.
    pub pages_skipped: u64,
    /// `pages_scanned` (v6.6+): pages ksmd looked at.
    pub pages_scanned: u64,
    /// `ksm_zero_pages` (v6.6+): zero pages KSM mapped that are still mapped (`ksm/zero.rs`).
    pub zero_pages: u64,
    /// The addresses of populated page tables ksmd's current round walked past, each a
    /// `folio_walk_start` the round pays for, whether a page it can merge was there or not.
    pub(crate) walked: u64,
    /// `max_page_sharing` (v4.13+): the mappings one KSM page may have (`ksm/chain.rs`).
    pub max_page_sharing: u64,
    /// `stable_node_chains_prune_millisecs` (v4.13+): how often a search walks a whole chain.
    pub chains_prune_millisecs: u64,
    /// The stable-node chains: KSM pages with the same contents beyond the sharing limit.
    pub(crate) chains: BTreeMap<ChainId, Chain>,
    pub(crate) next_chain: u32,
    pub(crate) mm_slots: Vec<MmId>,
    /// The mm being scanned (an index into `mm_slots`) and the next address; `None` between
    /// full scans (`ksm_scan.mm_slot == &ksm_mm_head`).
    pub(crate) cursor: Option<(usize, VirtAddr)>,
    /// `ksm_scan.seqnr`: completed full scans.
    pub(crate) seqnr: u64,
    pub(crate) items: BTreeMap<(MmId, VirtAddr), RmapItem>,
    pub(crate) nodes: BTreeMap<StableNodeId, StableNode>,
    pub(crate) next_node: u32,
    /// The stable tree, by contents (checksum, then node).
    pub(crate) stable: BTreeSet<(u64, StableNodeId)>,
    /// The unstable tree of this pass, by contents at insertion.
    pub(crate) unstable: BTreeSet<(u64, MmId, VirtAddr)>,
    pub(crate) wait: Option<engine::WaitQueue>,
    pub(crate) thread_mutex: Option<engine::Mutex>,
}

/// `struct ksm_rmap_item`: one scanned address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RmapItem {
    pub(crate) oldchecksum: u64,
    pub(crate) state: ItemState,
    /// Scans that looked at the item (`age`, saturating at 255; smart scan, v6.7+).
    pub(crate) age: u8,
    /// Scans smart scan may still skip the item (`remaining_skips`).
    pub(crate) remaining_skips: u8,
}

/// `struct ksm_stable_node`: a KSM page and the addresses counted as mapping it, each with the
/// anon_vma it was merged under (`rmap_item->anon_vma`, for `rmap_walk_ksm`). `mapped` holds the
/// addresses where a merge mapped the page and `stable_tree_append` has not counted yet: the
/// kernel's rmap walk misses them for that moment, the model's looks there too, so the
/// checkers find every mapping.
#[derive(Clone, Debug)]
pub(crate) struct StableNode {
    pub(crate) kpfn: Pfn,
    pub(crate) checksum: u64,
    pub(crate) mapped: Vec<(MmId, VirtAddr, AnonVmaId)>,
    pub(crate) items: Vec<(MmId, VirtAddr, AnonVmaId)>,
    /// The chain the node is a dup of (`STABLE_NODE_DUP_HEAD`), if any.
    pub(crate) chain: Option<ChainId>,
}

/// A stable-node chain's identity (the kernel's chain is a `ksm_stable_node` of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ChainId(pub(crate) u32);

/// `struct ksm_stable_node` as a chain (`STABLE_NODE_CHAIN`): its dups, KSM pages with the
/// same contents, in `hlist` order (the head first), and when a search last walked them all.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    pub(crate) dups: Vec<StableNodeId>,
    pub(crate) prune_time: SimTime,
}

/// Where an rmap_item is (`UNSTABLE_FLAG`, `STABLE_FLAG`, neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemState {
    Volatile,
    Unstable,
    Stable(StableNodeId),
}
