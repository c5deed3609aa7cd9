//! hugetlb state (`include/linux/hugetlb.h`): each size's pool (`struct hstate`), the huge
//! pages and who owns them, hugetlbfs inodes and VMAs with their reservations, the subpool of
//! the mount, the fault mutexes, GUP's hold on huge pages, and the PMD tables shared between
//! processes. The code is in `hugetlb.rs` and `hugetlb/`.

use crate::era::HugetlbSync;
use crate::hugetlb::resv::RegionMap;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use engine::Mutex;
use engine::RwSem;
use simcore::Pfn;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// All hugetlb state.
#[derive(Debug)]
pub struct Hugetlb {
    /// The synchronisation scheme (the `hugetlb_sync` switch).
    pub(crate) sync: HugetlbSync,
    /// Makes the locks of VMAs that split or fork (`hugetlb_vma_lock_alloc`).
    pub(crate) handle: engine::Handle,
    /// Era facts the VMA operations need: fork copies only VMAs with private pages
    /// ([`crate::era::hugetlb_lazy_fork_copy`]); `MADV_DONTNEED` works
    /// ([`crate::era::hugetlb_madv_dontneed`]); a split unshares the PMD tables around it
    /// ([`crate::era::hugetlb_split_unshares_pmds`]); private reservation owners have a vma
    /// lock ([`crate::era::hugetlb_private_vma_lock`]); unmapping a private page gives its
    /// reservation back ([`crate::era::hugetlb_zap_restores_reserve`]).
    pub(crate) lazy_fork_copy: bool,
    pub(crate) madv_dontneed: bool,
    pub(crate) split_unshares: bool,
    pub(crate) private_vma_lock: bool,
    pub(crate) zap_restores_reserve: bool,
    /// hugetlbfs knows `min_size=` ([`crate::era::hugetlbfs_has_min_size`]).
    pub(crate) has_min_size: bool,
    pub hstates: [Hstate; 2],
    /// Every pool page, by pfn.
    pub(crate) pages: BTreeMap<u64, HPage>,
    pub(crate) inodes: BTreeMap<InodeId, HInode>,
    pub(crate) vmas: BTreeMap<VmaId, HVma>,
    /// Private reservation maps with their reference counts (`kref`).
    pub(crate) resv_maps: BTreeMap<u32, (RegionMap, u32)>,
    pub(crate) next_resv: u32,
    /// `hugetlb_fault_mutex_table`, made on first use.
    pub(crate) fault_mutexes: Vec<Mutex>,
    /// The GUP references (pins among them) on pages that have any, by head pfn (`gup.rs`;
    /// apart from [`HPage`], which stays a few dozen bytes).
    pub(crate) gup: BTreeMap<u64, HugeGup>,
    /// The subpool of the scenario files' hugetlbfs mount, if mounted with `size=` or
    /// `min_size=` (`subpool.rs`).
    pub(crate) subpool: Option<Subpool>,
    /// Shared PMD tables and how many extra PUDs point at each (the kernel's share count).
    pub(crate) pmd_share: BTreeMap<PtId, u32>,
    /// Each mm's mapped hugetlb memory in base pages (`mm->hugetlb_usage`, an `atomic_long_t`):
    /// the mm that faults a page in counts it and the mm that zaps it uncounts it, so an mm that
    /// got pages through a shared PMD table and zaps them after the table stopped being shared
    /// goes below zero, as the kernel's counter does.
    pub(crate) usage: BTreeMap<MmId, i64>,
    /// The first use of a page-table entry that had been unshared or freed under a fault
    /// (B-INV4), for the checker.
    pub(crate) stale_ptep: Option<String>,
    /// Each pool page's cache lines that CPUs write, by pfn (timing only: not part of the
    /// explorer's fingerprint).
    pub(crate) lines: BTreeMap<u64, FolioLines>,
}

/// A huge page size (an `hstate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HugeSize {
    /// 2 MiB, mapped by a PMD leaf (`Hugepagesize` by default: `default_hugepagesz`).
    Size2M,
    /// 1 GiB, mapped by a PUD leaf (gigantic).
    Size1G,
}

/// The cache lines of a huge page that mapping and unmapping write with atomics: the head
/// `struct page` (`PG_locked` in its flags, `_refcount`) and the first tail page
/// (`compound_mapcount`, `include/linux/mm_types.h`, v6.1).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FolioLines {
    pub(crate) head: engine::CacheLine,
    pub(crate) mapcount: engine::CacheLine,
}

/// A hugetlbfs inode's hugetlb state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HInode {
    pub(crate) size: HugeSize,
    /// The page cache, by huge-page index.
    pub(crate) cache: BTreeMap<u64, Pfn>,
    /// The shared reservation map (`inode->i_mapping->private_data`).
    pub(crate) resv: RegionMap,
    /// Faults and truncations in progress on the file (for the truncation checker, B-INV1).
    pub(crate) busy: u32,
    /// The end (a huge-page index) of the pages `fallocate(FALLOC_FL_KEEP_SIZE)` placed since the
    /// last truncation: they may lie beyond `i_size` (for the truncation checker, B-INV1).
    pub(crate) kept_end: u64,
    /// On the mount with the subpool (`subpool.rs`).
    pub(crate) spool: bool,
}

/// One huge page: what the kernel keeps in the head `struct page` (refcount, mapcount, mapping
/// and index, `PG_locked`, `HPageRestoreReserve`, `PageAnonExclusive`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HPage {
    pub(crate) size: HugeSize,
    pub(crate) owner: Owner,
    pub(crate) refs: u32,
    pub(crate) mapcount: u32,
    pub(crate) locked: bool,
    /// `HPageRestoreReserve`: freeing the page before it is committed gives its reservation back.
    pub(crate) restore_reserve: bool,
    /// `PageAnonExclusive` of an anonymous page (read only by the v5.19+ `cow_reuse` rule).
    pub(crate) anon_exclusive: bool,
    /// `hugetlb_folio_subpool`: allocated for a file on the mount with the subpool.
    pub(crate) spool: bool,
}

/// A hugetlb VMA's private data (`vma->vm_private_data`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HVma {
    /// A private mapping's reservation map (shared with the VMAs a split makes), if it owns one.
    pub(crate) resv: Option<u32>,
    /// `HPAGE_RESV_UNMAPPED`: the owner took a page back from this child (SIGBUS on fault).
    pub(crate) unmapped: bool,
    /// The per-VMA hugetlb lock (`struct hugetlb_vma_lock`, v6.1+, shareable VMAs; from v6.6
    /// also a private reservation owner's, the reservation map's `rw_sema`, which the VMAs a
    /// split makes share).
    pub(crate) lock: Option<RwSem>,
    /// Being unmapped for good: no longer a PMD-sharing candidate (`pmd_share.rs`).
    pub(crate) dying: bool,
}

/// One size's pool (`struct hstate`'s counters) and its free list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hstate {
    /// `nr_huge_pages`: every page of this size, surplus included.
    pub nr: u64,
    /// `free_huge_pages`.
    pub free: u64,
    /// `resv_huge_pages`: free pages promised to mappings.
    pub resv: u64,
    /// `surplus_huge_pages`.
    pub surplus: u64,
    /// `nr_overcommit_huge_pages`.
    pub overcommit: u64,
    /// Free pages by pfn (`hugepage_freelists`; lowest address first, for determinism).
    pub(crate) free_list: BTreeSet<u64>,
    /// Frame blocks taken for this size that are not pool pages (see the module note).
    pub(crate) spare: BTreeSet<u64>,
}

/// The GUP references on one huge page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct HugeGup {
    /// References held by GUP callers and pipes (pins included).
    pub(crate) refs: u32,
    /// FOLL_PIN pins (`_pincount` of a large folio).
    pub(crate) pins: u32,
}

/// `struct hugepage_subpool`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Subpool {
    pub(crate) size: HugeSize,
    /// `max_hpages` (`size=`).
    pub(crate) max: Option<u64>,
    /// `min_hpages` (`min_size=`).
    pub(crate) min: Option<u64>,
    /// `used_hpages`: counted only with `size=`.
    pub(crate) used: u64,
    /// `rsv_hpages`: pages of the minimum reserved globally and not yet handed out.
    pub(crate) rsv: u64,
}

/// Who holds a huge page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// On the pool's free list.
    Free,
    /// Allocated, not yet in the page cache or mapped (a fault between allocation and mapping).
    New,
    /// In the page cache of a hugetlbfs inode at a huge-page index.
    Cache { inode: InodeId, index: u64 },
    /// A private (anonymous) page of a private mapping.
    Anon,
}
