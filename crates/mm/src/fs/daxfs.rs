//! A DAX file system on a persistent-memory device: ext4 mounted with `-o dax` on `/dev/pmem0`
//! (`drivers/nvdimm/pmem.c`; `fs/ext4/inode.c` `ext4_iomap_begin`/`ext4_iomap_alloc`;
//! `fs/ext4/extents.c` `ext4_fallocate`, `ext4_punch_hole`; Linux v6.8, the same shape since the
//! iomap DAX path of v4.10).
//!
//! The device is a range of page frames above the end of RAM: the buddy allocator never hands
//! them out and the model keeps no `struct page` state for them (as before v6.15, when DAX pages
//! were mapped as special PTEs without refcounts). A file system block is one page, and its bytes
//! live in the frame contents at the block's pfn, so a store through a DAX mapping, a `write()`
//! and a `read()` reach the same bytes. Each file has a block map (page index -> block, written
//! or unwritten); a page without a block is a hole.
//!
//! Allocation follows ext4 under DAX: a write (a write fault, `write()`) allocates the blocks it
//! needs and zeroes them on the device before anyone can map them (`EXT4_GET_BLOCKS_CREATE_ZERO`,
//! so a partly written block never shows stale bytes); `fallocate` allocates unwritten blocks,
//! which read as holes until their first write converts and zeroes them; a PMD write fault over
//! a hole asks for a 2 MiB-aligned extent. The allocator is a first fit from a goal (the block
//! after the one backing the previous page of the file, so sequential writes get contiguous
//! extents) over the device's free extents.
//!
//! Approximations: no journal, no metadata blocks, no delayed allocation; allocation and
//! zeroing are charged per block (ext4 maps whole extents per `iomap_begin`); a PMD write over a
//! hole allocates only when a free aligned 2 MiB extent exists, and otherwise falls back to PTEs
//! without allocating (ext4 may allocate a shorter extent and then fall back); the device is
//! persistent at once (no CPU cache write-back, so `fsync` has nothing to do for DAX files) and
//! has no bad blocks; a freed block forgets its bytes (ext4 zeroes blocks when it allocates them,
//! so the difference cannot be observed).

use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::sim::cost::Cost;
use crate::types::fs::{DaxFs, DaxInode, FsBlock, PmemDevice};
use crate::types::ids::InodeId;
use crate::types::ids::VmaId;
use simcore::Pfn;
use std::collections::BTreeMap;

/// Pages in a PMD-sized extent.
pub const PMD_PAGES: u64 = 512;

impl PmemDevice {
    /// A device of `nr_blocks` blocks from frame `base`, all free.
    pub fn new(base: Pfn, nr_blocks: u64) -> PmemDevice {
        let mut free = BTreeMap::new();
        if nr_blocks > 0 {
            free.insert(0, nr_blocks);
        }
        PmemDevice { base, nr_blocks, free }
    }

    /// The frame of `block`.
    pub fn pfn(&self, block: u64) -> Pfn {
        debug_assert!(block < self.nr_blocks);
        self.base + block
    }

    /// The block at frame `pfn`, if the frame belongs to the device.
    pub fn block_of(&self, pfn: Pfn) -> Option<u64> {
        (pfn >= self.base && pfn - self.base < self.nr_blocks).then(|| pfn - self.base)
    }

    pub fn is_free(&self, block: u64) -> bool {
        self.free.range(..=block).next_back().is_some_and(|(_, &end)| block < end)
    }

    pub fn nr_free(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).sum()
    }

    /// Takes the free blocks `[start, start + n)` out of the free extents.
    fn take(&mut self, start: u64, n: u64) {
        let (&s, &e) = self.free.range(..=start).next_back().expect("taking a used block");
        assert!(start + n <= e, "taking blocks {start}+{n} across a used block");
        self.free.remove(&s);
        if s < start {
            self.free.insert(s, start);
        }
        if start + n < e {
            self.free.insert(start + n, e);
        }
    }

    /// One free block: the goal if free, else the first free one after it, else the first.
    fn alloc(&mut self, goal: u64) -> Option<u64> {
        let block = if self.is_free(goal) {
            goal
        } else {
            let after = self.free.range(goal..).next().map(|(&s, _)| s);
            after.or_else(|| self.free.keys().next().copied())?
        };
        self.take(block, 1);
        Some(block)
    }

    /// `n` free blocks starting at a multiple of `n` (a power of two), the lowest such run.
    fn alloc_aligned(&mut self, n: u64) -> Option<u64> {
        let start = self.free.iter().find_map(|(&s, &e)| {
            let a = s.next_multiple_of(n);
            (a + n <= e).then_some(a)
        })?;
        self.take(start, n);
        Some(start)
    }

    /// Returns a block to the free extents, merging with its neighbours.
    fn free(&mut self, block: u64) {
        assert!(block < self.nr_blocks && !self.is_free(block), "freeing free block {block}");
        let (mut start, mut end) = (block, block + 1);
        if let Some((&s, &e)) = self.free.range(..block).next_back()
            && e == block
        {
            self.free.remove(&s);
            start = s;
        }
        if let Some(e) = self.free.remove(&end) {
            end = e;
        }
        self.free.insert(start, end);
    }
}

/// What `iomap_begin` reports for a range of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Iomap {
    /// No written block: a hole or unwritten extent (`IOMAP_HOLE`, `IOMAP_UNWRITTEN`).
    Hole,
    /// Written blocks from frame `pfn` on, contiguous over the range; `new` when this call
    /// allocated them (`IOMAP_F_NEW`).
    Mapped { pfn: Pfn, new: bool },
}

impl DaxFs {
    /// A file system on a device of `nr_blocks` blocks from frame `base` (none when zero).
    pub(crate) fn new(base: Pfn, nr_blocks: u64) -> DaxFs {
        let device = (nr_blocks > 0).then(|| PmemDevice::new(base, nr_blocks));
        DaxFs { device, inodes: BTreeMap::new() }
    }

    pub fn device(&self) -> &PmemDevice {
        self.device.as_ref().expect("DAX inodes exist only with a pmem device")
    }

    fn device_mut(&mut self) -> &mut PmemDevice {
        self.device.as_mut().expect("DAX inodes exist only with a pmem device")
    }

    pub fn inode(&self, inode: InodeId) -> &DaxInode {
        self.inodes.get(&inode).expect("not a DAX inode")
    }

    pub(crate) fn inode_mut(&mut self, inode: InodeId) -> &mut DaxInode {
        self.inodes.get_mut(&inode).expect("not a DAX inode")
    }

    /// The written block backing page `index`, as a frame.
    pub fn written_pfn(&self, inode: InodeId, index: u64) -> Option<Pfn> {
        let b = self.inode(inode).blocks.get(&index).filter(|b| !b.unwritten)?;
        Some(self.device().pfn(b.block))
    }

    /// What the range `[index, index + pages)` is: a hole (no written block at all), or written
    /// blocks contiguous on the device and aligned to the range's size; `None` for anything
    /// else (a mix, or blocks a PMD cannot map).
    fn lookup(&self, inode: InodeId, index: u64, pages: u64) -> Option<Iomap> {
        let blocks = &self.inode(inode).blocks;
        let written: Vec<(u64, u64)> = blocks
            .range(index..index + pages)
            .filter(|(_, b)| !b.unwritten)
            .map(|(&i, b)| (i, b.block))
            .collect();
        match written.first() {
            None => Some(Iomap::Hole),
            Some(&(_, first)) => {
                let contiguous = written.len() as u64 == pages
                    && first.is_multiple_of(pages)
                    && written.iter().enumerate().all(|(k, &(_, b))| b == first + k as u64);
                contiguous.then(|| Iomap::Mapped { pfn: self.device().pfn(first), new: false })
            }
        }
    }

    /// Allocates and zeroes blocks for `[index, index + pages)`, which `lookup` found a hole:
    /// converts unwritten blocks of a single page, or allocates (an aligned extent for a PMD).
    /// Returns the first frame, or `None` when the device has no room.
    fn alloc_written(
        &mut self,
        mem: &mut crate::sim::content::FrameContents,
        inode: InodeId,
        index: u64,
        pages: u64,
    ) -> Option<Pfn> {
        if pages == 1
            && let Some(b) = self.inode_mut(inode).blocks.get_mut(&index)
        {
            b.unwritten = false;
            let block = b.block;
            let pfn = self.device().pfn(block);
            mem.zero(pfn.0);
            return Some(pfn);
        }
        let first = if pages == 1 {
            let goal = self.goal(inode, index);
            self.device_mut().alloc(goal)?
        } else {
            if self.inode(inode).blocks.range(index..index + pages).next().is_some() {
                return None;
            }
            self.device_mut().alloc_aligned(pages)?
        };
        for k in 0..pages {
            self.inode_mut(inode)
                .blocks
                .insert(index + k, FsBlock { block: first + k, unwritten: false });
            mem.zero(self.device().pfn(first + k).0);
        }
        Some(self.device().pfn(first))
    }

    /// The allocation goal for page `index`: right after the block of the page before it.
    fn goal(&self, inode: InodeId, index: u64) -> u64 {
        let prev = index.checked_sub(1).and_then(|p| self.inode(inode).blocks.get(&p));
        prev.map_or(0, |b| (b.block + 1) % self.device().nr_blocks)
    }

    /// Frees the blocks of pages `[first, end)` (truncate, punch hole).
    pub(crate) fn free_blocks(
        &mut self,
        mem: &mut crate::sim::content::FrameContents,
        inode: InodeId,
        first: u64,
        end: u64,
    ) {
        let gone: Vec<u64> = self.inode(inode).blocks.range(first..end).map(|(&i, _)| i).collect();
        for index in gone {
            let b = self.inode_mut(inode).blocks.remove(&index).expect("listed above");
            mem.zero(self.device().pfn(b.block).0);
            self.device_mut().free(b.block);
        }
    }

    /// Zeroes bytes `[from, to)` of page `index` on the device if the page has a written block
    /// (`dax_zero_range` for a partial block).
    pub(crate) fn zero_partial(
        &self,
        mem: &mut crate::sim::content::FrameContents,
        inode: InodeId,
        index: u64,
        from: usize,
        to: usize,
    ) {
        if let Some(pfn) = self.written_pfn(inode, index) {
            mem.write(pfn.0, from, &vec![0; to - from]);
        }
    }

    /// `fallocate` without `FALLOC_FL_PUNCH_HOLE`: unwritten blocks for the holes of pages
    /// `[first, end)`; returns how many it allocated, or ENOSPC when the device filled up.
    pub(crate) fn alloc_unwritten(
        &mut self,
        inode: InodeId,
        first: u64,
        end: u64,
    ) -> Result<u64, Errno> {
        let mut n = 0;
        for index in first..end {
            if self.inode(inode).blocks.contains_key(&index) {
                continue;
            }
            let goal = self.goal(inode, index);
            let block = self.device_mut().alloc(goal).ok_or(Errno::ENOSPC)?;
            self.inode_mut(inode).blocks.insert(index, FsBlock { block, unwritten: true });
            n += 1;
        }
        Ok(n)
    }
}

impl KState {
    /// `vma_is_dax`: a mapping of a file on the DAX file system.
    pub fn vma_is_dax(&self, vma: VmaId) -> bool {
        self.vma(vma).vm_ops.is_dax()
    }

    /// Whether `pfn` is a frame of the persistent-memory device.
    pub fn is_pmem_pfn(&self, pfn: Pfn) -> bool {
        self.dax.device.as_ref().is_some_and(|d| d.block_of(pfn).is_some())
    }

    /// Whether frame `pfn` is free: in the buddy allocator for RAM, a free block for pmem.
    pub fn frame_is_free(&self, pfn: Pfn) -> bool {
        if let Some((_, _, free)) = self.hugetlb.containing(pfn) {
            return free;
        }
        match self.dax.device.as_ref().and_then(|d| d.block_of(pfn).map(|b| d.is_free(b))) {
            Some(free) => free,
            None => self.buddy.is_free(pfn),
        }
    }

    /// Creates the DAX state of a new file of `pages` pages: a written block, holding
    /// `backing`'s contents, for every page that is not a hole. ENODEV without a pmem device,
    /// ENOSPC when the file does not fit.
    pub(crate) fn dax_create(
        &mut self,
        inode: InodeId,
        pages: u64,
        backing: &crate::types::fs::Backing,
    ) -> Result<(), Errno> {
        let device = self.dax.device.as_ref().ok_or(Errno::ENODEV)?;
        let data: Vec<u64> = (0..pages).filter(|&i| !backing.is_hole(i)).collect();
        if data.len() as u64 > device.nr_free() {
            return Err(Errno::ENOSPC);
        }
        self.dax.inodes.insert(inode, DaxInode::default());
        for index in data {
            let pfn = self.dax.alloc_written(&mut self.mem, inode, index, 1).expect("checked room");
            self.mem.set(pfn.0, backing.read(index));
        }
        Ok(())
    }
}

/// `ext4_iomap_begin` for pages `[index, index + pages)` (one page, or a PMD's 512): looks the
/// blocks up and, for a write, allocates what is missing (charging the allocation and the
/// zeroing of the new blocks before they become visible). `Ok(None)` when the range cannot be
/// mapped as one extent (a PMD fault then falls back to PTEs); ENOSPC when the device is full.
pub(crate) async fn iomap_begin(
    cx: &Cx,
    inode: InodeId,
    index: u64,
    pages: u64,
    write: bool,
) -> Result<Option<Iomap>, Errno> {
    cx.charge(Cost::PageCacheLookup).await;
    let found = cx.st().dax.lookup(inode, index, pages);
    if !(write && found == Some(Iomap::Hole)) {
        return Ok(found);
    }
    cx.charge(Cost::FsBlockAlloc).await;
    cx.charge_n(Cost::PmemWrite4k, pages).await;
    let mut st = cx.st();
    let st = &mut *st;
    match st.dax.lookup(inode, index, pages) {
        Some(Iomap::Hole) => match st.dax.alloc_written(&mut st.mem, inode, index, pages) {
            Some(pfn) => Ok(Some(Iomap::Mapped { pfn, new: true })),
            None if pages == 1 => Err(Errno::ENOSPC),
            None => Ok(None),
        },
        // Another writer allocated the blocks while this one was charged.
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_allocates_from_the_goal_and_merges_on_free() {
        let mut d = PmemDevice::new(Pfn(1 << 18), 2048);
        assert_eq!(d.alloc(10), Some(10));
        assert_eq!(d.alloc(10), Some(11), "the goal is taken: the next free block");
        assert_eq!(d.pfn(11), Pfn((1 << 18) + 11));
        assert_eq!(d.block_of(Pfn((1 << 18) + 2047)), Some(2047));
        assert_eq!(d.block_of(Pfn((1 << 18) + 2048)), None);
        assert_eq!(d.alloc_aligned(512), Some(512), "the first aligned run after block 11");
        assert_eq!(d.nr_free(), 2048 - 2 - 512);
        d.free(10);
        d.free(11);
        for b in 512..1024 {
            d.free(b);
        }
        assert_eq!(d.nr_free(), 2048);
        assert_eq!(d.free.len(), 1, "freed blocks merge back into one extent");
        let mut tiny = PmemDevice::new(Pfn(0), 600);
        assert_eq!(tiny.alloc_aligned(512), Some(0));
        assert_eq!(tiny.alloc_aligned(512), None);
    }

    #[test]
    fn holes_unwritten_blocks_and_extents_look_up_as_the_iomap_says() {
        let mut fs = DaxFs::new(Pfn(1 << 18), 4096);
        let mut mem = crate::sim::content::FrameContents::default();
        let ino = InodeId(0);
        fs.inodes.insert(ino, DaxInode::default());
        assert_eq!(fs.lookup(ino, 0, 512), Some(Iomap::Hole));
        assert_eq!(fs.alloc_unwritten(ino, 3, 5), Ok(2));
        assert_eq!(fs.lookup(ino, 3, 1), Some(Iomap::Hole), "unwritten reads as a hole");
        let pfn = fs.alloc_written(&mut mem, ino, 3, 1).unwrap();
        assert_eq!(fs.lookup(ino, 3, 1), Some(Iomap::Mapped { pfn, new: false }));
        assert_eq!(fs.lookup(ino, 0, 512), None, "a partly written PMD range falls back");
        let pmd = fs.alloc_written(&mut mem, ino, 512, 512).unwrap();
        assert_eq!((pmd.0 - (1 << 18)) % 512, 0, "a PMD extent is aligned");
        assert_eq!(fs.lookup(ino, 512, 512), Some(Iomap::Mapped { pfn: pmd, new: false }));
        assert_eq!(fs.lookup(ino, 700, 1), Some(Iomap::Mapped { pfn: pmd + 188, new: false }));
        let before = fs.device().nr_free();
        fs.free_blocks(&mut mem, ino, 0, 1024);
        assert_eq!(fs.device().nr_free(), before + 2 + 512);
        assert!(fs.inode(ino).blocks.is_empty());
    }
}
