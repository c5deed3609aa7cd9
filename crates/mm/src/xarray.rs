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
//! skip empty subtrees and shadows. Nodes that empty are kept for reuse (a few of each kind,
//! as the `xa_node` slab keeps freed nodes), so eviction and refault allocate nothing.
//!
//! Approximations: a large folio occupies the slot of its first index only (the kernel stores a
//! multi-index entry over all of its slots); a lookup inside it finds it by searching back
//! (`folio_before`). A shadow likewise sits at its folio's first index. Nodes are freed when they
//! empty, but the tree never lowers its height (the kernel's `xas_shrink` does). shmem's swap
//! entries, which the kernel keeps in the same slots, are still `AddressSpace::swapped`.

use crate::workingset::Shadow;
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

/// One node: its slots and which of them (or which subtrees) hold anything, and a folio.
#[derive(Debug)]
struct Node<T> {
    slots: [Option<T>; SLOTS],
    used: u64,
    folios: u64,
}

impl<T> Node<T> {
    fn new() -> Box<Node<T>> {
        Box::new(Node { slots: std::array::from_fn(|_| None), used: 0, folios: 0 })
    }

    fn mark(&mut self, i: usize, used: bool, folio: bool) {
        let bit = 1u64 << i;
        self.used = if used { self.used | bit } else { self.used & !bit };
        self.folios = if folio { self.folios | bit } else { self.folios & !bit };
    }
}

/// A node below the root: a leaf (its slots hold entries) or an inner node.
#[derive(Debug)]
enum Tree {
    Leaf(Box<Node<Slot>>),
    Inner(Box<Node<Tree>>),
}

/// Which entries a search stops at.
#[derive(Clone, Copy)]
enum Find {
    Any,
    Folio,
}

/// Nodes that emptied, kept for the next ones a store needs (the kernel's `xa_node` slab
/// cache), so that a slot which empties and fills again (a folio evicted for its shadow, a
/// shadow taken for a new folio) allocates nothing. An emptied node's slots are all empty.
#[derive(Debug, Default)]
struct Spare {
    /// Empty leaves.
    leaves: Vec<Tree>,
    /// Empty inner nodes.
    inner: Vec<Tree>,
}

/// Most nodes [`Spare`] keeps of each kind: a store frees at most one per level.
const SPARE_KEPT: usize = 16;

impl Spare {
    /// An empty node for slots of `shift`.
    fn node(&mut self, shift: u32) -> Tree {
        if shift == 0 {
            self.leaves.pop().unwrap_or_else(|| Tree::Leaf(Node::new()))
        } else {
            self.inner.pop().unwrap_or_else(|| Tree::Inner(Node::new()))
        }
    }

    /// Keeps an emptied node.
    fn keep(&mut self, node: Tree) {
        debug_assert_eq!(node.masks(), (0, 0), "only empty nodes are kept");
        let pool = match node {
            Tree::Leaf(_) => &mut self.leaves,
            Tree::Inner(_) => &mut self.inner,
        };
        if pool.len() < SPARE_KEPT {
            pool.push(node);
        }
    }
}

impl Tree {
    fn masks(&self) -> (u64, u64) {
        match self {
            Tree::Leaf(n) => (n.used, n.folios),
            Tree::Inner(n) => (n.used, n.folios),
        }
    }

    fn mask(&self, find: Find) -> u64 {
        let (used, folios) = self.masks();
        match find {
            Find::Any => used,
            Find::Folio => folios,
        }
    }

    fn load(&self, shift: u32, index: u64) -> Option<&Slot> {
        let i = ((index >> shift) & MASK) as usize;
        match self {
            Tree::Leaf(n) => n.slots[i].as_ref(),
            Tree::Inner(n) => n.slots[i].as_ref()?.load(shift - SHIFT, index),
        }
    }

    /// Stores `entry` (or clears the slot) at `index`, giving nodes that empty to `spare`; the
    /// old entry.
    fn store(
        &mut self,
        shift: u32,
        index: u64,
        entry: Option<Slot>,
        spare: &mut Spare,
    ) -> Option<Slot> {
        let i = ((index >> shift) & MASK) as usize;
        match self {
            Tree::Leaf(n) => {
                n.mark(i, entry.is_some(), matches!(entry, Some(Slot::Folio { .. })));
                std::mem::replace(&mut n.slots[i], entry)
            }
            Tree::Inner(n) => {
                if n.slots[i].is_none() && entry.is_none() {
                    return None;
                }
                let child = n.slots[i].get_or_insert_with(|| spare.node(shift - SHIFT));
                let old = child.store(shift - SHIFT, index, entry, spare);
                let (used, folios) = child.masks();
                if let Some(empty) = n.slots[i].take_if(|_| used == 0) {
                    spare.keep(empty);
                }
                n.mark(i, used != 0, folios != 0);
                old
            }
        }
    }

    /// The first entry at an index of at least `from` under this node, which covers indices
    /// from `base` (`from` lies below the node's end).
    fn next(&self, shift: u32, base: u64, from: u64, find: Find) -> Option<(u64, &Slot)> {
        let start = (from.saturating_sub(base) >> shift) as u32;
        let mut m = self.mask(find) & (!0u64 << start);
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            let at = base + ((i as u64) << shift);
            match self {
                Tree::Leaf(n) => return n.slots[i].as_ref().map(|e| (at, e)),
                Tree::Inner(n) => {
                    let child = n.slots[i].as_ref()?;
                    if let Some(hit) = child.next(shift - SHIFT, at, from, find) {
                        return Some(hit);
                    }
                }
            }
            m &= m - 1;
        }
        None
    }

    /// The last entry at an index of at most `upto` under this node, which covers indices from
    /// `base` (`upto` is at least `base`).
    fn prev(&self, shift: u32, base: u64, upto: u64, find: Find) -> Option<(u64, &Slot)> {
        let end = ((upto - base) >> shift).min(MASK) as u32;
        let mut m = self.mask(find) & (!0u64 >> (63 - end));
        while m != 0 {
            let i = 63 - m.leading_zeros() as usize;
            let at = base + ((i as u64) << shift);
            match self {
                Tree::Leaf(n) => return n.slots[i].as_ref().map(|e| (at, e)),
                Tree::Inner(n) => {
                    let child = n.slots[i].as_ref()?;
                    if let Some(hit) = child.prev(shift - SHIFT, at, upto, find) {
                        return Some(hit);
                    }
                }
            }
            m &= !(1u64 << i);
        }
        None
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
#[derive(Debug, Default)]
pub struct XArray {
    root: Option<Tree>,
    /// Levels below and including the root: the root covers indices below `64^height`.
    height: u32,
    spare: Spare,
}

impl XArray {
    /// The shift of the root's slots.
    fn root_shift(&self) -> u32 {
        SHIFT * (self.height - 1)
    }

    /// Whether the tree as high as it is covers `index`.
    fn covers(&self, index: u64) -> bool {
        self.height > 0 && (SHIFT * self.height >= 64 || index >> (SHIFT * self.height) == 0)
    }

    fn load(&self, index: u64) -> Option<&Slot> {
        let root = self.root.as_ref()?;
        if !self.covers(index) {
            return None;
        }
        root.load(self.root_shift(), index)
    }

    /// `xa_store` (`xa_erase` with `None`): the entry that was at `index`.
    pub fn store(&mut self, index: u64, entry: Option<Entry>) -> Option<Entry> {
        if !self.covers(index) {
            entry?; // erasing beyond the tree's reach: nothing is there
            while !self.covers(index) {
                self.height += 1;
                let mut root = self.spare.node(self.root_shift());
                if let (Some(old), Tree::Inner(n)) = (self.root.take(), &mut root) {
                    let (used, folios) = old.masks();
                    n.slots[0] = Some(old);
                    n.mark(0, used != 0, folios != 0);
                }
                self.root = Some(root);
            }
        }
        let slot = entry.map(|e| match e {
            Entry::Folio(head) => Slot::Folio { index, head },
            Entry::Shadow(s) => Slot::Shadow(s),
        });
        let shift = self.root_shift();
        let root = self.root.as_mut().expect("a tree of some height has a root");
        let old = root.store(shift, index, slot, &mut self.spare);
        if root.masks().0 == 0 {
            let empty = self.root.take().expect("the root");
            self.spare.keep(empty);
            self.height = 0;
        }
        old.map(Slot::entry)
    }

    /// `xa_find`: the first entry at an index of at least `from`.
    fn find(&self, from: u64, find: Find) -> Option<(u64, &Slot)> {
        let root = self.root.as_ref()?;
        if !self.covers(from) {
            return None;
        }
        root.next(self.root_shift(), 0, from, find)
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
        std::iter::from_fn(move || {
            let (index, slot) = self.find(from?, find).filter(|&(i, _)| u128::from(i) < end)?;
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
        let root = self.root.as_ref()?;
        let upto = index.checked_sub(1)?;
        let upto = if self.covers(upto) { upto } else { u64::MAX };
        match root.prev(self.root_shift(), 0, upto, Find::Folio)? {
            (i, &Slot::Folio { head, .. }) => Some((i, head)),
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
    }
}
