//! File-system state (`include/linux/fs.h`: `struct inode`, `struct file`, `struct
//! address_space`, `struct file_ra_state`; `include/linux/pipe_fs_i.h`: a pipe's buffers;
//! `include/linux/shmem_fs.h`: a tmpfs mount's `huge=` option), the persistent-memory device
//! and the DAX entries of its files (`fs/dax.c`'s entry encoding), and the O_DIRECT reads in
//! flight. The code is in `fs.rs`, `fs/`, `filemap.rs` and `shmem.rs`.

use crate::sim::content::Content;
use crate::types::ids::InodeId;
use crate::types::ids::VmaId;
use crate::types::mm_types::GupPages;
use crate::xarray::XArray;
use engine::RwSem;
use engine::SpinLock;
use simcore::Pfn;
use simcore::VirtAddr;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::VecDeque;

/// `struct inode`.
#[derive(Debug)]
pub struct Inode {
    pub path: String,
    pub fs: FsType,
    /// `i_size` in bytes.
    pub size: u64,
    /// `i_writecount`.
    pub writecount: i32,
    pub backing: Backing,
    pub mapping: AddressSpace,
    pub i_rwsem: RwSem,
    /// Open file descriptions and mappings referencing the inode.
    pub refs: u32,
}

/// `struct file`.
#[derive(Debug)]
pub struct File {
    pub inode: InodeId,
    pub mode: u32,
    pub direct: bool,
    pub append: bool,
    pub pos: u64,
    /// File descriptors and mappings holding this description.
    pub refs: u32,
    pub ra: RaState,
}

/// A pipe's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pipe {
    pub bufs: VecDeque<PipeBuf>,
    pub readers: u32,
    pub writers: u32,
}

/// The persistent-memory device and the DAX files on it.
#[derive(Debug, Default)]
pub struct DaxFs {
    /// `None` on a machine without persistent memory.
    pub device: Option<PmemDevice>,
    pub inodes: BTreeMap<InodeId, DaxInode>,
}

/// A submitted asynchronous read: done at submission (a DAX file, nothing to read, a read
/// without O_DIRECT), or in flight until [`end_io`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    Done(u64),
    InFlight(DioRead),
}

/// `struct address_space`.
#[derive(Debug)]
pub struct AddressSpace {
    /// The page cache (`i_pages`): by page index, the head pfn of each cached folio (a large
    /// folio once, at its first index) and the shadow entries reclaim left (`xarray.rs`).
    pub pages: XArray,
    /// Pages in the page cache (`nrpages`).
    pub nrpages: u64,
    /// VMAs mapping this file.
    pub i_mmap: BTreeSet<VmaId>,
    pub i_mmap_rwsem: RwSem,
    pub invalidate_lock: RwSem,
    /// The xarray lock (`i_pages` lock).
    pub xa_lock: SpinLock,
    /// Collapse-created THPs in the page cache (`nr_thps`), plus those of `collapsing`.
    pub nr_thps: u64,
    /// Collapses that have counted their THP in `nr_thps` for seed 000's writer check but not
    /// yet put it in the cache (`collapse_file` counts before it looks for writers).
    pub collapsing: u64,
    /// Folios of more than one page in the page cache: while there are none, a lookup that
    /// misses at its index needs no range search (the xarray's multi-index entries, which the
    /// index has to emulate with one).
    pub nr_large: u64,
    /// shmem's swap entries: the swap slot of each page index that reclaim swapped out, which
    /// the kernel keeps in the page cache's own slot as an xarray value entry (`shmem_writepage`
    /// → `shmem_delete_from_page_cache`); never an index that also holds a folio. Its size is
    /// `shmem_inode_info->swapped`.
    pub swapped: BTreeMap<u64, u64>,
    /// A large folio's slots being emptied one by one, before v5.17 (`xarray.rs`).
    pub clearing: Option<crate::xarray::ClearingSlots>,
    /// The slots a collapse has given its new huge page so far, before v6.4 (`xarray.rs`).
    pub collapse_slots: Option<crate::xarray::CollapseSlots>,
}

/// A file's contents on its backing store.
#[derive(Debug, Default)]
pub struct Backing {
    /// Contents of allocated blocks not written explicitly: a pattern seed, or zeros.
    pub pattern: Option<u64>,
    /// Blocks written back with explicit contents.
    pub blocks: BTreeMap<u64, Content>,
    /// Unallocated ranges `[start, end)` in pages (holes read as zeros).
    pub holes: BTreeMap<u64, u64>,
}

/// Where a file lives. What differs by file system is asked of its operations (`fs/ops.rs`),
/// never by comparing values of this enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsType {
    /// ext4 on the machine's block device.
    Disk,
    /// XFS on the machine's block device: as ext4, but with large folios from v5.18
    /// (`FsType::large_folios`).
    Xfs,
    /// tmpfs / shmem: pages live only in memory; on a mount with its `huge=` option, or on
    /// the kernel's `shm_mnt` (`shmem.rs`).
    Tmpfs(TmpfsMount),
    /// pipefs: a pipe's inode (its data lives in the pipe's buffers).
    Pipe,
    /// anon_inodefs: the file of a userfaultfd (`anon_inode_getfd("[userfaultfd]")`), whose
    /// state is its context (`userfaultfd.rs`); it cannot be mapped, read or written as a file.
    AnonInode,
    /// ext4 with `-o dax` on the machine's persistent memory: no page cache, mappings map the
    /// device (`daxfs.rs`, `dax.rs`).
    Dax,
    /// hugetlbfs with pages of this size (`hugetlb.rs`, `hugetlbfs.rs`).
    Hugetlbfs(crate::types::hugetlb::HugeSize),
    /// A block device special file (`/dev/vdb`, `S_ISBLK`): its page cache is the block
    /// device inode's (`def_blk_fops`, `def_blk_aops`; `fs/ops.rs` says how it differs).
    Bdev,
}

/// Per-file readahead state (`struct file_ra_state`), simplified to the window size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaState {
    /// Maximum readahead in pages (`ra_pages`).
    pub ra_pages: u64,
}

/// The DAX state of one inode.
#[derive(Debug, Default)]
pub struct DaxInode {
    /// The block map (the extent tree): page index -> block.
    pub blocks: BTreeMap<u64, FsBlock>,
    /// The mapping's DAX entries (`i_pages` value entries), by first index.
    pub entries: BTreeMap<u64, DaxEntry>,
}

/// A persistent-memory device (`/dev/pmem0`): its frames and which of its blocks are free.
#[derive(Debug)]
pub struct PmemDevice {
    /// The device's first page frame.
    pub base: Pfn,
    pub nr_blocks: u64,
    /// Free extents: first block -> end (exclusive).
    pub(crate) free: BTreeMap<u64, u64>,
}

/// An O_DIRECT read whose DMA is in flight: the user buffer's pages are held (FOLL_GET or
/// FOLL_PIN by era), the device has not written them yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DioRead {
    pub(crate) inode: InodeId,
    pub(crate) buf: VirtAddr,
    pub(crate) pos: u64,
    pub(crate) n: u64,
    pub(crate) held: GupPages,
}

/// One queued buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PipeBuf {
    /// Bytes copied by `write()`.
    Data(Vec<u8>),
    /// A user page spliced in, with the reference GUP took.
    Page { page: Pfn, offset: usize, len: usize },
}

/// A block of a file: where page `index` lives on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsBlock {
    pub block: u64,
    /// Allocated by `fallocate` and not written yet: reads as zeros (`IOMAP_UNWRITTEN`).
    pub unwritten: bool,
}

/// The mount a tmpfs inode lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmpfsMount {
    /// The kernel's internal `shm_mnt` (shared anonymous memory, memfd, SysV shm): its `huge`
    /// follows `shmem_enabled`.
    ShmMnt,
    /// A tmpfs mount with its `huge=` option.
    Mount(ShmemHuge),
}

/// A tmpfs mount's `huge=` option (`SHMEM_SB(sb)->huge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmemHuge {
    Never,
    Always,
    WithinSize,
    Advise,
}

/// One entry of a DAX mapping's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DaxEntry {
    pub kind: EntryKind,
    /// Covers a PMD (512 pages from a PMD-aligned index) rather than one page.
    pub pmd: bool,
    /// `DAX_LOCKED`: a task works on the entry; others wait for it.
    pub locked: bool,
}

/// What a DAX entry holds (`DAX_EMPTY`, `DAX_ZERO_PAGE`, or a pfn).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A placeholder a fault inserts while it looks the block up.
    Empty,
    /// A hole mapped read-only through the zero page (the huge zero page for a PMD entry).
    Zero,
    /// The first frame of the pmem block (or 2 MiB extent) the entry maps.
    Block(Pfn),
}
