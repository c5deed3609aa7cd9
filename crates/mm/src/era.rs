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
        /// Only VM_DENYWRITE mappings (the main executable), up to v5.12.
        Denywrite = "denywrite",
        /// Executable mappings of files not open for write, v5.13 to v6.7.
        ExecNotWritten = "exec_not_written",
        /// Any mapping of a regular file not open for write, v6.8 and later.
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
    /// Whether a read fault in an executable file mapping may map a 2 MiB page-cache folio with
    /// one PMD (`huge_memory.rs`). Not a kernel era: the kernels of every era get such folios
    /// only from khugepaged (READ_ONLY_THP_FOR_FS) or from file systems with large folios, so
    /// every era sets `off`; `fault` is the model's stand-in for a collapse already done, to
    /// compare 4 KiB and 2 MiB text.
    ExecTextThp, "exec_text_thp" {
        Off = "off",
        /// The first read fault of an eligible 2 MiB range reads it as one order-9 folio.
        Fault = "fault",
    }
);

switch_enum!(
    /// hugetlb PMD-sharing synchronisation (seed `001`, `mm/hugetlb.c`).
    HugetlbSync, "hugetlb_sync" {
        /// `i_mmap_rwsem` held for read across the whole fault: v5.7 to v6.0.
        IMmapRwsem = "i_mmap_rwsem",
        /// The seed's patches 1-2 alone: exposes the fault/truncate race.
        Revert = "revert",
        /// The per-VMA hugetlb lock: v6.1 and later.
        VmaLock = "vma_lock",
    }
);

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

/// Every behaviour switch of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switches {
    pub file_thp: FileThp,
    pub open_write_truncate: OpenWriteTruncate,
    pub exec_text_thp: ExecTextThp,
    pub hugetlb_sync: HugetlbSync,
    pub dax_hole: DaxHole,
    pub lru: Lru,
    pub fadv_noreuse: FadvNoreuse,
    pub cow_reuse: CowReuse,
    pub refcount_freeze: RefcountFreeze,
}

const fn v(major: u8, minor: u8) -> KernelVersion {
    KernelVersion::new(major, minor)
}

impl Switches {
    /// The switches of kernel `k`.
    pub fn for_kernel(k: KernelVersion) -> Switches {
        Switches {
            file_thp: if k <= v(5, 12) {
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
            exec_text_thp: ExecTextThp::Off,
            // Before v5.7 the fault path held only the fault mutex; the model starts at v5.7.
            hugetlb_sync: if k <= v(6, 0) { HugetlbSync::IMmapRwsem } else { HugetlbSync::VmaLock },
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
            refcount_freeze: RefcountFreeze::Freeze,
        }
    }

    /// The switch names, in a stable order.
    pub const NAMES: [&'static str; 9] = [
        FileThp::KEY,
        OpenWriteTruncate::KEY,
        ExecTextThp::KEY,
        HugetlbSync::KEY,
        DaxHole::KEY,
        Lru::KEY,
        FadvNoreuse::KEY,
        CowReuse::KEY,
        RefcountFreeze::KEY,
    ];

    /// Overrides switch `key` with `value` (both by their kernel-facing names).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            FileThp::KEY => self.file_thp = FileThp::parse(value)?,
            OpenWriteTruncate::KEY => self.open_write_truncate = OpenWriteTruncate::parse(value)?,
            ExecTextThp::KEY => self.exec_text_thp = ExecTextThp::parse(value)?,
            HugetlbSync::KEY => self.hugetlb_sync = HugetlbSync::parse(value)?,
            DaxHole::KEY => self.dax_hole = DaxHole::parse(value)?,
            Lru::KEY => self.lru = Lru::parse(value)?,
            FadvNoreuse::KEY => self.fadv_noreuse = FadvNoreuse::parse(value)?,
            CowReuse::KEY => self.cow_reuse = CowReuse::parse(value)?,
            RefcountFreeze::KEY => self.refcount_freeze = RefcountFreeze::parse(value)?,
            _ => {
                return Err(format!(
                    "unknown switch `{key}`: expected one of {}",
                    Switches::NAMES.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// `(name, value)` of every switch.
    pub fn iter(&self) -> [(&'static str, &'static str); 9] {
        [
            (FileThp::KEY, self.file_thp.name()),
            (OpenWriteTruncate::KEY, self.open_write_truncate.name()),
            (ExecTextThp::KEY, self.exec_text_thp.name()),
            (HugetlbSync::KEY, self.hugetlb_sync.name()),
            (DaxHole::KEY, self.dax_hole.name()),
            (Lru::KEY, self.lru.name()),
            (FadvNoreuse::KEY, self.fadv_noreuse.name()),
            (CowReuse::KEY, self.cow_reuse.name()),
            (RefcountFreeze::KEY, self.refcount_freeze.name()),
        ]
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

impl Default for Switches {
    fn default() -> Self {
        Switches::for_kernel(KernelVersion::DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras_set_every_switch() {
        let old = Switches::for_kernel("v5.12".parse().unwrap());
        assert_eq!(old.file_thp, FileThp::Denywrite);
        assert_eq!(old.cow_reuse, CowReuse::PageCount);
        assert_eq!(old.hugetlb_sync, HugetlbSync::IMmapRwsem);
        let new = Switches::for_kernel("6.8".parse().unwrap());
        assert_eq!(new.file_thp, FileThp::NotWritten);
        assert_eq!(new.open_write_truncate, OpenWriteTruncate::KeepPrivate);
        assert_eq!(new.cow_reuse, CowReuse::AnonExclusive);
        assert_eq!(new.fadv_noreuse, FadvNoreuse::NoRecency);
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
        s.set("lru", "mglru").unwrap();
        assert!(s.check_implemented(KernelVersion::DEFAULT).is_ok());
        let old = KernelVersion::new(5, 15);
        assert!(s.check_implemented(old).unwrap_err().contains("lru = mglru is not modelled"));
        s.set("exec_text_thp", "fault").unwrap();
        assert_eq!(s.exec_text_thp, ExecTextThp::Fault);
        s.set("refcount_freeze", "skip").unwrap();
        assert_eq!(s.refcount_freeze, RefcountFreeze::Skip);
    }
}
