//! hugetlb's observables and knobs (`mm/hugetlb.c` `hugetlb_report_meminfo`,
//! `hugetlb_total_pages`, the `hstate_attrs` of `/sys/kernel/mm/hugepages/hugepages-<N>kB/`,
//! `hugetlb_sysctl_handler` for `/proc/sys/vm/nr_hugepages` and `nr_overcommit_hugepages`;
//! Linux v6.1).
//!
//! meminfo prints the default size's pool (2 MiB, `default_hstate`) and `Hugetlb`, the memory
//! of every pool; sysfs gives each size's counters (`nr_hugepages`, `free_hugepages`,
//! `resv_hugepages`, `surplus_hugepages`, `nr_overcommit_hugepages`), the first and the last
//! writable. The `/proc/sys/vm` files are the default size's.

use crate::errno::Errno;
use crate::kernel::KState;
use crate::types::hugetlb::HugeSize;
use std::fmt::Write as _;

/// A hugetlb knob or counter file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attr {
    Nr,
    Free,
    Resv,
    Surplus,
    Overcommit,
}

/// The size and attribute a path names.
fn parse_path(path: &str) -> Option<(HugeSize, Attr)> {
    let attr = |name: &str| match name {
        "nr_hugepages" => Some(Attr::Nr),
        "free_hugepages" => Some(Attr::Free),
        "resv_hugepages" => Some(Attr::Resv),
        "surplus_hugepages" => Some(Attr::Surplus),
        "nr_overcommit_hugepages" => Some(Attr::Overcommit),
        _ => None,
    };
    if let Some(name) = path.strip_prefix("/proc/sys/vm/") {
        return attr(name)
            .filter(|a| matches!(a, Attr::Nr | Attr::Overcommit))
            .map(|a| (HugeSize::Size2M, a));
    }
    let rest = path.strip_prefix("/sys/kernel/mm/hugepages/")?;
    let (dir, name) = rest.split_once('/')?;
    let size = HugeSize::ALL.into_iter().find(|s| s.sysfs_name() == dir)?;
    Some((size, attr(name)?))
}

impl KState {
    /// The value of a hugetlb sysfs or sysctl file, if `path` names one.
    pub fn hugetlb_sysfs_read(&self, path: &str) -> Option<u64> {
        let (size, attr) = parse_path(path)?;
        let h = self.hugetlb.hstate(size);
        Some(match attr {
            Attr::Nr => h.nr,
            Attr::Free => h.free,
            Attr::Resv => h.resv,
            Attr::Surplus => h.surplus,
            Attr::Overcommit => h.overcommit,
        })
    }

    /// Writes a hugetlb sysfs or sysctl file: ENOENT for another path, EACCES for a read-only
    /// counter (mode 0444).
    pub fn hugetlb_sysfs_write(&mut self, path: &str, value: u64) -> Result<(), Errno> {
        let (size, attr) = parse_path(path).ok_or(Errno::ENOENT)?;
        match attr {
            Attr::Nr => self.set_nr_hugepages(size, value),
            Attr::Overcommit => self.set_nr_overcommit_hugepages(size, value),
            Attr::Free | Attr::Resv | Attr::Surplus => return Err(Errno::EACCES),
        }
        Ok(())
    }

    /// The hugetlb lines of `/proc/meminfo` (`hugetlb_report_meminfo`).
    pub(crate) fn hugetlb_meminfo(&self) -> String {
        let h = self.hugetlb.hstate(HugeSize::Size2M);
        let mut out = String::new();
        for (name, v) in [
            ("HugePages_Total", h.nr),
            ("HugePages_Free", h.free),
            ("HugePages_Rsvd", h.resv),
            ("HugePages_Surp", h.surplus),
        ] {
            let _ = writeln!(out, "{:<19}{v:>5}", format!("{name}:"));
        }
        let total_kb: u64 = HugeSize::ALL.iter().map(|&s| self.hugetlb.hstate(s).nr * s.kb()).sum();
        let _ = writeln!(out, "Hugepagesize:   {:>8} kB", HugeSize::Size2M.kb());
        if crate::era::meminfo_has_hugetlb_total(self.thp.kernel) {
            let _ = writeln!(out, "Hugetlb:        {total_kb:>8} kB");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_sizes_and_attributes() {
        assert_eq!(
            parse_path("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages"),
            Some((HugeSize::Size1G, Attr::Free))
        );
        assert_eq!(parse_path("/proc/sys/vm/nr_hugepages"), Some((HugeSize::Size2M, Attr::Nr)));
        assert_eq!(parse_path("/proc/sys/vm/free_hugepages"), None);
        assert_eq!(parse_path("/sys/kernel/mm/hugepages/hugepages-4kB/nr_hugepages"), None);
    }
}
