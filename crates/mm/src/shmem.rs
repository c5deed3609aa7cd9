//! shmem/tmpfs THPs: the tmpfs `huge=` mount option, `transparent_hugepage/shmem_enabled`,
//! `shmem_is_huge`, and the PMD-sized folio a shmem fault allocates (`mm/shmem.c`
//! `shmem_is_huge` (earlier `shmem_huge_enabled`), `shmem_enabled_store`,
//! `shmem_alloc_and_add_folio` (earlier `shmem_getpage_gfp`), `shmem_fault`; `mm/memory.c`
//! `finish_fault` → `do_set_pmd`; Linux v6.8 with the eras below).
//!
//! Eras: shmem THPs, the `huge=` option, `shmem_enabled` and khugepaged's shmem collapse all
//! come with v4.8 ("shmem: prepare huge= mount option and sysfs knob" 5a6e75f8110c, "shmem: add
//! huge pages support" 800d8c63b2e9, "khugepaged: add support of collapse for tmpfs/shmem pages"
//! f3f0e1d2150b); before, the knob does not exist and a `huge=` other than `never` is refused.
//! Per-size shmem mTHP (`hugepages-<N>kB/shmem_enabled`, v6.11) is refused (`policy.rs`).
//!
//! Where the policy comes from: a file on a tmpfs mount by the mount's `huge=` (`never` by
//! default, `always`, `within_size`, `advise`); shared anonymous memory, memfd and SysV shm live
//! on the kernel's internal mount `shm_mnt`, whose `huge` is `shmem_enabled` (`shmem_enabled_store`
//! copies `always`/`within_size`/`advise`/`never` to it). `shmem_enabled = deny` refuses THPs on
//! every mount, `force` grants them on every mount (both for testing, as the kernel documents).
//!
//! `shmem_is_huge(inode, index, force, vma)`, as v6.8 orders its tests: `VM_NOHUGEPAGE` or
//! `MMF_DISABLE_THP` refuse; `deny` refuses; `force` (or the caller's `force`: `MADV_COLLAPSE`)
//! grants; then the mount's option: `always` grants, `within_size` grants when the file's size
//! reaches the end of the PMD-sized range holding `index` (`round_up(index + 1, 512)`), else
//! falls through to `advise`, which grants in a `VM_HUGEPAGE` VMA (`MADV_HUGEPAGE`); `never`
//! refuses. `MADV_COLLAPSE`'s override of `deny` ("mm/shmem: add flag to enforce shmem THP in
//! hugepage_vma_check()", 7c6c6cc4d3a2) was reverted before a release ("mm/shmem: restore
//! SHMEM_HUGE_DENY precedence over MADV_COLLAPSE", 3de0c269adc6), so `deny` wins in every era.
//!
//! The eligibility predicate (`policy.rs`) answers for a shmem VMA outside a fault: from v5.11
//! ("mm,thp,shmem: make khugepaged obey tmpfs mount flags", Rik van Riel) by `shmem_is_huge` at
//! the VMA's `vm_pgoff`, not by the anonymous `enabled` gate (`MADV_COLLAPSE` forcing); before,
//! by the `enabled` gate alone (`always`, or `madvise` with `VM_HUGEPAGE`), the mount ignored.
//! smaps' `THPeligible` on v5.0-v5.13 (`transparent_hugepage_enabled`) needs both
//! `shmem_is_huge` and the `enabled` gate; from v5.14 it is khugepaged's answer.
//!
//! The fault (`shmem_fault` → `shmem_get_folio_gfp` → `shmem_alloc_and_add_folio`): a fault on
//! an empty PMD (a read, or a write in a shared VMA) whose 2 MiB range lies inside the VMA at
//! the file offset's colour and inside the file, with no page cached in the range, and allowed
//! by `shmem_is_huge` at the fault's index, allocates a zeroed PMD-sized folio (`thp_file_alloc`;
//! `thp_file_fallback` from v5.8 when none can be had, and the fault goes on with 4 KiB pages),
//! caches it (`nr_shmem_hugepages`, `ShmemHugePages`) and maps it with one PMD (`finish_fault` →
//! `do_set_pmd`: `nr_shmem_pmdmapped`, meminfo and smaps `ShmemPmdMapped`, `thp_file_mapped`),
//! writable and dirty for a shared write. A range that already holds 4 KiB pages gets another 4
//! KiB page (the kernel's `-E2BIG` fallback, not counted).
//!
//! Approximations: only faults allocate shmem THPs; `write` and `fallocate` allocate 4 KiB pages
//! (the kernel's `shmem_write_begin` and `shmem_fallocate` may allocate THPs under `always`,
//! `within_size` or `force`). mmsim allocates no THP reaching past the end of the file (the
//! kernel does under `always`, and splits such THPs under memory pressure with its shrinker);
//! no `huge=` remount, no `thp_file_fallback_charge` (the memory cgroup charge reclaims or the
//! allocation fails).
//!
//! **Swap** (`shmem_writepage`, `shmem_swapin_folio`, `shmem_undo_range`'s swap entries,
//! `shmem_partial_swap_usage`; mm/shmem.c v6.8, the scheme unchanged since shmem pages became
//! swap-backed and joined the anon LRU lists, "vmscan: split LRU lists into anon & file sets",
//! 4f98a2fee8ac, v2.6.28). shmem folios are `PG_swapbacked`, so reclaim scans them with the
//! anonymous lists, by swappiness, and only while swap space is free (`get_scan_count`,
//! `vmscan.rs`: the same rule and the same device as anonymous memory, `swap.rs`). A dirty
//! shmem folio chosen for reclaim is unmapped like any file folio, then `shmem_writepage` gives
//! it a swap slot and moves it from the page cache to the swap cache: the page cache's slot at
//! its index now holds the swap entry (an xarray value entry; `AddressSpace::swapped`), which
//! holds one reference on the slot (the kernel's `SWAP_MAP_SHMEM` count, here a count of 1),
//! `NR_SHMEM` and `NR_FILE_PAGES` drop, and the swap write follows as for an anonymous folio
//! (`pswpout`), the folio leaving the swap cache with a shadow entry in the swap slot. No swap
//! space (or a full device) leaves the folio dirty and active (`redirty`). A clean shmem folio
//! (a page faulted in by a read and never written) is dropped like any page-cache folio: it
//! reads back as zeros anyway.
//!
//! Swap-in: a lookup that finds the swap entry (a fault, `read()`, `write()`, `fallocate`,
//! khugepaged's `collapse_file` with `SGP_NOALLOC`) takes the slot's swap-cache folio or reads
//! a new one from the device (`pswpin`; for a fault a major fault, `VM_FAULT_MAJOR` and
//! `pgmajfault`, the kernel's only major shmem fault: allocating a new zeroed page is minor),
//! puts it back in the page cache at its index, frees the slot (`delete_from_swap_cache`,
//! `swap_free`) and marks it dirty. Truncation and hole punching free the swap entries of their
//! range (`shmem_free_swap`, `free_swap_and_cache`), so `SwapFree` recovers.
//!
//! Observables: `/proc/PID/smaps` `Swap` of a shmem mapping counts, besides swap PTEs, the
//! file's swap entries at the mapping's pages that no PTE maps (`smap_gather_stats` with
//! `shmem_swap_usage` for a shared or read-only mapping, and for a private writable one the
//! page walk's `smaps_pte_hole` / `smaps_shmem_walk_ops`, since v4.6, "mm, proc: account for
//! shmem swap in /proc/pid/smaps", 48131e03ca4e, not re-verified): both are "swapped entries
//! where no PTE is". `SwapPss` counts swap PTEs only, never shmem's, and `VmSwap` counts
//! `MM_SWAPENTS` only; meminfo's `Shmem` drops, `SwapFree` drops, `ShmemHugePages` is untouched.
//!
//! Approximations: a shmem THP is never reclaimed (the kernel splits it in `shmem_writepage`
//! up to v6.13 and from v6.14 may swap it out whole, "mm: shmem: support large folio swap out",
//! Baolin Wang — the version is not verified); mmsim's reclaim activates it instead, as it does
//! an anonymous THP. `SHM_LOCK` and the `shmem_swaplist` (swapoff) are not modelled; swap-ins
//! are charged to the task that faults, not to the cgroup recorded for the entry; the swap
//! count of a shmem entry is 1 rather than `SWAP_MAP_SHMEM`; `mincore` does not look up a
//! shmem swap entry's swap-cache folio.

use crate::era::KernelVersion;
use crate::errno::VmFault;
use crate::filemap::{folio_lock, folio_unlock};
use crate::folio::{Mapping, pg};
use crate::kernel::{Cx, KState};
use crate::memory::Vmf;
use crate::sim::cost::Cost;
use crate::types::fs::ShmemHuge;
use crate::types::fs::TmpfsMount;
use crate::types::huge_mm::{MthpStat, ShmemEnabled};
use crate::types::ids::InodeId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use crate::vmstat::VmStat;
use simcore::{Order, Pfn};

/// Pages in a PMD-sized folio (`HPAGE_PMD_NR`).
const HPAGE_PMD_NR: u64 = 512;

/// The knob's values in the kernel's order.
pub(crate) const SHMEM_ENABLED: [(ShmemEnabled, &str); 6] = [
    (ShmemEnabled::Always, "always"),
    (ShmemEnabled::WithinSize, "within_size"),
    (ShmemEnabled::Advise, "advise"),
    (ShmemEnabled::Never, "never"),
    (ShmemEnabled::Deny, "deny"),
    (ShmemEnabled::Force, "force"),
];

const HUGE_OPTION: [(ShmemHuge, &str); 4] = [
    (ShmemHuge::Never, "never"),
    (ShmemHuge::Always, "always"),
    (ShmemHuge::WithinSize, "within_size"),
    (ShmemHuge::Advise, "advise"),
];

impl ShmemHuge {
    /// The `huge=` option named `value` (`shmem_parse_huge`).
    pub fn parse(value: &str) -> Result<ShmemHuge, String> {
        crate::huge_memory::policy::choice(&HUGE_OPTION, value)
            .map_err(|e| format!("tmpfs huge=: {e}"))
    }

    /// The option's name.
    pub fn name(self) -> &'static str {
        HUGE_OPTION.iter().find(|(h, _)| *h == self).map_or("?", |(_, n)| n)
    }
}

impl TmpfsMount {
    /// Why a file on this mount cannot exist on kernel `k`: a `huge=` other than `never`
    /// before v4.8.
    pub fn unmodelled(self, k: KernelVersion) -> Option<String> {
        match self {
            TmpfsMount::Mount(huge)
                if huge != ShmemHuge::Never && !crate::era::has_shmem_thp(k) =>
            {
                Some(format!(
                    "tmpfs huge={}: shmem THPs appear in v4.8 (5a6e75f8110c); {k} has none",
                    huge.name()
                ))
            }
            _ => None,
        }
    }
}

impl KState {
    /// The tmpfs inode `vma` maps (`shmem_file(vma->vm_file)`), if it maps one.
    pub(crate) fn vma_shmem_inode(&self, vma: VmaId) -> Option<InodeId> {
        let inode = self.file(self.vma(vma).file?).inode;
        self.inodes[inode].fs.tmpfs_mount().map(|_| inode)
    }

    /// The `huge` option of the superblock `inode` lives on, if it is a tmpfs inode.
    fn shmem_sb_huge(&self, inode: InodeId) -> Option<ShmemHuge> {
        Some(match self.inodes[inode].fs.tmpfs_mount()? {
            TmpfsMount::Mount(huge) => huge,
            TmpfsMount::ShmMnt => match self.thp.settings.shmem_enabled {
                ShmemEnabled::Always => ShmemHuge::Always,
                ShmemEnabled::WithinSize => ShmemHuge::WithinSize,
                ShmemEnabled::Advise => ShmemHuge::Advise,
                ShmemEnabled::Never | ShmemEnabled::Deny | ShmemEnabled::Force => ShmemHuge::Never,
            },
        })
    }

    /// `shmem_is_huge`: whether page `index` of the tmpfs inode `inode` may be in a PMD-sized
    /// folio, for a fault or scan in `vma` (`None`: no mm, a `write`), `force` for
    /// `MADV_COLLAPSE` (the module note has the order of the tests).
    pub(crate) fn shmem_is_huge(
        &self,
        inode: InodeId,
        index: u64,
        force: bool,
        vma: Option<VmaId>,
    ) -> bool {
        let Some(huge) = self.shmem_sb_huge(inode) else { return false };
        if !crate::era::has_shmem_thp(self.thp.kernel)
            || vma.is_some_and(|v| crate::huge_memory::policy::vma_thp_disabled(self, v))
        {
            return false;
        }
        match self.thp.settings.shmem_enabled {
            ShmemEnabled::Deny => return false,
            ShmemEnabled::Force => return true,
            _ if force => return true,
            _ => {}
        }
        let advised = vma.is_some_and(|v| self.vma(v).flags.has(VmFlags::HUGEPAGE));
        match huge {
            ShmemHuge::Always => true,
            ShmemHuge::WithinSize => {
                let end = (index + 1).next_multiple_of(HPAGE_PMD_NR);
                self.inodes[inode].size_pages() >= end || advised
            }
            ShmemHuge::Advise => advised,
            ShmemHuge::Never => false,
        }
    }
}

/// `shmem_alloc_and_add_folio` with a PMD-sized folio, for a fault at the PMD-aligned `index`
/// of the tmpfs file `inode` (the caller checked the range against the VMA and the file): when
/// `shmem_is_huge` allows it at the fault's index and no page is cached in the range, allocates
/// a zeroed THP and caches it. Returns whether it did; when not, the fault goes on with 4 KiB
/// pages.
pub(crate) async fn shmem_alloc_huge(vmf: &Vmf<'_>, inode: InodeId, index: u64) -> bool {
    let cx = vmf.cx;
    let range_empty = |st: &KState| {
        st.inodes[inode].mapping.pages.range(index..index + HPAGE_PMD_NR).next().is_none()
    };
    let may_reclaim = {
        let st = cx.st();
        if !st.shmem_is_huge(inode, vmf.pgoff, false, Some(vmf.vma)) || !range_empty(&st) {
            return false;
        }
        st.thp.settings.fault_may_reclaim(st.vma(vmf.vma).flags)
    };
    let got = crate::page_alloc::alloc_thp_folio(cx, Order::PMD, may_reclaim).await;
    let head = match got {
        Ok(head) => head,
        Err(why) => {
            let mut st = cx.st();
            if crate::vmstat::exists_on(VmStat::ThpFileFallback, st.thp.kernel) {
                st.vmstat.inc(VmStat::ThpFileFallback);
            }
            st.count_mthp_stat(Order::PMD, MthpStat::ShmemFallback);
            if why == crate::page_alloc::AllocFailure::Charge {
                st.count_mthp_stat(Order::PMD, MthpStat::ShmemFallbackCharge);
            }
            return false;
        }
    };
    cx.charge_n(Cost::ZeroPage4k, HPAGE_PMD_NR).await;
    let mut st = cx.st();
    if !range_empty(&st) {
        // Another task cached a page in the range meanwhile: the 4 KiB path finds it.
        st.put_folio_extra(head);
        return false;
    }
    st.shmem_fill(inode, index, head);
    st.folios.set(head, pg::UPTODATE);
    st.page_cache_insert(inode, index, head, false, cx.in_lru_fault());
    st.put_folio_extra(head);
    st.vmstat.inc(VmStat::ThpFileAlloc);
    st.count_mthp_stat(Order::PMD, MthpStat::ShmemAlloc);
    true
}

impl KState {
    /// `shmem_writepage`: moves the locked, unmapped, dirty shmem folio `head` from the page
    /// cache to the swap cache, leaving its swap entry in the page cache's slot; the swap write
    /// follows (`vmscan.rs`). False (the kernel's `redirty`) when no swap slot can be had.
    pub(crate) fn shmem_writepage(&mut self, head: Pfn) -> bool {
        let Mapping::File(inode) = self.folios.mapping(head) else {
            unreachable!("shmem_writepage of folio {head}, which is not in a page cache")
        };
        debug_assert!(self.folios.test(head, pg::LOCKED) && self.folios.folio_mapcount(head) == 0);
        let index = self.folio_index(head);
        let Some(slot) = self.add_to_swap(head) else { return false };
        self.page_cache_delete(inode, head);
        self.folios.set(head, pg::DIRTY);
        self.swap_duplicate(slot); // `swap_shmem_alloc`: the page cache's entry
        self.inodes[inode].mapping.swapped.insert(index, slot);
        true
    }

    /// `shmem_evict_inode`: the last reference to an unlinked tmpfs file (a memfd's, a shared
    /// anonymous mapping's, a SysV segment's) is gone, so its pages leave the page cache and its
    /// swap entries are freed (`shmem_truncate_range` over the whole file). Nothing maps or
    /// opens the file any more; a folio reclaim holds locked at this moment stays cached (the
    /// kernel's truncation would wait for its lock), an approximation.
    pub(crate) fn shmem_evict_inode(&mut self, inode: InodeId) {
        if !self.inodes[inode].fs.swap_backed() || self.paths.values().any(|&i| i == inode) {
            return;
        }
        let mut heads: Vec<Pfn> =
            self.inodes[inode].mapping.pages.values().map(|&p| self.folios.head(p)).collect();
        heads.dedup();
        for head in heads {
            if !self.folios.test(head, pg::LOCKED) {
                self.page_cache_delete(inode, head);
            }
        }
        self.shmem_free_swap_range(inode, 0, u64::MAX);
    }

    /// `shmem_undo_range`'s swap entries (`shmem_free_swap`): frees those of pages
    /// `[first, end)` of `inode` (truncation, hole punching).
    pub(crate) fn shmem_free_swap_range(&mut self, inode: InodeId, first: u64, end: u64) {
        let m = &mut self.inodes[inode].mapping;
        let gone: Vec<u64> = m.swapped.range(first..end).map(|(&i, _)| i).collect();
        for index in gone {
            let slot = self.inodes[inode].mapping.swapped.remove(&index).expect("listed");
            self.free_swap_and_cache(slot);
        }
    }

    /// Swap entries of `inode` at pages `[first, end)` (`shmem_partial_swap_usage`).
    pub(crate) fn shmem_swapped_in(&self, inode: InodeId, first: u64, end: u64) -> Vec<u64> {
        self.inodes[inode].mapping.swapped.range(first..end).map(|(&i, _)| i).collect()
    }

    /// The swap-in's last step under the folio lock (`shmem_swapin_folio` after the read):
    /// the folio goes back in the page cache at `index`, dirty, and the slot is freed.
    fn shmem_swapin_done(&mut self, inode: InodeId, index: u64, slot: u64, head: Pfn) {
        self.inodes[inode].mapping.swapped.remove(&index);
        self.swap_cache_delete(head);
        self.swap_free(slot);
        self.page_cache_add(inode, index, head);
        self.folio_mark_dirty(head);
    }
}

/// `shmem_swapin_folio`: brings page `index` of `inode`, whose page-cache slot holds a swap
/// entry, back into the page cache, from the swap cache or read from the device. Returns
/// whether it read (a major fault for a fault). A racing swap-in or truncation is seen under
/// the folio lock, and the lookup starts again.
pub(crate) async fn shmem_swapin(cx: &Cx, inode: InodeId, index: u64) -> Result<bool, VmFault> {
    loop {
        let Some(slot) = cx.st().inodes[inode].mapping.swapped.get(&index).copied() else {
            return Ok(false); // swapped in or truncated meanwhile: the caller looks again
        };
        let cached = cx.st().swap.cached(slot);
        let (head, read) = match cached {
            Some(head) => {
                cx.st().folios.get_extra(head);
                folio_lock(cx, head).await;
                (head, false)
            }
            None => {
                let new =
                    crate::page_alloc::alloc_folio(cx, Order::BASE).await.ok_or(VmFault::Oom)?;
                let raced = {
                    let mut st = cx.st();
                    let raced = st.swap.cached(slot).is_some()
                        || st.inodes[inode].mapping.swapped.get(&index) != Some(&slot);
                    if raced {
                        st.put_folio_extra(new);
                    } else {
                        st.swapin_new(slot, new, cx.in_lru_fault()); // locked; our reference kept
                    }
                    raced
                };
                if raced {
                    continue;
                }
                crate::page_io::swap_read_folio(cx, new).await;
                (new, true)
            }
        };
        let still = {
            let mut st = cx.st();
            let still = st.swap.slot_of(head) == Some(slot)
                && st.inodes[inode].mapping.swapped.get(&index) == Some(&slot);
            if still {
                st.shmem_swapin_done(inode, index, slot, head);
            }
            still
        };
        folio_unlock(cx, head);
        cx.st().put_folio_extra(head);
        if still {
            return Ok(read);
        }
    }
}
