//! hugetlbfs subpools: a mount's `size=` and `min_size=` (`mm/hugetlb.c` `hugepage_new_subpool`,
//! `hugepage_subpool_get_pages`, `hugepage_subpool_put_pages`, `hugetlb_folio_subpool`;
//! `fs/hugetlbfs/inode.c` `hugetlbfs_fill_super`, `hugetlbfs_size_to_hpages`; Linux v6.1, the
//! same since `min_size=` came in v4.1, "hugetlbfs: accept subpool min_size mount option and
//! setup accordingly", id not verified).
//!
//! A mount with `size=` caps the huge pages its files may hold or have reserved (`max_hpages`,
//! against `used_hpages`); `min_size=` reserves that many pages in the global pool when the file
//! system is mounted (`hugetlb_acct_memory`, so `HugePages_Rsvd` shows them; the mount fails with
//! ENOMEM when the pool cannot promise them) and keeps them for its files (`rsv_hpages`): a
//! request that fits in what the subpool still holds takes nothing more from the global pool. Both
//! options are rounded down to whole huge pages.
//!
//! Every reservation and every allocation without one goes through the subpool first
//! (`hugepage_subpool_get_pages`): `mmap` (`hugetlb_reserve_pages`: ENOMEM past `size=`), a
//! fault or `fallocate` at an index with no reservation (`alloc_hugetlb_folio`: SIGBUS, the
//! kernel's `-ENOSPC`); what is given back goes through it too (`hugepage_subpool_put_pages`):
//! truncation and hole punching of reserved indexes (`hugetlb_unreserve_pages`), a private
//! owner's unused reservations at close, and a page freed without its reservation restored
//! (`free_huge_folio`: when the subpool is below its minimum the page's reservation is kept, as
//! `HugePages_Rsvd`). As in the kernel, `used_hpages` is counted only on a mount with `size=`,
//! so on a mount with `min_size=` alone every page given back refills the minimum.
//!
//! In the model the subpool belongs to the 2 MiB hugetlbfs mount the scenario's files are
//! created on (`[machine.tunables]` `hugetlbfs_size`, `hugetlbfs_min_size`, bytes); the internal
//! mounts of `MAP_HUGETLB`, `memfd_create` and SysV segments have none, as in the kernel. The
//! mount lives as long as the machine (no unmount).

use crate::errno::Errno;
use crate::kernel::KState;
use crate::types::hugetlb::HugeSize;
use crate::types::hugetlb::Subpool;
use crate::types::ids::InodeId;

impl Subpool {
    /// `hugepage_subpool_get_pages`: how many of `delta` pages the global pool must provide, or
    /// ENOMEM past `size=`.
    fn get_pages(&mut self, delta: u64) -> Result<u64, Errno> {
        if let Some(max) = self.max {
            if self.used + delta > max {
                return Err(Errno::ENOMEM);
            }
            self.used += delta;
        }
        if self.min.is_none() || self.rsv == 0 {
            return Ok(delta);
        }
        let from_rsv = delta.min(self.rsv);
        self.rsv -= from_rsv;
        Ok(delta - from_rsv)
    }

    /// `hugepage_subpool_put_pages`: how many of `delta` pages the global pool gets back (those
    /// that do not refill the minimum).
    fn put_pages(&mut self, delta: u64) -> u64 {
        if self.max.is_some() {
            self.used = self.used.checked_sub(delta).expect("subpool used_hpages underflow");
        }
        let Some(min) = self.min.filter(|&m| self.used < m) else { return delta };
        let back = (self.rsv + delta).saturating_sub(min);
        self.rsv = (self.rsv + delta).min(min);
        back
    }
}

impl KState {
    /// Mounts the scenario files' hugetlbfs with `size=` and `min_size=` (`hugepage_new_subpool`;
    /// bytes, rounded down to huge pages). ENOMEM when the pool cannot promise the minimum.
    pub(crate) fn hugetlbfs_mount(
        &mut self,
        size: HugeSize,
        max_bytes: Option<u64>,
        min_bytes: Option<u64>,
    ) -> Result<(), Errno> {
        if max_bytes.is_none() && min_bytes.is_none() {
            return Ok(());
        }
        let to_pages = |b: u64| b >> size.shift();
        let (max, min) = (max_bytes.map(to_pages), min_bytes.map(to_pages));
        let rsv = min.unwrap_or(0);
        self.hugetlb_acct_memory(size, rsv as i64)?;
        self.hugetlb.subpool = Some(Subpool { size, max, min, used: 0, rsv });
        Ok(())
    }

    /// Whether `inode` is on the mount that has the subpool.
    pub(crate) fn hinode_has_subpool(&self, inode: InodeId) -> bool {
        self.hugetlb.inodes.get(&inode).is_some_and(|i| i.spool)
    }

    /// `hugepage_subpool_get_pages` for `inode`'s mount (all of `delta` without a subpool).
    pub(crate) fn subpool_get(&mut self, inode: InodeId, delta: u64) -> Result<u64, Errno> {
        match self.hugetlb.subpool.as_mut().filter(|_| self.hugetlb.inodes[&inode].spool) {
            Some(s) => s.get_pages(delta),
            None => Ok(delta),
        }
    }

    /// `hugepage_subpool_put_pages` for `inode`'s mount (all of `delta` without a subpool).
    pub(crate) fn subpool_put(&mut self, inode: InodeId, delta: u64) -> u64 {
        match self.hugetlb.subpool.as_mut().filter(|_| self.hugetlb.inodes[&inode].spool) {
            Some(s) => s.put_pages(delta),
            None => delta,
        }
    }

    /// `free_huge_folio`'s subpool step for a page freed without its reservation restored:
    /// whether the page's reservation must be kept because the subpool fell below its minimum.
    pub(crate) fn subpool_put_freed(&mut self, page_has_subpool: bool) -> bool {
        match self.hugetlb.subpool.as_mut().filter(|_| page_has_subpool) {
            Some(s) => s.put_pages(1) == 0,
            None => false,
        }
    }
}
