//! Physical memory and the buddy allocator (`mm/page_alloc.c`, v6.8).
//!
//! Free memory is a set of power-of-two blocks per order, merged with their buddy when freed, as
//! in the kernel. What is not modelled: zones and migrate types (one ZONE_NORMAL), per-CPU page
//! lists (allocation takes the lowest free block, which keeps the simulation's host memory
//! compact), watermarks (they arrive with reclaim).
//!
//! Each order's free blocks are a bitmap over block numbers with summary levels above it
//! ([`FreeBlocks`]), so taking the lowest block, finding the highest and merging a buddy cost a
//! few word operations instead of an ordered-set search. An insertion or removal tests its bit
//! once and climbs the summary levels only when its first-level word turns non-zero or zero.
//!
//! Laziness: the frames above a high-water mark (`bump`) have never been handed out and cost no
//! host memory; a 1 TiB machine starts instantly. Blocks freed back next to the mark return to
//! the untouched region.

use simcore::{Order, Pfn};

/// `MAX_PAGE_ORDER` on x86-64 (v6.8): 4 MiB blocks.
pub const MAX_PAGE_ORDER: u8 = 10;

#[derive(Debug)]
pub(crate) struct BuddyAllocator {
    total: u64,
    /// Frames at or above this pfn were never allocated.
    bump: u64,
    /// Free blocks per order, by head pfn.
    free: Vec<FreeBlocks>,
    nr_free: u64,
}

impl BuddyAllocator {
    pub(crate) fn new(total_pages: u64) -> BuddyAllocator {
        BuddyAllocator {
            total: total_pages,
            bump: 0,
            free: (0..=MAX_PAGE_ORDER).map(FreeBlocks::new).collect(),
            nr_free: total_pages,
        }
    }

    pub(crate) fn total_pages(&self) -> u64 {
        self.total
    }

    pub(crate) fn nr_free(&self) -> u64 {
        self.nr_free
    }

    /// One past the highest frame ever handed out: the extent of per-frame state.
    pub(crate) fn high_water(&self) -> u64 {
        self.bump
    }

    /// Allocates a block of `2^order` frames, or `None` when no block is free.
    pub(crate) fn alloc(&mut self, order: Order) -> Option<Pfn> {
        assert!(order.0 <= MAX_PAGE_ORDER, "order {} above MAX_PAGE_ORDER", order.0);
        let o = usize::from(order.0);
        let pfn = if let Some(found) = (o..self.free.len()).find(|&i| !self.free[i].is_empty()) {
            let head = self.free[found].pop_first().expect("non-empty free list");
            // Split: keep the lower half, free the upper halves down to the wanted order.
            for level in (o..found).rev() {
                self.free[level].insert(head + (1 << level));
            }
            head
        } else {
            self.carve(order)?
        };
        self.nr_free -= order.pages();
        Some(Pfn(pfn))
    }

    /// Takes a block from the never-used region, freeing the alignment gap as blocks.
    fn carve(&mut self, order: Order) -> Option<u64> {
        let head = self.bump.next_multiple_of(order.pages());
        if head + order.pages() > self.total {
            return None;
        }
        let mut gap = self.bump;
        while gap < head {
            let o = (gap.trailing_zeros() as u8).min(MAX_PAGE_ORDER);
            let o = (0..=o).rev().find(|&o| gap + (1 << o) <= head).expect("order 0 fits");
            self.free[usize::from(o)].insert(gap);
            gap += 1 << o;
        }
        self.bump = head + order.pages();
        Some(head)
    }

    /// Frees a block, merging it with free buddies.
    pub(crate) fn free(&mut self, pfn: Pfn, order: Order) {
        let (mut head, mut o) = (pfn.0, order.0);
        assert!(head.is_multiple_of(1 << o), "freeing misaligned block {head:#x} of order {o}");
        assert!(head + (1 << o) <= self.bump, "freeing frame {head:#x} never allocated");
        self.nr_free += order.pages();
        while o < MAX_PAGE_ORDER {
            let buddy = head ^ (1 << o);
            if !self.free[usize::from(o)].remove(buddy) {
                break;
            }
            head = head.min(buddy);
            o += 1;
        }
        debug_assert!(!self.free[usize::from(o)].contains(head), "double free of {head:#x}");
        self.free[usize::from(o)].insert(head);
        // Give blocks at the top back to the untouched region. No other free block ends at the
        // mark (this loop leaves none, and splitting or carving never makes one), so only a
        // block freed right below it starts the search.
        if head + (1 << o) != self.bump {
            return;
        }
        loop {
            let top = (0..self.free.len())
                .filter_map(|i| self.free[i].last().map(|h| (h + (1 << i), i, h)))
                .max();
            match top {
                Some((end, i, h)) if end == self.bump => {
                    self.free[i].remove(h);
                    self.bump = h;
                }
                _ => break,
            }
        }
    }

    /// Takes `pages` frames, aligned to `pages`, from the top of the never-used region, for a
    /// pool that keeps its own per-page state (hugetlb: `alloc_fresh_hugetlb_folio`). `None`
    /// when the top of memory is not aligned that way or has been handed out: the block must lie
    /// wholly above the high-water mark, so no per-frame state ever covers it.
    pub(crate) fn take_top(&mut self, pages: u64) -> Option<Pfn> {
        let head = self.total.checked_sub(pages)?;
        if !head.is_multiple_of(pages) || head < self.bump {
            return None;
        }
        self.total = head;
        self.nr_free -= pages;
        Some(Pfn(head))
    }

    /// Gives back a block [`BuddyAllocator::take_top`] handed out, if it lies at the top of
    /// what the allocator manages; `false` leaves it with the caller.
    pub(crate) fn give_top(&mut self, pfn: Pfn, pages: u64) -> bool {
        if pfn.0 != self.total {
            return false;
        }
        self.total += pages;
        self.nr_free += pages;
        true
    }

    /// Whether `pfn` lies inside a free block (O(orders); for checkers).
    pub(crate) fn is_free(&self, pfn: Pfn) -> bool {
        if pfn.0 >= self.bump {
            return true;
        }
        (0..self.free.len()).any(|o| {
            let head = pfn.0 & !((1u64 << o) - 1);
            self.free[o].contains(head)
        })
    }
}

/// The free blocks of one order, by head pfn, as an ordered set: `levels[0]` has a bit per block
/// number (head >> order), each level above a bit per non-zero word of the level below, and the
/// top level is one word; the lowest and highest blocks are found by descending from the top.
#[derive(Debug)]
struct FreeBlocks {
    order: u8,
    levels: Vec<Vec<u64>>,
    len: u64,
}

/// Word and bit of `n` in a level.
fn word_bit(n: u64) -> (usize, u64) {
    (usize::try_from(n / 64).expect("block number fits the host"), 1 << (n % 64))
}

impl FreeBlocks {
    fn new(order: u8) -> FreeBlocks {
        FreeBlocks { order, levels: vec![vec![0]], len: 0 }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for block number `n`, adding summary levels until the top is one word.
    fn grow(&mut self, n: u64) {
        let mut words = word_bit(n).0 + 1;
        for k in 0.. {
            if k == self.levels.len() {
                let below = &self.levels[k - 1];
                let chunk_bits = |c: &[u64]| {
                    c.iter().enumerate().fold(0, |m, (i, &w)| m | (u64::from(w != 0) << i))
                };
                self.levels.push(below.chunks(64).map(chunk_bits).collect());
            }
            let level = &mut self.levels[k];
            if level.len() < words {
                level.resize(words, 0);
            }
            if level.len() == 1 {
                break;
            }
            words = level.len().div_ceil(64);
        }
    }

    #[inline]
    fn contains(&self, head: u64) -> bool {
        let (w, bit) = word_bit(head >> self.order);
        self.levels[0].get(w).is_some_and(|&x| x & bit != 0)
    }

    #[inline]
    fn insert(&mut self, head: u64) {
        let n = head >> self.order;
        let (w, bit) = word_bit(n);
        // The levels above the first always cover it, so a block inside it needs no growing.
        if w >= self.levels[0].len() {
            self.grow(n);
        }
        let was = self.levels[0][w];
        self.levels[0][w] = was | bit;
        if was & bit != 0 {
            return;
        }
        self.len += 1;
        if was == 0 {
            self.mark_above(n / 64, |word, bit| *word |= bit);
        }
    }

    #[inline]
    fn remove(&mut self, head: u64) -> bool {
        let n = head >> self.order;
        let (w, bit) = word_bit(n);
        let Some(word) = self.levels[0].get_mut(w).filter(|x| **x & bit != 0) else {
            return false;
        };
        *word &= !bit;
        self.len -= 1;
        if *word == 0 {
            self.mark_above(n / 64, |word, bit| *word &= !bit);
        }
        true
    }

    /// Updates the summary levels after word `n` of the first level turned non-zero or zero:
    /// `update` sets or clears its bit in each level above, up to the first word that stays
    /// non-zero either way.
    fn mark_above(&mut self, mut n: u64, update: impl Fn(&mut u64, u64)) {
        for level in &mut self.levels[1..] {
            let (w, bit) = word_bit(n);
            let was = level[w];
            update(&mut level[w], bit);
            if was != 0 && level[w] != 0 {
                break;
            }
            n /= 64;
        }
    }

    /// The lowest (`lowest`) or highest block.
    #[inline]
    fn end(&self, lowest: bool) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let pick =
            |x: u64| u64::from(if lowest { x.trailing_zeros() } else { 63 - x.leading_zeros() });
        // Bit `n` of a level is word `n` of the level below.
        let word = |level: &[u64], n: u64| level[usize::try_from(n).expect("fits the host")];
        let n = self.levels.iter().rev().fold(0, |n, level| n * 64 + pick(word(level, n)));
        Some(n << self.order)
    }

    fn last(&self) -> Option<u64> {
        self.end(false)
    }

    #[inline]
    fn pop_first(&mut self) -> Option<u64> {
        let head = self.end(true)?;
        self.remove(head);
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_lowest_and_merges_buddies() {
        let mut b = BuddyAllocator::new(1 << 20);
        let a = b.alloc(Order(0)).unwrap();
        let c = b.alloc(Order(0)).unwrap();
        assert_eq!((a, c), (Pfn(0), Pfn(1)));
        let huge = b.alloc(Order::PMD).unwrap();
        assert_eq!(huge, Pfn(512), "aligned to its order");
        assert_eq!(b.nr_free(), (1 << 20) - 514);
        // The gap [2, 512) was freed as aligned blocks and serves the next small allocation.
        assert_eq!(b.alloc(Order(1)).unwrap(), Pfn(2));
        b.free(Pfn(2), Order(1));
        b.free(a, Order(0));
        b.free(c, Order(0));
        b.free(huge, Order::PMD);
        assert_eq!(b.nr_free(), 1 << 20);
        assert_eq!(b.high_water(), 0, "everything merged back into the untouched region");
        assert!(b.is_free(Pfn(5)));
    }

    #[test]
    fn exhaustion_is_none() {
        let mut b = BuddyAllocator::new(4);
        assert!(b.alloc(Order(2)).is_some());
        assert!(b.alloc(Order(0)).is_none());
        assert!(!b.is_free(Pfn(3)));
    }

    #[test]
    fn a_terabyte_machine_costs_nothing_until_touched() {
        let b = BuddyAllocator::new(1 << 28);
        assert_eq!((b.high_water(), b.nr_free()), (0, 1 << 28));
    }
    /// The bitmap set agrees with an ordered set over inserts, removals, lowest and highest.
    #[test]
    fn free_blocks_agree_with_an_ordered_set() {
        let (mut fb, mut set) = (FreeBlocks::new(2), std::collections::BTreeSet::new());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let head = ((x >> 20) % (1 << (x % 22))) << 2;
            match x % 4 {
                0 | 1 => {
                    fb.insert(head);
                    set.insert(head);
                }
                2 => assert_eq!(fb.remove(head), set.remove(&head)),
                _ => assert_eq!(fb.pop_first(), set.pop_first()),
            }
            assert_eq!(fb.last(), set.last().copied());
            assert_eq!(fb.contains(head), set.contains(&head));
            assert_eq!(fb.is_empty(), set.is_empty());
        }
    }
}
