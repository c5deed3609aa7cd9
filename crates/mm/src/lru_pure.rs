//! The pure LRU ([`crate::types::mmzone::Reclaim::Pure`], switch `lru = pure`): not a kernel policy.
//!
//! The classic LRU (`vmscan.rs`) reduced to one exact least-recently-used order, which is what
//! cache simulators call LRU; page-cache replays (`trace::pagecache`, policy `pure`) check the
//! model against libCacheSim's LRU with it, miss for miss. It keeps the classic lists, scan
//! counts and folio reclaim, and departs from them where the kernel gives a second chance:
//!
//! - an access moves the folio to the head of its list (no two-touch activation);
//! - reclaim takes the tail: `folio_referenced` is still walked (its locks and charges), but its
//!   answer is ignored, and a refault is counted without being activated;
//! - a memory cgroup's charge reclaims exactly the pages it needs, each list is scanned in one
//!   batch of what is left to reclaim, and the active anon list is not aged after a pass.

use crate::kernel::{Cx, KState};
use crate::rmap::folio_referenced;
use crate::types::ids::MemcgId;
use crate::vmscan::{References, ScanControl, shrink_lists};
use simcore::Pfn;

impl KState {
    /// An access: the folio moves to the head of its list.
    pub(crate) fn lru_pure_mark_accessed(&mut self, head: Pfn) {
        if self.folios.test(head, crate::folio::pg::LRU) {
            let list = self.folio_list_now(head);
            self.folios.list_del(head, list);
            self.folios.list_add(head, list, false);
        }
    }

    /// A refault: counted, never activated.
    pub(crate) fn lru_pure_refault(&mut self, head: Pfn) {
        self.workingset_count_refault(head);
    }
}

/// A charge reclaims exactly the `nr` pages it needs.
pub(crate) fn memcg_reclaim_target(nr: u64) -> u64 {
    nr
}

/// No second chance: whatever its references, the folio is reclaimed.
pub(crate) async fn check_references(cx: &Cx, head: Pfn) -> References {
    folio_referenced(cx, head).await;
    References::Reclaim
}

/// The classic scan, each list in one batch of what is left to reclaim, without the active
/// anon aging that follows it.
pub(crate) async fn shrink_lruvec(cx: &Cx, memcg: MemcgId, sc: &mut ScanControl) {
    shrink_lists(cx, memcg, sc, |nr, sc| nr.min(sc.nr_to_reclaim.saturating_sub(sc.nr_reclaimed)))
        .await;
}
