//! Files: inodes on a simulated block device or on tmpfs, their `address_space`, and open files
//! (`include/linux/fs.h`, `fs/open.c`, `fs/file_table.c`, `mm/shmem.c`, Linux v6.8).
//!
//! An inode's contents live in its *backing store*: on a disk file system, the blocks of a
//! simulated block device (reads cost device time; holes read as zeros); on tmpfs, nothing — a
//! tmpfs page exists only in the page cache (swap arrives with reclaim). The page cache is the
//! `address_space` index of folios by page offset (the xarray), with `i_mmap` (the VMAs mapping
//! the file), `i_mmap_rwsem`, `invalidate_lock` and `nr_thps`.
//!
//! `i_writecount` follows the kernel: positive while open for write, negative while write is
//! denied (a running executable); `get_write_access` fails with ETXTBSY when denied and
//! `deny_write_access` when open for write.
//!
//! What a file system does differently (how a missing page is filled, whether it can be mapped,
//! how its blocks are freed, ...) is answered by its operations, `fs/ops.rs`.
//!
//! Approximations: no directories or permissions (paths are flat names); one block device per
//! machine; a file system block is one page.
//!
//! The folder `fs/` holds what Linux keeps under its `fs/` rather than `mm/`, where a kernel
//! developer looks for it: the file systems' operations (`ops.rs`), DAX (`dax.rs`, `fs/dax.c`)
//! and the DAX file system on persistent memory (`daxfs.rs`), exec (`exec.rs`, `fs/exec.c`)
//! and its ELF loader (`binfmt_elf.rs`, `fs/binfmt_elf.c`), pipes and vmsplice (`pipe.rs`, `fs/pipe.c`, `fs/splice.c`),
//! direct IO (`direct_io.rs`, `fs/iomap/direct-io.c`), and procfs (`proc.rs` with
//! `proc/clear_refs.rs`, `fs/proc/task_mmu.c`, `fs/proc/meminfo.c`; `proc/mem.rs`, `/proc/PID/mem`), `stat`'s sizes (`stat.rs`, `fs/stat.c`), and sysfs (`sysfs.rs`, which
//! routes a path to the subsystem that owns the file).

pub mod binfmt_elf;
pub mod dax;
pub mod daxfs;
pub mod direct_io;
pub(crate) mod exec;
pub mod hugetlbfs;
pub(crate) mod ops;
pub mod pipe;
pub mod proc;
pub mod stat;
pub mod sysfs;

use crate::errno::Errno;
use crate::kernel::KState;
use crate::sim::content::Content;
use crate::types::fs::{AddressSpace, Backing, File, FsType, Inode, RaState};
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::xarray::XArray;
use engine::Handle;
use std::collections::{BTreeMap, BTreeSet};

impl Backing {
    pub fn is_hole(&self, index: u64) -> bool {
        self.holes.range(..=index).next_back().is_some_and(|(_, &end)| index < end)
    }

    /// The contents of page `index` (`None`: zeros).
    pub fn read(&self, index: u64) -> Option<Content> {
        if let Some(c) = self.blocks.get(&index) {
            return Some(c.clone());
        }
        if self.is_hole(index) {
            return None;
        }
        self.pattern.map(|seed| Content::Pattern(seed ^ index.wrapping_mul(0x2545_f491_4f6c_dd1d)))
    }

    /// Writes a page back, allocating its block.
    pub fn write(&mut self, index: u64, content: Option<Content>) {
        self.fill_hole(index);
        match content {
            Some(c) => {
                self.blocks.insert(index, c);
            }
            None => {
                // An all-zero block: record it explicitly only if the pattern would say otherwise.
                if self.pattern.is_some() {
                    self.blocks.insert(index, Content::Bytes(Box::new([0; 4096])));
                } else {
                    self.blocks.remove(&index);
                }
            }
        }
    }

    /// Zeroes bytes `range` of page `index` if it has a block.
    pub fn zero(&mut self, index: u64, range: std::ops::Range<usize>) {
        let mut slot = self.read(index);
        if slot.is_some() {
            Content::write(&mut slot, range.start, &vec![0; range.len()]);
            self.write(index, slot);
        }
    }

    /// Allocates the block of page `index` if it is in a hole.
    fn fill_hole(&mut self, index: u64) {
        let Some((&start, &end)) = self.holes.range(..=index).next_back() else { return };
        if index >= end {
            return;
        }
        self.holes.remove(&start);
        if start < index {
            self.holes.insert(start, index);
        }
        if index + 1 < end {
            self.holes.insert(index + 1, end);
        }
    }

    /// Drops the blocks of pages `[first, end)` (truncation, punching a hole): the range reads as
    /// a hole from now on.
    pub fn punch(&mut self, first: u64, end: u64) {
        if first >= end {
            return;
        }
        self.blocks.retain(|&i, _| i < first || i >= end);
        let touching: Vec<(u64, u64)> =
            self.holes.range(..=end).filter(|&(_, &e)| e >= first).map(|(&s, &e)| (s, e)).collect();
        let (mut start, mut stop) = (first, end);
        for (s, e) in touching {
            self.holes.remove(&s);
            start = start.min(s);
            stop = stop.max(e);
        }
        self.holes.insert(start, stop);
    }

    /// Allocates the holes among pages `[first, end)` as zeroed blocks (`fallocate`); returns
    /// how many.
    pub fn allocate(&mut self, first: u64, end: u64) -> u64 {
        let mut n = 0;
        for index in first..end {
            if self.is_hole(index) {
                self.write(index, None);
                n += 1;
            }
        }
        n
    }
}

impl Inode {
    pub fn size_pages(&self) -> u64 {
        self.size.div_ceil(4096)
    }

    /// `inode_is_open_for_write`.
    pub fn is_open_for_write(&self) -> bool {
        self.writecount > 0
    }

    /// `get_write_access`.
    pub fn get_write_access(&mut self) -> Result<(), Errno> {
        if self.writecount < 0 {
            return Err(Errno::ETXTBSY);
        }
        self.writecount += 1;
        Ok(())
    }

    pub fn put_write_access(&mut self) {
        assert!(self.writecount > 0, "put_write_access without write access on {}", self.path);
        self.writecount -= 1;
    }

    /// `deny_write_access` (exec).
    pub fn deny_write_access(&mut self) -> Result<(), Errno> {
        if self.writecount > 0 {
            return Err(Errno::ETXTBSY);
        }
        self.writecount -= 1;
        Ok(())
    }

    pub fn allow_write_access(&mut self) {
        assert!(self.writecount < 0, "allow_write_access without deny on {}", self.path);
        self.writecount += 1;
    }
}

/// `fallocate` mode bits (`include/uapi/linux/falloc.h`).
pub mod falloc {
    pub const KEEP_SIZE: u32 = 0x01;
    pub const PUNCH_HOLE: u32 = 0x02;
}

/// `f_mode` bits (`include/linux/fs.h`).
pub mod fmode {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const EXEC: u32 = 1 << 5;
    pub const RANDOM: u32 = 1 << 12;
    pub const NOREUSE: u32 = 1 << 23;
}

impl File {
    pub fn readable(&self) -> bool {
        self.mode & fmode::READ != 0
    }

    pub fn writable(&self) -> bool {
        self.mode & fmode::WRITE != 0
    }
}

impl KState {
    /// Creates an inode with its locks (`new_inode`); `pattern` seeds its contents (zeros if
    /// `None`).
    pub(crate) fn new_inode(
        &mut self,
        handle: &Handle,
        path: String,
        fs: FsType,
        size: u64,
        pattern: Option<u64>,
    ) -> InodeId {
        let mapping = AddressSpace {
            pages: XArray::default(),
            nrpages: 0,
            i_mmap: BTreeSet::new(),
            i_mmap_rwsem: handle.rwsem("i_mmap_rwsem"),
            invalidate_lock: handle.rwsem("invalidate_lock"),
            xa_lock: handle.spin_lock("xa_lock"),
            nr_thps: 0,
            collapsing: 0,
            nr_large: 0,
            swapped: BTreeMap::new(),
            clearing: None,
            collapse_slots: None,
        };
        let backing = Backing { pattern, ..Backing::default() };
        let id = self.inodes.push(Inode {
            path,
            fs,
            size,
            writecount: 0,
            backing,
            mapping,
            i_rwsem: handle.rwsem("i_rwsem"),
            refs: 0,
        });
        self.hugetlbfs_inode_init(id, fs);
        id
    }

    /// Opens an inode (`do_dentry_open`): write access is counted, or refused with ETXTBSY
    /// while the file runs as an executable.
    pub(crate) fn open_file(
        &mut self,
        inode: InodeId,
        mode: u32,
        direct: bool,
        append: bool,
    ) -> Result<FileId, Errno> {
        let i = &mut self.inodes[inode];
        if mode & fmode::WRITE != 0 {
            i.get_write_access()?;
        }
        i.refs += 1;
        let ra = RaState { ra_pages: self.bdi_ra_pages };
        Ok(self.files.push(Some(File { inode, mode, direct, append, pos: 0, refs: 1, ra })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_split_on_write_and_reappear_on_punch() {
        let mut b = Backing { pattern: Some(7), ..Backing::default() };
        b.holes.insert(10, 20);
        assert!(b.is_hole(10) && b.is_hole(19) && !b.is_hole(20));
        assert!(b.read(12).is_none());
        assert!(b.read(30).is_some(), "allocated blocks read the pattern");
        b.write(15, None);
        assert!(!b.is_hole(15) && b.is_hole(14) && b.is_hole(16));
        assert_eq!(b.read(15), Some(Content::Bytes(Box::new([0; 4096]))));
        b.punch(12, 40);
        assert!(b.is_hole(11) && b.is_hole(12) && b.is_hole(39) && !b.is_hole(40));
        assert!(b.blocks.is_empty());
        assert_eq!(b.holes.len(), 1, "touching holes merge");
        assert_eq!(b.allocate(5, 12), 2, "only the holes are allocated");
        assert!(!b.is_hole(10) && !b.is_hole(11) && b.is_hole(12));
        assert_eq!(b.read(11), Some(Content::Bytes(Box::new([0; 4096]))), "allocated as zeros");
    }
}
