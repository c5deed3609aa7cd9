//! `stat(2)` and `fstat(2)`'s sizes (`fs/stat.c` `vfs_getattr`, `generic_fillattr`;
//! `fs/ext4/inode.c` `ext4_getattr`; `fs/xfs/xfs_iops.c` `xfs_vn_getattr`; `mm/shmem.c`;
//! `fs/hugetlbfs/inode.c`; Linux v6.8, the same in every era mmsim models).
//!
//! - `st_size` is `i_size`.
//! - `st_blocks` counts 512-byte sectors of storage the file holds (`i_blocks`): on ext4 and XFS
//!   the allocated blocks inside the file plus the blocks reserved for dirty pages over holes
//!   (delayed allocation: `i_reserved_data_blocks`, `i_delayed_blks`), so a write shows in
//!   `st_blocks` before writeback; on tmpfs the pages the file holds (`shmem_recalc_inode`); on a
//!   DAX file its blocks on the device, written or unwritten; on hugetlbfs a huge page's worth
//!   per page in the file (`hugetlb_add_to_page_cache`); a pipe none.
//! - `st_blksize` is the file system's block size: a page, or the huge page size on hugetlbfs
//!   (`i_blkbits` is the huge page shift).
//!
//! Approximations: a file system block is a page, with no metadata blocks (an ext4 file's
//! extent-tree blocks are not counted); disk blocks past `i_size` (`fallocate` with
//! `FALLOC_FL_KEEP_SIZE` beyond the end) are not counted.

use crate::folio::pg;

use crate::kernel::KState;
use crate::types::ids::InodeId;

/// Sectors (`st_blocks` units) in a 4 KiB page.
const SECTORS_PER_PAGE: u64 = 8;

/// The sizes `stat` reports (`struct kstat`'s `size`, `blocks`, `blksize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kstat {
    pub size: u64,
    pub blocks: u64,
    pub blksize: u64,
}

/// The `struct stat` fields mmsim keeps, by their names.
pub const STAT_FIELDS: [&str; 3] = ["st_size", "st_blocks", "st_blksize"];

impl Kstat {
    /// The field named `name` (one of [`STAT_FIELDS`]).
    pub fn field(&self, name: &str) -> Option<u64> {
        match name {
            "st_size" => Some(self.size),
            "st_blocks" => Some(self.blocks),
            "st_blksize" => Some(self.blksize),
            _ => None,
        }
    }
}

impl KState {
    /// `vfs_getattr` of `inode`.
    pub fn vfs_getattr(&self, inode: InodeId) -> Kstat {
        let fs = self.inodes[inode].fs;
        Kstat {
            // A block device node's own size is 0; its capacity is the device inode's.
            size: if fs.is_blkdev() { 0 } else { self.inodes[inode].size },
            blocks: fs.i_blocks(self, inode) * SECTORS_PER_PAGE,
            blksize: fs.hugetlb_size().map_or(4096, |s| s.bytes()),
        }
    }

    /// Pages of a disk file's storage: the blocks allocated inside the file, and the dirty
    /// cached pages over its holes, whose blocks writeback will allocate.
    pub(crate) fn disk_pages_held(&self, inode: InodeId) -> u64 {
        let i = &self.inodes[inode];
        let end = i.size_pages();
        let holes: u64 = i
            .backing
            .holes
            .range(..end)
            .map(|(&start, &stop)| stop.min(end).saturating_sub(start))
            .sum();
        let delayed: u64 = i
            .mapping
            .pages
            .iter()
            .filter(|&(_, &head)| self.folios.test(head, pg::DIRTY))
            .flat_map(|(&index, &head)| index..index + self.folios.order(head).pages())
            .filter(|&index| i.backing.is_hole(index))
            .count() as u64;
        end - holes + delayed
    }
}
