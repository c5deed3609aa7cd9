//! One TLB or walk-cache array: set-associative (fully associative when it has one set), with
//! true LRU or bit-PLRU replacement; every entry carries an ASID tag and a span code (4 KiB, 2 MiB
//! or 1 GiB for TLB entries, the span of a PGD, PUD or PMD entry for walk-cache entries). The
//! payload is opaque here: an entry's frame and rights (`walk.rs`) or a table (`walk_cache.rs`).

use super::geometry::{ArrayGeometry, Replacement, SPAN_SHIFTS, WAY_BITS};
use simcore::VirtAddr;

const TAG_VALID: u64 = 1;
const TAG_ASID_SHIFT: u32 = 4;
const TAG_ASID_MASK: u64 = 0xfff << TAG_ASID_SHIFT;

fn tag(key: u64, span: usize, asid: u32) -> u64 {
    (key << 16) | (u64::from(asid) << TAG_ASID_SHIFT) | ((span as u64) << 1) | TAG_VALID
}

pub(super) fn tag_asid(tag: u64) -> u32 {
    ((tag & TAG_ASID_MASK) >> TAG_ASID_SHIFT) as u32
}

pub(super) fn tag_span(tag: u64) -> usize {
    ((tag >> 1) & 7) as usize
}

pub(super) fn tag_va(tag: u64) -> VirtAddr {
    VirtAddr((tag >> 16) << SPAN_SHIFTS[tag_span(tag)])
}

/// LRU sets at most this wide keep their recency order packed in one word ([`Array::order`]):
/// a touch moves a nibble, and the victim of a full set is the last nibble, instead of a stamp
/// per way and a scan for the oldest (what a C programmer writes for a 16-way set; a 16-way
/// set's order is 8 bytes where its stamps were 128).
const PACKED_MAX_WAYS: usize = 16;

/// `order` with way `w` moved to the front (nibble 0), the ways before it moving back one.
fn move_to_front(order: u64, w: u64) -> u64 {
    // The first nibble equal to `w`: the lowest zero nibble of `order ^ w...w` (the borrow of
    // the subtraction can only mark nibbles above the first zero one).
    let x = order ^ (w * 0x1111_1111_1111_1111);
    let zero = x.wrapping_sub(0x1111_1111_1111_1111) & !x & 0x8888_8888_8888_8888;
    let p = zero.trailing_zeros() / 4;
    debug_assert!(p < 16, "way {w} is not in the order {order:#x}");
    let below = if p == 0 { 0 } else { order & (!0u64 >> (64 - 4 * p)) };
    let above = if p >= 15 { 0 } else { order & (!0u64 << (4 * (p + 1))) };
    (below << 4) | above | w
}

/// Fully associative arrays at least this wide keep an exact index of their tags ([`Wide`]).
const WIDE_MIN_WAYS: usize = 32;

/// The bucket of tag `t` in an index of `1 << bits` buckets (Fibonacci hashing).
fn bucket(t: u64, bits: u32) -> usize {
    (t.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// What a wide fully associative array keeps so that neither a lookup nor a fill scans its ways
/// (the hardware compares every way at once; a scan of 96 would not): an exact hash index of
/// the valid tags (open addressing with linear probing, backward-shift deletion, about four
/// buckets per entry), and for true LRU the recency order as a circular list through the slots
/// and a sentinel, most recent first, with the empty slots at its tail, so the victim of a fill
/// is the tail (an empty slot, else the least recent). Which empty slot a fill takes is not the
/// set-associative rule's (the first way), but no result depends on a slot's position.
#[derive(Clone, Debug)]
struct Wide {
    /// Slot plus one per bucket; 0 is an empty bucket.
    buckets: Box<[u16]>,
    bits: u32,
    /// The LRU list (empty for bit-PLRU): `prev` and `next` per slot, the sentinel last.
    prev: Box<[u16]>,
    next: Box<[u16]>,
}

impl Wide {
    fn new(n: usize, lru: bool) -> Wide {
        let bits = (n * 4).next_power_of_two().trailing_zeros();
        let links = if lru { n + 1 } else { 0 };
        // The list starts as 0, 1, ..., n - 1 after the sentinel (index n).
        let prev = (0..links).map(|i| ((i + links - 1) % links) as u16).collect();
        let next = (0..links).map(|i| ((i + 1) % links) as u16).collect();
        Wide { buckets: vec![0; 1 << bits].into_boxed_slice(), bits, prev, next }
    }

    /// The slot holding `t` among `tags`.
    #[inline]
    fn find(&self, tags: &[u64], t: u64) -> Option<usize> {
        let mask = self.buckets.len() - 1;
        let mut i = bucket(t, self.bits);
        loop {
            let slot = usize::from(self.buckets[i]).checked_sub(1)?;
            if tags[slot] == t {
                return Some(slot);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, t: u64, slot: usize) {
        let mask = self.buckets.len() - 1;
        let mut i = bucket(t, self.bits);
        while self.buckets[i] != 0 {
            i = (i + 1) & mask;
        }
        self.buckets[i] = (slot + 1) as u16;
    }

    /// Drops `t` (held in `tags`), moving the later members of its probe run back.
    fn remove(&mut self, tags: &[u64], t: u64) {
        let mask = self.buckets.len() - 1;
        let mut i = bucket(t, self.bits);
        while tags[usize::from(self.buckets[i]) - 1] != t {
            i = (i + 1) & mask;
        }
        let mut j = (i + 1) & mask;
        while self.buckets[j] != 0 {
            let home = bucket(tags[usize::from(self.buckets[j]) - 1], self.bits);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.buckets[i] = self.buckets[j];
                i = j;
            }
            j = (j + 1) & mask;
        }
        self.buckets[i] = 0;
    }

    fn unlink(&mut self, slot: usize) {
        let (p, n) = (self.prev[slot], self.next[slot]);
        self.next[usize::from(p)] = n;
        self.prev[usize::from(n)] = p;
    }

    /// Puts `slot` after `at` in the list.
    fn link_after(&mut self, at: usize, slot: usize) {
        let n = self.next[at];
        (self.prev[slot], self.next[slot]) = (at as u16, n);
        self.prev[usize::from(n)] = slot as u16;
        self.next[at] = slot as u16;
    }

    /// Whether the array keeps the LRU list (true LRU; bit-PLRU keeps its MRU bits instead).
    fn has_list(&self) -> bool {
        !self.next.is_empty()
    }

    fn sentinel(&self) -> usize {
        self.next.len() - 1
    }

    /// The most recent slot now.
    fn make_most_recent(&mut self, slot: usize) {
        self.unlink(slot);
        self.link_after(self.sentinel(), slot);
    }

    /// An emptied slot: the next fill takes it.
    fn make_next_victim(&mut self, slot: usize) {
        self.unlink(slot);
        let last = usize::from(self.prev[self.sentinel()]);
        self.link_after(last, slot);
    }

    /// The slot a fill takes.
    fn victim(&self) -> usize {
        usize::from(self.prev[self.sentinel()])
    }
}

/// One array's state: tags, payloads and replacement state, set-major.
#[derive(Clone, Debug)]
pub(super) struct Array {
    ways: usize,
    set_mask: u64,
    /// Span codes held, as bits.
    spans: u8,
    plru: bool,
    pub(super) tags: Vec<u64>,
    pub(super) data: Vec<u64>,
    /// Bit-PLRU: the MRU bit; LRU sets wider than [`PACKED_MAX_WAYS`]: last use.
    stamps: Vec<u64>,
    clock: u64,
    /// LRU sets of at most [`PACKED_MAX_WAYS`] ways: each set's recency order, one way number a
    /// nibble, most recent first (the unused nibbles of a narrower set hold 0xf).
    order: Vec<u64>,
    /// The slot of the last hit or fill: touching it again changes no replacement state.
    last: usize,
    /// Valid entries per span code: a lookup skips the spans that hold none (most arrays that
    /// may hold 2 MiB and 1 GiB entries hold only 4 KiB ones).
    span_entries: [u32; 4],
    /// The span codes with valid entries, as bits (those of `span_entries` not zero).
    live: u8,
    /// The index and LRU list of a wide fully associative array.
    wide: Option<Box<Wide>>,
}

impl Array {
    pub(super) fn new(g: &ArrayGeometry, spans: u8) -> Array {
        let n = g.entries as usize;
        let plru = g.replacement == Replacement::BitPlru;
        let wide =
            (g.ways == g.entries && n >= WIDE_MIN_WAYS).then(|| Box::new(Wide::new(n, !plru)));
        let sets = (g.entries / g.ways) as usize;
        let packed = !plru && wide.is_none() && g.ways as usize <= PACKED_MAX_WAYS;
        let first = (0..PACKED_MAX_WAYS as u64)
            .map(|w| if w < u64::from(g.ways) { w } else { 0xf } << (4 * w))
            .fold(0, |a, x| a | x);
        Array {
            ways: g.ways as usize,
            set_mask: u64::from(g.entries / g.ways - 1),
            spans,
            plru,
            tags: vec![0; n],
            data: vec![0; n],
            stamps: if packed { Vec::new() } else { vec![0; n] },
            clock: 0,
            order: if packed { vec![first; sets] } else { Vec::new() },
            last: 0,
            span_entries: [0; 4],
            live: 0,
            wide,
        }
    }

    pub(super) fn holds(&self, span: usize) -> bool {
        self.spans & (1 << span) != 0
    }

    /// The number of the set that holds `key`.
    fn set_of(&self, key: u64) -> usize {
        (key & self.set_mask) as usize
    }

    /// One valid entry of `span` more.
    fn span_added(&mut self, span: usize) {
        self.span_entries[span] += 1;
        self.live |= 1 << span;
    }

    /// One valid entry of `span` fewer.
    fn span_removed(&mut self, span: usize) {
        self.span_entries[span] -= 1;
        if self.span_entries[span] == 0 {
            self.live &= !(1 << span);
        }
    }

    /// The slot holding `va` (at any held span) for `asid`, touched.
    #[inline]
    pub(super) fn lookup(&mut self, va: u64, asid: u32) -> Option<usize> {
        let mut spans = self.live;
        while spans != 0 {
            let span = spans.trailing_zeros() as usize;
            spans &= spans - 1;
            let key = va >> SPAN_SHIFTS[span];
            let t = tag(key, span, asid);
            if self.tags[self.last] == t {
                return Some(self.last);
            }
            if let Some(w) = &self.wide {
                match w.find(&self.tags, t) {
                    Some(slot) => {
                        self.touch(slot, 0);
                        return Some(slot);
                    }
                    None => continue,
                }
            }
            let set = self.set_of(key);
            let base = set * self.ways;
            let ways = &self.tags[base..base + self.ways];
            // Most scans miss: a pass without an early exit (vector compares) tells first.
            if !ways.iter().fold(false, |any, &x| any | (x == t)) {
                continue;
            }
            if let Some(w) = ways.iter().position(|&x| x == t) {
                self.touch(base + w, set);
                return Some(base + w);
            }
        }
        None
    }

    /// Makes `slot`, a way of set number `set`, the set's most recent.
    fn touch(&mut self, slot: usize, set: usize) {
        self.last = slot;
        if let Some(w) = self.wide.as_mut().filter(|w| w.has_list()) {
            w.make_most_recent(slot);
            return;
        }
        let base = set * self.ways;
        if !self.order.is_empty() {
            self.order[set] = move_to_front(self.order[set], (slot - base) as u64);
            return;
        }
        if !self.plru {
            self.clock += 1;
            debug_assert!(self.clock < 1 << (64 - WAY_BITS), "LRU stamps outgrew the rank key");
            self.stamps[slot] = self.clock;
            return;
        }
        self.stamps[slot] = 1;
        let bits = &mut self.stamps[base..base + self.ways];
        if bits.iter().all(|&b| b == 1) {
            bits.fill(0);
            self.stamps[slot] = 1;
        }
    }

    /// Installs `va`'s entry of span `span`, which the array does not hold (every caller fills
    /// after a lookup of it missed), in an invalid way or over the victim.
    pub(super) fn fill(&mut self, va: u64, span: usize, asid: u32, data: u64) {
        debug_assert!(self.holds(span));
        let key = va >> SPAN_SHIFTS[span];
        let t = tag(key, span, asid);
        let slot = self.victim(key);
        debug_assert!(self.tags[slot] != t, "filling {t:#x}, which the array holds");
        let old = self.tags[slot];
        if old != 0 {
            self.span_removed(tag_span(old));
            if let Some(w) = self.wide.as_mut() {
                w.remove(&self.tags, old);
            }
        }
        self.span_added(span);
        self.tags[slot] = t;
        self.data[slot] = data;
        if let Some(w) = self.wide.as_mut() {
            w.insert(t, slot);
        }
        self.touch(slot, self.set_of(key));
    }

    /// The slot a fill of `key` takes: the first empty way of its set, else the victim (bit-PLRU:
    /// the first way whose MRU bit is clear, or way 0; LRU: the oldest stamp, or the LRU list's
    /// tail in a wide array).
    fn victim(&self, key: u64) -> usize {
        if let Some(w) = self.wide.as_ref().filter(|w| w.has_list()) {
            return w.victim();
        }
        let set = self.set_of(key);
        let base = set * self.ways;
        if !self.order.is_empty() {
            let tags = &self.tags[base..base + self.ways];
            let lru = (self.order[set] >> (4 * (self.ways - 1))) & 0xf;
            return base + tags.iter().position(|&x| x == 0).unwrap_or(lru as usize);
        }
        // The first way of least rank, empty ways ranking 0 and valid ones 1 + their MRU bit or
        // their stamp (at least 1): one branch-free pass taking the minimum of rank and way.
        let (tags, stamps) =
            (&self.tags[base..base + self.ways], &self.stamps[base..base + self.ways]);
        let plru = u64::from(self.plru);
        let ranked = tags.iter().zip(stamps).enumerate().map(|(w, (&x, &s))| {
            let rank = if x == 0 { 0 } else { s + plru };
            (rank << WAY_BITS) | w as u64
        });
        base + (ranked.min().unwrap_or(0) & ((1 << WAY_BITS) - 1)) as usize
    }

    /// Empties `slot` (valid).
    fn drop_slot(&mut self, slot: usize) {
        let t = self.tags[slot];
        self.span_removed(tag_span(t));
        if let Some(w) = self.wide.as_mut() {
            w.remove(&self.tags, t);
            if w.has_list() {
                w.make_next_victim(slot);
            }
        }
        self.tags[slot] = 0;
    }

    /// Drops the entries of `asid` that cover `va`.
    pub(super) fn invalidate_va(&mut self, va: u64, asid: u32) {
        for (span, shift) in SPAN_SHIFTS.iter().enumerate() {
            if self.live & (1 << span) == 0 {
                continue;
            }
            let key = va >> shift;
            let t = tag(key, span, asid);
            if let Some(w) = &self.wide {
                if let Some(slot) = w.find(&self.tags, t) {
                    self.drop_slot(slot);
                }
                continue;
            }
            let base = self.set_of(key) * self.ways;
            for slot in base..base + self.ways {
                if self.tags[slot] == t {
                    self.drop_slot(slot);
                }
            }
        }
    }

    pub(super) fn invalidate_asid(&mut self, asid: u32) {
        for slot in 0..self.tags.len() {
            let x = self.tags[slot];
            if x != 0 && tag_asid(x) == asid {
                self.drop_slot(slot);
            }
        }
    }

    pub(super) fn valid(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.tags.iter().zip(&self.data).filter(|(t, _)| **t != 0).map(|(&t, &d)| (t, d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::tlb::sizes;

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
        // The counts of a recount; the live spans are those counted.
        let recount = |a: &Array| {
            let mut n = [0u32; 4];
            for (t, _) in a.valid() {
                n[tag_span(t)] += 1;
            }
            let live = (0..4).filter(|&s| n[s] > 0).fold(0u8, |m, s| m | 1 << s);
            assert_eq!(a.live, live, "live spans of {n:?}");
            n
        };
        a.fill(0x1000, 0, 1, 0x100);
        a.fill(0x20_0000, 1, 1, 0x200);
        assert_eq!(a.span_entries, [1, 1, 0, 0]);
        assert_eq!(a.span_entries, recount(&a));
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
        assert_eq!(a.span_entries, recount(&a));
        assert!(a.lookup(0x7000, 1).is_none());
    }

    /// Given a 64-way fully associative LRU array (which keeps an exact index and an LRU list),
    /// when a long stream
    /// of lookups, fills on misses and invalidations runs, then every hit and miss is the one a
    /// plain list in LRU order gives.
    #[test]
    fn wide_lookups_match_a_plain_lru_list() {
        let a = Array::new(&ArrayGeometry::full(64, sizes::K4), sizes::K4);
        assert!(a.wide.is_some());
        matches_plain_lru_per_set(a);
    }

    /// Given LRU sets of 16 and of 5 ways, which keep their order packed in a word, when random
    /// pages are looked up, filled and invalidated, then each set hits and misses as a plain
    /// least-recently-used list of its ways would.
    #[test]
    fn packed_sets_match_a_plain_lru_list() {
        for (entries, ways) in [(64, 16), (20, 5)] {
            let a = Array::new(&ArrayGeometry::new(entries, ways, sizes::K4), sizes::K4);
            assert!(!a.order.is_empty() && a.stamps.is_empty());
            matches_plain_lru_per_set(a);
        }
    }

    /// Drives `a` with lookups (a fill after each miss) and invalidations of 100 pages, checking
    /// every lookup against a plain LRU list per set.
    fn matches_plain_lru_per_set(mut a: Array) {
        let sets = a.set_mask as usize + 1;
        let mut model: Vec<Vec<u64>> = vec![Vec::new(); sets]; // most recent last
        let mut x = 7u64;
        for step in 0..20_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let va = ((x >> 33) % 100) << 12;
            let set = &mut model[((va >> 12) & a.set_mask) as usize];
            if step % 97 == 0 {
                a.invalidate_va(va, 1);
                set.retain(|&m| m != va);
                continue;
            }
            let hit = a.lookup(va, 1).is_some();
            let pos = set.iter().position(|&m| m == va);
            assert_eq!(hit, pos.is_some(), "step {step}, va {va:#x}");
            if let Some(p) = pos {
                set.remove(p);
            } else {
                a.fill(va, 0, 1, va);
                if set.len() == a.ways {
                    set.remove(0);
                }
            }
            set.push(va);
        }
    }

    /// Moving a way to the front keeps the others in order, wherever it was.
    #[test]
    fn move_to_front_keeps_the_order_of_the_others() {
        let order = 0xfedc_ba98_7654_3210u64; // way 0 most recent
        assert_eq!(move_to_front(order, 0), order);
        assert_eq!(move_to_front(order, 5), 0xfedc_ba98_7643_2105);
        assert_eq!(move_to_front(order, 15), 0xedcb_a987_6543_210f);
        assert_eq!(move_to_front(0xffff_ffff_fff0_1234, 0), 0xffff_ffff_fff1_2340);
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
}
