//! Transparent-hugepage state (`include/linux/huge_mm.h`): the sysfs knobs of
//! `/sys/kernel/mm/transparent_hugepage/` with the era facts the policy needs, tmpfs's
//! `shmem_enabled`, the deferred split queue, and khugepaged's scan position and counters
//! (`mm/khugepaged.c`, `struct khugepaged_scan`). The code is in `huge_memory/` and
//! `khugepaged/`.

use crate::era::FileThp;
use crate::era::KernelVersion;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use simcore::VirtAddr;

/// The policy as the running kernel holds it: the knobs (writable while it runs), and the era
/// facts the predicate needs.
#[derive(Clone, Debug)]
pub struct ThpState {
    pub settings: ThpSettings,
    pub kernel: KernelVersion,
    /// The `file_thp` switch (which files READ_ONLY_THP_FOR_FS backs with THPs).
    pub file_thp: FileThp,
    /// khugepaged's list, cursor and counters (`khugepaged.rs`).
    pub khugepaged: Khugepaged,
    /// The deferred split queue, oldest first (`deferred_split_queue`; `split.rs`).
    pub split_queue: Vec<simcore::Pfn>,
    /// The per-size counters of `hugepages-<N>kB/stats/` (`mthp_stats`), by order.
    pub mthp_stats: [[u64; MthpStat::COUNT]; MTHP_ORDERS],
}

/// Orders `0..MTHP_ORDERS` index the per-size tables: the anonymous THP orders are 2 to 9
/// (`THP_ORDERS_ALL_ANON` on x86-64: 16 KiB to 2 MiB; order 1 is a limit of the THP code).
pub const MTHP_ORDERS: usize = 10;

/// The lowest anonymous THP order (`THP_ORDERS_ALL_ANON`).
pub const MTHP_MIN_ORDER: u8 = 2;

/// A per-size counter of `hugepages-<N>kB/stats/` (`enum mthp_stat_item`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MthpStat {
    AnonFaultAlloc,
    AnonFaultFallback,
    AnonFaultFallbackCharge,
    Swpout,
    SwpoutFallback,
    Split,
    SplitFailed,
    SplitDeferred,
    ShmemAlloc,
    ShmemFallback,
    ShmemFallbackCharge,
}

impl MthpStat {
    pub const COUNT: usize = 11;
}

/// A size's `hugepages-<N>kB/enabled` (v6.8): its own setting, or the top-level `enabled`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MthpEnabled {
    Always,
    Inherit,
    Madvise,
    Never,
}

/// The THP knobs (`transparent_hugepage/` and `transparent_hugepage/khugepaged/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThpSettings {
    pub enabled: ThpEnabled,
    pub defrag: ThpDefrag,
    pub use_zero_page: bool,
    pub pages_to_scan: u64,
    pub scan_sleep_ms: u64,
    pub alloc_sleep_ms: u64,
    pub max_ptes_none: u64,
    pub max_ptes_swap: u64,
    pub max_ptes_shared: u64,
    pub khugepaged_defrag: bool,
    /// `shmem_enabled` (v4.8+, `shmem.rs`).
    pub shmem_enabled: ShmemEnabled,
    /// `hugepages-<N>kB/enabled` of each anonymous order (v6.8+), by order; orders below
    /// [`MTHP_MIN_ORDER`] are unused.
    pub anon_sizes: [MthpEnabled; MTHP_ORDERS],
}

/// `transparent_hugepage/defrag`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpDefrag {
    Always,
    Defer,
    DeferMadvise,
    Madvise,
    Never,
}

/// `transparent_hugepage/enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

/// khugepaged's list of mms and its cursor (`struct khugepaged_scan`), and its counters.
#[derive(Clone, Debug, Default)]
pub struct Khugepaged {
    /// Registered mms, in registration order (`khugepaged_scan.mm_head`).
    pub mm_slots: Vec<MmId>,
    /// The mm being scanned (an index into `mm_slots`) and the next address in it.
    pub cursor: Option<(usize, VirtAddr)>,
    /// `khugepaged/pages_collapsed`.
    pub pages_collapsed: u64,
    /// `khugepaged/full_scans`.
    pub full_scans: u64,
    /// File collapses (khugepaged's and `MADV_COLLAPSE`'s) rolled back after a truncation cut
    /// the file short of their range while they ran: mmsim's own count, read by scenarios as
    /// `model = "collapse_truncated_rollbacks"` (no kernel interface shows it). Nothing depends on
    /// it, so the fingerprint leaves it out.
    pub truncated_rollbacks: u64,
    /// Truncations whose lookup found a collapse's new page in a page-cache slot (before v6.4,
    /// `xarray::CollapseSlots`) and waited for its lock: mmsim's own count, read by scenarios as
    /// `inspect = "collapse_slot_truncations"`. Left out of the fingerprint, as the one above.
    pub slot_truncations: u64,
    /// Where the daemon waits for work, once started.
    pub wait: Option<engine::WaitQueue>,
    /// PTE tables a collapse has taken out of their PMD (`pmdp_collapse_flush`) and not yet
    /// put back or replaced, by mm and address: their pages are still mapped there (the
    /// checkers count them).
    pub isolated: std::collections::BTreeMap<(MmId, VirtAddr), PtId>,
    /// Before v6.6: the PMD ranges whose page tables a file collapse could not retract (their
    /// mm's `mmap_lock` was busy), by mm (`mm_slot->pte_mapped_thp`, `file.rs`).
    pub pte_mapped_thp: std::collections::BTreeMap<MmId, Vec<VirtAddr>>,
}

/// `transparent_hugepage/shmem_enabled` (`SHMEM_HUGE_*` as `shmem_huge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmemEnabled {
    Always,
    WithinSize,
    Advise,
    Never,
    Deny,
    Force,
}
