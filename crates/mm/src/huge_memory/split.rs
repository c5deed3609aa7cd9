//! Splitting anonymous THPs and the deferred split queue (`mm/huge_memory.c`
//! `split_huge_page_to_list_to_order`, `can_split_folio`, `__split_huge_page`,
//! `deferred_split_folio`, `deferred_split_scan`, `split_huge_pages_write`; `mm/rmap.c`
//! `__folio_remove_rmap`; Linux v6.8, with the eras below).
//!
//! The deferred split queue ("thp: introduce deferred_split_huge_page()", 9a982250f773, v4.5;
//! `deferred_split_folio` after the folio conversions): when the rmap loses a PTE mapping of a
//! page of an anonymous THP, or the last PMD mapping of a THP some of whose pages PTEs still
//! map, the folio joins the queue (once; `thp_deferred_split_page`), unless it is in the swap
//! cache (reclaim handles it). Freeing the folio takes it off (`folio_undo_large_rmappable`).
//! The queue's shrinker (`deferred_split_scan`) runs with every `shrink_node`: it takes a
//! reference on each queued folio, trylocks it and splits it; a folio that does not split
//! stays queued.
//!
//! `split_folio` of a locked anonymous THP on which the caller holds a reference: under the
//! anon_vma's write lock, `can_split_folio` requires the refcount to be the mappings plus the
//! swap cache's references plus the caller's (an extra reference, a GUP reference or a pin,
//! fails it: `-EAGAIN`, `thp_split_page_failed`); the PMDs mapping it are split
//! (`TTU_SPLIT_HUGE_PMD`), the refcount is checked again (the freeze), and each page becomes an
//! order-0 folio with the head's flags, mapping, index plus its offset, memory cgroup and LRU
//! list; its own PageAnonExclusive stays. Pages no PTE maps are freed at once (their memcg
//! charge with them); `thp_split_page` counts the split.
//!
//! Zero-filled pages (v6.12, "mm: remap unused subpages to shared zeropage when splitting
//! isolated thp", b1f202060afe, `era::split_maps_zero_subpages`): `__split_huge_page` remaps the
//! split folio's pages with `RMP_USE_SHARED_ZEROPAGE` for every anonymous folio, whoever splits
//! it (reclaim, the deferred split shrinker, debugfs, `MADV_PAGEOUT`), and
//! `try_to_map_unused_to_zeropage` (mm/migrate.c) maps the shared zero page, read-only, where a
//! PTE mapped a page holding only zeros: the page loses that mapping and its count in
//! `MM_ANONPAGES` (smaps `Rss`), pagemap shows the zero page there, and the page, mapped by
//! nothing, is freed with the split (`free_page_and_swap_cache`). Not for an mlocked page nor
//! in a `VM_LOCKED` VMA (x86 has no `mm_forbids_zeropage`). Reclaim's fallback split of a THP
//! it found no swap cluster for thus writes only the pages with data. The zero-page entry
//! carries no soft-dirty bit until v6.18, which keeps the replaced entry's
//! (`era::zero_subpage_keeps_soft_dirty`). Each page looked at is charged a page compare.
//!
//! `/sys/kernel/debug/split_huge_pages` (debugfs; v4.5): `1` splits every anonymous THP on an
//! LRU list; `PID,0xSTART,0xEND` (v5.13, "mm: huge_memory: a new debugfs interface for splitting
//! THP tests", fa6c02315f74) splits those mapped in that range of that process,
//! skipping a folio `can_split_folio` refuses or that is locked (`split_huge_pages_pid`), as
//! `tools/testing/selftests/mm/split_huge_page_test.c` uses it.
//!
//! Multi-size THPs (v6.8): the queue, `split_folio` and the debugfs walk take a large anonymous
//! folio of any order. The counters follow their eras: `thp_split_page`, `thp_split_page_failed`
//! and `thp_deferred_split_page` count every order in v6.8 and v6.9 and PMD-sized folios only
//! from v6.10 (835c3a25aa37, `era::thp_split_stats_pmd_only`); the per-size `split`,
//! `split_failed` and `split_deferred` (v6.11) count every order. A PTE unmapping queues the
//! folio in v6.8 and v6.9 even when it leaves no page mapped; from v6.10 (7491f3f34891) only a
//! partially mapped one is queued, decided once per run of PTEs of one folio that the unmapping
//! removes together (`zap.rs`, the kernel's `folio_pte_batch`; v6.8's zap went PTE by PTE, with
//! the same result under its rule).
//!
//! Approximations: no migration entries during the split (the model's split is one step between
//! blocking points, so nothing can observe the pages unmapped); one queue for the machine where
//! the kernel has one per node and, from v5.4, one per memory cgroup; the shrinker scans the
//! oldest folios whenever the pressure reaches them (`nr_to_scan`, without the `nr_deferred`
//! carried between calls) and its frees do not count as reclaimed pages; file and shmem THPs
//! are not split (the debugfs walk skips them); `split_huge_page_to_list_to_order`'s new orders
//! (splitting to an order above 0) are not modelled; the `split_huge_pages` filters by pid and
//! address only (not by file path, v6.x); v6.12's underused-THP shrinking
//! (`thp_underused`) is not modelled. The zero-page remapping looks at the pages of the folio
//! after the split and flushes the TLBs of the entries it changed before the pages go; a page of
//! a swap-cache folio left unmapped stays in the swap cache, as the model's split leaves every
//! unmapped page of one (the kernel drops it when no swap entry refers to its slot).

use crate::errno::Errno;
use crate::filemap::folio_unlock;
use crate::folio::folio_trylock;
use crate::folio::{Mapping, pg};
use crate::kernel::{Cx, KState};
use crate::memory::{pte_bits, vm_normal_page};
use crate::mm_struct::MmCounter;
use crate::pgtable::{Level, Pte};
use crate::rmap::Mapper;
use crate::sim::cost::Cost;
use crate::types::huge_mm::MthpStat;
use crate::types::ids::{MmId, Pid};
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use simcore::{Bytes, Order, Pfn, VirtAddr};

/// The debugfs file that splits THPs on demand.
pub const SPLIT_HUGE_PAGES: &str = "/sys/kernel/debug/split_huge_pages";

impl KState {
    /// `deferred_split_folio`: queues the anonymous THP `head` for the shrinker, once.
    pub(crate) fn deferred_split_folio(&mut self, head: Pfn) {
        let q = &self.thp.split_queue;
        if !crate::era::has_deferred_split(self.thp.kernel)
            || self.folios.test(head, pg::SWAPCACHE)
            || q.contains(&head)
        {
            return;
        }
        self.thp.split_queue.push(head);
        self.count_thp_event(head, VmStat::ThpDeferredSplitPage, MthpStat::SplitDeferred);
    }

    /// Counts an event of the large anonymous folio `head`: the vmstat event for every order
    /// before v6.10 and for PMD-sized folios only from then
    /// ([`crate::era::thp_split_stats_pmd_only`]), and the per-size counter of its order.
    fn count_thp_event(&mut self, head: Pfn, event: VmStat, stat: MthpStat) {
        let order = self.folios.order(head);
        if order == Order::PMD || !crate::era::thp_split_stats_pmd_only(self.thp.kernel) {
            self.vmstat.inc(event);
        }
        self.count_mthp_stat(order, stat);
    }

    /// A large anonymous folio is being freed: it leaves the queue.
    pub(crate) fn deferred_split_remove(&mut self, head: Pfn) {
        self.thp.split_queue.retain(|&p| p != head);
    }

    /// `can_split_folio`: nobody but the mappings, the swap cache and the caller (one
    /// reference) holds the folio.
    pub fn can_split_folio(&self, head: Pfn) -> bool {
        let nr = self.folios.order(head).pages() as u32;
        let extra_pins = if self.folios.test(head, pg::SWAPCACHE) { nr } else { 0 };
        self.folios.folio_mapcount(head) + extra_pins + 1 == self.folios.refcount(head)
    }

    /// `__split_huge_page` of the locked, PTE-mapped anonymous THP `head` that
    /// [`can_split_folio`](KState::can_split_folio) passed: every page becomes an order-0 folio
    /// on the head's LRU list; unmapped pages are freed. A swap-cache folio's pages keep their
    /// slots, each its own swap-cache folio (`__split_huge_page`'s swap-cache arm, v4.13+).
    /// Returns the pages freed.
    fn split_anon_folio(&mut self, head: Pfn) -> u64 {
        let first_slot = self.swap.slot_of(head);
        let list = self.folios.test(head, pg::LRU).then(|| self.folio_list_now(head));
        if let Some(l) = list {
            self.folios.list_del(head, l);
        }
        let (mapping, index) = (self.folios.mapping(head), self.folios.index(head));
        self.count_thp_event(head, VmStat::ThpSplitPage, MthpStat::Split);
        let nr = self.folios.split_large(head, u32::from(first_slot.is_some()));
        let mut freed = 0;
        for i in 0..nr {
            let page = head + i;
            self.folios.set_mapping(page, mapping, index + i as u32);
            if let Some(slot) = first_slot {
                self.swap.split_cached(page, slot + i);
            }
            if self.folios.refcount(page) == 0 {
                self.free_folio(page);
                freed += 1;
            } else if let Some(l) = list {
                let l = if i == 0 { l } else { self.folio_list_now(page) };
                self.folios.list_add(page, l, false);
            }
        }
        self.deferred_split_remove(head);
        freed
    }

    /// `remap_page` with `RMP_USE_SHARED_ZEROPAGE` after the split of the anonymous folio
    /// `head` of `nr` pages, from v6.12 (the module note): `try_to_map_unused_to_zeropage` maps
    /// the zero page where a PTE mapped one of its pages that holds only zeros. Each page so
    /// unmapped is held by an extra reference until the caller has flushed the entries' TLBs.
    fn map_unused_to_zeropage(&mut self, head: Pfn, nr: u64) -> ZeroMapped {
        let mut out = ZeroMapped::default();
        if !crate::era::split_maps_zero_subpages(self.thp.kernel) {
            return out;
        }
        for page in (0..nr).map(|i| head + i) {
            // Freed by the split (mapped by nothing), or `folio_test_mlocked`.
            if self.folios.page_mapcount(page) == 0 || self.folios.test(page, pg::UNEVICTABLE) {
                continue;
            }
            out.scanned += 1;
            if !self.page_zero_filled(page) {
                continue;
            }
            let unlocked = |m: &Mapper| !self.vma(m.vma).flags.has(VmFlags::LOCKED);
            let mappers: Vec<Mapper> =
                self.rmap_mappers(page).into_iter().filter(unlocked).collect();
            if mappers.is_empty() {
                continue;
            }
            self.folios.get_extra(page);
            for m in mappers {
                self.map_zero_pte(m);
                out.ptes.push((m.mm, m.addr));
            }
            out.pages.push(page);
        }
        out
    }

    /// Replaces the PTE of `m` by the shared zero page's, special and read-only with the VMA's
    /// protection (as `do_anonymous_page` maps it), and drops the page's mapping.
    fn map_zero_pte(&mut self, m: Mapper) {
        let pgd = self.mm(m.mm).pgd;
        let (table, idx) = self.pt.pte_slot(pgd, m.addr).expect("a PTE maps the page");
        let mut bits = pte_bits(self.vma(m.vma).flags, false, false) | Pte::SPECIAL;
        if crate::era::zero_subpage_keeps_soft_dirty(self.thp.kernel)
            && self.pt.pte(table, idx).soft_dirty()
        {
            bits |= Pte::SOFT_DIRTY;
        }
        self.pt.set_pte(table, idx, Pte::new(self.zero_pfn, bits));
        self.rmap_remove_pte(m.page);
        let last = self.folios.put(m.page, 1);
        assert!(!last, "the split's zero-page remap holds {}", m.page);
        self.mm_mut(m.mm).sub_rss(MmCounter::AnonPages, 1);
    }
}

/// What the zero-page remapping of a split did: the pages it unmapped (each held by an extra
/// reference), the PTEs it changed, and how many pages it looked at.
#[derive(Default)]
struct ZeroMapped {
    pages: Vec<Pfn>,
    ptes: Vec<(MmId, VirtAddr)>,
    scanned: u64,
}

/// Charges the pages looked at, flushes the TLBs of the PTEs that now map the zero page (one
/// range per mm), then drops the references on the pages, which frees them.
async fn finish_zero_mapped(cx: &Cx, mut zeroed: ZeroMapped) {
    cx.charge_n(Cost::CopyPage4k, zeroed.scanned).await;
    zeroed.ptes.sort_unstable();
    let mut ranges: Vec<(MmId, VirtAddr, VirtAddr)> = Vec::new();
    for (mm, addr) in zeroed.ptes {
        match ranges.last_mut() {
            Some((m, _, end)) if *m == mm => *end = addr + Bytes::PAGE,
            _ => ranges.push((mm, addr, addr + Bytes::PAGE)),
        }
    }
    for (mm, start, end) in ranges {
        crate::arch::tlbflush::flush_tlb_range(cx, mm, start, end).await;
    }
    let mut st = cx.st();
    for page in zeroed.pages {
        st.put_folio_extra(page);
    }
}

/// `split_folio`: splits the locked large anonymous folio `head` (a THP of any size), on which
/// the caller holds one reference, into order-0 folios (the module note). `EAGAIN` when others
/// hold references, `EBUSY` for a folio the model does not split (not anonymous, or small).
pub(crate) async fn split_folio(cx: &Cx, head: Pfn) -> Result<(), Errno> {
    let (av, nr) = {
        let st = cx.st();
        let large = st.folios.large(head).is_some();
        match st.folios.mapping(head) {
            Mapping::Anon(av) if large => {
                (st.anon_vmas[st.anon_vmas[av].root].lock, st.folios.order(head).pages())
            }
            _ => return Err(Errno::EBUSY),
        }
    };
    let _a = av.write(cx).await;
    if !cx.st().can_split_folio(head) {
        cx.st().count_thp_event(head, VmStat::ThpSplitPageFailed, MthpStat::SplitFailed);
        return Err(Errno::EAGAIN);
    }
    split_folio_pmds(cx, head).await;
    cx.charge_n(Cost::PteUpdate, 2 * nr).await;
    let zeroed = {
        let mut st = cx.st();
        // The freeze: the PMD splits may have raced with a new reference.
        if !st.can_split_folio(head) {
            st.count_thp_event(head, VmStat::ThpSplitPageFailed, MthpStat::SplitFailed);
            return Err(Errno::EAGAIN);
        }
        st.split_anon_folio(head);
        st.map_unused_to_zeropage(head, nr)
    };
    if zeroed.scanned > 0 {
        // Boxed: the split's future sits deep in reclaim's and the fault's.
        Box::pin(finish_zero_mapped(cx, zeroed)).await;
    }
    Ok(())
}

/// Splits every PMD that maps the anonymous THP `head` into PTEs (`TTU_SPLIT_HUGE_PMD`; the
/// split itself and reclaim's unmapping ask it).
pub(crate) async fn split_folio_pmds(cx: &Cx, head: Pfn) {
    let pmds: Vec<_> = cx.st().rmap_mappers(head).into_iter().filter(|m| m.huge).collect();
    for m in pmds {
        crate::zap::split_huge_pmd(cx, m.mm, m.addr).await;
    }
}

/// Splits `head`, held by the caller's extra reference, if its lock can be had; drops the
/// reference. `pre_check` skips a folio `can_split_folio` refuses (the debugfs walks).
async fn try_split(cx: &Cx, head: Pfn, pre_check: bool) -> bool {
    let locked = {
        let mut st = cx.st();
        (!pre_check || st.can_split_folio(head)) && folio_trylock(&mut st.folios, head)
    };
    let split = locked && split_folio(cx, head).await.is_ok();
    if locked {
        folio_unlock(cx, head);
    }
    cx.st().put_folio_extra(head);
    split
}

/// `do_shrink_slab` asking `deferred_split_scan` at reclaim `priority`: the shrinker runs once
/// the pressure, the queue's length shifted down by the priority (times four over
/// `DEFAULT_SEEKS`), reaches the queue's length or a batch (`SHRINK_BATCH`, 128), and splits that
/// many of the oldest queued folios it can lock. Returns how many it split.
pub(crate) async fn deferred_split_scan(cx: &Cx, priority: u32) -> u64 {
    let queued: Vec<Pfn> = {
        let mut st = cx.st();
        let len = st.thp.split_queue.len();
        let delta = (len >> priority) * 4 / 2;
        if len == 0 || delta < len.min(128) {
            return 0;
        }
        let q: Vec<Pfn> = st.thp.split_queue.iter().take(delta.min(128)).copied().collect();
        for &head in &q {
            st.folios.get_extra(head);
        }
        q
    };
    let mut split = 0;
    for head in queued {
        split += u64::from(try_split(cx, head, false).await);
    }
    split
}

/// A write to [`SPLIT_HUGE_PAGES`] (`split_huge_pages_write`): `1`, or `PID,0xSTART,0xEND`.
pub(crate) async fn split_huge_pages_write(cx: &Cx, value: &str) -> Result<(), Errno> {
    let k = cx.kernel().version;
    if !crate::era::has_deferred_split(k) {
        return Err(Errno::ENOENT);
    }
    let value = value.trim();
    if value == "1" {
        split_huge_pages_all(cx).await;
        return Ok(());
    }
    if !crate::era::has_split_huge_pages_pid(k) {
        return Err(Errno::EINVAL);
    }
    let (pid, start, end) = parse_pid_range(value).ok_or(Errno::EINVAL)?;
    split_huge_pages_pid(cx, pid, start, end).await
}

/// `PID,0xSTART,0xEND` (the kernel's `"%d,0x%lx,0x%lx"`), page-aligned.
fn parse_pid_range(value: &str) -> Option<(Pid, VirtAddr, VirtAddr)> {
    let mut parts = value.split(',');
    let pid = parts.next()?.trim().parse::<usize>().ok()?;
    let mut addr = || {
        let hex = parts.next()?.trim().strip_prefix("0x")?;
        u64::from_str_radix(hex, 16).ok().map(|a| VirtAddr(a).align_down(Bytes::PAGE))
    };
    let (start, end) = (addr()?, addr()?);
    Some((Pid(pid as u32), start, end))
}

/// `split_huge_pages_all`: every anonymous THP on an LRU list.
async fn split_huge_pages_all(cx: &Cx) {
    let thps: Vec<Pfn> = {
        let mut st = cx.st();
        let f = &st.folios;
        let heads: Vec<Pfn> = f
            .heads()
            .filter(|&h| f.test(h, pg::LRU) && f.is_anon(h) && f.large(h).is_some())
            .collect();
        for &h in &heads {
            st.folios.get_extra(h);
        }
        heads
    };
    for head in thps {
        try_split(cx, head, true).await;
    }
}

/// `split_huge_pages_pid`: the anonymous THPs mapped in `[start, end)` of `pid`, under its
/// `mmap_lock` for read; ends at the first address no VMA covers.
async fn split_huge_pages_pid(
    cx: &Cx,
    pid: Pid,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let mm = cx.st().procs.get(pid).and_then(|p| p.mm).ok_or(Errno::EINVAL)?;
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let mut addr = start;
    while addr < end {
        let thp = {
            let mut st = cx.st();
            if st.find_vma(mm, addr).is_none() {
                break;
            }
            let head = mapped_thp(&st, mm, addr);
            if let Some(h) = head {
                st.folios.get_extra(h);
            }
            head
        };
        if let Some(head) = thp {
            try_split(cx, head, true).await;
        }
        addr = addr + Bytes::PAGE;
    }
    Ok(())
}

/// The large anonymous folio (a THP of any size) mapped at `addr` of `mm` (`follow_page` and
/// `is_transparent_hugepage`), if any.
fn mapped_thp(st: &KState, mm: MmId, addr: VirtAddr) -> Option<Pfn> {
    let (pte, level) = st.pt.translate(st.mm(mm).pgd, addr)?;
    let page = match level {
        Level::Pmd if pte.is_present() && !pte.special() => pte.pfn(),
        Level::Pte => vm_normal_page(pte)?,
        _ => return None,
    };
    let head = st.folios.head(page);
    let f = &st.folios;
    (f.is_anon(head) && f.large(head).is_some()).then_some(head)
}
