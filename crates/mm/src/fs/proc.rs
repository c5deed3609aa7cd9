//! Observables in the kernel's text formats: `/proc/PID/maps`, `smaps`, `smaps_rollup`,
//! `status` (memory lines), `pagemap` entries, `/proc/meminfo` (`/proc/PID/stat` is
//! `proc/array.rs`) (`fs/proc/task_mmu.c`,
//! `fs/proc/meminfo.c`, `Documentation/admin-guide/mm/pagemap.rst`, Linux v6.8).
//!
//! smaps accounting follows `smaps_account` and `smaps_pmd_entry`: an anonymous THP mapped by
//! a PMD counts in `AnonHugePages`, a file THP in `FilePmdMapped` and its pages' mapcounts include the PMD mappings; the zero pages and other special mappings (DAX
//! blocks, as before v6.15) are not counted (`vm_normal_page` is NULL); a page mapped more than once is Shared and adds
//! `size / mapcount` to Pss (fixed point with `PSS_SHIFT` = 12); dirty means a dirty PTE or a
//! dirty folio; referenced means a young PTE or a referenced folio; `LazyFree` (v4.12+, with
//! the lazyfree LRU) counts the anonymous pages no longer swap-backed and not dirty.
//!
//! `THPeligible` is the THP policy's answer for the VMA (`huge_memory/policy.rs`), printed
//! from v5.0 (7635d9cbe832). The smaps fields and their order follow the run's kernel
//! (`era::smaps_has_field`: `LazyFree` v4.12+, `FilePmdMapped` v5.4+, `Pss_Dirty` v6.0+;
//! `era::smaps_page_size_after_size`: `KernelPageSize`/`MMUPageSize` after `Size` from v4.14,
//! after `SwapPss` before). `smaps_rollup` exists from v4.14 ("mm: add /proc/pid/smaps_rollup",
//! 493b0e9d945f; before, ENOENT) and prints `Pss_Anon`/`Pss_File`/`Pss_Shmem` after `Pss` (and
//! `Pss_Dirty`) from v5.3 ("mm: smaps: split PSS into components", 37ae24445846, found in
//! the kernel history of the search corpus): each page's Pss share goes to the first of
//! anonymous, swap-backed (shmem) or file, as `smaps_page_accumulate` (v6.1) sorts it; the
//! per-VMA smaps never prints them. Not printed because the model does not keep them: `KSM`
//! (v6.x), `ProtectionKey` (no pkeys).
//!
//! pagemap's `PM_MMAP_EXCLUSIVE` says the page is mapped once (its PTE mappings plus its folio's
//! PMD mappings); for a PMD-mapped THP before v6.11 every entry of the PMD took the head page's
//! answer, and again from v6.15 (`era::pagemap_pmd_exclusive_per_page`); a PMD's entries have
//! `PM_FILE` from v6.11 (`era::pagemap_pmd_sets_file`). A hugetlb entry (`pagemap_hugetlb_range`)
//! has both bits from v4.3 (`era::pagemap_hugetlb_sets_file_exclusive`): `PM_FILE` for a page
//! that is not anonymous, `PM_MMAP_EXCLUSIVE` for a huge page mapped once and, from v6.10, not
//! through a shared PMD table (`era::pagemap_hugetlb_exclusive_sees_pmd_share`). A guard
//! region's PTE marker (v6.13) is an entry like a swap entry's, `PM_SWAP` with the marker's type
//! and offset, and has `PM_GUARD_REGION` (bit 58) from v6.15 (`era::pagemap_has_guard_region`).
//! `PM_UFFD_WP` (bit 57, v5.13, `era::pagemap_uffd_wp`) shows a PTE, huge PMD or swap entry with
//! the uffd-wp bit (`userfaultfd/wp.rs`).
//!
//! status's page-table lines follow the era (`era::status_has_vm_pmd`): `VmPTE` counts the PTE
//! tables and `VmPMD` the PMD tables from v4.0 (dc6c9a35b66b) to v4.14; from v4.15
//! (af5b0f6a09e4, "mm: consolidate page table accounting") there is no `VmPMD` and `VmPTE` counts
//! the PTE, PMD and PUD tables (`mm_pgtables_bytes`). The PGD is never counted. Deposited tables
//! of anonymous THPs count as PTE tables (`mm_inc_nr_ptes` beside the deposit), hugetlb's
//! shared PMD tables as PMD tables in each mm that maps them (`huge_pmd_share`).
//!
//! meminfo prints only what the model keeps. `MemAvailable` is approximated as free memory plus
//! the file LRU pages (the kernel also subtracts watermarks and adds reclaimable slab, which the
//! model does not have).

pub mod array;
pub mod clear_refs;
pub(crate) mod mem;
pub mod page;

use crate::era::KernelVersion;
use crate::errno::Errno;
use crate::folio::{LruList, pg};
use crate::hugetlb::hugetlb_fault::Ptep;
use crate::kernel::KState;
use crate::memory::vm_normal_page;
use crate::mm_struct::MmCounter;
use crate::pgtable::{Level, Pte};
use crate::types::hugetlb::Owner;
use crate::types::ids::MmId;
use crate::types::ids::Pid;
use crate::types::ids::VmaId;
use crate::vma::{VmFlags, VmaRole};
use crate::vmstat::VmStat;
use simcore::{Bytes, Pfn, VirtAddr};
use std::fmt::Write as _;

const PSS_SHIFT: u32 = 12;

/// Per-VMA memory statistics (`struct mem_size_stats`), in bytes (Pss fixed point).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemSizeStats {
    pub resident: u64,
    pub pss: u64,
    pub pss_dirty: u64,
    /// Pss of anonymous, shmem (swap-backed file) and other file pages (`pss_anon`,
    /// `pss_shmem`, `pss_file`; `smaps_page_accumulate`).
    pub pss_anon: u64,
    pub pss_shmem: u64,
    pub pss_file: u64,
    pub shared_clean: u64,
    pub shared_dirty: u64,
    pub private_clean: u64,
    pub private_dirty: u64,
    pub referenced: u64,
    pub anonymous: u64,
    /// Anonymous pages that `MADV_FREE` made lazyfree and nobody wrote since (`LazyFree`, v4.12+).
    pub lazyfree: u64,
    pub swap: u64,
    pub pss_locked: u64,
    /// Bytes of file THPs mapped by PMDs (`FilePmdMapped`).
    pub file_thp: u64,
    /// Bytes of shmem THPs mapped by PMDs (`ShmemPmdMapped`).
    pub shmem_thp: u64,
    /// Bytes of anonymous THPs mapped by PMDs (`AnonHugePages`).
    pub anon_thp: u64,
    /// hugetlb pages mapped more than once or through a shared PMD table, and the others
    /// (`smaps_hugetlb_range`).
    pub shared_hugetlb: u64,
    pub private_hugetlb: u64,
}

impl MemSizeStats {
    fn add(&mut self, o: &MemSizeStats) {
        self.resident += o.resident;
        self.pss += o.pss;
        self.pss_dirty += o.pss_dirty;
        self.pss_anon += o.pss_anon;
        self.pss_shmem += o.pss_shmem;
        self.pss_file += o.pss_file;
        self.shared_clean += o.shared_clean;
        self.shared_dirty += o.shared_dirty;
        self.private_clean += o.private_clean;
        self.private_dirty += o.private_dirty;
        self.referenced += o.referenced;
        self.anonymous += o.anonymous;
        self.lazyfree += o.lazyfree;
        self.swap += o.swap;
        self.pss_locked += o.pss_locked;
        self.file_thp += o.file_thp;
        self.shmem_thp += o.shmem_thp;
        self.anon_thp += o.anon_thp;
        self.shared_hugetlb += o.shared_hugetlb;
        self.private_hugetlb += o.private_hugetlb;
    }

    /// `size` bytes of a page in `AnonHugePages`/`ShmemPmdMapped`/`FilePmdMapped` when a PMD
    /// maps it (`huge`), `Rss`, and `Anonymous` and `LazyFree` (anonymous, no longer
    /// swap-backed, clean) by its folio's kind.
    fn account_kind(&mut self, size: u64, huge: bool, anon: bool, swapbacked: bool, dirty: bool) {
        match (huge, anon) {
            (true, true) => self.anon_thp += size,
            (true, false) if swapbacked => self.shmem_thp += size,
            (true, false) => self.file_thp += size,
            (false, _) => {}
        }
        self.resident += size;
        if anon {
            self.anonymous += size;
            if !dirty && !swapbacked {
                self.lazyfree += size;
            }
        }
    }

    /// The smaps fields as `(name, kB)`, in the kernel's order.
    pub fn fields(&self) -> [(&'static str, u64); 20] {
        let kb = |b: u64| b >> 10;
        let pss = |b: u64| b >> (10 + PSS_SHIFT);
        [
            ("Rss", kb(self.resident)),
            ("Pss", pss(self.pss)),
            ("Pss_Dirty", pss(self.pss_dirty)),
            ("Pss_Anon", pss(self.pss_anon)),
            ("Pss_File", pss(self.pss_file)),
            ("Pss_Shmem", pss(self.pss_shmem)),
            ("Shared_Clean", kb(self.shared_clean)),
            ("Shared_Dirty", kb(self.shared_dirty)),
            ("Private_Clean", kb(self.private_clean)),
            ("Private_Dirty", kb(self.private_dirty)),
            ("Referenced", kb(self.referenced)),
            ("Anonymous", kb(self.anonymous)),
            ("LazyFree", kb(self.lazyfree)),
            ("AnonHugePages", kb(self.anon_thp)),
            ("ShmemPmdMapped", kb(self.shmem_thp)),
            ("FilePmdMapped", kb(self.file_thp)),
            ("Shared_Hugetlb", kb(self.shared_hugetlb)),
            ("Private_Hugetlb", kb(self.private_hugetlb)),
            ("Swap", kb(self.swap)),
            ("SwapPss", 0),
        ]
    }
}

impl KState {
    /// Walks one VMA's page tables as `smaps_pte_range` does.
    pub fn smaps_vma(&self, vma: VmaId) -> MemSizeStats {
        if self.vma(vma).vm_ops.is_hugetlb() {
            return self.smaps_hugetlb(vma);
        }
        let v = self.vma(vma);
        let pgd = self.mm(v.mm).pgd;
        let locked = v.flags.has(VmFlags::LOCKED);
        let mut mss = MemSizeStats::default();
        let mut addr = v.start;
        while addr < v.end {
            let Some((pte, level)) = self.pt.translate(pgd, addr) else {
                addr = self.pt.skip_empty(pgd, addr);
                continue;
            };
            let pmd_offset = (addr.0 >> 12) & 511;
            addr = addr + Bytes::PAGE;
            if pte.is_swap() {
                mss.swap += 4096;
                continue;
            }
            let Some(mapped) = vm_normal_page(pte) else { continue };
            // A PMD leaf maps a whole file THP (`smaps_pmd_entry`): this page is its piece, and
            // `page_mapcount` counts the PMD mappings too.
            let huge = level == Level::Pmd;
            let page = if huge { mapped + pmd_offset } else { mapped };
            let head = self.folios.head(page);
            let size = 4096u64;
            let anon = self.folios.is_anon(head);
            let swapbacked = self.folios.test(head, pg::SWAPBACKED);
            let dirty = pte.dirty() || self.folios.test(head, pg::DIRTY);
            mss.account_kind(size, huge, anon, swapbacked, dirty);
            if pte.young() || self.folios.test(head, pg::REFERENCED) {
                mss.referenced += size;
            }
            let mapcount =
                u64::from(self.folios.page_mapcount(page) + self.folios.entire_mapcount(head))
                    .max(1);
            let pss = (size << PSS_SHIFT) / mapcount;
            mss.pss += pss;
            *(if anon {
                &mut mss.pss_anon
            } else if swapbacked {
                &mut mss.pss_shmem
            } else {
                &mut mss.pss_file
            }) += pss;
            if dirty {
                mss.pss_dirty += pss;
            }
            if locked {
                mss.pss_locked += pss;
            }
            match (mapcount >= 2, dirty) {
                (true, true) => mss.shared_dirty += size,
                (true, false) => mss.shared_clean += size,
                (false, true) => mss.private_dirty += size,
                (false, false) => mss.private_clean += size,
            }
        }
        mss.swap += self.smaps_shmem_swap(vma);
        mss
    }

    /// Bytes of a shmem mapping's file swapped out at pages of the mapping that no PTE maps
    /// (`shmem_swap_usage`, `smaps_pte_hole`; `shmem.rs` has the rule).
    fn smaps_shmem_swap(&self, vma: VmaId) -> u64 {
        let Some(inode) = self.vma_shmem_inode(vma) else { return 0 };
        let v = self.vma(vma);
        let pgd = self.mm(v.mm).pgd;
        let first = v.page_index(v.start);
        let end = first + (v.len().as_u64() >> 12);
        let holes = self.shmem_swapped_in(inode, first, end).into_iter().filter(|&index| {
            v.address_of(index).is_some_and(|a| self.pt.translate(pgd, a).is_none())
        });
        holes.count() as u64 * 4096
    }

    /// `smaps_hugetlb_range`: a hugetlb VMA counts only its mapped huge pages, shared when
    /// mapped more than once or (v6.2+, [`crate::era::smaps_hugetlb_counts_pmd_shared`]) through
    /// a shared PMD table.
    fn smaps_hugetlb(&self, vma: VmaId) -> MemSizeStats {
        let v = self.vma(vma);
        let size = self.hstate_vma(vma).expect("a hugetlb VMA");
        let pmd_shared = crate::era::smaps_hugetlb_counts_pmd_shared(self.thp.kernel);
        let mut mss = MemSizeStats::default();
        let mut addr = v.start;
        while addr < v.end {
            if let Some(p) = self.huge_pte_offset(v.mm, addr, size) {
                let e = self.huge_ptep_get(p);
                if e.is_present() {
                    let shared = self.huge_page(e.pfn()).mapcount >= 2
                        || (pmd_shared && self.hugetlb_pmd_shared(p));
                    *(if shared { &mut mss.shared_hugetlb } else { &mut mss.private_hugetlb }) +=
                        size.bytes();
                }
            }
            addr = addr + Bytes(size.bytes());
        }
        mss
    }

    /// The `/proc/PID/maps` line of a VMA (without newline).
    pub fn maps_line(&self, vma: VmaId) -> String {
        let v = self.vma(vma);
        let f = v.flags;
        let perms: String = [
            if f.has(VmFlags::READ) { 'r' } else { '-' },
            if f.has(VmFlags::WRITE) { 'w' } else { '-' },
            if f.has(VmFlags::EXEC) { 'x' } else { '-' },
            if f.has(VmFlags::MAYSHARE) { 's' } else { 'p' },
        ]
        .into_iter()
        .collect();
        let (offset, dev, ino, name) = match v.file {
            Some(file) => {
                let inode = self.file(file).inode;
                let i = &self.inodes[inode];
                (v.pgoff << 12, i.fs.maps_dev(), 1000 + u64::from(inode.0), i.path.clone())
            }
            None => {
                let name = match v.role {
                    VmaRole::Stack => "[stack]",
                    VmaRole::Plain if self.vma_is_initial_heap(vma) => "[heap]",
                    VmaRole::Plain => "",
                };
                (0, "00:00", 0, name.to_string())
            }
        };
        let mut line =
            format!("{:08x}-{:08x} {perms} {offset:08x} {dev} {ino} ", v.start.0, v.end.0);
        if !name.is_empty() {
            while line.len() < 73 {
                line.push(' ');
            }
            line.push_str(&name);
        }
        line.trim_end().to_string()
    }

    /// The VMAs of `pid`'s mm in address order (none once it exited).
    pub fn vmas_of(&self, pid: Pid) -> Vec<VmaId> {
        match self.procs[pid].mm {
            Some(mm) => self.mm(mm).vmas.values().copied().collect(),
            None => Vec::new(),
        }
    }

    /// `/proc/PID/maps`.
    pub fn maps(&self, pid: Pid) -> String {
        self.vmas_of(pid).into_iter().map(|v| self.maps_line(v) + "\n").collect()
    }

    /// `/proc/PID/smaps`, in the fields and order of the run's kernel (`era::smaps_has_field`,
    /// `era::smaps_page_size_after_size`).
    pub fn smaps(&self, pid: Pid) -> String {
        let k = self.thp.kernel;
        let mut out = String::new();
        for v in self.vmas_of(pid) {
            let vma = self.vma(v);
            let mss = self.smaps_vma(v);
            let _ = writeln!(out, "{}", self.maps_line(v));
            put_kb(&mut out, "Size", vma.len().as_kib());
            let page_kb = self.hstate_vma(v).map_or(4, |s| s.kb());
            let page_sizes = |out: &mut String| {
                put_kb(out, "KernelPageSize", page_kb);
                put_kb(out, "MMUPageSize", page_kb);
            };
            let early = crate::era::smaps_page_size_after_size(k);
            if early {
                page_sizes(&mut out);
            }
            put_fields(&mut out, &mss, k, false);
            if !early {
                page_sizes(&mut out);
            }
            put_kb(&mut out, "Locked", mss.pss_locked >> (10 + PSS_SHIFT));
            if let Some(eligible) = crate::huge_memory::policy::smaps_thp_eligible(self, v) {
                let _ = writeln!(out, "THPeligible:    {:>8}", u8::from(eligible));
            }
            let _ = writeln!(out, "VmFlags: {} ", vma.flags.mnemonics());
        }
        out
    }

    /// `/proc/PID/smaps_rollup`: ENOENT before the file existed (`era::has_smaps_rollup`).
    pub fn smaps_rollup(&self, pid: Pid) -> Result<String, Errno> {
        if !crate::era::has_smaps_rollup(self.thp.kernel) {
            return Err(Errno::ENOENT);
        }
        let vmas = self.vmas_of(pid);
        let mut total = MemSizeStats::default();
        for &v in &vmas {
            total.add(&self.smaps_vma(v));
        }
        let (lo, hi) = match (vmas.first(), vmas.last()) {
            (Some(&a), Some(&b)) => (self.vma(a).start.0, self.vma(b).end.0),
            _ => (0, 0),
        };
        let mut out =
            format!("{lo:08x}-{hi:08x} ---p 00000000 00:00 0                          [rollup]\n");
        put_fields(&mut out, &total, self.thp.kernel, true);
        put_kb(&mut out, "Locked", total.pss_locked >> (10 + PSS_SHIFT));
        Ok(out)
    }

    /// The summed smaps statistics of a process (for APIs that want numbers, not text).
    pub fn smaps_totals(&self, pid: Pid) -> MemSizeStats {
        let mut total = MemSizeStats::default();
        for v in self.vmas_of(pid) {
            total.add(&self.smaps_vma(v));
        }
        total
    }

    /// The memory lines of `/proc/PID/status`.
    pub fn status(&self, pid: Pid) -> String {
        let mut out = String::new();
        let Some(mm) = self.procs[pid].mm else { return out };
        let m = self.mm(mm);
        let total_vm: u64 = m.vmas.values().map(|&v| self.vma(v).len().as_kib()).sum();
        let kb = |c: MmCounter| m.rss(c) * 4;
        // Up to v4.14 `VmPTE` counts PTE tables and `VmPMD` PMD tables; from v4.15 `VmPTE` is
        // every level's (`era::status_has_vm_pmd`).
        let vm_pmd = crate::era::status_has_vm_pmd(self.thp.kernel);
        let vm_pte = if vm_pmd { m.nr_pgtables(Level::Pte) } else { m.nr_pgtables_total() };
        let lines = [
            ("VmSize", total_vm),
            ("VmLck", self.locked_vm(mm) * 4),
            ("VmHWM", m.hiwater_rss * 4),
            ("VmRSS", m.rss_total() * 4),
            ("RssAnon", kb(MmCounter::AnonPages)),
            ("RssFile", kb(MmCounter::FilePages)),
            ("RssShmem", kb(MmCounter::ShmemPages)),
            ("VmPTE", vm_pte * 4),
            ("VmPMD", m.nr_pgtables(Level::Pmd) * 4),
            ("VmSwap", kb(MmCounter::SwapEnts)),
            // A counter that went below zero (see `Hugetlb::usage`) reads 0 here; the kernel
            // prints it as an unsigned long.
            ("HugetlbPages", self.hugetlb.usage.get(&mm).map_or(0, |&u| u.max(0) as u64) * 4),
        ];
        let hugetlb_pages = crate::era::status_has_hugetlb_pages(self.thp.kernel);
        let shown = |name: &str| match name {
            "VmPMD" => vm_pmd,
            "HugetlbPages" => hugetlb_pages,
            _ => true,
        };
        for (name, v) in lines.into_iter().filter(|&(name, _)| shown(name)) {
            let _ = writeln!(out, "{name}:\t{v:>8} kB");
        }
        out
    }

    /// `/proc/PID/pagemap` entries of `pages` pages from `addr` (as root: PFNs shown).
    pub fn pagemap(&self, mm: MmId, addr: VirtAddr, pages: u64) -> Vec<u64> {
        let pgd = self.mm(mm).pgd;
        (0..pages)
            .map(|i| {
                let a = addr + Bytes(i << 12);
                let vma_softdirty =
                    self.find_vma(mm, a).is_some_and(|v| self.vma(v).flags.has(VmFlags::SOFTDIRTY));
                let mut e = 0u64;
                match self.pt.translate(pgd, a) {
                    Some((pte, level)) if pte.is_present() => {
                        // A huge PMD or PUD maps many frames: this page's is the head's plus its
                        // offset.
                        let offset = (a.0 & ((1 << level.shift()) - 1)) >> 12;
                        e |= PM_PRESENT | ((pte.pfn().0 + offset) & PM_PFN_MASK);
                        if pte.soft_dirty() {
                            e |= PM_SOFT_DIRTY;
                        }
                        e |= self.pagemap_uffd_wp(pte);
                        if let Some(mapped) = vm_normal_page(pte) {
                            e |= match self.hugetlb.page(mapped) {
                                Some(_) => self.pagemap_hugetlb_flags(mm, a, mapped),
                                None => self.pagemap_page_flags(mapped, offset, level),
                            };
                        }
                    }
                    Some((pte, _)) if pte.is_swap_pte() => {
                        // A guard marker too: `PM_SWAP` with the marker's type and bits, and
                        // from v6.15 `PM_GUARD_REGION`.
                        let (t, off) = pte.swap_entry();
                        e |= PM_SWAP | u64::from(t) | (off << 5);
                        if pte.is_guard() && crate::era::pagemap_has_guard_region(self.thp.kernel) {
                            e |= PM_GUARD_REGION;
                        }
                        if pte.soft_dirty() {
                            e |= PM_SOFT_DIRTY;
                        }
                        e |= self.pagemap_uffd_wp(pte);
                    }
                    _ => {}
                }
                if vma_softdirty {
                    e |= PM_SOFT_DIRTY;
                }
                e
            })
            .collect()
    }

    /// `PM_UFFD_WP` of a present entry or swap entry with the uffd-wp bit (v5.13,
    /// `era::pagemap_uffd_wp`).
    fn pagemap_uffd_wp(&self, pte: Pte) -> u64 {
        let shown = pte.uffd_wp() && crate::era::pagemap_uffd_wp(self.thp.kernel);
        if shown { PM_UFFD_WP } else { 0 }
    }

    /// `PM_FILE` and `PM_MMAP_EXCLUSIVE` of the page `offset` pages into what an entry of
    /// `level` maps from `mapped`: by that page's mapcount (its PTE mappings and the folio's PMD
    /// mappings), or for a PMD before v6.11 and from v6.15 by the head page's
    /// ([`crate::era::pagemap_pmd_exclusive_per_page`]); a PMD's entries have no `PM_FILE`
    /// before v6.11 ([`crate::era::pagemap_pmd_sets_file`]).
    fn pagemap_page_flags(&self, mapped: Pfn, offset: u64, level: Level) -> u64 {
        let k = self.thp.kernel;
        let pte = level == Level::Pte;
        let page = if pte || crate::era::pagemap_pmd_exclusive_per_page(k) {
            mapped + offset
        } else {
            mapped
        };
        let head = self.folios.head(page);
        let mut e = 0;
        if (pte || crate::era::pagemap_pmd_sets_file(k)) && !self.folios.is_anon(head) {
            e |= PM_FILE;
        }
        if self.folios.page_mapcount(page) + self.folios.entire_mapcount(head) == 1 {
            e |= PM_MMAP_EXCLUSIVE;
        }
        e
    }

    /// `pagemap_hugetlb_range`'s bits of the huge page `head` that `addr` of `mm` maps, the same
    /// for every base page of it (v4.3+, [`crate::era::pagemap_hugetlb_sets_file_exclusive`]):
    /// `PM_FILE` unless the page is anonymous (a private copy), `PM_MMAP_EXCLUSIVE` when it is
    /// mapped once and, from v6.10, not through a shared PMD table
    /// ([`crate::era::pagemap_hugetlb_exclusive_sees_pmd_share`]).
    fn pagemap_hugetlb_flags(&self, mm: MmId, addr: VirtAddr, head: Pfn) -> u64 {
        let k = self.thp.kernel;
        if !crate::era::pagemap_hugetlb_sets_file_exclusive(k) {
            return 0;
        }
        let page = self.huge_page(head);
        let mut e = 0;
        if page.owner != Owner::Anon {
            e |= PM_FILE;
        }
        let pmd_shared = crate::era::pagemap_hugetlb_exclusive_sees_pmd_share(k)
            && self
                .huge_pte_offset(mm, addr, page.size)
                .is_some_and(|p| self.hugetlb_pmd_shared(p));
        if page.mapcount == 1 && !pmd_shared {
            e |= PM_MMAP_EXCLUSIVE;
        }
        e
    }

    /// `hugetlb_pmd_shared`: whether the table holding hugetlb entry `p` is a PMD table that
    /// other mms share too (`huge_pmd_share`).
    fn hugetlb_pmd_shared(&self, p: Ptep) -> bool {
        self.hugetlb.pmd_share.contains_key(&p.table)
    }

    /// `nr_blockdev_pages`: the page cache of block devices, meminfo's `Buffers` (the model has
    /// no buffer heads of file systems' metadata, which the kernel counts there too).
    fn nr_blockdev_pages(&self) -> u64 {
        let bdevs = self.inodes.iter().filter(|(_, i)| i.fs.is_blkdev());
        bdevs.map(|(_, i)| i.mapping.nrpages).sum()
    }

    /// `/proc/meminfo`.
    pub fn meminfo(&self) -> String {
        let vs = &self.vmstat;
        let pages = |k: VmStat| vs.get(k);
        let lru = |l: LruList| self.lru_pages(l);
        let file_lru = lru(LruList::ActiveFile) + lru(LruList::InactiveFile);
        // `ShmemHugePages` and `ShmemPmdMapped` came with shmem THPs (v4.8).
        let shmem_thp = crate::era::has_shmem_thp(self.thp.kernel);
        let buffers = self.nr_blockdev_pages();
        let mut out = String::new();
        for (name, p) in [
            ("MemTotal", self.total_pages()),
            ("MemFree", pages(VmStat::NrFreePages)),
            ("MemAvailable", pages(VmStat::NrFreePages) + file_lru),
            ("Buffers", buffers),
            ("Cached", pages(VmStat::NrFilePages) - buffers),
            ("SwapCached", pages(VmStat::NrSwapcached)),
            ("Active", lru(LruList::ActiveAnon) + lru(LruList::ActiveFile)),
            ("Inactive", lru(LruList::InactiveAnon) + lru(LruList::InactiveFile)),
            ("Active(anon)", lru(LruList::ActiveAnon)),
            ("Inactive(anon)", lru(LruList::InactiveAnon)),
            ("Active(file)", lru(LruList::ActiveFile)),
            ("Inactive(file)", lru(LruList::InactiveFile)),
            ("Unevictable", lru(LruList::Unevictable)),
            ("Mlocked", pages(VmStat::NrMlock)),
            ("SwapTotal", self.swap.total()),
            ("SwapFree", self.swap.nr_free()),
            ("Dirty", pages(VmStat::NrDirty)),
            ("Writeback", pages(VmStat::NrWriteback)),
            ("AnonPages", pages(VmStat::NrAnonPages)),
            ("Mapped", pages(VmStat::NrMapped)),
            ("Shmem", pages(VmStat::NrShmem)),
            ("PageTables", pages(VmStat::NrPageTablePages)),
            ("AnonHugePages", pages(VmStat::NrAnonTransparentHugepages) * 512),
            ("ShmemHugePages", pages(VmStat::NrShmemHugepages) * 512),
            ("ShmemPmdMapped", pages(VmStat::NrShmemPmdmapped) * 512),
            ("FileHugePages", pages(VmStat::NrFileHugepages) * 512),
            ("FilePmdMapped", pages(VmStat::NrFilePmdmapped) * 512),
        ]
        .into_iter()
        .filter(|&(name, _)| {
            shmem_thp || !name.starts_with("ShmemHuge") && name != "ShmemPmdMapped"
        }) {
            put_kb(&mut out, name, p * 4);
        }
        out.push_str(&self.hugetlb_meminfo());
        out
    }
}

/// `/proc/PID/pagemap` bits.
pub const PM_PFN_MASK: u64 = (1 << 55) - 1;
pub const PM_SOFT_DIRTY: u64 = 1 << 55;
pub const PM_MMAP_EXCLUSIVE: u64 = 1 << 56;
pub const PM_GUARD_REGION: u64 = 1 << 58;
pub const PM_UFFD_WP: u64 = 1 << 57;
pub const PM_FILE: u64 = 1 << 61;
pub const PM_SWAP: u64 = 1 << 62;
pub const PM_PRESENT: u64 = 1 << 63;

/// The summable smaps fields that kernel `k` prints, in its order; the Pss components only in
/// `smaps_rollup` (`__show_smap`'s `rollup_mode`).
fn put_fields(out: &mut String, mss: &MemSizeStats, k: KernelVersion, rollup: bool) {
    let printed = |n: &str| {
        crate::era::smaps_has_field(k, n) && (rollup || !crate::era::smaps_rollup_only(n))
    };
    for (name, kb) in mss.fields().into_iter().filter(|(n, _)| printed(n)) {
        put_kb(out, name, kb);
    }
}

/// One `Name:   value kB` line, as `seq_put_decimal_ull_width(.., 8)` prints it.
fn put_kb(out: &mut String, name: &str, kb: u64) {
    let label = format!("{name}:");
    if label.len() >= 16 {
        let _ = writeln!(out, "{label} {kb:>7} kB");
    } else {
        let _ = writeln!(out, "{label:<16}{kb:>8} kB");
    }
}
