//! The paging-structure caches (Intel SDM Vol. 3A §4.10.3, the PML4E, PDPTE and PDE caches;
//! AMD's page walk cache): for recent walks, the table each upper-level entry points at, so that
//! a walk starts below the deepest level that hits and reads one to four entries instead of four.
//! Entries carry the ASID tag; `invlpg` drops the ASID's entries (SDM: INVLPG invalidates all
//! paging-structure-cache entries of the current PCID), and freeing page tables drops them
//! everywhere (the kernel's `freed_tables` flush).

use super::array::{Array, tag_asid, tag_va};
use super::geometry::ArrayGeometry;
use crate::pgtable::Level;
use crate::types::ids::PtId;
use simcore::VirtAddr;

/// The PGD, PUD and PMD entry caches of one CPU (span codes 3, 2, 1: what an entry of each
/// level covers).
#[derive(Clone, Debug)]
pub(super) struct WalkCaches([Array; 3]);

/// The level whose entries each cache holds.
const LEVELS: [Level; 3] = [Level::Pgd, Level::Pud, Level::Pmd];

impl WalkCaches {
    pub(super) fn new(g: &[ArrayGeometry; 3]) -> WalkCaches {
        WalkCaches([
            Array::new(&g[0], 1 << 3),
            Array::new(&g[1], 1 << 2),
            Array::new(&g[2], 1 << 1),
        ])
    }

    /// Where a walk of `va` may start: the deepest table the caches give (a PMD entry's PTE
    /// table first, then a PUD entry's PMD table, then a PGD entry's PUD table) and its level.
    pub(super) fn lookup(&mut self, va: u64, asid: u32) -> Option<(PtId, Level)> {
        for (i, level) in [(2, Level::Pte), (1, Level::Pmd), (0, Level::Pud)] {
            if let Some(slot) = self.0[i].lookup(va, asid) {
                return Some((PtId(self.0[i].data[slot] as u32), level));
            }
        }
        None
    }

    /// Remembers that the entry of `level` covering `va` points at table `next`.
    pub(super) fn fill(&mut self, level: Level, va: u64, asid: u32, next: PtId) {
        let cache = match level {
            Level::Pgd => 0,
            Level::Pud => 1,
            _ => 2,
        };
        let span = 3 - cache;
        self.0[cache].fill(va, span, asid, u64::from(next.0));
    }

    pub(super) fn invalidate_asid(&mut self, asid: u32) {
        for a in &mut self.0 {
            a.invalidate_asid(asid);
        }
    }

    /// The entries of `asid`, cache by cache: the entry's level, the address it covers and the
    /// table it points at.
    pub(super) fn entries(
        &self,
        asid: usize,
    ) -> impl Iterator<Item = (Level, VirtAddr, PtId)> + '_ {
        self.0.iter().zip(LEVELS).flat_map(move |(cache, level)| {
            cache
                .valid()
                .filter(move |(t, _)| tag_asid(*t) as usize == asid)
                .map(move |(t, data)| (level, tag_va(t), PtId(data as u32)))
        })
    }
}
