//! The transparent-hugepage policy: the sysfs knobs under `/sys/kernel/mm/transparent_hugepage/`
//! and the one eligibility predicate every THP path asks (`mm/huge_memory.c`
//! `enabled_store`/`defrag_store`/`use_zero_page_store`, `__thp_vma_allowable_orders` (v6.8),
//! earlier `hugepage_vma_check` (v5.16-v6.7) and `transparent_hugepage_enabled` (v4.14-v5.15);
//! `include/linux/huge_mm.h` `thp_vma_suitable_order`, `vma_thp_disabled`; `mm/khugepaged.c`'s
//! `khugepaged/` knobs; `kernel/sys.c` `PR_SET_THP_DISABLE`).
//!
//! Knobs, with the defaults mmsim boots with (Ubuntu's and Fedora's kernels, which ship
//! `CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y`; upstream's Kconfig default is `always`): `enabled`
//! `madvise`, `defrag` `madvise` (the kernel's default), `use_zero_page` 1, and khugepaged's
//! `pages_to_scan` 4096 (8 × 512), `scan_sleep_millisecs` 10000, `alloc_sleep_millisecs` 60000,
//! `max_ptes_none` 511, `max_ptes_swap` 64, `max_ptes_shared` 256 (from "khugepaged: introduce
//! 'max_ptes_shared' tunable", 71a2c112a0f6, v5.8; the path does not exist before), `defrag` 1.
//! They are set before boot (a scenario's `[machine.sysfs]`, `mmsim run --set PATH=VALUE`, Python's
//! `sets`) by their sysfs path, and read back in the kernel's text format.
//!
//! Multi-size THP (v6.8, "mm: thp: introduce multi-size THP sysfs interface", 3485b88390b0):
//! `hugepages-<N>kB/enabled` for each anonymous order, 16 KiB to 2 MiB (`always`, `inherit`,
//! `madvise`, `never`; 2 MiB boots `inherit`, the others `never`). A VMA's anonymous orders are
//! the sizes set `always`, the `madvise` ones in a `VM_HUGEPAGE` VMA, and the `inherit` ones as
//! the top-level `enabled` says ([`ThpSettings::anon_orders`]); the PMD order's answer goes
//! through the same mask, so `hugepages-2048kB/enabled` overrides `enabled` for anonymous
//! memory. The fault's use of the smaller orders is `fault.rs`'s (`alloc_anon_folio`). The
//! per-size counters under `hugepages-<N>kB/stats/` exist by era: the fault and swap-out
//! counters from v6.10, the split and shmem counters from v6.11 (where order 1's directory
//! appears in v6.12 with shmem's and the split counters), `nr_anon` and
//! `nr_anon_partially_mapped` from v6.12, `zswpout` and `swpin` from v6.13 and the
//! `swpin_fallback` pair from v6.14 (these last four read 0: zswap and large swap-in are not
//! modelled, swap-ins being order 0). Per-size `shmem_enabled` (v6.11) is refused: mmsim's
//! shmem has PMD-sized THPs only. The `thp_anon=` boot parameter (v6.12) is not modelled: set
//! the knobs in `[machine.sysfs]`.
//! `shmem_enabled` (v4.8; `always`, `within_size`, `advise`, `never` (default), `deny`, `force`)
//! and the shmem rule of the predicate are `shmem.rs`'s.
//!
//! `defrag` decides how hard a fault tries for a 2 MiB page (`vma_thp_gfp_mask`): `always`
//! reclaims directly; `madvise` only in `MADV_HUGEPAGE` VMAs; `defer`, `defer+madvise` (outside
//! such VMAs) and `never` take only what is free (they wake kswapd; mmsim has no compaction, so
//! `defer` and `never` behave alike). khugepaged's `defrag` is stored and shown.
//!
//! The predicate ([`thp_vma_allowable_orders`]; [`thp_vma_allowable`] for the PMD order), as
//! v6.8 orders its tests (smaps' `THPeligible` asks every order from v6.8):
//! - `VM_NOHUGEPAGE` or the mm's `MMF_DISABLE_THP` (`PR_SET_THP_DISABLE`, effective at once
//!   since 1860033237d4, v4.13; before it the prctl set `VM_NOHUGEPAGE` on later mappings);
//! - DAX: only at fault (its own PMD faults, `fs/dax.rs`);
//! - outside a fault, hugetlb and `VM_PFNMAP`/`VM_IO`/`VM_MIXEDMAP` VMAs are refused
//!   (`VM_NO_KHUGEPAGED`), and the VMA must hold one whole 2 MiB-aligned range (a file mapping
//!   also at a 2 MiB-aligned file offset);
//! - anonymous memory under the sysfs gate (`ENFORCE_SYSFS`: the fault, khugepaged, smaps; not
//!   `MADV_COLLAPSE`): `enabled = always`, or `madvise` in a `VM_HUGEPAGE` VMA; and outside a
//!   fault and smaps, an anon_vma (khugepaged and `MADV_COLLAPSE` collapse only what was
//!   faulted);
//! - files: the read-only THPs of `CONFIG_READ_ONLY_THP_FOR_FS` (from "mm,thp: add read-only THP
//!   support for (non-shmem) FS", 99cb0dbd47a1, v5.4; none before), for khugepaged,
//!   `MADV_COLLAPSE` and smaps, never for the fault itself (it maps what a collapse left,
//!   `huge_memory.rs`): `file_thp_enabled`, a regular file of the disk file system (tmpfs, DAX
//!   and hugetlbfs answer by their own rules; pipes and other non-regular files cannot qualify,
//!   the S_ISREG test of v5.16+ holding in every era) not open for write, and by the `file_thp`
//!   era: `denywrite` (v5.4-v5.13) a `VM_DENYWRITE` mapping (exec's; `mmap` ignores
//!   `MAP_DENYWRITE`), `exec_not_written` (v5.14-v6.7, seed 000 "mm, thp: relax the VM_DENYWRITE
//!   constraint on file-backed THPs", eb6ecbed0aa2) a `VM_EXEC` mapping, `not_written` (v6.8+,
//!   "mm: remove VM_EXEC requirement for THP eligibility", 7fbb5e188248, for read-only data)
//!   any mapping. smaps answers for files from v5.14 (~ before, `transparent_hugepage_enabled`
//!   answered 0 for regular files). tmpfs and shared anonymous memory (shmem VMAs) are answered
//!   outside a fault before the sysfs gate, by `shmem.rs`'s rule and eras ("must be done before
//!   hugepage flags check since shmem has its own flags"). Approximation: v5.4-v5.12 tested the
//!   file rule before the sysfs gate (a file VMA was eligible whatever `enabled` said, once its
//!   mm was registered); mmsim applies the gate in every era.
//!
//! smaps' `THPeligible` exists from "mm, thp, proc: report THP eligibility for each vma"
//! (7635d9cbe832, v5.0). Approximation: the size-and-alignment test is applied to it from v5.0,
//! where the notes date it ~v5.3 (`transhuge_vma_suitable` in `transparent_hugepage_enabled`).

use crate::era::{FileThp, KernelVersion};
use crate::kernel::KState;
use crate::mm_struct::MMF_DISABLE_THP;
use crate::types::huge_mm::{
    MTHP_MIN_ORDER, MTHP_ORDERS, MthpEnabled, MthpStat, ThpDefrag, ThpEnabled, ThpSettings,
    ThpState,
};
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::types::mm_types::VmOps;
use crate::vma::VmFlags;
use simcore::{Bytes, Pfn};
use std::fmt;

/// `HPAGE_PMD_ORDER` on x86-64.
pub const PMD_ORDER: u8 = simcore::Order::PMD.0;
/// The PMD order's bit in an order mask.
const PMD_BIT: u16 = 1 << PMD_ORDER;

const ENABLED: [(ThpEnabled, &str); 3] = [
    (ThpEnabled::Always, "always"),
    (ThpEnabled::Madvise, "madvise"),
    (ThpEnabled::Never, "never"),
];
const DEFRAG: [(ThpDefrag, &str); 5] = [
    (ThpDefrag::Always, "always"),
    (ThpDefrag::Defer, "defer"),
    (ThpDefrag::DeferMadvise, "defer+madvise"),
    (ThpDefrag::Madvise, "madvise"),
    (ThpDefrag::Never, "never"),
];

impl Default for ThpSettings {
    fn default() -> Self {
        ThpSettings {
            enabled: ThpEnabled::Madvise,
            defrag: ThpDefrag::Madvise,
            use_zero_page: true,
            pages_to_scan: 4096,
            scan_sleep_ms: 10_000,
            alloc_sleep_ms: 60_000,
            max_ptes_none: 511,
            max_ptes_swap: 64,
            max_ptes_shared: 256,
            khugepaged_defrag: true,
            shmem_enabled: crate::types::huge_mm::ShmemEnabled::Never,
            anon_sizes: std::array::from_fn(|order| {
                if order == usize::from(PMD_ORDER) {
                    MthpEnabled::Inherit
                } else {
                    MthpEnabled::Never
                }
            }),
        }
    }
}

/// The sysfs directory of the knobs.
pub const SYSFS_DIR: &str = "/sys/kernel/mm/transparent_hugepage/";

/// The knob a key names: a full sysfs path, or the path below `/sys/kernel/mm/`
/// (`transparent_hugepage/enabled`). `None` when the key is not a THP sysfs path.
pub fn sysfs_knob(key: &str) -> Option<&str> {
    key.strip_prefix(SYSFS_DIR).or_else(|| key.strip_prefix("transparent_hugepage/"))
}

/// The writable knobs, by their path below the directory (the native executor writes each).
pub const KNOBS: [&str; 11] = [
    "enabled",
    "shmem_enabled",
    "defrag",
    "use_zero_page",
    "khugepaged/pages_to_scan",
    "khugepaged/scan_sleep_millisecs",
    "khugepaged/alloc_sleep_millisecs",
    "khugepaged/max_ptes_none",
    "khugepaged/max_ptes_swap",
    "khugepaged/max_ptes_shared",
    "khugepaged/defrag",
];

/// The per-size knobs of the anonymous THP orders (v6.8), smallest first.
pub const MTHP_KNOBS: [&str; 8] = [
    "hugepages-16kB/enabled",
    "hugepages-32kB/enabled",
    "hugepages-64kB/enabled",
    "hugepages-128kB/enabled",
    "hugepages-256kB/enabled",
    "hugepages-512kB/enabled",
    "hugepages-1024kB/enabled",
    "hugepages-2048kB/enabled",
];

/// Every writable knob: [`KNOBS`], then [`MTHP_KNOBS`] (which exist from v6.8).
pub fn all_knobs() -> impl Iterator<Item = &'static str> {
    KNOBS.iter().chain(&MTHP_KNOBS).copied()
}

const MTHP_ENABLED: [(MthpEnabled, &str); 4] = [
    (MthpEnabled::Always, "always"),
    (MthpEnabled::Inherit, "inherit"),
    (MthpEnabled::Madvise, "madvise"),
    (MthpEnabled::Never, "never"),
];

/// The order and the file of a per-size path `hugepages-<N>kB/FILE` (any power-of-two size:
/// which exist is the caller's question).
pub fn mthp_path(knob: &str) -> Option<(u8, &str)> {
    let (dir, file) = knob.strip_prefix("hugepages-")?.split_once('/')?;
    let kb: u64 = dir.strip_suffix("kB")?.parse().ok()?;
    if !kb.is_power_of_two() || kb < 4 {
        return None;
    }
    let order = u8::try_from((kb / 4).trailing_zeros()).ok()?;
    Some((order, file))
}

/// Whether `order` is an anonymous THP order with a `hugepages-<N>kB/` directory on `k`.
pub fn mthp_order_exists(order: u8, k: KernelVersion) -> bool {
    crate::era::has_mthp(k) && (MTHP_MIN_ORDER..=PMD_ORDER).contains(&order)
}

pub(crate) fn choice<T: Copy + PartialEq>(table: &[(T, &str)], value: &str) -> Result<T, String> {
    table.iter().find(|(_, n)| *n == value).map(|(v, _)| *v).ok_or_else(|| {
        let names: Vec<&str> = table.iter().map(|(_, n)| *n).collect();
        format!("expected one of {}, found `{value}`", names.join(", "))
    })
}

/// The kernel's text for a choice knob: every value, the current one in brackets.
fn show_choice<T: Copy + PartialEq>(table: &[(T, &str)], cur: T) -> String {
    let words: Vec<String> = table
        .iter()
        .map(|&(v, n)| if v == cur { format!("[{n}]") } else { n.to_string() })
        .collect();
    words.join(" ")
}

/// Whether `knob` exists on kernel `k` (before the multi-size check).
fn knob_exists(knob: &str, k: KernelVersion) -> bool {
    match knob {
        "khugepaged/max_ptes_shared" => crate::era::khugepaged_collapses_shared_and_compound(k),
        "shmem_enabled" => crate::era::has_shmem_thp(k),
        _ => true,
    }
}

impl ThpSettings {
    /// Writes `value` to the knob at `knob` (a path below the THP directory) on kernel `k`, with
    /// the range checks the kernel's store functions make (`max_ptes_*` at most 511,
    /// `pages_to_scan` and the sleeps at least 1 and 0, booleans 0 or 1).
    pub fn set(&mut self, knob: &str, value: &str, k: KernelVersion) -> Result<(), String> {
        if let Some((order, file)) = mthp_path(knob) {
            return self.set_mthp(knob, (order, file), value, k);
        }
        if !KNOBS.contains(&knob) || !knob_exists(knob, k) {
            return Err(format!("{SYSFS_DIR}{knob}: no such knob on {k}"));
        }
        let number = |max: u64, min: u64| {
            let n: u64 =
                value.parse().map_err(|_| format!("expected a number, found `{value}`"))?;
            if n < min || n > max {
                return Err(format!("{n} is outside {min}..={max} (EINVAL)"));
            }
            Ok(n)
        };
        let err = |e: String| format!("{SYSFS_DIR}{knob}: {e}");
        match knob {
            "enabled" => self.enabled = choice(&ENABLED, value).map_err(err)?,
            "defrag" => self.defrag = choice(&DEFRAG, value).map_err(err)?,
            "shmem_enabled" => {
                self.shmem_enabled = choice(&crate::shmem::SHMEM_ENABLED, value).map_err(err)?
            }
            "use_zero_page" => self.use_zero_page = number(1, 0).map_err(err)? == 1,
            "khugepaged/defrag" => self.khugepaged_defrag = number(1, 0).map_err(err)? == 1,
            "khugepaged/pages_to_scan" => {
                self.pages_to_scan = number(u32::MAX.into(), 1).map_err(err)?
            }
            "khugepaged/scan_sleep_millisecs" => {
                self.scan_sleep_ms = number(u32::MAX.into(), 0).map_err(err)?
            }
            "khugepaged/alloc_sleep_millisecs" => {
                self.alloc_sleep_ms = number(u32::MAX.into(), 0).map_err(err)?
            }
            "khugepaged/max_ptes_none" => self.max_ptes_none = number(511, 0).map_err(err)?,
            "khugepaged/max_ptes_swap" => self.max_ptes_swap = number(511, 0).map_err(err)?,
            "khugepaged/max_ptes_shared" => self.max_ptes_shared = number(511, 0).map_err(err)?,
            _ => unreachable!("every knob in KNOBS is matched"),
        }
        Ok(())
    }

    /// A write to a per-size file: `enabled` of an anonymous order (v6.8); per-size
    /// `shmem_enabled` (v6.11) is refused as not modelled.
    fn set_mthp(
        &mut self,
        knob: &str,
        (order, file): (u8, &str),
        value: &str,
        k: KernelVersion,
    ) -> Result<(), String> {
        if file == "shmem_enabled" && k >= KernelVersion::new(6, 11) {
            return Err(format!(
                "{SYSFS_DIR}{knob}: multi-size shmem THP (v6.11 per-size `shmem_enabled`) is not \
                 modelled; mmsim's shmem has PMD-sized THPs only, set `shmem_enabled`"
            ));
        }
        if file != "enabled" || !mthp_order_exists(order, k) {
            return Err(format!("{SYSFS_DIR}{knob}: no such knob on {k}"));
        }
        let err = |e: String| format!("{SYSFS_DIR}{knob}: {e}");
        self.anon_sizes[usize::from(order)] = choice(&MTHP_ENABLED, value).map_err(err)?;
        Ok(())
    }

    /// What reading the knob at `knob` prints (without the newline); `None` when it does not
    /// exist on kernel `k`.
    pub fn show(&self, knob: &str, k: KernelVersion) -> Option<String> {
        if let Some((order, "enabled")) = mthp_path(knob) {
            let exists = mthp_order_exists(order, k);
            return exists.then(|| show_choice(&MTHP_ENABLED, self.anon_sizes[usize::from(order)]));
        }
        if !KNOBS.contains(&knob) || !knob_exists(knob, k) {
            return None;
        }
        Some(match knob {
            "enabled" => show_choice(&ENABLED, self.enabled),
            "defrag" => show_choice(&DEFRAG, self.defrag),
            "shmem_enabled" => show_choice(&crate::shmem::SHMEM_ENABLED, self.shmem_enabled),
            "use_zero_page" => u8::from(self.use_zero_page).to_string(),
            "khugepaged/defrag" => u8::from(self.khugepaged_defrag).to_string(),
            "khugepaged/pages_to_scan" => self.pages_to_scan.to_string(),
            "khugepaged/scan_sleep_millisecs" => self.scan_sleep_ms.to_string(),
            "khugepaged/alloc_sleep_millisecs" => self.alloc_sleep_ms.to_string(),
            "khugepaged/max_ptes_none" => self.max_ptes_none.to_string(),
            "khugepaged/max_ptes_swap" => self.max_ptes_swap.to_string(),
            _ => self.max_ptes_shared.to_string(),
        })
    }

    /// The anonymous orders enabled for a VMA with flags `flags` by the sysfs knobs (the
    /// early test of `thp_vma_allowable_orders`, v6.8): each size set to `always`; `madvise`
    /// ones in a `VM_HUGEPAGE` VMA; `inherit` ones as the top-level `enabled` says. A bit per
    /// order. Before v6.8 only the PMD order can be set, and it inherits.
    pub(crate) fn anon_orders(&self, flags: VmFlags) -> u16 {
        let advised = flags.has(VmFlags::HUGEPAGE);
        let inherit = self.enabled_for(flags);
        let on = |e: MthpEnabled| match e {
            MthpEnabled::Always => true,
            MthpEnabled::Inherit => inherit,
            MthpEnabled::Madvise => advised,
            MthpEnabled::Never => false,
        };
        (MTHP_MIN_ORDER..=PMD_ORDER)
            .filter(|&o| on(self.anon_sizes[usize::from(o)]))
            .fold(0, |mask, o| mask | 1 << o)
    }

    /// The top-level `enabled` for a VMA with flags `flags`: `always`, or `madvise` in a
    /// `VM_HUGEPAGE` VMA (`hugepage_global_always`, `hugepage_global_enabled`).
    pub(crate) fn enabled_for(&self, flags: VmFlags) -> bool {
        match self.enabled {
            ThpEnabled::Always => true,
            ThpEnabled::Madvise => flags.has(VmFlags::HUGEPAGE),
            ThpEnabled::Never => false,
        }
    }

    /// Whether a THP fault in a VMA with flags `flags` may reclaim directly for its page
    /// (`vma_thp_gfp_mask`: `__GFP_DIRECT_RECLAIM`).
    pub(crate) fn fault_may_reclaim(&self, flags: VmFlags) -> bool {
        match self.defrag {
            ThpDefrag::Always => true,
            ThpDefrag::Madvise | ThpDefrag::DeferMadvise => flags.has(VmFlags::HUGEPAGE),
            ThpDefrag::Defer | ThpDefrag::Never => false,
        }
    }
}

impl fmt::Display for ThpEnabled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = ENABLED.iter().find(|(v, _)| v == self).map_or("?", |(_, n)| n);
        f.write_str(name)
    }
}

impl ThpState {
    /// The policy a machine boots with: its knobs as configured, its kernel's era facts.
    pub(crate) fn boot(
        settings: &ThpSettings,
        kernel: KernelVersion,
        file_thp: FileThp,
    ) -> ThpState {
        ThpState {
            settings: settings.clone(),
            kernel,
            file_thp,
            khugepaged: Default::default(),
            split_queue: Vec::new(),
            mthp_stats: [[0; MthpStat::COUNT]; MTHP_ORDERS],
        }
    }
}

impl KState {
    /// What reading the file at `knob` (below the THP directory) prints: a knob, khugepaged's
    /// read-only counters, or a per-size counter; `None` when this kernel has no such file.
    pub fn thp_show(&self, knob: &str) -> Option<String> {
        let thp = &self.thp;
        match knob {
            "khugepaged/pages_collapsed" => Some(thp.khugepaged.pages_collapsed.to_string()),
            "khugepaged/full_scans" => Some(thp.khugepaged.full_scans.to_string()),
            _ => match mthp_path(knob) {
                Some((order, file)) if file.starts_with("stats/") => {
                    self.mthp_stat_show(order, &file["stats/".len()..]).map(|v| v.to_string())
                }
                _ => thp.settings.show(knob, thp.kernel),
            },
        }
    }

    /// `hugepages-<N>kB/stats/NAME` of `order`, by its era (the module note): the anonymous
    /// counters in the anonymous orders' directories, shmem's in every file order's (order 1's
    /// directory exists from v6.12 with shmem's and the split counters only).
    fn mthp_stat_show(&self, order: u8, name: &str) -> Option<u64> {
        use crate::era::{has_mthp_nr_anon, has_mthp_split_stats, has_mthp_stats};
        let k = self.thp.kernel;
        let anon = mthp_order_exists(order, k);
        let file = anon || (order == 1 && k >= KernelVersion::new(6, 12));
        let (exists, value) = match name {
            "anon_fault_alloc" => (anon && has_mthp_stats(k), MthpStat::AnonFaultAlloc),
            "anon_fault_fallback" => (anon && has_mthp_stats(k), MthpStat::AnonFaultFallback),
            "anon_fault_fallback_charge" => {
                (anon && has_mthp_stats(k), MthpStat::AnonFaultFallbackCharge)
            }
            "swpout" => (anon && has_mthp_stats(k), MthpStat::Swpout),
            "swpout_fallback" => (anon && has_mthp_stats(k), MthpStat::SwpoutFallback),
            "split" => (file && has_mthp_split_stats(k), MthpStat::Split),
            "split_failed" => (file && has_mthp_split_stats(k), MthpStat::SplitFailed),
            "split_deferred" => (anon && has_mthp_split_stats(k), MthpStat::SplitDeferred),
            "shmem_alloc" => (file && has_mthp_split_stats(k), MthpStat::ShmemAlloc),
            "shmem_fallback" => (file && has_mthp_split_stats(k), MthpStat::ShmemFallback),
            "shmem_fallback_charge" => {
                (file && has_mthp_split_stats(k), MthpStat::ShmemFallbackCharge)
            }
            "nr_anon" | "nr_anon_partially_mapped" => {
                return (anon && has_mthp_nr_anon(k))
                    .then(|| self.mthp_nr_anon(order, name == "nr_anon_partially_mapped"));
            }
            // zswap and large swap-in are not modelled: mmsim's swap-ins are order 0.
            "zswpout" | "swpin" => return (anon && k >= KernelVersion::new(6, 13)).then_some(0),
            "swpin_fallback" | "swpin_fallback_charge" => {
                return (anon && k >= KernelVersion::new(6, 14)).then_some(0);
            }
            _ => return None,
        };
        exists.then(|| self.thp.mthp_stats[usize::from(order)][value as usize])
    }

    /// The gauges `nr_anon` (anonymous folios of `order` allocated) and, with `partial`,
    /// `nr_anon_partially_mapped` (those on the deferred split queue).
    fn mthp_nr_anon(&self, order: u8, partial: bool) -> u64 {
        let of_order = |head: Pfn| {
            self.folios.is_anon(head) && self.folios.order(head) == simcore::Order(order)
        };
        if partial {
            self.thp.split_queue.iter().filter(|&&h| of_order(h)).count() as u64
        } else {
            self.folios.large_heads().filter(|&h| of_order(h)).count() as u64
        }
    }
}

/// Who asks the predicate (`TVA_*` flags of v6.8: the fault is `IN_PF|ENFORCE_SYSFS`,
/// khugepaged `ENFORCE_SYSFS`, `MADV_COLLAPSE` neither, smaps `SMAPS|ENFORCE_SYSFS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpCaller {
    Fault,
    Khugepaged,
    Collapse,
    Smaps,
}

impl ThpCaller {
    fn in_pf(self) -> bool {
        self == ThpCaller::Fault
    }

    fn enforce_sysfs(self) -> bool {
        self != ThpCaller::Collapse
    }
}

/// `vma_thp_disabled`: `VM_NOHUGEPAGE`, or the mm's `MMF_DISABLE_THP`.
pub(crate) fn vma_thp_disabled(st: &KState, vma: VmaId) -> bool {
    let v = st.vma(vma);
    v.flags.has(VmFlags::NOHUGEPAGE) || st.mm(v.mm).flags & MMF_DISABLE_THP != 0
}

/// `thp_vma_suitable_order` for the VMA as a whole: it holds one whole naturally aligned range
/// of `order`, and a file mapping maps it at a file offset aligned the same way (an anonymous
/// VMA's `vm_pgoff` is not asked).
fn vma_holds_order_range(st: &KState, vma: VmaId, order: u8) -> bool {
    let v = st.vma(vma);
    let pages = 1u64 << order;
    if !v.vm_ops.is_anonymous() && !(v.start.0 >> 12).wrapping_sub(v.pgoff).is_multiple_of(pages) {
        return false;
    }
    let size = Bytes(pages << 12);
    v.len() >= size && simcore::VirtAddr(v.end.0 - size.as_u64()).align_down(size) >= v.start
}

/// The eligibility predicate for the PMD order (`thp_vma_allowable_order(vma, vm_flags,
/// tva_flags, PMD_ORDER)`): whether `vma` may have PMD-sized THPs for `caller`. The fault itself
/// also checks that the aligned range around its address fits.
pub(crate) fn thp_vma_allowable(st: &KState, vma: VmaId, caller: ThpCaller) -> bool {
    thp_vma_allowable_orders(st, vma, caller, PMD_BIT) != 0
}

/// `thp_vma_allowable_orders` (v6.8; the module note lists the tests): of the orders in
/// `orders` (a bit per order), those `vma` may have THPs of for `caller`. Anonymous VMAs take
/// the per-size knobs' orders (2 to 9), the others the PMD order only.
pub(crate) fn thp_vma_allowable_orders(
    st: &KState,
    vma: VmaId,
    caller: ThpCaller,
    orders: u16,
) -> u16 {
    let (flags, vm_ops, anon_vma) = {
        let v = st.vma(vma);
        (v.flags, v.vm_ops, v.anon_vma.is_some())
    };
    let thp = &st.thp;
    let mut orders = match vm_ops {
        VmOps::Anonymous if caller.enforce_sysfs() => orders & thp.settings.anon_orders(flags),
        VmOps::Anonymous => orders & anon_order_mask(),
        VmOps::PageCache | VmOps::Dax | VmOps::Hugetlb => orders & PMD_BIT,
    };
    if orders == 0 || vma_thp_disabled(st, vma) {
        return 0;
    }
    if vm_ops.is_dax() {
        return if caller.in_pf() { orders } else { 0 };
    }
    if !caller.in_pf() {
        let no_khugepaged = VmFlags::HUGETLB
            | VmFlags::PFNMAP
            | VmFlags::IO
            | VmFlags::MIXEDMAP
            | VmFlags::DONTEXPAND;
        if caller != ThpCaller::Smaps && flags.has(no_khugepaged) {
            return 0;
        }
        orders = (0..16u8)
            .filter(|&o| orders & 1 << o != 0 && vma_holds_order_range(st, vma, o))
            .fold(0, |m, o| m | 1 << o);
        if orders == 0 {
            return 0;
        }
    }
    let gate = thp.settings.enabled_for(flags);
    // "Must be done before hugepage flags check since shmem has its own flags."
    if !caller.in_pf()
        && let Some(inode) = st.vma_shmem_inode(vma)
    {
        return if shmem_vma_allowable(st, vma, inode, caller, gate) { orders } else { 0 };
    }
    let allowed = match vm_ops {
        // The per-size knobs were asked above.
        VmOps::Anonymous => anon_vma || matches!(caller, ThpCaller::Fault | ThpCaller::Smaps),
        // "Only regular file is valid in collapse path": khugepaged and `MADV_COLLAPSE` ask the
        // file rule; the fault maps what a collapse left (`huge_memory.rs`).
        VmOps::PageCache => match caller {
            _ if caller.enforce_sysfs() && !gate => false,
            ThpCaller::Fault => false,
            ThpCaller::Smaps if !crate::era::smaps_thp_eligible_files(thp.kernel) => false,
            _ => {
                crate::era::has_read_only_thp_for_fs(thp.kernel)
                    && st.file_thp_enabled(vma, thp.file_thp)
            }
        },
        // Answered above.
        VmOps::Dax => caller.in_pf(),
        // hugetlb pages are huge already: never a THP (`vma_is_hugetlb` in the predicate).
        VmOps::Hugetlb => false,
    };
    if allowed { orders } else { 0 }
}

/// Every anonymous THP order (`THP_ORDERS_ALL_ANON`), a bit per order.
fn anon_order_mask() -> u16 {
    (MTHP_MIN_ORDER..=PMD_ORDER).fold(0, |m, o| m | 1 << o)
}

/// The anonymous orders below the PMD's that a write fault at `addr` of `vma` may allocate
/// (`alloc_anon_folio`: `thp_vma_allowable_orders` then `thp_vma_suitable_orders`): each
/// enabled order whose naturally aligned range around `addr` lies inside the VMA.
pub(crate) fn anon_fault_orders(st: &KState, vma: VmaId, addr: simcore::VirtAddr) -> u16 {
    let below_pmd = anon_order_mask() & (PMD_BIT - 1);
    let orders = thp_vma_allowable_orders(st, vma, ThpCaller::Fault, below_pmd);
    let v = st.vma(vma);
    (MTHP_MIN_ORDER..PMD_ORDER)
        .filter(|&o| {
            let size = Bytes(Bytes::PAGE.as_u64() << o);
            let start = addr.align_down(size);
            orders & 1 << o != 0 && start >= v.start && start.0 + size.as_u64() <= v.end.0
        })
        .fold(0, |m, o| m | 1 << o)
}

/// The predicate's answer for a shmem VMA outside a fault, `gate` being the anonymous `enabled`
/// gate (`shmem.rs` has the eras).
fn shmem_vma_allowable(
    st: &KState,
    vma: VmaId,
    inode: crate::types::ids::InodeId,
    caller: ThpCaller,
    gate: bool,
) -> bool {
    let k = st.thp.kernel;
    if !crate::era::has_shmem_thp(k) {
        return false;
    }
    let is_huge = |force| st.shmem_is_huge(inode, st.vma(vma).pgoff, force, Some(vma));
    let smaps_before_v5_14 = caller == ThpCaller::Smaps && !crate::era::smaps_thp_eligible_files(k);
    if smaps_before_v5_14 {
        is_huge(false) && gate
    } else if crate::era::khugepaged_obeys_tmpfs_mount(k) {
        is_huge(!caller.enforce_sysfs())
    } else {
        gate || !caller.enforce_sysfs()
    }
}

/// smaps' `THPeligible` line of `vma`, or `None` on kernels before it existed. From v6.8 it
/// asks every THP order (`THP_ORDERS_ALL`), so an anonymous VMA where only a smaller size is
/// enabled is eligible.
pub(crate) fn smaps_thp_eligible(st: &KState, vma: VmaId) -> Option<bool> {
    let k = st.thp.kernel;
    let orders = if crate::era::has_mthp(k) { anon_order_mask() } else { PMD_BIT };
    crate::era::smaps_has_thp_eligible(k)
        .then(|| thp_vma_allowable_orders(st, vma, ThpCaller::Smaps, orders) != 0)
}

/// `hugepage_madvise`: the VM flags `MADV_HUGEPAGE` or `MADV_NOHUGEPAGE` leave on a VMA with
/// flags `flags` (each clears the other).
pub(crate) fn hugepage_madvise(flags: VmFlags, huge: bool) -> VmFlags {
    let (set, clear) = if huge {
        (VmFlags::HUGEPAGE, VmFlags::NOHUGEPAGE)
    } else {
        (VmFlags::NOHUGEPAGE, VmFlags::HUGEPAGE)
    };
    VmFlags((flags.0 & !clear) | set)
}

impl KState {
    /// `prctl(PR_SET_THP_DISABLE, disable)`: `MMF_DISABLE_THP` from v4.13, `VM_NOHUGEPAGE` in
    /// `def_flags` (later mappings only) before.
    pub(crate) fn prctl_set_thp_disable(&mut self, mm: MmId, disable: bool) {
        let immediate = crate::era::thp_disable_is_immediate(self.thp.kernel);
        let m = self.mm_mut(mm);
        if immediate {
            m.flags = if disable { m.flags | MMF_DISABLE_THP } else { m.flags & !MMF_DISABLE_THP };
        } else {
            m.def_flags = if disable {
                m.def_flags | VmFlags::NOHUGEPAGE
            } else {
                m.def_flags & !VmFlags::NOHUGEPAGE
            };
        }
    }

    /// `prctl(PR_GET_THP_DISABLE)`.
    pub(crate) fn prctl_get_thp_disable(&self, mm: MmId) -> bool {
        let m = self.mm(mm);
        m.flags & MMF_DISABLE_THP != 0 || m.def_flags & VmFlags::NOHUGEPAGE != 0
    }

    /// What a new mm takes from the mm of the task that makes it, a fork's child or an exec's
    /// image (`mm_init`: the `MMF_INIT_MASK` flags, `MMF_DISABLE_THP` among them, so the prctl
    /// survives both, and `def_flags`' `VM_NOHUGEPAGE`, `VM_INIT_DEF_MASK`).
    pub(crate) fn mm_init_flags(&self, from: MmId) -> (u32, u64) {
        let m = self.mm(from);
        (m.flags & MMF_DISABLE_THP, m.def_flags & VmFlags::NOHUGEPAGE)
    }

    /// Gives the new mm `child` what [`KState::mm_init_flags`] read.
    pub(crate) fn mm_inherit_flags(&mut self, child: MmId, (flags, def_flags): (u32, u64)) {
        let c = self.mm_mut(child);
        c.flags |= flags;
        c.def_flags |= def_flags;
    }
}
