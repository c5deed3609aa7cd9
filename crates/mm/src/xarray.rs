//! The page cache's index, shaped like the xarray (`lib/xarray.c`, `include/linux/xarray.h`,
//! Linux v6.8): one per `address_space` (`i_pages`), a radix tree of 64-slot nodes
//! (`XA_CHUNK_SHIFT` = 6) whose height grows with the largest index stored, so a lookup is a
//! fixed number of node steps (O(1) for a file of bounded size, however dense).
//!
//! A slot holds a folio or a workingset shadow entry, as the kernel's slots hold a folio pointer
//! or a value entry: reclaim replaces the folio by its shadow in the same slot
//! (`__filemap_remove_folio` → `page_cache_delete`, `xas_store(&xas, shadow)`, mm/filemap.c) and
//! an insertion takes the shadow it finds there (`__filemap_add_folio` returns it through
//! `shadowp` for `workingset_refault`, mm/filemap.c, mm/workingset.c). There is no separate
//! shadow map. Each node keeps two bitmaps over its slots, which subtrees hold anything and which
//! hold a folio (the role of the xarray's marks and `xa_find`'s node scan), so ordered searches
//! skip empty subtrees and shadows. Nodes that empty are kept for reuse (as the `xa_node` slab
//! keeps freed nodes), so eviction and refault allocate nothing.
//!
//! Approximations: a large folio occupies the slot of its first index only (the kernel stores a
//! multi-index entry over all of its slots); a lookup inside it finds it by searching back
//! (`folio_before`). A shadow likewise sits at its folio's first index. Nodes are freed when they
//! empty, but the tree never lowers its height (the kernel's `xas_shrink` does).
//!
//! Host layout: the nodes live in two arenas by id (inner nodes hold their children's ids,
//! leaves their entries), and a node that empties goes on its arena's free list for the next
//! store, so the arenas keep the most nodes the mapping ever had. A store or lookup in one of
//! the last few leaves a store used goes to it directly (`Recent`), and a store that does not
//! change whether that leaf holds anything, or a folio, stops there: its ancestors' marks
//! stay right. Replaying a block trace through the page cache (P6, classic LRU), the xarray's
//! stores and lookups were 15 % of the host instructions before this (a recursive descent
//! through boxed nodes for each). shmem's swap
//! entries, which the kernel keeps in the same slots, are still `AddressSpace::swapped`.

use crate::types::swap::Shadow;
use simcore::Pfn;
use std::ops::{Bound, RangeBounds};

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Folio(Pfn),
    Shadow(Shadow),
}

/// A slot's content: a folio keeps its index beside it (the kernel reads `folio->index`), so
/// ordered walks can lend `(&index, &head)` pairs as an ordered map does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Folio { index: u64, head: Pfn },
    Shadow(Shadow),
}

impl Slot {
    fn entry(self) -> Entry {
        match self {
            Slot::Folio { head, .. } => Entry::Folio(head),
            Slot::Shadow(s) => Entry::Shadow(s),
        }
    }
}

const SHIFT: u32 = 6;
const SLOTS: usize = 1 << SHIFT;
const MASK: u64 = SLOTS as u64 - 1;
/// No node (an empty child slot, no root).
const NIL: u32 = u32::MAX;
/// Levels of a tree that covers every `u64` index.
const MAX_HEIGHT: usize = 64usize.div_ceil(SHIFT as usize);
/// Leaves [`XArray`] remembers as recently used.
const RECENT: usize = 4;

/// One node's occupancy: which slots (or subtrees) hold anything, and which hold a folio (the
/// role of the xarray's marks and `xa_find`'s node scan), so ordered searches skip empty
/// subtrees and shadows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Marks {
    used: u64,
    folios: u64,
}

impl Marks {
    fn set(&mut self, i: usize, used: bool, folio: bool) {
        let bit = 1u64 << i;
        self.used = if used { self.used | bit } else { self.used & !bit };
        self.folios = if folio { self.folios | bit } else { self.folios & !bit };
    }

    /// These marks once the leaf slot `i` holds `slot`.
    fn with(mut self, i: usize, slot: &Option<Slot>) -> Marks {
        self.set(i, slot.is_some(), matches!(slot, Some(Slot::Folio { .. })));
        self
    }

    /// What a parent records of a node with these marks: (holds anything, holds a folio).
    fn summary(self) -> (bool, bool) {
        (self.used != 0, self.folios != 0)
    }

    fn mask(self, find: Find) -> u64 {
        match find {
            Find::Any => self.used,
            Find::Folio => self.folios,
        }
    }
}

/// A node above the leaves: its children's ids.
#[derive(Debug)]
struct Inner {
    slots: [u32; SLOTS],
    marks: Marks,
}

/// A node of the last level: its entries.
#[derive(Debug)]
struct Leaf {
    slots: [Option<Slot>; SLOTS],
    marks: Marks,
}

/// Which entries a search stops at.
#[derive(Clone, Copy)]
enum Find {
    Any,
    Folio,
}

/// The nodes of one tree, by id: inner nodes and leaves in two arenas, with the ids of the
/// nodes that emptied kept for the next ones a store needs (the kernel's `xa_node` slab cache),
/// so that a slot which empties and fills again allocates nothing.
#[derive(Debug, Default)]
struct Nodes {
    inner: Vec<Inner>,
    leaves: Vec<Leaf>,
    free_inner: Vec<u32>,
    free_leaves: Vec<u32>,
}

impl Nodes {
    fn new_inner(&mut self) -> u32 {
        let empty = || Inner { slots: [NIL; SLOTS], marks: Marks::default() };
        take_node(&mut self.inner, &mut self.free_inner, empty)
    }

    /// A new node of `level` (0: a leaf).
    fn new_node(&mut self, level: usize) -> u32 {
        if level > 0 {
            return self.new_inner();
        }
        let empty = || Leaf { slots: std::array::from_fn(|_| None), marks: Marks::default() };
        take_node(&mut self.leaves, &mut self.free_leaves, empty)
    }

    /// Keeps an emptied node of `level` for reuse.
    fn free(&mut self, level: usize, id: u32) {
        if level == 0 {
            debug_assert_eq!(self.leaves[id as usize].marks, Marks::default(), "an empty leaf");
            self.free_leaves.push(id);
        } else {
            debug_assert_eq!(self.inner[id as usize].marks, Marks::default(), "an empty node");
            self.free_inner.push(id);
        }
    }

    fn marks(&self, level: usize, id: u32) -> Marks {
        if level == 0 { self.leaves[id as usize].marks } else { self.inner[id as usize].marks }
    }

    /// The nearest entry from `bound` in direction `dir` (at an index of at least `bound`
    /// going up, of at most `bound` going down) under node `id` of `level`, which covers
    /// indices from `base` (`bound` lies in the node's range or, going up, below it): its
    /// index, slot and leaf.
    fn seek(&self, level: usize, id: u32, base: u64, to: Seek) -> Option<(u64, &Slot, u32)> {
        let shift = SHIFT * level as u32;
        let marks = self.marks(level, id).mask(to.find);
        let mut m = match to.dir {
            Dir::Up => marks & (!0u64 << (to.bound.saturating_sub(base) >> shift) as u32),
            Dir::Down => marks & (!0u64 >> (63 - ((to.bound - base) >> shift).min(MASK) as u32)),
        };
        while m != 0 {
            let i = match to.dir {
                Dir::Up => m.trailing_zeros() as usize,
                Dir::Down => 63 - m.leading_zeros() as usize,
            };
            let at = base + ((i as u64) << shift);
            if level == 0 {
                return self.leaves[id as usize].slots[i].as_ref().map(|e| (at, e, id));
            }
            let child = self.inner[id as usize].slots[i];
            if let Some(hit) = self.seek(level - 1, child, at, to) {
                return Some(hit);
            }
            m &= !(1u64 << i);
        }
        None
    }
}

/// Which way [`Nodes::seek`] searches.
#[derive(Clone, Copy)]
enum Dir {
    Up,
    Down,
}

/// A search: from which index, which way, for which entries.
#[derive(Clone, Copy)]
struct Seek {
    bound: u64,
    dir: Dir,
    find: Find,
}

/// The id of a free node of `arena` (an empty one), or of a new one `empty` makes.
fn take_node<T>(arena: &mut Vec<T>, free: &mut Vec<u32>, empty: impl FnOnce() -> T) -> u32 {
    if let Some(id) = free.pop() {
        return id;
    }
    arena.push(empty());
    u32::try_from(arena.len() - 1).expect("fewer than 2^32 nodes")
}

/// The slot of `index` in its node of `level`.
fn slot_at(index: u64, level: usize) -> usize {
    ((index >> (SHIFT * level as u32)) & MASK) as usize
}

/// Recently used leaves, by `index >> SHIFT`: a store or lookup near the last ones (a readahead
/// batch filling consecutive slots, reclaim emptying the slots of pages it read together) goes
/// straight to its leaf instead of descending from the root, as a kernel caller keeps its
/// `xa_state` on the node between neighbouring operations. A host-side shortcut: it finds what
/// the descent would.
#[derive(Clone, Copy, Debug)]
struct Recent {
    leaves: [(u64, u32); RECENT],
    next: usize,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent { leaves: [(u64::MAX, NIL); RECENT], next: 0 }
    }
}

impl Recent {
    fn find(&self, base: u64) -> Option<u32> {
        self.leaves.iter().find(|&&(b, _)| b == base).map(|&(_, id)| id)
    }

    fn remember(&mut self, base: u64, id: u32) {
        self.leaves[self.next] = (base, id);
        self.next = (self.next + 1) % RECENT;
    }

    /// Forgets the leaf `id` (it emptied and went back to the free list).
    fn forget(&mut self, id: u32) {
        for l in &mut self.leaves {
            if l.1 == id {
                *l = (u64::MAX, NIL);
            }
        }
    }
}

/// A large folio whose slots `page_cache_delete_batch` is emptying one index after another, in
/// the eras that stored it in each of its slots (`era::thp_cached_per_index`, before v5.17): it
/// has left the index and its accounting already, and the slots `[next, end)` still hold its
/// head for a lockless lookup (`truncate.rs`). The deleter holds the mapping's `xa_lock`, so a
/// mapping has at most one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClearingSlots {
    pub head: Pfn,
    /// The folio's first index.
    pub index: u64,
    /// The first slot not yet emptied.
    pub next: u64,
    pub end: u64,
}

/// The slots of a collapse in progress that hold its new huge page in place of the old pages (or
/// holes), in the eras that replaced them one index at a time (`era::collapse_replaces_per_index`,
/// before v6.4): `[from, filled)`. The collapse fills them upward as it takes each old page; a
/// rollback empties them upward as it puts each back. Only the lookups of truncation consult them
/// (`truncate.rs`); a mapping has at most one collapse at a time (khugepaged and `MADV_COLLAPSE`
/// both hold the old pages' locks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollapseSlots {
    pub new: Pfn,
    /// The first index of the range (the new page's index).
    pub start: u64,
    pub from: u64,
    pub filled: u64,
}

impl CollapseSlots {
    /// The first slot at or after `index` that holds the new page, if any.
    pub fn first_at_or_after(&self, index: u64) -> Option<u64> {
        let at = index.max(self.from);
        (at < self.filled).then_some(at)
    }

    /// Whether the old page at `index` has been replaced by the new page.
    pub fn replaced(&self, index: u64) -> bool {
        (self.from..self.filled).contains(&index)
    }
}

/// A mapping's page-cache index (`struct xarray`).
#[derive(Debug)]
pub struct XArray {
    nodes: Nodes,
    /// The root node's id (`NIL`: an empty tree).
    root: u32,
    /// Levels below and including the root: the root covers indices below `64^height`; the
    /// root is a leaf when the height is 1.
    height: u32,
    recent: Recent,
}

impl Default for XArray {
    fn default() -> XArray {
        XArray { nodes: Nodes::default(), root: NIL, height: 0, recent: Recent::default() }
    }
}

impl XArray {
    /// The level of the root (0: a leaf).
    fn root_level(&self) -> usize {
        self.height as usize - 1
    }

    /// Whether the tree as high as it is covers `index`.
    fn covers(&self, index: u64) -> bool {
        self.height > 0 && (SHIFT * self.height >= 64 || index >> (SHIFT * self.height) == 0)
    }

    /// The leaf whose slots hold `index`, if the tree has one.
    fn leaf_of(&self, index: u64) -> Option<u32> {
        if let Some(id) = self.recent.find(index >> SHIFT) {
            return Some(id);
        }
        if !self.covers(index) {
            return None;
        }
        let mut id = self.root;
        for level in (1..=self.root_level()).rev() {
            id = self.nodes.inner[id as usize].slots[slot_at(index, level)];
            if id == NIL {
                return None;
            }
        }
        Some(id)
    }

    fn load(&self, index: u64) -> Option<&Slot> {
        let leaf = self.leaf_of(index)?;
        self.nodes.leaves[leaf as usize].slots[slot_at(index, 0)].as_ref()
    }

    /// `xa_store` (`xa_erase` with `None`): the entry that was at `index`.
    pub fn store(&mut self, index: u64, entry: Option<Entry>) -> Option<Entry> {
        let slot = entry.map(|e| match e {
            Entry::Folio(head) => Slot::Folio { index, head },
            Entry::Shadow(s) => Slot::Shadow(s),
        });
        // A leaf in use whose summary (holds anything, holds a folio) the store leaves alone:
        // its ancestors' marks stay right and nothing empties.
        if let Some(leaf) = self.recent.find(index >> SHIFT) {
            let l = &mut self.nodes.leaves[leaf as usize];
            let i = slot_at(index, 0);
            let marks = l.marks.with(i, &slot);
            if marks.summary() == l.marks.summary() {
                l.marks = marks;
                return std::mem::replace(&mut l.slots[i], slot).map(Slot::entry);
            }
        }
        if !self.covers(index) {
            slot?; // erasing beyond the tree's reach: nothing is there
            self.raise(index);
        }
        self.store_descending(index, slot).map(Slot::entry)
    }

    /// Adds levels above the root until the tree covers `index`.
    fn raise(&mut self, index: u64) {
        if self.root == NIL {
            self.height = 1;
            while !self.covers(index) {
                self.height += 1;
            }
            self.root = self.nodes.new_node(self.root_level());
            return;
        }
        while !self.covers(index) {
            let (old, level) = (self.root, self.root_level());
            let (used, folios) = self.nodes.marks(level, old).summary();
            self.height += 1;
            self.root = self.nodes.new_inner();
            let n = &mut self.nodes.inner[self.root as usize];
            n.slots[0] = old;
            n.marks.set(0, used, folios);
        }
    }

    /// The store from the root: nodes made on the way down, marks set and emptied nodes freed
    /// on the way up.
    fn store_descending(&mut self, index: u64, slot: Option<Slot>) -> Option<Slot> {
        let mut path = [NIL; MAX_HEIGHT];
        let mut id = self.root;
        for level in (1..=self.root_level()).rev() {
            path[level] = id;
            let i = slot_at(index, level);
            let mut child = self.nodes.inner[id as usize].slots[i];
            if child == NIL {
                slot?; // erasing where nothing is
                child = self.nodes.new_node(level - 1);
                self.nodes.inner[id as usize].slots[i] = child;
            }
            id = child;
        }
        path[0] = id;
        let leaf = &mut self.nodes.leaves[id as usize];
        let i = slot_at(index, 0);
        leaf.marks = leaf.marks.with(i, &slot);
        let old = std::mem::replace(&mut leaf.slots[i], slot);
        self.recent.remember(index >> SHIFT, id);
        self.update_marks(index, &path);
        old
    }

    /// Sets the marks of the nodes above the leaf on `path` from their children's, freeing
    /// the nodes that emptied (the root too: the tree is then empty).
    fn update_marks(&mut self, index: u64, path: &[u32; MAX_HEIGHT]) {
        for level in 0..self.root_level() {
            let child = path[level];
            let (used, folios) = self.nodes.marks(level, child).summary();
            let parent = &mut self.nodes.inner[path[level + 1] as usize];
            let i = slot_at(index, level + 1);
            parent.marks.set(i, used, folios);
            if !used {
                parent.slots[i] = NIL;
                self.free_node(level, child);
            }
        }
        let level = self.root_level();
        if !self.nodes.marks(level, self.root).summary().0 {
            self.free_node(level, self.root);
            self.root = NIL;
            self.height = 0;
        }
    }

    fn free_node(&mut self, level: usize, id: u32) {
        if level == 0 {
            self.recent.forget(id);
        }
        self.nodes.free(level, id);
    }

    /// `xa_find`: the first entry at an index of at least `from`, with its leaf.
    fn find(&self, from: u64, find: Find) -> Option<(u64, &Slot, u32)> {
        if !self.covers(from) {
            return None;
        }
        self.nodes.seek(self.root_level(), self.root, 0, Seek { bound: from, dir: Dir::Up, find })
    }

    /// Slots at indices in `range`, in index order.
    fn slots(
        &self,
        range: impl RangeBounds<u64>,
        find: Find,
    ) -> impl Iterator<Item = (u64, &Slot)> {
        let mut from = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => u128::from(e) + 1,
            Bound::Excluded(&e) => u128::from(e),
            Bound::Unbounded => u128::MAX,
        };
        // The leaf of the last entry found, by number (`index >> SHIFT`): the next entry is
        // searched there first, and from the root only when that leaf has no more.
        let mut leaf: Option<(u64, u32)> = None;
        std::iter::from_fn(move || {
            let f = from?;
            let near = leaf.filter(|&(n, _)| n == f >> SHIFT).and_then(|(n, id)| {
                self.nodes.seek(0, id, n << SHIFT, Seek { bound: f, dir: Dir::Up, find })
            });
            let (index, slot, id) = near.or_else(|| self.find(f, find))?;
            if u128::from(index) >= end {
                from = None;
                return None;
            }
            leaf = Some((index >> SHIFT, id));
            from = index.checked_add(1);
            Some((index, slot))
        })
    }

    /// The head of the folio whose first index is `index`.
    pub fn get(&self, index: &u64) -> Option<&Pfn> {
        match self.load(*index) {
            Some(Slot::Folio { head, .. }) => Some(head),
            _ => None,
        }
    }

    /// The folios whose first index lies in `range`, as `(&index, &head)` in index order.
    pub fn range(&self, range: impl RangeBounds<u64>) -> impl Iterator<Item = (&u64, &Pfn)> {
        self.slots(range, Find::Folio).filter_map(|(_, slot)| match slot {
            Slot::Folio { index, head } => Some((index, head)),
            Slot::Shadow(_) => None,
        })
    }

    /// Every cached folio, as `(&index, &head)` in index order.
    pub fn iter(&self) -> impl Iterator<Item = (&u64, &Pfn)> {
        self.range(..)
    }

    /// The head of every cached folio, in index order.
    pub fn values(&self) -> impl Iterator<Item = &Pfn> {
        self.iter().map(|(_, head)| head)
    }

    /// The folio with the highest first index below `index` (`xas_find` backwards).
    pub fn folio_before(&self, index: u64) -> Option<(u64, Pfn)> {
        if self.root == NIL {
            return None;
        }
        let upto = index.checked_sub(1)?;
        let upto = if self.covers(upto) { upto } else { u64::MAX };
        let to = Seek { bound: upto, dir: Dir::Down, find: Find::Folio };
        match self.nodes.seek(self.root_level(), self.root, 0, to)? {
            (i, &Slot::Folio { head, .. }, _) => Some((i, head)),
            _ => None,
        }
    }

    /// The shadow entry at `index`.
    pub fn shadow(&self, index: u64) -> Option<Shadow> {
        match self.load(index) {
            Some(&Slot::Shadow(s)) => Some(s),
            _ => None,
        }
    }

    /// Every entry at indices in `range`, folios and shadows, in index order (`xas_for_each`).
    pub fn entries(&self, range: impl RangeBounds<u64>) -> impl Iterator<Item = (u64, Entry)> {
        self.slots(range, Find::Any).map(|(i, slot)| (i, slot.entry()))
    }

    /// The shadow entries at indices in `range`, in index order.
    pub fn shadows(&self, range: impl RangeBounds<u64>) -> impl Iterator<Item = (u64, Shadow)> {
        self.slots(range, Find::Any).filter_map(|(i, slot)| match *slot {
            Slot::Shadow(s) => Some((i, s)),
            Slot::Folio { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The xarray agrees with a `BTreeMap` under a pseudo-random mix of stores and erasures
    /// over sparse and dense indices, in lookups, ordered ranges and backward searches.
    #[test]
    fn agrees_with_an_ordered_map() {
        let (mut xa, mut map) = (XArray::default(), BTreeMap::new());
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u64 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let index = if s.is_multiple_of(3) { s % 300 } else { (s >> 8) % (1 << (s % 34)) };
            let entry = match s % 5 {
                0 | 1 => None,
                2 => Some(Entry::Shadow(crate::kernel::KState::make_shadow(
                    crate::memcontrol::ROOT_MEMCG,
                    step,
                    false,
                ))),
                _ => Some(Entry::Folio(Pfn(step))),
            };
            let old = match entry {
                Some(e) => map.insert(index, e),
                None => map.remove(&index),
            };
            assert_eq!(xa.store(index, entry), old);
            assert_eq!(xa.load(index).map(|s| s.entry()).as_ref(), map.get(&index));
            let folios = |a: u64, b: u64| {
                map.range(a..b)
                    .filter_map(|(&i, e)| match e {
                        Entry::Folio(h) => Some((i, *h)),
                        Entry::Shadow(_) => None,
                    })
                    .collect::<Vec<_>>()
            };
            let (a, b) = (index.saturating_sub(s % 1000), index + s % 5000);
            let found: Vec<(u64, Pfn)> = xa.range(a..b).map(|(&i, &h)| (i, h)).collect();
            assert_eq!(found, folios(a, b));
            assert_eq!(xa.folio_before(index), folios(0, index).last().copied());
            let shadows = map.range(a..b).filter(|(_, e)| matches!(e, Entry::Shadow(_))).count();
            assert_eq!(xa.shadows(a..b).count(), shadows);
        }
        assert_eq!(xa.iter().map(|(&i, &h)| (i, h)).collect::<Vec<_>>(), {
            let all = map.iter().filter_map(|(&i, e)| match e {
                Entry::Folio(h) => Some((i, *h)),
                Entry::Shadow(_) => None,
            });
            all.collect::<Vec<_>>()
        });
        // Erasing everything empties the tree and gives every node back to its free list.
        for &index in map.keys() {
            xa.store(index, None);
        }
        assert_eq!((xa.root, xa.height), (NIL, 0));
        assert_eq!(xa.nodes.free_inner.len(), xa.nodes.inner.len());
        assert_eq!(xa.nodes.free_leaves.len(), xa.nodes.leaves.len());
    }
}
