//! Reservation maps (`struct resv_map` and its region list in `mm/hugetlb.c`: `region_add`,
//! `region_chg`, `region_del`, `region_count`; Linux v6.1).
//!
//! A reservation map is a set of huge-page indexes, kept as disjoint, merged ranges. For a
//! shared mapping it hangs off the file's inode and holds the indexes that have a reservation or
//! a page in the page cache; for a private mapping it belongs to the VMA that created the
//! reservation (`HPAGE_RESV_OWNER`) and holds the indexes whose reservation has been *consumed*,
//! so the two read in opposite senses (`vma_needs_reservation`).
//!
//! Approximation: the kernel's two-phase `region_chg`/`region_add` with `adds_in_progress` and
//! preallocated `file_region` descriptors guards against allocation failure between the phases;
//! the model's updates are atomic between blocking points, so each call is one step.

use std::collections::BTreeMap;

/// Disjoint ranges `[from, to)` of huge-page indexes, keyed by `from`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegionMap(BTreeMap<u64, u64>);

impl RegionMap {
    /// `region_count`: indexes of `[f, t)` in the map.
    pub fn count(&self, f: u64, t: u64) -> u64 {
        if f >= t {
            return 0;
        }
        let first = self.0.range(..f).next_back().map_or(f, |(&s, _)| s);
        self.0.range(first..t).map(|(&s, &e)| e.min(t).saturating_sub(s.max(f))).sum()
    }

    /// `region_chg`: indexes of `[f, t)` not yet in the map.
    pub fn chg(&self, f: u64, t: u64) -> u64 {
        t.saturating_sub(f) - self.count(f, t)
    }

    /// `region_add`: adds `[f, t)`; returns how many indexes were not in the map before.
    pub fn add(&mut self, f: u64, t: u64) -> u64 {
        if f >= t {
            return 0;
        }
        let added = self.chg(f, t);
        let (mut lo, mut hi) = (f, t);
        let touching: Vec<(u64, u64)> = {
            let first = self.0.range(..=f).next_back().map_or(f, |(&s, _)| s);
            self.0
                .range(first..=t)
                .map(|(&s, &e)| (s, e))
                .filter(|&(s, e)| e >= f && s <= t)
                .collect()
        };
        for (s, e) in touching {
            self.0.remove(&s);
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.0.insert(lo, hi);
        added
    }

    /// `region_del`: removes `[f, t)`; returns how many indexes were in the map.
    pub fn del(&mut self, f: u64, t: u64) -> u64 {
        if f >= t {
            return 0;
        }
        let removed = self.count(f, t);
        let first = self.0.range(..f).next_back().map_or(f, |(&s, _)| s);
        let hit: Vec<(u64, u64)> =
            self.0.range(first..t).map(|(&s, &e)| (s, e)).filter(|&(_, e)| e > f).collect();
        for (s, e) in hit {
            self.0.remove(&s);
            if s < f {
                self.0.insert(s, f);
            }
            if e > t {
                self.0.insert(t, e);
            }
        }
        removed
    }

    /// The ranges, in order (for checkers and fingerprints).
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_merges_and_counts_new_indexes() {
        let mut m = RegionMap::default();
        assert_eq!(m.add(0, 2), 2);
        assert_eq!(m.add(4, 6), 2);
        assert_eq!(m.chg(0, 8), 4);
        assert_eq!(m.add(1, 5), 2);
        assert_eq!(m.ranges().collect::<Vec<_>>(), [(0, 6)]);
        assert_eq!(m.count(3, 10), 3);
    }

    #[test]
    fn del_splits_ranges() {
        let mut m = RegionMap::default();
        m.add(0, 10);
        assert_eq!(m.del(3, 5), 2);
        assert_eq!(m.ranges().collect::<Vec<_>>(), [(0, 3), (5, 10)]);
        assert_eq!(m.del(0, 100), 8);
        assert_eq!(m.count(0, 100), 0);
        assert_eq!(m.del(0, 0), 0);
    }
}
