//! The hugetlb checker, run with the whole-system checkers (`sim/check.rs`) after every step in
//! tests and under the explorer (B.8 of the reference).
//!
//! Always: each pool's counters equal a recount of its pages (B-INV6's pool half); every entry
//! mapping a hugetlb page maps the head of a page in use, counted once per entry however many
//! mms share the table, and the mapcounts equal those entries; the page cache and the pages
//! agree; no fault used a table that had been unshared or freed under it (B-INV4). When no
//! fault, zap, `fallocate` or truncation is running on a file: no page of it lies wholly at or
//! beyond its end (B-INV1), except those `fallocate(FALLOC_FL_KEEP_SIZE)` placed there since the
//! last truncation. When none is running on any file: each shared PMD table's share count is
//! the number of PUDs pointing at it, less one (B-INV7); every page's refcount is its page-cache
//! reference plus its mappings plus its GUP references (pins among them), and a page out of the
//! cache and unmapped is held by GUP; `HugePages_Rsvd` equals the reservations the maps promise and
//! pages have not consumed, plus what a subpool holds of its minimum (B-INV6).

use crate::kernel::KState;
use crate::pgtable::{Pte, Upper};
use crate::types::hugetlb::{HugeSize, Owner};
use crate::types::ids::PtId;
use crate::vma::VmFlags;
use std::collections::BTreeMap;

/// What a walk of every mm's page tables finds: each leaf entry that maps a hugetlb page,
/// once per table slot however many mms share the table, and how many PUDs point at each PMD
/// table.
#[derive(Default)]
struct Walk {
    entries: BTreeMap<(PtId, usize), Pte>,
    pointers: BTreeMap<PtId, u32>,
}

fn walk_tables(st: &KState) -> Walk {
    let mut w = Walk::default();
    let leaf = |w: &mut Walk, t: PtId, i: usize, e: Pte| {
        if e.is_present() && st.hugetlb.containing(e.pfn()).is_some() {
            w.entries.insert((t, i), e);
        }
    };
    for (_, m) in st.mms.iter() {
        let Some(m) = m else { continue };
        for pgd_i in 0..512 {
            let Upper::Table(pud) = st.pt.upper(m.pgd, pgd_i) else { continue };
            for pud_i in 0..512 {
                match st.pt.upper(pud, pud_i) {
                    Upper::Leaf(e) => leaf(&mut w, pud, pud_i, e),
                    Upper::Table(pmd) => {
                        *w.pointers.entry(pmd).or_default() += 1;
                        if w.pointers[&pmd] > 1 {
                            continue;
                        }
                        for pmd_i in 0..512 {
                            if let Upper::Leaf(e) = st.pt.upper(pmd, pmd_i) {
                                leaf(&mut w, pmd, pmd_i, e);
                            }
                        }
                    }
                    Upper::None => {}
                }
            }
        }
    }
    w
}

/// Runs the hugetlb checks.
pub fn check_hugetlb(st: &KState) -> Result<(), String> {
    if let Some(s) = &st.hugetlb.stale_ptep {
        return Err(s.clone());
    }
    if !st.hugetlb.in_use() {
        return Ok(());
    }
    check_pools(st)?;
    let walk = walk_tables(st);
    let entries = &walk.entries;
    let mut mapcount: BTreeMap<u64, u32> = BTreeMap::new();
    for (&(t, i), e) in entries {
        let p = st.hugetlb.page(e.pfn()).ok_or_else(|| {
            format!("hugetlb entry {i} of table {t} maps {:?}, not the head of a hugetlb page", e)
        })?;
        if p.owner == Owner::Free {
            return Err(format!("hugetlb entry {i} of table {t} maps free page {}", e.pfn()));
        }
        *mapcount.entry(e.pfn().0).or_default() += 1;
    }
    for (&pfn, p) in &st.hugetlb.pages {
        let mapped = mapcount.get(&pfn).copied().unwrap_or(0);
        if p.mapcount != mapped {
            return Err(format!(
                "huge page {pfn:#x}: mapcount {} but {mapped} entries",
                p.mapcount
            ));
        }
    }
    check_cache(st)?;
    if st.hugetlb.inodes.values().all(|i| i.busy == 0) {
        // A fault takes its share before it sets its PUD under the table's lock.
        check_shares(st, &walk.pointers)?;
        check_quiescent(st)?;
    }
    Ok(())
}

/// Each pool's counters against its pages.
fn check_pools(st: &KState) -> Result<(), String> {
    for size in HugeSize::ALL {
        let h = st.hugetlb.hstate(size);
        let pages = st.hugetlb.pages.values().filter(|p| p.size == size);
        let nr = pages.clone().count() as u64;
        let free = pages.filter(|p| p.owner == Owner::Free).count() as u64;
        if h.nr != nr || h.free != free || h.free_list.len() as u64 != free {
            return Err(format!(
                "{}: nr_hugepages {} free {} ({} listed), but {nr} pages of which {free} free",
                size.sysfs_name(),
                h.nr,
                h.free,
                h.free_list.len()
            ));
        }
        if h.resv > h.free || h.surplus > h.nr {
            return Err(format!(
                "{}: {} reserved of {} free, {} surplus of {}",
                size.sysfs_name(),
                h.resv,
                h.free,
                h.surplus,
                h.nr
            ));
        }
    }
    Ok(())
}

/// The page caches against the pages' owners, and B-INV1 for files nobody is changing.
fn check_cache(st: &KState) -> Result<(), String> {
    for (&inode, hi) in &st.hugetlb.inodes {
        // A page holds bytes below `i_size` when its index is below the size rounded up: a
        // one-byte file (`fallocate(fd, 0, 0, 1)`) has page 0 (`hugetlbfs_fallocate` allocates
        // every page the range touches). `FALLOC_FL_KEEP_SIZE` may place pages past the end.
        let eof = st.inodes[inode].size.div_ceil(hi.size.bytes()).max(hi.kept_end);
        for (&index, &pfn) in &hi.cache {
            let owner = st.hugetlb.page(pfn).map(|p| p.owner);
            if owner != Some(Owner::Cache { inode, index }) {
                return Err(format!(
                    "page cache of inode {inode} at {index} holds {pfn} owned by {owner:?}"
                ));
            }
            if hi.busy == 0 && index >= eof {
                return Err(format!(
                    "huge page {pfn} at index {index} of {} lies beyond its end ({} bytes) after truncation",
                    st.inodes[inode].path, st.inodes[inode].size
                ));
            }
        }
    }
    for (&pfn, p) in &st.hugetlb.pages {
        if let Owner::Cache { inode, index } = p.owner
            && st.hugetlb.inodes.get(&inode).and_then(|i| i.cache.get(&index)).map(|p| p.0)
                != Some(pfn)
        {
            return Err(format!("huge page {pfn:#x} claims index {index} of inode {inode}"));
        }
    }
    Ok(())
}

/// B-INV7: share counts against the PUDs pointing at each PMD table.
fn check_shares(st: &KState, pointers: &BTreeMap<PtId, u32>) -> Result<(), String> {
    for (t, &n) in pointers {
        let count = st.hugetlb.pmd_share.get(t).copied().unwrap_or(0);
        if n != count + 1 {
            return Err(format!("PMD table {t}: share count {count} but {n} PUDs point at it"));
        }
    }
    if let Some(t) = st.hugetlb.pmd_share.keys().find(|t| !pointers.contains_key(t)) {
        return Err(format!("PMD table {t} has a share count but no PUD points at it"));
    }
    Ok(())
}

/// With no fault or truncation running: refcounts and the reservation balance.
fn check_quiescent(st: &KState) -> Result<(), String> {
    for (&pfn, p) in &st.hugetlb.pages {
        let cached = u32::from(matches!(p.owner, Owner::Cache { .. }));
        let gup = st.hugetlb.gup_of(simcore::Pfn(pfn));
        if p.owner != Owner::Free && p.refs != cached + p.mapcount + gup.refs {
            return Err(format!(
                "huge page {pfn:#x}: refcount {} but {cached} cache + {} mappings + {} GUP",
                p.refs, p.mapcount, gup.refs
            ));
        }
        if gup.pins > gup.refs || (p.owner == Owner::Free && gup.refs > 0) {
            return Err(format!("huge page {pfn:#x} ({:?}): GUP {gup:?}", p.owner));
        }
        if p.owner == Owner::New && gup.refs == 0 {
            return Err(format!("huge page {pfn:#x} allocated but neither cached nor mapped"));
        }
    }
    for size in HugeSize::ALL {
        // A subpool's minimum is reserved in the pool until its files take it (`subpool.rs`).
        let spool = st.hugetlb.subpool.as_ref().filter(|s| s.size == size).map_or(0, |s| s.rsv);
        let promised = promised_reservations(st, size) + spool;
        let h = st.hugetlb.hstate(size);
        if h.resv != promised {
            return Err(format!(
                "{}: HugePages_Rsvd is {} but the reservation maps promise {promised}",
                size.sysfs_name(),
                h.resv
            ));
        }
    }
    Ok(())
}

/// Reservations not yet consumed: shared maps' indexes without a page, and private owners'
/// unconsumed indexes.
fn promised_reservations(st: &KState, size: HugeSize) -> u64 {
    let shared: u64 = st
        .hugetlb
        .inodes
        .values()
        .filter(|i| i.size == size)
        .map(|i| {
            i.resv.ranges().map(|(f, t)| (t - f) - i.cache.range(f..t).count() as u64).sum::<u64>()
        })
        .sum();
    // A map and range counted once: while mremap moves a private mapping, the old VMA and its
    // copy hold the same map over the same indexes.
    let private: std::collections::BTreeSet<(u32, u64, u64)> = st
        .hugetlb
        .vmas
        .iter()
        .filter(|(v, h)| {
            h.resv.is_some()
                && st.hstate_vma(**v) == Some(size)
                && !st.vma(**v).flags.has(VmFlags::MAYSHARE)
        })
        .map(|(&v, h)| {
            let (start, end) = st.vma_range(v);
            let from = st.huge_index(v, start, size);
            let to = from + (end.offset_from(start).as_u64() >> size.shift());
            (h.resv.expect("filtered"), from, to)
        })
        .collect();
    let private: u64 = private
        .into_iter()
        .map(|(id, from, to)| (to - from) - st.hugetlb.resv_maps[&id].0.count(from, to))
        .sum();
    shared + private
}
