//! Whole-system checkers: invariants that span components, recomputed from scratch and compared
//! with the incrementally kept state (TigerBeetle's state checkers; the kernel's
//! `CONFIG_DEBUG_VM` checks and the `nr_foll_pin_acquired == nr_foll_pin_released` balance of
//! `Documentation/core-api/pin_user_pages.rst`).
//!
//! Read-only and O(state): they run after every step under the explorer and in tests (when
//! `simcore::verify::verify()` is on), and at the end of runs. Each returns the first violation as
//! a message naming the invariant and the object.
//!
//! Each invariant has a stable name by concern ([`INVARIANTS`], like the kernel's `VM_BUG_ON`
//! sites), so a scenario can expect one to hold, or to be violated in an era with a known kernel
//! bug; [`check_invariant`] runs one, [`check_all_but`] all others.
//!
//! Checked:
//! - every frame is free, a folio, a page table or a zero page, and the counts agree with
//!   `nr_free_pages` and `nr_page_table_pages`;
//! - each swap slot's count is the swap PTEs and shmem swap entries (`AddressSpace::swapped`)
//!   holding it, and no shmem index holds both a folio and a swap entry;
//! - each folio's refcount is its page-cache references plus its mappings plus the references of
//!   registered holders;
//! - the PTEs and the mapcounts agree, every mapping is reachable through rmap at the right
//!   address, and no PTE points at a free frame; a PMD that is not special maps the head of a
//!   cached or anonymous PMD-sized folio (writable only if exclusive, for anonymous ones), and
//!   the entire mapcounts, `nr_file_pmdmapped` and `nr_anon_transparent_hugepages` agree with
//!   them; the page-table pages deposited for anonymous PMDs count as page tables;
//! - each mm's RSS counters equal a recount;
//! - the vmstat gauges (`nr_anon_pages`, `nr_mapped`, `nr_file_pages`, `nr_shmem`, `nr_dirty`,
//!   `nr_file_hugepages`), each mapping's `nr_thps`, `nr_large` and the LRU lists equal a recount;
//! - every folio on an LRU list is on its own lruvec's list for its state (its generation
//!   within `[min_seq, max_seq]` under the multi-gen LRU), and each memory cgroup's
//!   `memory.current` equals the pages of the folios charged to it and its descendants;
//! - shadow entries sit only where no folio is (page cache indexes without a folio, allocated swap
//!   slots outside the swap cache), and the shrinker's per-cgroup counts are right;
//! - under `anon_exclusive`, a writable PTE of an anonymous page maps a PageAnonExclusive page;
//! - hugetlb's pools, pages, page caches, shared PMD tables and reservations
//!   (`hugetlb/check.rs`);
//! - the deferred split queue holds live anonymous THPs, each once, none in the swap cache;
//! - no `VM_BUG_ON` site was reached (`KState::vm_bug`: truncation handed a tail page);
//! - no TLB entry maps a free frame (`KState::check_tlb` in `tlb.rs`, which also checks the
//!   stricter coherence that holds only where no flush is in flight);
//! - special PTEs and PMDs map a zero page or persistent memory; the zero pages are never
//!   written, referenced or rmapped; every pmem mapping maps the block the file's block map
//!   gives its index, and the DAX entry there is absent (an invalidation is running), a
//!   placeholder, or that block; DAX entries do not overlap, a block entry matches the block
//!   map, no index has both a hole page and an entry, a huge PMD lies within its VMA, and the
//!   device's allocated blocks are exactly those of the block maps.

use crate::era::CowReuse;
use crate::folio::{LruList, Mapping, pg};
use crate::kernel::{KState, Kernel};
use crate::memory::vm_normal_page;
use crate::mm_struct::MmCounter;
use crate::mm_struct::mm_counter;
use crate::pgtable::{Level, Pte, Upper};
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::swap::ShadowSlot;
use crate::vmstat::VmStat;
use simcore::{Pfn, VirtAddr};
use std::collections::BTreeMap;

/// A present leaf PTE found by the page-table walk.
struct Mapped {
    mm: MmId,
    addr: VirtAddr,
    pte: Pte,
    /// A PMD leaf (2 MiB).
    huge: bool,
}

/// Every present or swap PTE of every mm, and the first malformed table found, if any.
fn all_ptes(st: &KState) -> (Vec<Mapped>, Result<(), String>) {
    let mut out = Vec::new();
    let mut result = Ok(());
    for (mm, m) in st.mms.iter() {
        let Some(m) = m else { continue };
        result = result.and(walk(st, mm, m.pgd, Level::Pgd, 0, &mut out));
    }
    // PTE tables a collapse holds out of their PMD still map their pages.
    for (&(mm, addr), &table) in &st.thp.khugepaged.isolated {
        result = result.and(walk(st, mm, table, Level::Pte, addr.0, &mut out));
    }
    (out, result)
}

fn walk(
    st: &KState,
    mm: MmId,
    table: PtId,
    level: Level,
    base: u64,
    out: &mut Vec<Mapped>,
) -> Result<(), String> {
    let t = st.pt.table(table);
    if t.level != level {
        return Err(format!("table {table} of mm {mm} is level {:?}, expected {level:?}", t.level));
    }
    let mut used = 0;
    for idx in 0..512u64 {
        let addr = base + (idx << level.shift());
        if level == Level::Pte {
            let pte = st.pt.pte(table, idx as usize);
            if !pte.is_none() {
                used += 1;
                out.push(Mapped { mm, addr: VirtAddr(addr), pte, huge: false });
            }
            continue;
        }
        match st.pt.upper(table, idx as usize) {
            Upper::None => {}
            Upper::Table(child) => {
                used += 1;
                walk(st, mm, child, level.below(), addr, out)?;
            }
            Upper::Leaf(pte) => {
                used += 1;
                out.push(Mapped { mm, addr: VirtAddr(addr), pte, huge: true });
            }
        }
    }
    if used != t.used {
        return Err(format!("table {table} of mm {mm} counts {} entries but has {used}", t.used));
    }
    Ok(())
}

/// A named invariant, for scenarios and the documentation.
#[derive(Debug)]
pub struct Invariant {
    pub name: &'static str,
    pub doc: &'static str,
}

const fn inv(name: &'static str, doc: &'static str) -> Invariant {
    Invariant { name, doc }
}

/// Every invariant the checkers keep, in the order they run.
pub const INVARIANTS: &[Invariant] = &[
    inv(
        "frames_accounted",
        "every frame is free, a folio, a page table or a zero page; nr_free_pages and nr_page_table_pages agree",
    ),
    inv("page_tables_well_formed", "each table sits at its level and counts its entries right"),
    inv(
        "special_entries_map_zero_or_pmem",
        "a special PTE or PMD maps a zero page or persistent memory",
    ),
    inv(
        "mapcount_matches_page_tables",
        "each page's mapcount (and each folio's entire mapcount) equals the PTEs (PMDs) mapping it; no PTE maps a free frame; a PMD leaf maps the head of a PMD-sized folio",
    ),
    inv(
        "rmap_finds_every_mapping",
        "every mapping is found by the reverse map at its address (but where rmap_walk_ksm cannot look: a KSM page's sharer outside its rmap_items' anon_vmas)",
    ),
    inv(
        "writable_anon_is_exclusive",
        "under anon_exclusive, a writable PTE or PMD maps a PageAnonExclusive page",
    ),
    inv("rss_recount", "each mm's RSS counters equal a recount of its mappings"),
    inv(
        "mapped_vmstat_recount",
        "nr_anon_pages, nr_mapped, nr_file_pmdmapped and nr_anon_transparent_hugepages equal a recount",
    ),
    inv(
        "refcount_covers_references",
        "each folio's refcount is its cache references plus mappings plus registered holders plus pins",
    ),
    inv(
        "swap_counts_match_entries",
        "each swap slot's count is the swap PTEs and shmem entries holding it; the swap cache agrees with the flags and nr_swapcached",
    ),
    inv(
        "page_cache_recount",
        "each mapping's nrpages, nr_thps and nr_large, and the file vmstat gauges, equal a recount of the page cache",
    ),
    inv(
        "lru_lists_match_flags",
        "every PG_lru folio is on its own lruvec's list for its state, generations within [min_seq, max_seq]",
    ),
    inv(
        "memcg_charge_recount",
        "each memory cgroup's memory.current equals the pages charged to it and its descendants",
    ),
    inv(
        "shadows_only_in_holes",
        "shadow entries sit only where no folio is; the shrinker's counts are right",
    ),
    inv("zero_pages_untouched", "the zero pages are never written, referenced or rmapped"),
    inv(
        "pmem_mappings_match_blocks",
        "every pmem mapping lies in a DAX VMA and maps the block and DAX entry of its file index",
    ),
    inv(
        "dax_entries_match_blocks",
        "DAX entries do not overlap or sit on hole pages and match the block maps; the device's allocation agrees",
    ),
    inv(
        "hugetlb_consistent",
        "hugetlb pools, mapcounts, page caches, shared PMD tables and reservations (hugetlb/check.rs)",
    ),
    inv("tlb_maps_no_free_frame", "no TLB entry maps a free frame"),
    inv(
        "deferred_split_queue_well_formed",
        "the deferred split queue holds each anonymous PMD-sized folio at most once, none freed, none in the swap cache",
    ),
    inv(
        crate::truncate::TAIL_BUG,
        "truncation never hands truncate_inode_page a tail page (its VM_BUG_ON_PAGE(PageTail), reachable before v5.17)",
    ),
];

type Checker = fn(&KState, &[Mapped]) -> Result<(), String>;

/// The checkers of one invariant each, after those `check_mappings` keeps together.
const CHECKERS: [(&str, Checker); 13] = [
    ("refcount_covers_references", |st, _| check_refcounts(st)),
    ("swap_counts_match_entries", check_swap),
    ("page_cache_recount", |st, _| check_page_cache(st)),
    ("lru_lists_match_flags", |st, _| check_lruvecs(st)),
    ("memcg_charge_recount", |st, _| check_memcg_charges(st)),
    ("shadows_only_in_holes", |st, _| check_shadows(st)),
    ("zero_pages_untouched", |st, _| check_zero_frames(st)),
    ("pmem_mappings_match_blocks", check_pmem_ptes),
    ("dax_entries_match_blocks", |st, _| check_dax_entries(st)),
    ("hugetlb_consistent", |st, _| crate::hugetlb::check::check_hugetlb(st)),
    ("tlb_maps_no_free_frame", |st, _| st.check_tlb(false)),
    ("deferred_split_queue_well_formed", |st, _| check_split_queue(st)),
    (crate::truncate::TAIL_BUG, |st, _| vm_bug_at(st, crate::truncate::TAIL_BUG)),
];

/// Whether a code path reached the `VM_BUG_ON` site `site` (`KState::vm_bug`).
fn vm_bug_at(st: &KState, site: &str) -> Result<(), String> {
    match &st.vm_bug {
        Some((hit, msg)) if *hit == site => Err(msg.clone()),
        _ => Ok(()),
    }
}

/// The deferred split queue (`huge_memory/split.rs`): allocated large anonymous folios (THPs of
/// any size), each once, none in the swap cache.
fn check_split_queue(st: &KState) -> Result<(), String> {
    let q = &st.thp.split_queue;
    for (i, &head) in q.iter().enumerate() {
        let f = &st.folios;
        let live = f.refcount(head) > 0 && !f.is_tail(head);
        if !live || !f.is_anon(head) || f.large(head).is_none() {
            return Err(format!("queued folio {head} is not a live anonymous THP"));
        }
        if f.test(head, pg::SWAPCACHE) || q[..i].contains(&head) {
            return Err(format!("queued folio {head} is in the swap cache or queued twice"));
        }
    }
    Ok(())
}

/// Runs every checker.
pub fn check_all(st: &KState, rule: CowReuse) -> Result<(), String> {
    check_selected(st, rule, &|_| true)
}

/// Runs the checker of the invariant `name` alone.
pub fn check_invariant(st: &KState, rule: CowReuse, name: &str) -> Result<(), String> {
    check_selected(st, rule, &|n| n == name)
}

/// Runs every checker but those of the invariants in `skip` (a scenario expects them violated).
pub fn check_all_but(st: &KState, rule: CowReuse, skip: &[String]) -> Result<(), String> {
    check_selected(st, rule, &|n| !skip.iter().any(|s| s == n))
}

/// The whole-system checkers after every step of a run: a step that wrote nothing since they
/// last found the state sound is not checked again (`Kernel::state_writes`; the checkers read
/// only the state).
#[derive(Debug)]
pub struct StepChecker {
    rule: CowReuse,
    sound_at: Option<u64>,
}

impl StepChecker {
    pub fn new(rule: CowReuse) -> StepChecker {
        StepChecker { rule, sound_at: None }
    }

    /// Runs every checker on `k`'s state unless it is the state last found sound.
    pub fn check(&mut self, k: &Kernel) -> Result<(), String> {
        let writes = k.state_writes();
        if self.sound_at != Some(writes) {
            check_all(&k.state(), self.rule)?;
            self.sound_at = Some(writes);
        }
        Ok(())
    }
}

fn check_selected(st: &KState, rule: CowReuse, want: &dyn Fn(&str) -> bool) -> Result<(), String> {
    let named =
        |name: &str, r: Result<(), String>| r.map_err(|m| format!("invariant `{name}`: {m}"));
    if want("frames_accounted") {
        named("frames_accounted", check_frames(st))?;
    }
    let (mut ptes, well_formed) = all_ptes(st);
    if want("page_tables_well_formed") {
        named("page_tables_well_formed", well_formed)?;
    }
    // hugetlb pages have their own checker (`hugetlb/check.rs`) and count in no RSS; a guard
    // marker maps nothing.
    ptes.retain(|m| {
        !m.pte.is_marker() && (!m.pte.is_present() || st.hugetlb.containing(m.pte.pfn()).is_none())
    });
    check_mappings(st, &ptes, rule, want)
        .map_err(|(name, m)| format!("invariant `{name}`: {m}"))?;
    for (name, checker) in CHECKERS {
        if want(name) {
            named(name, checker(st, &ptes))?;
        }
    }
    Ok(())
}

/// Each swap slot's count equals the swap PTEs and shmem page-cache entries holding it (no
/// shmem index holds both a folio and a swap entry); the swap cache agrees with the flags.
fn check_swap(st: &KState, ptes: &[Mapped]) -> Result<(), String> {
    let mut held: BTreeMap<u64, u64> = BTreeMap::new();
    for m in ptes.iter().filter(|m| m.pte.is_swap()) {
        *held.entry(m.pte.swap_entry().1).or_default() += 1;
    }
    for (_, i) in st.inodes.iter() {
        for (&index, &slot) in &i.mapping.swapped {
            if i.mapping.pages.get(&index).is_some() {
                return Err(format!("page {index} of {}: both a folio and a swap entry", i.path));
            }
            *held.entry(slot).or_default() += 1;
        }
    }
    for slot in 0..st.swap.high_water() {
        let counted = held.get(&slot).copied().unwrap_or(0);
        if u64::from(st.swap.count(slot)) != counted {
            return Err(format!(
                "swap slot {slot}: count {} but {counted} PTEs and shmem entries hold it",
                st.swap.count(slot)
            ));
        }
        if st.swap.has_cache(slot) != st.swap.cached(slot).is_some() {
            return Err(format!("swap slot {slot}: cache flag disagrees with the swap cache"));
        }
    }
    let mut cached = 0;
    for (slot, head) in st.swap.cache_iter() {
        // A THP's cluster: one entry per page, the folio's slot the first.
        let nr = st.folios.order(head).pages();
        let first = st.swap.slot_of(head).filter(|f| (*f..*f + nr).contains(&slot));
        if !st.folios.test(head, pg::SWAPCACHE) || first.is_none() {
            return Err(format!("swap-cache folio {head} of slot {slot} is not marked so"));
        }
        cached += 1;
    }
    if st.vmstat.get(VmStat::NrSwapcached) != cached {
        return Err(format!(
            "nr_swapcached is {}, the swap cache holds {cached}",
            st.vmstat.get(VmStat::NrSwapcached)
        ));
    }
    Ok(())
}

fn check_frames(st: &KState) -> Result<(), String> {
    let folio_pages: u64 = st
        .folios
        .heads()
        .filter(|&h| !st.folios.test(h, pg::RESERVED))
        .map(|h| st.folios.order(h).pages())
        .sum();
    let used = st.total_pages() - st.free_pages();
    let deposited: u64 =
        st.mms.iter().filter_map(|(_, m)| m.as_ref()).map(|m| m.deposited.len() as u64).sum();
    let tables = st.pt.live() + deposited;
    let zero = 1 + st.huge_zero_pfn.map_or(0, |_| crate::fs::daxfs::PMD_PAGES);
    if used != folio_pages + tables + zero {
        return Err(format!(
            "frame accounting: {used} frames in use, but {folio_pages} in folios + {tables} page tables + {zero} in zero pages"
        ));
    }
    let free = st.vmstat.get(VmStat::NrFreePages);
    if free != st.free_pages() {
        return Err(format!(
            "nr_free_pages is {free}, the buddy allocator has {}",
            st.free_pages()
        ));
    }
    let nr_pt = st.vmstat.get(VmStat::NrPageTablePages);
    if nr_pt != tables {
        return Err(format!("nr_page_table_pages is {nr_pt}, but {tables} page tables exist"));
    }
    Ok(())
}

/// What a checker that keeps several invariants found: the invariant and the message.
type Found = (&'static str, String);

/// Which invariant a check belongs to, and whether it is wanted: an unwanted check is skipped.
struct Want<'a>(&'a dyn Fn(&str) -> bool);

impl Want<'_> {
    /// `Err` naming `name` if `bad` and `name` is wanted.
    fn check(
        &self,
        name: &'static str,
        bad: bool,
        msg: impl FnOnce() -> String,
    ) -> Result<(), Found> {
        if bad && (self.0)(name) { Err((name, msg())) } else { Ok(()) }
    }
}

/// The page tables against the folios: special entries, mapcounts, rmap, exclusivity, then the
/// RSS and vmstat recounts (one pass keeps these invariants).
fn check_mappings(
    st: &KState,
    ptes: &[Mapped],
    rule: CowReuse,
    want: &dyn Fn(&str) -> bool,
) -> Result<(), Found> {
    let want = Want(want);
    let (mut mapcount, mut entire) = (Tally::default(), Tally::default());
    let mut rss: BTreeMap<(MmId, usize), u64> = BTreeMap::new();
    for m in ptes {
        if m.pte.is_swap() {
            *rss.entry((m.mm, MmCounter::SwapEnts as usize)).or_default() += 1;
            continue;
        }
        let Some(page) = vm_normal_page(m.pte) else {
            let pfn = m.pte.pfn();
            let zero = if m.huge { Some(pfn) == st.huge_zero_pfn } else { pfn == st.zero_pfn };
            want.check("special_entries_map_zero_or_pmem", !zero && !st.is_pmem_pfn(pfn), || {
                format!(
                    "special entry at {} of mm {} maps {pfn} (not a zero page or pmem)",
                    m.addr, m.mm
                )
            })?;
            continue;
        };
        let head = st.folios.head(page);
        if m.huge {
            check_file_pmd(st, m, head, &want, &mut entire, &mut rss)?;
            continue;
        }
        if st.buddy.is_free(page) || st.folios.refcount(head) == 0 {
            want.check("mapcount_matches_page_tables", true, || {
                format!("PTE at {} of mm {} maps free frame {page}", m.addr, m.mm)
            })?;
            continue;
        }
        mapcount.add(page);
        let counter = mm_counter(&st.folios, head);
        *rss.entry((m.mm, counter as usize)).or_default() += 1;
        let found = rmap_finds(st, page, head, m);
        want.check("rmap_finds_every_mapping", !found, || {
            format!(
                "page {page} mapped at {} of mm {} is not found by rmap ({:?})",
                m.addr,
                m.mm,
                st.folios.mapping(head)
            )
        })?;
        let shared_writable = rule.tracks_anon_exclusive()
            && m.pte.write()
            && st.folios.is_anon(head)
            && !st.folios.test(page, pg::ANON_EXCLUSIVE);
        want.check("writable_anon_is_exclusive", shared_writable, || {
            format!(
                "writable PTE at {} of mm {} maps anon page {page} that is not exclusive",
                m.addr, m.mm
            )
        })?;
    }
    let gauges = check_mapcounts(st, &mut mapcount.sorted(), &mut entire.sorted(), &want)?;
    if (want.0)("rss_recount") {
        check_rss(st, &rss).map_err(|m| ("rss_recount", m))?;
    }
    if (want.0)("mapped_vmstat_recount") {
        check_gauges(st, &gauges).map_err(|m| ("mapped_vmstat_recount", m))?;
    }
    Ok(())
}

/// The pages the walk found mapped, once per PTE (or PMD) mapping them: a list sorted once and
/// read in ascending page order, so the recount after every step is a merge rather than a map.
#[derive(Default)]
struct Tally {
    pages: Vec<Pfn>,
    /// How far `take` has read.
    at: usize,
}

impl Tally {
    fn add(&mut self, page: Pfn) {
        self.pages.push(page);
    }

    fn sorted(mut self) -> Tally {
        self.pages.sort_unstable();
        self
    }

    /// How many times `page` was added; pages must be asked in ascending order.
    fn take(&mut self, page: Pfn) -> u32 {
        while self.pages.get(self.at).is_some_and(|&p| p < page) {
            self.at += 1;
        }
        let start = self.at;
        while self.pages.get(self.at) == Some(&page) {
            self.at += 1;
        }
        u32::try_from(self.at - start).expect("mappings of one page fit u32")
    }
}

/// Each page's mapcount and each folio's entire mapcount against the PTEs and PMDs counted;
/// returns the recounts of the mapped vmstat gauges.
fn check_mapcounts(
    st: &KState,
    mapcount: &mut Tally,
    entire: &mut Tally,
    want: &Want<'_>,
) -> Result<[(VmStat, u64); 4], Found> {
    const NAME: &str = "mapcount_matches_page_tables";
    let mut file_mapped = 0u64;
    let mut anon_mapped = 0u64;
    let (mut pmd_mapped, mut anon_pmd_mapped) = (0u64, 0u64);
    for head in st.folios.heads() {
        let pmds = entire.take(head);
        want.check(NAME, st.folios.entire_mapcount(head) != pmds, || {
            format!(
                "folio {head}: entire mapcount {} but {pmds} PMDs map it",
                st.folios.entire_mapcount(head)
            )
        })?;
        if st.folios.is_anon(head) {
            anon_pmd_mapped += u64::from(pmds > 0);
        } else {
            pmd_mapped += u64::from(pmds > 0 && !st.folios.test(head, pg::SWAPBACKED));
        }
        for i in 0..st.folios.order(head).pages() {
            let page = head + i;
            let counted = mapcount.take(page);
            want.check(NAME, st.folios.page_mapcount(page) != counted, || {
                format!(
                    "page {page}: mapcount {} but {counted} PTEs map it",
                    st.folios.page_mapcount(page)
                )
            })?;
            if counted > 0 || pmds > 0 {
                if st.folios.is_anon(head) {
                    anon_mapped += 1;
                } else {
                    file_mapped += 1;
                }
            }
        }
    }
    Ok([
        (VmStat::NrAnonPages, anon_mapped),
        (VmStat::NrMapped, file_mapped),
        (VmStat::NrFilePmdmapped, pmd_mapped),
        (VmStat::NrAnonTransparentHugepages, anon_pmd_mapped),
    ])
}

/// Each mm's RSS counters equal their recount.
fn check_rss(st: &KState, rss: &BTreeMap<(MmId, usize), u64>) -> Result<(), String> {
    for (mm, m) in st.mms.iter() {
        let Some(m) = m else { continue };
        for c in
            [MmCounter::FilePages, MmCounter::AnonPages, MmCounter::SwapEnts, MmCounter::ShmemPages]
        {
            let counted = rss.get(&(mm, c as usize)).copied().unwrap_or(0);
            if m.rss(c) != counted {
                return Err(format!(
                    "mm {mm}: {c:?} counter {} but {counted} pages mapped",
                    m.rss(c)
                ));
            }
        }
    }
    Ok(())
}

/// Whether rmap finds the mapping `m` of `page` (of folio `head`), or `m` lies in the one place
/// the kernel's walk cannot look ([`KState::ksm_rmap_blind_spot`]).
fn rmap_finds(st: &KState, page: Pfn, head: Pfn, m: &Mapped) -> bool {
    st.rmap_reaches(page, m.mm, m.addr)
        || matches!(st.folios.mapping(head),
            Mapping::Ksm(node) if st.ksm_rmap_blind_spot(node, m.mm, m.addr))
}

/// Each vmstat gauge equals its recount.
fn check_gauges(st: &KState, recounts: &[(VmStat, u64)]) -> Result<(), String> {
    for &(key, counted) in recounts {
        if st.vmstat.get(key) != counted {
            return Err(format!(
                "{}: {} but {counted} pages are mapped",
                simcore::CounterKey::name(key),
                st.vmstat.get(key)
            ));
        }
    }
    Ok(())
}

/// A PMD leaf that is not special maps a whole PMD-sized page-cache folio from its head,
/// reachable through rmap at the PMD's address; it counts one entire mapping and 512 pages of
/// RSS.
fn check_file_pmd(
    st: &KState,
    m: &Mapped,
    head: Pfn,
    want: &Want<'_>,
    entire: &mut Tally,
    rss: &mut BTreeMap<(MmId, usize), u64>,
) -> Result<(), Found> {
    let page = m.pte.pfn();
    let what = || format!("huge PMD at {} of mm {} mapping {page}", m.addr, m.mm);
    if head != page
        || st.folios.refcount(head) == 0
        || st.folios.order(head) != simcore::Order::PMD
        || !matches!(st.folios.mapping(head), Mapping::File(_) | Mapping::Anon(_))
    {
        return want.check("mapcount_matches_page_tables", true, || {
            format!("{}: not the head of a cached or anonymous PMD-sized folio", what())
        });
    }
    let shared_writable =
        m.pte.write() && st.folios.is_anon(head) && !st.folios.test(head, pg::ANON_EXCLUSIVE);
    want.check("writable_anon_is_exclusive", shared_writable, || {
        format!("{}: writable but not exclusive", what())
    })?;
    let found = rmap_finds(st, head, head, m);
    want.check("rmap_finds_every_mapping", !found, || format!("{}: not found by rmap", what()))?;
    entire.add(head);
    let counter = mm_counter(&st.folios, head);
    *rss.entry((m.mm, counter as usize)).or_default() += st.folios.order(head).pages();
    Ok(())
}

fn check_refcounts(st: &KState) -> Result<(), String> {
    for head in st.folios.heads() {
        if st.folios.test(head, pg::RESERVED) {
            continue;
        }
        let nr = st.folios.order(head).pages() as u32;
        let cache = match st.folios.mapping(head) {
            Mapping::File(inode) => {
                let index = st.folio_index(head);
                if st.inodes[inode].mapping.pages.get(&index) != Some(&head) {
                    return Err(format!(
                        "folio {head} claims page {index} of {} but is not cached there",
                        st.inodes[inode].path
                    ));
                }
                nr
            }
            _ if st.folios.test(head, pg::SWAPCACHE) => nr,
            _ => 0,
        };
        let expected = cache
            + st.folios.folio_mapcount(head)
            + st.folios.extra_refs(head)
            + st.folios.pin_refs(head);
        if st.folios.refcount(head) != expected {
            return Err(format!(
                "folio {head}: refcount {} but {cache} cache + {} mappings + {} holders + {} for pins",
                st.folios.refcount(head),
                st.folios.folio_mapcount(head),
                st.folios.extra_refs(head),
                st.folios.pin_refs(head)
            ));
        }
    }
    Ok(())
}

fn check_page_cache(st: &KState) -> Result<(), String> {
    let (mut file_pages, mut shmem, mut dirty, mut thps) = (0u64, 0u64, 0u64, 0u64);
    // shmem THPs, and those of them PMD-mapped (`check_mappings` counts the other files').
    let (mut shmem_thps, mut shmem_pmd_mapped) = (0u64, 0u64);
    for (inode, i) in st.inodes.iter() {
        let mut n = 0;
        let (mut inode_thps, mut large) = (0, 0);
        for (&index, &head) in i.mapping.pages.iter() {
            if st.folios.mapping(head) != Mapping::File(inode) || st.folio_index(head) != index {
                return Err(format!(
                    "page {index} of {}: cached folio {head} points elsewhere",
                    i.path
                ));
            }
            let nr = st.folios.order(head).pages();
            n += nr;
            if st.folios.test(head, pg::DIRTY) {
                dirty += nr;
            }
            inode_thps += u64::from(st.counts_in_nr_thps(inode, head));
            thps += u64::from(st.is_file_thp(inode, head));
            if st.is_shmem_thp(inode, head) {
                shmem_thps += 1;
                shmem_pmd_mapped += u64::from(st.folios.entire_mapcount(head) > 0);
            }
            large += u64::from(nr > 1);
        }
        if n != i.mapping.nrpages {
            return Err(format!("{}: nrpages {} but {n} cached", i.path, i.mapping.nrpages));
        }
        if inode_thps + i.mapping.collapsing != i.mapping.nr_thps {
            return Err(format!(
                "{}: nr_thps {} but {inode_thps} cached and {} collapsing",
                i.path, i.mapping.nr_thps, i.mapping.collapsing
            ));
        }
        if large != i.mapping.nr_large {
            return Err(format!(
                "{}: nr_large {} but {large} large folios cached",
                i.path, i.mapping.nr_large
            ));
        }
        file_pages += n;
        if i.fs.swap_backed() {
            shmem += n;
        }
    }
    for (key, counted) in [
        (VmStat::NrFilePages, file_pages),
        (VmStat::NrShmem, shmem),
        (VmStat::NrDirty, dirty),
        (VmStat::NrFileHugepages, thps),
        (VmStat::NrShmemHugepages, shmem_thps),
        (VmStat::NrShmemPmdmapped, shmem_pmd_mapped),
    ] {
        if st.vmstat.get(key) != counted {
            return Err(format!(
                "{}: {} but {counted} counted",
                simcore::CounterKey::name(key),
                st.vmstat.get(key)
            ));
        }
    }
    Ok(())
}

/// Every folio flagged `PG_lru` is on exactly the list of its lruvec that its state names
/// (its generation under the multi-gen LRU, whose generations lie between `min_seq` and
/// `max_seq`), and each list's page count is right.
fn check_lruvecs(st: &KState) -> Result<(), String> {
    let mut on_lists = 0u64;
    for (memcg, m) in st.memcgs.iter() {
        for list in st.lruvec_all_lists(memcg) {
            let mut pages = 0;
            for head in st.folios.list_iter(list) {
                if !st.folios.test(head, pg::LRU)
                    || st.folio_memcg(head) != memcg
                    || st.folio_list_now(head) != list
                {
                    return Err(format!(
                        "folio {head} on list {list:?} of cgroup {} has flags {:?}, generation {:?}, cgroup {}",
                        m.path,
                        crate::folio::flag_names(st.folios.meta(head).flags),
                        st.folios.lru_gen(head),
                        st.folio_memcg(head)
                    ));
                }
                if st.lru.reclaim.lru_gen_enabled() != st.folios.lru_gen(head).is_some()
                    && st.folio_lru_list(head) != LruList::Unevictable
                {
                    return Err(format!("folio {head} is on the wrong kind of LRU list"));
                }
                pages += st.folios.order(head).pages();
            }
            if pages != st.folios.list_pages(list) {
                return Err(format!(
                    "list {list:?}: {} pages counted, {pages} on the list",
                    st.folios.list_pages(list)
                ));
            }
            on_lists += pages;
        }
        let g = &m.lruvec.lrugen;
        for file in [false, true] {
            let min = g.min_seq[usize::from(file)];
            let nr = g.max_seq - min + 1;
            if !(2..=u64::from(crate::types::mmzone::MAX_NR_GENS)).contains(&nr) {
                return Err(format!("cgroup {}: {nr} generations of type {file}", m.path));
            }
            for generation in 0..crate::types::mmzone::MAX_NR_GENS {
                let live = (min..=g.max_seq).any(|s| g.gen_of(s) == generation);
                let list = crate::memcontrol::lruvec_gen_list(memcg, generation, file);
                if !live && st.folios.list_pages(list) > 0 {
                    return Err(format!(
                        "cgroup {}: generation {generation} outside [{min}, {}] holds folios",
                        m.path, g.max_seq
                    ));
                }
            }
        }
    }
    let flagged: u64 = st
        .folios
        .heads()
        .filter(|&h| !st.folios.test(h, pg::RESERVED) && st.folios.test(h, pg::LRU))
        .map(|h| st.folios.order(h).pages())
        .sum();
    if flagged != on_lists {
        return Err(format!("{flagged} pages flagged PG_lru, {on_lists} on LRU lists"));
    }
    Ok(())
}

/// Each cgroup's charge equals the pages of the folios charged to it and its descendants.
fn check_memcg_charges(st: &KState) -> Result<(), String> {
    let mut charged: BTreeMap<u32, u64> = BTreeMap::new();
    for head in st.folios.heads().filter(|&h| !st.folios.test(h, pg::RESERVED)) {
        for a in st.memcg_ancestors(st.folio_memcg(head)) {
            *charged.entry(a.0).or_default() += st.folios.order(head).pages();
        }
    }
    for (memcg, m) in st.memcgs.iter() {
        let counted = charged.get(&memcg.0).copied().unwrap_or(0);
        if memcg != crate::memcontrol::ROOT_MEMCG && m.usage != counted {
            return Err(format!(
                "cgroup {}: memory.current {} pages, {counted} charged",
                m.path, m.usage
            ));
        }
    }
    Ok(())
}

/// A shadow entry sits only where no folio is: a page-cache index with no cached folio, or an
/// allocated swap slot with no swap-cache folio; and the shrinker's counts are right. (Not "only
/// below the end of the file": readahead sized its window from an `i_size` read before a racing
/// truncation, in every era, so its pages, and the shadows reclaim leaves of them, may lie past
/// the new end until the next truncation covering them — `do_page_cache_ra`, mm/readahead.c.)
fn check_shadows(st: &KState) -> Result<(), String> {
    let mut per_memcg: BTreeMap<u32, u64> = BTreeMap::new();
    for (slot, shadow) in st.shadows() {
        *per_memcg.entry(shadow.memcg.0).or_default() += 1;
        match slot {
            ShadowSlot::PageCache(inode, index) => {
                if st.page_cache_get(inode, index).is_some() {
                    return Err(format!(
                        "page {index} of {} has both a folio and a shadow entry",
                        st.inodes[inode].path
                    ));
                }
            }
            ShadowSlot::Swap(s) => {
                if st.swap.cached(s).is_some() || st.swap.count(s) == 0 {
                    return Err(format!("swap slot {s}: shadow entry on a cached or free slot"));
                }
            }
        }
    }
    for (memcg, _) in st.memcgs.iter() {
        let counted = per_memcg.get(&memcg.0).copied().unwrap_or(0);
        if st.workingset.count(memcg) != counted {
            return Err(format!(
                "cgroup {memcg}: {} shadows counted, {counted} exist",
                st.workingset.count(memcg)
            ));
        }
    }
    Ok(())
}

/// The zero page and the huge zero page are never written and hold no references.
fn check_zero_frames(st: &KState) -> Result<(), String> {
    let zero_frames = std::iter::once(st.zero_pfn).chain(
        st.huge_zero_pfn
            .into_iter()
            .flat_map(|h| (0..crate::fs::daxfs::PMD_PAGES).map(move |i| h + i)),
    );
    for pfn in zero_frames {
        if st.mem.get(pfn.0).is_some() {
            return Err(format!("zero page frame {pfn} was written"));
        }
        if st.folios.refcount(pfn) != 0 || st.folios.page_mapcount(pfn) != 0 {
            return Err(format!("zero page frame {pfn} has references or an rmap count"));
        }
    }
    Ok(())
}

/// Every PTE or PMD to persistent memory lies in a DAX VMA, maps the file's own blocks, and
/// agrees with the file's DAX entry.
fn check_pmem_ptes(st: &KState, ptes: &[Mapped]) -> Result<(), String> {
    for m in ptes.iter().filter(|m| m.pte.is_present() && st.is_pmem_pfn(m.pte.pfn())) {
        let vma = st.find_vma(m.mm, m.addr).filter(|&v| st.vma_is_dax(v)).ok_or_else(|| {
            format!(
                "pmem frame {} mapped at {} of mm {} outside a DAX VMA",
                m.pte.pfn(),
                m.addr,
                m.mm
            )
        })?;
        let v = st.vma(vma);
        let inode = st.file(v.file.expect("DAX VMAs map files")).inode;
        let index = v.page_index(m.addr);
        let pages = if m.huge { crate::fs::daxfs::PMD_PAGES } else { 1 };
        if m.huge && m.addr + simcore::Bytes::PMD > v.end {
            return Err(format!("huge PMD at {} of mm {} crosses its VMA's end", m.addr, m.mm));
        }
        for k in 0..pages {
            if st.dax.written_pfn(inode, index + k) != Some(m.pte.pfn() + k) {
                return Err(format!(
                    "{} maps pmem frame {} at {} of mm {}, but page {} of the file is not that block",
                    st.inodes[inode].path,
                    m.pte.pfn() + k,
                    m.addr,
                    m.mm,
                    index + k
                ));
            }
        }
        if let Some((start, e)) = st.dax_entry(inode, index) {
            let ok = match e.kind {
                crate::types::fs::EntryKind::Empty => true,
                crate::types::fs::EntryKind::Zero => false,
                crate::types::fs::EntryKind::Block(pfn) => pfn + (index - start) == m.pte.pfn(),
            };
            if !ok {
                return Err(format!(
                    "{} page {index} is mapped to pmem frame {} at {} of mm {}, but its DAX entry is {e:?}",
                    st.inodes[inode].path,
                    m.pte.pfn(),
                    m.addr,
                    m.mm
                ));
            }
        }
    }
    Ok(())
}

/// DAX entries do not overlap, sit where no hole page is, and map the file's blocks; every
/// allocated block has one owner and the device's count agrees.
fn check_dax_entries(st: &KState) -> Result<(), String> {
    let mut allocated = 0u64;
    let mut owners: BTreeMap<u64, (crate::types::ids::InodeId, u64)> = BTreeMap::new();
    for (&inode, d) in &st.dax.inodes {
        let path = &st.inodes[inode].path;
        let mut covered_to = 0u64;
        for (&start, e) in &d.entries {
            if start < covered_to || (e.pmd && start % crate::fs::daxfs::PMD_PAGES != 0) {
                return Err(format!("{path}: DAX entry at {start} overlaps or is misaligned"));
            }
            covered_to = start + e.pages();
            if let Some(page) = (start..covered_to).find(|&i| st.page_cache_get(inode, i).is_some())
            {
                return Err(format!("{path}: page {page} has both a hole page and a DAX entry"));
            }
            if let crate::types::fs::EntryKind::Block(pfn) = e.kind
                && (0..e.pages()).any(|k| st.dax.written_pfn(inode, start + k) != Some(pfn + k))
            {
                return Err(format!(
                    "{path}: DAX entry at {start} maps {pfn}, not the file's blocks"
                ));
            }
        }
        for (&index, b) in &d.blocks {
            allocated += 1;
            if st.dax.device().is_free(b.block) {
                return Err(format!("{path}: page {index} uses free block {}", b.block));
            }
            if let Some((other, i)) = owners.insert(b.block, (inode, index)) {
                return Err(format!(
                    "block {} belongs to page {index} of {path} and page {i} of {}",
                    b.block, st.inodes[other].path
                ));
            }
        }
    }
    if let Some(d) = &st.dax.device
        && d.nr_blocks - d.nr_free() != allocated
    {
        return Err(format!(
            "the pmem device has {} blocks allocated, the files {allocated}",
            d.nr_blocks - d.nr_free()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::machine::{Machine, MachineConfig};
    use crate::{KernelVersion, Profile};

    /// A broken refcount is reported under its invariant's name, by itself and by
    /// `check_all`; the other invariants still hold, and skipping it passes.
    #[test]
    fn a_violation_names_its_invariant() {
        let config = MachineConfig::new(Profile::named("tiny").unwrap(), KernelVersion::DEFAULT);
        let m = Machine::new(config).unwrap();
        let rule = m.config().switches.cow_reuse;
        let mut st = m.kernel().state_mut();
        let head = st.alloc_folio(simcore::Order(0)).unwrap();
        st.folios.get(head, 1);
        let err = check_invariant(&st, rule, "refcount_covers_references").unwrap_err();
        assert!(err.starts_with("invariant `refcount_covers_references`: folio"), "{err}");
        assert!(check_all(&st, rule).unwrap_err().contains("refcount_covers_references"));
        assert!(check_invariant(&st, rule, "rss_recount").is_ok());
        assert!(check_all_but(&st, rule, &["refcount_covers_references".into()]).is_ok());
        assert!(
            INVARIANTS.iter().all(|i| i.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        );
    }
}
