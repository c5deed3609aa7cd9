//! Kernel eras and behaviour switches.
//!
//! Every mechanism that a seed change altered exposes its behaviour before and after the change
//! (and later behaviour where it differs) as a *switch*. A run names a kernel version, which sets
//! every switch to that version's behaviour; any switch can then be overridden by name
//! (`DESIGN.md`, "The five mechanisms and their switches"). Version boundaries follow
//! `docs/reference/kernel-semantics.md`; the ones it marks "~" were inferred from patch postings.
//!
//! A switch value whose mechanism has not been modelled yet is refused with a clear error rather
//! than silently running another behaviour.

use std::fmt;
use std::str::FromStr;

/// A mainline kernel version, `vMAJOR.MINOR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    pub major: u8,
    pub minor: u8,
}

impl KernelVersion {
    pub const fn new(major: u8, minor: u8) -> KernelVersion {
        KernelVersion { major, minor }
    }

    /// The default era: a recent kernel with every seed change merged.
    pub const DEFAULT: KernelVersion = KernelVersion::new(6, 8);

    /// Every mainline release the model takes, oldest first: v4.0 to v4.20, v5.0 to v5.19, v6.0
    /// to v6.19.
    pub fn all() -> impl Iterator<Item = KernelVersion> {
        [(4u8, 20u8), (5, 19), (6, 19)]
            .into_iter()
            .flat_map(|(major, last)| (0..=last).map(move |minor| KernelVersion::new(major, minor)))
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl FromStr for KernelVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<KernelVersion, String> {
        let bad = || format!("expected a kernel version like `v5.12` or `6.8`, found `{s}`");
        let digits = s.strip_prefix('v').unwrap_or(s);
        let (major, minor) = digits.split_once('.').ok_or_else(bad)?;
        let major: u8 = major.parse().map_err(|_| bad())?;
        let minor: u8 = minor.parse().map_err(|_| bad())?;
        let v = KernelVersion::new(major, minor);
        if !(KernelVersion::new(4, 0)..=KernelVersion::new(6, 19)).contains(&v) {
            return Err(format!("kernel {v} is outside the modelled range v4.0 to v6.19"));
        }
        // Mainline's last minor of each major: v4.20 was followed by v5.0, v5.19 by v6.0.
        let last = if major == 4 { 20 } else { 19 };
        if minor > last {
            return Err(format!(
                "kernel {v} was never released: v{major}.{last} was followed by v{}.0",
                major + 1
            ));
        }
        Ok(v)
    }
}

macro_rules! switch_enum {
    ($(#[$meta:meta])* $name:ident, $key:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant,)* }

        impl $name {
            pub const KEY: &'static str = $key;
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// The value named `value`, or an error listing the values.
            pub fn parse(value: &str) -> Result<$name, String> {
                $name::ALL.iter().copied().find(|v| v.name() == value).ok_or_else(|| {
                    let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                    format!("switch `{}` has no value `{value}`: expected one of {}", $key, names.join(", "))
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

switch_enum!(
    /// Which files khugepaged may back with THPs (seed `000`, `mm/khugepaged.c`).
    FileThp, "file_thp" {
        /// Only VM_DENYWRITE mappings (the main executable), up to v5.13.
        Denywrite = "denywrite",
        /// Executable mappings of files not open for write, v5.14 to v6.7 (seed 000,
        /// eb6ecbed0aa2, merged for v5.14: it sat in linux-next in June 2021, after v5.13's
        /// merge window, and reached mainline in July 2021 with the v5.14 mm batch).
        ExecNotWritten = "exec_not_written",
        /// Any mapping of a regular file not open for write, v6.8 and later ("mm: remove
        /// VM_EXEC requirement for THP eligibility", 7fbb5e188248).
        NotWritten = "not_written",
    }
);

switch_enum!(
    /// What opening a file with collapsed THPs for write drops (`fs/open.c`).
    OpenWriteTruncate, "open_write_truncate" {
        /// `truncate_pagecache`, which also zaps private COW pages: up to v5.15.
        All = "all",
        /// `unmap_mapping_range(even_cows=0)` + `truncate_inode_pages`: v5.16 and later.
        KeepPrivate = "keep_private",
    }
);

switch_enum!(
    /// Whether exec denies writes to the running binary (`fs/exec.c` `deny_write_access` on the
    /// executable and `mm->exe_file`), which keeps its collapsed text THPs from being truncated
    /// by an opener for write.
    ExecDenyWrite, "exec_deny_write" {
        /// ETXTBSY for an opener for write while the binary runs: every release but v6.11-v6.12.
        Deny = "deny",
        /// "fs: don't block i_writecount during exec" (2a010c412853, v6.11) until "Revert "fs:
        /// don't block i_writecount during exec"" (3b832035387f, v6.13; the issue notes its
        /// stable backports 6.11.11 and 6.12.2, which mmsim's versions cannot name: override by
        /// name).
        Allow = "allow",
    }
);

switch_enum!(
    /// The ordering of seed `000`'s writer check against an opener for write: `collapse_file`
    /// stores `nr_thps` and then loads `i_writecount`, `do_dentry_open` stores `i_writecount`
    /// and then loads `nr_thps` (a Dekker pair, so at least one side sees the other). Always
    /// `full` in the kernel: `smp_mb()` on both sides from eb6ecbed0aa2 (v5.14); from v6.11 the
    /// opener's atomic increment is the barrier ("vfs: remove redundant smp_mb for thp handling
    /// in do_dentry_open", 8e3447822d7d). `reordered` is a deliberately broken variant,
    /// selectable by name only, that the explorer's collapse-vs-open scenario must catch.
    ThpWriterBarrier, "thp_writer_barrier" {
        Full = "full",
        /// Broken on purpose: each side's load is satisfied before its own store is visible (a
        /// store buffer without the fence), so both may miss the other.
        Reordered = "reordered",
    }
);

switch_enum!(
    /// hugetlb PMD-sharing synchronisation (seed `001`, `mm/hugetlb.c`).
    HugetlbSync, "hugetlb_sync" {
        /// `i_mmap_rwsem` held for read across the whole fault: v5.7 to v6.0.
        IMmapRwsem = "i_mmap_rwsem",
        /// The seed's patches 1-2 alone: exposes the fault/truncate race. Also the kernels
        /// before v5.7, which those patches restored (`hugetlb.rs`'s eras).
        Revert = "revert",
        /// The per-VMA hugetlb lock: v6.1 and later.
        VmaLock = "vma_lock",
        /// Broken on purpose, selectable by name only: `vma_lock`, except that truncation and
        /// hole punching wait for each mapping's vma lock (`down_write`) while they hold
        /// `i_mmap_rwsem` for write, instead of the series' trylock and back-out. A fault takes
        /// the vma lock and then `i_mmap_rwsem` (in `huge_pmd_share`), so the two orders invert:
        /// lockdep reports it and the explorer can drive the two into a deadlock.
        VmaLockBlocking = "vma_lock_blocking",
    }
);

impl HugetlbSync {
    /// Whether the scheme has the per-VMA hugetlb lock (`vma_lock` and its broken variant).
    pub fn has_vma_lock(self) -> bool {
        matches!(self, HugetlbSync::VmaLock | HugetlbSync::VmaLockBlocking)
    }
}

switch_enum!(
    /// What a DAX read of a file hole maps (seed `002`, `fs/dax.c`).
    DaxHole, "dax_hole" {
        /// A zeroed page-cache page: up to v4.13.
        PagecacheZero = "pagecache_zero",
        /// The shared zero page: v4.14 and later.
        ZeroPage = "zero_page",
    }
);

switch_enum!(
    /// The page reclaim algorithm (`mm/vmscan.c`).
    Lru, "lru" {
        Classic = "classic",
        /// The multi-gen LRU (v6.1 and later, when enabled).
        Mglru = "mglru",
        /// Not a kernel LRU: exact least-recently-used order with no second chance
        /// (`lru_pure.rs`), to check page-cache replays against cache simulators; by name only.
        Pure = "pure",
    }
);

switch_enum!(
    /// What POSIX_FADV_NOREUSE does (seed `003`, `mm/fadvise.c`).
    FadvNoreuse, "fadv_noreuse" {
        /// Accepted and ignored: up to v6.2.
        Ignored = "ignored",
        /// Mapped accesses through the file carry no recency: v6.3 and later.
        NoRecency = "no_recency",
    }
);

switch_enum!(
    /// Whether reclaim freezes the folio's references before removing it from the page or swap
    /// cache (`__remove_mapping`). Always `freeze` in the kernel; `skip` is a deliberately broken
    /// variant, selectable by name only, that the explorer's reclaim race scenario must catch.
    RefcountFreeze, "refcount_freeze" {
        Freeze = "freeze",
        /// Broken on purpose: remove the folio even if someone else holds or maps it.
        Skip = "skip",
    }
);

switch_enum!(
    /// How a FOLL_FORCE write GUP (`/proc/PID/mem`, ptrace) into a private mapping without
    /// `VM_WRITE` accepts the read-only PTE its COW fault left (`mm/gup.c`).
    FollForceCow, "foll_force_cow" {
        /// `faultin_page` drops FOLL_WRITE after the COW fault, and the retry takes whatever
        /// page is mapped then: up to v4.8. A `MADV_DONTNEED` between the fault and the retry
        /// lets the retry map and return the page-cache page, so the write lands in the file
        /// (Dirty COW, CVE-2016-5195).
        DropWrite = "drop_write",
        /// The retry keeps FOLL_WRITE and, with the internal FOLL_COW flag, accepts only a
        /// dirty PTE, which only the COW copy has ("mm: remove gup_flags FOLL_WRITE games from
        /// __get_user_pages()", 19be0eaffa3a, v4.9) until v5.19.
        FollCow = "foll_cow",
        /// FOLL_COW removed: the retry accepts a read-only PTE only for an exclusive anonymous
        /// page in a private, may-write mapping without `VM_WRITE`, when soft-dirty tracking
        /// needs no write fault ("mm/gup: fix FOLL_FORCE COW security issue and remove
        /// FOLL_COW", 5535be309971, v6.0; CVE-2022-2590, a dirty PTE without a copy on shmem).
        AnonExclusive = "anon_exclusive",
    }
);

switch_enum!(
    /// The rule `do_wp_page` uses to reuse an anonymous page instead of copying (seed `004`).
    CowReuse, "cow_reuse" {
        /// `reuse_swap_page`: mapcount + swapcount <= 1, up to v5.8.
        MapcountSwapcount = "mapcount_swapcount",
        /// `page_count() == 1`, v5.9 to v5.18.
        PageCount = "page_count",
        /// The seed's full-accuracy mapcount rule (never merged; by name only).
        Mapcount = "mapcount",
        /// PageAnonExclusive, v5.19 and later.
        AnonExclusive = "anon_exclusive",
    }
);

switch_enum!(
    /// What GUP-fast re-checks after taking its reference on a page it found through a PTE table
    /// (`gup_pte_range`, `mm/gup.c`): the PTE it read, and whether the PMD still points at that
    /// table. A collapse that cleared the PMD (`pmdp_collapse_flush`) and checked the page's
    /// references before GUP-fast took its own leaves the PTE in place until it copies, so the
    /// PTE re-check alone lets GUP-fast return a page the collapse is about to replace.
    GupFastRecheck, "gup_fast_recheck" {
        /// The PTE only: up to v5.19, on architectures whose TLB flush sends no IPI for
        /// GUP-fast to hold off (the model's, see `gup.rs`).
        Pte = "pte",
        /// The PMD too: "mm: gup: fix the fast GUP race against THP collapse" (70cbc3cc78a9,
        /// v6.0 ~, backported to stable).
        Pmd = "pmd",
    }
);

switch_enum!(
    /// Whether the anonymous collapse holds `mmap_lock` for write while it takes the PTE table
    /// out of its PMD, re-checks, copies and maps the THP (`collapse_huge_page`,
    /// `mm/khugepaged.c`), which keeps fork (`dup_mmap` holds the parent's `mmap_lock` for
    /// write) from copying the range meanwhile. Always `write` in the kernel; `none` is a
    /// deliberately broken variant, selectable by name only, that the explorer's
    /// collapse-vs-fork scenario must catch.
    CollapseMmapLock, "collapse_mmap_lock" {
        Write = "write",
        /// Broken on purpose: the locked part of the collapse runs without `mmap_lock`.
        None = "none",
    }
);

switch_enum!(
    /// How an O_DIRECT read or write takes the user buffer's pages for the device
    /// (`bio_iov_iter_get_pages`, `block/bio.c`). With a reference (`get`) a page-count-based COW
    /// rule cannot tell the device's reference from a pin, so a COW fault during the IO may
    /// replace the page the device writes into; a pin (`pin`, FOLL_PIN) is what
    /// `page_maybe_dma_pinned` sees. Selectable by name in any era, to ask what a kernel would
    /// have done with the other choice.
    OdirectGup, "odirect_gup" {
        /// FOLL_GET (`iov_iter_get_pages`): up to v6.4.
        Get = "get",
        /// FOLL_PIN (`iov_iter_extract_pages`): from v6.5 ~, "block: Switch to pinning pages"
        /// (David Howells; the version inferred from the series' merge, see `direct_io.rs`).
        Pin = "pin",
    }
);

macro_rules! switches {
    ($(#[$meta:meta])* $name:ident { $($field:ident: $ty:ident,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name { $(pub $field: $ty,)* }

        impl $name {
            /// How many switches there are.
            pub const COUNT: usize = [$($ty::KEY,)*].len();

            /// The switch names, in a stable order.
            pub const NAMES: [&'static str; $name::COUNT] = [$($ty::KEY,)*];

            /// Overrides switch `key` with `value` (both by their kernel-facing names).
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
                match key {
                    $($ty::KEY => {
                        self.$field = $ty::parse(value)?;
                    })*
                    _ => {
                        return Err(format!(
                            "unknown switch `{key}`: expected one of {}",
                            $name::NAMES.join(", ")
                        ));
                    }
                }
                Ok(())
            }

            /// The values switch `key` takes, in their order; `None` for an unknown switch.
            pub fn values_of(key: &str) -> Option<Vec<&'static str>> {
                match key {
                    $($ty::KEY => Some($ty::ALL.iter().map(|v| v.name()).collect()),)*
                    _ => None,
                }
            }

            /// `(name, value)` of every switch.
            pub fn iter(&self) -> [(&'static str, &'static str); $name::COUNT] {
                [$(($ty::KEY, self.$field.name()),)*]
            }
        }
    };
}

switches!(
    /// Every behaviour switch of a run.
    Switches {
        file_thp: FileThp,
        open_write_truncate: OpenWriteTruncate,
        exec_deny_write: ExecDenyWrite,
        thp_writer_barrier: ThpWriterBarrier,
        hugetlb_sync: HugetlbSync,
        dax_hole: DaxHole,
        lru: Lru,
        fadv_noreuse: FadvNoreuse,
        cow_reuse: CowReuse,
        foll_force_cow: FollForceCow,
        refcount_freeze: RefcountFreeze,
        gup_fast_recheck: GupFastRecheck,
        collapse_mmap_lock: CollapseMmapLock,
        odirect_gup: OdirectGup,
    }
);

const fn v(major: u8, minor: u8) -> KernelVersion {
    KernelVersion::new(major, minor)
}

impl Switches {
    /// The switches of kernel `k`.
    pub fn for_kernel(k: KernelVersion) -> Switches {
        Switches {
            file_thp: if k <= v(5, 13) {
                FileThp::Denywrite
            } else if k <= v(6, 7) {
                FileThp::ExecNotWritten
            } else {
                FileThp::NotWritten
            },
            open_write_truncate: if k <= v(5, 15) {
                OpenWriteTruncate::All
            } else {
                OpenWriteTruncate::KeepPrivate
            },
            exec_deny_write: if (v(6, 11)..v(6, 13)).contains(&k) {
                ExecDenyWrite::Allow
            } else {
                ExecDenyWrite::Deny
            },
            thp_writer_barrier: ThpWriterBarrier::Full,
            // Before v5.7 the fault path held only the fault mutex: the state the seed's
            // patches 1-2 returned to (`revert`).
            hugetlb_sync: if k < v(5, 7) {
                HugetlbSync::Revert
            } else if k <= v(6, 0) {
                HugetlbSync::IMmapRwsem
            } else {
                HugetlbSync::VmaLock
            },
            dax_hole: if k <= v(4, 13) { DaxHole::PagecacheZero } else { DaxHole::ZeroPage },
            lru: Lru::Classic,
            fadv_noreuse: if k <= v(6, 2) { FadvNoreuse::Ignored } else { FadvNoreuse::NoRecency },
            cow_reuse: if k <= v(5, 8) {
                CowReuse::MapcountSwapcount
            } else if k <= v(5, 18) {
                CowReuse::PageCount
            } else {
                CowReuse::AnonExclusive
            },
            foll_force_cow: if k <= v(4, 8) {
                FollForceCow::DropWrite
            } else if k <= v(5, 19) {
                FollForceCow::FollCow
            } else {
                FollForceCow::AnonExclusive
            },
            refcount_freeze: RefcountFreeze::Freeze,
            gup_fast_recheck: if k <= v(5, 19) { GupFastRecheck::Pte } else { GupFastRecheck::Pmd },
            collapse_mmap_lock: CollapseMmapLock::Write,
            odirect_gup: if k <= v(6, 4) { OdirectGup::Get } else { OdirectGup::Pin },
        }
    }

    /// Refuses switch values whose behaviour the model does not implement for `kernel`.
    ///
    /// Only the mechanisms that the switch changes are affected: a run that never exercises them
    /// would be correct, but a silently different behaviour is worse than a clear refusal.
    pub fn check_implemented(&self, kernel: KernelVersion) -> Result<(), String> {
        if self.lru == Lru::Mglru && kernel < v(6, 1) {
            return Err(format!(
                "switch lru = mglru is not modelled for {kernel}: the multi-gen LRU exists from v6.1 \
                 (choose another kernel or override it)"
            ));
        }
        Ok(())
    }
}

impl FileThp {
    /// Whether `collapse_file` refuses a file that is open for write, in the step that counts
    /// the THP in `nr_thps` (the seed's check, eb6ecbed0aa2, v5.14; before, only deny-written
    /// mappings were collapsed).
    pub fn collapse_checks_writer(self) -> bool {
        self != FileThp::Denywrite
    }
}

impl CowReuse {
    /// Whether the rule tracks PageAnonExclusive (v5.19 and later): writable anonymous PTEs map
    /// exclusive pages, GUP unshares, fork and reclaim respect possibly pinned exclusive pages.
    pub fn tracks_anon_exclusive(self) -> bool {
        match self {
            CowReuse::AnonExclusive => true,
            CowReuse::MapcountSwapcount | CowReuse::PageCount | CowReuse::Mapcount => false,
        }
    }
}

// Era facts: the smaller behaviour changes a kernel version carries besides its switches, each
// named by what it does and citing the commit that changed it ("~": the version was inferred
// from patch postings and merge logs, `docs/reference/kernel-semantics.md`).

/// v4.10 and v4.11 ask the file system for the block before locking the DAX entry, so a fault
/// can map a hole that a concurrent `write()` just filled: from "dax: Call ->iomap_begin without
/// entry lock during dax fault" (9f141d6ef625, v4.10) until 13e451fdc1af and 876f29460cbd
/// (v4.12).
pub fn dax_iomap_before_entry_lock(k: KernelVersion) -> bool {
    (v(4, 10)..v(4, 12)).contains(&k)
}

/// A DAX `write()` that allocates blocks unmaps the range from every mapping, so that nobody
/// keeps reading the zero page: "mm: fix data corruption due to stale mmap reads"
/// (cd656375f946, v4.12).
pub fn dax_write_unmaps_range(k: KernelVersion) -> bool {
    k >= v(4, 12)
}

/// clear_refs (soft-dirty) leaves the writable PTE of a possibly pinned page in a COW mapping
/// alone under the `page_count` rule: "mm: don't play games with pinned pages in
/// clear_page_refs" (9348b73c2e1b, v5.11).
pub fn clear_refs_keeps_pinned_writable(k: KernelVersion) -> bool {
    k >= v(5, 11)
}

/// After a COW copy, an old page left only in the swap cache is freed at once: "mm: free idle
/// swap cache page after COW" (f4c4a3f48480, v5.14).
pub fn frees_idle_swapcache_after_cow(k: KernelVersion) -> bool {
    k >= v(5, 14)
}

/// The `page_count` reuse rule first drops an unused swap-cache reference ("mm: optimize
/// do_wp_page() for exclusive pages in the swapcache", 53a05ad9f21d, v5.18).
pub fn page_count_reuse_drops_swapcache(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// A read-only FOLL_PIN|FOLL_LONGTERM of a non-anonymous page in a COW mapping unshares it
/// first: "mm/gup: reliable R/O long-term pinning in COW mappings" (84209e87c696, v6.2), after
/// "mm: extend FAULT_FLAG_UNSHARE support to anything in a COW mapping" (8d6a0ac09a16, v6.2).
pub fn longterm_pin_unshares_cow_mappings(k: KernelVersion) -> bool {
    k >= v(6, 2)
}

/// A GUP that takes references (FOLL_GET or FOLL_PIN) in a COW mapping breaks COW as a write
/// would, even when it only reads, so that a later COW cannot move the page away from the
/// caller ("COW can break either way", CVE-2020-29374): "gup: document and work around "COW can
/// break either way" issue" (17839856fd58, v5.8), until "mm/gup: Remove enfornced COW
/// mechanism" (a308c71bf1e6, v5.9), once `do_wp_page` reused only pages nobody else held.
pub fn gup_breaks_cow(k: KernelVersion) -> bool {
    (v(5, 8)..v(5, 9)).contains(&k)
}

/// `memfd_create(MFD_HUGETLB)`: "mm/shmem: add hugetlbfs support to memfd_create()"
/// (749df87bd7be, v4.14).
pub fn has_mfd_hugetlb(k: KernelVersion) -> bool {
    k >= v(4, 14)
}

/// `MFD_NOEXEC_SEAL` and `MFD_EXEC`: "mm/memfd: add MFD_NOEXEC_SEAL and MFD_EXEC"
/// (105ff5339f49, v6.3).
pub fn has_mfd_noexec(k: KernelVersion) -> bool {
    k >= v(6, 3)
}

/// A fault a GUP takes on behalf of `access_remote_vm` (`/proc/PID/mem`) counts in the
/// caller's `min_flt`/`maj_flt`: "mm/gup: remove task_struct pointer for all gup code"
/// (64019a2e467a) and "mm: do page fault accounting in handle_mm_fault" (bce617edecad), both
/// v5.9. Before them `faultin_page` counted on the task GUP was given, which
/// `__access_remote_vm` left NULL, so such faults were counted nowhere.
pub fn remote_gup_faults_counted(k: KernelVersion) -> bool {
    k >= v(5, 9)
}

/// A fault that GUP takes in a hugetlb VMA counts as a fault (`pgfault`, the task's
/// `min_flt`/`maj_flt`, the memory cgroup's event): "mm/gup: retire follow_hugetlb_page()"
/// (4849807114b8, v6.6, the last of Peter Xu's "mm/gup: Unify hugetlb, speed up thp") sends it
/// through `faultin_page` and `handle_mm_fault` like any other. Before, `__get_user_pages` gave
/// hugetlb VMAs to `follow_hugetlb_page`, which called `hugetlb_fault` itself and so skipped
/// `handle_mm_fault`'s accounting: `MAP_POPULATE`, `MADV_POPULATE_*`, `mlock`, pins and
/// `/proc/PID/mem` faulted huge pages in uncounted (a probe populating 8 huge pages each way:
/// `minflt` 0 on Debian's 6.1, 8 per way on 6.12). A user access counts in every era.
pub fn gup_hugetlb_faults_counted(k: KernelVersion) -> bool {
    k >= v(6, 6)
}

/// `mprotect` makes a read-only PTE of an exclusive anonymous page in a writable private
/// mapping writable at once when it is dirty and soft-dirty tracking does not need the write
/// fault: "mm/mprotect: try avoiding write faults for exclusive anonymous pages when changing
/// protection" (64fe24a3e05e, v6.0), with the soft-dirty test as "mm/mprotect: fix soft-dirty
/// check in can_change_pte_writable()" (76aefad628aa, v6.0 ~) corrected it. Shared mappings
/// then follow the same test.
pub fn mprotect_upgrades_exclusive_anon(k: KernelVersion) -> bool {
    k >= v(6, 0)
}

/// `mprotect`'s write upgrade of exclusive anonymous pages no longer asks for a dirty PTE
/// (shared mappings still do): "mm/mprotect: allow clean exclusive anon pages to be writable"
/// (d84887739d5c, v6.2).
pub fn mprotect_upgrades_clean_exclusive_anon(k: KernelVersion) -> bool {
    k >= v(6, 2)
}

/// A writable FOLL_PIN|FOLL_LONGTERM of a file mapping that needs dirty tracking
/// (`vma_needs_dirty_tracking`: shared, writable, and its file system is notified of writes or
/// writes back; not anonymous memory, private mappings, tmpfs or hugetlbfs) fails with EFAULT,
/// and GUP-fast leaves such pages to the slow path: "mm/gup: disallow FOLL_LONGTERM GUP-nonfast
/// writing to file-backed mappings" (8ac268436e6d, v6.5) and "mm/gup: disallow FOLL_LONGTERM
/// GUP-fast writing to file-backed mappings" (a6e79df92e4a, v6.5).
pub fn longterm_write_pin_refuses_dirty_tracked_files(k: KernelVersion) -> bool {
    k >= v(6, 5)
}

/// io_uring exists, with registered buffers and `IORING_OP_READ_FIXED`/`WRITE_FIXED`: "Add
/// io_uring IO interface" (2b188cc1bb85, v5.1) and "io_uring: add support for pre-mapped user IO
/// buffers" (edafccee56ff, v5.1). Before, the syscalls do not exist
/// (ENOSYS).
pub fn io_uring(k: KernelVersion) -> bool {
    k >= v(5, 1)
}

/// How io_uring refuses a registered buffer in a file mapping. From v5.1 `io_sqe_buffer_register`
/// looks at the pinned range's VMAs and refuses any with a file that is not hugetlbfs
/// (EOPNOTSUPP); from v5.14 shmem is allowed too (Pavel Begunkov, "memfd/shmem is queued for
/// 5.14" in axboe/liburing#358; hash not verified); from v6.5 io_uring leaves the check to GUP
/// ("io_uring: rsrc: delegate VMA file-backed check to GUP", Lorenzo Stoakes, 34ed8d0dcd69),
/// whose FOLL_LONGTERM|FOLL_WRITE refuses only dirty-tracked file mappings, with EFAULT
/// ([`longterm_write_pin_refuses_dirty_tracked_files`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoUringFileBuffers {
    /// Every file mapping but hugetlbfs: EOPNOTSUPP (v5.1-v5.13).
    RefuseAllButHugetlb,
    /// Every file mapping but hugetlbfs and shmem: EOPNOTSUPP (v5.14-v6.4).
    RefuseAllButHugetlbShmem,
    /// GUP decides (v6.5+).
    Gup,
}

pub fn io_uring_file_buffers(k: KernelVersion) -> IoUringFileBuffers {
    if k >= v(6, 5) {
        IoUringFileBuffers::Gup
    } else if k >= v(5, 14) {
        IoUringFileBuffers::RefuseAllButHugetlbShmem
    } else {
        IoUringFileBuffers::RefuseAllButHugetlb
    }
}

/// When a hugetlb VMA is split at an address that is not PUD-aligned, the shared PMD tables of
/// the PUD range around it are unshared first (a VMA must cover a whole PUD range to share):
/// "hugetlb: unshare some PMDs when splitting VMAs" (b30c14cd6102, v6.2, merged after
/// v6.2-rc4; in 6.1.y from 6.1.8, declared in `scenarios/hugetlb/pmd-share-split.toml`). Before,
/// the split left the tables shared.
pub fn hugetlb_split_unshares_pmds(k: KernelVersion) -> bool {
    k >= v(6, 2)
}

/// Private hugetlb VMAs that own their reservations have a vma lock too (the reservation
/// map's `rw_sema`), so faults take it for read and unmappers (munmap, `MADV_DONTNEED`,
/// truncation) for write, and the zap keeps it until the pages it freed are back in the pool:
/// "hugetlbfs: extend hugetlb_vma_lock to private VMAs" (bf4916922c60) and "hugetlbfs: close
/// race between MADV_DONTNEED and page fault" (2820b0f09be9), v6.6 (mm-hotfixes after
/// v6.6-rc7). Before, a fault on a private mapping could find the entry a `MADV_DONTNEED`
/// had just cleared, while the page was still in the zap's gather, and get SIGBUS from an
/// empty pool.
pub fn hugetlb_private_vma_lock(k: KernelVersion) -> bool {
    k >= v(6, 6)
}

/// Unmapping a page of a private mapping that owns its reservations (munmap, `MADV_DONTNEED`)
/// gives the reservation back when no surplus pages exist, so a later fault of the owner
/// finds its reservation instead of competing for a free page: "mm/hugetlb: restore the
/// reservation if needed" (df7a6d1f6405, v6.9). Before, the reservation stayed consumed.
pub fn hugetlb_zap_restores_reserve(k: KernelVersion) -> bool {
    k >= v(6, 9)
}

/// `huge_pmd_share` searches `i_mmap` for a table to share under `i_mmap_rwsem` for write up to
/// v5.4; "hugetlbfs: take read_lock on i_mmap for PMD sharing" (Waiman Long, November 2019,
/// v5.5; id not verified) made it a read lock, so faults sharing tables no longer exclude each
/// other there. From v5.7 to v6.0 the fault already holds the lock for read.
pub fn huge_pmd_share_i_mmap_write(k: KernelVersion) -> bool {
    k < v(5, 5)
}

/// `fallocate` on hugetlbfs (allocation and `FALLOC_FL_PUNCH_HOLE`) and `MADV_REMOVE` of a
/// hugetlbfs mapping: "hugetlbfs: add hugetlbfs_fallocate()" (70c3547e36f5, v4.3, verified) and
/// "mm: madvise allow remove operation for hugetlbfs" (same series, v4.3). Before, hugetlbfs has
/// no `->fallocate`: EOPNOTSUPP.
pub fn hugetlbfs_has_fallocate(k: KernelVersion) -> bool {
    k >= v(4, 3)
}

/// `fallocate` on a block device (`blkdev_fallocate`: `FALLOC_FL_PUNCH_HOLE` and
/// `FALLOC_FL_ZERO_RANGE`, with `FALLOC_FL_KEEP_SIZE`): "block: implement (some of) fallocate for
/// block devices" (25f4c41415e5, v4.9). Before, `def_blk_fops` has no `->fallocate`: EOPNOTSUPP.
pub fn blkdev_has_fallocate(k: KernelVersion) -> bool {
    k >= v(4, 9)
}

/// `/proc/PID/status` prints `HugetlbPages`: "mm: hugetlb: proc: add HugetlbPages field to
/// /proc/PID/status" (v4.4, same series as smaps' `Shared_Hugetlb`/`Private_Hugetlb`,
/// 25ee01a2fca0, verified).
pub fn status_has_hugetlb_pages(k: KernelVersion) -> bool {
    k >= v(4, 4)
}

/// `/proc/meminfo` prints `Hugetlb:` (every size's pool, in kB): "mm: show total hugetlb memory
/// consumption in /proc/meminfo" (Roman Gushchin, November 2017, v4.16; id not verified).
pub fn meminfo_has_hugetlb_total(k: KernelVersion) -> bool {
    k >= v(4, 16)
}

/// `MADV_DONTNEED` works on hugetlb mappings (huge-page aligned start, end rounded down):
/// "mm: enable MADV_DONTNEED for hugetlb mappings" (90e7e7f5ef3f, v5.18); EINVAL before.
pub fn hugetlb_madv_dontneed(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// Fork copies a hugetlb VMA's page tables only when it has an anon_vma (private pages); a
/// shared mapping is faulted in again by the child: "hugetlb: lazy page table copies in fork()"
/// (bcd51a3c679d, v6.0). Before, every hugetlb VMA's entries were copied.
pub fn hugetlb_lazy_fork_copy(k: KernelVersion) -> bool {
    k >= v(6, 0)
}

/// `vma_has_recency` exists and the classic LRU also ignores the young PTEs of `VM_RAND_READ`
/// mappings: "mm: add vma_has_recency()" (8788f6781486, v6.3).
pub fn vma_has_recency(k: KernelVersion) -> bool {
    k >= v(6, 3)
}

/// The multi-gen LRU ignores the accesses of `VM_RAND_READ` mappings as well as `VM_SEQ_READ`
/// ones in every era it exists: v6.1's `lru_gen_enter_fault` and `should_skip_vma` test both
/// flags, and v6.3 (8788f6781486) routes both through `vma_has_recency`.
pub const MGLRU_IGNORES_RAND_READ: bool = true;

/// A large folio occupies each of its page-cache slots, every one holding its head, and its
/// deletion (`page_cache_delete_batch`) clears them one index after another under the xa_lock,
/// so a lockless lookup (`find_get_entries`) can find a later slot after the first is gone and
/// turn it into a tail page (`find_subpage`). Until "mm: Use multi-index entries in the page
/// cache" (6b24ca4a1a8d, v5.17) made one entry cover the folio.
pub fn thp_cached_per_index(k: KernelVersion) -> bool {
    k < v(5, 17)
}

/// `collapse_file` puts the new huge page into each slot of its range as it takes the old page
/// there (a shmem hole too), so for the rest of the collapse a lookup of a slot already passed
/// finds the new page, locked and not uptodate (before v5.17 turned into the page of that index
/// by `find_subpage`), and a failed collapse puts the old pages back one index after another,
/// dropping the xa_lock between two (mm/khugepaged.c, v4.8 f3f0e1d2150b for shmem, v5.4 for
/// read-only files). Until "mm/khugepaged: maintain page cache uptodate flag" (a2e17cc2efc7,
/// merged for v6.4; the version from its place in the merge window's log, not from a tag) left
/// the old pages, locked, in their slots until the whole range is replaced at once.
pub fn collapse_replaces_per_index(k: KernelVersion) -> bool {
    k < v(6, 4)
}

/// Readahead inserts its pages holding the mapping's `invalidate_lock` shared, which hole
/// punching and truncation hold exclusive: "mm: Protect operations adding pages to page cache with
/// invalidate_lock" (Jan Kara, 730633f0b7f9, v5.15).
pub fn readahead_takes_invalidate_lock(k: KernelVersion) -> bool {
    k >= v(5, 15)
}

/// `mmap_region` registers every new VMA with khugepaged (`khugepaged_enter_vma`, which asks
/// the THP policy), so with `enabled = always` a read-only file's text is scanned without
/// `MADV_HUGEPAGE`: "mm: mmap: register suitable readonly file vmas for khugepaged" (Yang Shi,
/// 613bec092fe7, v5.19). Before, only a merge, `MADV_HUGEPAGE` or an anonymous THP fault in the
/// same mm registered it (that merge path is not modelled: mmsim's merges after mprotect, madvise and
/// munlock register nothing, and `mmap` does not merge).
pub fn mmap_registers_khugepaged(k: KernelVersion) -> bool {
    k >= v(5, 19)
}

/// `MADV_HUGEPAGE` registers the mm through `khugepaged_enter_vma`, whose policy check is the
/// VMA's (`hugepage_vma_check`, later `thp_vma_allowable_order`), from Yang Shi's v5.19 series
/// that added the helper (with 613bec092fe7). `hugepage_madvise` calls it before
/// `madvise_update_vma` stores the new flags, and the shmem branch of the check reads the VMA's
/// stored flags: under `shmem_enabled = advise` a shmem VMA's `MADV_HUGEPAGE` does not register
/// its mm (an anonymous VMA's check is given the new flags and does). Before, `khugepaged_enter`
/// asked only the `enabled` knob and the new flags (not modelled: the model asks the policy).
pub fn madvise_registers_before_flags(k: KernelVersion) -> bool {
    k >= v(5, 19)
}

/// The multi-gen LRU counts every refault into the evicting lruvec, recent or not, and every
/// recent one as a workingset activation, where v6.1-v6.4 counted recent refaults only and
/// activations where `sort_folio` protected a tier: "Multi-gen LRU: fix workingset accounting"
/// (Kalesh Singh, 3af0191a594d, v6.5).
pub fn mglru_counts_every_refault(k: KernelVersion) -> bool {
    k >= v(6, 5)
}

/// The multi-gen LRU's aging belongs to the eviction, for kswapd as for direct reclaim: kswapd's
/// `lru_gen_age_node` no longer ages ("mm: multi-gen LRU: remove aging fairness safeguard",
/// 7348cc91821b, v6.3), and `get_nr_to_scan` below the default priority ages the lruvec and
/// stops scanning it for the pass (returns -1, "mm: multi-gen LRU: per-node lru_gen_folio
/// lists", e4dde56cd208, v6.3, which also added `set_initial_priority`). Before, kswapd aged
/// every lruvec that needed it first, at any priority, and direct reclaim aged and then evicted
/// in the same call.
pub fn mglru_ages_in_eviction(k: KernelVersion) -> bool {
    k >= v(6, 3)
}

/// `set_initial_priority` never starts global reclaim below `DEF_PRIORITY / 2`: the floor is in
/// the function "mm/mglru: fix ineffective protection calculation" (30d77b7eef01, v6.11) moved;
/// v6.8's clamps at 0 (the change between them is not identified).
pub fn mglru_initial_priority_floor(k: KernelVersion) -> bool {
    k >= v(6, 11)
}

/// The multi-gen LRU's page-cache protection fix: a refault with three or more references is
/// restored to the top tier with all its reference bits, `sort_folio` protects a saturated folio,
/// and new folios are placed one generation up from the oldest (cold-but-busy ones one below
/// the youngest): "mm/mglru: fix underprotected page cache" (081488051d28, v6.7; 6.1.69).
pub fn mglru_protects_page_cache(k: KernelVersion) -> bool {
    k >= v(6, 7)
}

/// The multi-gen LRU's reworked tiers, placement and aging: "mm/mglru: rework aging feedback",
/// "mm/mglru: rework workingset protection" and "mm/mglru: rework refault detection" (Yu Zhao,
/// v6.14).
pub fn mglru_reworked_tiers(k: KernelVersion) -> bool {
    k >= v(6, 14)
}

/// The ELF loader maps the executable's and the interpreter's segments `VM_DENYWRITE`: until
/// "mm: remove VM_DENYWRITE" (v5.15), which removed the flag; `mmap` ignored `MAP_DENYWRITE` from
/// user space in every era.
pub fn vm_denywrite_exists(k: KernelVersion) -> bool {
    k < v(5, 15)
}

/// `PageAnonExclusive` exists: "mm: remember exclusively mapped anonymous pages with
/// PG_anon_exclusive" (6c287605fd56, v5.19). The `cow_reuse` switch may select the rule on other
/// kernels; the flag as a kernel name exists from this one.
pub fn has_page_anon_exclusive(k: KernelVersion) -> bool {
    k >= v(5, 19)
}

/// `FMODE_NOREUSE` exists: "mm: support POSIX_FADV_NOREUSE" (17e810229cb3, v6.3).
pub fn has_fmode_noreuse(k: KernelVersion) -> bool {
    k >= v(6, 3)
}

/// smaps prints `THPeligible` for each VMA: "mm, thp, proc: report THP eligibility for each vma"
/// (7635d9cbe832, v5.0).
pub fn smaps_has_thp_eligible(k: KernelVersion) -> bool {
    k >= v(5, 0)
}

/// smaps' `THPeligible` answers for regular files by the READ_ONLY_THP_FOR_FS rule (before, 0):
/// `hugepage_vma_check` became file-aware with "mm, thp: relax the VM_DENYWRITE constraint on
/// file-backed THPs" (eb6ecbed0aa2, v5.14 ~).
pub fn smaps_thp_eligible_files(k: KernelVersion) -> bool {
    k >= v(5, 14)
}

/// `PR_SET_THP_DISABLE` sets `MMF_DISABLE_THP`, effective at once for every VMA: "mm: make
/// PR_SET_THP_DISABLE immediately active" (1860033237d4, v4.13). Before, it set `VM_NOHUGEPAGE`
/// in the mm's `def_flags`, so only later mappings got it.
pub fn thp_disable_is_immediate(k: KernelVersion) -> bool {
    k >= v(4, 13)
}

/// How reclaim swaps out a PMD-sized anonymous THP (`shrink_folio_list`, mm/vmscan.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpSwapOut {
    /// Split into 4 KiB pages first (`split_huge_page_to_list`), each then swapped alone.
    SplitFirst,
    /// One whole swap cluster for the THP (`CONFIG_THP_SWAP`), then the split; 4 KiB pages with
    /// consecutive slots go out: "mm, THP, swap: delay splitting THP during swap out"
    /// (38d8b4e6bdc8, v4.13).
    ClusterThenSplit,
    /// Written and freed whole in its cluster, never split: "mm, THP, swap: delay splitting THP
    /// after swapped out" (bd4c82c22c36, v4.14; commit id not verified, the series' posting
    /// seen on linux-mm in July 2017).
    Whole,
}

/// The era's [`ThpSwapOut`].
pub fn thp_swap_out(k: KernelVersion) -> ThpSwapOut {
    if k < v(4, 13) {
        ThpSwapOut::SplitFirst
    } else if k < v(4, 14) {
        ThpSwapOut::ClusterThenSplit
    } else {
        ThpSwapOut::Whole
    }
}

/// A partially unmapped anonymous THP is queued for a deferred split, which a shrinker performs,
/// and `/sys/kernel/debug/split_huge_pages` splits THPs on demand: "thp: introduce
/// deferred_split_huge_page()" (9a982250f773, v4.5) with the THP refcounting rework.
pub fn has_deferred_split(k: KernelVersion) -> bool {
    k >= v(4, 5)
}

/// `split_huge_pages` takes `PID,0xSTART,0xEND` besides `1`: "mm: huge_memory: a new debugfs
/// interface for splitting THP tests" (fa6c02315f74, v5.13).
pub fn has_split_huge_pages_pid(k: KernelVersion) -> bool {
    k >= v(5, 13)
}

/// A write fault on an anonymous THP that cannot be reused splits the PMD and copies the 4 KiB
/// page, instead of copying the whole 2 MiB: "thp: change CoW semantics for anon-THP"
/// (3917c80280c9, v5.8).
pub fn thp_cow_splits_pmd(k: KernelVersion) -> bool {
    k >= v(5, 8)
}

/// `do_huge_pmd_wp_page` reuses by the folio's refcount (after dropping an unused swap-cache
/// reference) instead of `reuse_swap_page`'s mapcount: "mm/huge_memory: streamline COW logic in
/// do_huge_pmd_wp_page()" (3bff7e3f1f16, v5.18).
pub fn thp_wp_reuses_by_page_count(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// hugetlbfs takes the `min_size=` mount option: Mike Kravetz's "hugetlbfs: accept subpool
/// min_size mount option and setup accordingly" (March 2015, v4.1 ~, id not verified); before,
/// the option is unknown and the mount fails.
pub fn hugetlbfs_has_min_size(k: KernelVersion) -> bool {
    k >= v(4, 1)
}

/// fork copies a possibly pinned anonymous hugetlb page of a COW mapping for the child instead
/// of sharing it: "hugetlb: do early cow when page pinned on src mm" (4eae4efa2c29, v5.12).
pub fn hugetlb_fork_copies_pinned(k: KernelVersion) -> bool {
    k >= v(5, 12)
}

/// fork splits a huge PMD whose page may be DMA-pinned in an mm that has pinned pages, so that
/// the PTE-level copy gives the child its own copy: "mm/thp: Split huge pmds/puds if they're
/// pinned when fork()" (d042035eaf5f, v5.9).
pub fn fork_splits_pinned_huge_pmd(k: KernelVersion) -> bool {
    k >= v(5, 9)
}

/// A write fault on the huge zero page allocates a THP (up to v5.7, and again from "mm: allocate
/// THP on hugezeropage wp-fault", 1ced09e0331f, v6.13 ~); from "thp: change CoW semantics for
/// anon-THP" (3917c80280c9, v5.8) to v6.12 it splits the PMD and faults a 4 KiB page.
pub fn huge_zero_wp_allocates_thp(k: KernelVersion) -> bool {
    k < v(5, 8) || k >= v(6, 13)
}

/// khugepaged collapses ranges with pages mapped elsewhere too (up to `max_ptes_shared`) and
/// PTE-mapped pages of large folios: "khugepaged: introduce 'max_ptes_shared' tunable"
/// (71a2c112a0f6) and "khugepaged: allow to collapse PTE-mapped compound pages" (5503fbf2b0b8),
/// both v5.8; before, such pages fail the scan.
pub fn khugepaged_collapses_shared_and_compound(k: KernelVersion) -> bool {
    k >= v(5, 8)
}

/// Read-only page-cache THPs of regular files exist (CONFIG_READ_ONLY_THP_FOR_FS): "mm,thp: add
/// read-only THP support for (non-shmem) FS" (99cb0dbd47a1, v5.4).
pub fn has_read_only_thp_for_fs(k: KernelVersion) -> bool {
    k >= v(5, 4)
}

/// `retract_page_tables` takes no `mmap_lock` (i_mmap_rwsem, then the PMD and PTE locks), and
/// khugepaged maps a file THP still mapped by PTEs with `collapse_pte_mapped_thp` under
/// `mmap_lock` for read, where before it tried `mmap_write_trylock` and deferred busy mms to
/// `pte_mapped_thp` slots: "mm/khugepaged: retract_page_tables() without mmap or vma lock"
/// (1d65b771bc08) and "mm/khugepaged: collapse_pte_mapped_thp() with mmap_read_lock()" (Hugh
/// Dickins, v6.6).
pub fn retract_without_mmap_lock(k: KernelVersion) -> bool {
    k >= v(6, 6)
}

/// XFS's page cache holds large folios: "xfs: Support large folios" (6795801366da, v5.18), so
/// collapsed THPs of its files are not counted in `nr_thps` and opening one for write keeps them.
pub fn xfs_large_folios(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// ext4's page cache holds large folios for regular files ("ext4: enable large folio for regular
/// file", Zhang Yi, v6.16 per the issue; not re-verified against the tag): as XFS from v5.18.
pub fn ext4_large_folios(k: KernelVersion) -> bool {
    k >= v(6, 16)
}

/// shmem/tmpfs THPs exist: the tmpfs `huge=` mount option and
/// `transparent_hugepage/shmem_enabled` ("shmem: prepare huge= mount option and sysfs knob",
/// 5a6e75f8110c; "shmem: add huge pages support", 800d8c63b2e9), and khugepaged collapses shmem
/// ("khugepaged: add support of collapse for tmpfs/shmem pages", f3f0e1d2150b), all v4.8.
pub fn has_shmem_thp(k: KernelVersion) -> bool {
    k >= v(4, 8)
}

/// khugepaged's predicate asks the tmpfs mount's `huge=` option (and `shmem_enabled` for
/// `shm_mnt`) for a shmem VMA, instead of the anonymous `enabled` gate: "mm,thp,shmem: make
/// khugepaged obey tmpfs mount flags" (Rik van Riel, v5.11; hash not re-verified). Before, a
/// shmem VMA was eligible under `enabled` (`always`, or `madvise` with `VM_HUGEPAGE`) whatever
/// the mount said.
pub fn khugepaged_obeys_tmpfs_mount(k: KernelVersion) -> bool {
    k >= v(5, 11)
}

/// `MADV_WIPEONFORK` and `MADV_KEEPONFORK` exist: "mm,fork: introduce MADV_WIPEONFORK"
/// (d2cd9ede6e19, v4.14); before, the advice is EINVAL.
pub fn has_madv_wipeonfork(k: KernelVersion) -> bool {
    k >= v(4, 14)
}

/// `MADV_DONTNEED_LOCKED` exists: "mm: madvise: MADV_DONTNEED_LOCKED" (9457056ac426, v5.18),
/// `MADV_DONTNEED` that also drops the pages of a `VM_LOCKED` VMA; before, the advice is EINVAL.
pub fn has_madv_dontneed_locked(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// `MADV_COLLAPSE` exists: "mm/madvise: introduce MADV_COLLAPSE sync hugepage collapse"
/// (7d8faaf15545, v6.1); before, the advice is EINVAL.
pub fn has_madv_collapse(k: KernelVersion) -> bool {
    k >= v(6, 1)
}

/// `MREMAP_DONTUNMAP` exists: "mm/mremap: add MREMAP_DONTUNMAP to mremap()" (e346b3813067,
/// v5.7); before, the flag is unknown and EINVAL.
pub fn has_mremap_dontunmap(k: KernelVersion) -> bool {
    k >= v(5, 7)
}

/// `MREMAP_DONTUNMAP` takes any mapping but a `VM_DONTEXPAND` or `VM_PFNMAP` one: "mm: extend
/// MREMAP_DONTUNMAP to non-anonymous mappings" (a4609387859f, v5.13); before, a file or shared
/// mapping is EINVAL.
pub fn mremap_dontunmap_any_mapping(k: KernelVersion) -> bool {
    k >= v(5, 13)
}

/// `mremap` looks the VMA up first (EFAULT, even for a shrink) and handles hugetlb VMAs
/// (huge-page aligned, never growing): "mm, hugepages: add mremap() support for hugepage backed
/// vma" (550a7d60bd5e, v5.16). Before, a shrink is only the munmap of the tail, whatever is
/// mapped there, and a hugetlb VMA is EINVAL wherever mremap needs it.
pub fn mremap_handles_hugetlb(k: KernelVersion) -> bool {
    k >= v(5, 16)
}

/// Whether `/proc/PID/smaps` and `smaps_rollup` print `field` on `k`. Of the fields the model
/// keeps, these are younger than the oldest kernel here: the rollup's Pss components from v5.3
/// ([`smaps_rollup_only`]), `FilePmdMapped` from v5.4 ("mm,thp:
/// stats for file backed THP", 60fbf0ab5da1) and `Pss_Dirty` from v6.0
/// ("mm/smaps: add Pss_Dirty", hash not verified), `LazyFree` from v4.12 ("proc: show MADV_FREE
/// pages info in smaps", Shaohua Li's lazyfree series, hash not verified); `ShmemPmdMapped`
/// (v4.8) and `SwapPss` (v4.3) predate every kernel mmsim models. `THPeligible` is
/// [`smaps_has_thp_eligible`].
pub fn smaps_has_field(k: KernelVersion, field: &str) -> bool {
    match field {
        "FilePmdMapped" => k >= v(5, 4),
        "Pss_Anon" | "Pss_File" | "Pss_Shmem" => k >= v(5, 3),
        "Pss_Dirty" => k >= v(6, 0),
        "Shared_Hugetlb" | "Private_Hugetlb" => k >= v(4, 4),
        "LazyFree" => k >= v(4, 12),
        _ => true,
    }
}

/// The fields only `smaps_rollup` prints: the Pss components of "mm: smaps: split PSS into
/// components" (37ae24445846, v5.3), which
/// `__show_smap` prints in `rollup_mode` only.
pub fn smaps_rollup_only(field: &str) -> bool {
    matches!(field, "Pss_Anon" | "Pss_File" | "Pss_Shmem")
}

/// `/proc/PID/smaps_rollup` exists: "mm: add /proc/pid/smaps_rollup" (493b0e9d945f, v4.14);
/// before, the file is absent and opening it fails with ENOENT.
pub fn has_smaps_rollup(k: KernelVersion) -> bool {
    k >= v(4, 14)
}

/// `/proc/PID/status` prints `VmPMD` (the PMD page tables) after `VmPTE` (then only the PTE
/// tables): "mm: account pmd page tables to the process" (dc6c9a35b66b, v4.0) to v4.14. "mm:
/// consolidate page table accounting" (af5b0f6a09e4, v4.15) folded every level into
/// `mm->pgtables_bytes`, which `VmPTE` prints from then on (PTE, PMD and PUD tables; the PUD
/// count of b4e98d9ac775 came in the same merge window, so no release printed `VmPUD`). Both
/// hashes verified in the kernel history cited by later patches.
pub fn status_has_vm_pmd(k: KernelVersion) -> bool {
    k < v(4, 15)
}

/// The fs-DAX `->mmap` (`ext4_file_mmap`, `xfs_file_mmap`; device DAX too) sets `VM_MIXEDMAP`
/// beside `VM_HUGEPAGE` (smaps `mm hg`) up to v4.18; "dax: remove VM_MIXEDMAP for fsdax and
/// device dax" (e1fb4a086495, authored August 2018, so v4.19, not v4.15; the patch text and the
/// October 2018 report of the smaps change are verified) left `VM_HUGEPAGE` alone.
pub fn dax_mmap_sets_mixedmap(k: KernelVersion) -> bool {
    k < v(4, 19)
}

/// `KernelPageSize` and `MMUPageSize` follow `Size` in smaps from v4.14, when "mm: add
/// /proc/pid/smaps_rollup" (493b0e9d945f, v4.14) printed the per-VMA lines before
/// the summable ones; up to v4.13 they came after `SwapPss`, just before `Locked`.
pub fn smaps_page_size_after_size(k: KernelVersion) -> bool {
    k >= v(4, 14)
}

/// `MADV_COLD` and `MADV_PAGEOUT` exist: "mm: introduce MADV_COLD" (9c276cc65a58) and "mm:
/// introduce MADV_PAGEOUT" (1a4e58cce84e), both v5.4; before, `madvise_behavior_valid` does not
/// know them and the advice is EINVAL.
pub fn has_madv_cold_pageout(k: KernelVersion) -> bool {
    k >= v(5, 4)
}

/// How `madvise_cold_or_pageout_pte_range` asks whether a folio is mapped elsewhere, and
/// whether it takes a large folio whole (`madvise.rs` has the walk). Ids and versions from the
/// patches' mainline `Fixes:` tags and the mm-stable lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageoutSharing {
    /// v5.4-v5.5 (1a4e58cce84e): a THP by its page's mapcount (`page_mapcount != 1`), a
    /// PMD-mapped one only when the range covers part of it; a small page is not asked.
    Unasked,
    /// v5.6-v6.2: "mm: do not allow MADV_PAGEOUT for CoW pages" (12e967fd8e4e) asks every page
    /// (`page_mapcount != 1`).
    PageMapcount,
    /// v6.3-v6.4: the folio conversion (07e8c82b5eff) asks `folio_mapcount != 1`, which a
    /// PTE-mapped THP (512 mappings) always fails: the walk breaks off at it.
    FolioMapcount,
    /// v6.5-v6.9: a large folio by its first page's mapcount (`folio_estimated_sharers`,
    /// 2f406263e3e9).
    FirstPage,
    /// v6.10+: "mm: madvise: avoid split during MADV_PAGEOUT and MADV_COLD" (3931b871c493): a
    /// large folio whose PTEs all lie in the range is taken whole when every page is mapped once
    /// (`folio_mapcount == folio_nr_pages`); otherwise split unless `folio_likely_mapped_shared`
    /// (ebb34f78d72c; `folio_maybe_mapped_shared` from v6.15, the same test here), and a failure
    /// skips the folio's PTEs instead of ending the walk.
    Batched,
}

/// The era's [`PageoutSharing`].
pub fn pageout_sharing(k: KernelVersion) -> PageoutSharing {
    match k {
        k if k < v(5, 6) => PageoutSharing::Unasked,
        k if k < v(6, 3) => PageoutSharing::PageMapcount,
        k if k < v(6, 5) => PageoutSharing::FolioMapcount,
        k if k < v(6, 10) => PageoutSharing::FirstPage,
        _ => PageoutSharing::Batched,
    }
}

/// `MADV_FREE` exists: "mm: support madvise(MADV_FREE)" (854e9ed09ded, v4.5); before, EINVAL.
pub fn has_madv_free(k: KernelVersion) -> bool {
    k >= v(4, 5)
}

/// `MADV_FREE` keeps its pages on the anonymous LRU, from v4.5 to v4.11 (`mm/madvise.c`,
/// `mm/vmscan.c`, `mm/rmap.c` of those kernels):
/// - `madvise_vma` passes the advice through to `MADV_DONTNEED` unless a swap slot is free
///   (`get_nr_swap_pages() > 0`; "mm: support madvise(MADV_FREE)", 854e9ed09ded, verified in
///   the v4.5 patch text);
/// - `madvise_free_pte_range` cleans and ages the PTE and the page but keeps it swap-backed; an
///   active page whose PTE was young or dirty is deactivated to the inactive anon list
///   (`deactivate_page`, "mm: move lazily freed pages to inactive list", 10853a039208);
/// - reclaim gives every anonymous page that is not yet in the swap cache a swap slot
///   (`add_to_swap`, which no longer marks it dirty) and unmaps it with `TTU_LZFREE`:
///   `try_to_unmap_one` moves a dirty PTE's bit to the page, then drops the PTE of a page still
///   clean instead of writing a swap entry; a page unmapped that way and still clean leaves the
///   swap cache unwritten (`SWAP_LZFREE`, counted in `pglazyfreed`).
///
/// v4.12 replaced it: "mm: move MADV_FREE pages into LRU_INACTIVE_FILE list" (f7ad2a6cb9f7),
/// "mm: reclaim MADV_FREE pages" (802a3a92ad7a) and "mm: enable MADV_FREE for swapless system"
/// (93e06c7a6453) (ids verified in later kernel commits and mailing-list citations).
pub fn lazyfree_on_anon_lru(k: KernelVersion) -> bool {
    has_madv_free(k) && k < v(4, 12)
}

/// How many folios a per-CPU LRU batch holds before it drains itself (`PAGEVEC_SIZE`, the size of
/// a pagevec and later of a `folio_batch`): 14 at first, 15 from "mm: get 7% more pages in a
/// pagevec" (Matthew Wilcox, queued in mmotm's since-4.15 branch, so v4.16; id not verified), 31
/// from "mm: increase folio batch size" (9cecde80aae0, v6.9-rc2; 15 in the v6.8 source, 31 in
/// v6.9's).
pub fn lru_batch_size(k: KernelVersion) -> usize {
    match k {
        k if k < v(4, 16) => 14,
        k if k < v(6, 9) => 15,
        _ => 31,
    }
}

/// khugepaged drains every CPU's LRU batches as a round starts (`lru_add_drain_all` in
/// `khugepaged_do_scan`), so a page waiting in a batch with the batch's reference does not fail
/// the scan's refcount check: "khugepaged: Drain all LRU caches before scanning pages" (Kirill
/// Shutemov's series posted in April 2020, merged for v5.8; id not verified). Before, such a
/// page failed the scan until something else drained its batch.
pub fn khugepaged_drains_lru_batches(k: KernelVersion) -> bool {
    k >= v(5, 8)
}

/// `/proc/kpageflags` reads a page's flag bits from its folio: "proc: rewrite
/// stable_page_flags()" (dee3d0bef2b0, v6.10; the id from a later `Fixes:` tag, the code from
/// the linux-next review of 2024-04-03). Before, `stable_page_flags` copied the bits of the
/// `struct page` itself, so a THP's tail pages showed none of `PG_locked` .. `PG_unevictable`
/// (which live on the head); `KPF_SWAPCACHE` (`PageSwapCache` looks at the head), `KPF_ANON`,
/// `KPF_MMAP` (`page_mapped` of a compound page asks about the whole folio) and `KPF_THP` were
/// the folio's in every era.
pub fn kpageflags_from_folio(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// `/proc/kpageflags` sets `KPF_KSM` on every anonymous page, merged or not: the same rewrite
/// (dee3d0bef2b0, v6.10) tests the folio's mapping bits against `PAGE_MAPPING_KSM` with a bare
/// `&`, and that constant is `PAGE_MAPPING_ANON | PAGE_MAPPING_MOVABLE`, so the anonymous bit
/// alone passes (before, `PageKsm` compared all the mapping bits). Fixed by "fs/proc: fix KPF_KSM
/// reported for all anonymous pages" (81401cebfc15, merged after v7.2-rc2, so v7.2: past v6.19,
/// the model's last version, so every modelled version from v6.10 has the bug). The fix is
/// marked for stable: 7.1.y and 6.18.y carry it (6.18.y's 21dfa4f9c686, queued in July 2026;
/// 6.18.44 has it), 6.12.y does not as of 6.12.118. A host on a fixed stable release declares
/// the difference in its scenarios.
pub fn kpageflags_ksm_for_every_anon(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// `/proc/PID/pagemap` sets `PM_FILE` on the entries of a PMD-mapped THP that is not anonymous
/// (a shmem or page-cache THP): "fs/proc/task_mmu: indicate PM_FILE for PMD-mapped file THP"
/// (3f9f022e975d, v6.11). Before, `pagemap_pmd_range` never set it for a PMD. The boundary is
/// mainline's: the fix also went to the stable series (6.1.y from 6.1.103, 6.6.y, 6.10.y)
/// without its sibling that computes `PM_MMAP_EXCLUSIVE` per page
/// ([`pagemap_pmd_exclusive_per_page`]), so Debian's 6.1 sets `PM_FILE` here as v6.11 does
/// (declared in `scenarios/inspect/thp-pagemap-eras.toml`).
pub fn pagemap_pmd_sets_file(k: KernelVersion) -> bool {
    k >= v(6, 11)
}

/// `/proc/PID/pagemap` of a hugetlb entry (`pagemap_hugetlb_range`) sets `PM_FILE` for a page
/// that is not anonymous (a hugetlbfs page-cache page, shared or read through a private mapping)
/// and `PM_MMAP_EXCLUSIVE` for a huge page mapped once: "pagemap: rework hugetlb and thp report"
/// (356515e7b64c, "Add missing \"FILE\" bit in hugetlb vmas") and "pagemap: add mmap-exclusive bit
/// for marking pages mapped only here" (77bb499bb60f), both merged on 2015-09-08 for v4.3
/// (`pagemap.rst` says bit 56 came "since 4.2"; v4.2 was out on 2015-08-30). Before, a hugetlb
/// entry had neither bit (`huge_pte_to_pagemap_entry` of the v4.2-era source).
pub fn pagemap_hugetlb_sets_file_exclusive(k: KernelVersion) -> bool {
    k >= v(4, 3)
}

/// A hugetlb page reached through a shared PMD table is not `PM_MMAP_EXCLUSIVE` in pagemap,
/// however few times it is mapped (`hugetlb_pmd_shared`): "fs/proc/task_mmu: convert
/// pagemap_hugetlb_range() to work on folios" (88e4e47c1283, v6.10; absent from the v6.9 source,
/// present in v6.11's). Before, a shared table maps each page once for every mm that uses it, so
/// each of them saw the page as exclusive. smaps made the same change earlier
/// ([`smaps_hugetlb_counts_pmd_shared`]).
pub fn pagemap_hugetlb_exclusive_sees_pmd_share(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// `PM_MMAP_EXCLUSIVE` of a PMD-mapped THP's entries is each page's own only from v6.11 to v6.14:
/// "fs/proc/task_mmu: remove per-page mapcount dependency for PM_MMAP_EXCLUSIVE
/// (CONFIG_NO_PAGE_MAPCOUNT)" (eb16876971ea, v6.15) asks for every entry of the PMD about the
/// page the PMD maps (its head), as before v6.11. The model is a `CONFIG_PAGE_MAPCOUNT` kernel
/// (the default), where that question is the head page's precise mapcount; seen on 6.18 by
/// `mmsim diff scenarios/inspect/thp-pagemap-eras.toml`.
pub fn pagemap_pmd_exclusive_per_page(k: KernelVersion) -> bool {
    (v(6, 11)..v(6, 15)).contains(&k)
}

/// `/proc/PID/smaps` counts a hugetlb page reached through a shared PMD table as
/// `Shared_Hugetlb`: "mm: hugetlb: proc: check for hugetlb shared PMD in /proc/PID/smaps"
/// (3489dbb696d2, v6.2; backported to the stable series, 6.1.y from 6.1.11, so Debian's 6.1
/// counts as v6.2 does: declared in the `scenarios/hugetlb/pmd-share*.toml`). Before, only a page
/// mapped at least twice was shared, and a shared table maps each page once however many mms use
/// it.
pub fn smaps_hugetlb_counts_pmd_shared(k: KernelVersion) -> bool {
    k >= v(6, 2)
}

/// A hugetlbfs file's `mapping->nrpages` counts base pages: "mm/filemap: remove hugetlb special
/// casing in filemap.c" (a08c7193e4f1, v6.7); before, `__filemap_add_folio` added one per huge
/// page.
pub fn hugetlb_nrpages_in_base_pages(k: KernelVersion) -> bool {
    k >= v(6, 7)
}

/// `brk` keeps `stack_guard_gap` (256 pages) below a `VM_GROWSDOWN` VMA: "mm: larger stack
/// guard gap, between vmas" (1be7107fbe18, v4.12); before, only a VMA within a page refused it.
pub fn brk_respects_stack_guard_gap(k: KernelVersion) -> bool {
    k >= v(4, 12)
}

/// x86's page fault handler grows a `VM_GROWSDOWN` VMA for an access below it wherever the user
/// stack pointer is ("x86/mm/fault: Allow stack access below %rsp", 1d8ca3be86eb, v4.20);
/// before, an access more than 64 KiB below `%rsp` was SIGSEGV.
pub fn stack_grows_without_sp_check(k: KernelVersion) -> bool {
    k >= v(4, 20)
}

/// `/proc/PID/maps` names `[heap]` a VMA that merely touches `[start_brk, brk]` (the bss before
/// an empty heap among them) up to v6.6; from v6.7 it must overlap ("mm: fix VMA heap bounds
/// checking", Kefeng Wang, v6.7-rc6; id not verified).
pub fn heap_name_touching(k: KernelVersion) -> bool {
    k < v(6, 7)
}

/// A new anonymous page starts on the active list (`lru_cache_add_active_or_unevictable`)
/// before v5.9; from v5.9 on the inactive list ("mm/vmscan: protect the workingset on anonymous
/// LRU", b518154e59aa).
pub fn new_anon_starts_active(k: KernelVersion) -> bool {
    k < v(5, 9)
}

/// `mlock2(2)`, `MLOCK_ONFAULT`, `MCL_ONFAULT` and `VM_LOCKONFAULT` exist: "mm: mlock: add new
/// system call mlock2" (a8ca5d0ecbdd, v4.4); before, `mlock2` is ENOSYS and `MCL_ONFAULT`
/// EINVAL.
pub fn has_mlock2(k: KernelVersion) -> bool {
    k >= v(4, 4)
}

/// `cachestat(2)` exists: "cachestat: implement cachestat syscall" (cf264e1329fb, Nhat Pham,
/// v6.5; `CONFIG_CACHESTAT_SYSCALL`, on by default); before, the syscall is ENOSYS
/// (`filemap.rs`).
pub fn has_cachestat(k: KernelVersion) -> bool {
    k >= v(6, 5)
}

/// `mseal(2)` and `VM_SEALED` exist: "mseal: add mseal syscall" (8be7258aad44, v6.10); before,
/// the syscall is ENOSYS (`mseal.rs`).
pub fn has_mseal(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// A sealed VMA is found VMA by VMA by the walks of `mprotect`, `madvise` and `munmap` (and
/// `mremap` looks at its source VMA only): Pedro Falcato's "mm: mseal: ... can_modify_vma"
/// series, v6.12. In v6.10-v6.11 `can_modify_mm` and `can_modify_mm_madv` check the whole
/// range first, so a refused call changes nothing (`mseal.rs`).
pub fn mseal_checks_each_vma(k: KernelVersion) -> bool {
    k >= v(6, 12)
}

/// `userfaultfd(2)` exists: "userfaultfd: add new syscall to provide memory externalization"
/// (v4.3, Andrea Arcangeli's series); before, the syscall is ENOSYS.
pub fn has_userfaultfd(k: KernelVersion) -> bool {
    k >= v(4, 3)
}

/// `UFFDIO_REGISTER_MODE_MISSING` takes hugetlbfs and shmem VMAs, and `UFFDIO_API` offers
/// `UFFD_FEATURE_MISSING_HUGETLBFS`/`MISSING_SHMEM` (with `EVENT_FORK`, `EVENT_REMAP`,
/// `EVENT_REMOVE`, `EVENT_UNMAP`): "userfaultfd: hugetlbfs: allow registration of ranges
/// containing huge pages" and "userfaultfd: shmem: allow registration of shared memory ranges"
/// (v4.11). Before, only anonymous VMAs register, and `UFFDIO_API` takes no feature.
pub fn uffd_missing_hugetlb_shmem(k: KernelVersion) -> bool {
    k >= v(4, 11)
}

/// `UFFDIO_REGISTER` refuses a VMA without `VM_MAYWRITE` with EPERM, and `UFFDIO_COPY` into a
/// hugetlb or shmem VMA wants it registered (the anonymous path always did): "userfaultfd:
/// shmem/hugetlbfs: only allow to register VM_MAYWRITE vmas" (29ec90660d68, v4.20;
/// CVE-2018-18397, in 4.19.7 and 4.14.87 too).
pub fn uffd_register_needs_maywrite(k: KernelVersion) -> bool {
    k >= v(4, 20)
}

/// `UFFDIO_COPY`/`UFFDIO_ZEROPAGE` with no registered VMA covering the range is ENOENT, EINVAL
/// before: "userfaultfd: mcopy_atomic: return -ENOENT when no compatible VMA found" (Mike
/// Rapoport, v4.11).
pub fn uffd_mfill_enoent(k: KernelVersion) -> bool {
    k >= v(4, 11)
}

/// `mremap` of a registered VMA without `UFFD_FEATURE_EVENT_REMAP` clears the moved VMA's
/// `VM_UFFD_*` and context: "userfaultfd: clear flag if remap event not enabled" (Peter Xu,
/// v5.0). Before, the moved VMA stayed registered.
pub fn mremap_drops_uffd(k: KernelVersion) -> bool {
    k >= v(5, 0)
}

/// `UFFDIO_API` offers the non-cooperative events `UFFD_FEATURE_EVENT_FORK`, `EVENT_REMAP`,
/// `EVENT_REMOVE` and `EVENT_UNMAP` (Mike Rapoport's series: "userfaultfd: non-cooperative: add
/// fork() event", "... add mremap() event", "... add madvise() event for MADV_REMOVE request",
/// "... add event for memory unmaps", v4.11); before, any feature is EINVAL.
pub fn uffd_noncooperative_events(k: KernelVersion) -> bool {
    k >= v(4, 11)
}

/// `UFFD_FEATURE_SIGBUS` (a userfault raises SIGBUS instead of a message) and
/// `UFFD_FEATURE_THREAD_ID` (the faulting thread's id in the message) exist: "userfaultfd:
/// provide pid in userfault msg" and "mm: userfaultfd: add new feature UFFD_FEATURE_SIGBUS"
/// (v4.14).
pub fn uffd_sigbus_thread_id(k: KernelVersion) -> bool {
    k >= v(4, 14)
}

/// While a non-cooperative event is being delivered (`ctx->mmap_changing`), `UFFDIO_COPY` and
/// `UFFDIO_ZEROPAGE` fail with EAGAIN: "userfaultfd: prevent non-cooperative events vs
/// mcopy_atomic races" (df2cc96e7701, v4.18); before, they went ahead.
pub fn uffd_mfill_waits_mmap_changing(k: KernelVersion) -> bool {
    k >= v(4, 18)
}

/// `userfaultfd(2)` takes `UFFD_USER_MODE_ONLY`: a fault from kernel mode (`copy_to_user`) in
/// a range such a descriptor registered is SIGBUS (EFAULT) instead of a message: "userfaultfd:
/// add UFFD_USER_MODE_ONLY" (37cd0575b8510159, v5.11); before, the flag is EINVAL.
pub fn uffd_user_mode_only(k: KernelVersion) -> bool {
    k >= v(5, 11)
}

/// `UFFDIO_REGISTER_MODE_MINOR` on hugetlbfs, `UFFD_FEATURE_MINOR_HUGETLBFS` and
/// `UFFDIO_CONTINUE`: "userfaultfd: add minor fault registration mode" and "userfaultfd: add
/// UFFDIO_CONTINUE ioctl" (Axel Rasmussen, v5.13); before, the mode is an unknown bit and the
/// ioctl an unknown command (EINVAL).
pub fn uffd_minor_hugetlbfs(k: KernelVersion) -> bool {
    k >= v(5, 13)
}

/// `UFFDIO_REGISTER_MODE_MINOR` on shmem and `UFFD_FEATURE_MINOR_SHMEM`, with fault-around
/// kept off minor-registered VMAs: "userfaultfd/shmem: support minor fault registration for
/// shmem" (v5.14); before, registering shmem in minor mode is EINVAL.
pub fn uffd_minor_shmem(k: KernelVersion) -> bool {
    k >= v(5, 14)
}

/// `UFFD_FEATURE_EXACT_ADDRESS`: the message gives the faulting address unmasked
/// ("userfaultfd: provide unmasked address on page-fault", 824ddc601adc, v5.18).
pub fn uffd_exact_address(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// `/dev/userfaultfd` and its `USERFAULTFD_IOC_NEW` make a userfaultfd as the syscall does:
/// "userfaultfd: add /dev/userfaultfd for fine grained access control" (2d5de004e009, v6.1);
/// before, there is no such device (ENOENT).
pub fn has_dev_userfaultfd(k: KernelVersion) -> bool {
    k >= v(6, 1)
}

/// userfaultfd write-protection of anonymous memory: `UFFDIO_REGISTER_MODE_WP`,
/// `UFFD_FEATURE_PAGEFAULT_FLAG_WP`, `UFFDIO_WRITEPROTECT` and `UFFDIO_COPY_MODE_WP`, the
/// uffd-wp bit in PTEs and swap entries (Peter Xu's series: "userfaultfd: wp: add WP pagetable
/// tracking to x86" 5a281062af1d, "userfaultfd: wp: support swap and page migration"
/// f45ec5ff16a7, "userfaultfd: wp: add the writeprotect API to userfaultfd ioctl",
/// "userfaultfd: wp: enabled write protection in userfaultfd API", v5.7). Before, the mode and
/// the copy mode are unknown bits, the feature unknown and the ioctl an unknown command
/// (EINVAL).
pub fn uffd_wp_anon(k: KernelVersion) -> bool {
    k >= v(5, 7)
}

/// `/proc/PID/pagemap` bit 57, `PM_UFFD_WP`, shows a uffd-wp PTE or swap entry ("mm/pagemap:
/// export uffd-wp protection information", fb8e37f35a2f, v5.13; pagemap.rst: "since 5.13").
pub fn pagemap_uffd_wp(k: KernelVersion) -> bool {
    k >= v(5, 13)
}

/// `fork` keeps a PTE's uffd-wp bit in the child only when the child's VMA is registered for
/// write-protection (with `UFFD_FEATURE_EVENT_FORK`): "mm/userfaultfd: fix uffd-wp special
/// cases for fork()" (8f34f1eac382, v5.16). From v5.7 to v5.15 `copy_one_pte` asked the
/// parent's VMA ("userfaultfd: wp: drop _PAGE_UFFD_WP properly when fork", b569a1760782), so a
/// child without `EVENT_FORK` kept the bits of a write-protect-registered parent.
pub fn fork_uffd_wp_follows_child(k: KernelVersion) -> bool {
    k >= v(5, 16)
}

/// `UFFDIO_UNREGISTER` of a write-protect-registered range clears the uffd-wp bits of its PTEs
/// ("mm/uffd: reset write protection when unregister with wp-mode", f369b07c8614, v6.0);
/// before, they stayed (inert, but visible in pagemap).
pub fn uffd_unregister_clears_wp(k: KernelVersion) -> bool {
    k >= v(6, 0)
}

/// The release of a userfaultfd clears the uffd-wp bits of the write-protect-registered VMAs it
/// leaves, as unregistration does: `userfaultfd_release`'s "Reset ptes for the whole vma range
/// if wr-protected" is in v6.11's fs/userfaultfd.c and not in v6.8's (the commit between was
/// not identified; v6.11 is the first release the mirrors show it in).
pub fn uffd_release_clears_wp(k: KernelVersion) -> bool {
    k >= v(6, 11)
}

/// `UFFDIO_WRITEPROTECT` resolving the protection of an exclusive anonymous page makes its PTE
/// writable at once (`uffd_wp_range` passes `MM_CP_TRY_CHANGE_WRITABLE`: "mm/userfaultfd: rely
/// on vma->vm_page_prot in uffd_wp_range()", 931298e103c2, v6.3); before, the PTE stayed
/// read-only and the next write took a write fault that reused the page.
pub fn uffd_wp_resolve_makes_writable(k: KernelVersion) -> bool {
    k >= v(6, 3)
}

/// `UFFDIO_WRITEPROTECT` walks every VMA of its range (`for_each_vma_range`), skipping holes,
/// ENOENT at the first VMA not registered for write-protection or when the range holds no VMA:
/// "mm/userfaultfd: support WP on multiple VMAs" (Muhammad Usama Anjum, v6.5, with
/// `PAGEMAP_SCAN`'s series). Before, one registered VMA had to cover the whole range
/// (`find_dst_vma`), ENOENT otherwise.
pub fn uffd_writeprotect_spans_vmas(k: KernelVersion) -> bool {
    k >= v(6, 5)
}

/// A fault retried after `VM_FAULT_RETRY` (`FAULT_FLAG_TRIED`) counts major: "mm: do page
/// fault accounting in handle_mm_fault" (bce617edecad, v5.9). Before, x86's fault handler
/// counted the last pass's `VM_FAULT_MAJOR` only.
pub fn retried_fault_counts_major(k: KernelVersion) -> bool {
    k >= v(5, 9)
}

/// `MADV_GUARD_INSTALL` and `MADV_GUARD_REMOVE` exist: "mm: madvise: implement lightweight
/// guard page mechanism" (662df3e5c376, v6.13); before, the advice is EINVAL.
pub fn has_madv_guard(k: KernelVersion) -> bool {
    k >= v(6, 13)
}

/// Guard regions may be installed in any VMA but a special, hugetlb or (to install) locked one:
/// "mm: allow guard regions in file-backed and read-only mappings" (f807123d578d, v6.15, the
/// series "mm: permit guard regions for file-backed/shmem mappings"). In v6.13 and v6.14
/// `is_valid_guard_vma` also asked for an anonymous VMA with `VM_MAYWRITE`.
pub fn guard_regions_any_mapping(k: KernelVersion) -> bool {
    k >= v(6, 15)
}

/// pagemap sets `PM_GUARD_REGION` (bit 58) on a guard marker's entry: "fs/proc/task_mmu: add
/// guard region bit to pagemap" (8e2f2aeb8b48, v6.15); before, the entry shows only `PM_SWAP`.
pub fn pagemap_has_guard_region(k: KernelVersion) -> bool {
    k >= v(6, 15)
}

/// A userfault taken under the per-VMA lock returns `VM_FAULT_RETRY` without
/// `VM_FAULT_MAJOR`, so x86's `do_user_addr_fault` retries under `mmap_lock` without
/// `FAULT_FLAG_TRIED` and the completed fault counts minor: "mm: handle userfaults under VMA
/// lock" (29a22b9e08d7, v6.7). The model applies it to write-protect faults, whose VMA has its
/// `anon_vma` (a missing fault of a VMA without one went to `mmap_lock` first and retried with
/// `FAULT_FLAG_TRIED`); on 6.18 a resolved write-protect fault counts in `minflt`.
pub fn uffd_wp_retry_counts_minor(k: KernelVersion) -> bool {
    k >= v(6, 7)
}

/// `MADV_POPULATE_READ` and `MADV_POPULATE_WRITE` exist: "mm/madvise: introduce
/// MADV_POPULATE_(READ|WRITE) to prefault page tables" (4ca9b3859dac, v5.14); before, EINVAL.
pub fn has_madv_populate(k: KernelVersion) -> bool {
    k >= v(5, 14)
}

/// `MADV_POPULATE_READ`/`MADV_POPULATE_WRITE` step over holes: up to v6.9 `do_madvise` sends them
/// through `madvise_walk_vmas`, which populates every VMA in the range, remembers ENOMEM for a
/// hole and returns it at the end (any other error stops the walk at once). From "mm/madvise:
/// don't perform madvise VMA walk for MADV_POPULATE_(READ|WRITE)" (fa9fcd8bb6e4, v6.10; the id
/// from akpm's mm-stable history; the walk is in the v6.9 source, gone from v6.11's) GUP
/// (`faultin_page_range`, FOLL_MADV_POPULATE) returns ENOMEM at the first hole.
pub fn madv_populate_skips_holes(k: KernelVersion) -> bool {
    has_madv_populate(k) && k < v(6, 10)
}

impl Default for Switches {
    fn default() -> Self {
        Switches::for_kernel(KernelVersion::DEFAULT)
    }
}

/// `/sys/kernel/mm/ksm/use_zero_pages` exists: "mm/ksm: improve deduplication of zero pages with
/// colouring" (e86c59b1b12d, v4.11); before, the file is absent.
pub fn has_ksm_use_zero_pages(k: KernelVersion) -> bool {
    k >= v(4, 11)
}

/// `/proc/PID/ksm_merging_pages`: "ksm: count ksm merging pages for each process"
/// (7609385337a4, v5.19). Before, the file is absent.
pub fn has_ksm_merging_pages(k: KernelVersion) -> bool {
    k >= v(5, 19)
}

/// `/proc/PID/ksm_stat` with `ksm_rmap_items`: "ksm: count allocated ksm rmap_items for each
/// process" (cb4df4cae4f2, v6.1). Before, the file is absent; `ksm_merging_pages` joins it in
/// v6.4 ("mm: add new KSM process and sysfs knobs", d21077fbc2fc) and `ksm_zero_pages` with
/// [`has_ksm_zero_pages`].
pub fn has_proc_ksm_stat(k: KernelVersion) -> bool {
    k >= v(6, 1)
}

/// `ksm_merging_pages` in `/proc/PID/ksm_stat` (d21077fbc2fc, v6.4, with `ksm_process_profit`
/// and the `general_profit` file, which the model does not offer: see `ksm/zero.rs`).
pub fn ksm_stat_has_merging_pages(k: KernelVersion) -> bool {
    k >= v(6, 4)
}

/// KSM-placed zero pages tracked: the PTE of a zero page KSM maps is made dirty, counted in
/// `/sys/kernel/mm/ksm/ksm_zero_pages` and `ksm_stat`'s `ksm_zero_pages`, uncounted when the
/// PTE is zapped or copied away, and unshared by `MADV_UNMERGEABLE` and `run` 2 (xu xin's series
/// "ksm: support tracking KSM-placed zero-pages": "ksm: support unsharing KSM-placed zero
/// pages", "ksm: count all zero pages placed by KSM", "ksm: add ksm zero pages for each
/// process"; placed at v6.6 by its merge, the commits' hashes not verified here; absent from
/// Debian's 6.1, present in 6.8, 6.12 and 6.18). Before, KSM's zero pages stay when unmerged.
pub fn has_ksm_zero_pages(k: KernelVersion) -> bool {
    k >= v(6, 6)
}

/// `exec` keeps `PR_SET_MEMORY_MERGE` (`MMF_VM_MERGE_ANY` in `MMF_INIT_MASK`, `ksm_execve`):
/// "mm/ksm: support fork/exec for prctl" (3c6f33b7273a, v6.7). Before, the new image's mm
/// does not merge any.
pub fn ksm_merge_any_survives_exec(k: KernelVersion) -> bool {
    k >= v(6, 7)
}

/// `/sys/kernel/mm/ksm/pages_scanned`: "mm/ksm: add pages scanned metric" (Stefan Roesch;
/// placed at v6.6 by its merge, the hash not verified here; absent from Debian's 6.1, present in
/// 6.8, 6.12 and 6.18).
pub fn has_ksm_pages_scanned(k: KernelVersion) -> bool {
    k >= v(6, 6)
}

/// `prctl(PR_SET_MEMORY_MERGE)` and `PR_GET_MEMORY_MERGE`: KSM for a whole process, "mm: add
/// new api to enable ksm per process" (d7597f59d1d3, v6.4; `ksm/merge_any.rs`). Before, both
/// are unknown options (EINVAL).
pub fn has_prctl_memory_merge(k: KernelVersion) -> bool {
    k >= v(6, 4)
}

/// KSM's sharing limit and stable-node chains, with the files `max_page_sharing`,
/// `stable_node_chains`, `stable_node_dups` and `stable_node_chains_prune_millisecs`: "ksm:
/// introduce ksm_max_page_sharing per page deduplication limit" (2c653d0ee2ae, v4.13;
/// `ksm/chain.rs`). Before, a KSM page takes any number of mappings.
pub fn has_ksm_max_page_sharing(k: KernelVersion) -> bool {
    k >= v(4, 13)
}

/// ksmd's smart scan, on by default, with its knob `/sys/kernel/mm/ksm/smart_scan` and the
/// `pages_skipped` counter: "mm/ksm: add "smart" page scanning mode" (5e924ff54d08) and "mm/ksm:
/// add pages_skipped metric" (e5a689912689), both v6.7. Before, ksmd looks at every page on
/// every scan and both files are absent.
pub fn has_ksm_smart_scan(k: KernelVersion) -> bool {
    k >= v(6, 7)
}

/// A write fault reuses a KSM page that only the faulting PTE references (`reuse_ksm_page`):
/// "mm: reuse only-pte-mapped KSM page in do_wp_page()" (52d1e606ee73, v5.1) to v5.8, removed
/// with the `page_count` rule by "mm/ksm: Remove reuse_ksm_page()" (1a0cf26323c8, v5.9), and
/// restored by the seed's `mapcount` rule, which reverts that commit.
pub fn reuses_ksm_page(rule: CowReuse, k: KernelVersion) -> bool {
    match rule {
        CowReuse::MapcountSwapcount => k >= v(5, 1),
        CowReuse::Mapcount => true,
        CowReuse::PageCount | CowReuse::AnonExclusive => false,
    }
}

/// Anonymous multi-size THP: the per-size `hugepages-<N>kB/enabled` knobs and the fault's
/// choice of a PTE-mapped large folio ("mm: thp: introduce multi-size THP sysfs interface",
/// 3485b88390b0; "mm: thp: support allocation of anonymous multi-size THP", 19eaf44954df; both
/// v6.8).
pub fn has_mthp(k: KernelVersion) -> bool {
    k >= v(6, 8)
}

/// The anonymous fault charges each candidate order to the memory cgroup inside its allocation
/// loop and falls back to the next order when the charge fails ("mm: memory: move
/// mem_cgroup_charge() into alloc_anon_folio()", 085ff35e7636, v6.9); in v6.8 the folio chosen
/// is charged after the loop and a failed charge is an OOM.
pub fn mthp_charge_falls_back(k: KernelVersion) -> bool {
    k >= v(6, 9)
}

/// The per-size `stats/` directory with the fault and swap-out counters (`anon_fault_alloc`,
/// `anon_fault_fallback`, `anon_fault_fallback_charge`: ec33687c6749; `swpout`,
/// `swpout_fallback`: d0f048ac39f6, renamed from `anon_swpout*` by 0d648dd5c899 before the
/// release; v6.10).
pub fn has_mthp_stats(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// The per-size split counters `split`, `split_failed`, `split_deferred` ("mm: add per-order
/// mTHP split counters", f216c845f3c7, v6.11).
pub fn has_mthp_split_stats(k: KernelVersion) -> bool {
    k >= v(6, 11)
}

/// The per-size gauges `nr_anon` and `nr_anon_partially_mapped` (5d65c8d758f2, 8175ebfd302a,
/// v6.12).
pub fn has_mthp_nr_anon(k: KernelVersion) -> bool {
    k >= v(6, 12)
}

/// A zero-filled folio is not written to swap: `swap_writepage` marks its slots in the device's
/// zeromap instead, and a swap-in of such a slot fills the page with zeros without a read ("mm:
/// store zero pages to be swapped out in a bitmap", 0ca0c24e3211, v6.12). The events
/// `swpout_zero` and `swpin_zero` count them from the same release ("mm: count zeromap read and
/// set for swapout and swapin", e7ac4daeed91, a hotfix merged after v6.12-rc7).
pub fn swap_zeromap(k: KernelVersion) -> bool {
    k >= v(6, 12)
}

/// Splitting an anonymous THP maps each zero-filled page that a PTE mapped to the shared zero
/// page and frees the page ("mm: remap unused subpages to shared zeropage when splitting
/// isolated thp", b1f202060afe, v6.12; every anonymous split, `__split_huge_page` passing
/// `RMP_USE_SHARED_ZEROPAGE` to `remap_page`).
pub fn split_maps_zero_subpages(k: KernelVersion) -> bool {
    k >= v(6, 12)
}

/// The anonymous collapse needs at least one writable PTE in the range (`SCAN_PAGE_RO`), in the
/// scan and in the re-check under the PMD lock, until "mm: enable khugepaged anonymous collapse
/// on non-writable regions" (Dev Jain, b9f85966d1be, v6.18; the THP is then mapped writable
/// only where the VMA is, `maybe_pmd_mkwrite`).
pub fn collapse_needs_writable_pte(k: KernelVersion) -> bool {
    k < v(6, 18)
}

/// The zero-page PTE such a split installs keeps the soft-dirty bit of the entry it replaces
/// ("mm/rmap: fix soft-dirty and uffd-wp bit loss when remapping zero-filled mTHP subpage to
/// shared zeropage", v6.18 and the stable trees from 6.17.4; commit id not verified); from
/// v6.12 to v6.17 it is built without it.
pub fn zero_subpage_keeps_soft_dirty(k: KernelVersion) -> bool {
    k >= v(6, 18)
}

/// Reclaim swaps a large anonymous folio of any order out whole, splitting only one on the
/// deferred split queue, instead of splitting every folio without a PMD mapping first ("mm:
/// swap: allow storage of all mTHP orders", 845982eb264b; "mm: vmscan: avoid split during
/// shrink_folio_list()", 5ed890ce5147; v6.10). From v4.14 ("mm, THP, swap: delay splitting THP
/// after swapped out", bd4c82c22c36) to v6.9 a folio no PMD maps was split right away.
pub fn swaps_out_large_folios_whole(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// `thp_split_page`, `thp_split_page_failed` and `thp_deferred_split_page` count only
/// PMD-mappable folios ("mm: huge_memory: add the missing folio_test_pmd_mappable() for THP
/// split statistics", 835c3a25aa37, v6.10); in v6.8 and v6.9 every large anonymous folio's
/// split counted.
pub fn thp_split_stats_pmd_only(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// Unmapping the PTEs of a large anonymous folio queues it for a deferred split only while some
/// of its pages stay mapped ("mm/rmap: do not add fully unmapped large folio to deferred split
/// list", 7491f3f34891, v6.10); before, every PTE removal queued it, so a folio unmapped whole
/// was queued too (until freed).
pub fn deferred_split_only_partial(k: KernelVersion) -> bool {
    k >= v(6, 10)
}

/// A write fault on a non-exclusive page of a large anonymous folio reuses the folio when the
/// faulting mm holds every mapping and reference of it ("mm: Copy-on-Write (COW) reuse support
/// for PTE-mapped THP", 1da190f4d0a6, v6.15); before, such a page was always copied.
pub fn reuses_large_anon_folios(k: KernelVersion) -> bool {
    k >= v(6, 15)
}

/// `thp_get_unmapped_area` places page-cache files too, not only DAX ones ("mm/readahead:
/// Align file mappings for non-DAX", 1854bc6e2420, v5.18).
pub fn file_mappings_thp_aligned(k: KernelVersion) -> bool {
    k >= v(5, 18)
}

/// Which private anonymous mappings `__get_unmapped_area` places at a 2 MiB boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnonThpAlign {
    /// None (before v6.8).
    Never,
    /// Those of at least 2 MiB ("mm: align larger anonymous mappings on THP boundaries",
    /// efa7df3e3bb5, v6.8).
    AtLeastPmd,
    /// Those whose length is a multiple of 2 MiB, asked without an address hint ("mm, mmap:
    /// limit THP alignment of anonymous mappings to PMD-aligned sizes", d4148aeab412, and "mm:
    /// respect mmap hint address when aligning for THP"; v6.12, ids not verified).
    PmdMultiple,
}

/// The anonymous-mapping alignment rule of kernel `k`.
pub fn anon_mapping_thp_align(k: KernelVersion) -> AnonThpAlign {
    if k >= v(6, 12) {
        AnonThpAlign::PmdMultiple
    } else if k >= v(6, 8) {
        AnonThpAlign::AtLeastPmd
    } else {
        AnonThpAlign::Never
    }
}

/// `MAP_SHARED_VALIDATE` and `MAP_SYNC` are known: "mm: introduce MAP_SHARED_VALIDATE, a
/// mechanism to safely define new mmap flags" (1c9725974074, v4.15) and "mm: Define MAP_SYNC
/// and VM_SYNC flags" (b6fb293f2497, v4.15). Before, the type `MAP_SHARED | MAP_PRIVATE` is
/// EINVAL and the `MAP_SYNC` bit an unknown flag, ignored.
pub fn has_map_shared_validate(k: KernelVersion) -> bool {
    k >= v(4, 15)
}

/// `MAP_STACK` makes the mapping `VM_NOHUGEPAGE`: "mm: make MAP_STACK imply VM_NOHUGEPAGE"
/// (c4608d1bf7c6, merged for v6.7; present in the v6.8 source). Before, the flag is ignored.
pub fn map_stack_nohugepage(k: KernelVersion) -> bool {
    k >= v(6, 7)
}

/// `mprotect` breaks COW ahead in a private `VM_LOCKED` VMA made writable: "mm: fix mprotect()
/// behaviour on VM_LOCKED VMAs" (36f881883c57, v4.5).
pub fn mprotect_populates_locked(k: KernelVersion) -> bool {
    k >= v(4, 5)
}

/// `do_mmap` bounds a file mapping by the file's largest size (`file_mmap_ok`): "mmap:
/// introduce sane default mmap limits" (be83bbf80682, merged for v4.17); before, only a wrapping
/// page offset was EOVERFLOW.
pub fn has_file_mmap_ok(k: KernelVersion) -> bool {
    k >= v(4, 17)
}

/// `MAP_FIXED_NOREPLACE` is known: "mm: introduce MAP_FIXED_NOREPLACE" (a4ff8e8620d3, v4.17).
/// Before, the bit is an unknown flag that `MAP_PRIVATE` and `MAP_SHARED` ignore, so the
/// address is only a hint: the mapping goes there if it is free, elsewhere otherwise.
pub fn has_map_fixed_noreplace(k: KernelVersion) -> bool {
    k >= v(4, 17)
}

/// `readahead(2)` is `vfs_fadvise(POSIX_FADV_WILLNEED)` on a regular file: "vfs: implement
/// readahead(2) using POSIX_FADV_WILLNEED" (3d8f7615319b, Amir Goldstein, v4.19), so a file
/// system without a backing device (tmpfs, hugetlbfs) accepts it and does nothing, and
/// anything but a regular file is EINVAL. Before, `do_readahead` called
/// `force_page_cache_readahead`, EINVAL on a mapping without `readpage`/`readpages` (tmpfs,
/// hugetlbfs, a pipe).
pub fn readahead_via_fadvise(k: KernelVersion) -> bool {
    k >= v(4, 19)
}

/// `readahead(2)` accepts a block device again: "vfs: fix readahead(2) on block devices"
/// (Reuben Hawkins, merged for v6.7 through the vfs.misc branch, backported to the stable
/// kernels from 4.19.298; mainline id not verified) added `S_ISBLK` beside the `S_ISREG` test
/// `readahead_via_fadvise` brought; from v4.19 to v6.6 (as released, before the backports) a
/// block device was EINVAL.
pub fn readahead_takes_block_devices(k: KernelVersion) -> bool {
    k >= v(6, 7) || k < v(4, 19)
}

/// `MAP_FIXED_NOREPLACE` fails with EEXIST when any VMA overlaps the range: "mm/mmap.c: don't
/// clobber partially overlapping VMA with MAP_FIXED_NOREPLACE" (7aa867dd8952, committed
/// 2018-10-13 for v4.19-rc8, so v4.19). In v4.17 and v4.18 only a VMA containing the address
/// counted (`vma->vm_start <= addr`), so one starting inside the range was unmapped as
/// `MAP_FIXED` does.
pub fn map_fixed_noreplace_checks_whole_range(k: KernelVersion) -> bool {
    k >= v(4, 19)
}

/// `mremap` growing a VMA in place merges it with the VMA that follows when they are
/// compatible (`mremap_expand_merge`): "mm: add merging after mremap resize" (ca3d76b0aa80,
/// v6.1). Before, the grown VMA stays apart.
pub fn mremap_expand_merges(k: KernelVersion) -> bool {
    k >= v(6, 1)
}

/// Splitting an anonymous THP's PMD (`__split_huge_pmd_locked`) makes its PTEs dirty when the
/// PMD was: "mm/thp: carry over dirty bit when thp splits on pmd" (0ccf7f168e17, v6.0); taken
/// back for small pages in v6.1 ("Partly revert ...", 624a2c94f5b7, for sparc64) and restored
/// in v6.2 ("mm/thp: re-apply mkdirty for small pages after split", e833bc503405). Before v6.0
/// and in v6.1 the PTEs are clean and only the page is marked dirty (`SetPageDirty`), so
/// mprotect's `can_change_pte_writable`, which wants a dirty PTE before v6.2, leaves them
/// read-only (Debian's 6.1.192 answers so: `scenarios/selftests/cow-iouring-fork.toml`).
pub fn split_ptes_dirty(k: KernelVersion) -> bool {
    k == v(6, 0) || k >= v(6, 2)
}

/// A VMA whose flags changed (mprotect, madvise, mlock) merges into a neighbour without an
/// anon_vma while it has one (its chain a single link: not a fork child's): "mm/vma: fix
/// incorrectly disallowed anonymous VMA merges" (879bca0a2c4f, v6.16; `is_mergeable_anon_vma`'s
/// case 1 in mm/vma.c, v6.18). Before, `is_mergeable_anon_vma` asked the neighbour's chain to be
/// a single link, which a neighbour without an anon_vma never has (mm/vma.c v6.12, mm/mmap.c
/// v6.8), so the two stayed apart.
pub fn anon_merge_into_unfaulted(k: KernelVersion) -> bool {
    k >= v(6, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras_set_every_switch() {
        let old = Switches::for_kernel("v5.12".parse().unwrap());
        assert_eq!(old.file_thp, FileThp::Denywrite);
        let seed = |minor| Switches::for_kernel(KernelVersion::new(5, minor)).file_thp;
        assert_eq!([13, 14].map(seed), [FileThp::Denywrite, FileThp::ExecNotWritten]);
        assert_eq!(old.cow_reuse, CowReuse::PageCount);
        assert_eq!(old.hugetlb_sync, HugetlbSync::IMmapRwsem);
        let new = Switches::for_kernel("6.8".parse().unwrap());
        assert_eq!(new.file_thp, FileThp::NotWritten);
        assert_eq!(new.open_write_truncate, OpenWriteTruncate::KeepPrivate);
        assert_eq!(new.cow_reuse, CowReuse::AnonExclusive);
        assert_eq!(new.fadv_noreuse, FadvNoreuse::NoRecency);
        let denies = |k| Switches::for_kernel(KernelVersion::new(6, k)).exec_deny_write;
        assert_eq!(
            [10, 11, 12, 13].map(denies),
            [ExecDenyWrite::Deny, ExecDenyWrite::Allow, ExecDenyWrite::Allow, ExecDenyWrite::Deny]
        );
        let dax = Switches::for_kernel(KernelVersion::new(4, 13));
        assert_eq!(dax.dax_hole, DaxHole::PagecacheZero);
    }

    #[test]
    fn overrides_by_name_with_clear_errors() {
        let mut s = Switches::default();
        s.set("cow_reuse", "mapcount").unwrap();
        assert_eq!(s.cow_reuse, CowReuse::Mapcount);
        assert_eq!(
            s.set("cow_reuse", "magic").unwrap_err(),
            "switch `cow_reuse` has no value `magic`: expected one of mapcount_swapcount, \
             page_count, mapcount, anon_exclusive"
        );
        assert!(s.set("tlb", "x").unwrap_err().starts_with("unknown switch `tlb`"));
        assert!("v7.1".parse::<KernelVersion>().is_err());
        assert!("five".parse::<KernelVersion>().is_err());
        let never = "v5.99".parse::<KernelVersion>().unwrap_err();
        assert!(never.contains("never released") && never.contains("v5.19"), "{never}");
        assert!(
            "v4.20".parse::<KernelVersion>().is_ok() && "v4.21".parse::<KernelVersion>().is_err()
        );
        assert!("v6.19".parse::<KernelVersion>().is_ok());
        s.set("lru", "mglru").unwrap();
        assert!(s.check_implemented(KernelVersion::DEFAULT).is_ok());
        let old = KernelVersion::new(5, 15);
        let mut s_old = Switches::for_kernel(old);
        s_old.set("lru", "mglru").unwrap();
        let err = s_old.check_implemented(old).unwrap_err();
        assert!(err.contains("lru = mglru is not modelled"), "{err}");
        assert!(s.set("exec_text_thp", "fault").unwrap_err().starts_with("unknown switch"));
        s.set("refcount_freeze", "skip").unwrap();
        assert_eq!(s.refcount_freeze, RefcountFreeze::Skip);
    }

    #[test]
    fn hugetlb_sync_overrides_and_hugetlb_eras() {
        let mut s = Switches::default();
        s.set("hugetlb_sync", "revert").unwrap();
        assert_eq!(s.hugetlb_sync, HugetlbSync::Revert);
        assert!(s.set("hugetlb_sync", "magic").unwrap_err().contains("has no value `magic`"));
        let k = |s: &str| s.parse::<KernelVersion>().unwrap();
        assert_eq!(Switches::for_kernel(k("v5.6")).hugetlb_sync, HugetlbSync::Revert);
        assert_eq!(Switches::for_kernel(k("v5.7")).hugetlb_sync, HugetlbSync::IMmapRwsem);
        assert!(huge_pmd_share_i_mmap_write(k("v5.4")) && !huge_pmd_share_i_mmap_write(k("v5.5")));
        assert!(!hugetlbfs_has_fallocate(k("v4.2")) && hugetlbfs_has_fallocate(k("v4.3")));
        assert!(!hugetlb_split_unshares_pmds(k("v6.1")) && hugetlb_split_unshares_pmds(k("v6.2")));
        assert!(!hugetlb_private_vma_lock(k("v6.5")) && hugetlb_private_vma_lock(k("v6.6")));
        assert!(
            !hugetlb_zap_restores_reserve(k("v6.8")) && hugetlb_zap_restores_reserve(k("v6.9"))
        );
        assert!(!hugetlb_lazy_fork_copy(k("v5.19")) && hugetlb_lazy_fork_copy(k("v6.0")));
        assert!(!readahead_via_fadvise(k("v4.18")) && readahead_via_fadvise(k("v4.19")));
        assert!(!has_cachestat(k("v6.4")) && has_cachestat(k("v6.5")));
        let bdev: Vec<bool> =
            ["v4.18", "v4.19", "v6.6", "v6.7"].map(|s| readahead_takes_block_devices(k(s))).into();
        assert_eq!(bdev, [true, false, false, true]);
    }

    #[test]
    fn cow_and_gup_facts_change_at_their_commits() {
        let k = |s: &str| s.parse::<KernelVersion>().unwrap();
        let breaks: Vec<bool> = ["v5.7", "v5.8", "v5.9"].map(|s| gup_breaks_cow(k(s))).into();
        assert_eq!(breaks, [false, true, false]);
        assert!(!mprotect_upgrades_exclusive_anon(k("v5.19")));
        assert!(mprotect_upgrades_exclusive_anon(k("v6.0")));
        assert!(!mprotect_upgrades_clean_exclusive_anon(k("v6.1")));
        assert!(mprotect_upgrades_clean_exclusive_anon(k("v6.2")));
        assert!(!longterm_write_pin_refuses_dirty_tracked_files(k("v6.4")));
        assert!(longterm_write_pin_refuses_dirty_tracked_files(k("v6.5")));
    }

    #[test]
    fn only_anon_exclusive_tracks_anon_exclusive() {
        let tracking: Vec<CowReuse> =
            CowReuse::ALL.iter().copied().filter(|r| r.tracks_anon_exclusive()).collect();
        assert_eq!(tracking, [CowReuse::AnonExclusive]);
    }
}
