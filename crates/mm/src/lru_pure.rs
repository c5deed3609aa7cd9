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
//!
//! The tail fast path ([`reclaim_tail`]): a page-cache replay reclaims one page per miss, each a
//! whole pass (`do_try_to_free_pages` → `shrink_node` → `shrink_lruvec` → `shrink_inactive_list`
//! → `shrink_folio_list`) of which most is the pass's machinery, not its decisions. When the
//! outcome of that pass is known before it starts, the charge's one page is reclaimed directly
//! with the pass's state changes, charges and wake-ups in the pass's order, so the event history
//! (the run's digest) is the same as with the pass. It is known when: the charge needs one page;
//! the cgroup has no children (the pass visits only its lruvec); its only evictable pages are
//! on the inactive file list, at least `2 << DEF_PRIORITY` of them (the first priority scans that
//! list alone, in a first batch of one folio, under any scan balance: `get_scan_count` gives it
//! at least `2 x 140 / 200` pages); this CPU's lazyfree batch and the deferred split queue are
//! empty (the pass's drain and shrinker do nothing); the list's tail is an order-0 page-cache
//! folio that is clean, unlocked, not under writeback, unmapped (`folio_referenced` finds no
//! PTE) and held only by the cache (the freeze succeeds); and no other task can run before the
//! pass's first charge ends (the engine's `runs_alone_through`), so the folio is as it was when
//! the pass locks it. Anything else takes the pass.

use crate::delayacct::DelayKind;
use crate::era::RefcountFreeze;
use crate::folio::{LruList, Mapping, pg};
use crate::kernel::{Cx, KState};
use crate::memcontrol::lruvec_list;
use crate::rmap::folio_referenced;
use crate::sim::cost::Cost;
use crate::types::ids::MemcgId;
use crate::types::mmzone::Reclaim;
use crate::vmscan::{
    DEF_PRIORITY, Reclaimer, References, ScanControl, shrink_lists, snapshot_refaults,
};
use simcore::{Order, Pfn};

impl KState {
    /// An access: the folio moves to the head of its list.
    pub(crate) fn lru_pure_mark_accessed(&mut self, head: Pfn) {
        if self.folios.test(head, pg::LRU) {
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

/// `try_to_free_mem_cgroup_pages` of the `nr` pages a charge to `memcg` needs, by the tail fast
/// path (the module note): the pages freed, or `None` (nothing done) when the pass must run.
pub(crate) async fn reclaim_tail(cx: &Cx, memcg: MemcgId, nr: u64) -> Option<u64> {
    let head = {
        let st = cx.st();
        if nr != 1 || st.lru.reclaim != Reclaim::Pure {
            return None;
        }
        let tail = tail_reclaimable(&st, cx.cpu().0 as usize, memcg)?;
        // `charge_n(LruScan, 1)`'s length (the cost moves no bytes over the memory bus).
        cx.runs_alone_through(cx.cost(Cost::LruScan)).then_some(tail)?
    };
    let _delay = cx.delay_scope(DelayKind::Freepages);
    let sc = ScanControl::new(Reclaimer::Direct, memcg, 1);
    {
        // `isolate_lru_folios` of one folio.
        let mut st = cx.st();
        st.folio_isolate_lru(head);
        sc.count(&mut st, memcg, true, true, 1);
    }
    cx.charge_n(Cost::LruScan, 1).await;
    // `shrink_folio_list`: locked, found reclaimable, removed from the cache and freed.
    let skip_freeze = cx.kernel().switches.refcount_freeze == RefcountFreeze::Skip;
    let freed = {
        let mut st = cx.st();
        let locked = crate::folio::folio_trylock(&mut st.folios, head);
        debug_assert!(locked, "nothing ran since the tail was checked");
        st.remove_mapping(head, skip_freeze).expect("a folio only the cache holds is freed")
    };
    cx.kernel().folio_waitqueue(head).wake_up_all(cx);
    cx.charge_n(Cost::ReclaimPage, freed).await;
    sc.count(&mut cx.st(), memcg, false, true, freed);
    // The rest of `shrink_node` at the first priority, after its target was met.
    crate::huge_memory::split::deferred_split_scan(cx, DEF_PRIORITY).await;
    snapshot_refaults(&mut cx.st(), memcg);
    Some(freed)
}

/// The tail of `memcg`'s inactive file list when the pass's outcome is known (the module note's
/// conditions on the cgroup, its lists and the folio; not the one on other tasks).
fn tail_reclaimable(st: &KState, cpu: usize, memcg: MemcgId) -> Option<Pfn> {
    let childless = st.memcgs.iter().all(|(_, m)| m.parent != Some(memcg));
    let drained = st.lru_lazyfree.get(cpu).is_none_or(Vec::is_empty);
    if !childless || !drained || !st.thp.split_queue.is_empty() {
        return None;
    }
    let pages = |lru| st.lruvec_lru_pages(memcg, lru);
    let others = pages(LruList::InactiveAnon) + pages(LruList::ActiveAnon);
    if others + pages(LruList::ActiveFile) != 0 || pages(LruList::InactiveFile) >> DEF_PRIORITY < 2
    {
        return None;
    }
    let head = st.folios.list_tail(lruvec_list(memcg, LruList::InactiveFile))?;
    let f = &st.folios;
    let busy = pg::LOCKED | pg::WRITEBACK | pg::DIRTY | pg::SWAPBACKED | pg::SWAPCACHE;
    let clean_cache_page = f.order(head) == Order::BASE
        && !f.test(head, busy)
        && matches!(f.mapping(head), Mapping::File(_))
        && f.folio_mapcount(head) == 0
        && f.refcount(head) == 1;
    clean_cache_page.then_some(head)
}
