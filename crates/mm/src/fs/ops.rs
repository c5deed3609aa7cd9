//! The operations of a file system (`include/linux/fs.h` `struct file_operations`,
//! `struct address_space_operations`, `struct super_operations`; `fs/ext4` (`ext4_file_operations`,
//! `ext4_aops`, `ext4_dax_aops`, `ext4_file_mmap`), `mm/shmem.c` (`shmem_file_operations`,
//! `shmem_aops`, `shmem_get_folio`), `fs/dax.c`, `fs/pipe.c` (`pipefifo_fops`); Linux v6.8).
//!
//! The kernel gives an inode its file system's operation tables when it makes it
//! (`inode->i_fop`, `inode->i_mapping->a_ops`, `sb->s_op`), and the VFS and mm call through them,
//! or test the inode's mode (`S_ISFIFO`, `IS_DAX`), rather than ask which file system it is.
//! mmsim's file systems are the closed enum [`FsType`] (`fs.rs`). Every question whose answer
//! differs by file system is one method here with one exhaustive `match`, named by what it
//! decides, and no code elsewhere compares `FsType` values (`crates/mm/tests/fs_ops.rs` holds
//! `crates/mm/src` to that). A new file system is one variant in `fs.rs` and its arms here; the
//! compiler lists every question it must answer.
//!
//! - The page cache: whether a file has one and how a missing page is filled ([`PageFill`]:
//!   `->read_folio` from the block device, or `shmem_get_folio` allocating a zeroed page);
//!   whether its pages are swap-backed (`shmem_mapping`: `PG_swapbacked`, `NR_SHMEM`); whether
//!   it writes back (`mapping_can_writeback`: writeback, and write-notify of shared writable
//!   mappings); whether its PMD-sized folios are the read-only text THPs
//!   (`CONFIG_READ_ONLY_THP_FOR_FS`).
//! - The file: `read_iter` and `write_iter` (a FIFO's buffers, hugetlbfs's huge pages, a DAX
//!   file's device through `dax_iomap_rw`, the page cache); whether O_DIRECT reads by DMA; a
//!   FIFO (`S_ISFIFO`: ESPIPE for seeking calls); a DAX file (`IS_DAX`: truncation deletes DAX
//!   entries); whether `posix_fadvise` acts (`generic_fadvise`).
//! - Mapping: whether `->mmap` exists (ENODEV), the [`VmOps`] it gives a mapping, whether it
//!   asks for PMD-aligned huge mappings (`VM_HUGEPAGE`, `thp_get_unmapped_area`), the device
//!   number `/proc/PID/maps` prints.
//! - hugetlbfs: the huge page size (`hstate_file`), which sends mappings, truncation,
//!   `fallocate` and `read` to `hugetlb.rs` and `fs/hugetlbfs.rs`.
//! - Blocks: how many the file holds (`st_blocks`), how truncation frees them, how a partial block is zeroed, how `fallocate`
//!   allocates them (`->setattr`, `->fallocate`).
//! - Block devices (`S_ISBLK`, `block/fops.c` `def_blk_fops`/`def_blk_aops`; v6.8): a device
//!   node whose page cache is the block device inode's, read and written back as a disk file's
//!   is, mapped with `generic_file_mmap`. It differs where the VFS tests the mode: `stat` shows
//!   the node's size and blocks (0), truncation is EINVAL and `O_TRUNC` is ignored (`may_open`),
//!   a write at or past the device's end is ENOSPC and one across it is cut short
//!   (`blkdev_write_iter`), `fallocate` only punches or zeroes with `FALLOC_FL_KEEP_SIZE` (v4.9),
//!   its pages count in meminfo's `Buffers` (`nr_blockdev_pages`), not `Cached`, and it has no
//!   read-only text THPs (`file_thp_enabled` wants a regular file). Approximations: no large
//!   folios (the block layer's large-folio support for devices with large blocks is left out)
//!   and no buffer heads.

use crate::errno::{Errno, SysError};
use crate::filemap::{file_read, file_write, shmem_get_page};
use crate::fs::dax::{dax_read, dax_write};
use crate::kernel::{Cx, KState};
use crate::sim::cost::Cost;
use crate::types::fs::FsType;
use crate::types::ids::InodeId;
use crate::types::mm_types::VmOps;

/// How a missing page of a file's page cache is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageFill {
    /// `->read_folio` and readahead: read from the block device (`ext4_aops`).
    ReadFolio,
    /// `shmem_get_folio`: a zeroed page, there being nothing to read.
    AllocZeroed,
}

/// What `readahead(2)` does with a file it may read (`ksys_readahead`, `do_readahead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readahead {
    /// `vfs_fadvise(POSIX_FADV_WILLNEED)` (v4.19+).
    Fadvise,
    /// `force_page_cache_readahead` of the range (before v4.19).
    ReadPages,
    /// Nothing: a DAX file (approximated so in every era).
    Nothing,
}

impl FsType {
    /// `readahead(2)`'s answer for this file system under kernel `k`: from v4.19 EINVAL for
    /// anything but a regular file (a block device too until v6.7), otherwise `fadvise`;
    /// before, EINVAL for a mapping without `readpage` (tmpfs, hugetlbfs, pipes, anon inodes).
    pub(crate) fn readahead(self, k: crate::era::KernelVersion) -> Result<Readahead, Errno> {
        let via_fadvise = crate::era::readahead_via_fadvise(k);
        match self {
            FsType::Pipe | FsType::AnonInode => Err(Errno::EINVAL),
            FsType::Bdev if !crate::era::readahead_takes_block_devices(k) => Err(Errno::EINVAL),
            _ if via_fadvise => Ok(Readahead::Fadvise),
            FsType::Dax => Ok(Readahead::Nothing),
            FsType::Disk | FsType::Xfs | FsType::Bdev => Ok(Readahead::ReadPages),
            FsType::Tmpfs(_) | FsType::Hugetlbfs(_) => Err(Errno::EINVAL),
        }
    }

    /// `file_system_type.name`.
    pub fn name(self) -> &'static str {
        match self {
            FsType::Disk => "ext4",
            FsType::Bdev => "bdev",
            FsType::Xfs => "xfs",
            FsType::Tmpfs(_) => "tmpfs",
            FsType::Pipe => "pipefs",
            FsType::AnonInode => "anon_inodefs",
            FsType::Dax => "ext4-dax",
            FsType::Hugetlbfs(_) => "hugetlbfs",
        }
    }

    /// Whether the file has a page cache and how a missing page of it is filled; `None` for
    /// a pipe (its data lives in the pipe's buffers) and a DAX file (`ext4_dax_aops`: its reads,
    /// writes and mappings reach the device's memory).
    pub(crate) fn page_fill(self) -> Option<PageFill> {
        match self {
            FsType::Disk | FsType::Xfs | FsType::Bdev => Some(PageFill::ReadFolio),
            FsType::Tmpfs(_) => Some(PageFill::AllocZeroed),
            FsType::Pipe | FsType::AnonInode | FsType::Dax | FsType::Hugetlbfs(_) => None,
        }
    }

    /// `is_file_hugepages` and `hstate_file`: the huge page size of a hugetlbfs file, whose
    /// mappings are hugetlb VMAs, whose truncation, `fallocate` and `read` are hugetlbfs's
    /// (`fs/hugetlbfs.rs`), and whose `write` is EINVAL.
    pub fn hugetlb_size(self) -> Option<crate::types::hugetlb::HugeSize> {
        match self {
            FsType::Hugetlbfs(size) => Some(size),
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Dax => None,
            FsType::Bdev => None,
        }
    }

    /// `S_ISFIFO`: reads and writes go to the pipe's buffers (`pipe_read`, `pipe_write`), the
    /// last close releases the pipe (`pipe_release`), `fallocate` and `posix_fadvise` are ESPIPE,
    /// and only such a file takes `vmsplice`.
    pub(crate) fn is_fifo(self) -> bool {
        match self {
            FsType::Pipe => true,
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::AnonInode
            | FsType::Dax
            | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => false,
        }
    }

    /// `IS_DAX`: reads and writes, `O_DIRECT` or not, go to the device (`ext4_dax_read_iter`,
    /// `dax_iomap_rw`), truncation deletes the file's DAX entries, and the file's blocks live
    /// on the persistent-memory device.
    pub(crate) fn is_dax(self) -> bool {
        match self {
            FsType::Dax => true,
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => false,
        }
    }

    /// `S_ISBLK`: a block device node (the module note lists what the VFS does differently).
    pub(crate) fn is_blkdev(self) -> bool {
        match self {
            FsType::Bdev => true,
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Dax
            | FsType::Hugetlbfs(_) => false,
        }
    }

    /// Whether the file can be mapped (`file->f_op->mmap`; `do_mmap` fails with ENODEV).
    pub(crate) fn has_mmap(self) -> bool {
        match self {
            FsType::Disk | FsType::Xfs | FsType::Tmpfs(_) | FsType::Dax | FsType::Hugetlbfs(_) => {
                true
            }
            FsType::Pipe | FsType::AnonInode => false,
            FsType::Bdev => true,
        }
    }

    /// The operations `->mmap` gives a mapping of the file (`ext4_file_mmap` choosing
    /// `ext4_dax_vm_ops` or `ext4_file_vm_ops`, `shmem_mmap`).
    pub(crate) fn vm_ops(self) -> VmOps {
        match self {
            FsType::Disk | FsType::Xfs | FsType::Tmpfs(_) => VmOps::PageCache,
            FsType::Dax => VmOps::Dax,
            FsType::Hugetlbfs(_) => VmOps::Hugetlb,
            FsType::Pipe | FsType::AnonInode => {
                unreachable!("pipes and userfaultfds cannot be mapped (ENODEV)")
            }
            FsType::Bdev => VmOps::PageCache,
        }
    }

    /// Whether `->mmap_supported_flags` has `MAP_SYNC`, the one flag beyond the legacy ones that
    /// `MAP_SHARED_VALIDATE` accepts for a file (ext4 and XFS).
    pub(crate) fn supports_map_sync(self) -> bool {
        match self {
            FsType::Disk | FsType::Xfs | FsType::Dax => true,
            FsType::Tmpfs(_) | FsType::Hugetlbfs(_) | FsType::Bdev => false,
            FsType::Pipe | FsType::AnonInode => false,
        }
    }

    /// `->mmap`'s refusal of a `VM_SYNC` mapping (`daxdev_mapping_supported` in
    /// `ext4_file_mmap` and `xfs_file_mmap`): EOPNOTSUPP unless the file is DAX on a synchronous
    /// device (the machine's pmem is). tmpfs, hugetlbfs and block devices do not look.
    pub(crate) fn mmap_check_sync(self, vm: u64) -> Result<(), Errno> {
        let refuses = matches!(self, FsType::Disk | FsType::Xfs);
        if refuses && vm & crate::vma::VmFlags::SYNC != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(())
    }

    /// The VMA flags `->mmap` adds on kernel `k`: a DAX file's mapping is `VM_HUGEPAGE`, so
    /// `->get_unmapped_area` places it at an address whose PMD colour matches the offset's
    /// (`thp_get_unmapped_area`) and its faults can map 2 MiB at once, and `VM_MIXEDMAP` up to
    /// v4.18 (`ext4_file_mmap`, `xfs_file_mmap`; `era::dax_mmap_sets_mixedmap`).
    pub(crate) fn mmap_vm_flags(self, k: crate::era::KernelVersion) -> u64 {
        use crate::vma::VmFlags;
        match self {
            FsType::Dax if crate::era::dax_mmap_sets_mixedmap(k) => {
                VmFlags::HUGEPAGE | VmFlags::MIXEDMAP
            }
            FsType::Dax => VmFlags::HUGEPAGE,
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Hugetlbfs(_) => 0,
            FsType::Bdev => 0,
        }
    }

    /// Whether the file system's `->get_unmapped_area` is `thp_get_unmapped_area`, which places a
    /// mapping that spans a whole 2 MiB of the file at a 2 MiB boundary: DAX files in every
    /// era, ext4 and XFS files of the page cache from v5.18 (1854bc6e2420 dropped its DAX-only
    /// test). tmpfs places by its own huge setting (`shmem_get_unmapped_area`, not modelled),
    /// hugetlbfs at its page size.
    pub(crate) fn thp_unmapped_area(self, k: crate::era::KernelVersion) -> bool {
        match self {
            FsType::Dax => true,
            FsType::Disk | FsType::Xfs => crate::era::file_mappings_thp_aligned(k),
            FsType::Tmpfs(_) | FsType::Pipe | FsType::AnonInode | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => false,
        }
    }

    /// `mapping_can_writeback`: dirty pages are written back (`filemap_write_and_wait`), and a
    /// page-cache mapping has a `page_mkwrite`, so shared writable mappings are write-notified
    /// (`ext4_file_vm_ops`; tmpfs, on `noop_backing_dev_info`, has neither: `shmem_vm_ops`).
    pub(crate) fn can_writeback(self) -> bool {
        match self {
            FsType::Disk | FsType::Xfs | FsType::Dax => true,
            FsType::Tmpfs(_) | FsType::Pipe | FsType::AnonInode | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => true,
        }
    }

    /// `shmem_mapping`: the file's pages are swap-backed (`PG_swapbacked`, counted in
    /// `NR_SHMEM`) and the multi-gen LRU's page-table walk treats its mappings as anonymous.
    pub(crate) fn swap_backed(self) -> bool {
        match self {
            FsType::Tmpfs(_) => true,
            FsType::Disk
            | FsType::Xfs
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Dax
            | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => false,
        }
    }

    /// Whether PMD-sized folios of the file are the read-only THPs of executable text
    /// (`CONFIG_READ_ONLY_THP_FOR_FS`, `file_thp_enabled`): they may be created for its text
    /// mappings and count in `NR_FILE_THPS`, and in `nr_thps` unless the file system has
    /// large folios ([`FsType::large_folios`]). tmpfs has its own THPs
    /// ([`FsType::tmpfs_mount`], `shmem.rs`) and DAX maps the device's PMDs.
    pub(crate) fn read_only_thps(self) -> bool {
        match self {
            FsType::Disk | FsType::Xfs => true,
            FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Dax
            | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => false,
        }
    }

    /// The tmpfs mount of a shmem file (`shmem_file`, `SHMEM_SB`), whose `huge=` option (or
    /// `shmem_enabled`, for `shm_mnt`) decides its THPs; `None` for other file systems.
    pub fn tmpfs_mount(self) -> Option<crate::types::fs::TmpfsMount> {
        match self {
            FsType::Tmpfs(mount) => Some(mount),
            FsType::Disk
            | FsType::Xfs
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Dax
            | FsType::Hugetlbfs(_) => None,
            FsType::Bdev => None,
        }
    }

    /// Whether the page cache may hold PMD-sized folios that a fault maps with one PMD: the
    /// read-only THPs of disk files and shmem's THPs.
    pub(crate) fn pmd_mappable_thps(self) -> bool {
        self.read_only_thps() || self.tmpfs_mount().is_some()
    }

    /// `mapping_large_folio_support`: the file system puts large folios in its page cache
    /// itself, so `filemap_nr_thps_inc` counts nothing for a collapsed THP, the mapping's
    /// `nr_thps` stays 0 and opening the file for write leaves its THPs cached
    /// (`do_dentry_open` truncates only when `nr_thps` is set); collapse still works. XFS from
    /// v5.18 ("xfs: Support large folios", 6795801366da), ext4 from v6.16 ("ext4: enable large
    /// folio for regular file", Zhang Yi; the version is the issue's, not re-verified against
    /// the release tag, and ext4's exceptions (data=journal, verity, encryption) are left out).
    /// Approximation: mmsim's readahead and faults still add base pages only, so the large
    /// folios these file systems make on their own do not appear.
    pub(crate) fn large_folios(self, k: crate::era::KernelVersion) -> bool {
        match self {
            FsType::Disk => crate::era::ext4_large_folios(k),
            FsType::Xfs => crate::era::xfs_large_folios(k),
            FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Dax
            | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => false,
        }
    }

    /// Whether `posix_fadvise` acts (`generic_fadvise`): ESPIPE on a pipe; `Ok(false)` when
    /// every valid advice is accepted and ignored: tmpfs and hugetlbfs (on
    /// `noop_backing_dev_info`) and a DAX inode (`IS_DAX`, tested there since before v4.16, when
    /// it was still `fadvise64_64`), so `POSIX_FADV_NOREUSE` sets no `FMODE_NOREUSE` on DAX.
    pub(crate) fn fadvise_acts(self) -> Result<bool, Errno> {
        match self {
            FsType::Disk | FsType::Xfs => Ok(true),
            FsType::Tmpfs(_) | FsType::Hugetlbfs(_) | FsType::Dax => Ok(false),
            FsType::AnonInode => Ok(false),
            FsType::Pipe => Err(Errno::ESPIPE),
            FsType::Bdev => Ok(true),
        }
    }

    /// Whether an O_DIRECT read goes to [`crate::fs::direct_io`] (DMA into the user's pages; a
    /// DAX file copies from the device there); a FIFO or hugetlbfs file reads as it would
    /// without the flag.
    pub(crate) fn has_direct_io(self) -> bool {
        match self {
            FsType::Disk | FsType::Xfs | FsType::Tmpfs(_) | FsType::Dax => true,
            FsType::Pipe | FsType::AnonInode | FsType::Hugetlbfs(_) => false,
            FsType::Bdev => true,
        }
    }

    /// `->read_iter` of `len` bytes at `pos`: a FIFO returns what its buffers hold
    /// (`pipe_read`), hugetlbfs copies from its huge pages (`hugetlbfs_read_iter`), a DAX file
    /// from the device (`dax_iomap_rw`), the others through the page cache (`filemap_read`,
    /// with `ra_pages` of readahead). Returns the count and the bytes, `None` when `want_data`
    /// is false and the file system need not produce them.
    pub(crate) async fn read_iter(
        self,
        cx: &Cx,
        inode: InodeId,
        (pos, len): (u64, u64),
        ra_pages: u64,
        want_data: bool,
    ) -> Result<(u64, Option<Vec<u8>>), SysError> {
        match self {
            FsType::Pipe => {
                let data = cx.st().pipe_read(inode, len)?;
                Ok((data.len() as u64, Some(data)))
            }
            FsType::AnonInode => {
                let msg = crate::userfaultfd::userfaultfd_read(cx, inode, len).await?;
                Ok((msg.len() as u64, Some(msg)))
            }
            FsType::Hugetlbfs(_) => {
                let data = cx.st().hugetlbfs_read(inode, pos, len);
                cx.charge_n(Cost::UserCopy4k, (data.len() as u64).div_ceil(4096)).await;
                Ok((data.len() as u64, Some(data)))
            }
            FsType::Dax => {
                Ok(dax_read(cx, inode, pos, len, want_data).await.map_err(|e| e.signal())?)
            }
            FsType::Disk | FsType::Xfs | FsType::Tmpfs(_) | FsType::Bdev => {
                Ok(file_read(cx, inode, pos, len, ra_pages, want_data)
                    .await
                    .map_err(|e| e.signal())?)
            }
        }
    }

    /// `->write_iter` of `data` at `pos`: into a FIFO's buffers (`pipe_write`), EINVAL on
    /// hugetlbfs (it has no `write_iter`), to the device for DAX (`dax_iomap_rw`), through the
    /// page cache otherwise (`generic_perform_write`), a block device's cut at its end
    /// (`blkdev_write_iter`: ENOSPC from there). Returns the count written.
    pub(crate) async fn write_iter(
        self,
        cx: &Cx,
        inode: InodeId,
        pos: u64,
        data: &[u8],
    ) -> Result<u64, Errno> {
        let data = match self {
            FsType::Pipe => return cx.st().pipe_write(inode, data),
            FsType::AnonInode => unreachable!("a userfaultfd is opened read-only: EBADF first"),
            FsType::Hugetlbfs(_) => return Err(Errno::EINVAL),
            FsType::Bdev => {
                let size = cx.st().inodes[inode].size;
                let room = size.checked_sub(pos).filter(|&r| r > 0).ok_or(Errno::ENOSPC)?;
                &data[..data.len().min(usize::try_from(room).unwrap_or(usize::MAX))]
            }
            FsType::Disk | FsType::Xfs | FsType::Tmpfs(_) | FsType::Dax => data,
        };
        match self {
            FsType::Dax => dax_write(cx, inode, pos, data).await,
            FsType::Disk | FsType::Xfs | FsType::Tmpfs(_) | FsType::Bdev => {
                file_write(cx, inode, pos, data).await
            }
            FsType::Pipe | FsType::AnonInode | FsType::Hugetlbfs(_) => {
                unreachable!("returned above")
            }
        }
        .map_err(|_| Errno::ENOMEM)?;
        Ok(data.len() as u64)
    }

    /// The device number `/proc/PID/maps` prints for a mapping of the file: sda1, pmem0 (major
    /// 259, printed in hex as the kernel does), or an anonymous device.
    pub(crate) fn maps_dev(self) -> &'static str {
        match self {
            FsType::Disk | FsType::Xfs => "08:01",
            FsType::Dax => "103:00",
            FsType::Tmpfs(_) | FsType::Pipe | FsType::AnonInode | FsType::Hugetlbfs(_) => "00:01",
            FsType::Bdev => "00:05",
        }
    }

    /// Frees the blocks of pages `[first, end)` of `inode` (truncation, punching a hole), which
    /// read as a hole after: DAX returns the device's blocks; the other file systems punch
    /// their backing store (tmpfs has no blocks: its pages go with the page cache).
    pub(crate) fn free_blocks(self, st: &mut KState, inode: InodeId, first: u64, end: u64) {
        match self {
            FsType::Dax => st.dax.free_blocks(&mut st.mem, inode, first, end),
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Hugetlbfs(_) => {
                st.inodes[inode].backing.punch(first, end);
            }
            FsType::Bdev => st.inodes[inode].backing.punch(first, end),
        }
    }

    /// Zeroes bytes `[from, to)` of page `index` of `inode` on its backing store, if the page
    /// has a block (a partial block at a truncation or hole punch: `dax_zero_range` on DAX).
    pub(crate) fn zero_partial(
        self,
        st: &mut KState,
        inode: InodeId,
        index: u64,
        range: std::ops::Range<usize>,
    ) {
        match self {
            FsType::Dax => st.dax.zero_partial(&mut st.mem, inode, index, range.start, range.end),
            FsType::Disk
            | FsType::Xfs
            | FsType::Tmpfs(_)
            | FsType::Pipe
            | FsType::AnonInode
            | FsType::Hugetlbfs(_) => {
                st.inodes[inode].backing.zero(index, range);
            }
            FsType::Bdev => st.inodes[inode].backing.zero(index, range),
        }
    }

    /// Pages of storage `inode` holds, `stat`'s `st_blocks` in pages (`fs/stat.rs`): allocated
    /// and delayed blocks on disk, cached and swapped-out pages on tmpfs, device blocks of a DAX file, huge
    /// pages on hugetlbfs.
    pub(crate) fn i_blocks(self, st: &KState, inode: InodeId) -> u64 {
        match self {
            FsType::Disk | FsType::Xfs => st.disk_pages_held(inode),
            FsType::Tmpfs(_) => {
                // Swapped-out pages still count (`shmem_inode_info->alloced`).
                let m = &st.inodes[inode].mapping;
                m.nrpages + m.swapped.len() as u64
            }
            FsType::Dax => st.dax.inodes.get(&inode).map_or(0, |d| d.blocks.len() as u64),
            FsType::Hugetlbfs(size) => st.hinode(inode).cache.len() as u64 * (size.bytes() / 4096),
            FsType::Pipe | FsType::AnonInode => 0,
            FsType::Bdev => 0,
        }
    }

    /// `->fallocate` without `FALLOC_FL_PUNCH_HOLE` over pages `[first, last)` of `inode`:
    /// unwritten device blocks on DAX (ENOSPC when the device is full), zeroed pages in the
    /// page cache on tmpfs (`shmem_fallocate`), zeroed blocks for the holes on disk.
    pub(crate) async fn fallocate(
        self,
        cx: &Cx,
        inode: InodeId,
        first: u64,
        last: u64,
    ) -> Result<(), Errno> {
        match self {
            FsType::Dax => {
                let allocated = cx.st().dax.alloc_unwritten(inode, first, last);
                if let Ok(n) = allocated {
                    cx.charge_n(Cost::FsBlockAlloc, n).await;
                }
                allocated.map(|_| ())
            }
            FsType::Tmpfs(_) => {
                for index in first..last {
                    let cached = cx.st().page_cache_get(inode, index).is_some();
                    if !cached {
                        shmem_get_page(cx, inode, index).await.map_err(|_| Errno::ENOSPC)?;
                    }
                }
                Ok(())
            }
            FsType::Disk | FsType::Xfs => {
                let n = cx.st().inodes[inode].backing.allocate(first, last);
                cx.charge_n(Cost::FsBlockAlloc, n).await;
                Ok(())
            }
            FsType::Pipe => unreachable!("fallocate on a pipe is ESPIPE"),
            FsType::AnonInode => unreachable!("a userfaultfd is opened read-only: EBADF first"),
            FsType::Hugetlbfs(_) => unreachable!("hugetlbfs_fallocate is called from the syscall"),
            FsType::Bdev => unreachable!("a block device's fallocate only punches (truncate.rs)"),
        }
    }
}
