//! `mmap`, `munmap`, `mprotect`, `madvise` (`mm/mmap.c`, `mm/vma.c`, `mm/mprotect.c`,
//! `mm/madvise.c`, Linux v6.8).
//!
//! The syscalls validate their arguments as Linux does (EINVAL for unaligned addresses, zero
//! lengths and bad flag combinations; EBADF/EACCES for file problems; ENOMEM for unmapped ranges
//! or an exhausted address space), then take `mmap_lock` for write (`madvise(MADV_DONTNEED)` for
//! read), split the VMAs at the range's edges and act on the PTEs. `munmap` detaches the VMAs,
//! downgrades `mmap_lock` to read for the zap (since v4.20), frees the page tables the range no
//! longer needs, and only then drops the VMAs.
//!
//! `MAP_SHARED|MAP_ANONYMOUS` is backed by a tmpfs inode, as `shmem_zero_setup` does. A DAX
//! file is mapped `VM_HUGEPAGE`. `thp_get_unmapped_area` places a mapping that spans a whole
//! 2 MiB of a DAX file, of an ext4 or XFS file from v5.18 ("mm/readahead: Align file mappings
//! for non-DAX", 1854bc6e2420), and from v6.8 a private anonymous mapping of at least 2 MiB
//! ("mm: align larger anonymous mappings on THP boundaries", efa7df3e3bb5; from v6.12 only a
//! multiple of 2 MiB asked without a hint, "mm, mmap: limit THP alignment of anonymous
//! mappings to PMD-aligned sizes", d4148aeab412), at a 2 MiB boundary (`mapping_alignment`). Huge PMDs that a range
//! edge cuts are split first. From v5.19 every new mapping is offered to khugepaged
//! (`khugepaged_enter_vma` in `mmap_region`, 613bec092fe7), which registers the mm when the THP
//! policy allows a THP there: with `enabled = always`, a read-only file's text is scanned
//! without `MADV_HUGEPAGE` (`era::mmap_registers_khugepaged`).
//!
//! `mmap` checks in the kernel's order (x86 `mmap`, `ksys_mmap_pgoff`, `do_mmap`, v6.8, the
//! same in every era): the offset's alignment, the descriptor (EBADF), a hugetlb size, a zero
//! length (EINVAL), the length's overflow (ENOMEM), then under `mmap_lock` the address
//! (`check_fixed_area`, `get_unmapped_area`) and `MAP_FIXED_NOREPLACE`'s overlap (EEXIST), and
//! only then the mapping type (EINVAL) and the file's open mode (EACCES, ENODEV).
//! `MAP_FIXED_NOREPLACE` exists from v4.17 (a4ff8e8620d3; before, an ignored bit, so the
//! address is a hint: `era::has_map_fixed_noreplace`) and looks at the whole range from v4.19
//! (7aa867dd8952; v4.17-v4.18 refused only a VMA containing the address and unmapped one
//! starting inside: `era::map_fixed_noreplace_checks_whole_range`). A hint is rounded down to
//! its page and raised to `mmap_min_addr` (x86's `arch_get_unmapped_area_topdown`,
//! `round_hint_to_min`).
//!
//! A new mapping merges with the VMA ending at its start and the one starting at its end
//! (`vma_merge_new`; `mmap_region`'s `vma_merge`, its `vma_expand` from v6.1 and mm/vma.c's
//! `vma_merge_new_range` from v6.12; every era), as mremap's moves (`copy_vma`) and growth do
//! (`mremap.rs`): the same flags but `VM_SOFTDIRTY` (which the merged VMA takes), no
//! `VM_SPECIAL`, the same file at the next offset and `vm_ops` of a kind that merges (not SysV
//! shm, hugetlb or DAX), the same role, and compatible anon_vmas (`is_mergeable_anon_vma`: a
//! VMA without one joins a neighbour whose chain is a single link, whose anon_vma the merged
//! VMA keeps). The VMA below survives (else the one above, its start lowered); the others are
//! freed. Approximations: the model merges with the flags after the file system's `->mmap`
//! (the kernel tries before it and again after when `->mmap` changed them); it joins a moved VMA
//! with an anon_vma to a neighbour without one (mremap only) in every era, where the kernel
//! does so from v6.16 (879bca0a2c4f; `is_mergeable_anon_vma` in mm/vma.c v6.12 still asks the
//! neighbour's chain to be a single link, which an empty one is not); two VMAs with the same
//! anon_vma merge only with the same chain; and a merge that would put the VMA's page indexes
//! out of its anon_vma's 32-bit relative reach (`AnonVma::base`, more than 8 TiB away) is not
//! done. `vma_merge_range` frees a file VMA under its mapping's `i_mmap_rwsem` for write, as the
//! kernel's `vma_prepare` holds it around the tree update, so a walker of `i_mmap` that sleeps
//! under the read lock (`unmap_mapping_range` in a truncation) never meets the freed VMA (swarm
//! seed 50 did, with an mprotect's split and merge beside a truncation). `mmap` merges under the
//! new VMA's lock (`mmap_link`); mremap's merges (`vma_merge_new` from `mremap.rs`) do not take it
//! yet.
//!
//! `mprotect` and the flag-only `madvise` advice end by merging the range's VMAs with
//! compatible neighbours (`vma_merge_range`), as `mprotect_fixup` and `madvise_update_vma` do,
//! by the same anon_vma rule with the changed VMA as the source: one without an anon_vma joins a
//! neighbour whose chain is a single link in every era, one with an anon_vma joins a neighbour
//! without from v6.16 (`era::anon_merge_into_unfaulted`; the host oracle found the first missing,
//! `scenarios/regressions/anon-merge-after-change.toml`).
//! `mprotect` changes nothing when a VMA's flags stay the same (`mprotect_fixup`). Otherwise
//! each present PTE takes the new protection (`pte_modify`: only a shared writable mapping
//! without write notification has a writable `vm_page_prot`), and a read-only PTE in a writable
//! mapping is made writable at once where the era allows (`can_change_pte_writable`), so that
//! the next write does not fault:
//! - up to v5.19, only in shared mappings that want write notification (`dirty_accountable`):
//!   a dirty PTE that is soft-dirty or whose VMA has `VM_SOFTDIRTY` clear (64e455079e1b's test,
//!   as written); a private mapping's PTEs all become read-only and the first write faults;
//! - from v6.0 (64fe24a3e05e, soft-dirty test fixed by 76aefad628aa), in writable private
//!   mappings too: never while soft-dirty tracking needs the fault (`VM_SOFTDIRTY` clear, after
//!   `clear_refs` 4, and the PTE not soft-dirty); shared: a dirty PTE; private: a dirty PTE of
//!   a PageAnonExclusive anonymous page;
//! - from v6.2 (d84887739d5c), private exclusive anonymous pages need not be dirty.
//!
//! Huge DAX PMDs keep their write bit (not modelled by era).
//!
//! The fork advice only sets VMA flags that `dup_mmap` reads (`fork.rs`): `MADV_DONTFORK` /
//! `MADV_DOFORK` set and clear `VM_DONTCOPY` (the child has no such VMA); `MADV_WIPEONFORK` /
//! `MADV_KEEPONFORK` (v4.14, d2cd9ede6e19) set and clear `VM_WIPEONFORK` (the child's VMA is
//! empty, reading zeros), on private anonymous VMAs only: a file or shared VMA is EINVAL, found
//! VMA by VMA as `madvise_walk_vmas` does, so the VMAs before it keep the new flag.
//!
//! `PROT_NONE` PTEs are modelled by clearing the user bit (x86 uses a PROTNONE bit instead; the
//! effect — any user access faults and finds a VMA without permission — is the same).

use crate::arch::tlbflush::flush_tlb_range;
use crate::era::KernelVersion;
use crate::errno::Errno;

use crate::kernel::{Cx, KState};
use crate::memory::{pte_bits, wants_writenotify};
use crate::mm_struct::MMAP_MIN;
use crate::pgtable::{Pte, TASK_SIZE, Upper};
use crate::sim::cost::Cost;
use crate::types::fs::FsType;
use crate::types::hugetlb::HugeSize;
use crate::types::ids::FileId;
use crate::types::ids::MmId;
use crate::types::ids::Pid;
use crate::types::ids::VmaId;
use crate::types::mm_types::VmOps;
use crate::vma::{VmFlags, Vma, VmaRole};
use crate::zap::{ZapDetails, split_huge_pmd_edges, zap_vma_range};
use simcore::{Bytes, VirtAddr};

/// `PROT_*`.
pub mod prot {
    pub const NONE: u32 = 0;
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const EXEC: u32 = 4;
}

/// `MAP_*` (x86-64 values).
pub mod map {
    pub const SHARED: u32 = 0x01;
    pub const PRIVATE: u32 = 0x02;
    pub const FIXED: u32 = 0x10;
    pub const ANONYMOUS: u32 = 0x20;
    pub const GROWSDOWN: u32 = 0x100;
    pub const DENYWRITE: u32 = 0x800;
    pub const LOCKED: u32 = 0x2000;
    pub const NORESERVE: u32 = 0x4000;
    pub const POPULATE: u32 = 0x8000;
    pub const HUGETLB: u32 = 0x40000;
    /// `MAP_HUGE_2MB` and `MAP_HUGE_1GB`: the page size's log2 above `MAP_HUGE_SHIFT` (26).
    pub const HUGE_2MB: u32 = 21 << 26;
    pub const HUGE_1GB: u32 = 30 << 26;
    pub const FIXED_NOREPLACE: u32 = 0x100000;
    /// `MAP_SHARED_VALIDATE` (v4.15): shared, and any flag the file does not support is
    /// EOPNOTSUPP instead of ignored.
    pub const SHARED_VALIDATE: u32 = 0x03;
    pub const EXECUTABLE: u32 = 0x1000;
    pub const NONBLOCK: u32 = 0x10000;
    pub const STACK: u32 = 0x20000;
    pub const SYNC: u32 = 0x80000;
    /// `LEGACY_MAP_MASK` (`include/linux/mman.h`) of the flags mmsim knows: what
    /// `MAP_SHARED_VALIDATE` accepts besides the file's `mmap_supported_flags`.
    pub const LEGACY: u32 = SHARED
        | PRIVATE
        | FIXED
        | ANONYMOUS
        | DENYWRITE
        | EXECUTABLE
        | GROWSDOWN
        | LOCKED
        | NORESERVE
        | POPULATE
        | NONBLOCK
        | STACK
        | HUGETLB
        | HUGE_2MB
        | HUGE_1GB;
}

/// `MADV_*`.
pub mod madv {
    pub const NORMAL: u32 = 0;
    pub const RANDOM: u32 = 1;
    pub const SEQUENTIAL: u32 = 2;
    pub const DONTNEED: u32 = 4;
    pub const FREE: u32 = 8;
    pub const MERGEABLE: u32 = 12;
    pub const UNMERGEABLE: u32 = 13;
    pub const DONTFORK: u32 = 10;
    pub const DOFORK: u32 = 11;
    pub const WIPEONFORK: u32 = 18;
    pub const KEEPONFORK: u32 = 19;
    pub const HUGEPAGE: u32 = 14;
    pub const NOHUGEPAGE: u32 = 15;
    pub const COLLAPSE: u32 = 25;
    pub const COLD: u32 = 20;
    pub const PAGEOUT: u32 = 21;
    pub const POPULATE_READ: u32 = 22;
    pub const POPULATE_WRITE: u32 = 23;
    pub const WILLNEED: u32 = 3;
    pub const REMOVE: u32 = 9;
    pub const DONTDUMP: u32 = 16;
    pub const DODUMP: u32 = 17;
    pub const DONTNEED_LOCKED: u32 = 24;
    pub const GUARD_INSTALL: u32 = 102;
    pub const GUARD_REMOVE: u32 = 103;
}

/// The `PROT_*` bits and the VMA access flags they give.
const PROT_VM: [(u32, u64); 3] =
    [(prot::READ, VmFlags::READ), (prot::WRITE, VmFlags::WRITE), (prot::EXEC, VmFlags::EXEC)];

/// The VMA access flags of `prot` (`calc_vm_prot_bits`).
fn calc_vm_prot_bits(prot: u32) -> u64 {
    PROT_VM.iter().filter(|&&(p, _)| prot & p != 0).fold(0, |vm, &(_, f)| vm | f)
}

/// The `PROT_*` bits of a VMA whose flags are `vm` (`remap_file_pages` maps with them).
pub(crate) fn vm_prot(vm: u64) -> u32 {
    PROT_VM.iter().filter(|&&(_, f)| vm & f != 0).fold(0, |p, &(bit, _)| p | bit)
}

/// The range of a call for which an empty one is done at once (`mprotect`, `madvise`, `mseal`): EINVAL
/// for an unaligned `addr`, `None` for `len` 0 (success, whatever else the call was given),
/// `wrap` when `addr + len` rounded up to pages wraps. No upper bound: a range beyond user
/// space holds no VMA and fails as unmapped (ENOMEM).
pub(crate) fn range_or_empty(
    addr: VirtAddr,
    len: Bytes,
    wrap: Errno,
) -> Result<Option<(VirtAddr, VirtAddr)>, Errno> {
    if !addr.is_aligned(Bytes::PAGE) {
        return Err(Errno::EINVAL);
    }
    if len.as_u64() == 0 {
        return Ok(None);
    }
    let end = len.align_up(Bytes::PAGE).and_then(|len| addr.checked_add(len)).ok_or(wrap)?;
    Ok(Some((addr, end)))
}

/// A range `[start, end)` checked to be page-aligned, non-empty and inside user space.
fn user_range(addr: VirtAddr, len: Bytes) -> Result<(VirtAddr, VirtAddr), Errno> {
    if !addr.is_aligned(Bytes::PAGE) || len.as_u64() == 0 {
        return Err(Errno::EINVAL);
    }
    let len = len.align_up(Bytes::PAGE).ok_or(Errno::EINVAL)?;
    let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
    if end.0 > TASK_SIZE {
        return Err(Errno::EINVAL);
    }
    Ok((addr, end))
}

impl KState {
    /// Adds a VMA to its mm (and its file's `i_mmap`; the caller holds `i_mmap_rwsem`).
    pub(crate) fn vma_link(&mut self, vma: Vma) -> VmaId {
        let (mm, start, file) = (vma.mm, vma.start, vma.file);
        let id = self.vmas.push(Some(Box::new(vma)));
        let prev = self.mm_mut(mm).vmas.insert(start.0, id);
        assert!(prev.is_none(), "two VMAs start at {start}");
        if let Some(f) = file {
            let inode = self.file(f).inode;
            self.inodes[inode].mapping.i_mmap.insert(id);
        }
        id
    }

    /// Splits `id` at `at`, returning the new VMA covering `[at, end)`.
    pub(crate) fn vma_split(&mut self, id: VmaId, at: VirtAddr) -> VmaId {
        let v = self.vma(id);
        assert!(
            v.start < at && at < v.end && at.is_aligned(Bytes::PAGE),
            "bad split of {id} at {at}"
        );
        let (end, pgoff) = (v.end, v.page_index(at));
        self.vma_mut(id).end = at;
        let new = self.vma_dup(id, at, end, pgoff);
        self.hugetlb_vm_op_split(id, new);
        new
    }

    /// A copy of VMA `id` at `[start, end)` mapping from page `pgoff`: it holds its own
    /// reference to the file and joins every anon_vma of `id` (`vm_area_dup` with
    /// `anon_vma_clone`, as `__split_vma` and mremap's `copy_vma` make one).
    pub(crate) fn vma_dup(
        &mut self,
        id: VmaId,
        start: VirtAddr,
        end: VirtAddr,
        pgoff: u64,
    ) -> VmaId {
        let mut copy = self.vma(id).clone();
        (copy.start, copy.end, copy.pgoff) = (start, end, pgoff);
        if let Some(f) = copy.file {
            self.file_mut(f).refs += 1;
        }
        let chain = copy.anon_vma_chain.clone();
        let new = self.vma_link(copy);
        for av in chain {
            self.anon_vmas[av].vmas.push(new);
        }
        new
    }

    /// Splits VMAs so that `start` and `end` fall on VMA boundaries; returns the VMAs inside.
    pub(crate) fn vma_split_range(
        &mut self,
        mm: MmId,
        start: VirtAddr,
        end: VirtAddr,
    ) -> Vec<VmaId> {
        for edge in [start, end] {
            if let Some(id) = self.find_vma(mm, edge)
                && self.vma(id).start < edge
            {
                self.vma_split(id, edge);
            }
        }
        self.mm(mm).vmas_in(start, end, |id| self.vma(id).end)
    }

    /// Whether `b`, right after `a`, merges with it after the flags of one of them changed
    /// (`b` when `changed_is_b`): `is_mergeable_anon_vma` with the changed VMA as the source and
    /// the other as the target (`vma_merge_range`).
    fn vmas_mergeable_after_change(
        &self,
        a: VmaId,
        b: VmaId,
        changed_is_b: bool,
        k: KernelVersion,
    ) -> bool {
        let (src, tgt) = if changed_is_b { (b, a) } else { (a, b) };
        let (s, t) = (self.vma(src), self.vma(tgt));
        let anon = match (s.anon_vma, t.anon_vma) {
            (None, None) => true,
            (None, Some(_)) => t.anon_vma_chain.len() == 1,
            (Some(_), None) => {
                crate::era::anon_merge_into_unfaulted(k) && s.anon_vma_chain.len() == 1
            }
            (Some(_), Some(_)) => s.anon_vma == t.anon_vma && s.anon_vma_chain == t.anon_vma_chain,
        };
        anon && self.vmas_compatible(a, b) && self.anon_index_fits(&[a, b])
    }

    /// `is_mergeable_vma` and `vma_merge`'s `VM_SPECIAL` test, the anon_vmas aside: `b`, right
    /// after `a`, has the same flags (but `VM_SOFTDIRTY`), none of `VM_SPECIAL`, the same file
    /// at the next offset, the same `vm_ops` of a kind that merges, outside SysV shm (whose
    /// `vm_ops->close` forbids it), and the same role.
    fn vmas_compatible(&self, a: VmaId, b: VmaId) -> bool {
        let (x, y) = (self.vma(a), self.vma(b));
        let shm = x.file.is_some_and(|f| self.shm_inode(self.file(f).inode));
        x.end == y.start
            && x.flags.merge_equal(y.flags)
            && !x.flags.has(VmFlags::SPECIAL)
            && x.file == y.file
            && x.vm_ops == y.vm_ops
            && x.vm_ops.merges()
            && !shm
            && x.role == y.role
            && x.uffd == y.uffd
            && y.pgoff == x.pgoff + (x.len().as_u64() >> 12)
    }

    /// `is_mergeable_anon_vma` for a VMA `new` joining its neighbour `old`: either may lack an
    /// anon_vma when the other's chain is a single link (it has no anon_vma from a parent);
    /// otherwise both have the same anon_vma (and, in the model, the same chain).
    fn anon_vmas_joinable(&self, new: VmaId, old: VmaId) -> bool {
        let (n, o) = (self.vma(new), self.vma(old));
        match (n.anon_vma, o.anon_vma) {
            (None, None) => true,
            (None, Some(_)) => o.anon_vma_chain.len() == 1,
            (Some(_), None) => n.anon_vma_chain.len() == 1,
            (Some(_), Some(_)) => n.anon_vma == o.anon_vma && n.anon_vma_chain == o.anon_vma_chain,
        }
    }

    /// Whether the VMAs `vmas` (adjacent, in address order) could be one: each next to the
    /// next compatible, at most one anon_vma among them, and the merged range's page indexes
    /// inside what that anon_vma's 32-bit relative index reaches (`AnonVma::base`, rmap.rs).
    fn vmas_joinable(&self, vmas: &[VmaId]) -> bool {
        let pairs = vmas.windows(2).all(|w| {
            self.vmas_compatible(w[0], w[1])
                && (self.anon_vmas_joinable(w[0], w[1]) || self.anon_vmas_joinable(w[1], w[0]))
        });
        let mut avs: Vec<_> = vmas.iter().filter_map(|&v| self.vma(v).anon_vma).collect();
        avs.dedup();
        pairs && avs.len() <= 1 && self.anon_index_fits(vmas)
    }

    /// Whether the range of the adjacent VMAs `vmas` keeps its page indexes inside what the
    /// first anon_vma among them reaches with its 32-bit relative index (`AnonVma::base`).
    fn anon_index_fits(&self, vmas: &[VmaId]) -> bool {
        let (first, last) = (self.vma(vmas[0]), self.vma(vmas[vmas.len() - 1]));
        let pages = last.end.offset_from(first.start).as_u64() >> 12;
        vmas.iter().find_map(|&v| self.vma(v).anon_vma).is_none_or(|av| {
            let base = self.anon_vmas[av].base;
            first.pgoff >= base && first.pgoff + pages - base <= 1 << 32
        })
    }

    /// Gives `into` the anon_vma and chain of `from`, its neighbour about to be freed, when it
    /// has none (`dup_anon_vma` in `vma_merge`).
    fn vma_take_anon(&mut self, into: VmaId, from: VmaId) {
        let (av, chain) = (self.vma(from).anon_vma, self.vma(from).anon_vma_chain.clone());
        if self.vma(into).anon_vma.is_none() && av.is_some() {
            for &a in &chain {
                self.anon_vmas[a].vmas.push(into);
            }
            let v = self.vma_mut(into);
            (v.anon_vma, v.anon_vma_chain) = (av, chain);
        }
    }

    /// The merge of a new VMA `id` (a new mapping's, `vma_merge_new_range` in mm/vma.c from
    /// v6.12, the expansion in `mmap_region` and mm/mmap.c `vma_merge` before; a moved one's,
    /// `copy_vma`) with the VMA ending where it starts (when `with_prev`) and the one starting
    /// where it ends. The VMA below survives, else the one above; the others are freed. Returns
    /// the VMA that maps `id`'s range.
    pub(crate) fn vma_merge_new(&mut self, id: VmaId, with_prev: bool) -> VmaId {
        let (mm, start, end) = (self.vma(id).mm, self.vma(id).start, self.vma(id).end);
        let prev = self.find_vma(mm, VirtAddr(start.0.saturating_sub(1)));
        let prev = prev.filter(|&p| with_prev && self.vma(p).end == start);
        let next = self.mm(mm).vmas.get(&end.0).copied();
        let plans = [[prev, Some(id), next], [prev, Some(id), None], [None, Some(id), next]];
        let plan = plans.into_iter().find_map(|p| {
            let vmas: Vec<VmaId> = p.into_iter().flatten().collect();
            (vmas.len() > 1 && self.vmas_joinable(&vmas)).then_some(vmas)
        });
        let Some(vmas) = plan else { return id };
        let (first, last) = (vmas[0], vmas[vmas.len() - 1]);
        let survivor = if first == id { last } else { first };
        let (start, end, pgoff) =
            (self.vma(first).start, self.vma(last).end, self.vma(first).pgoff);
        for v in vmas.into_iter().filter(|&v| v != survivor) {
            self.vma_absorb(survivor, v);
        }
        self.vma_set_range(survivor, start, end, pgoff);
        survivor
    }

    /// Moves `from`'s anon_vma (if `into` has none: `dup_anon_vma`) and soft-dirty flag into
    /// `into`, its neighbour on either side, then drops `from` (`vma_detach`, `vma_free`: its
    /// file reference and `i_mmap` link go); the caller sets `into`'s range.
    fn vma_absorb(&mut self, into: VmaId, from: VmaId) {
        self.vma_take_anon(into, from);
        let soft = self.vma(from).flags.0 & VmFlags::SOFTDIRTY;
        self.vma_mut(into).flags.0 |= soft;
        self.vma_detach(from);
        self.vma_free(from);
    }

    /// Gives VMA `id` the range `[start, end)` from page `pgoff`, moving it in its mm's tree
    /// when its start changes (`vma_expand` lowering `vm_start`).
    fn vma_set_range(&mut self, id: VmaId, start: VirtAddr, end: VirtAddr, pgoff: u64) {
        let (mm, old) = (self.vma(id).mm, self.vma(id).start);
        if old != start {
            self.vma_detach(id);
            assert!(self.mm_mut(mm).vmas.insert(start.0, id).is_none(), "two VMAs at {start}");
        }
        let v = self.vma_mut(id);
        (v.start, v.end, v.pgoff) = (start, end, pgoff);
    }

    /// Takes a VMA out of its mm's tree (`vma_iter_clear`); it stays allocated until freed.
    pub(crate) fn vma_detach(&mut self, id: VmaId) {
        let (mm, start) = (self.vma(id).mm, self.vma(id).start);
        assert_eq!(self.mm_mut(mm).vmas.remove(&start.0), Some(id));
    }

    /// Frees a detached VMA (`remove_vma`): leaves `i_mmap` and its anon_vmas, drops its file.
    pub(crate) fn vma_free(&mut self, id: VmaId) {
        self.hugetlb_vm_op_close(id);
        if let Some(f) = self.vma(id).file {
            let inode = self.file(f).inode;
            self.inodes[inode].mapping.i_mmap.remove(&id);
            self.file_put(f);
        }
        self.unlink_anon_vmas(id);
        self.vmas[id] = None;
    }

    /// `fput`: drops a reference to an open file; the last one releases it.
    pub(crate) fn file_put(&mut self, f: FileId) {
        let file = self.file_mut(f);
        file.refs -= 1;
        if file.refs > 0 {
            return;
        }
        let (inode, mode) = (file.inode, file.mode);
        self.files[f] = None;
        if self.inodes[inode].fs.is_fifo() {
            self.pipe_release(inode, mode);
        }
        self.userfaultfd_release(inode);
        let i = &mut self.inodes[inode];
        if mode & crate::fs::fmode::WRITE != 0 {
            i.put_write_access();
        }
        i.refs -= 1;
        if i.refs == 0 {
            self.hugetlbfs_evict_inode(inode);
            self.shmem_evict_inode(inode);
        }
    }
}

/// The arguments of `mmap(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmapArgs {
    pub addr: Option<VirtAddr>,
    pub len: Bytes,
    pub prot: u32,
    pub flags: u32,
    pub fd: Option<i32>,
    pub offset: u64,
}

/// `do_mmap` of `mmap(2)`: the file, if any, is the descriptor's.
pub(crate) async fn do_mmap(cx: &Cx, pid: Pid, a: MmapArgs) -> Result<VirtAddr, Errno> {
    cx.charge(Cost::Syscall).await;
    let mapped = do_mmap_file(cx, pid, a, None).await;
    // The userfaultfd events of a `MAP_FIXED` mapping's unmap, once `mmap_lock` is dropped.
    crate::userfaultfd::events::userfaultfd_complete(cx).await;
    mapped
}

/// `do_mmap`, mapping `given` (a file the kernel opened itself, as `shmat` does) or, without
/// it, `a.fd`'s file. The checks run in the kernel's order (`mmap_early_checks`, then under
/// `mmap_lock` the address, then the type and the file), and the new VMA merges with its
/// neighbours where it can (`mmap_link`).
pub(crate) async fn do_mmap_file(
    cx: &Cx,
    pid: Pid,
    a: MmapArgs,
    given: Option<FileId>,
) -> Result<VirtAddr, Errno> {
    let k = cx.kernel().version;
    // `MAP_SHARED_VALIDATE` refuses the bits the others ignore: it checks the flags as given.
    let given_flags = a.flags;
    let a = mmap_known_flags(k, a);
    let huge = mmap_early_checks(cx, pid, &a, given)?;
    let unit = huge.map_or(Bytes::PAGE, |s| Bytes(s.bytes()));
    let len = a.len.align_up(unit).filter(|l| l.as_u64() <= TASK_SIZE).ok_or(Errno::ENOMEM)?;
    let fixed = a.flags & (map::FIXED | map::FIXED_NOREPLACE) != 0;
    let mm = cx.st().procs[pid].mm.ok_or(Errno::EINVAL)?;
    let backing = mmap_backing(&cx.st(), pid, &a, given, huge);
    let align = mapping_alignment(k, &a, len, backing).unwrap_or(unit);
    let lock = cx.st().mm(mm).mmap_lock;
    let _guard = lock.write(cx).await;
    cx.charge(Cost::VmaUpdate).await;
    if fixed {
        cx.st().check_fixed_area(mm, &a, len, unit, k)?;
    }
    let start = cx.st().get_unmapped_area(mm, &a, len, align)?;
    if fixed {
        // `mmap_region`'s unmap of what the new mapping replaces refuses a sealed VMA.
        crate::mseal::check_unmap(&cx.st(), mm, start, start + len)?;
    }
    if backing.flatten().is_some() && !file_mmap_ok(k, a.offset, len) {
        return Err(Errno::EOVERFLOW);
    }
    let shared = mmap_shared(k, &MmapArgs { flags: given_flags, ..a }, backing.flatten())?;
    let mut vm = calc_vm_flags(k, &a, cx.st().mm(mm).def_flags);
    if shared {
        vm |= VmFlags::SHARED | VmFlags::MAYSHARE;
    }
    let file = mmap_file(cx, pid, &a, given, huge, len, &mut vm)?;
    if !shared && vm & VmFlags::WRITE != 0 && file.is_none() {
        vm |= VmFlags::ACCOUNT;
    }
    vm = fs_mmap_flags(k, backing.flatten(), vm)?;
    if fixed {
        // `shmat`'s mapping (`given`) passes no list for userfaultfd events.
        if given.is_none() {
            let end = start + len;
            crate::userfaultfd::events::userfaultfd_unmap_prep(cx, &mut cx.st(), mm, start, end);
        }
        unmap_locked(cx, mm, start, start + len).await;
    }
    let mut vma = Vma {
        mm,
        start,
        end: start + len,
        flags: VmFlags(vm),
        pgoff: if file.is_some() { a.offset >> 12 } else { start.0 >> 12 },
        file,
        vm_ops: VmOps::of(&cx.st(), file),
        anon_vma: None,
        anon_vma_chain: Vec::new(),
        role: VmaRole::Plain,
        uffd: None,
    };
    vma.flags = crate::ksm::ksm_vma_flags(cx, mm, vma.flags, vma.vm_ops.is_dax());
    mmap_link(cx, vma).await?;
    drop(_guard);
    if mmap_populates(&a, vm) {
        crate::gup::populate(cx, mm, start, start + len).await;
    }
    Ok(start)
}

/// `file_mmap_ok` (v4.17, "mmap: introduce sane default mmap limits", be83bbf80682): a mapping
/// of `len` at byte `offset` of a file must end within `MAX_LFS_FILESIZE` (EOVERFLOW), which
/// every file mmsim models has as its limit. Before, only a page offset that wraps was refused,
/// which a 64-bit offset cannot make.
fn file_mmap_ok(k: KernelVersion, offset: u64, len: Bytes) -> bool {
    const MAX_LFS_FILESIZE: u64 = i64::MAX as u64;
    let room = MAX_LFS_FILESIZE.checked_sub(len.as_u64());
    !crate::era::has_file_mmap_ok(k) || room.is_some_and(|r| offset >> 12 <= r >> 12)
}

/// What a file system's `->mmap` does to the new VMA's flags `vm`: it may add some (a DAX
/// file's `ext4_file_mmap`: VM_HUGEPAGE asks for an address whose PMD colour matches the
/// offset's, `thp_get_unmapped_area`, so its faults can map 2 MiB at once) or refuse `VM_SYNC`
/// (EOPNOTSUPP). Approximation: the refusal comes before a `MAP_FIXED` mapping's unmap, where
/// the kernel's `->mmap` runs after it.
fn fs_mmap_flags(k: KernelVersion, fs: Option<FsType>, vm: u64) -> Result<u64, Errno> {
    let Some(fs) = fs else { return Ok(vm) };
    fs.mmap_check_sync(vm)?;
    Ok(vm | fs.mmap_vm_flags(k))
}

/// The flags as the kernel reads them: before v4.17 `MAP_FIXED_NOREPLACE` is an unknown bit
/// that `MAP_PRIVATE` and `MAP_SHARED` ignore (`era::has_map_fixed_noreplace`), so its address
/// is only a hint; before v4.15 so is `MAP_SYNC` (`era::has_map_shared_validate`).
fn mmap_known_flags(k: KernelVersion, mut a: MmapArgs) -> MmapArgs {
    if !crate::era::has_map_fixed_noreplace(k) {
        a.flags &= !map::FIXED_NOREPLACE;
    }
    if !crate::era::has_map_shared_validate(k) {
        a.flags &= !map::SYNC;
    }
    a
}

/// The checks before `do_mmap` looks for an address, in the kernel's order: the x86 `mmap`
/// syscall's offset alignment (EINVAL), `ksys_mmap_pgoff`'s descriptor lookup (EBADF) and
/// huge page size (`hugetlb_size_of_mmap`, EINVAL), then `do_mmap`'s zero length (EINVAL).
fn mmap_early_checks(
    cx: &Cx,
    pid: Pid,
    a: &MmapArgs,
    given: Option<FileId>,
) -> Result<Option<HugeSize>, Errno> {
    if !a.offset.is_multiple_of(4096) {
        return Err(Errno::EINVAL);
    }
    if a.flags & map::ANONYMOUS == 0 && cx.st().mapped_file(pid, a, given).is_none() {
        return Err(Errno::EBADF);
    }
    let huge = hugetlb_size_of_mmap(cx, pid, a, given)?;
    if a.len.as_u64() == 0 {
        return Err(Errno::EINVAL);
    }
    Ok(huge)
}

/// What backs a new mapping, for the address search and the file system's flags: `None` for
/// private anonymous memory, `Some(None)` for the kernel's own files (shared anonymous memory
/// on tmpfs, anonymous hugetlb), `Some(Some(fs))` for a file on `fs`.
fn mmap_backing(
    st: &KState,
    pid: Pid,
    a: &MmapArgs,
    given: Option<FileId>,
    huge: Option<HugeSize>,
) -> Option<Option<FsType>> {
    if a.flags & map::ANONYMOUS != 0 {
        return (a.flags & map::SHARED != 0 || huge.is_some()).then_some(None);
    }
    let f = st.mapped_file(pid, a, given)?;
    Some(Some(st.inodes[st.file(f).inode].fs))
}

/// Whether `do_mmap` populates the new mapping: `MAP_POPULATE` without `MAP_NONBLOCK`, or a
/// locked mapping that does not lock on fault.
fn mmap_populates(a: &MmapArgs, vm: u64) -> bool {
    let locked = vm & (VmFlags::LOCKED | VmFlags::LOCKONFAULT) == VmFlags::LOCKED;
    a.flags & (map::POPULATE | map::NONBLOCK) == map::POPULATE || locked
}

/// Whether the mapping is shared: `do_mmap`'s switch on the type (EINVAL without one), after
/// the address is found. `MAP_SHARED_VALIDATE` (v4.15) maps a file shared, EOPNOTSUPP for a flag
/// outside `LEGACY_MAP_MASK` and the file system's `mmap_supported_flags` (`backing`; anonymous
/// memory has no such type: EINVAL). The model also refuses unknown protection bits here
/// (EINVAL).
fn mmap_shared(k: KernelVersion, a: &MmapArgs, backing: Option<FsType>) -> Result<bool, Errno> {
    let file = a.flags & map::ANONYMOUS == 0;
    let shared = match a.flags & map::SHARED_VALIDATE {
        map::SHARED => true,
        map::PRIVATE => false,
        map::SHARED_VALIDATE if file && crate::era::has_map_shared_validate(k) => {
            let sync = backing.is_some_and(FsType::supports_map_sync);
            let supported = if sync { map::SYNC } else { 0 };
            if a.flags & !(map::LEGACY | supported) != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            true
        }
        _ => return Err(Errno::EINVAL),
    };
    if a.prot & !(prot::READ | prot::WRITE | prot::EXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(shared)
}

/// The huge page size of a hugetlb mapping (`ksys_mmap_pgoff`): `MAP_HUGETLB` with an
/// anonymous mapping (EINVAL for a size the machine has no pool for, or with a file that is not
/// on hugetlbfs), or any mapping of a hugetlbfs file. EOPNOTSUPP on a kernel whose hugetlb is not
/// modelled (the scenario layer names the missing change).
fn hugetlb_size_of_mmap(
    cx: &Cx,
    pid: Pid,
    a: &MmapArgs,
    given: Option<FileId>,
) -> Result<Option<HugeSize>, Errno> {
    let asked = a.flags & map::HUGETLB != 0;
    let size = if a.flags & map::ANONYMOUS != 0 {
        match asked {
            true => Some(HugeSize::of_map_flags(a.flags).ok_or(Errno::EINVAL)?),
            false => None,
        }
    } else {
        let st = cx.st();
        let size = st
            .mapped_file(pid, a, given)
            .and_then(|f| st.inodes[st.file(f).inode].fs.hugetlb_size());
        if asked && size.is_none() {
            return Err(Errno::EINVAL);
        }
        size
    };
    Ok(size)
}

/// The file a new mapping maps, with a reference taken: a hugetlbfs file for `MAP_HUGETLB`
/// (`hugetlb_file_setup`), a tmpfs file for shared anonymous memory (`shmem_zero_setup`), none
/// for private anonymous memory, or the descriptor's file. A hugetlb mapping's VMA gets
/// `VM_HUGETLB | VM_DONTEXPAND` (`hugetlbfs_file_mmap`), and `VM_NORESERVE` with
/// `MAP_NORESERVE`, which always counts for hugetlb (`do_mmap`).
fn mmap_file(
    cx: &Cx,
    pid: Pid,
    a: &MmapArgs,
    given: Option<FileId>,
    huge: Option<HugeSize>,
    len: Bytes,
    vm: &mut u64,
) -> Result<Option<FileId>, Errno> {
    if huge.is_some() {
        *vm |= VmFlags::HUGETLB | VmFlags::DONTEXPAND;
        if a.flags & map::NORESERVE != 0 {
            *vm |= VmFlags::NORESERVE;
        }
    }
    let (anon, shared) = (a.flags & map::ANONYMOUS != 0, a.flags & map::SHARED != 0);
    // Shared anonymous memory and anonymous hugetlb (a file by then) cannot grow down.
    if anon && (shared || huge.is_some()) && *vm & VmFlags::GROWSDOWN != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(match (anon, shared, huge) {
        (true, _, Some(size)) => {
            Some(crate::fs::hugetlbfs::hugetlb_file_setup(&mut cx.st(), cx, size, len.as_u64()))
        }
        (true, true, None) => Some(cx.st().shmem_zero_setup(cx, len.as_u64())),
        (true, false, None) => None,
        (false, _, _) => Some(cx.st().mmap_file_get(pid, a, given, shared, vm)?),
    })
}

/// Links a new VMA (a file's under its `i_mmap_rwsem` for write) and, for a hugetlbfs file,
/// runs `hugetlbfs_file_mmap` (alignment, reservation), undoing the link when that fails; then
/// merges it with its neighbours (`vma_merge_new`).
async fn mmap_link(cx: &Cx, vma: Vma) -> Result<(), Errno> {
    let i_mmap = vma.file.map(|f| {
        let st = cx.st();
        st.inodes[st.file(f).inode].mapping.i_mmap_rwsem
    });
    let _g = match i_mmap {
        Some(l) => Some(l.write(cx).await),
        None => None,
    };
    let hugetlb = vma.flags.has(VmFlags::HUGETLB);
    let id = cx.st().vma_link(vma);
    cx.st().mmap_locked_fixup(id);
    let reserved = if hugetlb { cx.st().hugetlbfs_file_mmap(id) } else { Ok(()) };
    if let Err(e) = reserved {
        let mut st = cx.st();
        st.vma_detach(id);
        st.vma_free(id);
        return Err(e);
    }
    let id = cx.st().vma_merge_new(id, true);
    // `shmem_mmap` registers shmem VMAs itself (`khugepaged_enter`, v4.8 f3f0e1d2150b).
    let shmem = cx.st().vma_shmem_inode(id).is_some();
    if crate::era::mmap_registers_khugepaged(cx.kernel().version) || shmem {
        crate::khugepaged::khugepaged_enter_vma(cx, id);
    }
    Ok(())
}

/// `calc_vm_prot_bits` and `calc_vm_flag_bits`: the VMA flags an mmap's protection and flags
/// ask for, with the mm's `def_flags` (`VM_NOHUGEPAGE` after `PR_SET_THP_DISABLE` before
/// v4.13), before the file has its say.
fn calc_vm_flags(k: KernelVersion, a: &MmapArgs, def_flags: u64) -> u64 {
    let mut vm = VmFlags::MAYREAD
        | VmFlags::MAYWRITE
        | VmFlags::MAYEXEC
        | VmFlags::SOFTDIRTY
        | def_flags
        | calc_vm_prot_bits(a.prot);
    if a.flags & map::GROWSDOWN != 0 {
        vm |= VmFlags::GROWSDOWN;
    }
    if a.flags & map::LOCKED != 0 {
        vm |= VmFlags::LOCKED;
    }
    // `MAP_SYNC` gives `VM_SYNC` whatever the type: `MAP_SHARED` drops the flag only after
    // `calc_vm_flag_bits` has read it, so the file system's `->mmap` still sees it.
    if a.flags & map::SYNC != 0 {
        vm |= VmFlags::SYNC;
    }
    if a.flags & map::STACK != 0 && crate::era::map_stack_nohugepage(k) {
        vm |= VmFlags::NOHUGEPAGE;
    }
    vm
}

impl KState {
    /// The file a mapping maps: the one the kernel gave, or `a.fd`'s.
    fn mapped_file(&self, pid: Pid, a: &MmapArgs, given: Option<FileId>) -> Option<FileId> {
        given.or_else(|| a.fd.and_then(|fd| self.procs[pid].fds.get(&fd).copied()))
    }

    /// The file an mmap maps, with a reference taken: the checks of `do_mmap` against the open
    /// file's mode, in its order (a shared writable mapping of a file not open for write, then
    /// a file not open for read: EACCES; no `->mmap`: ENODEV); a shared mapping of a file not
    /// open for write loses VM_MAYWRITE.
    fn mmap_file_get(
        &mut self,
        pid: Pid,
        a: &MmapArgs,
        given: Option<FileId>,
        shared: bool,
        vm: &mut u64,
    ) -> Result<FileId, Errno> {
        let f = self.mapped_file(pid, a, given).ok_or(Errno::EBADF)?;
        let file = self.file(f);
        if shared && !file.writable() && a.prot & prot::WRITE != 0 {
            return Err(Errno::EACCES);
        }
        if !file.readable() {
            return Err(Errno::EACCES);
        }
        if !self.inodes[file.inode].fs.has_mmap() {
            return Err(Errno::ENODEV);
        }
        // A file mapping cannot grow down (`do_mmap`, after the file's checks).
        if *vm & VmFlags::GROWSDOWN != 0 {
            return Err(Errno::EINVAL);
        }
        // A file opened without write access is mapped `VM_MAYSHARE` only: neither
        // `VM_SHARED` nor `VM_MAYWRITE` (`do_mmap`), so smaps shows no `sh` and `mprotect`
        // cannot make it writable.
        if shared && !file.writable() {
            *vm &= !(VmFlags::MAYWRITE | VmFlags::WRITE | VmFlags::SHARED);
        }
        self.file_mut(f).refs += 1;
        Ok(f)
    }

    /// `get_unmapped_area`: MAP_FIXED's address as given (checked by `check_fixed_area`), the
    /// hint if it is free, otherwise the first gap of `len` at `align`. A hint below
    /// `mmap_min_addr` is raised to it (`round_hint_to_min`) and an unaligned one rounded down
    /// (x86's `arch_get_unmapped_area_topdown`).
    pub(crate) fn get_unmapped_area(
        &self,
        mm: MmId,
        a: &MmapArgs,
        len: Bytes,
        align: Bytes,
    ) -> Result<VirtAddr, Errno> {
        let fixed = a.flags & (map::FIXED | map::FIXED_NOREPLACE) != 0;
        let fits = |h: VirtAddr| h.0 >= MMAP_MIN && h.0 + len.as_u64() <= TASK_SIZE;
        let hint = a.addr.filter(|h| h.0 != 0).map(|h| VirtAddr(h.0.max(MMAP_MIN) & !0xfff));
        match hint {
            Some(h) if fixed => Ok(h),
            Some(h) if fits(h) && !self.range_taken(mm, h, len) => Ok(h),
            _ => self
                .mm(mm)
                .unmapped_area(len, align, |id| (self.vma(id).start, self.vma(id).end))
                .ok_or(Errno::ENOMEM),
        }
    }

    /// Whether a VMA overlaps `[start, start + len)`.
    fn range_taken(&self, mm: MmId, start: VirtAddr, len: Bytes) -> bool {
        !self.mm(mm).vmas_in(start, start + len, |id| self.vma(id).end).is_empty()
    }

    /// The checks of a MAP_FIXED address, in `do_mmap`'s order: a hugetlb file's alignment
    /// (`hugetlb_get_unmapped_area`, EINVAL), the range inside user space (`__get_unmapped_area`,
    /// ENOMEM), the page alignment (EINVAL), an address below `mmap_min_addr` (where
    /// `security_mmap_addr` checks it; ENOMEM in the model, EPERM without `CAP_SYS_RAWIO`), then `MAP_FIXED_NOREPLACE`'s overlap (EEXIST): any VMA in the range from v4.19,
    /// only one containing the address in v4.17 and v4.18
    /// (`era::map_fixed_noreplace_checks_whole_range`), so one starting inside is unmapped.
    fn check_fixed_area(
        &self,
        mm: MmId,
        a: &MmapArgs,
        len: Bytes,
        unit: Bytes,
        k: KernelVersion,
    ) -> Result<(), Errno> {
        let h = a.addr.ok_or(Errno::EINVAL)?;
        if unit != Bytes::PAGE && !h.is_aligned(unit) {
            return Err(Errno::EINVAL);
        }
        if h.0.checked_add(len.as_u64()).is_none_or(|e| e > TASK_SIZE) {
            return Err(Errno::ENOMEM);
        }
        if !h.is_aligned(Bytes::PAGE) {
            return Err(Errno::EINVAL);
        }
        if h.0 < MMAP_MIN {
            return Err(Errno::ENOMEM);
        }
        let clash = match crate::era::map_fixed_noreplace_checks_whole_range(k) {
            true => self.range_taken(mm, h, len),
            false => self.find_vma(mm, h).is_some(),
        };
        if a.flags & map::FIXED_NOREPLACE != 0 && clash {
            return Err(Errno::EEXIST);
        }
        Ok(())
    }
}

/// The 2 MiB alignment `__get_unmapped_area` gives a mapping of `len` bytes that
/// `thp_get_unmapped_area` places (`None` otherwise): one that spans a whole 2 MiB of its file
/// offsets, placed at an address of the offset's PMD colour. That is a file whose file system
/// asks for it ([`FsType::thp_unmapped_area`]: DAX, and ext4 and XFS from v5.18), and from v6.8 a
/// private anonymous mapping (`era::anon_mapping_thp_align`: at least 2 MiB long, and from
/// v6.12 a multiple of 2 MiB asked without a hint). Approximations: only an offset that is
/// itself 2 MiB-aligned is placed (the kernel also places other colours), the gap needs room
/// for the aligned mapping rather than for `len` plus 2 MiB, and a shared anonymous mapping
/// (`shmem_get_unmapped_area`) is not aligned.
fn mapping_alignment(
    k: KernelVersion,
    a: &MmapArgs,
    len: Bytes,
    backing: Option<Option<FsType>>,
) -> Option<Bytes> {
    use crate::era::AnonThpAlign;
    let whole_pmd = len >= Bytes::PMD && a.offset.is_multiple_of(Bytes::PMD.as_u64());
    let aligned = match backing {
        Some(None) => false,
        Some(Some(fs)) => fs.thp_unmapped_area(k) && whole_pmd,
        None => match crate::era::anon_mapping_thp_align(k) {
            AnonThpAlign::Never => false,
            AnonThpAlign::AtLeastPmd => whole_pmd,
            AnonThpAlign::PmdMultiple => {
                a.addr.is_none() && len.as_u64().is_multiple_of(Bytes::PMD.as_u64())
            }
        },
    };
    aligned.then_some(Bytes::PMD)
}

impl KState {
    /// `shmem_zero_setup`: a tmpfs inode backing a shared anonymous mapping.
    fn shmem_zero_setup(&mut self, handle: &engine::Handle, size: u64) -> FileId {
        let inode = self.new_inode(
            handle,
            "/dev/zero (deleted)".into(),
            FsType::Tmpfs(crate::types::fs::TmpfsMount::ShmMnt),
            size,
            None,
        );
        self.open_file(inode, crate::fs::fmode::READ | crate::fs::fmode::WRITE, false, false)
            .expect("a new tmpfs inode is never write-denied")
    }
}

/// `vma_merge` after `[start, end)`'s flags changed (`vma_modify_flags`, mm/vma.c v6.8;
/// mm/mmap.c `vma_merge` before): each VMA there, and the neighbours at its edges, merges
/// with the next when `is_mergeable_vma` and `is_mergeable_anon_vma` would let it
/// (`KState::vmas_mergeable_after_change`): compatible VMAs (`vmas_compatible`) with the same
/// anon_vma and chain, or where one has none: a changed VMA without an anon_vma joins a
/// neighbour whose chain is a single link (every era: mm/mmap.c v6.8, mm/vma.c v6.12 and
/// v6.18), and one with an anon_vma (its chain a single link) joins a neighbour without from
/// v6.16 (`era::anon_merge_into_unfaulted`). The VMA below survives and takes the anon_vma.
/// A merge that frees a file VMA holds the file's `i_mmap_rwsem` for write, as `vma_prepare`
/// does around the tree update, so that a walker of `i_mmap` sleeping under the read lock
/// (`unmap_mapping_range`) never meets the freed VMA.
pub(crate) async fn vma_merge_range(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    let lo = VirtAddr(start.0.saturating_sub(1));
    let hi = VirtAddr(end.0.saturating_add(1).min(TASK_SIZE));
    let k = cx.kernel().version;
    let vmas = {
        let st = cx.st();
        st.mm(mm).vmas_in(lo, hi, |id| st.vma(id).end)
    };
    let mut prev: Option<VmaId> = None;
    for v in vmas {
        // The VMA whose flags changed is the kernel's `middle` (the source), its neighbour
        // the target: `v` when it starts inside the range, else `prev` (merging with `next`).
        let changed_is_v = cx.st().vma(v).start < end;
        let Some(p) = prev.filter(|&p| cx.st().vmas_mergeable_after_change(p, v, changed_is_v, k))
        else {
            prev = Some(v);
            continue;
        };
        let _g = file_rmap_write(cx, v).await;
        let mut st = cx.st();
        let end = st.vma(v).end;
        st.vma_take_anon(p, v);
        st.vma_detach(v);
        st.vma_free(v);
        st.vma_mut(p).end = end;
    }
}

/// The `i_mmap_rwsem` of the file `v` maps, held for write (`vma_prepare`, `unlink_file_vma`):
/// freeing or reshaping a file VMA excludes the walkers of the file's `i_mmap`. `None` for a VMA
/// without a file.
pub(crate) async fn file_rmap_write(cx: &Cx, v: VmaId) -> Option<engine::LockGuard<'_>> {
    let i_mmap = {
        let st = cx.st();
        st.vma(v).file.map(|f| st.inodes[st.file(f).inode].mapping.i_mmap_rwsem)
    };
    match i_mmap {
        Some(l) => Some(l.write(cx).await),
        None => None,
    }
}

/// Unmaps `[start, end)` of `mm` while the caller holds `mmap_lock` for write.
pub(crate) async fn unmap_locked(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    split_huge_pmd_edges(cx, mm, start, end).await;
    let vmas = cx.st().vma_split_range(mm, start, end);
    for &v in &vmas {
        cx.st().vma_detach(v);
        cx.st().hugetlb_vma_dying(v);
    }
    for &v in &vmas {
        let (s, e) = cx.st().vma_range(v);
        zap_vma_range(cx, mm, v, s, e, ZapDetails::UNMAP).await;
    }
    cx.st().free_pgtables(mm, start, end);
    for v in vmas {
        let _g = file_rmap_write(cx, v).await;
        cx.charge(Cost::VmaUpdate).await;
        cx.st().vma_free(v);
    }
}

/// `munmap(2)`.
pub(crate) async fn do_munmap(cx: &Cx, mm: MmId, addr: VirtAddr, len: Bytes) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    let (start, end) = user_range(addr, len)?;
    let lock = cx.st().mm(mm).mmap_lock;
    let g = lock.write(cx).await;
    let unmapped = munmap_locked(cx, mm, start, end).await;
    cx.st().mlock_drain();
    drop(g);
    crate::userfaultfd::events::userfaultfd_complete(cx).await;
    unmapped
}

/// `do_munmap` under `mmap_lock` held for write: EPERM where a VMA of the range is sealed
/// (`mseal.rs`), EINVAL where a hugetlb VMA would be split inside a huge page, else unmaps
/// `[start, end)`.
pub(crate) async fn munmap_locked(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let sealed = crate::mseal::check_unmap(&cx.st(), mm, start, end);
    if let Err(e) = sealed {
        crate::mseal::split_refused_unmap(cx, mm, start).await;
        return Err(e);
    }
    crate::hugetlb::hugetlb_split_prepare(cx, mm, start, end).await?;
    crate::userfaultfd::events::userfaultfd_unmap_prep(cx, &mut cx.st(), mm, start, end);
    unmap_locked(cx, mm, start, end).await;
    Ok(())
}

/// The VMAs of `[start, end)` in address order up to its first unmapped gap, and whether there
/// is one (the walks of `apply_vma_lock_flags` and `do_mprotect_pkey`).
pub(crate) fn vmas_before_hole(
    st: &KState,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
) -> (Vec<VmaId>, bool) {
    let mut at = start;
    let mut vmas = Vec::new();
    for v in st.mm(mm).vmas_in(start, end, |id| st.vma(id).end) {
        if st.vma(v).start > at {
            return (vmas, true);
        }
        at = st.vma(v).end;
        vmas.push(v);
    }
    (vmas, at < end)
}

/// `mprotect(2)`.
pub(crate) async fn do_mprotect(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: Bytes,
    new_prot: u32,
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    // `do_mprotect_pkey`: an empty range succeeds before the protection is looked at; a
    // wrapping one is ENOMEM.
    let Some((start, end)) = range_or_empty(addr, len, Errno::ENOMEM)? else { return Ok(()) };
    if new_prot & !(prot::READ | prot::WRITE | prot::EXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    let k = cx.kernel().version;
    let (end, stopped) = mprotect_reach(&cx.st(), k, mm, start, end, new_prot)?;
    if end > start {
        mprotect_apply(cx, mm, start, end, new_prot).await?;
    }
    stopped.map_or(Ok(()), Err)
}

/// Whether `mprotect_fixup` populates a VMA with flags `old` given `new_prot` (from v4.5,
/// "mm: fix mprotect() behaviour on VM_LOCKED VMAs", 36f881883c57): a private locked VMA that
/// becomes writable has its COW broken at once (`populate_vma_page_range`), so that a write to
/// it later does not fault. Approximation: the model populates after the whole range's
/// protection is changed and the VMAs merged, the kernel VMA by VMA.
fn breaks_cow_ahead(k: KernelVersion, old: VmFlags, new_prot: u32) -> bool {
    let private_locked = old.0 & (VmFlags::WRITE | VmFlags::SHARED | VmFlags::LOCKED);
    crate::era::mprotect_populates_locked(k)
        && private_locked == VmFlags::LOCKED
        && new_prot & prot::WRITE != 0
}

/// How far `do_mprotect_pkey`'s walk over the VMAs gets (mm/mprotect.c; the same loop in every
/// era mmsim runs): ENOMEM at once when no VMA holds `start`, then EPERM at once for a sealed
/// VMA in the range in v6.10-v6.11; otherwise the end of the last VMA it changes before a gap
/// (ENOMEM), a VMA that cannot take the protection (EACCES) or, from v6.12, a sealed one
/// (EPERM; `mseal.rs`), with that error. The VMAs before the stop keep their new protection.
fn mprotect_reach(
    st: &KState,
    k: KernelVersion,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    new_prot: u32,
) -> Result<(VirtAddr, Option<Errno>), Errno> {
    let (vmas, hole) = vmas_before_hole(st, mm, start, end);
    if vmas.is_empty() {
        return Err(Errno::ENOMEM);
    }
    crate::mseal::check_mprotect_range(st, k, mm, start, end)?;
    let mut reach = start;
    for v in vmas {
        if new_prot & prot::WRITE != 0 && !st.vma(v).flags.has(VmFlags::MAYWRITE) {
            return Ok((reach, Some(Errno::EACCES)));
        }
        if crate::mseal::refuses_mprotect(st, k, v) {
            return Ok((reach, Some(Errno::EPERM)));
        }
        reach = st.vma(v).end.min(end);
    }
    Ok((reach, hole.then_some(Errno::ENOMEM)))
}

/// `mprotect_fixup` over every VMA of the mapped range `[start, end)`: splits, new flags, the
/// page tables changed, one TLB flush, and the merges.
async fn mprotect_apply(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    new_prot: u32,
) -> Result<(), Errno> {
    crate::hugetlb::hugetlb_split_prepare(cx, mm, start, end).await?;
    split_huge_pmd_edges(cx, mm, start, end).await;
    let vmas = cx.st().vma_split_range(mm, start, end);
    let (mut changed, mut cow_ahead) = (0, Vec::new());
    let kernel = cx.kernel().version;
    for v in vmas {
        let hugetlb = {
            let mut st = cx.st();
            let old = st.vma(v).flags;
            if breaks_cow_ahead(kernel, old, new_prot) {
                cow_ahead.push((st.vma(v).start, st.vma(v).end));
            }
            let access = VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC;
            let f = old.0 & !access | calc_vm_prot_bits(new_prot);
            // `mprotect_fixup`: nothing to do when the flags do not change.
            if f == old.0 {
                continue;
            }
            st.vma_mut(v).flags = VmFlags(f);
            let hugetlb = st.vma(v).vm_ops.is_hugetlb();
            if !hugetlb {
                changed += change_protection(&mut st, kernel, v);
            }
            hugetlb
        };
        if hugetlb {
            changed += crate::hugetlb::unmap::hugetlb_change_protection(cx, v).await;
        }
    }
    cx.charge_n(Cost::PteUpdate, changed).await;
    flush_tlb_range(cx, mm, start, end).await;
    // `mprotect_fixup`'s `vma_merge`: VMAs whose flags now match their neighbours' join them.
    vma_merge_range(cx, mm, start, end).await;
    for (from, to) in cow_ahead {
        let vma = cx.st().find_vma(mm, from).expect("the range is still mapped");
        // Errors are ignored, as `mprotect_fixup` ignores them.
        let _ = crate::gup::populate_vma_range(cx, mm, vma, (from, to)).await;
    }
    Ok(())
}

/// `vma_wants_writenotify` as `mprotect_fixup` asks it: the model's write notification, or
/// soft-dirty tracking of a shared writable mapping (64e455079e1b; the fault path does not
/// model this clause yet).
fn mprotect_wants_writenotify(st: &KState, v: VmaId) -> bool {
    let flags = st.vma(v).flags;
    let shared_writable = flags.has(VmFlags::SHARED) && flags.has(VmFlags::WRITE);
    wants_writenotify(st, v) || (shared_writable && !flags.has(VmFlags::SOFTDIRTY))
}

/// `change_protection` for one VMA after its flags changed; returns the PTEs visited.
fn change_protection(st: &mut KState, kernel: KernelVersion, v: VmaId) -> u64 {
    let (mm, start, end, flags) = {
        let vma = st.vma(v);
        (vma.mm, vma.start, vma.end, vma.flags)
    };
    let accessible = flags.has(VmFlags::READ | VmFlags::WRITE | VmFlags::EXEC);
    // `vm_page_prot` is writable only in a shared writable mapping without write notification;
    // elsewhere `vma_wants_manual_pte_write_upgrade` asks `can_change_pte_writable` per PTE.
    let notify = mprotect_wants_writenotify(st, v);
    let shared = flags.has(VmFlags::SHARED);
    let prot_writable = flags.has(VmFlags::WRITE) && shared && !notify;
    let try_upgrade = flags.has(VmFlags::WRITE) && (!shared || notify);
    let pgd = st.mm(mm).pgd;
    let mut n = 0;
    let mut addr = start;
    while addr < end {
        // A DAX huge PMD (wholly inside: the edges were split) changes like a PTE.
        let huge = st.pt.pmd_slot(pgd, addr).and_then(|(t, i)| match st.pt.upper(t, i) {
            Upper::Leaf(leaf) => Some((t, i, leaf)),
            _ => None,
        });
        if let Some((t, i, leaf)) = huge {
            let keep = leaf.0
                & (Pte::DIRTY | Pte::ACCESSED | Pte::SOFT_DIRTY | Pte::SPECIAL | Pte::PSE)
                | leaf.0 & Pte::UFFD_WP;
            let writable = flags.has(VmFlags::WRITE) && leaf.write();
            let bits = pte_bits(flags, writable, false) & !Pte::ACCESSED | keep;
            let mut new = Pte::new(leaf.pfn(), bits);
            if !accessible {
                new = new.without(Pte::USER);
            }
            st.pt.set_upper(t, i, Upper::Leaf(new));
            n += 1;
            addr = addr.align_down(Bytes::PMD) + Bytes::PMD;
            continue;
        }
        let Some((t, i)) = st.pt.pte_slot(pgd, addr) else {
            // `change_pmd_range` skips an empty PMD (and its callers an empty PUD) at once.
            addr = st.pt.skip_empty(pgd, addr);
            continue;
        };
        let pte = st.pt.pte(t, i);
        if pte.is_present() {
            // `pte_modify` keeps these bits and takes the rest from `vm_page_prot`.
            let keep = pte.0
                & (Pte::DIRTY | Pte::ACCESSED | Pte::SOFT_DIRTY | Pte::SPECIAL | Pte::UFFD_WP);
            let writable = prot_writable
                || (try_upgrade && crate::cow::can_change_pte_writable(st, kernel, flags, pte));
            let mut new =
                Pte::new(pte.pfn(), pte_bits(flags, writable, false) & !Pte::ACCESSED | keep);
            if !accessible {
                new = new.without(Pte::USER);
            }
            st.pt.set_pte(t, i, new);
            n += 1;
        }
        addr = addr + Bytes::PAGE;
    }
    n
}

/// The VMA flags `advice` leaves (`madvise_update_vma`'s new flags): the access pattern, the
/// fork behaviour, `VM_DONTDUMP`, or `VM_HUGEPAGE`/`VM_NOHUGEPAGE` (`hugepage_madvise`). EINVAL
/// for `MADV_WIPEONFORK` on a file or shared VMA and for `MADV_DODUMP` on a `VM_SPECIAL` one
/// that is not hugetlb (`madvise_vma_behavior`).
fn madvise_update_vm_flags(f: VmFlags, file_backed: bool, advice: u32) -> Result<VmFlags, Errno> {
    let set = |bit: u64, on: bool| Ok(VmFlags(if on { f.0 | bit } else { f.0 & !bit }));
    let pattern = match advice {
        madv::HUGEPAGE | madv::NOHUGEPAGE => {
            return Ok(crate::huge_memory::policy::hugepage_madvise(f, advice == madv::HUGEPAGE));
        }
        madv::DONTFORK | madv::DOFORK => return set(VmFlags::DONTCOPY, advice == madv::DONTFORK),
        madv::DODUMP if f.has(VmFlags::SPECIAL) && !f.has(VmFlags::HUGETLB) => {
            return Err(Errno::EINVAL);
        }
        madv::DONTDUMP | madv::DODUMP => return set(VmFlags::DONTDUMP, advice == madv::DONTDUMP),
        madv::WIPEONFORK if file_backed || f.has(VmFlags::SHARED) => return Err(Errno::EINVAL),
        madv::WIPEONFORK | madv::KEEPONFORK => {
            return set(VmFlags::WIPEONFORK, advice == madv::WIPEONFORK);
        }
        madv::RANDOM => VmFlags::RAND_READ,
        madv::SEQUENTIAL => VmFlags::SEQ_READ,
        _ => 0,
    };
    Ok(VmFlags((f.0 & !(VmFlags::SEQ_READ | VmFlags::RAND_READ)) | pattern))
}

/// The advice that changes VMA flags, under `mmap_lock` for write (`madvise_update_vma`): splits
/// the VMAs at the range's edges and sets their new flags; `MADV_HUGEPAGE` registers them with
/// khugepaged (`hugepage_madvise`).
async fn madvise_update_vmas(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    advice: u32,
) -> Result<(), Errno> {
    let (refused, unmapped) = {
        let st = cx.st();
        let (vmas, unmapped) = crate::madvise::walk_vmas(&st, mm, start, end);
        (refused_from(&st, vmas, advice), unmapped)
    };
    let end = refused.map_or(end, |at| at.max(start));
    if end > start {
        madvise_apply_flags(cx, mm, start, end, advice).await?;
    }
    if refused.is_some() { Err(Errno::EINVAL) } else { unmapped }
}

/// Where the VMA walk meets the first VMA the advice refuses (`MADV_WIPEONFORK` on a file or
/// shared VMA, `MADV_DODUMP` on a special one): the VMAs before it are changed, the rest are
/// not.
fn refused_from(st: &KState, vmas: Vec<VmaId>, advice: u32) -> Option<VirtAddr> {
    vmas.into_iter().find_map(|v| {
        let vma = st.vma(v);
        madvise_update_vm_flags(vma.flags, vma.file.is_some(), advice).err().map(|_| vma.start)
    })
}

/// Splits the VMAs at the edges of `[start, end)` and gives them the advice's flags.
async fn madvise_apply_flags(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    advice: u32,
) -> Result<(), Errno> {
    crate::hugetlb::hugetlb_split_prepare(cx, mm, start, end).await?;
    split_huge_pmd_edges(cx, mm, start, end).await;
    let vmas = cx.st().vma_split_range(mm, start, end);
    for v in vmas {
        let (f, file_backed, shmem) = {
            let st = cx.st();
            (st.vma(v).flags, st.vma(v).file.is_some(), st.vma_shmem_inode(v).is_some())
        };
        // A shmem VMA is registered by its flags before the update (`era` note).
        let before = shmem && crate::era::madvise_registers_before_flags(cx.kernel().version);
        let flags = madvise_update_vm_flags(f, file_backed, advice)?;
        if advice == madv::HUGEPAGE && before {
            crate::khugepaged::khugepaged_enter_vma(cx, v);
        }
        cx.st().vma_mut(v).flags = flags;
        if advice == madv::HUGEPAGE && !before {
            crate::khugepaged::khugepaged_enter_vma(cx, v);
        }
    }
    // `madvise_update_vma`'s `vma_merge`.
    vma_merge_range(cx, mm, start, end).await;
    Ok(())
}

/// Whether `advice` only changes VMA flags (`madvise_update_vma`): the access pattern, THP,
/// core dump and fork advice.
fn updates_vm_flags(advice: u32) -> bool {
    matches!(
        advice,
        madv::NORMAL
            | madv::RANDOM
            | madv::SEQUENTIAL
            | madv::HUGEPAGE
            | madv::NOHUGEPAGE
            | madv::DONTFORK
            | madv::DOFORK
            | madv::DONTDUMP
            | madv::DODUMP
            | madv::WIPEONFORK
            | madv::KEEPONFORK
    )
}

/// `madvise_behavior_valid`: whether `kernel` has `advice` (among those mmsim models; the
/// memory-failure advice is refused by name before it reaches the model).
/// An advice it lacks is EINVAL before anything else is checked.
fn madvise_behavior_valid(kernel: KernelVersion, advice: u32) -> bool {
    use crate::era;
    match advice {
        madv::WIPEONFORK | madv::KEEPONFORK => era::has_madv_wipeonfork(kernel),
        a if updates_vm_flags(a) => true,
        madv::DONTNEED | madv::WILLNEED | madv::REMOVE => true,
        madv::MERGEABLE | madv::UNMERGEABLE => true,
        madv::DONTNEED_LOCKED => era::has_madv_dontneed_locked(kernel),
        madv::COLD | madv::PAGEOUT => era::has_madv_cold_pageout(kernel),
        madv::COLLAPSE => era::has_madv_collapse(kernel),
        madv::FREE => era::has_madv_free(kernel),
        madv::POPULATE_READ | madv::POPULATE_WRITE => era::has_madv_populate(kernel),
        madv::GUARD_INSTALL | madv::GUARD_REMOVE => era::has_madv_guard(kernel),
        _ => false,
    }
}

/// The first VMA of `mm` overlapping `[at, end)`.
fn vma_within(st: &KState, mm: MmId, at: VirtAddr, end: VirtAddr) -> Option<VmaId> {
    if at >= end {
        return None;
    }
    st.mm(mm).vmas_in(at, end, |id| st.vma(id).end).first().copied()
}

/// `MADV_DONTNEED` (`madvise_dontneed_single_vma`): zaps the range VMA by VMA under
/// `mmap_lock` for read; `locked` (`MADV_DONTNEED_LOCKED`) also the pages of `VM_LOCKED` VMAs.
async fn madvise_dontneed(
    cx: &Cx,
    mm: MmId,
    (start, end): (VirtAddr, VirtAddr),
    locked: bool,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let mut g = lock.read(cx).await;
    let unmapped = crate::madvise::walk_vmas(&cx.st(), mm, start, end).1;
    let mut at = start;
    loop {
        let next = vma_within(&cx.st(), mm, at, end);
        let Some(mut v) = next else { break };
        let range = cx.st().madvise_dontneed_range(v, at, end, locked)?;
        if let Some((vs, mut ve)) = range {
            // `userfaultfd_remove`: `UFFD_EVENT_REMOVE` sent without `mmap_lock`, then the VMA
            // looked up again (ENOMEM if it went) and checked again.
            let remove = crate::userfaultfd::events::userfaultfd_remove_ctx(&cx.st(), v);
            if let Some(ctx) = remove {
                drop(g);
                crate::userfaultfd::events::userfaultfd_remove(cx, ctx, vs, ve).await;
                g = lock.read(cx).await;
                v = vma_within(&cx.st(), mm, vs, vs + Bytes::PAGE).ok_or(Errno::ENOMEM)?;
                let again = cx.st().madvise_dontneed_range(v, vs, ve, locked)?;
                let Some((_, e)) = again else { return unmapped };
                ve = e;
            }
            zap_vma_range(cx, mm, v, vs, ve, ZapDetails::default()).await;
        }
        at = cx.st().vma(v).end;
    }
    drop(g);
    unmapped
}

/// `madvise(2)` for the advice modelled so far.
pub(crate) async fn do_madvise(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: Bytes,
    advice: u32,
) -> Result<(), Errno> {
    cx.charge(Cost::Syscall).await;
    let k = cx.kernel().version;
    if !madvise_behavior_valid(k, advice) {
        return Err(Errno::EINVAL);
    }
    // An empty range succeeds; a wrapping one is EINVAL.
    let Some((start, end)) = range_or_empty(addr, len, Errno::EINVAL)? else { return Ok(()) };
    let stop = crate::mseal::madvise_stop(&cx.st(), k, mm, start, end, advice)?;
    let Some(at) = stop else { return madvise_range(cx, mm, start, end, advice).await };
    // v6.12+: the VMAs before the sealed one take the advice; the walk's error wins over a gap's.
    if at > start {
        match madvise_range(cx, mm, start, at, advice).await {
            Err(e) if e != Errno::ENOMEM => return Err(e),
            _ => {}
        }
    }
    Err(Errno::EPERM)
}

/// The advice over `[start, end)`, dispatched by kind.
async fn madvise_range(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    advice: u32,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    match advice {
        madv::DONTNEED | madv::DONTNEED_LOCKED => {
            madvise_dontneed(cx, mm, (start, end), advice == madv::DONTNEED_LOCKED).await
        }
        madv::COLD | madv::PAGEOUT => {
            crate::madvise::madvise_cold_or_pageout(cx, mm, start, end, advice == madv::PAGEOUT)
                .await
        }
        a if updates_vm_flags(a) => {
            let _g = lock.write(cx).await;
            madvise_update_vmas(cx, mm, start, end, advice).await
        }
        madv::COLLAPSE => crate::khugepaged::madvise_collapse(cx, mm, start, end).await,
        madv::FREE => {
            // v4.5-v4.11: `MADV_DONTNEED` when no swap slot is free (`era::lazyfree_on_anon_lru`).
            if crate::era::lazyfree_on_anon_lru(cx.kernel().version) && cx.st().swap.nr_free() == 0
            {
                return madvise_dontneed(cx, mm, (start, end), false).await;
            }
            crate::madvise::madvise_free(cx, mm, start, end).await
        }
        madv::WILLNEED => crate::madvise::madvise_willneed(cx, mm, start, end).await,
        madv::REMOVE => crate::madvise::madvise_remove(cx, mm, start, end).await,
        madv::MERGEABLE | madv::UNMERGEABLE => {
            crate::ksm::ksm_madvise(cx, mm, start, end, advice == madv::MERGEABLE).await
        }
        madv::POPULATE_READ | madv::POPULATE_WRITE => {
            let write = advice == madv::POPULATE_WRITE;
            crate::gup::madvise_populate(cx, mm, start, end, write).await
        }
        madv::GUARD_INSTALL => crate::madvise::madvise_guard_install(cx, mm, start, end).await,
        madv::GUARD_REMOVE => crate::madvise::madvise_guard_remove(cx, mm, start, end).await,
        _ => unreachable!("advice {advice} was found valid by madvise_behavior_valid"),
    }
}
