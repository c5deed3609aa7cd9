//! Page reclaim (`mm/vmscan.c`, `mm/page_alloc.c` watermarks; Linux v6.8,
//! `docs/reference/lru-semantics.md` section 1), with the classic two-list LRU here, the
//! multi-gen LRU in `mglru.rs` and the pure LRU in `lru_pure.rs`, chosen by the reclaim policy
//! (`lru.rs`, [`crate::types::mmzone::Reclaim`]).
//!
//! - Watermarks: `min_free_kbytes` = sqrt(16 x memory in KiB), clamped to [128 KiB, 256 MiB];
//!   low and high add `max(min / 4, 0.1% of memory)` once and twice (`watermark_scale_factor`
//!   10). An allocation that would leave free memory below *low* wakes kswapd; below *min* it
//!   reclaims directly (`try_to_free_pages`) and retries, and fails (OOM) when reclaim makes no
//!   progress. Before that, the folio is charged to the allocating task's memory cgroup
//!   (`memcontrol.rs`), which reclaims from that cgroup (`try_to_free_mem_cgroup_pages`) when
//!   the charge would exceed a `memory.max`.
//! - kswapd, one per node and started with the machine (`kswapd_run`; a wake-up only wakes it),
//!   reclaims from *low* back up to *high* (`balance_pgdat`), lowering the
//!   scan priority from 12 to 0 while it makes too little progress, and sleeps when it made
//!   none at 0 until the next wake-up (an approximation: the kernel's kswapd tries again at
//!   once while the node is not balanced, and with the multi-gen LRU from v6.3 never counts a
//!   failure); with the multi-gen LRU it first calls `lru_gen_age_node` (the aging of every
//!   lruvec that needs it, v6.1-v6.2, and the `min_ttl` check), and from v6.3 the first pass
//!   may start below 12 (`set_initial_priority`, `mglru.rs`).
//! - `shrink_node` visits the lruvec of every memory cgroup under the reclaim target
//!   (`shrink_node_memcgs`). Per lruvec, `get_scan_count` splits the scan between anon and file:
//!   file only without swap or with swappiness 0; file only in *cache trim mode* (the inactive
//!   file list is large enough and the file LRU need not be deactivated); both equally at
//!   priority 0; otherwise by swappiness (60) against 200 - swappiness (`SCAN_FRACT`, without the
//!   refault and rotation cost feedback of `lru_note_cost`, an approximation). Each list gets
//!   its size >> priority. Active lists are scanned only when their inactive list is low or,
//!   for file, when the target saw refault activations since the last reclaim
//!   (`may_deactivate`).
//! - `shrink_active_list`: folios from the active tail go to the inactive list with
//!   PG_workingset, except executable file folios whose PTEs were young.
//! - `shrink_inactive_list` isolates from the inactive tail in batches of 32
//!   (`SWAP_CLUSTER_MAX`) and `shrink_folio_list` decides per folio: the folio lock,
//!   `folio_check_references` (young PTEs through rmap, skipping VMAs without recency;
//!   PG_referenced), then for a reclaim: an anonymous folio gets a swap slot, is unmapped (PTEs
//!   become swap entries), written to swap and dropped from the swap cache leaving a shadow; a
//!   dirty shmem folio is unmapped, then moved to the swap cache by `shmem_writepage`
//!   (`shmem.rs`: its page-cache slot keeps the swap entry) and goes the same way; a
//!   file folio is unmapped, written back if dirty, and dropped from the page cache leaving a
//!   shadow (`__remove_mapping` after the reference freeze). A folio someone else still holds (a
//!   GUP reference) fails the freeze and stays — an anonymous one in the swap cache. Rejected
//!   folios go back to their lists (activated ones to the active list).
//! - A memory cgroup's charge asks its limit reclaim for `max(nr_pages, SWAP_CLUSTER_MAX)`
//!   (`try_to_free_mem_cgroup_pages`, v6.8), so the classic and multi-gen LRUs free a batch per
//!   limit hit and the next charges fit without reclaim; only the pure LRU (not a kernel policy)
//!   reclaims exactly what the charge needs. Reclaim's lists of isolated folios (the kernel's
//!   on-stack `LIST_HEAD`s) are kept between passes ([`ReclaimLists`]) and the cgroup walks
//!   iterate without collecting, so steady-state reclaim allocates nothing and costs O(1) per
//!   reclaimed page beyond the scan.
//!
//! - A PMD-sized anonymous THP (`era::thp_swap_out`): one that others hold (`can_split_folio`
//!   fails) is activated (v4.13+; before, the failing split did the same). Before v4.13 it is
//!   split (`split_huge_page_to_list`) and its pages join the list being reclaimed; v4.13
//!   ("mm, THP, swap: delay splitting THP during swap out", 38d8b4e6bdc8) gives it a whole swap
//!   cluster first (`swap.rs`) and splits it after; from v4.14 ("mm, THP, swap: delay splitting
//!   THP after swapped out", bd4c82c22c36, id not verified) it stays whole: `try_to_unmap`
//!   splits its PMDs (`TTU_SPLIT_HUGE_PMD`, `thp_split_pmd`) into swap PTEs, one IO writes it
//!   (`thp_swpout`) and it is freed whole. Without a free cluster it is split and its pages go
//!   alone (`thp_swpout_fallback` from v4.14, fe490cc0fe9e, id not verified). A whole THP left
//!   in the swap cache (its freeze failed) is split by the next fault on it (`fault.rs`, an
//!   approximation). From v4.14 to v6.9 a large folio no PMD maps is split before it asks for
//!   swap ("split pages without a PMD map right away", bd4c82c22c36; every multi-size THP of
//!   v6.8 and v6.9 among them), its pages going alone. From v6.10 ("mm: swap: allow storage of
//!   all mTHP orders", 845982eb264b; "mm: vmscan: avoid split during shrink_folio_list()",
//!   5ed890ce5147) a folio of any order is swapped whole (the swap device counts as a
//!   non-rotational block device, which the kernel's large swap entries need), split first only
//!   when on the deferred split queue; `thp_swpout` and `thp_swpout_fallback` count PMD-sized
//!   folios, the per-size `swpout` and `swpout_fallback` every order.
//! - `MADV_FREE` on v4.5-v4.11 (`era::lazyfree_on_anon_lru`; `shrink_page_list` and
//!   `try_to_unmap_one` of v4.11): an anonymous folio not yet in the swap cache gets a slot
//!   without being marked dirty and is unmapped with `TTU_LZFREE` (`rmap.rs`); if no PTE was
//!   dirty it leaves the swap cache unwritten (`SWAP_LZFREE`) and `pglazyfreed` counts it. The
//!   count is taken when the PTEs go, the kernel's once the folio is freed (one that someone
//!   still holds then stays, counted: an approximation).
//!
//! Not modelled: per-CPU LRU batches and the LRU lock; memcg protection (`memory.low`);
//! writeback throttling. Writes are submitted as in the kernel — PG_writeback set, the folio
//! lock dropped, so faults and GUP can find the folio in the swap or page cache while the IO
//! runs — but the reclaim pass then waits for one device request per batch and retries the free
//! itself (the kernel moves a written folio to the inactive tail, `folio_rotate_reclaimable`,
//! and frees it on a later pass). The `refcount_freeze = skip` switch breaks the freeze on
//! purpose (the explorer must find the result).

use crate::era::{RefcountFreeze, ThpSwapOut};
use crate::filemap::folio_unlock;
use crate::folio::{LruList, Mapping, pg};
use crate::kernel::{Cx, KState};
use crate::memcontrol::{ROOT_MEMCG, lruvec_list};
use crate::rmap::{folio_referenced, try_to_unmap};
use crate::sim::cost::Cost;
use crate::types::huge_mm::MthpStat;
use crate::types::ids::MemcgId;
use crate::types::mmzone::{ReclaimLists, Rejected};
use crate::types::swap::ShadowSlot;
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use simcore::{Order, Pfn};
use std::collections::VecDeque;

/// `SWAP_CLUSTER_MAX`.
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// `DEF_PRIORITY`.
pub(crate) const DEF_PRIORITY: u32 = 12;

/// What reclaim decided for a folio (`enum folio_references`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum References {
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

/// `struct scan_control`: one reclaim invocation.
#[derive(Debug)]
pub(crate) struct ScanControl {
    pub who: Reclaimer,
    /// The cgroup whose limit is reclaimed for; the root for global reclaim.
    pub target: MemcgId,
    pub nr_to_reclaim: u64,
    pub priority: u32,
    pub nr_reclaimed: u64,
    pub nr_scanned: u64,
    /// Classic: the active lists that may be deactivated (anon, file).
    may_deactivate: [bool; 2],
    /// Classic: reclaim only file while the inactive file list is large.
    cache_trim_mode: bool,
}

impl ScanControl {
    pub(crate) fn new(who: Reclaimer, target: MemcgId, nr_to_reclaim: u64) -> ScanControl {
        ScanControl {
            who,
            target,
            nr_to_reclaim,
            priority: DEF_PRIORITY,
            nr_reclaimed: 0,
            nr_scanned: 0,
            may_deactivate: [false; 2],
            cache_trim_mode: false,
        }
    }

    /// `cgroup_reclaim`: reclaim for a memory cgroup's limit.
    pub(crate) fn cgroup_reclaim(&self) -> bool {
        self.target != ROOT_MEMCG
    }

    /// Counts `n` scanned (`scan`) or stolen pages of `memcg`'s lruvec.
    pub(crate) fn count(&self, st: &mut KState, memcg: MemcgId, scan: bool, file: bool, n: u64) {
        let (kswapd, direct, anon_key, file_key) = if scan {
            (VmStat::PgscanKswapd, VmStat::PgscanDirect, VmStat::PgscanAnon, VmStat::PgscanFile)
        } else {
            (VmStat::PgstealKswapd, VmStat::PgstealDirect, VmStat::PgstealAnon, VmStat::PgstealFile)
        };
        let by_who = if self.who == Reclaimer::Kswapd { kswapd } else { direct };
        if self.cgroup_reclaim() {
            st.count_memcg_only(memcg, by_who, n);
        } else {
            st.count_event(memcg, by_who, n);
        }
        st.vmstat.add(if file { file_key } else { anon_key }, n);
    }
}

/// Wakes kswapd if it sleeps (`wakeup_kswapd`). The machine starts the node's one kswapd at
/// boot (`kswapd_run`), so a wake-up never starts another.
pub(crate) fn wake_kswapd(cx: &Cx) {
    let wake = !std::mem::replace(&mut cx.st().kswapd_awake, true);
    if wake {
        cx.kernel().kswapd_wait.wake_up_all(cx);
    }
}

/// The body of kswapd: sleeps until an allocation wakes it, then reclaims up to the high
/// watermark (`balance_pgdat`).
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
            let mut sc = ScanControl::new(Reclaimer::Kswapd, ROOT_MEMCG, target);
            sc.priority = priority;
            crate::lru::age_node(&cx, &sc).await;
            shrink_node(&cx, &mut sc).await;
            // The multi-gen LRU may have set the pass's initial priority (`balance_pgdat`'s
            // `sc.priority` is the one `set_initial_priority` changed).
            priority = sc.priority;
            if sc.nr_reclaimed < SWAP_CLUSTER_MAX / 4 {
                if priority == 0 {
                    break;
                }
                priority -= 1;
            }
        }
        cx.st().kswapd_awake = false;
    }
}

/// `do_try_to_free_pages`: raises the pressure until `sc.nr_to_reclaim` pages are freed or the
/// lists are exhausted.
async fn do_try_to_free_pages(cx: &Cx, sc: &mut ScanControl) {
    let _delay = cx.delay_scope(crate::delayacct::DelayKind::Freepages);
    for priority in (0..=DEF_PRIORITY).rev() {
        sc.priority = priority;
        shrink_node(cx, sc).await;
        if sc.nr_reclaimed >= sc.nr_to_reclaim {
            break;
        }
    }
}

/// `try_to_free_pages`: direct reclaim for an allocation that found free memory below the min
/// watermark; returns the pages freed.
pub(crate) async fn try_to_free_pages(cx: &Cx) -> u64 {
    let mut sc = ScanControl::new(Reclaimer::Direct, ROOT_MEMCG, SWAP_CLUSTER_MAX);
    do_try_to_free_pages(cx, &mut sc).await;
    sc.nr_reclaimed
}

/// `try_to_free_mem_cgroup_pages`: reclaims `nr` pages from `memcg` and its descendants;
/// returns the pages freed.
pub(crate) async fn try_to_free_mem_cgroup_pages(cx: &Cx, memcg: MemcgId, nr: u64) -> u64 {
    if let Some(freed) = crate::lru_pure::reclaim_tail(cx, memcg, nr).await {
        return freed;
    }
    let mut sc = ScanControl::new(Reclaimer::Direct, memcg, nr);
    // Boxed (a host-cost measure, `page_alloc.rs`'s note): the pass's future is large, and an
    // allocation awaiting it in place would carry it whole; the pure LRU's tail path above
    // stays in place, as it runs on every miss.
    Box::pin(do_try_to_free_pages(cx, &mut sc)).await;
    sc.nr_reclaimed
}

/// `shrink_node`: every lruvec under the target at `sc.priority`, then the refault snapshot.
async fn shrink_node(cx: &Cx, sc: &mut ScanControl) {
    let (nr_memcgs, mglru) = {
        let st = cx.st();
        (st.memcgs.len(), st.lru.reclaim.lru_gen_enabled())
    };
    if mglru {
        crate::lru::prepare_shrink_node(&cx.st(), sc);
    } else {
        prepare_scan_control(&cx.st(), sc);
    }
    // The cgroups that exist now, in creation order (ids are never reused).
    for i in 0..nr_memcgs {
        let memcg: MemcgId = simcore::id::Id::from_index(i);
        if !cx.st().memcg_in_subtree(memcg, sc.target) {
            continue;
        }
        crate::lru::shrink_lruvec(cx, memcg, sc).await;
        if sc.nr_reclaimed >= sc.nr_to_reclaim {
            break;
        }
    }
    // `shrink_slab`: of the shrinkers the model has, the THP deferred split queue's.
    crate::huge_memory::split::deferred_split_scan(cx, sc.priority).await;
    if !mglru {
        snapshot_refaults(&mut cx.st(), sc.target);
    }
}

/// `snapshot_refaults`: the refault activations under `target` as the next pass's baseline.
pub(crate) fn snapshot_refaults(st: &mut KState, target: MemcgId) {
    let now = target_refaults(st, target);
    st.memcgs[target].lruvec.refaults = now;
}

/// `WORKINGSET_ACTIVATE_{ANON,FILE}` of one memory cgroup.
fn refaults(st: &KState, memcg: MemcgId) -> [u64; 2] {
    let stat = &st.memcgs[memcg].stat;
    [stat.get(VmStat::WorkingsetActivateAnon), stat.get(VmStat::WorkingsetActivateFile)]
}

/// `WORKINGSET_ACTIVATE_{ANON,FILE}` under `target`.
fn target_refaults(st: &KState, target: MemcgId) -> [u64; 2] {
    st.memcg_subtree(target)
        .map(|m| refaults(st, m))
        .fold([0; 2], |a, r| [a[0] + r[0], a[1] + r[1]])
}

/// `prepare_scan_control`: which active lists may be deactivated, and cache trim mode. One walk
/// of the target's subtree gathers its refault activations and the pages of its four lists
/// (the target lruvec's hierarchical counts).
fn prepare_scan_control(st: &KState, sc: &mut ScanControl) {
    // Refault activations (anon, file) and the pages of the four evictable lists.
    let (mut now, mut pages) = ([0; 2], [0; 4]);
    for m in st.memcg_subtree(sc.target) {
        let r = refaults(st, m);
        (now[0], now[1]) = (now[0] + r[0], now[1] + r[1]);
        for (lru, n) in LruList::ALL.into_iter().zip(&mut pages) {
            *n += st.lruvec_lru_pages(m, lru);
        }
    }
    let seen = st.memcgs[sc.target].lruvec.refaults;
    for (i, file) in [(0, false), (1, true)] {
        let lists = |a| pages[LruList::of(file, a) as usize];
        sc.may_deactivate[i] = now[i] != seen[i] || inactive_is_low(lists(false), lists(true));
    }
    let inactive_file = pages[LruList::InactiveFile as usize];
    sc.cache_trim_mode = inactive_file >> sc.priority != 0 && !sc.may_deactivate[1];
}

/// `inactive_is_low`: inactive x int_sqrt(10 x GiB of the type) < active.
fn inactive_is_low(inactive: u64, active: u64) -> bool {
    let gb = (inactive + active) >> 18;
    let ratio = if gb == 0 { 1 } else { (10 * gb).isqrt() };
    inactive * ratio < active
}

/// `vm_swappiness` as the lruvec sees it: 0 when no swap space is left (`get_swappiness`).
pub(crate) fn swappiness(st: &KState) -> u64 {
    if st.swap.nr_free() == 0 { 0 } else { st.lru.swappiness }
}

/// `get_scan_count`: pages to scan per list (inactive anon, active anon, inactive file, active
/// file).
fn get_scan_count(st: &KState, memcg: MemcgId, sc: &ScanControl) -> [u64; 4] {
    let swappiness = swappiness(st);
    // `scan_balance`: the share of anon and file, as (anon, file, denominator).
    let (ap, fp, denominator) = if swappiness == 0 {
        (0, 1, 1) // SCAN_FILE: no swap space, or swappiness 0
    } else if sc.priority == 0 {
        (1, 1, 1) // SCAN_EQUAL: every list in full
    } else if sc.cache_trim_mode {
        (0, 1, 1) // SCAN_FILE
    } else {
        (swappiness, 200 - swappiness, 200) // SCAN_FRACT
    };
    let mut nr = [0; 4];
    for (i, lru) in
        [LruList::InactiveAnon, LruList::ActiveAnon, LruList::InactiveFile, LruList::ActiveFile]
            .into_iter()
            .enumerate()
    {
        let size = st.lruvec_lru_pages(memcg, lru) >> sc.priority;
        let fraction = if i < 2 { ap } else { fp };
        nr[i] = size * fraction / denominator;
    }
    nr
}

/// `shrink_lruvec` for the classic LRU: the lists in batches of `SWAP_CLUSTER_MAX`, then the
/// active anon list aged.
pub(crate) async fn shrink_lruvec(cx: &Cx, memcg: MemcgId, sc: &mut ScanControl) {
    shrink_lists(cx, memcg, sc, |nr, _| nr.min(SWAP_CLUSTER_MAX)).await;
    // Even when anon is not scanned, keep its active list aged (`shrink_lruvec`'s tail).
    let (i, a) = {
        let st = cx.st();
        (
            st.lruvec_lru_pages(memcg, LruList::InactiveAnon),
            st.lruvec_lru_pages(memcg, LruList::ActiveAnon),
        )
    };
    if swappiness(&cx.st()) > 0 && inactive_is_low(i, a) {
        shrink_active_list(cx, memcg, LruList::ActiveAnon, SWAP_CLUSTER_MAX).await;
    }
}

/// The scan loop of `shrink_lruvec`: each list's share (`get_scan_count`) in batches of
/// `batch(left, sc)` pages, until the shares are scanned or the target is met.
pub(crate) async fn shrink_lists(
    cx: &Cx,
    memcg: MemcgId,
    sc: &mut ScanControl,
    batch: impl Fn(u64, &ScanControl) -> u64,
) {
    let mut nr = get_scan_count(&cx.st(), memcg, sc);
    let lists =
        [LruList::InactiveAnon, LruList::ActiveAnon, LruList::InactiveFile, LruList::ActiveFile];
    while nr[0] > 0 || nr[2] > 0 || nr[3] > 0 {
        for (i, &lru) in lists.iter().enumerate() {
            if nr[i] == 0 {
                continue;
            }
            let batch = batch(nr[i], sc);
            nr[i] -= batch;
            if batch == 0 {
                continue;
            }
            let active = matches!(lru, LruList::ActiveAnon | LruList::ActiveFile);
            if active {
                let file = lru == LruList::ActiveFile;
                if sc.may_deactivate[usize::from(file)] {
                    shrink_active_list(cx, memcg, lru, batch).await;
                }
            } else {
                shrink_inactive_list(cx, memcg, lru, batch, sc).await;
            }
        }
        if sc.nr_reclaimed >= sc.nr_to_reclaim {
            break;
        }
    }
}

/// Takes up to `nr` folios off the tail of `memcg`'s `lru` (`isolate_lru_folios`), each with
/// an isolation reference.
fn isolate(st: &mut KState, memcg: MemcgId, lru: LruList, nr: u64) -> Vec<Pfn> {
    let list = lruvec_list(memcg, lru);
    let mut victims = st.reclaim_lists.take_folios();
    for _ in 0..nr {
        let Some(f) = st.folios.list_tail(list) else { break };
        st.folio_isolate_lru(f);
        victims.push(f);
    }
    victims
}

/// `shrink_active_list`: moves folios from the active tail to the inactive list (setting
/// PG_workingset), except executable file folios whose PTEs were young.
async fn shrink_active_list(cx: &Cx, memcg: MemcgId, lru: LruList, nr: u64) {
    let folios = isolate(&mut cx.st(), memcg, lru, nr);
    cx.charge_n(Cost::LruScan, folios.len() as u64).await;
    {
        let mut st = cx.st();
        let n = folios.len() as u64;
        st.count_event(memcg, VmStat::Pgrefill, n);
    }
    for &head in &folios {
        let (young, flags) = folio_referenced(cx, head).await;
        let mut st = cx.st();
        let file = st.folio_is_file_lru(head);
        if young > 0 && file && flags.has(VmFlags::EXEC) {
            st.folio_putback_lru(head, false);
            continue;
        }
        st.folios.clear_flag(head, pg::ACTIVE);
        st.folios.set(head, pg::WORKINGSET);
        let nr = st.folios.order(head).pages();
        let m = st.folio_memcg(head);
        st.count_event(m, VmStat::Pgdeactivate, nr);
        st.folio_putback_lru(head, false);
    }
    cx.st().reclaim_lists.give_folios(folios);
}

/// `shrink_inactive_list`: isolates up to `nr` folios and reclaims what it can.
async fn shrink_inactive_list(
    cx: &Cx,
    memcg: MemcgId,
    lru: LruList,
    nr: u64,
    sc: &mut ScanControl,
) {
    let folios = isolate(&mut cx.st(), memcg, lru, nr);
    let scanned = folios.len() as u64;
    let file = lru == LruList::InactiveFile;
    sc.count(&mut cx.st(), memcg, true, file, scanned);
    sc.nr_scanned += scanned;
    cx.charge_n(Cost::LruScan, scanned).await;
    let (reclaimed, rejected) = shrink_folio_list(cx, folios, false).await;
    sc.count(&mut cx.st(), memcg, false, file, reclaimed);
    sc.nr_reclaimed += reclaimed;
    let mut st = cx.st();
    for &r in &rejected {
        putback_rejected(&mut st, r);
    }
    st.reclaim_lists.give_rejected(rejected);
}

/// `move_folios_to_lru` for the classic LRU (the multi-gen LRU applies its own rules first).
fn putback_rejected(st: &mut KState, r: Rejected) {
    if r.activate {
        activate_rejected(st, r.head);
    }
    st.folio_putback_lru(r.head, false);
}

/// `activate_locked`: the folio goes back active (`pgactivate`).
pub(crate) fn activate_rejected(st: &mut KState, head: Pfn) {
    st.folios.set(head, pg::ACTIVE);
    let nr = st.folios.order(head).pages();
    let memcg = st.folio_memcg(head);
    st.count_event(memcg, VmStat::Pgactivate, nr);
}

/// `reclaim_pages` (`MADV_PAGEOUT`): reclaims these folios whatever their references; returns
/// the pages freed.
pub(crate) async fn reclaim_pages(cx: &Cx, folios: Vec<Pfn>) -> u64 {
    let isolated: Vec<Pfn> = {
        let mut st = cx.st();
        let on_lru: Vec<Pfn> = folios.into_iter().filter(|&f| st.folios.test(f, pg::LRU)).collect();
        for &f in &on_lru {
            st.folio_isolate_lru(f);
        }
        on_lru
    };
    let (reclaimed, rejected) = shrink_folio_list(cx, isolated, true).await;
    let mut st = cx.st();
    for r in &rejected {
        st.folio_putback_lru(r.head, false);
    }
    st.reclaim_lists.give_rejected(rejected);
    reclaimed
}

/// `folio_check_references` for the classic LRU.
pub(crate) async fn check_references(cx: &Cx, head: Pfn) -> References {
    let (young, flags) = folio_referenced(cx, head).await;
    let mut st = cx.st();
    let referenced = st.folios.test(head, pg::REFERENCED);
    st.folios.clear_flag(head, pg::REFERENCED);
    let file = st.folio_is_file_lru(head);
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

/// `shrink_folio_list`: decides, unmaps, writes and frees. With `ignore_references`
/// (`MADV_PAGEOUT`) every folio is reclaimed if it can be. Takes the isolated folios (a list of
/// [`ReclaimLists`], given back) and returns the pages freed and the folios to put back, still
/// isolated and unlocked (a list to give back once they are).
pub(crate) async fn shrink_folio_list(
    cx: &Cx,
    folios: Vec<Pfn>,
    ignore_references: bool,
) -> (u64, Vec<Rejected>) {
    let (mut to_free, mut rejected) = {
        let mut st = cx.st();
        (st.reclaim_lists.take_folios(), st.reclaim_lists.take_rejected())
    };
    // A THP split on the way out adds its other pages, isolated, to the list.
    let mut work: VecDeque<Pfn> = folios.into();
    while let Some(head) = work.pop_front() {
        if !crate::folio::folio_trylock(&mut cx.st().folios, head)
            || cx.st().folios.test(head, pg::WRITEBACK)
        {
            rejected.push(Rejected { head, activate: false });
            continue;
        }
        let refs = if ignore_references {
            References::Reclaim
        } else {
            crate::lru::folio_check_references(cx, head).await
        };
        let outcome = match refs {
            References::Activate => Err(true),
            References::Keep => Err(false),
            r => prepare_reclaim(cx, head, r, &mut work).await,
        };
        match outcome {
            Ok(()) => to_free.push(head),
            Err(activate) => {
                folio_unlock(cx, head);
                rejected.push(Rejected { head, activate });
            }
        }
    }
    cx.st().reclaim_lists.give_folios(Vec::from(work));
    write_out(cx, &mut to_free, &mut rejected).await;
    let mut reclaimed = 0;
    let skip_freeze = cx.kernel().switches.refcount_freeze == RefcountFreeze::Skip;
    for &head in &to_free {
        let freed = cx.st().remove_mapping(head, skip_freeze);
        match freed {
            Some(nr) => {
                cx.kernel().folio_waitqueue(head).wake_up_all(cx);
                reclaimed += nr;
            }
            None => {
                folio_unlock(cx, head);
                rejected.push(Rejected { head, activate: false });
            }
        }
    }
    cx.st().reclaim_lists.give_folios(to_free);
    cx.charge_n(Cost::ReclaimPage, reclaimed).await;
    (reclaimed, rejected)
}

/// Most lists [`ReclaimLists`] keeps of each kind (more reclaimers at once allocate their own).
const RECLAIM_LISTS_KEPT: usize = 64;

impl ReclaimLists {
    pub(crate) fn take_folios(&mut self) -> Vec<Pfn> {
        self.folios.pop().unwrap_or_default()
    }

    pub(crate) fn give_folios(&mut self, list: Vec<Pfn>) {
        keep(&mut self.folios, list);
    }

    fn take_rejected(&mut self) -> Vec<Rejected> {
        self.rejected.pop().unwrap_or_default()
    }

    pub(crate) fn give_rejected(&mut self, list: Vec<Rejected>) {
        keep(&mut self.rejected, list);
    }

    /// An empty readahead batch: `(index, head)` of each new folio.
    pub(crate) fn take_reads(&mut self) -> Vec<(u64, Pfn)> {
        self.reads.pop().unwrap_or_default()
    }

    pub(crate) fn give_reads(&mut self, list: Vec<(u64, Pfn)>) {
        keep(&mut self.reads, list);
    }
}

/// Keeps an emptied list for the next pass, up to [`RECLAIM_LISTS_KEPT`].
fn keep<T>(lists: &mut Vec<Vec<T>>, mut list: Vec<T>) {
    if lists.len() < RECLAIM_LISTS_KEPT {
        list.clear();
        lists.push(list);
    }
}

impl KState {
    /// `__remove_mapping` of a locked, unmapped folio that reclaim frees: only the cache's
    /// references and reclaim's may remain (the refcount freeze, skipped by the
    /// `refcount_freeze = skip` switch) and it must be clean; a swap-cache folio leaves a swap
    /// shadow, a page-cache folio a page-cache shadow, a lazyfree folio nothing (`pglazyfreed`).
    /// Returns the pages freed, or `None` when the folio must stay.
    pub(crate) fn remove_mapping(&mut self, head: Pfn, skip_freeze: bool) -> Option<u64> {
        let nr = self.folios.order(head).pages();
        let swapcache = self.folios.test(head, pg::SWAPCACHE);
        let lazyfree = self.folio_is_lazyfree(head);
        // `__remove_mapping`: only the cache's references and ours (the refcount freeze); a
        // lazyfree folio is in no cache.
        let cache_refs = if lazyfree { 0 } else { nr as u32 };
        let only_us =
            self.folios.refcount(head) == cache_refs + 1 && self.folios.folio_mapcount(head) == 0;
        if (only_us || skip_freeze) && !self.folios.test(head, pg::DIRTY) {
            self.folios.clear_flag(head, pg::LOCKED);
            if lazyfree {
                let memcg = self.folio_memcg(head);
                self.count_event(memcg, VmStat::Pglazyfreed, nr);
            } else if swapcache {
                // One shadow per slot, a THP's in each of its cluster's (v6.8
                // `__delete_from_swap_cache`).
                let slot = self.swap.slot_of(head).expect("anon or shmem swap-cache folio");
                let shadow = self.lru_eviction_shadow(head);
                for s in slot..slot + nr {
                    self.workingset_store(ShadowSlot::Swap(s), shadow);
                }
                self.swap_cache_delete(head);
            } else if let Mapping::File(inode) = self.folios.mapping(head) {
                // The shadow is made while the folio is cached and takes its slot as it
                // leaves (`__remove_mapping` → `__filemap_remove_folio`).
                if self.folio_is_file_lru(head) {
                    let shadow = self.lru_eviction_shadow(head);
                    self.page_cache_evict(inode, head, shadow);
                } else {
                    self.page_cache_delete(inode, head);
                }
            }
            self.put_folio_extra(head);
            Some(nr)
        } else {
            None
        }
    }
}

/// Adds to swap and unmaps a folio chosen for reclaim; `Err(activate)` if it must stay. The
/// pages of a THP split on the way go to `more`.
async fn prepare_reclaim(
    cx: &Cx,
    head: Pfn,
    refs: References,
    more: &mut VecDeque<Pfn>,
) -> Result<(), bool> {
    let anon = cx.st().folios.is_anon(head);
    // A shmem folio still in its page cache (`shmem.rs`: its dirty data goes to swap).
    let shmem = {
        let st = cx.st();
        !anon && st.folios.test(head, pg::SWAPBACKED) && !st.folios.test(head, pg::SWAPCACHE)
    };
    if shmem && cx.st().folios.large(head).is_some() {
        // A shmem THP is split by `shmem_writepage`, which is not modelled (`shmem.rs`): it
        // stays.
        return Err(true);
    }
    // A KSM page stays: swapping it out (`rmap_walk_ksm` unmapping every mm) is not modelled
    // (`ksm.rs`).
    if cx.st().folios.is_ksm(head) {
        return Err(true);
    }
    // A lazyfree folio (`MADV_FREE`, v4.12+) is discarded, not swapped.
    let lazyfree = cx.st().folio_is_lazyfree(head);
    // v4.5-v4.11: one that enters the swap cache now is unmapped with `TTU_LZFREE`.
    let lzfree = anon
        && !cx.st().folios.test(head, pg::SWAPCACHE)
        && crate::era::lazyfree_on_anon_lru(cx.kernel().version);
    if anon && !lazyfree && !cx.st().folios.test(head, pg::SWAPCACHE) {
        let clean = !cx.st().folios.test(head, pg::DIRTY);
        // The deep paths are boxed so that this future stays small for the common clean
        // page-cache folio, which awaits none of them (a host-cost measure only).
        Box::pin(add_anon_to_swap(cx, head, more)).await?;
        if lzfree && clean {
            // Those kernels' `add_to_swap` leaves the page clean: the PTEs say if it is dirty.
            cx.st().folios.clear_flag(head, pg::DIRTY);
        }
    }
    if anon && cx.st().folios.large(head).is_some() {
        // `try_to_unmap` with `TTU_SPLIT_HUGE_PMD`: the PMDs become PTEs, then swap entries.
        Box::pin(crate::huge_memory::split::split_folio_pmds(cx, head)).await;
    }
    let mapped = cx.st().folios.folio_mapcount(head) > 0;
    if mapped && !Box::pin(try_to_unmap(cx, head, lzfree)).await {
        return Err(true);
    }
    if lzfree && mapped && !cx.st().folios.test(head, pg::DIRTY) {
        // `SWAP_LZFREE`: every PTE was dropped; the free below skips the write.
        let mut st = cx.st();
        let (nr, memcg) = (st.folios.order(head).pages(), st.folio_memcg(head));
        st.count_event(memcg, VmStat::Pglazyfreed, nr);
    }
    if shmem && cx.st().folios.test(head, pg::DIRTY) && !cx.st().shmem_writepage(head) {
        return Err(true); // no swap slot: `shmem_writepage` redirties, the folio is activated
    }
    if !anon && refs == References::ReclaimClean && cx.st().folios.test(head, pg::DIRTY) {
        return Err(false);
    }
    Ok(())
}

/// `add_to_swap` of an anonymous folio in `shrink_folio_list`; a THP by the era's rule (the
/// module note): a THP others hold (`can_split_folio` fails) stays; the split's other pages go
/// to `more`.
async fn add_anon_to_swap(cx: &Cx, head: Pfn, more: &mut VecDeque<Pfn>) -> Result<(), bool> {
    if cx.st().folios.large(head).is_none() {
        return cx.st().add_to_swap(head).map(drop).ok_or(true);
    }
    if !cx.st().can_split_folio(head) {
        return Err(true);
    }
    let rule = crate::era::thp_swap_out(cx.kernel().version);
    if rule == ThpSwapOut::Whole && split_before_swap(&cx.st(), head) {
        split_for_reclaim(cx, head, more).await?;
        return cx.st().add_to_swap(head).map(drop).ok_or(true);
    }
    if rule != ThpSwapOut::SplitFirst && cx.st().add_to_swap(head).is_some() {
        if rule == ThpSwapOut::ClusterThenSplit && split_for_reclaim(cx, head, more).await.is_err()
        {
            cx.st().swap_cache_delete(head);
            return Err(true);
        }
        return Ok(());
    }
    let order = cx.st().folios.order(head);
    split_for_reclaim(cx, head, more).await?;
    if rule == ThpSwapOut::Whole {
        let mut st = cx.st();
        if order == Order::PMD {
            st.vmstat.inc(VmStat::ThpSwpoutFallback);
        }
        st.count_mthp_stat(order, MthpStat::SwpoutFallback);
    }
    cx.st().add_to_swap(head).map(drop).ok_or(true)
}

/// Whether reclaim splits the large anonymous folio `head` before it asks for swap: from v4.14
/// to v6.9 when no PMD maps it ("split pages without a PMD map right away", every multi-size
/// THP among them); from v6.10 only when it is on the deferred split queue
/// ([`crate::era::swaps_out_large_folios_whole`]).
fn split_before_swap(st: &KState, head: Pfn) -> bool {
    if crate::era::swaps_out_large_folios_whole(st.thp.kernel) {
        st.thp.split_queue.contains(&head)
    } else {
        st.folios.entire_mapcount(head) == 0
    }
}

/// `split_huge_page_to_list` onto the reclaim list: the locked THP `head` becomes 4 KiB
/// folios; each other page still in use is isolated (a reference) and queued on `more`.
async fn split_for_reclaim(cx: &Cx, head: Pfn, more: &mut VecDeque<Pfn>) -> Result<(), bool> {
    let nr = cx.st().folios.order(head).pages();
    crate::huge_memory::split::split_folio(cx, head).await.map_err(|_| true)?;
    let mut st = cx.st();
    for page in (1..nr).map(|i| head + i) {
        if st.folios.refcount(page) > 0 {
            st.folios.get_extra(page);
            more.push_back(page);
        }
    }
    Ok(())
}

/// Writes the dirty folios among `folios` (swap writes for those in the swap cache, anonymous
/// or shmem, writeback for file ones) with one device request each kind, unlocked while under
/// writeback. `folios` keeps the clean ones, then those locked again afterwards; those that
/// could not be relocked go to `rejected` (unlocked, to put back).
async fn write_out(cx: &Cx, folios: &mut Vec<Pfn>, rejected: &mut Vec<Rejected>) {
    let (swap, file) = {
        let mut st = cx.st();
        let (mut swap, mut file) = (st.reclaim_lists.take_folios(), st.reclaim_lists.take_folios());
        folios.retain(|&h| {
            let dirty = st.folios.test(h, pg::DIRTY);
            if dirty && st.folios.test(h, pg::SWAPCACHE) {
                swap.push(h);
            } else if dirty {
                file.push(h);
            }
            !dirty
        });
        (swap, file)
    };
    for batch in [swap, file] {
        if !batch.is_empty() {
            Box::pin(write_batch(cx, &batch, folios, rejected)).await;
        }
        cx.st().reclaim_lists.give_folios(batch);
    }
}

/// `pageout` of one kind's dirty folios as one device request, then `folio_end_writeback` and
/// the lock again for the free.
async fn write_batch(
    cx: &Cx,
    batch: &[Pfn],
    relocked: &mut Vec<Pfn>,
    rejected: &mut Vec<Rejected>,
) {
    {
        // The data goes to the device as it is now; the folio is clean and under writeback,
        // and unlocked.
        let mut st = cx.st();
        for &head in batch {
            if st.folios.test(head, pg::SWAPCACHE) {
                st.swap_write(head);
            } else if let Mapping::File(inode) = st.folios.mapping(head) {
                st.writeback_folio(inode, head);
            }
            st.folios.set(head, pg::WRITEBACK);
        }
    }
    for &head in batch {
        folio_unlock(cx, head);
    }
    let io = cx.block_io(batch.len() as u64);
    cx.sleep(io).await;
    for &head in batch {
        let locked = {
            let mut st = cx.st();
            st.folios.clear_flag(head, pg::WRITEBACK);
            crate::folio::folio_trylock(&mut st.folios, head)
        };
        cx.kernel().folio_waitqueue(head).wake_up_all(cx);
        if locked {
            relocked.push(head);
        } else {
            rejected.push(Rejected { head, activate: false });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reclaim_lists_come_back_empty_and_are_bounded() {
        let mut lists = ReclaimLists::default();
        let mut a = lists.take_folios();
        a.extend([Pfn(1), Pfn(2)]);
        let cap = a.capacity();
        lists.give_folios(a);
        let b = lists.take_folios();
        assert!(b.is_empty() && b.capacity() == cap, "the list is reused, emptied");
        for _ in 0..RECLAIM_LISTS_KEPT + 5 {
            lists.give_folios(Vec::with_capacity(1));
        }
        assert_eq!(lists.folios.len(), RECLAIM_LISTS_KEPT);
    }
}
