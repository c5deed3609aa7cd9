//! Translation lookaside buffers, paging-structure caches and the hardware page walk: the MMU's
//! side of address translation (Intel SDM Vol. 3A §4.10 "Caching Translation Information";
//! AMD64 APM Vol. 2 §5.5; Arm Cortex-A76 TRM, chapter A5), with the kernel's per-CPU ASID
//! management from `arch/x86/mm/tlb.c` (Linux v6.8).
//!
//! Each CPU has a two-level hierarchy configured by the machine profile ([`TlbGeometry`]):
//! first-level instruction and data TLBs made of arrays that each hold some page sizes (Intel
//! keeps one array per size, AMD and the Cortex-A76 one array for all), a second level that is
//! either unified or split into an instruction and a data side, and three paging-structure
//! caches that remember the upper-level entries of recent walks (PGD, PUD and PMD entries: the
//! PML4E, PDPTE and PDE caches of the SDM). Arrays are set-associative with true LRU or bit-PLRU
//! replacement; every entry carries an ASID tag.
//!
//! A lookup that misses both levels walks the simulated page tables, starting below the deepest
//! level that hits in the walk caches, so a walk reads one to four entries. A present PMD leaf
//! gives a 2 MiB entry, a PUD leaf a 1 GiB one; a level that holds no array for a page size
//! keeps the 4 KiB piece instead (AMD "smashes" 1 GiB pages this way). The walk sets the accessed
//! bit, and the dirty and soft-dirty bits for a store, as x86 hardware does; a store that hits an
//! entry whose dirty bit is clear sets the PTE's dirty bit too. A walk that ends at a missing or
//! forbidding entry fills nothing and is a page fault; a hit whose rights forbid the access
//! drops that address's entries first (hardware does so on every page fault).
//!
//! ASIDs follow Linux on x86 (`choose_new_asid`): each CPU holds a few ASID slots
//! (`TLB_NR_DYN_ASIDS` = 6), handed round-robin to the mms that run there. Every flush bumps the
//! mm's TLB generation (`mm->context.tlb_gen`); a CPU that has the mm loaded is flushed at once
//! (by IPI when remote, see `tlbflush.rs`), a CPU that only keeps an ASID slot for it flushes that
//! ASID when it switches back with an older generation. `invlpg` also drops the walk-cache
//! entries of the ASID (SDM: INVLPG invalidates all paging-structure-cache entries of the current
//! PCID), and freeing page tables drops them everywhere (the kernel's `freed_tables` flush).
//!
//! Checkers ([`KState::check_tlb`]): no entry of an up-to-date ASID maps a free frame, at any step
//! (the kernel frees pages only after the flush, `mm/mmu_gather.c`); and, where no flush can be
//! in flight (the end of a run, between replayed references), every such entry agrees with the
//! page tables: same frame and page size, no write, execute or dirty right the PTE lacks.
//!
//! Approximations: one lookup per reference (no fetch blocks, no split loads beyond what the
//! caller asks); no prefetching of translations, no speculative walks, no accessed-bit-only walks;
//! a hit sets no accessed bit (x86's `ptep_clear_flush_young` does not flush either); walk
//! latency is a fixed cost per entry read, without modelling the data caches that hold the tables;
//! ASIDs and the deferred flush are Linux x86's on every profile (arm64's global ASID allocator
//! rarely flushes on a switch, which a large slot count stands for). The hot path (a hit) is
//! synchronous; only faults enter the async mechanisms.

use crate::fault::Access;
use crate::kernel::KState;
use crate::mm_struct::MmId;
use crate::pgtable::{Level, PageTables, PtId, Pte, Upper};
use simcore::{Pfn, SimDuration, VirtAddr};

/// log2 of the span one entry covers, by span code: 4 KiB, 2 MiB and 1 GiB pages (TLB entries)
/// and the 512 GiB of a PGD entry (walk-cache entries use codes 1 to 3).
const SPAN_SHIFTS: [u32; 4] = [12, 21, 30, 39];

/// A page size a TLB array may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PageSize {
    Size4K = 0,
    Size2M = 1,
    Size1G = 2,
}

impl PageSize {
    pub fn shift(self) -> u32 {
        SPAN_SHIFTS[self as usize]
    }

    pub fn name(self) -> &'static str {
        ["4K", "2M", "1G"][self as usize]
    }

    fn of_level(level: Level) -> PageSize {
        match level {
            Level::Pte => PageSize::Size4K,
            Level::Pmd => PageSize::Size2M,
            Level::Pud | Level::Pgd => PageSize::Size1G,
        }
    }
}

/// Page-size sets for [`ArrayGeometry::sizes`].
pub mod sizes {
    pub const K4: u8 = 1 << 0;
    pub const M2: u8 = 1 << 1;
    pub const G1: u8 = 1 << 2;
    pub const ALL: u8 = K4 | M2 | G1;
}

/// How an array picks its victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// True least-recently-used within the set.
    Lru,
    /// One MRU bit per entry; the first entry with a clear bit is the victim, and when a touch
    /// would set every bit of the set the others are cleared (bit-PLRU).
    BitPlru,
}

/// One set-associative array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayGeometry {
    pub entries: u32,
    /// Ways per set; `ways == entries` is fully associative.
    pub ways: u32,
    /// The page sizes held ([`sizes`]); unused for walk caches.
    pub sizes: u8,
    pub replacement: Replacement,
}

impl ArrayGeometry {
    /// An LRU array.
    pub const fn new(entries: u32, ways: u32, sizes: u8) -> ArrayGeometry {
        ArrayGeometry { entries, ways, sizes, replacement: Replacement::Lru }
    }

    /// A fully associative LRU array.
    pub const fn full(entries: u32, sizes: u8) -> ArrayGeometry {
        ArrayGeometry::new(entries, entries, sizes)
    }

    pub const fn plru(self) -> ArrayGeometry {
        ArrayGeometry { replacement: Replacement::BitPlru, ..self }
    }

    fn validate(&self, what: &str) -> Result<(), String> {
        let sets = self.entries.checked_div(self.ways).unwrap_or(0);
        if self.entries == 0 || sets == 0 || sets * self.ways != self.entries {
            return Err(format!(
                "{what}: {} entries do not divide into {}-way sets",
                self.entries, self.ways
            ));
        }
        if !sets.is_power_of_two() {
            return Err(format!("{what}: {sets} sets is not a power of two"));
        }
        if self.ways > 1 << WAY_BITS {
            return Err(format!("{what}: {} ways (at most {})", self.ways, 1 << WAY_BITS));
        }
        Ok(())
    }
}

/// The second translation level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecondLevel {
    /// One STLB for instructions and data (Intel, Cortex-A76).
    Unified(Vec<ArrayGeometry>),
    /// Separate L2 instruction and data TLBs (AMD Zen).
    Split { instr: Vec<ArrayGeometry>, data: Vec<ArrayGeometry> },
}

/// The translation hardware of one CPU, as a machine profile describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlbGeometry {
    /// The core it follows ("AMD Zen 5").
    pub core: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
    pub itlb: Vec<ArrayGeometry>,
    pub dtlb: Vec<ArrayGeometry>,
    pub l2: SecondLevel,
    /// Walk caches for PGD, PUD and PMD entries (the PML4E, PDPTE and PDE caches).
    pub pwc: [ArrayGeometry; 3],
    /// ASID slots per CPU the kernel uses.
    pub asid_slots: u32,
    pub clock_mhz: u32,
    /// Extra latency of a first-level miss that hits the second level.
    pub l2_hit_cycles: u32,
    /// Latency of each page-table entry a walk reads.
    pub walk_ref_cycles: u32,
}

impl TlbGeometry {
    /// Checks that every array is realisable.
    pub fn validate(&self) -> Result<(), String> {
        let (l2i, l2d) = self.l2_sides();
        for (what, arrays) in
            [("itlb", &self.itlb), ("dtlb", &self.dtlb), ("l2 itlb", l2i), ("l2 dtlb", l2d)]
        {
            for a in arrays {
                a.validate(what)?;
            }
        }
        for a in &self.pwc {
            a.validate("walk cache")?;
        }
        if self.asid_slots == 0 || self.asid_slots > 4096 || self.clock_mhz == 0 {
            return Err("a TLB needs 1 to 4096 ASID slots and a clock".into());
        }
        Ok(())
    }

    fn l2_sides(&self) -> (&Vec<ArrayGeometry>, &Vec<ArrayGeometry>) {
        match &self.l2 {
            SecondLevel::Unified(a) => (a, a),
            SecondLevel::Split { instr, data } => (instr, data),
        }
    }

    /// Cycles as virtual time (rounded down; callers carry the remainder).
    fn cycles_to_ns(&self, cycles: u64) -> u64 {
        cycles * 1000 / u64::from(self.clock_mhz)
    }
}

simcore::counter_keys! {
    /// Per-CPU translation events, named as `perf stat` names them where it has a name.
    pub enum TlbEvent {
        /// Instruction fetches translated: one per retired fetch (a faulting attempt counts at
        /// its retry).
        ItlbLoads = "iTLB-loads",
        /// Instruction fetches that missed the first level.
        ItlbLoadMisses = "iTLB-load-misses",
        /// Loads translated: one per retired load.
        DtlbLoads = "dTLB-loads",
        /// Loads that missed the first level.
        DtlbLoadMisses = "dTLB-load-misses",
        /// Stores translated: one per retired store.
        DtlbStores = "dTLB-stores",
        /// Stores that missed the first level.
        DtlbStoreMisses = "dTLB-store-misses",
        /// First-level misses that missed the second level and walked (successfully or not).
        ItlbWalks = "itlb_walks",
        DtlbWalks = "dtlb_walks",
        /// Cycles spent walking.
        WalkCycles = "walk_cycles",
        /// Page-table entries read by walks.
        WalkRefs = "walk_refs",
        /// Walks that started below the PGD thanks to a walk-cache hit.
        WalkCacheHits = "walk_cache_hits",
        /// Stores that hit an entry whose dirty bit was clear and set it in the PTE.
        DirtyAssists = "dirty_assists",
        /// Whole-ASID flushes: more than the single-page ceiling, a new ASID, or a switch back
        /// to an mm whose generation moved on.
        AsidFlushes = "asid_flushes",
        /// Pages invalidated one by one (`invlpg`).
        PageFlushes = "page_flushes",
        /// Shootdown IPIs this CPU handled.
        ShootdownsReceived = "shootdowns_received",
    }
}

/// Translation event counters.
pub type TlbStats = simcore::Counters<TlbEvent>;

/// Entry data bits below the pfn.
mod bits {
    pub(super) const WRITE: u64 = 1 << 0;
    pub(super) const DIRTY: u64 = 1 << 1;
    pub(super) const EXEC: u64 = 1 << 2;
    pub(super) const PFN_SHIFT: u32 = 8;
}

const TAG_VALID: u64 = 1;
const TAG_ASID_SHIFT: u32 = 4;
const TAG_ASID_MASK: u64 = 0xfff << TAG_ASID_SHIFT;

fn tag(key: u64, span: usize, asid: u32) -> u64 {
    (key << 16) | (u64::from(asid) << TAG_ASID_SHIFT) | ((span as u64) << 1) | TAG_VALID
}

fn tag_asid(tag: u64) -> u32 {
    ((tag & TAG_ASID_MASK) >> TAG_ASID_SHIFT) as u32
}

fn tag_span(tag: u64) -> usize {
    ((tag >> 1) & 7) as usize
}

fn tag_va(tag: u64) -> VirtAddr {
    VirtAddr((tag >> 16) << SPAN_SHIFTS[tag_span(tag)])
}

/// Bits of a way number in a victim's rank key (at most 4096 ways; stamps stay below 2^52).
const WAY_BITS: u32 = 12;

/// Fully associative arrays at least this wide keep a [`Array::hint`] index.
const HINT_MIN_WAYS: usize = 32;

/// The hint bucket of tag `t` in an index of `1 << bits` buckets (Fibonacci hashing).
fn hint_bucket(t: u64, bits: u32) -> usize {
    (t.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// One array's state: tags, payloads and replacement state, set-major.
#[derive(Clone, Debug)]
struct Array {
    ways: usize,
    set_mask: u64,
    /// Span codes held, as bits.
    spans: u8,
    plru: bool,
    tags: Vec<u64>,
    data: Vec<u64>,
    /// LRU: last use; bit-PLRU: the MRU bit.
    stamps: Vec<u64>,
    clock: u64,
    /// The slot of the last hit or fill: touching it again changes no replacement state.
    last: usize,
    /// Valid entries per span code: a lookup skips the spans that hold none (most arrays that
    /// may hold 2 MiB and 1 GiB entries hold only 4 KiB ones).
    span_entries: [u32; 4],
    /// For wide fully associative arrays: the slot (plus one) last filled or found with a tag
    /// of each hash bucket. Only a hint, checked against the slot's tag: a stale or colliding
    /// bucket sends the lookup to the full scan, so it changes no result, only the time a hit
    /// takes (the hardware compares every way at once; a scan of 96 ways would not).
    hint: Box<[u16]>,
    hint_bits: u32,
}

impl Array {
    fn new(g: &ArrayGeometry, spans: u8) -> Array {
        let n = g.entries as usize;
        let hinted = g.ways == g.entries && n >= HINT_MIN_WAYS;
        // About four buckets per entry.
        let hint_bits = (n * 4).next_power_of_two().trailing_zeros();
        Array {
            ways: g.ways as usize,
            set_mask: u64::from(g.entries / g.ways - 1),
            spans,
            plru: g.replacement == Replacement::BitPlru,
            tags: vec![0; n],
            data: vec![0; n],
            stamps: vec![0; n],
            clock: 0,
            last: 0,
            span_entries: [0; 4],
            hint: vec![0; if hinted { 1 << hint_bits } else { 0 }].into_boxed_slice(),
            hint_bits,
        }
    }

    /// The slot the hint index gives for `t`, if it holds `t`.
    #[inline]
    fn hinted(&self, t: u64) -> Option<usize> {
        if self.hint.is_empty() {
            return None;
        }
        let slot = usize::from(self.hint[hint_bucket(t, self.hint_bits)]).checked_sub(1)?;
        (self.tags[slot] == t).then_some(slot)
    }

    fn set_hint(&mut self, t: u64, slot: usize) {
        if !self.hint.is_empty() {
            self.hint[hint_bucket(t, self.hint_bits)] = (slot + 1) as u16;
        }
    }

    fn holds(&self, span: usize) -> bool {
        self.spans & (1 << span) != 0
    }

    fn set_of(&self, key: u64) -> usize {
        (key & self.set_mask) as usize * self.ways
    }

    /// The slot holding `va` (at any held span) for `asid`, touched.
    #[inline]
    fn lookup(&mut self, va: u64, asid: u32) -> Option<usize> {
        let mut spans = self.spans;
        while spans != 0 {
            let span = spans.trailing_zeros() as usize;
            spans &= spans - 1;
            if self.span_entries[span] == 0 {
                continue;
            }
            let key = va >> SPAN_SHIFTS[span];
            let t = tag(key, span, asid);
            if self.tags[self.last] == t {
                return Some(self.last);
            }
            if let Some(slot) = self.hinted(t) {
                self.touch(slot);
                return Some(slot);
            }
            let base = self.set_of(key);
            let set = &self.tags[base..base + self.ways];
            // Most scans miss: a pass without an early exit (vector compares) tells first.
            if !set.iter().fold(false, |any, &x| any | (x == t)) {
                continue;
            }
            if let Some(w) = set.iter().position(|&x| x == t) {
                self.set_hint(t, base + w);
                self.touch(base + w);
                return Some(base + w);
            }
        }
        None
    }

    fn touch(&mut self, slot: usize) {
        self.last = slot;
        if !self.plru {
            self.clock += 1;
            debug_assert!(self.clock < 1 << (64 - WAY_BITS), "LRU stamps outgrew the rank key");
            self.stamps[slot] = self.clock;
            return;
        }
        self.stamps[slot] = 1;
        let base = slot - slot % self.ways;
        let set = &mut self.stamps[base..base + self.ways];
        if set.iter().all(|&b| b == 1) {
            set.fill(0);
            self.stamps[slot] = 1;
        }
    }

    /// Installs `va`'s entry of span `span`, which the array does not hold (every caller fills
    /// after a lookup of it missed), in an invalid way or over the victim.
    fn fill(&mut self, va: u64, span: usize, asid: u32, data: u64) {
        debug_assert!(self.holds(span));
        let key = va >> SPAN_SHIFTS[span];
        let t = tag(key, span, asid);
        let base = self.set_of(key);
        // The first empty way, else the victim (bit-PLRU: the first way whose MRU bit is clear,
        // or way 0; LRU: the oldest stamp). That is the first way of least rank, empty ways
        // ranking 0 and valid ones 1 + their MRU bit or their stamp (at least 1): one
        // branch-free pass taking the minimum of rank and way.
        let (tags, stamps) =
            (&self.tags[base..base + self.ways], &self.stamps[base..base + self.ways]);
        debug_assert!(!tags.contains(&t), "filling {t:#x}, which the array holds");
        let plru = u64::from(self.plru);
        let ranked = tags.iter().zip(stamps).enumerate().map(|(w, (&x, &s))| {
            let rank = if x == 0 { 0 } else { s + plru };
            (rank << WAY_BITS) | w as u64
        });
        let way = (ranked.min().unwrap_or(0) & ((1 << WAY_BITS) - 1)) as usize;
        let old = self.tags[base + way];
        if old != 0 {
            self.span_entries[tag_span(old)] -= 1;
        }
        self.span_entries[span] += 1;
        self.tags[base + way] = t;
        self.data[base + way] = data;
        self.set_hint(t, base + way);
        self.touch(base + way);
    }

    /// Drops the entries of `asid` that cover `va`.
    fn invalidate_va(&mut self, va: u64, asid: u32) {
        for (span, shift) in SPAN_SHIFTS.iter().enumerate() {
            if !self.holds(span) || self.span_entries[span] == 0 {
                continue;
            }
            let key = va >> shift;
            let t = tag(key, span, asid);
            let base = self.set_of(key);
            for x in &mut self.tags[base..base + self.ways] {
                if *x == t {
                    *x = 0;
                    self.span_entries[span] -= 1;
                }
            }
        }
    }

    fn invalidate_asid(&mut self, asid: u32) {
        for x in &mut self.tags {
            if *x != 0 && tag_asid(*x) == asid {
                self.span_entries[tag_span(*x)] -= 1;
                *x = 0;
            }
        }
    }

    fn valid(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.tags.iter().zip(&self.data).filter(|(t, _)| **t != 0).map(|(&t, &d)| (t, d))
    }
}

/// Which mm an ASID slot holds, and the TLB generation it has caught up with.
#[derive(Clone, Copy, Debug, Default)]
struct AsidSlot {
    mm: Option<MmId>,
    tlb_gen: u64,
}

/// One CPU's translation hardware.
#[derive(Clone, Debug)]
pub struct CpuTlb {
    itlb: Vec<Array>,
    dtlb: Vec<Array>,
    /// The second level; for a unified one, `l2i` is empty and instruction misses use `l2d`.
    l2i: Vec<Array>,
    l2d: Vec<Array>,
    /// PGD, PUD and PMD entry caches (span codes 3, 2, 1).
    pwc: [Array; 3],
    slots: Vec<AsidSlot>,
    next_slot: usize,
    /// The mm whose page tables the CPU uses now, and its ASID slot.
    loaded: Option<(MmId, u32)>,
    pub stats: TlbStats,
    /// Walk and second-level cycles not yet charged.
    pending_cycles: u64,
    /// Time taken by shootdown handlers and ASID flushes, charged to the next access here.
    stolen: SimDuration,
}

fn arrays(gs: &[ArrayGeometry]) -> Vec<Array> {
    gs.iter().map(|g| Array::new(g, g.sizes)).collect()
}

impl CpuTlb {
    fn new(g: &TlbGeometry) -> CpuTlb {
        let (l2i, l2d) = match &g.l2 {
            SecondLevel::Unified(a) => (Vec::new(), arrays(a)),
            SecondLevel::Split { instr, data } => (arrays(instr), arrays(data)),
        };
        CpuTlb {
            itlb: arrays(&g.itlb),
            dtlb: arrays(&g.dtlb),
            l2i,
            l2d,
            pwc: [
                Array::new(&g.pwc[0], 1 << 3),
                Array::new(&g.pwc[1], 1 << 2),
                Array::new(&g.pwc[2], 1 << 1),
            ],
            slots: vec![AsidSlot::default(); g.asid_slots as usize],
            next_slot: 0,
            loaded: None,
            stats: TlbStats::new(),
            pending_cycles: 0,
            stolen: SimDuration::ZERO,
        }
    }

    fn all_arrays(&mut self) -> impl Iterator<Item = &mut Array> {
        self.itlb.iter_mut().chain(&mut self.dtlb).chain(&mut self.l2i).chain(&mut self.l2d)
    }

    fn flush_asid(&mut self, asid: u32) {
        for a in self.all_arrays() {
            a.invalidate_asid(asid);
        }
        for a in &mut self.pwc {
            a.invalidate_asid(asid);
        }
        self.stats.inc(TlbEvent::AsidFlushes);
    }

    fn flush_va(&mut self, va: VirtAddr, asid: u32) {
        for a in self.all_arrays() {
            a.invalidate_va(va.0, asid);
        }
    }

    fn flush_walk_caches(&mut self, asid: u32) {
        for a in &mut self.pwc {
            a.invalidate_asid(asid);
        }
    }

    fn slot_of(&self, mm: MmId) -> Option<u32> {
        self.slots.iter().position(|s| s.mm == Some(mm)).map(|i| i as u32)
    }

    /// Fills `va`'s entry at the deepest span the arrays of one level hold, down from `span`.
    fn fill_level(level: &mut [Array], va: u64, span: usize, asid: u32, data: u64) {
        for s in (0..=span).rev() {
            if let Some(a) = level.iter_mut().find(|a| a.holds(s)) {
                let within = (va >> 12) & ((1u64 << (SPAN_SHIFTS[span] - 12)) - 1);
                let offset = within & !((1u64 << (SPAN_SHIFTS[s] - 12)) - 1);
                a.fill(va, s, asid, data + (offset << bits::PFN_SHIFT));
                return;
            }
        }
    }
}

/// The translation hardware of every CPU, and each mm's TLB generation.
#[derive(Clone, Debug)]
pub struct Tlbs {
    pub geometry: TlbGeometry,
    cpus: Vec<CpuTlb>,
    /// `mm->context.tlb_gen`, by mm id.
    tlb_gens: Vec<u64>,
    /// What flushing a whole ASID costs (charged when a switch finds it out of date).
    flush_all: SimDuration,
}

/// What a flush asks one CPU to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushKind {
    /// `invlpg` each page of the range.
    Pages,
    /// Flush the whole ASID.
    Full,
}

impl Tlbs {
    pub fn new(geometry: &TlbGeometry, cpus: u32, flush_all: SimDuration) -> Tlbs {
        let cpu = CpuTlb::new(geometry);
        Tlbs {
            geometry: geometry.clone(),
            cpus: vec![cpu; cpus as usize],
            tlb_gens: Vec::new(),
            flush_all,
        }
    }

    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }

    /// The event counters of `cpu`.
    pub fn stats(&self, cpu: usize) -> &TlbStats {
        &self.cpus[cpu].stats
    }

    /// The counters summed over every CPU.
    pub fn total_stats(&self) -> TlbStats {
        let mut t = TlbStats::new();
        for c in &self.cpus {
            for &e in <TlbEvent as simcore::CounterKey>::ALL {
                t.add(e, c.stats.get(e));
            }
        }
        t
    }

    fn tlb_gen(&self, mm: MmId) -> u64 {
        self.tlb_gens.get(mm.0 as usize).copied().unwrap_or(0)
    }

    /// `switch_mm_irqs_off`: makes `mm` the CPU's loaded mm, choosing its ASID; returns the slot.
    fn switch_mm(&mut self, cpu: usize, mm: MmId) -> u32 {
        let tlb_gen = self.tlb_gen(mm);
        let flush_all = self.flush_all;
        let c = &mut self.cpus[cpu];
        let asid = match c.slot_of(mm) {
            Some(asid) => {
                if c.slots[asid as usize].tlb_gen != tlb_gen {
                    c.flush_asid(asid);
                    c.stolen += flush_all;
                }
                asid
            }
            None => {
                let asid = c.next_slot as u32;
                c.next_slot = (c.next_slot + 1) % c.slots.len();
                c.flush_asid(asid);
                asid
            }
        };
        c.slots[asid as usize] = AsidSlot { mm: Some(mm), tlb_gen };
        c.loaded = Some((mm, asid));
        asid
    }

    /// Starts a flush of `mm`: bumps its generation and returns the CPUs that have it loaded now
    /// (the initiator's CPU, if it has, comes out first).
    pub(crate) fn begin_flush(&mut self, mm: MmId, initiator: usize) -> Vec<usize> {
        let i = mm.0 as usize;
        if self.tlb_gens.len() <= i {
            self.tlb_gens.resize(i + 1, 0);
        }
        self.tlb_gens[i] += 1;
        let mut cpus: Vec<usize> = (0..self.cpus.len())
            .filter(|&c| self.cpus[c].loaded.is_some_and(|(m, _)| m == mm))
            .collect();
        cpus.sort_by_key(|&c| c != initiator);
        cpus
    }

    /// Flushes `[start, end)` of `mm` on `cpu`, which has it loaded, bringing its ASID up to date.
    pub(crate) fn flush_on(
        &mut self,
        cpu: usize,
        mm: MmId,
        start: VirtAddr,
        end: VirtAddr,
        kind: FlushKind,
    ) {
        let tlb_gen = self.tlb_gen(mm);
        let c = &mut self.cpus[cpu];
        let Some((loaded, asid)) = c.loaded else { return };
        debug_assert_eq!(loaded, mm);
        match kind {
            FlushKind::Full => c.flush_asid(asid),
            FlushKind::Pages => {
                let mut a = start;
                while a < end {
                    c.flush_va(a, asid);
                    c.stats.inc(TlbEvent::PageFlushes);
                    a = a + simcore::Bytes::PAGE;
                }
                c.flush_walk_caches(asid);
            }
        }
        c.slots[asid as usize].tlb_gen = tlb_gen;
    }

    /// Charges a shootdown handler's time to `cpu` (taken at its next access).
    pub(crate) fn steal(&mut self, cpu: usize, d: SimDuration) {
        let c = &mut self.cpus[cpu];
        c.stolen += d;
        c.stats.inc(TlbEvent::ShootdownsReceived);
    }

    /// Page tables of `mm` were freed: no walk cache may keep pointing at them.
    pub(crate) fn flush_walk_caches(&mut self, mm: MmId) {
        for c in &mut self.cpus {
            if let Some(asid) = c.slot_of(mm) {
                c.flush_walk_caches(asid);
            }
        }
    }

    /// Takes the virtual time `cpu` owes: walks, second-level hits, handlers.
    pub(crate) fn take_pending(&mut self, cpu: usize) -> SimDuration {
        let c = &mut self.cpus[cpu];
        let ns = self.geometry.cycles_to_ns(c.pending_cycles);
        let charged = ns * u64::from(self.geometry.clock_mhz) / 1000;
        c.pending_cycles -= charged.min(c.pending_cycles);
        SimDuration::from_ns(ns) + std::mem::replace(&mut c.stolen, SimDuration::ZERO)
    }
}

/// The result of the page walk.
struct Walked {
    data: u64,
    span: usize,
}

/// Reads the page tables for `va` below what the walk caches give, filling them; sets the
/// accessed (and for a store dirty) bits. `None` when the access must fault.
fn walk(
    pt: &mut PageTables,
    pgd: PtId,
    c: &mut CpuTlb,
    asid: u32,
    va: u64,
    access: Access,
    ref_cycles: u64,
) -> Option<Walked> {
    let addr = VirtAddr(va);
    let mut start = (pgd, Level::Pgd);
    for (i, level) in [(2, Level::Pte), (1, Level::Pmd), (0, Level::Pud)] {
        if let Some(slot) = c.pwc[i].lookup(va, asid) {
            start = (PtId(c.pwc[i].data[slot] as u32), level);
            c.stats.inc(TlbEvent::WalkCacheHits);
            break;
        }
    }
    let (mut table, mut level) = start;
    let mut refs = 0u64;
    let leaf = loop {
        refs += 1;
        let idx = level.index(addr);
        if level == Level::Pte {
            break Some((pt.pte(table, idx), table, idx, level));
        }
        match pt.upper(table, idx) {
            Upper::Table(next) => {
                let cache = match level {
                    Level::Pgd => 0,
                    Level::Pud => 1,
                    _ => 2,
                };
                let span = 3 - cache;
                c.pwc[cache].fill(va, span, asid, u64::from(next.0));
                table = next;
                level = level.below();
            }
            Upper::Leaf(e) => break Some((e, table, idx, level)),
            Upper::None => break None,
        }
    };
    let cycles = refs * ref_cycles;
    c.stats.add(TlbEvent::WalkRefs, refs);
    c.stats.add(TlbEvent::WalkCycles, cycles);
    c.pending_cycles += cycles;
    let (pte, table, idx, level) = leaf?;
    let allowed = pte.is_present()
        && pte.0 & Pte::USER != 0
        && (access != Access::Write || pte.write())
        && (access != Access::Exec || pte.0 & Pte::NX == 0);
    if !allowed {
        return None;
    }
    let set = if access.is_write() {
        Pte::ACCESSED | Pte::DIRTY | Pte::SOFT_DIRTY
    } else {
        Pte::ACCESSED
    };
    let updated = pte.with(set);
    // The accessed and dirty bits are written only when they change (hardware's locked update).
    if updated != pte {
        if level == Level::Pte {
            pt.set_pte(table, idx, updated);
        } else {
            pt.set_upper(table, idx, Upper::Leaf(updated));
        }
    }
    let pte = updated;
    Some(Walked { data: entry_data(pte), span: PageSize::of_level(level) as usize })
}

fn entry_data(pte: Pte) -> u64 {
    let mut d = pte.pfn().0 << bits::PFN_SHIFT;
    if pte.write() {
        d |= bits::WRITE;
    }
    if pte.dirty() {
        d |= bits::DIRTY;
    }
    if pte.0 & Pte::NX == 0 {
        d |= bits::EXEC;
    }
    d
}

/// Whether an entry's rights allow `access`.
fn permits(data: u64, access: Access) -> bool {
    match access {
        Access::Read => true,
        Access::Write => data & bits::WRITE != 0,
        Access::Exec => data & bits::EXEC != 0,
    }
}

/// The frame `va` reaches through an entry of span `span`.
fn frame(data: u64, span: usize, va: u64) -> Pfn {
    let offset = (va >> 12) & ((1 << (SPAN_SHIFTS[span] - 12)) - 1);
    Pfn((data >> bits::PFN_SHIFT) + offset)
}

impl KState {
    /// The MMU translating one user access of `mm` on `cpu`: the first-level TLB, the second
    /// level, then a walk. Returns the frame, or `None` when the access must fault (the caller
    /// runs the fault handler and retries). Synchronous: this is the replay hot path.
    ///
    /// The lookup is counted (`iTLB-loads`, `dTLB-loads`, `dTLB-stores`) only when the access
    /// translates, that is once per retired reference, as `mem_inst_retired.*` counts: an
    /// attempt that faults does not retire, its retry does. Misses and walks are counted as the
    /// hardware makes them, the faulting attempt's included.
    #[inline]
    pub(crate) fn mmu_translate(
        &mut self,
        cpu: usize,
        mm: MmId,
        addr: VirtAddr,
        access: Access,
    ) -> Option<Pfn> {
        let pfn = self.mmu_lookup(cpu, mm, addr, access)?;
        let retired = match access {
            Access::Exec => TlbEvent::ItlbLoads,
            Access::Read => TlbEvent::DtlbLoads,
            Access::Write => TlbEvent::DtlbStores,
        };
        self.tlb.cpus[cpu].stats.inc(retired);
        Some(pfn)
    }

    /// [`KState::mmu_translate`] without counting the retired reference.
    #[inline]
    fn mmu_lookup(&mut self, cpu: usize, mm: MmId, addr: VirtAddr, access: Access) -> Option<Pfn> {
        let asid = match self.tlb.cpus[cpu].loaded {
            Some((m, asid)) if m == mm => asid,
            _ => self.tlb.switch_mm(cpu, mm),
        };
        let va = addr.0;
        let g = &self.tlb.geometry;
        let (l2_hit, ref_cycles) = (u64::from(g.l2_hit_cycles), u64::from(g.walk_ref_cycles));
        let c = &mut self.tlb.cpus[cpu];
        let (misses, walks) = match access {
            Access::Exec => (TlbEvent::ItlbLoadMisses, TlbEvent::ItlbWalks),
            Access::Read => (TlbEvent::DtlbLoadMisses, TlbEvent::DtlbWalks),
            Access::Write => (TlbEvent::DtlbStoreMisses, TlbEvent::DtlbWalks),
        };
        let l1 = if access == Access::Exec { &mut c.itlb } else { &mut c.dtlb };
        let mut hit = None;
        for a in l1.iter_mut() {
            if let Some(slot) = a.lookup(va, asid) {
                hit = Some((a.data[slot], tag_span(a.tags[slot])));
                break;
            }
        }
        if hit.is_none() {
            c.stats.inc(misses);
            c.pending_cycles += l2_hit;
            let l2 =
                if access == Access::Exec && !c.l2i.is_empty() { &mut c.l2i } else { &mut c.l2d };
            let mut found = None;
            for a in l2.iter_mut() {
                if let Some(slot) = a.lookup(va, asid) {
                    found = Some((a.data[slot], tag_span(a.tags[slot])));
                    break;
                }
            }
            let (data, span) = match found {
                Some(f) => f,
                None => {
                    c.stats.inc(walks);
                    let pgd = self.mms[mm].as_deref().expect("translating for a freed mm").pgd;
                    let w = walk(&mut self.pt, pgd, c, asid, va, access, ref_cycles)?;
                    let l2 = if access == Access::Exec && !c.l2i.is_empty() {
                        &mut c.l2i
                    } else {
                        &mut c.l2d
                    };
                    CpuTlb::fill_level(l2, va, w.span, asid, w.data);
                    (w.data, w.span)
                }
            };
            let l1 = if access == Access::Exec { &mut c.itlb } else { &mut c.dtlb };
            CpuTlb::fill_level(l1, va, span, asid, data);
            hit = Some((data, span));
        }
        let (data, span) = hit.expect("translated");
        if !permits(data, access) {
            // A page fault drops the faulting address's entries; the retry walks again.
            c.flush_va(addr, asid);
            return None;
        }
        if access == Access::Write && data & bits::DIRTY == 0 {
            return self.dirty_assist(cpu, mm, addr, asid);
        }
        Some(frame(data, span, va))
    }

    /// A store hit an entry with a clear dirty bit: the CPU sets the PTE's dirty bit (re-reading
    /// it, so a PTE changed under the entry faults instead).
    fn dirty_assist(&mut self, cpu: usize, mm: MmId, addr: VirtAddr, asid: u32) -> Option<Pfn> {
        let c = &mut self.tlb.cpus[cpu];
        c.stats.inc(TlbEvent::DirtyAssists);
        c.flush_va(addr, asid);
        let pgd = self.mms[mm].as_deref().expect("translating for a freed mm").pgd;
        let ref_cycles = u64::from(self.tlb.geometry.walk_ref_cycles);
        let w = walk(&mut self.pt, pgd, c, asid, addr.0, Access::Write, ref_cycles)?;
        CpuTlb::fill_level(&mut c.l2d, addr.0, w.span, asid, w.data);
        CpuTlb::fill_level(&mut c.dtlb, addr.0, w.span, asid, w.data);
        Some(frame(w.data, w.span, addr.0))
    }

    /// Checks the TLBs against the rest of the state. Always: no entry of an up-to-date ASID maps
    /// a free frame. With `coherent` (only where no flush can be in flight): every such entry
    /// maps what the page tables map at its address, at the same page size, with no right the
    /// PTE lacks.
    pub fn check_tlb(&self, coherent: bool) -> Result<(), String> {
        for (n, c) in self.tlb.cpus.iter().enumerate() {
            for (asid, slot) in c.slots.iter().enumerate() {
                let Some(mm) = slot.mm else { continue };
                let Some(m) = self.mms.get(mm).and_then(|m| m.as_deref()) else { continue };
                if slot.tlb_gen != self.tlb.tlb_gen(mm) {
                    continue;
                }
                let entries = c.itlb.iter().chain(&c.dtlb).chain(&c.l2i).chain(&c.l2d);
                for (t, data) in entries.flat_map(Array::valid) {
                    if tag_asid(t) as usize != asid {
                        continue;
                    }
                    let va = tag_va(t);
                    let span = tag_span(t);
                    let pfn = frame(data, span, va.0);
                    let what = || {
                        format!(
                            "cpu {n}: TLB entry {va} -> {pfn} ({}) of mm {mm}",
                            ["4K", "2M", "1G"][span]
                        )
                    };
                    if self.frame_is_free(pfn) {
                        return Err(format!("{} maps a free frame", what()));
                    }
                    if !coherent {
                        continue;
                    }
                    let Some((pte, level)) =
                        self.pt.translate(m.pgd, va).filter(|(p, _)| p.is_present())
                    else {
                        return Err(format!("{}, but nothing is mapped there", what()));
                    };
                    if PageSize::of_level(level) as usize != span
                        || pte.pfn() != Pfn(data >> bits::PFN_SHIFT)
                    {
                        return Err(format!(
                            "{}, but the page tables map {pte:?} ({level:?})",
                            what()
                        ));
                    }
                    let rights = entry_data(pte);
                    if data & !rights & (bits::WRITE | bits::DIRTY | bits::EXEC) != 0 {
                        return Err(format!("{} has rights the PTE {pte:?} lacks", what()));
                    }
                }
                for (i, cache) in c.pwc.iter().enumerate() {
                    let level = [Level::Pgd, Level::Pud, Level::Pmd][i];
                    for (t, data) in cache.valid().filter(|(t, _)| tag_asid(*t) as usize == asid) {
                        let va = tag_va(t);
                        let table = self.pt.find_table(m.pgd, va, level.below());
                        if table != Some(PtId(data as u32)) {
                            return Err(format!(
                                "cpu {n}: walk cache for {level:?} entry of {va} (mm {mm}) points at table {}, the page tables at {table:?}",
                                data
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KernelVersion, Machine, MachineConfig, Profile, prot};
    use simcore::Bytes;

    fn addr_in_set(set: u64, n: u64, sets: u64) -> u64 {
        (set + n * sets) << 12
    }

    /// Given a 2-way array of 2 sets, when three pages of one set are filled, then the least
    /// recently used one is the victim and the other set is untouched.
    #[test]
    fn lru_evicts_the_least_recently_used_way_of_the_set() {
        let mut a = Array::new(&ArrayGeometry::new(4, 2, sizes::K4), sizes::K4);
        let (p0, p1, p2) = (addr_in_set(0, 0, 2), addr_in_set(0, 1, 2), addr_in_set(0, 2, 2));
        let other = addr_in_set(1, 0, 2);
        a.fill(p0, 0, 1, 0x100);
        a.fill(p1, 0, 1, 0x200);
        a.fill(other, 0, 1, 0x300);
        assert!(a.lookup(p0, 1).is_some(), "p0 is now the most recent of set 0");
        a.fill(p2, 0, 1, 0x400);
        assert!(a.lookup(p1, 1).is_none(), "p1 was the LRU way");
        assert!(a.lookup(p0, 1).is_some() && a.lookup(p2, 1).is_some());
        assert!(a.lookup(other, 1).is_some(), "conflicts stay within a set");
        assert!(a.lookup(p0, 2).is_none(), "another ASID misses");
    }

    /// Given an array holding 4 KiB and 2 MiB entries, when entries are filled, replaced and
    /// invalidated, then its per-span counts (which let lookups skip empty spans) match a recount
    /// and lookups of both sizes still hit.
    #[test]
    fn span_counts_follow_fills_replacements_and_invalidations() {
        let mut a =
            Array::new(&ArrayGeometry::full(4, sizes::K4 | sizes::M2), sizes::K4 | sizes::M2);
        let recount = |a: &Array| {
            let mut n = [0u32; 4];
            for (t, _) in a.valid() {
                n[tag_span(t)] += 1;
            }
            n
        };
        a.fill(0x1000, 0, 1, 0x100);
        a.fill(0x20_0000, 1, 1, 0x200);
        assert_eq!(a.span_entries, [1, 1, 0, 0]);
        assert!(a.lookup(0x20_1000, 1).is_some(), "the 2 MiB entry covers its 4 KiB pages");
        for i in 2..8u64 {
            a.fill(i << 12, 0, 1, i << 8); // evicts the oldest entries of the 4 ways
        }
        assert_eq!(a.span_entries, recount(&a));
        a.invalidate_va(0x7000, 1);
        a.invalidate_asid(2);
        assert_eq!(a.span_entries, recount(&a));
        a.invalidate_asid(1);
        assert_eq!(a.span_entries, [0; 4]);
        assert!(a.lookup(0x7000, 1).is_none());
    }

    /// Given a 64-way fully associative LRU array (which keeps a hint index), when a long stream
    /// of lookups, fills on misses and invalidations runs, then every hit and miss is the one a
    /// plain list in LRU order gives.
    #[test]
    fn hinted_lookups_match_a_plain_lru_list() {
        let mut a = Array::new(&ArrayGeometry::full(64, sizes::K4), sizes::K4);
        assert!(!a.hint.is_empty());
        let mut model: Vec<u64> = Vec::new(); // most recent last
        let mut x = 7u64;
        for step in 0..20_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let va = ((x >> 33) % 100) << 12;
            if step % 97 == 0 {
                a.invalidate_va(va, 1);
                model.retain(|&m| m != va);
                continue;
            }
            let hit = a.lookup(va, 1).is_some();
            let pos = model.iter().position(|&m| m == va);
            assert_eq!(hit, pos.is_some(), "step {step}, va {va:#x}");
            if let Some(p) = pos {
                model.remove(p);
            } else {
                a.fill(va, 0, 1, va);
                if model.len() == 64 {
                    model.remove(0);
                }
            }
            model.push(va);
        }
    }

    /// Given a 4-way bit-PLRU set, when every way has been touched, then the MRU bits reset and
    /// the first way not touched since is the victim.
    #[test]
    fn bit_plru_resets_when_the_set_fills() {
        let mut a = Array::new(&ArrayGeometry::full(4, sizes::K4).plru(), sizes::K4);
        for i in 0..4u64 {
            a.fill(i << 12, 0, 0, i);
        }
        // The fourth fill set the last bit: only way 3 keeps its bit.
        assert_eq!(a.stamps, [0, 0, 0, 1]);
        assert!(a.lookup(0, 0).is_some());
        a.fill(9 << 12, 0, 0, 9);
        assert!(a.lookup(1 << 12, 0).is_none(), "way 1 was the first with a clear bit");
        assert!(a.lookup(0, 0).is_some() && a.lookup(3 << 12, 0).is_some());
    }

    /// Given Golden Cove's size-separated DTLB, when 2 MiB and 4 KiB translations are filled,
    /// then each lands in its own array, and filling many 4 KiB pages never evicts the 2 MiB one.
    #[test]
    fn page_sizes_have_separate_arrays() {
        let g = Profile::named("xeon-spr").unwrap().tlb;
        let mut c = CpuTlb::new(&g);
        CpuTlb::fill_level(&mut c.dtlb, 0x4000_0000, 1, 0, 512 << bits::PFN_SHIFT);
        for i in 0..1000u64 {
            CpuTlb::fill_level(&mut c.dtlb, 0x1000_0000 + (i << 12), 0, 0, i << bits::PFN_SHIFT);
        }
        let slot = c.dtlb[1].lookup(0x4000_0000 + 0x5000, 0).expect("the 2M array holds it");
        assert_eq!(frame(c.dtlb[1].data[slot], 1, 0x4000_5000), Pfn(517));
        assert!(c.dtlb[0].lookup(0x4000_0000, 0).is_none());
        assert_eq!(c.dtlb[0].valid().count(), 96, "the 4K array is full");
        // A level without a 1G array keeps the 4K piece (AMD's smashing).
        let mut zen = CpuTlb::new(&Profile::named("epyc-vm").unwrap().tlb);
        CpuTlb::fill_level(&mut zen.l2d, 0x8000_3000, 2, 0, 1 << 20 << bits::PFN_SHIFT);
        let slot = zen.l2d[0].lookup(0x8000_3000, 0).unwrap();
        assert_eq!(tag_span(zen.l2d[0].tags[slot]), 1, "smashed to 2M");
        assert_eq!(frame(zen.l2d[0].data[slot], 1, 0x8000_3000), Pfn((1 << 20) + 3));
    }

    fn machine() -> Machine {
        let p = Profile::named("tiny").unwrap();
        Machine::new(MachineConfig::new(p, KernelVersion::DEFAULT)).unwrap()
    }

    /// Given a written page whose PTE loses its write bit without a flush (a missing
    /// `flush_tlb_page`), then the coherence checker reports the writable entry; after the flush
    /// it holds again.
    #[test]
    fn a_missing_flush_is_caught() {
        let mut m = machine();
        let pid = m.new_process("p").unwrap();
        m.spawn_thread(pid, 0, "t", |t| async move {
            let a = t.mmap_anon(Bytes::kib(8), prot::READ | prot::WRITE).await.unwrap();
            t.write_bytes(a, b"x").await.unwrap();
            let (mm, pgd) = {
                let st = t.cx().kernel().state();
                let mm = st.procs[t.pid()].mm.unwrap();
                (mm, st.mm(mm).pgd)
            };
            {
                let mut st = t.cx().st();
                let (table, idx) = st.pt.pte_slot(pgd, a).unwrap();
                let pte = st.pt.pte(table, idx);
                st.pt.set_pte(table, idx, pte.wrprotect());
                let err = st.check_tlb(true).unwrap_err();
                assert!(err.contains("has rights the PTE"), "{err}");
                st.check_tlb(false).unwrap();
            }
            crate::tlbflush::flush_tlb_page(t.cx(), mm, a).await;
            t.cx().kernel().state().check_tlb(true).unwrap();
        })
        .unwrap();
        m.run().unwrap();
    }
}
