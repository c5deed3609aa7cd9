//! Folios: the per-frame state of simulated physical memory (`include/linux/mm_types.h`,
//! `include/linux/page-flags.h`, Linux v6.8).
//!
//! One packed [`PageMeta`] of 14 bytes per frame (Linux spends 64 on `struct page`), indexed by
//! pfn and grown only as far as frames have been handed out, plus `folio->mapping`,
//! `folio->index` and the memory cgroup in side tables by groups of 512 frames. For a large folio
//! the head frame carries the folio's flags, refcount, memory cgroup and mapping; its order,
//! entire (PMD) mapcount and pincount live in a side table, since large folios are few. Tail
//! frames carry their per-page (PTE) mapcount and their offset from the head, as the kernel's
//! tail pages do; nothing else of a large folio is per page until it is split. The refcount is
//! held in 16 bits and a page's PTE mapcount in 8; the rare larger counts (a small folio with 64
//! FOLL_PIN pins, a page mapped 255 times) escape to exact side tables, so every count reads the
//! same as a 32-bit field would.
//!
//! Layout and cost, per frame: flags 2 bytes, refcount 2, PTE mapcount with the multi-gen LRU
//! generation and refs and a 3-bit memory-cgroup selector 2, LRU links 8 (a tail, never on a list,
//! keeps its offset from the head in the first link): 14 bytes, `repr(C, packed(2))` so that the
//! 4-byte links need no padding. The memory cgroup (16 bits as a field) is a selector of one of
//! seven ids its group holds ([`MemcgGroup`]: 40 bytes per 512 frames, 0.08 per frame; 0 selects
//! the root), since a group's frames nearly always belong to few cgroups; a group with frames of an
//! eighth non-root cgroup holds every frame's id instead (2 bytes per frame, what the field cost),
//! exact either way. Mapping and index (8 bytes as fields) are run-length coded per 512-frame group
//! ([`Group`]): a group whose frames hold at most three runs of consecutive indices of one mapping
//! costs 168 bytes (0.33 per frame), any other 4264 (8.3 per frame, what the fields cost). The
//! kernel keeps all three in `struct page`; the coding is host memory only and reads the same. A
//! first-touch fault sequence or a readahead batch fills a group with one or two runs; a replay of
//! scattered file pages turns groups full. Cost: reading a mapping or index is a group lookup and a
//! 2-bit select instead of a field load, reading a memory cgroup a group lookup and a slot select;
//! a store may rebuild a group (once, when it turns full); one frame in five (6 of 32) of a 14-byte
//! array straddles a cache line. `mmsim bench mm --gib 64`: 24 -> 16.4 -> 14.4 bytes of frame state
//! per page (page-table frames included), 16.9 -> 15.0 in all with the page tables' share (15.3 at
//! 8 GiB). Speed, old -> new layout, alternated runs on a loaded 2-core host: first-touch faults at
//! 8 GiB 662 k -> 661 k per second (medians of 5), at 64 GiB 588 k -> 486 k (medians of 3, ranges
//! 467-589 k and 448-633 k: noise), instructions +0.7 % (cachegrind, `--gib 1`); page-cache replay
//! (`mmsim replay traces/arc/P6.lis.zst --cache 256MiB`) user CPU new/old median of 7 pairs 1.08
//! classic (0.996-1.20), 1.02 mglru (0.91-1.26), instructions +4.4 % (cachegrind, classic, first
//! 300 000 requests): largely [`Folios::set_memcg_raw`] at every charge and uncharge (0.8 % of the
//! instructions) and the group lookup of each `folio_memcg`. On a page-cache replay the mapping of
//! a cold folio is a second cache line (an extra miss per rmap walk, about 5 % of `replay` before
//! `folio_mappers` stopped walking unmapped folios). What remains of the 14 bytes is mostly the LRU
//! links (8): a folio's place on its list.
//!
//! References: a folio's refcount is the sum of its page-cache or swap-cache references (one per
//! page), one per PTE or PMD that maps it, `GUP_PIN_COUNTING_BIAS` per FOLL_PIN pin of a small
//! folio (one per pin of a large one), and the references other holders take (FOLL_GET users,
//! isolation, in-flight IO). Those other holders register with [`Folios::get_extra`] so the
//! refcount checker can account for every reference. Their count is a byte per frame beside
//! [`PageMeta`] (255 or more escape to a side table, exact): every page-cache read takes such a
//! reference and drops it, and the hash map that held the counts before cost about 275
//! instructions per request of a classic page-cache replay (P6 at 256 MiB: 5398 -> 5122,
//! cachegrind), for one byte of host memory per frame (15 in all where the layout below says 14).
//!
//! Host cost of the accessors: the small per-frame reads and writes are `#[inline]` (in a build
//! of many codegen units each was a call, `order` alone 2.4 million per 200 000 requests of a
//! page-cache replay), and [`Folios::large`] tests `PG_head` before searching the large-folio
//! table, so a small folio's `folio_mapcount` or `large` is a flag test.
//!
//! LRU lists are intrusive doubly linked lists through the frames (`folio->lru`), indexed by
//! [`ListIdx`]: each lruvec (one per memory cgroup on the machine's one node) owns the classic
//! lists and the multi-gen LRU's generation lists (`memcontrol.rs`, `lru.rs`). Beside the links a
//! folio records what `folio->memcg_data` and the `LRU_GEN`/`LRU_REFS` bits of `folio->flags`
//! hold: its memory cgroup, its generation and its 2-bit reference counter.
//!
//! Limits (asserted): 2^32 frames (16 TiB), 65 535 PTE mappings of one page, 65 536 memory
//! cgroups (`memcontrol.rs`; ids are 16 bits here).

use crate::types::ids::{AnonVmaId, InodeId, StableNodeId};
use simcore::{Order, Pfn};
use std::collections::BTreeMap;

/// Page flags (a subset of `enum pageflags`), as bits of [`PageMeta::flags`].
pub mod pg {
    pub const LOCKED: u16 = 1 << 0;
    pub const REFERENCED: u16 = 1 << 1;
    pub const UPTODATE: u16 = 1 << 2;
    pub const DIRTY: u16 = 1 << 3;
    pub const LRU: u16 = 1 << 4;
    pub const ACTIVE: u16 = 1 << 5;
    pub const WORKINGSET: u16 = 1 << 6;
    pub const WRITEBACK: u16 = 1 << 7;
    pub const HEAD: u16 = 1 << 8;
    pub const TAIL: u16 = 1 << 9;
    pub const SWAPBACKED: u16 = 1 << 10;
    pub const ANON_EXCLUSIVE: u16 = 1 << 11;
    pub const RECLAIM: u16 = 1 << 12;
    pub const UNEVICTABLE: u16 = 1 << 13;
    pub const SWAPCACHE: u16 = 1 << 14;
    /// `PG_reserved`: the zero pages; never refcounted or freed.
    pub const RESERVED: u16 = 1 << 15;

    /// Names for dumps, in bit order.
    pub const NAMES: [&str; 16] = [
        "locked",
        "referenced",
        "uptodate",
        "dirty",
        "lru",
        "active",
        "workingset",
        "writeback",
        "head",
        "tail",
        "swapbacked",
        "anon_exclusive",
        "reclaim",
        "unevictable",
        "swapcache",
        "reserved",
    ];
}

/// `GUP_PIN_COUNTING_BIAS` (`include/linux/mm.h`): what one FOLL_PIN adds to a small folio.
pub const GUP_PIN_COUNTING_BIAS: u32 = 1024;

/// What `folio->mapping` points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mapping {
    None,
    Anon(AnonVmaId),
    /// A KSM page: `PAGE_MAPPING_KSM` and its stable node (`folio_test_ksm`); anonymous too.
    Ksm(StableNodeId),
    File(InodeId),
}

const ANON_TAG: u32 = 1 << 31;
const KSM_TAG: u32 = 1 << 30;

impl Mapping {
    fn pack(self) -> u32 {
        match self {
            Mapping::None => 0,
            Mapping::Anon(a) => {
                assert!(a.0 < KSM_TAG, "too many anon_vmas");
                ANON_TAG | a.0
            }
            Mapping::Ksm(n) => {
                assert!(n.0 < KSM_TAG, "too many stable nodes");
                ANON_TAG | KSM_TAG | n.0
            }
            Mapping::File(i) => {
                assert!(i.0 < ANON_TAG - 1, "too many inodes");
                i.0 + 1
            }
        }
    }

    fn unpack(raw: u32) -> Mapping {
        match raw {
            0 => Mapping::None,
            r if r & (ANON_TAG | KSM_TAG) == ANON_TAG | KSM_TAG => {
                Mapping::Ksm(StableNodeId(r & !(ANON_TAG | KSM_TAG)))
            }
            r if r & ANON_TAG != 0 => Mapping::Anon(AnonVmaId(r & !ANON_TAG)),
            r => Mapping::File(InodeId(r - 1)),
        }
    }
}

/// The state of one frame: 14 bytes, 2-byte aligned (the LRU links are unaligned 4-byte
/// fields; `meta` hands out references only to the whole struct, fields are read by value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, packed(2))]
pub struct PageMeta {
    pub flags: u16,
    /// Head or small folio: `_refcount`, or [`REF_ESCAPED`] when the count (65 535 or more:
    /// pins of a small folio count 1024 each) lives in [`Folios::big_refs`]. Tail: 0.
    refcount: u16,
    /// Bits 0-7: PTE mappings of this page (the kernel's `_mapcount + 1`), or [`MAP_ESCAPED`]
    /// when the count (255 or more) lives in [`Folios::big_maps`]. Head or small folio: the
    /// multi-gen LRU generation plus one (bits 8-10; 0 when not on a generation list), the
    /// reference counter (bits 11-12) and which slot of its [`MemcgGroup`] holds its memory
    /// cgroup (bits 13-15; 0: the root). Tail: the mapcount only.
    map_lru: u16,
    /// Head or small folio: the LRU links (`folio->lru`). Tail (never on a list): `lru_prev`
    /// is its offset from the head, as the kernel's `compound_head` field points at it.
    lru_prev: u32,
    lru_next: u32,
}

const _: () = assert!(size_of::<PageMeta>() == 14);

/// A refcount too large for [`PageMeta`]'s 16 bits.
const REF_ESCAPED: u16 = u16::MAX;
/// An extra-reference count too large for [`Folios::extra`]'s byte.
const EXTRA_ESCAPED: u8 = u8::MAX;
/// A PTE mapcount too large for [`PageMeta`]'s 8 bits.
const MAP_ESCAPED: u16 = 0xff;
const MAP_MASK: u16 = 0xff;
const GEN_SHIFT: u32 = 8;
const GEN_MASK: u16 = 0x7 << GEN_SHIFT;
const REFS_SHIFT: u32 = 11;
const REFS_MASK: u16 = 0x3 << REFS_SHIFT;
const MEMCG_SHIFT: u32 = 13;
const MEMCG_MASK: u16 = 0x7 << MEMCG_SHIFT;

/// The list a folio is on (`enum lru_list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LruList {
    InactiveAnon = 0,
    ActiveAnon = 1,
    InactiveFile = 2,
    ActiveFile = 3,
    Unevictable = 4,
}

impl LruList {
    pub const ALL: [LruList; 5] = [
        LruList::InactiveAnon,
        LruList::ActiveAnon,
        LruList::InactiveFile,
        LruList::ActiveFile,
        LruList::Unevictable,
    ];

    /// The list of `file` or anon pages, active or not (`enum lru_list` arithmetic).
    pub fn of(file: bool, active: bool) -> LruList {
        match (file, active) {
            (false, false) => LruList::InactiveAnon,
            (false, true) => LruList::ActiveAnon,
            (true, false) => LruList::InactiveFile,
            (true, true) => LruList::ActiveFile,
        }
    }
}

/// One intrusive list of folios: an lruvec's classic list or generation list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListIdx(pub u32);

/// State of a large folio kept beside its head page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LargeInfo {
    pub order: u8,
    /// PMD mappings of the whole folio (`_entire_mapcount + 1`).
    pub entire_mapcount: u32,
    /// FOLL_PIN pins (`_pincount`).
    pub pincount: u32,
}

/// log2 of the frames in one group of [`MapIndex`].
const GROUP_SHIFT: u32 = 9;
const GROUP: usize = 1 << GROUP_SHIFT;
/// Runs a compact group holds before it stores every frame's pair.
const RUNS: usize = 3;

/// `folio->mapping` and `folio->index` of every frame, by groups of 512 aligned frames. A group
/// is compact while its frames' pairs fall in at most three runs, a run being a mapping and a
/// base such that the frame at offset `o` holds `(mapping, base + o)`: 2 bits per frame say
/// which run it follows (0: no mapping, index 0). Consecutive frames allocated to consecutive
/// indices of one anon_vma or file (a first-touch fault sequence, a readahead batch) share a
/// run; a page-table frame allocated among them starts the next one. A pair that fits no run
/// turns the group full: 8 bytes per frame, as a field of [`PageMeta`] would cost.
#[derive(Clone, Debug, Default)]
struct Group {
    /// 2 bits per frame: 0, or one plus the run it follows. Unused when `full`.
    sel: [u64; GROUP / 32],
    runs: [(u32, u32); RUNS],
    /// Frames following each run.
    uses: [u16; RUNS],
    full: Option<Box<[(u32, u32); GROUP]>>,
}

impl Group {
    fn sel(&self, o: usize) -> usize {
        ((self.sel[o / 32] >> (2 * (o % 32))) & 3) as usize
    }

    fn set_sel(&mut self, o: usize, k: usize) {
        let old = self.sel(o);
        if old != 0 {
            self.uses[old - 1] -= 1;
        }
        if k != 0 {
            self.uses[k - 1] += 1;
        }
        let shift = 2 * (o % 32);
        self.sel[o / 32] = (self.sel[o / 32] & !(3 << shift)) | ((k as u64) << shift);
    }

    #[inline]
    fn get(&self, o: usize) -> (u32, u32) {
        if let Some(f) = &self.full {
            return f[o];
        }
        match self.sel(o) {
            0 => (0, 0),
            k => {
                let (mapping, base) = self.runs[k - 1];
                (mapping, base.wrapping_add(o as u32))
            }
        }
    }

    /// The run `(mapping, index)` at offset `o` follows, claiming a free one if none does.
    fn run_of(&mut self, o: usize, (mapping, index): (u32, u32)) -> Option<usize> {
        let run = (mapping, index.wrapping_sub(o as u32));
        let live = (0..RUNS).find(|&k| self.uses[k] > 0 && self.runs[k] == run);
        let k = live.or_else(|| (0..RUNS).find(|&k| self.uses[k] == 0))?;
        self.runs[k] = run;
        Some(k + 1)
    }

    fn set(&mut self, o: usize, pair: (u32, u32)) {
        if let Some(f) = &mut self.full {
            f[o] = pair;
            return;
        }
        self.set_sel(o, 0);
        if pair == (0, 0) {
            return;
        }
        match self.run_of(o, pair) {
            Some(k) => self.set_sel(o, k),
            None => {
                let mut f = Box::new([(0, 0); GROUP]);
                for (i, p) in f.iter_mut().enumerate() {
                    *p = self.get(i);
                }
                f[o] = pair;
                *self = Group { full: Some(f), ..Group::default() };
            }
        }
    }
}

const _: () = assert!(size_of::<Group>() == 168);

/// Every frame's mapping and index (see [`Group`]).
#[derive(Debug, Default)]
struct MapIndex {
    groups: Vec<Group>,
}

impl MapIndex {
    fn grow(&mut self, frames: usize) {
        let n = frames.div_ceil(GROUP);
        if self.groups.len() < n {
            self.groups.resize(n, Group::default());
        }
    }

    #[inline]
    fn get(&self, pfn: Pfn) -> (u32, u32) {
        self.groups[(pfn.0 >> GROUP_SHIFT) as usize].get(pfn.0 as usize % GROUP)
    }

    fn set(&mut self, pfn: Pfn, pair: (u32, u32)) {
        self.groups[(pfn.0 >> GROUP_SHIFT) as usize].set(pfn.0 as usize % GROUP, pair);
    }

    fn host_bytes(&self) -> usize {
        let full = self.groups.iter().filter(|g| g.full.is_some()).count();
        self.groups.len() * size_of::<Group>() + full * size_of::<[(u32, u32); GROUP]>()
    }
}

/// Distinct non-root memory cgroups a compact [`MemcgGroup`] names (3-bit selectors).
const MEMCG_SLOTS: usize = 7;

/// The memory cgroups (`folio->memcg_data`) of 512 aligned frames. Each frame's 3-bit selector
/// in [`PageMeta::map_lru`] is 0 for the root cgroup (raw id 0: also every free frame and every
/// tail) or one plus the slot holding its cgroup's id; a slot no frame selects is reused. An
/// eighth distinct cgroup in the group turns it full: one 16-bit id per frame, exact, as the
/// field cost before (the selectors are then unused).
#[derive(Clone, Debug, Default)]
struct MemcgGroup {
    ids: [u16; MEMCG_SLOTS],
    /// Frames selecting each slot.
    uses: [u16; MEMCG_SLOTS],
    full: Option<Box<[u16; GROUP]>>,
}

const _: () = assert!(size_of::<MemcgGroup>() == 40);

impl MemcgGroup {
    #[inline]
    fn get(&self, o: usize, sel: u16) -> u16 {
        match (&self.full, sel) {
            (Some(f), _) => f[o],
            (None, 0) => 0,
            (None, k) => self.ids[usize::from(k) - 1],
        }
    }

    /// The selector of the slot naming `memcg` (not 0), claiming a free slot if none does.
    fn claim(&mut self, memcg: u16) -> Option<u16> {
        let live = (0..MEMCG_SLOTS).find(|&k| self.uses[k] > 0 && self.ids[k] == memcg);
        let k = live.or_else(|| (0..MEMCG_SLOTS).find(|&k| self.uses[k] == 0))?;
        self.ids[k] = memcg;
        self.uses[k] += 1;
        Some(k as u16 + 1)
    }
}

const NIL: u32 = u32::MAX;

/// Stores `count` in a narrow `field`, or, when it does not fit below `escaped`, `escaped` there
/// and the count in `side` under `pfn`.
fn store_narrow<T>(field: &mut T, escaped: T, side: &mut BTreeMap<u32, u32>, pfn: Pfn, count: u32)
where
    T: Copy + PartialEq + TryFrom<u32>,
{
    let key = pfn.0 as u32;
    if *field == escaped {
        side.remove(&key);
    }
    match T::try_from(count) {
        Ok(c) if c != escaped => *field = c,
        _ => {
            *field = escaped;
            side.insert(key, count);
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct ListHead {
    head: u32,
    tail: u32,
    /// Pages on the list (large folios count all their pages).
    nr_pages: u64,
}

/// Every frame's state, the large-folio side table, and the LRU lists.
#[derive(Debug)]
pub struct Folios {
    meta: Vec<PageMeta>,
    map_index: MapIndex,
    /// Every frame's memory cgroup, by groups of 512 frames (see [`MemcgGroup`]).
    memcgs: Vec<MemcgGroup>,
    large: BTreeMap<u32, LargeInfo>,
    /// References held by holders other than mappings and caches, per frame (heads only), or
    /// [`EXTRA_ESCAPED`] when the count (255 or more) lives in `big_extra`: every page-cache read
    /// takes one and drops it, so a byte indexed by pfn rather than a map.
    extra: Vec<u8>,
    /// FOLL_PIN pins of small folios, per head pfn (each also adds `GUP_PIN_COUNTING_BIAS` to the
    /// refcount; the kernel infers pins from the refcount, the checkers need the exact count).
    pins: BTreeMap<u32, u32>,
    /// Every lruvec's lists, by [`ListIdx`]; grown as lruvecs are created.
    lists: Vec<ListHead>,
    /// Refcounts of [`REF_ESCAPED`] frames, per pfn.
    big_refs: BTreeMap<u32, u32>,
    /// PTE mapcounts of [`MAP_ESCAPED`] frames, per pfn.
    big_maps: BTreeMap<u32, u32>,
    /// Extra references of [`EXTRA_ESCAPED`] frames, per pfn.
    big_extra: BTreeMap<u32, u32>,
}

const EMPTY_LIST: ListHead = ListHead { head: NIL, tail: NIL, nr_pages: 0 };

impl Folios {
    pub(crate) fn new() -> Folios {
        Folios {
            meta: Vec::new(),
            map_index: MapIndex::default(),
            memcgs: Vec::new(),
            large: BTreeMap::new(),
            extra: Vec::new(),
            pins: BTreeMap::new(),
            lists: Vec::new(),
            big_refs: BTreeMap::new(),
            big_maps: BTreeMap::new(),
            big_extra: BTreeMap::new(),
        }
    }

    /// Makes room for lists below `n`.
    pub(crate) fn grow_lists(&mut self, n: usize) {
        if self.lists.len() < n {
            self.lists.resize(n, EMPTY_LIST);
        }
    }

    /// Makes room for frames below `high_water`.
    #[inline]
    pub(crate) fn grow(&mut self, high_water: u64) {
        // Most calls (every allocation) find the frames already covered.
        if (self.meta.len() as u64) < high_water {
            self.grow_to(high_water);
        }
    }

    fn grow_to(&mut self, high_water: u64) {
        let n = usize::try_from(high_water).expect("frame count");
        assert!(high_water <= u64::from(NIL), "more than 2^32 frames");
        self.meta.resize(n, PageMeta::default());
        self.extra.resize(n, 0);
        self.map_index.grow(n);
        if self.memcgs.len() < n.div_ceil(GROUP) {
            self.memcgs.resize(n.div_ceil(GROUP), MemcgGroup::default());
        }
    }

    /// Host bytes spent on per-frame state (for the memory benchmark): the frames in use, not
    /// the vector's untouched spare capacity.
    pub fn host_bytes(&self) -> usize {
        let full_memcgs = self.memcgs.iter().filter(|g| g.full.is_some()).count();
        self.meta.len() * (size_of::<PageMeta>() + size_of::<u8>())
            + self.map_index.host_bytes()
            + self.memcgs.len() * size_of::<MemcgGroup>()
            + full_memcgs * size_of::<[u16; GROUP]>()
    }

    fn set_refcount(&mut self, pfn: Pfn, count: u32) {
        let m = &mut self.meta[pfn.0 as usize];
        let mut refcount = m.refcount;
        store_narrow(&mut refcount, REF_ESCAPED, &mut self.big_refs, pfn, count);
        m.refcount = refcount;
    }

    fn set_extra(&mut self, head: Pfn, count: u32) {
        let field = &mut self.extra[head.0 as usize];
        store_narrow(field, EXTRA_ESCAPED, &mut self.big_extra, head, count);
    }

    fn set_mapcount(&mut self, pfn: Pfn, count: u32) {
        let key = pfn.0 as u32;
        let m = &mut self.meta[pfn.0 as usize];
        if m.map_lru & MAP_MASK == MAP_ESCAPED {
            self.big_maps.remove(&key);
        }
        let inline = count.min(u32::from(MAP_ESCAPED)) as u16;
        m.map_lru = (m.map_lru & !MAP_MASK) | inline;
        if inline == MAP_ESCAPED {
            self.big_maps.insert(key, count);
        }
    }

    #[inline]
    pub fn meta(&self, pfn: Pfn) -> &PageMeta {
        &self.meta[pfn.0 as usize]
    }

    #[inline]
    pub(crate) fn meta_mut(&mut self, pfn: Pfn) -> &mut PageMeta {
        &mut self.meta[pfn.0 as usize]
    }

    /// Sets up a newly allocated folio of `order`: refcount 1, no mapping.
    pub(crate) fn prep_new(&mut self, head: Pfn, order: Order) {
        self.grow(head.0 + order.pages());
        self.set_extra(head, 1);
        assert_eq!(self.refcount(head), 0, "allocating folio {head} with references");
        self.map_index.set(head, (0, 0));
        debug_assert_eq!(self.memcg_raw(head), 0, "a free frame is in the root cgroup");
        let m = self.meta_mut(head);
        *m = PageMeta { refcount: 1, ..PageMeta::default() };
        if order.0 > 0 {
            m.flags = pg::HEAD;
            for i in 1..order.pages() {
                let offset = u32::try_from(i).expect("folio within 2^32 frames");
                *self.meta_mut(head + i) =
                    PageMeta { flags: pg::TAIL, lru_prev: offset, ..PageMeta::default() };
                self.map_index.set(head + i, (0, 0));
            }
            self.large.insert(head.0 as u32, LargeInfo { order: order.0, ..LargeInfo::default() });
        }
    }

    /// Clears a freed folio's state; returns its order.
    pub(crate) fn clear(&mut self, head: Pfn) -> Order {
        let order = self.order(head);
        let m = self.meta(head);
        assert_eq!(self.refcount(head), 0, "freeing folio {head} with references");
        assert_eq!(self.page_mapcount(head), 0, "freeing mapped folio {head}");
        assert_eq!(m.flags & pg::LRU, 0, "freeing folio {head} still on an LRU list");
        assert_eq!(self.extra[head.0 as usize], 0, "freeing folio {head} with holders");
        assert!(!self.pins.contains_key(&(head.0 as u32)), "freeing pinned folio {head}");
        let pfns = head.0 as u32..(head.0 + order.pages()) as u32;
        assert!(self.big_maps.range(pfns).next().is_none(), "freeing mapped folio {head}");
        self.set_memcg_raw(head, 0);
        for i in 0..order.pages() {
            *self.meta_mut(head + i) = PageMeta::default();
            self.map_index.set(head + i, (0, 0));
        }
        self.large.remove(&(head.0 as u32));
        order
    }

    /// `__split_huge_page`'s per-page state: every page of the large folio `head` (off any
    /// list, not PMD-mapped, unpinned) becomes an order-0 folio with the head's flags (each page
    /// keeps its own PageAnonExclusive, only the head its lock), memory cgroup and LRU bits, and
    /// a refcount of its PTE mappings plus `per_page` (the swap cache's reference of each page
    /// of a swap-cache folio); the head keeps its registered holders' references too.
    /// The caller sets each page's mapping and index. Returns the pages.
    pub(crate) fn split_large(&mut self, head: Pfn, per_page: u32) -> u64 {
        let l = self.large.remove(&(head.0 as u32)).expect("splitting a small folio");
        assert_eq!(
            (l.entire_mapcount, l.pincount),
            (0, 0),
            "splitting PMD-mapped or pinned {head}"
        );
        let nr = 1u64 << l.order;
        let h = *self.meta(head);
        let holders = self.extra_refs(head);
        let mapped: u32 = (0..nr).map(|i| self.page_mapcount(head + i)).sum();
        let cached = per_page * nr as u32;
        assert_eq!(
            self.refcount(head),
            mapped + holders + cached,
            "splitting folio {head} with unknown references"
        );
        let shared = h.flags & !(pg::HEAD | pg::TAIL | pg::ANON_EXCLUSIVE | pg::LRU | pg::LOCKED);
        let memcg = self.memcg_raw(head);
        for i in 0..nr {
            let refs = self.page_mapcount(head + i) + per_page + if i == 0 { holders } else { 0 };
            self.set_refcount(head + i, refs);
            let m = self.meta_mut(head + i);
            let own = m.flags & pg::ANON_EXCLUSIVE | if i == 0 { h.flags & pg::LOCKED } else { 0 };
            m.flags = shared | own;
            m.map_lru =
                (m.map_lru & (MAP_MASK | MEMCG_MASK)) | (h.map_lru & (GEN_MASK | REFS_MASK));
            (m.lru_prev, m.lru_next) = (NIL, NIL);
            if i > 0 {
                self.set_memcg_raw(head + i, memcg);
            }
        }
        nr
    }

    #[inline]
    pub fn is_tail(&self, pfn: Pfn) -> bool {
        self.meta(pfn).flags & pg::TAIL != 0
    }

    /// `compound_head`.
    #[inline]
    pub fn head(&self, pfn: Pfn) -> Pfn {
        let m = self.meta(pfn);
        if m.flags & pg::TAIL != 0 { Pfn(pfn.0 - u64::from(m.lru_prev)) } else { pfn }
    }

    #[inline]
    pub fn order(&self, head: Pfn) -> Order {
        let flags = self.meta(head).flags;
        debug_assert_eq!(flags & pg::TAIL, 0, "order of tail {head}");
        if flags & pg::HEAD != 0 { Order(self.large[&(head.0 as u32)].order) } else { Order::BASE }
    }

    /// The large folio `head` heads, if any: for a small folio (`PG_head` clear, as it is on
    /// exactly the frames without an entry) a flag test rather than a search.
    #[inline]
    pub fn large(&self, head: Pfn) -> Option<&LargeInfo> {
        let is_head = self.meta.get(head.0 as usize).is_some_and(|m| m.flags & pg::HEAD != 0);
        if is_head { self.large.get(&(head.0 as u32)) } else { None }
    }

    /// The heads of the large folios, in frame order.
    pub fn large_heads(&self) -> impl Iterator<Item = Pfn> + '_ {
        self.large.keys().map(|&h| Pfn(u64::from(h)))
    }

    #[inline]
    pub fn test(&self, pfn: Pfn, flag: u16) -> bool {
        self.meta(pfn).flags & flag != 0
    }

    #[inline]
    pub(crate) fn set(&mut self, pfn: Pfn, flag: u16) {
        self.meta_mut(pfn).flags |= flag;
    }

    #[inline]
    pub(crate) fn clear_flag(&mut self, pfn: Pfn, flag: u16) {
        self.meta_mut(pfn).flags &= !flag;
    }

    /// Sets `flag` and returns whether it was already set (`folio_test_set_*`).
    pub(crate) fn test_and_set(&mut self, pfn: Pfn, flag: u16) -> bool {
        let was = self.test(pfn, flag);
        self.set(pfn, flag);
        was
    }

    #[inline]
    pub fn mapping(&self, head: Pfn) -> Mapping {
        Mapping::unpack(self.map_index.get(head).0)
    }

    /// `folio->index` (page offset in the file, or the anon index relative to its anon_vma).
    #[inline]
    pub fn index(&self, head: Pfn) -> u32 {
        self.map_index.get(head).1
    }

    pub(crate) fn set_mapping(&mut self, head: Pfn, mapping: Mapping, index: u32) {
        self.map_index.set(head, (mapping.pack(), index));
    }

    /// `folio_test_anon`: KSM pages are anonymous too.
    pub fn is_anon(&self, head: Pfn) -> bool {
        matches!(self.mapping(head), Mapping::Anon(_) | Mapping::Ksm(_))
    }

    /// `folio_test_ksm`.
    pub fn is_ksm(&self, head: Pfn) -> bool {
        matches!(self.mapping(head), Mapping::Ksm(_))
    }

    #[inline]
    pub fn refcount(&self, head: Pfn) -> u32 {
        match self.meta(head).refcount {
            REF_ESCAPED => self.big_refs[&(head.0 as u32)],
            r => u32::from(r),
        }
    }

    /// `folio_ref_add`.
    pub(crate) fn get(&mut self, head: Pfn, n: u32) {
        let r = self.refcount(head);
        assert!(r > 0, "get on free folio {head}");
        self.set_refcount(head, r.checked_add(n).expect("refcount overflow"));
    }

    /// `folio_ref_sub`; returns true when the count reached zero (the caller frees the folio).
    #[must_use = "a folio whose last reference was dropped must be freed"]
    pub(crate) fn put(&mut self, head: Pfn, n: u32) -> bool {
        let r = self.refcount(head);
        let r = r.checked_sub(n).unwrap_or_else(|| panic!("refcount underflow on {head}"));
        self.set_refcount(head, r);
        r == 0
    }

    /// A reference taken by a holder that is not a mapping or a cache (GUP, IO, isolation).
    pub(crate) fn get_extra(&mut self, head: Pfn) {
        self.get(head, 1);
        self.mapping_to_extra(head);
    }

    /// Drops a [`get_extra`](Folios::get_extra) reference.
    #[must_use = "a folio whose last reference was dropped must be freed"]
    pub(crate) fn put_extra(&mut self, head: Pfn) -> bool {
        self.drop_extra(head, "put_extra without get_extra");
        self.put(head, 1)
    }

    /// Takes one from `head`'s extra count.
    fn drop_extra(&mut self, head: Pfn, missing: &str) {
        let n = self.extra_refs(head).checked_sub(1).unwrap_or_else(|| panic!("{missing}"));
        self.set_extra(head, n);
    }

    /// Hands a [`get_extra`](Folios::get_extra) reference over to a new mapping (the fault's
    /// reference becomes the PTE's): the refcount is unchanged.
    pub(crate) fn extra_to_mapping(&mut self, head: Pfn) {
        self.drop_extra(head, "no extra reference to hand over");
    }

    /// The reverse: a mapping's reference kept by the unmapper until the TLB flush (the
    /// kernel's `mmu_gather`), then dropped with [`put_extra`](Folios::put_extra).
    pub(crate) fn mapping_to_extra(&mut self, head: Pfn) {
        let n = self.extra_refs(head).checked_add(1).expect("extra reference overflow");
        self.set_extra(head, n);
    }

    /// A FOLL_PIN pin (`try_grab_folio` with FOLL_PIN): `GUP_PIN_COUNTING_BIAS` references on a
    /// small folio; one reference and one `pincount` on a large one.
    pub(crate) fn pin(&mut self, head: Pfn) {
        match self.large.get_mut(&(head.0 as u32)) {
            Some(l) => {
                l.pincount += 1;
                self.get(head, 1);
            }
            None => {
                *self.pins.entry(head.0 as u32).or_default() += 1;
                self.get(head, GUP_PIN_COUNTING_BIAS);
            }
        }
    }

    /// `unpin_user_page`; returns true when the last reference went (the caller frees).
    #[must_use = "a folio whose last reference was dropped must be freed"]
    pub(crate) fn unpin(&mut self, head: Pfn) -> bool {
        match self.large.get_mut(&(head.0 as u32)) {
            Some(l) => {
                l.pincount = l.pincount.checked_sub(1).expect("unpin of an unpinned large folio");
                self.put(head, 1)
            }
            None => {
                let p = self.pins.get_mut(&(head.0 as u32)).expect("unpin of an unpinned folio");
                *p -= 1;
                if *p == 0 {
                    self.pins.remove(&(head.0 as u32));
                }
                self.put(head, GUP_PIN_COUNTING_BIAS)
            }
        }
    }

    /// `folio_maybe_dma_pinned`: what the kernel can tell from the counts (a small folio with
    /// 1024 or more references may be pinned; no false negatives).
    pub fn maybe_dma_pinned(&self, head: Pfn) -> bool {
        match self.large(head) {
            Some(l) => l.pincount > 0,
            None => self.refcount(head) >= GUP_PIN_COUNTING_BIAS,
        }
    }

    /// The references pins account for (for the refcount checker).
    pub fn pin_refs(&self, head: Pfn) -> u32 {
        match self.large(head) {
            Some(l) => l.pincount,
            None => self.pins.get(&(head.0 as u32)).copied().unwrap_or(0) * GUP_PIN_COUNTING_BIAS,
        }
    }

    #[inline]
    pub fn extra_refs(&self, head: Pfn) -> u32 {
        match self.extra.get(head.0 as usize).copied() {
            None => 0,
            Some(EXTRA_ESCAPED) => self.big_extra[&(head.0 as u32)],
            Some(n) => u32::from(n),
        }
    }

    #[inline]
    pub fn page_mapcount(&self, pfn: Pfn) -> u32 {
        match self.meta(pfn).map_lru & MAP_MASK {
            MAP_ESCAPED => self.big_maps[&(pfn.0 as u32)],
            m => u32::from(m),
        }
    }

    /// `folio_mapcount`: PTE mappings of all pages plus PMD mappings.
    pub fn folio_mapcount(&self, head: Pfn) -> u32 {
        match self.large(head) {
            None => self.page_mapcount(head),
            Some(l) => {
                let ptes: u32 = (0..1u64 << l.order).map(|i| self.page_mapcount(head + i)).sum();
                ptes + l.entire_mapcount
            }
        }
    }

    /// PMD mappings of a large folio (`folio_entire_mapcount`); 0 for a small one.
    pub fn entire_mapcount(&self, head: Pfn) -> u32 {
        if self.meta(head).flags & pg::HEAD == 0 {
            return 0;
        }
        self.large(head).map_or(0, |l| l.entire_mapcount)
    }

    /// A new PMD mapping of a large folio; returns whether it is the first.
    pub(crate) fn inc_entire_mapcount(&mut self, head: Pfn) -> bool {
        let l = self.large.get_mut(&(head.0 as u32)).expect("PMD mapping of a small folio");
        l.entire_mapcount += 1;
        l.entire_mapcount == 1
    }

    /// A PMD mapping of a large folio goes; returns whether it was the last.
    pub(crate) fn dec_entire_mapcount(&mut self, head: Pfn) -> bool {
        let l = self.large.get_mut(&(head.0 as u32)).expect("PMD unmapping of a small folio");
        l.entire_mapcount = l
            .entire_mapcount
            .checked_sub(1)
            .unwrap_or_else(|| panic!("entire mapcount underflow on {head}"));
        l.entire_mapcount == 0
    }

    pub(crate) fn inc_mapcount(&mut self, pfn: Pfn) {
        let m = self.page_mapcount(pfn);
        assert!(m < u32::from(u16::MAX), "more than 65535 mappings of one page");
        self.set_mapcount(pfn, m + 1);
    }

    pub(crate) fn dec_mapcount(&mut self, pfn: Pfn) {
        let m = self.page_mapcount(pfn);
        let m = m.checked_sub(1).unwrap_or_else(|| panic!("mapcount underflow on {pfn}"));
        self.set_mapcount(pfn, m);
    }

    /// Pages on `list`.
    pub fn list_pages(&self, list: ListIdx) -> u64 {
        self.lists[list.0 as usize].nr_pages
    }

    /// Puts the folio on `list`: at the head (most recent end), or at the tail with `tail`
    /// (`list_add` / `list_add_tail`).
    pub(crate) fn list_add(&mut self, head: Pfn, list: ListIdx, tail: bool) {
        let nr = self.order(head).pages();
        let h = head.0 as u32;
        let l = &mut self.lists[list.0 as usize];
        let (old_head, old_tail) = (l.head, l.tail);
        l.nr_pages += nr;
        if old_head == NIL {
            l.head = h;
            l.tail = h;
        } else if tail {
            l.tail = h;
        } else {
            l.head = h;
        }
        let (prev, next) = match (old_head == NIL, tail) {
            (true, _) => (NIL, NIL),
            (false, false) => (NIL, old_head),
            (false, true) => (old_tail, NIL),
        };
        if next != NIL {
            self.meta[next as usize].lru_prev = h;
        }
        if prev != NIL {
            self.meta[prev as usize].lru_next = h;
        }
        let m = &mut self.meta[h as usize];
        assert_eq!(m.flags & pg::LRU, 0, "folio {head} already on an LRU list");
        m.flags |= pg::LRU;
        m.lru_prev = prev;
        m.lru_next = next;
    }

    /// Takes the folio off `list` (`list_del`).
    pub(crate) fn list_del(&mut self, head: Pfn, list: ListIdx) {
        let nr = self.order(head).pages();
        let h = head.0 as usize;
        let (prev, next) = (self.meta[h].lru_prev, self.meta[h].lru_next);
        assert_ne!(self.meta[h].flags & pg::LRU, 0, "folio {head} is not on an LRU list");
        let l = &mut self.lists[list.0 as usize];
        if prev == NIL {
            l.head = next;
        } else {
            self.meta[prev as usize].lru_next = next;
        }
        let l = &mut self.lists[list.0 as usize];
        if next == NIL {
            l.tail = prev;
        } else {
            self.meta[next as usize].lru_prev = prev;
        }
        self.lists[list.0 as usize].nr_pages -= nr;
        let m = &mut self.meta[h];
        m.flags &= !pg::LRU;
        m.lru_prev = NIL;
        m.lru_next = NIL;
    }

    /// The least recent folio of `list` (`lru_to_folio`).
    pub fn list_tail(&self, list: ListIdx) -> Option<Pfn> {
        let t = self.lists[list.0 as usize].tail;
        (t != NIL).then(|| Pfn(u64::from(t)))
    }

    /// The folios of `list` from the tail (least recent) to the head.
    pub fn list_iter(&self, list: ListIdx) -> impl Iterator<Item = Pfn> + '_ {
        let mut cur = self.lists[list.0 as usize].tail;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let p = cur;
            cur = self.meta[p as usize].lru_prev;
            Some(Pfn(u64::from(p)))
        })
    }

    /// The memory cgroup a folio is charged to (`folio_memcg`), as its raw id (0, the root, for
    /// a free frame or a tail).
    #[inline]
    pub fn memcg_raw(&self, head: Pfn) -> u16 {
        let m = self.meta(head);
        debug_assert_eq!(m.flags & pg::TAIL, 0, "memcg of tail {head}");
        let sel = (m.map_lru & MEMCG_MASK) >> MEMCG_SHIFT;
        self.memcgs[(head.0 >> GROUP_SHIFT) as usize].get(head.0 as usize % GROUP, sel)
    }

    /// Charges the folio at `head` (or, at a split, each page) to `memcg`; 0 uncharges it.
    pub(crate) fn set_memcg_raw(&mut self, head: Pfn, memcg: u16) {
        let (gi, o) = ((head.0 >> GROUP_SHIFT) as usize, head.0 as usize % GROUP);
        let m = &mut self.meta[head.0 as usize];
        let g = &mut self.memcgs[gi];
        if let Some(f) = &mut g.full {
            f[o] = memcg;
            return;
        }
        let old = (m.map_lru & MEMCG_MASK) >> MEMCG_SHIFT;
        if old != 0 {
            g.uses[usize::from(old) - 1] -= 1;
        }
        let sel = if memcg == 0 { Some(0) } else { g.claim(memcg) };
        match sel {
            Some(k) => m.map_lru = (m.map_lru & !MEMCG_MASK) | (k << MEMCG_SHIFT),
            None => self.memcg_group_full(gi, o, memcg),
        }
    }

    /// Turns memory-cgroup group `gi` full, with `memcg` at offset `o`; clears the selectors.
    #[cold]
    fn memcg_group_full(&mut self, gi: usize, o: usize, memcg: u16) {
        let g = &self.memcgs[gi];
        let mut f = Box::new([0; GROUP]);
        let frames = self.meta.iter_mut().skip(gi * GROUP).take(GROUP);
        for ((i, id), m) in f.iter_mut().enumerate().zip(frames) {
            *id = g.get(i, (m.map_lru & MEMCG_MASK) >> MEMCG_SHIFT);
            m.map_lru &= !MEMCG_MASK;
        }
        f[o] = memcg;
        self.memcgs[gi] = MemcgGroup { full: Some(f), ..MemcgGroup::default() };
    }

    /// The multi-gen LRU generation the folio is on (`folio_lru_gen`), if any.
    #[inline]
    pub fn lru_gen(&self, head: Pfn) -> Option<u8> {
        let g = (self.meta(head).map_lru & GEN_MASK) >> GEN_SHIFT;
        (g != 0).then(|| (g - 1) as u8)
    }

    pub(crate) fn set_lru_gen(&mut self, head: Pfn, generation: Option<u8>) {
        let g = generation.map_or(0, |g| u16::from(g) + 1);
        let m = self.meta_mut(head);
        m.map_lru = (m.map_lru & !GEN_MASK) | (g << GEN_SHIFT);
    }

    /// The 2-bit reference counter of the multi-gen LRU (`LRU_REFS_MASK`).
    #[inline]
    pub fn lru_refs(&self, head: Pfn) -> u8 {
        ((self.meta(head).map_lru & REFS_MASK) >> REFS_SHIFT) as u8
    }

    pub(crate) fn set_lru_refs(&mut self, head: Pfn, refs: u8) {
        debug_assert!(refs < 4);
        let m = self.meta_mut(head);
        m.map_lru = (m.map_lru & !REFS_MASK) | (u16::from(refs) << REFS_SHIFT);
    }

    /// Frames with state (for checkers): every head of an allocated folio.
    pub(crate) fn heads(&self) -> impl Iterator<Item = Pfn> + '_ {
        (0..self.meta.len() as u64)
            .map(Pfn)
            .filter(|&p| self.meta(p).refcount > 0 || self.meta(p).flags & pg::RESERVED != 0)
    }
}

/// Names of the set flags, for dumps.
/// `folio_trylock` (an inline of `pagemap.h`): takes the folio's lock if it is free.
pub(crate) fn folio_trylock(folios: &mut Folios, head: Pfn) -> bool {
    !folios.test_and_set(head, pg::LOCKED)
}

pub fn flag_names(flags: u16) -> Vec<&'static str> {
    (0..16).filter(|b| flags & (1 << b) != 0).map(|b| pg::NAMES[b]).collect()
}

/// The flags `kernel` has, by name: PG_anon_exclusive only from v5.19 (6c287605fd56). Before
/// it the model still marks the pages it maps exclusively (its anon_exclusive rule may be
/// switched on in any era), but a dump of an older kernel shows only that kernel's flags.
pub fn flag_names_on(flags: u16, kernel: crate::era::KernelVersion) -> Vec<&'static str> {
    let hidden = if crate::era::has_page_anon_exclusive(kernel) { 0 } else { pg::ANON_EXCLUSIVE };
    flag_names(flags & !hidden)
}

impl std::fmt::Display for Mapping {
    /// `folio->mapping` in kernel terms: what it points at.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mapping::None => f.write_str("mapping NULL"),
            Mapping::Anon(a) => write!(f, "anon_vma {a}"),
            Mapping::Ksm(s) => write!(f, "ksm_stable_node {s}"),
            Mapping::File(i) => write!(f, "address_space of inode {i}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_folios_have_heads_and_tails() {
        let mut f = Folios::new();
        f.prep_new(Pfn(512), Order::PMD);
        assert_eq!(f.extra_refs(Pfn(512)), 1, "the allocator's reference");
        f.extra_to_mapping(Pfn(512));
        assert_eq!(f.head(Pfn(700)), Pfn(512));
        assert_eq!(f.order(Pfn(512)), Order::PMD);
        f.inc_mapcount(Pfn(513));
        f.inc_mapcount(Pfn(600));
        assert_eq!(f.folio_mapcount(Pfn(512)), 2);
        f.dec_mapcount(Pfn(513));
        f.dec_mapcount(Pfn(600));
        assert!(f.put(Pfn(512), 1));
        assert_eq!(f.clear(Pfn(512)), Order::PMD);
        assert!(!f.is_tail(Pfn(700)));
    }

    #[test]
    fn lru_lists_keep_order() {
        let mut f = Folios::new();
        f.grow_lists(2);
        let (a, b) = (ListIdx(0), ListIdx(1));
        for p in 0..4 {
            f.prep_new(Pfn(p), Order::BASE);
            f.extra_to_mapping(Pfn(p));
            f.list_add(Pfn(p), a, false);
        }
        f.list_del(Pfn(1), a);
        f.list_add(Pfn(1), b, false);
        f.list_del(Pfn(3), a);
        f.list_add(Pfn(3), a, true);
        let inactive: Vec<u64> = f.list_iter(a).map(|p| p.0).collect();
        assert_eq!(inactive, [3, 0, 2], "tail (oldest) first");
        assert_eq!((f.list_pages(a), f.list_pages(b)), (3, 1));
        assert_eq!(f.list_tail(a), Some(Pfn(3)));
        assert!(f.test(Pfn(1), pg::LRU));
        f.set_memcg_raw(Pfn(2), 7);
        f.set_lru_gen(Pfn(2), Some(3));
        f.set_lru_refs(Pfn(2), 2);
        assert_eq!((f.memcg_raw(Pfn(2)), f.lru_gen(Pfn(2)), f.lru_refs(Pfn(2))), (7, Some(3), 2));
        f.set_lru_gen(Pfn(2), None);
        assert_eq!((f.memcg_raw(Pfn(2)), f.lru_gen(Pfn(2)), f.lru_refs(Pfn(2))), (7, None, 2));
    }

    #[test]
    fn large_counts_escape_to_side_tables() {
        let mut f = Folios::new();
        f.prep_new(Pfn(3), Order::BASE);
        f.set_memcg_raw(Pfn(3), 0xffff);
        for _ in 0..300 {
            f.inc_mapcount(Pfn(3));
        }
        f.get(Pfn(3), 70 * GUP_PIN_COUNTING_BIAS);
        assert_eq!((f.page_mapcount(Pfn(3)), f.refcount(Pfn(3))), (300, 1 + 70 * 1024));
        assert_eq!(f.memcg_raw(Pfn(3)), 0xffff);
        for _ in 0..300 {
            f.dec_mapcount(Pfn(3));
        }
        assert!(!f.put(Pfn(3), 70 * GUP_PIN_COUNTING_BIAS));
        assert!(f.big_refs.is_empty() && f.big_maps.is_empty());
        for _ in 0..300 {
            f.get_extra(Pfn(3));
        }
        assert_eq!((f.extra_refs(Pfn(3)), f.big_extra[&3]), (301, 301));
        for _ in 0..300 {
            assert!(!f.put_extra(Pfn(3)));
        }
        assert!(f.big_extra.is_empty() && f.big_refs.is_empty());
        assert_eq!((f.extra_refs(Pfn(3)), f.refcount(Pfn(3))), (1, 1));
        assert_eq!((f.page_mapcount(Pfn(3)), f.refcount(Pfn(3))), (0, 1));
    }

    #[test]
    fn memcgs_take_slots_then_turn_full() {
        let mut f = Folios::new();
        f.prep_new(Pfn(1024), Order::PMD);
        f.set_memcg_raw(Pfn(1024), 9);
        for p in 0..8 {
            f.prep_new(Pfn(p), Order::BASE);
            f.set_memcg_raw(Pfn(p), 100 + p as u16 % 7);
        }
        assert!(f.memcgs[0].full.is_none(), "seven cgroups share a group's slots");
        f.set_memcg_raw(Pfn(6), 0);
        f.set_memcg_raw(Pfn(6), 300);
        assert!(f.memcgs[0].full.is_none(), "a slot no frame selects is reused");
        f.set_memcg_raw(Pfn(9), 0xffff);
        assert!(f.memcgs[0].full.is_some(), "an eighth cgroup turns the group full");
        let read: Vec<u16> = (0..10).map(|p| f.memcg_raw(Pfn(p))).collect();
        assert_eq!(read, [100, 101, 102, 103, 104, 105, 300, 100, 0, 0xffff]);
        assert_eq!((f.memcg_raw(Pfn(1024)), f.head(Pfn(1535))), (9, Pfn(1024)));
        f.extra_to_mapping(Pfn(1024));
        assert!(f.put(Pfn(1024), 1));
        f.clear(Pfn(1024));
        assert_eq!((f.memcg_raw(Pfn(1024)), f.memcgs[2].uses), (0, [0; MEMCG_SLOTS]));
    }

    #[test]
    fn mapping_index_runs_then_full() {
        let mut g = Group::default();
        let (a, b) = (Mapping::Anon(AnonVmaId(4)).pack(), Mapping::File(InodeId(2)).pack());
        for o in 0..10 {
            g.set(o, (a, 100 + o as u32));
        }
        g.set(10, (0, 0));
        for o in 11..20 {
            g.set(o, (a, 99 + o as u32));
        }
        g.set(20, (b, 7));
        assert!(g.full.is_none(), "three runs stay compact");
        assert_eq!(
            (g.get(5), g.get(10), g.get(15), g.get(20)),
            ((a, 105), (0, 0), (a, 114), (b, 7))
        );
        g.set(20, (b, 9));
        assert!(g.full.is_none(), "a run no frame follows is reused");
        g.set(21, (b, 3));
        assert!(g.full.is_some(), "a fourth run turns the group full");
        let read: Vec<_> = [5, 10, 15, 20, 21, 400].iter().map(|&o| g.get(o)).collect();
        assert_eq!(read, [(a, 105), (0, 0), (a, 114), (b, 9), (b, 3), (0, 0)]);
    }

    #[test]
    fn mappings_pack() {
        for m in [Mapping::None, Mapping::Anon(AnonVmaId(7)), Mapping::File(InodeId(0))] {
            assert_eq!(Mapping::unpack(m.pack()), m);
        }
        assert_eq!(flag_names(pg::DIRTY | pg::LRU), ["dirty", "lru"]);
        let flags = pg::LRU | pg::ANON_EXCLUSIVE;
        let on = |minor| flag_names_on(flags, crate::era::KernelVersion::new(5, minor));
        assert_eq!((on(12), on(19)), (vec!["lru"], vec!["lru", "anon_exclusive"]));
        assert_eq!(Mapping::File(InodeId(3)).to_string(), "address_space of inode 3");
    }
}
