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
//! `sets`) by their sysfs path, and read back in the kernel's text format. Multi-size THP's
//! `hugepages-<N>kB/enabled` (v6.8, 3485b88390b0) and shmem's per-size
//! `hugepages-<N>kB/shmem_enabled` (v6.11) are refused: mmsim models PMD-sized THPs only.
//! `shmem_enabled` (v4.8; `always`, `within_size`, `advise`, `never` (default), `deny`, `force`)
//! and the shmem rule of the predicate are `shmem.rs`'s.
//!
//! `defrag` decides how hard a fault tries for a 2 MiB page (`vma_thp_gfp_mask`): `always`
//! reclaims directly; `madvise` only in `MADV_HUGEPAGE` VMAs; `defer`, `defer+madvise` (outside
//! such VMAs) and `never` take only what is free (they wake kswapd; mmsim has no compaction, so
//! `defer` and `never` behave alike). khugepaged's `defrag` is stored and shown.
//!
//! The predicate ([`thp_vma_allowable`]), for the PMD order, as v6.8 orders its tests:
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
use crate::types::huge_mm::{ThpDefrag, ThpEnabled, ThpSettings, ThpState};
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use crate::types::mm_types::VmOps;
use crate::vma::VmFlags;
use simcore::Bytes;
use std::fmt;

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
        if knob.starts_with("hugepages-") {
            return Err(format!(
                "{SYSFS_DIR}{knob}: multi-size THP (v6.8 per-size `enabled`, v6.11 per-size \
                 `shmem_enabled`) is not modelled; mmsim has PMD-sized THPs only, set \
                 `enabled` or `shmem_enabled`"
            ));
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

    /// What reading the knob at `knob` prints (without the newline); `None` when it does not
    /// exist on kernel `k`.
    pub fn show(&self, knob: &str, k: KernelVersion) -> Option<String> {
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
        }
    }
}

impl ThpState {
    /// What reading the file at `knob` (below the THP directory) prints: a knob, or
    /// khugepaged's read-only counters; `None` when this kernel has no such file.
    pub fn show(&self, knob: &str) -> Option<String> {
        match knob {
            "khugepaged/pages_collapsed" => Some(self.khugepaged.pages_collapsed.to_string()),
            "khugepaged/full_scans" => Some(self.khugepaged.full_scans.to_string()),
            _ => self.settings.show(knob, self.kernel),
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

/// `thp_vma_suitable_order` for the PMD order, for the VMA as a whole: it holds one whole
/// 2 MiB-aligned range, and a file mapping maps it at a 2 MiB-aligned file offset.
fn vma_holds_pmd_range(st: &KState, vma: VmaId) -> bool {
    let v = st.vma(vma);
    if !v.vm_ops.is_anonymous() && !(v.start.0 >> 12).wrapping_sub(v.pgoff).is_multiple_of(512) {
        return false;
    }
    v.len() >= Bytes::PMD
        && simcore::VirtAddr(v.end.0 - Bytes::PMD.as_u64()).align_down(Bytes::PMD) >= v.start
}

/// The eligibility predicate (`thp_vma_allowable_order(vma, vm_flags, tva_flags, PMD_ORDER)`):
/// whether `vma` may have PMD-sized THPs for `caller` (the module note lists the
/// tests). The fault itself also checks that the aligned range around its address fits.
pub(crate) fn thp_vma_allowable(st: &KState, vma: VmaId, caller: ThpCaller) -> bool {
    let (flags, vm_ops, anon_vma) = {
        let v = st.vma(vma);
        (v.flags, v.vm_ops, v.anon_vma.is_some())
    };
    if vma_thp_disabled(st, vma) {
        return false;
    }
    if vm_ops.is_dax() {
        return caller.in_pf();
    }
    if !caller.in_pf() {
        let no_khugepaged = VmFlags::HUGETLB
            | VmFlags::PFNMAP
            | VmFlags::IO
            | VmFlags::MIXEDMAP
            | VmFlags::DONTEXPAND;
        if (caller != ThpCaller::Smaps && flags.has(no_khugepaged)) || !vma_holds_pmd_range(st, vma)
        {
            return false;
        }
    }
    let thp = &st.thp;
    let gate = match thp.settings.enabled {
        ThpEnabled::Always => true,
        ThpEnabled::Madvise => flags.has(VmFlags::HUGEPAGE),
        ThpEnabled::Never => false,
    };
    // "Must be done before hugepage flags check since shmem has its own flags."
    if !caller.in_pf()
        && let Some(inode) = st.vma_shmem_inode(vma)
    {
        return shmem_vma_allowable(st, vma, inode, caller, gate);
    }
    if caller.enforce_sysfs() && !gate {
        return false;
    }
    match vm_ops {
        VmOps::Anonymous => anon_vma || matches!(caller, ThpCaller::Fault | ThpCaller::Smaps),
        // "Only regular file is valid in collapse path": khugepaged and `MADV_COLLAPSE` ask the
        // file rule; the fault maps what a collapse left (`huge_memory.rs`).
        VmOps::PageCache => match caller {
            ThpCaller::Fault => false,
            ThpCaller::Smaps if !crate::era::smaps_thp_eligible_files(thp.kernel) => false,
            _ => {
                crate::era::has_read_only_thp_for_fs(thp.kernel)
                    && st.file_thp_enabled(vma, thp.file_thp)
            }
        },
        VmOps::Dax => unreachable!("answered above"),
        // hugetlb pages are huge already: never a THP (`vma_is_hugetlb` in the predicate).
        VmOps::Hugetlb => false,
    }
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

/// smaps' `THPeligible` line of `vma`, or `None` on kernels before it existed.
pub(crate) fn smaps_thp_eligible(st: &KState, vma: VmaId) -> Option<bool> {
    crate::era::smaps_has_thp_eligible(st.thp.kernel)
        .then(|| thp_vma_allowable(st, vma, ThpCaller::Smaps))
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

    /// What a child's mm inherits from its parent's at fork (`mm_init`: the `MMF_INIT_MASK`
    /// flags, `MMF_DISABLE_THP` among them, and `def_flags`' `VM_NOHUGEPAGE`).
    pub(crate) fn mm_inherit_flags(&mut self, child: MmId, parent: MmId) {
        let (flags, def_flags) = {
            let p = self.mm(parent);
            (p.flags & MMF_DISABLE_THP, p.def_flags & VmFlags::NOHUGEPAGE)
        };
        let c = self.mm_mut(child);
        c.flags |= flags;
        c.def_flags |= def_flags;
    }
}
