//! Page reclaim with the classic two-list LRU (`mm/vmscan.c`, `mm/swap.c`, `mm/page_alloc.c`
//! watermarks; Linux v6.8, `shared/reference/lru-semantics.md` section 1).
//!
//! - Watermarks: `min_free_kbytes` = sqrt(16 x memory in KiB), clamped to [128 KiB, 256 MiB];
//!   low and high add `max(min / 4, 0.1% of memory)` once and twice (`watermark_scale_factor`
//!   10). An allocation that would leave free memory below *low* wakes kswapd; below *min* it
//!   reclaims directly (`try_to_free_pages`) and retries, and fails (OOM) when reclaim makes no
//!   progress.
//! - kswapd, one per node, reclaims from *low* back up to *high* (`balance_pgdat`), lowering the
//!   scan priority from 12 to 0 while it makes too little progress.
//! - `shrink_node` splits the scan between anon and file by swappiness (60) and list sizes
//!   (`get_scan_count` with `SCAN_FRACT`, without the refault-cost feedback of
//!   `lru_note_cost`, an approximation), deactivates from an active list when its inactive list
//!   is low (`inactive_is_low`: inactive x int_sqrt(10 x GiB) < active), and shrinks inactive
//!   lists from their tails in batches of 32 (`SWAP_CLUSTER_MAX`).
//! - `shrink_folio_list` per folio: the folio lock, `folio_check_references` (young PTEs through
//!   rmap, skipping VMAs without recency; PG_referenced), then for a reclaim: an anonymous folio
//!   gets a swap slot, is unmapped (PTEs become swap entries), written to swap and dropped from
//!   the swap cache; a file folio is unmapped, written back if dirty, and dropped from the page
//!   cache. A folio someone else still holds (a GUP reference) fails the final reference check
//!   and stays — an anonymous one in the swap cache.
//!
//! Not yet modelled here (they arrive with the reclaim issue): workingset shadow entries and
//! refault activation, memory cgroups, the multi-gen LRU, per-CPU LRU batches and the LRU lock.
//! Writes are submitted as in the kernel — PG_writeback set, the folio lock dropped, so faults
//! and GUP can find the folio in the swap or page cache while the IO runs — but the reclaim
//! pass then waits for one device request per batch and retries the free itself
//! (approximation: the kernel moves a written folio to the inactive tail,
//! `folio_rotate_reclaimable`, and frees it on a later pass).

use crate::cost::Cost;
use crate::filemap::folio_unlock;
use crate::folio::{LruList, pg};
use crate::kernel::{Cx, KState};
use crate::rmap::{folio_referenced, try_to_unmap};
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use simcore::{Order, Pfn};

/// `SWAP_CLUSTER_MAX`.
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// `DEF_PRIORITY`.
const DEF_PRIORITY: u32 = 12;
/// `vm_swappiness` default.
const SWAPPINESS: u64 = 60;

/// The zone watermarks, in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

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

/// What reclaim decided for a folio (`enum folio_references`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum References {
    Reclaim,
    ReclaimClean,
    Keep,
    Activate,
}

/// Who reclaims: kswapd or an allocating task (counted separately in vmstat).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reclaimer {
    Kswapd,
    Direct,
}

/// `alloc_pages` with the slow path: wakes kswapd below the low watermark, reclaims directly
/// below the min watermark, and returns `None` (OOM) when reclaim cannot make room.
pub(crate) async fn alloc_folio(cx: &Cx, order: Order) -> Option<Pfn> {
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
        let reclaimed = shrink_node(cx, SWAP_CLUSTER_MAX, Reclaimer::Direct).await;
        if reclaimed == 0 {
            no_progress += 1;
            if no_progress >= 16 {
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

/// Wakes kswapd if it sleeps (`wakeup_kswapd`), starting it the first time.
fn wake_kswapd(cx: &Cx) {
    let (wake, start) = {
        let mut st = cx.st();
        (
            !std::mem::replace(&mut st.kswapd_awake, true),
            !std::mem::replace(&mut st.kswapd_started, true),
        )
    };
    if start {
        cx.spawn_kdaemon("kswapd0", kswapd);
    }
    if wake {
        cx.kernel().kswapd_wait.wake_up_all(cx);
    }
}

/// The body of kswapd: sleeps until an allocation wakes it, then reclaims up to the high
/// watermark.
pub async fn kswapd(cx: Cx) {
    loop {
        while !cx.st().kswapd_awake {
            cx.kernel().kswapd_wait.wait(&cx).await;
        }
        let mut priority = DEF_PRIORITY;
        loop {
            let (free, high) = {
                let st = cx.st();
                (st.free_pages(), st.wmark.high)
            };
            if free >= high {
                break;
            }
            let target = (high - free).clamp(SWAP_CLUSTER_MAX, 16 * SWAP_CLUSTER_MAX);
            let reclaimed = shrink_node_at(&cx, target, priority, Reclaimer::Kswapd).await;
            if reclaimed < SWAP_CLUSTER_MAX / 4 {
                if priority == 0 {
                    break;
                }
                priority -= 1;
            }
        }
        cx.st().kswapd_awake = false;
    }
}

/// `shrink_node` for direct reclaim: raises the pressure until `target` pages are freed or the
/// lists are exhausted.
async fn shrink_node(cx: &Cx, target: u64, who: Reclaimer) -> u64 {
    let mut reclaimed = 0;
    for priority in (0..=DEF_PRIORITY).rev() {
        reclaimed += shrink_node_at(cx, target - reclaimed, priority, who).await;
        if reclaimed >= target {
            break;
        }
    }
    reclaimed
}

/// One pass of `shrink_lruvec` at `priority`.
async fn shrink_node_at(cx: &Cx, target: u64, priority: u32, who: Reclaimer) -> u64 {
    let scan = scan_targets(&cx.st(), priority);
    let mut reclaimed = 0;
    for (anon, nr) in [(false, scan.1), (true, scan.0)] {
        let (inactive, active) = if anon {
            (LruList::InactiveAnon, LruList::ActiveAnon)
        } else {
            (LruList::InactiveFile, LruList::ActiveFile)
        };
        let mut left = nr;
        while left > 0 && reclaimed < target {
            let batch = left.min(SWAP_CLUSTER_MAX);
            if inactive_is_low(&cx.st(), anon) {
                shrink_active_list(cx, active, batch).await;
            }
            let (scanned, freed) = shrink_inactive_list(cx, inactive, batch, who).await;
            reclaimed += freed;
            if scanned == 0 {
                break;
            }
            left = left.saturating_sub(batch);
        }
    }
    reclaimed
}

/// Pages to scan of (anon, file) at `priority` (`get_scan_count`, SCAN_FRACT by swappiness).
fn scan_targets(st: &KState, priority: u32) -> (u64, u64) {
    let anon =
        st.folios.lru_pages(LruList::InactiveAnon) + st.folios.lru_pages(LruList::ActiveAnon);
    let file =
        st.folios.lru_pages(LruList::InactiveFile) + st.folios.lru_pages(LruList::ActiveFile);
    let anon_allowed = st.swap.nr_free() > 0;
    let at_least =
        |size: u64| if size == 0 { 0 } else { (size >> priority).max(SWAP_CLUSTER_MAX.min(size)) };
    let (ap, fp) = if anon_allowed { (SWAPPINESS, 200 - SWAPPINESS) } else { (0, 200) };
    (at_least(anon) * ap / 200 * 2, at_least(file) * fp / 200 * 2)
}

/// `inactive_is_low`: inactive x int_sqrt(10 x GiB of the type) < active.
fn inactive_is_low(st: &KState, anon: bool) -> bool {
    let (i, a) = if anon {
        (st.folios.lru_pages(LruList::InactiveAnon), st.folios.lru_pages(LruList::ActiveAnon))
    } else {
        (st.folios.lru_pages(LruList::InactiveFile), st.folios.lru_pages(LruList::ActiveFile))
    };
    let gb = (i + a) >> 18;
    let ratio = if gb == 0 { 1 } else { (10 * gb).isqrt() };
    i * ratio < a
}

/// Takes up to `nr` folios off the tail of `list` (`isolate_lru_folios`), each with a reference.
fn isolate(st: &mut KState, list: LruList, nr: u64) -> Vec<Pfn> {
    let victims: Vec<Pfn> = st.folios.lru_iter(list).take(nr as usize).collect();
    for &f in &victims {
        st.folios.lru_del(f, list);
        st.folios.get_extra(f);
    }
    victims
}

/// Puts an isolated folio back on the list its flags say, dropping the isolation reference.
fn putback(st: &mut KState, head: Pfn) {
    st.folio_add_lru(head);
    st.put_folio_extra(head);
}

/// `shrink_active_list`: moves folios from the active tail to the inactive list (setting
/// PG_workingset), except executable file folios whose PTEs were young.
async fn shrink_active_list(cx: &Cx, list: LruList, nr: u64) {
    let folios = isolate(&mut cx.st(), list, nr);
    cx.charge_n(Cost::LruScan, folios.len() as u64).await;
    for head in folios {
        let (young, flags) = folio_referenced(cx, head).await;
        let mut st = cx.st();
        let file = !st.folios.test(head, pg::SWAPBACKED);
        if young > 0 && file && flags.has(VmFlags::EXEC) {
            putback(&mut st, head);
            continue;
        }
        st.folios.clear_flag(head, pg::ACTIVE);
        st.folios.set(head, pg::WORKINGSET);
        let nr = st.folios.order(head).pages();
        st.vmstat.add(VmStat::Pgdeactivate, nr);
        putback(&mut st, head);
    }
}

/// `folio_check_references`.
async fn check_references(cx: &Cx, head: Pfn) -> References {
    let (young, flags) = folio_referenced(cx, head).await;
    let mut st = cx.st();
    let referenced = st.folios.test(head, pg::REFERENCED);
    st.folios.clear_flag(head, pg::REFERENCED);
    let file = !st.folios.test(head, pg::SWAPBACKED);
    if flags.has(VmFlags::LOCKED) {
        return References::Activate;
    }
    if young > 0 {
        st.folios.set(head, pg::REFERENCED);
        if referenced || young > 1 || (flags.has(VmFlags::EXEC) && file) {
            return References::Activate;
        }
        return References::Keep;
    }
    if referenced && file { References::ReclaimClean } else { References::Reclaim }
}

/// `shrink_inactive_list`: isolates up to `nr` folios and reclaims what it can; returns
/// (scanned, reclaimed).
async fn shrink_inactive_list(cx: &Cx, list: LruList, nr: u64, who: Reclaimer) -> (u64, u64) {
    let folios = isolate(&mut cx.st(), list, nr);
    let scanned = folios.len() as u64;
    {
        let mut st = cx.st();
        let by_who =
            if who == Reclaimer::Kswapd { VmStat::PgscanKswapd } else { VmStat::PgscanDirect };
        let by_type =
            if list == LruList::InactiveAnon { VmStat::PgscanAnon } else { VmStat::PgscanFile };
        st.vmstat.add(by_who, scanned);
        st.vmstat.add(by_type, scanned);
    }
    cx.charge_n(Cost::LruScan, scanned).await;
    let reclaimed = shrink_folio_list(cx, folios, who, false).await;
    (scanned, reclaimed)
}

/// `reclaim_pages` (`MADV_PAGEOUT`): reclaims these folios whatever their references; returns
/// the pages freed.
pub(crate) async fn reclaim_pages(cx: &Cx, folios: Vec<Pfn>) -> u64 {
    let isolated: Vec<Pfn> = {
        let mut st = cx.st();
        let on_lru: Vec<Pfn> = folios.into_iter().filter(|&f| st.folios.test(f, pg::LRU)).collect();
        for &f in &on_lru {
            let list = st.folio_lru_list(f);
            st.folios.lru_del(f, list);
            st.folios.get_extra(f);
        }
        on_lru
    };
    shrink_folio_list(cx, isolated, Reclaimer::Direct, true).await
}

/// `MADV_COLD` (`deactivate_page`): an active folio moves to its inactive list, unreferenced.
pub(crate) fn deactivate(st: &mut KState, head: Pfn) {
    if !st.folios.test(head, pg::LRU) {
        return;
    }
    let list = st.folio_lru_list(head);
    st.folios.lru_del(head, list);
    let was_active = st.folios.test(head, pg::ACTIVE);
    st.folios.clear_flag(head, pg::ACTIVE | pg::REFERENCED);
    st.folio_add_lru(head);
    if was_active {
        let nr = st.folios.order(head).pages();
        st.vmstat.add(VmStat::Pgdeactivate, nr);
    }
}

/// `shrink_folio_list`: decides, unmaps, writes and frees; puts back what stays. With
/// `ignore_references` (`MADV_PAGEOUT`) every folio is reclaimed if it can be.
async fn shrink_folio_list(
    cx: &Cx,
    folios: Vec<Pfn>,
    who: Reclaimer,
    ignore_references: bool,
) -> u64 {
    let mut to_free = Vec::new();
    for head in folios {
        if !crate::filemap::folio_trylock(&mut cx.st(), head)
            || cx.st().folios.test(head, pg::WRITEBACK)
        {
            putback(&mut cx.st(), head);
            continue;
        }
        let refs =
            if ignore_references { References::Reclaim } else { check_references(cx, head).await };
        let decision = match refs {
            References::Activate => Err(true),
            References::Keep => Err(false),
            r => Ok(r),
        };
        let outcome = match decision {
            Err(activate) => Err(activate),
            Ok(refs) => prepare_reclaim(cx, head, refs).await,
        };
        match outcome {
            Ok(()) => to_free.push(head),
            Err(activate) => {
                {
                    let mut st = cx.st();
                    if activate {
                        st.folios.set(head, pg::ACTIVE);
                        let nr = st.folios.order(head).pages();
                        st.vmstat.add(VmStat::Pgactivate, nr);
                    }
                    putback(&mut st, head);
                }
                folio_unlock(cx, head);
            }
        }
    }
    let to_free = write_out(cx, to_free).await;
    let mut reclaimed = 0;
    for head in to_free {
        let freed = {
            let mut st = cx.st();
            let nr = st.folios.order(head).pages();
            let anon = st.folios.is_anon(head);
            // `__remove_mapping`: only the cache's references and ours (the refcount freeze).
            let only_us =
                st.folios.refcount(head) == nr as u32 + 1 && st.folios.folio_mapcount(head) == 0;
            if only_us && !st.folios.test(head, pg::DIRTY) {
                st.folios.clear_flag(head, pg::LOCKED);
                if anon {
                    st.swap_cache_delete(head);
                } else if let crate::folio::Mapping::File(inode) = st.folios.mapping(head) {
                    st.page_cache_delete(inode, head);
                }
                let by_who = if who == Reclaimer::Kswapd {
                    VmStat::PgstealKswapd
                } else {
                    VmStat::PgstealDirect
                };
                let by_type = if anon { VmStat::PgstealAnon } else { VmStat::PgstealFile };
                st.vmstat.add(by_who, nr);
                st.vmstat.add(by_type, nr);
                st.put_folio_extra(head);
                Some(nr)
            } else {
                putback(&mut st, head);
                None
            }
        };
        match freed {
            Some(nr) => {
                cx.kernel().folio_waitqueue(head).wake_up_all(cx);
                reclaimed += nr;
            }
            None => folio_unlock(cx, head),
        }
    }
    cx.charge_n(Cost::ReclaimPage, reclaimed).await;
    reclaimed
}

/// Adds to swap and unmaps a folio chosen for reclaim; `Err(activate)` if it must stay.
async fn prepare_reclaim(cx: &Cx, head: Pfn, refs: References) -> Result<(), bool> {
    let anon = cx.st().folios.is_anon(head);
    if anon && !cx.st().folios.test(head, pg::SWAPCACHE) {
        let slot = cx.st().add_to_swap(head);
        if slot.is_none() {
            return Err(true);
        }
    }
    if cx.st().folios.folio_mapcount(head) > 0 && !try_to_unmap(cx, head).await {
        return Err(true);
    }
    if !anon && refs == References::ReclaimClean && cx.st().folios.test(head, pg::DIRTY) {
        return Err(false);
    }
    Ok(())
}

/// Writes the dirty folios among `folios` (swap writes for anonymous ones, writeback for file
/// ones) with one device request each kind, unlocked while under writeback. Returns the folios
/// locked again afterwards; the others are back on the LRU.
async fn write_out(cx: &Cx, folios: Vec<Pfn>) -> Vec<Pfn> {
    let (dirty, mut clean): (Vec<Pfn>, Vec<Pfn>) = {
        let st = cx.st();
        folios.into_iter().partition(|&h| st.folios.test(h, pg::DIRTY))
    };
    let (anon, file): (Vec<Pfn>, Vec<Pfn>) = {
        let st = cx.st();
        dirty.into_iter().partition(|&h| st.folios.is_anon(h))
    };
    for batch in [anon, file] {
        if batch.is_empty() {
            continue;
        }
        {
            // `pageout`: the data goes to the device as it is now; the folio is clean and
            // under writeback, and unlocked.
            let mut st = cx.st();
            for &head in &batch {
                if st.folios.is_anon(head) {
                    st.swap_write(head);
                } else if let crate::folio::Mapping::File(inode) = st.folios.mapping(head) {
                    st.writeback_folio(inode, head);
                }
                st.folios.set(head, pg::WRITEBACK);
            }
        }
        for &head in &batch {
            folio_unlock(cx, head);
        }
        let io = cx.cost(Cost::BlockIoLatency) + cx.cost(Cost::BlockIoPerPage) * batch.len() as u64;
        cx.sleep(io).await;
        for head in batch {
            // `folio_end_writeback`, then the lock again for the free.
            let relocked = {
                let mut st = cx.st();
                st.folios.clear_flag(head, pg::WRITEBACK);
                let relocked = crate::filemap::folio_trylock(&mut st, head);
                if !relocked {
                    putback(&mut st, head);
                }
                relocked
            };
            cx.kernel().folio_waitqueue(head).wake_up_all(cx);
            if relocked {
                clean.push(head);
            }
        }
    }
    clean
}
