//! System-wide memory counters with the kernel's names (`mm/vmstat.c` `vmstat_text`, v6.8),
//! printed in the kernel's order as `/proc/vmstat` does.
//!
//! `nr_*` entries are gauges (node and zone page states); the others are event counters. Only
//! counters the model maintains are listed: a zero always means "did not happen", never "not
//! modelled".

use simcore::{CounterKey, Counters};
use std::fmt::Write as _;

simcore::counter_keys! {
    /// A `/proc/vmstat` entry.
    pub enum VmStat {
        NrFreePages = "nr_free_pages",
        NrMlock = "nr_mlock",
        NrInactiveAnon = "nr_inactive_anon",
        NrActiveAnon = "nr_active_anon",
        NrInactiveFile = "nr_inactive_file",
        NrActiveFile = "nr_active_file",
        NrUnevictable = "nr_unevictable",
        WorkingsetRefaultAnon = "workingset_refault_anon",
        WorkingsetRefaultFile = "workingset_refault_file",
        WorkingsetActivateAnon = "workingset_activate_anon",
        WorkingsetActivateFile = "workingset_activate_file",
        WorkingsetRestoreAnon = "workingset_restore_anon",
        WorkingsetRestoreFile = "workingset_restore_file",
        NrAnonPages = "nr_anon_pages",
        NrMapped = "nr_mapped",
        NrFilePages = "nr_file_pages",
        NrDirty = "nr_dirty",
        NrWriteback = "nr_writeback",
        NrShmem = "nr_shmem",
        NrShmemHugepages = "nr_shmem_hugepages",
        NrShmemPmdmapped = "nr_shmem_pmdmapped",
        NrFileHugepages = "nr_file_hugepages",
        NrFilePmdmapped = "nr_file_pmdmapped",
        NrAnonTransparentHugepages = "nr_anon_transparent_hugepages",
        NrDirtied = "nr_dirtied",
        NrWritten = "nr_written",
        NrPageTablePages = "nr_page_table_pages",
        NrSwapcached = "nr_swapcached",
        NrFollPinAcquired = "nr_foll_pin_acquired",
        NrFollPinReleased = "nr_foll_pin_released",
        Pgpgin = "pgpgin",
        Pgpgout = "pgpgout",
        Pswpin = "pswpin",
        Pswpout = "pswpout",
        PgallocNormal = "pgalloc_normal",
        Pgfree = "pgfree",
        Pgactivate = "pgactivate",
        Pgdeactivate = "pgdeactivate",
        Pglazyfree = "pglazyfree",
        Pglazyfreed = "pglazyfreed",
        Pgfault = "pgfault",
        Pgmajfault = "pgmajfault",
        Pgrefill = "pgrefill",
        Pgreuse = "pgreuse",
        PgstealKswapd = "pgsteal_kswapd",
        PgstealDirect = "pgsteal_direct",
        PgscanKswapd = "pgscan_kswapd",
        PgscanDirect = "pgscan_direct",
        PgscanAnon = "pgscan_anon",
        PgscanFile = "pgscan_file",
        PgstealAnon = "pgsteal_anon",
        PgstealFile = "pgsteal_file",
        AllocstallNormal = "allocstall_normal",
        OomKill = "oom_kill",
        UnevictablePgsMlocked = "unevictable_pgs_mlocked",
        UnevictablePgsMunlocked = "unevictable_pgs_munlocked",
        UnevictablePgsCleared = "unevictable_pgs_cleared",
        ThpFaultAlloc = "thp_fault_alloc",
        ThpFaultFallback = "thp_fault_fallback",
        ThpCollapseAlloc = "thp_collapse_alloc",
        ThpCollapseAllocFailed = "thp_collapse_alloc_failed",
        ThpFileAlloc = "thp_file_alloc",
        ThpFileFallback = "thp_file_fallback",
        ThpFileMapped = "thp_file_mapped",
        ThpSplitPage = "thp_split_page",
        ThpSplitPageFailed = "thp_split_page_failed",
        ThpDeferredSplitPage = "thp_deferred_split_page",
        ThpSplitPmd = "thp_split_pmd",
        ThpScanExceedNonePte = "thp_scan_exceed_none_pte",
        ThpScanExceedSwapPte = "thp_scan_exceed_swap_pte",
        ThpScanExceedSharePte = "thp_scan_exceed_share_pte",
        ThpZeroPageAlloc = "thp_zero_page_alloc",
        ThpSwpout = "thp_swpout",
        ThpSwpoutFallback = "thp_swpout_fallback",
        NrTlbRemoteFlush = "nr_tlb_remote_flush",
        NrTlbRemoteFlushReceived = "nr_tlb_remote_flush_received",
        NrTlbLocalFlushAll = "nr_tlb_local_flush_all",
        NrTlbLocalFlushOne = "nr_tlb_local_flush_one",
        SwpinZero = "swpin_zero",
        SwpoutZero = "swpout_zero",
    }
}

/// The counters of one machine.
pub type VmStats = Counters<VmStat>;

simcore::counter_keys! {
    /// Events the kernel does not count in `/proc/vmstat`, named after the function a developer
    /// would count with a kprobe or `perf probe` (`perf probe wp_page_copy`): the experiments use
    /// them to explain their figures.
    pub enum MmEvent {
        /// `wp_page_copy` with an old page: a write-protect fault that copied.
        WpPageCopy = "wp_page_copy",
        /// A swap-in mapped read-only that a later write copied away (the spurious COW of the
        /// `page_count` rule), counted in `wp_page_copy` as well.
        WpCopySwapcache = "wp_page_copy_swapcache",
        /// `folio_mark_accessed` from `zap_pte_range`: a file page's young PTE unmapped from a
        /// VMA with recency passes its accessed bit to the folio (not from v6.3 where the VMA
        /// was advised `POSIX_FADV_NOREUSE` or `MADV_RANDOM`: `vma_has_recency`).
        ZapMarkAccessed = "zap_pte_range_mark_accessed",
        /// `dax_load_hole` calls: DAX read faults on a hole mapped at the PTE level.
        DaxLoadHole = "dax_load_hole",
        /// Virtual time spent inside `dax_load_hole`, in ns (what ftrace's function_graph
        /// tracer reports as its duration).
        DaxLoadHoleNs = "dax_load_hole_ns",
    }
}

/// Model event counters of one machine.
pub type MmEvents = Counters<MmEvent>;

/// The gauge that reports the size of each LRU list; these are read from the lists themselves
/// when a snapshot is taken ([`crate::kernel::KState::vmstat_snapshot`]), never kept twice.
pub const LRU_GAUGES: [(crate::folio::LruList, VmStat); 5] = [
    (crate::folio::LruList::InactiveAnon, VmStat::NrInactiveAnon),
    (crate::folio::LruList::ActiveAnon, VmStat::NrActiveAnon),
    (crate::folio::LruList::InactiveFile, VmStat::NrInactiveFile),
    (crate::folio::LruList::ActiveFile, VmStat::NrActiveFile),
    (crate::folio::LruList::Unevictable, VmStat::NrUnevictable),
];

/// `/proc/vmstat` text of kernel `k`: `name value` per line, the counters `k` has
/// ([`exists_on`]).
pub fn vmstat_text(stats: &VmStats, k: crate::KernelVersion) -> String {
    let mut out = String::new();
    for &key in VmStat::ALL.iter().filter(|&&key| exists_on(key, k)) {
        let _ = writeln!(out, "{} {}", key.name(), stats.get(key));
    }
    out
}

/// Looks a counter up by its kernel name.
pub fn vmstat_key(name: &str) -> Option<VmStat> {
    VmStat::ALL.iter().copied().find(|k| k.name() == name)
}

/// Whether `/proc/vmstat` has `stat` on kernel `k`: the THP split counters came with "mm,
/// vmstats: new THP splitting event" (122afea9626a, v4.5), when `thp_split` became
/// `thp_split_page` and `thp_split_pmd` and `thp_deferred_split_page` were added; shmem's THP
/// counters (`nr_shmem_hugepages`, `nr_shmem_pmdmapped`, `thp_file_alloc`, `thp_file_mapped`)
/// with shmem THPs (800d8c63b2e9, v4.8); `thp_file_fallback` with "mm, thp: track fallbacks due
/// to failed memcg charges separately" (85b9f46e8ea4, v5.8); `pglazyfreed` with `MADV_FREE`
/// itself ("mm: support madvise(MADV_FREE)", 854e9ed09ded, v4.5: the patch adds it to
/// `vmstat_text` after `pgmajfault`), `pglazyfree` with the lazyfree LRU rework of v4.12 ("mm:
/// move MADV_FREE pages into LRU_INACTIVE_FILE list", f7ad2a6cb9f7, which counts it in
/// `lru_lazyfree_fn`); `thp_swpout` and `thp_swpout_fallback` with "mm, THP, swap: add THP swapping out
/// fallback counting" (fe490cc0fe9e, v4.14; the patch posting "[PATCH -mm -v3 12/12]" of
/// 2017-07-24 seen on linux-mm, the commit id not verified); the `thp_scan_exceed_*` events with
/// "mm/vmstat: add events for THP max_ptes_* exceeds" (posted 2021-12-25, merged for v5.18; the
/// commit id not verified); `swpin_zero` and `swpout_zero` with "mm: count zeromap read and set
/// for swapout and swapin" (e7ac4daeed91, v6.12: [`crate::era::swap_zeromap`]).
pub fn exists_on(stat: VmStat, k: crate::KernelVersion) -> bool {
    let since = match stat {
        VmStat::ThpSplitPage
        | VmStat::ThpSplitPageFailed
        | VmStat::ThpDeferredSplitPage
        | VmStat::ThpSplitPmd => crate::KernelVersion::new(4, 5),
        VmStat::NrShmemHugepages
        | VmStat::NrShmemPmdmapped
        | VmStat::ThpFileAlloc
        | VmStat::ThpFileMapped => crate::KernelVersion::new(4, 8),
        VmStat::ThpFileFallback => crate::KernelVersion::new(5, 8),
        VmStat::Pglazyfreed => crate::KernelVersion::new(4, 5),
        VmStat::Pglazyfree => crate::KernelVersion::new(4, 12),
        VmStat::ThpSwpout | VmStat::ThpSwpoutFallback => crate::KernelVersion::new(4, 14),
        VmStat::ThpScanExceedNonePte
        | VmStat::ThpScanExceedSwapPte
        | VmStat::ThpScanExceedSharePte => crate::KernelVersion::new(5, 18),
        VmStat::SwpinZero | VmStat::SwpoutZero => return crate::era::swap_zeromap(k),
        _ => return true,
    };
    k >= since
}
