//! The page allocator (`mm/page_alloc.c`, Linux v6.8): the buddy allocator's free lists
//! ([`buddy`], state the kernel holds) and, here, the slow path a user folio's allocation takes.
//!
//! - [`alloc_folio`] charges the folio to the allocating task's memory cgroup first
//!   (`mem_cgroup_charge` → `try_charge_memcg`, `mm/memcontrol.c`): a charge that would push a
//!   cgroup over its `memory.max` reclaims that cgroup (`try_to_free_mem_cgroup_pages`) and
//!   retries, giving up (the memcg OOM) after `MAX_RECLAIM_RETRIES` attempts without progress.
//!   The charge sits here, beside the allocation, because it calls reclaim: in mmsim's import
//!   floors `memcontrol.rs` stands below reclaim.
//! - Then `__alloc_pages`: the fast path takes the folio while free memory stays above the low
//!   watermark; below it, kswapd is woken (`wakeup_kswapd`); above the min watermark the folio is
//!   still taken; below it the task reclaims directly (`__alloc_pages_direct_reclaim` →
//!   `try_to_free_pages`, counted as `allocstall`) and retries, and after `MAX_RECLAIM_RETRIES`
//!   passes without progress takes a last chance below the watermark and otherwise fails (OOM).
//! - [`alloc_charged_folio`]: the same for a THP, which says whether the charge or the pages
//!   failed and reclaims directly only when `defrag` lets it (`GFP_TRANSHUGE_LIGHT`).
//! - The watermarks (`__setup_per_zone_wmarks`).
//!
//! Host cost: reclaim's futures (`try_to_free_pages`, `try_to_free_mem_cgroup_pages`) are large,
//! and an `async fn` is as large as the largest future it awaits, moved whole at every call; so
//! the global reclaim call here is boxed, and the memcg one boxes its full pass inside
//! (`vmscan.rs`), keeping every allocation's futures a few words while the pure LRU's tail
//! path, taken on every miss, allocates nothing. A page-cache replay reclaims about once per
//! seven allocations: classic, P6 at 256 MiB, 6182 -> 5398 instructions per request in the test
//! profile (cachegrind, requests 100 001-200 000), most of it `memcpy`.
//!
//! Approximations: one zone, no per-CPU lists, no compaction (a high-order allocation that finds
//! no free block reclaims as an order-0 one would), and the OOM killer's victim is the
//! allocating task.

pub mod buddy;

use crate::kernel::Cx;
use crate::memcontrol::{MAX_RECLAIM_RETRIES, ROOT_MEMCG};
use crate::sim::cost::Cost;
use crate::types::ids::MemcgId;
use crate::types::mmzone::Watermarks;
use crate::vmscan::{try_to_free_mem_cgroup_pages, try_to_free_pages, wake_kswapd};
use crate::vmstat::VmStat;
use simcore::{Order, Pfn};

impl Watermarks {
    /// `init_per_zone_wmark_min` and `__setup_per_zone_wmarks` for one zone of `pages`.
    pub fn for_pages(pages: u64) -> Watermarks {
        let kb = pages * 4;
        let min_kb = (kb * 16).isqrt().clamp(128, 262_144);
        let min = (min_kb / 4).min(pages / 4);
        let step = (min / 4).max(pages / 1000);
        Watermarks { min, low: min + step, high: min + 2 * step }
    }
}

/// Why a user folio could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocFailure {
    /// The memory cgroup's charge failed (the memcg OOM).
    Charge,
    /// No free block of the order, even after what reclaim the allocation may do.
    Pages,
}

/// `alloc_pages` for a user folio: charges it to the current task's memory cgroup (reclaiming
/// that cgroup when its limit is hit), then takes pages with the slow path: wakes kswapd below
/// the low watermark, reclaims directly below the min watermark, and returns `None` (OOM) when
/// reclaim cannot make room.
pub(crate) async fn alloc_folio(cx: &Cx, order: Order) -> Option<Pfn> {
    alloc_charged_folio(cx, order, true).await.ok()
}

/// Allocates a large folio of `order` for a THP (`vma_alloc_folio` with the THP gfp mask),
/// charging the allocation and its per-page work, and says which step failed.
pub(crate) async fn alloc_thp_folio(
    cx: &Cx,
    order: Order,
    may_reclaim: bool,
) -> Result<Pfn, AllocFailure> {
    cx.charge(Cost::PageAlloc).await;
    cx.charge_n(Cost::PageAllocHighOrderPerPage, order.pages()).await;
    alloc_charged_folio(cx, order, may_reclaim).await
}

/// A user folio of `order`, charged to the current task's memory cgroup; the slow path may
/// reclaim directly only when `may_reclaim`. Without it (`GFP_TRANSHUGE_LIGHT`, a THP whose
/// `defrag` does not stall) the folio is taken only if it leaves the free pages above the min
/// watermark, kswapd woken below the low one; the memory cgroup charge may still reclaim the
/// cgroup (mmsim's charge always may; the kernel's would not without `__GFP_DIRECT_RECLAIM`).
/// Says which step failed.
pub(crate) async fn alloc_charged_folio(
    cx: &Cx,
    order: Order,
    may_reclaim: bool,
) -> Result<Pfn, AllocFailure> {
    if !may_reclaim {
        let (free, wm) = {
            let st = cx.st();
            (st.free_pages(), st.wmark)
        };
        let need = order.pages();
        if free < need + wm.low {
            wake_kswapd(cx);
        }
        if free < need + wm.min {
            return Err(AllocFailure::Pages);
        }
    }
    let memcg = cx.memcg();
    let nr = order.pages();
    if !try_charge(cx, memcg, nr).await {
        return Err(AllocFailure::Charge);
    }
    let got = alloc_pages(cx, order).await;
    let mut st = cx.st();
    match got {
        Some(head) => st.folios.set_memcg_raw(head, memcg.0 as u16),
        None => st.memcg_uncharge_pages(memcg, nr),
    }
    got.ok_or(AllocFailure::Pages)
}

/// `try_charge`: reserves `nr` pages in `memcg`'s counters, reclaiming the cgroup whose limit
/// they would exceed; false when it cannot (the memcg OOM).
async fn try_charge(cx: &Cx, memcg: MemcgId, nr: u64) -> bool {
    if memcg == ROOT_MEMCG {
        return true;
    }
    let mut retries = 0;
    loop {
        let over = {
            let mut st = cx.st();
            match st.memcg_over_limit(memcg, nr) {
                None => {
                    st.memcg_charge_pages(memcg, nr);
                    return true;
                }
                Some(over) => {
                    st.memcgs[over].events_max += 1;
                    over
                }
            }
        };
        let target = cx.st().lru.reclaim.memcg_reclaim_target(nr);
        // Its full pass is boxed inside, as is `try_to_free_pages` below: see the module note.
        let reclaimed = try_to_free_mem_cgroup_pages(cx, over, target).await;
        if reclaimed == 0 {
            retries += 1;
            if retries >= MAX_RECLAIM_RETRIES {
                let mut st = cx.st();
                st.memcgs[over].events_oom += 1;
                st.count_event(memcg, VmStat::OomKill, 1);
                return false;
            }
        }
    }
}

/// The allocator's slow path for `order` pages.
async fn alloc_pages(cx: &Cx, order: Order) -> Option<Pfn> {
    let mut no_progress = 0;
    loop {
        {
            let mut st = cx.st();
            let free = st.free_pages();
            let need = order.pages();
            let wm = st.wmark;
            if free >= need + wm.low {
                return st.alloc_folio(order);
            }
            drop(st);
            wake_kswapd(cx);
            let mut st = cx.st();
            if free >= need + wm.min {
                return st.alloc_folio(order);
            }
            st.vmstat.inc(VmStat::AllocstallNormal);
        }
        if Box::pin(try_to_free_pages(cx)).await == 0 {
            no_progress += 1;
            if no_progress >= MAX_RECLAIM_RETRIES {
                // Last chance below the watermark, as the kernel's ALLOC_HARDER/OOM path does.
                let mut st = cx.st();
                let got = st.alloc_folio(order);
                if got.is_none() {
                    st.vmstat.inc(VmStat::OomKill);
                }
                return got;
            }
        }
    }
}
