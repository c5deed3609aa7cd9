//! Virtual memory areas (`include/linux/mm.h`, `include/linux/mm_types.h`, `mm/vma.c`, v6.8).
//!
//! A VMA is a range of an address space with one set of flags, one backing (anonymous, or a file
//! at `pgoff`) and the operations its faults go through (`vm_ops`, chosen by that backing when
//! the VMA is created and copied with it by fork and split), and, once it has anonymous pages,
//! an `anon_vma`. Each `mm` keeps its VMAs in an
//! ordered map by start address (the maple tree's role). Flags use the kernel's bit values, so
//! `VmFlags` prints as smaps' `VmFlags:` line does. VMAs merge after a flag change
//! (`mprotect`, `madvise`, `munlock`: `mmap.rs`'s `vma_merge_range`), when a new mapping, a
//! moved one or one grown in place by `mremap` (from v6.1) touches a compatible neighbour
//! (`mmap.rs`'s `vma_merge_new`, whose header states the rules and approximations), and when
//! `brk` stretches the heap.

use crate::types::ids::AnonVmaId;
use crate::types::ids::FileId;
use crate::types::ids::InodeId;
use crate::types::ids::MmId;
use crate::types::mm_types::VmOps;
use simcore::{Bytes, VirtAddr};
use std::fmt;

/// `vm_flags_t`.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmFlags(pub u64);

impl VmFlags {
    pub const READ: u64 = 0x1;
    pub const WRITE: u64 = 0x2;
    pub const EXEC: u64 = 0x4;
    pub const SHARED: u64 = 0x8;
    pub const MAYREAD: u64 = 0x10;
    pub const MAYWRITE: u64 = 0x20;
    pub const MAYEXEC: u64 = 0x40;
    pub const MAYSHARE: u64 = 0x80;
    pub const GROWSDOWN: u64 = 0x100;
    /// `VM_UFFD_MISSING` (v4.3): a userfaultfd handles the VMA's missing pages
    /// (`userfaultfd.rs`).
    pub const UFFD_MISSING: u64 = 0x200;
    pub const PFNMAP: u64 = 0x400;
    /// `VM_UFFD_WP` (v5.7): a userfaultfd handles writes to the PTEs it write-protected
    /// (`userfaultfd/wp.rs`).
    pub const UFFD_WP: u64 = 0x1000;
    /// Removed in v5.15; kept for the file-THP rule of older kernels.
    pub const DENYWRITE: u64 = 0x800;
    pub const LOCKED: u64 = 0x2000;
    pub const IO: u64 = 0x4000;
    pub const SEQ_READ: u64 = 0x8000;
    pub const RAND_READ: u64 = 0x10000;
    pub const DONTCOPY: u64 = 0x20000;
    pub const DONTEXPAND: u64 = 0x40000;
    /// `VM_LOCKONFAULT` (v4.4): locked pages are faulted in, not populated (`mlock.rs`).
    pub const LOCKONFAULT: u64 = 0x80000;
    pub const ACCOUNT: u64 = 0x100000;
    pub const NORESERVE: u64 = 0x200000;
    pub const HUGETLB: u64 = 0x400000;
    pub const WIPEONFORK: u64 = 0x2000000;
    pub const DONTDUMP: u64 = 0x4000000;
    /// `VM_SYNC` (`MAP_SYNC`, v4.15): a DAX mapping's write faults sync the file's metadata.
    pub const SYNC: u64 = 0x800000;
    pub const SOFTDIRTY: u64 = 0x8000000;
    pub const MIXEDMAP: u64 = 0x10000000;
    pub const HUGEPAGE: u64 = 0x20000000;
    pub const NOHUGEPAGE: u64 = 0x40000000;
    /// `VM_MERGEABLE`: KSM may merge the VMA's pages (`ksm.rs`).
    pub const MERGEABLE: u64 = 0x80000000;
    /// `VM_UFFD_MINOR` (bit 38, v5.13): a userfaultfd handles the VMA's minor faults, on pages
    /// its file already caches (`userfaultfd.rs`).
    pub const UFFD_MINOR: u64 = 1 << 38;
    /// `VM_SEALED` (v6.10): `mseal(2)` sealed the VMA (`mseal.rs`; bit 63 as in v6.10-v6.17).
    pub const SEALED: u64 = 1 << 63;
    /// `VM_SPECIAL`: VMAs that never merge (`vma_merge`) and whose pages mlock leaves alone.
    pub const SPECIAL: u64 =
        VmFlags::IO | VmFlags::DONTEXPAND | VmFlags::PFNMAP | VmFlags::MIXEDMAP;

    pub fn has(self, bits: u64) -> bool {
        self.0 & bits != 0
    }

    /// Whether two VMAs' flags let them merge: equal but for `VM_SOFTDIRTY` (`is_mergeable_vma`).
    pub fn merge_equal(self, other: VmFlags) -> bool {
        (self.0 ^ other.0) & !VmFlags::SOFTDIRTY == 0
    }

    /// The two-letter mnemonics of smaps' `VmFlags:` (`fs/proc/task_mmu.c` `show_smap_vma_flags`).
    pub fn mnemonics(self) -> String {
        let names: Vec<&str> =
            MNEMONICS.iter().filter(|(b, _)| self.has(*b)).map(|(_, n)| *n).collect();
        names.join(" ")
    }

    /// The smaps mnemonic of one flag, if smaps shows it.
    pub fn mnemonic(bit: u64) -> Option<&'static str> {
        MNEMONICS.iter().find(|(b, _)| *b == bit).map(|(_, n)| *n)
    }
}

/// smaps' `VmFlags:` mnemonics (`fs/proc/task_mmu.c` `show_smap_vma_flags`).
const MNEMONICS: [(u64, &str); 32] = [
    (VmFlags::READ, "rd"),
    (VmFlags::WRITE, "wr"),
    (VmFlags::EXEC, "ex"),
    (VmFlags::SHARED, "sh"),
    (VmFlags::MAYREAD, "mr"),
    (VmFlags::MAYWRITE, "mw"),
    (VmFlags::MAYEXEC, "me"),
    (VmFlags::MAYSHARE, "ms"),
    (VmFlags::GROWSDOWN, "gd"),
    (VmFlags::UFFD_MISSING, "um"),
    (VmFlags::PFNMAP, "pf"),
    (VmFlags::DENYWRITE, "dw"),
    (VmFlags::UFFD_WP, "uw"),
    (VmFlags::LOCKED, "lo"),
    (VmFlags::IO, "io"),
    (VmFlags::SEQ_READ, "sr"),
    (VmFlags::RAND_READ, "rr"),
    (VmFlags::DONTCOPY, "dc"),
    (VmFlags::DONTEXPAND, "de"),
    (VmFlags::ACCOUNT, "ac"),
    (VmFlags::NORESERVE, "nr"),
    (VmFlags::HUGETLB, "ht"),
    (VmFlags::SYNC, "sf"),
    (VmFlags::WIPEONFORK, "wf"),
    (VmFlags::DONTDUMP, "dd"),
    (VmFlags::SOFTDIRTY, "sd"),
    (VmFlags::MIXEDMAP, "mm"),
    (VmFlags::HUGEPAGE, "hg"),
    (VmFlags::NOHUGEPAGE, "nh"),
    (VmFlags::MERGEABLE, "mg"),
    (VmFlags::UFFD_MINOR, "ui"),
    (VmFlags::SEALED, "sl"),
];

impl fmt::Debug for VmFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VmFlags({})", self.mnemonics())
    }
}

/// A VMA's special role, shown in `/proc/PID/maps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmaRole {
    Plain,
    Stack,
}

/// `struct vm_area_struct`.
#[derive(Clone, Debug)]
pub struct Vma {
    pub mm: MmId,
    pub start: VirtAddr,
    pub end: VirtAddr,
    pub flags: VmFlags,
    /// Offset in the file, in pages; for anonymous VMAs, the virtual page number at creation.
    pub pgoff: u64,
    pub file: Option<FileId>,
    /// The operations faults in this VMA go through (`vm_ops`), set when it is created
    /// (`vm_ops.rs`).
    pub vm_ops: VmOps,
    /// The anon_vma new anonymous pages of this VMA go to.
    pub anon_vma: Option<AnonVmaId>,
    /// Every anon_vma whose pages this VMA may map (`anon_vma_chain`).
    pub anon_vma_chain: Vec<AnonVmaId>,
    pub role: VmaRole,
    /// The userfaultfd context registered on it (`vm_userfaultfd_ctx`), by its file's inode;
    /// set with `VM_UFFD_MISSING` (`userfaultfd.rs`).
    pub uffd: Option<InodeId>,
}

impl Vma {
    pub fn len(&self) -> Bytes {
        self.end.offset_from(self.start)
    }

    pub fn contains(&self, addr: VirtAddr) -> bool {
        self.start <= addr && addr < self.end
    }

    pub fn is_anonymous(&self) -> bool {
        self.file.is_none()
    }

    pub fn is_shared(&self) -> bool {
        self.flags.has(VmFlags::SHARED)
    }

    /// A private writable mapping, whose pages are copied on write (`is_cow_mapping`).
    pub fn is_cow_mapping(&self) -> bool {
        self.flags.0 & (VmFlags::SHARED | VmFlags::MAYWRITE) == VmFlags::MAYWRITE
    }

    /// `linear_page_index`: the file (or anon) page index of `addr`.
    pub fn page_index(&self, addr: VirtAddr) -> u64 {
        debug_assert!(self.contains(addr));
        self.pgoff + (addr.offset_from(self.start).as_u64() >> 12)
    }

    /// The address at which this VMA maps page `index`, if it does.
    pub fn address_of(&self, index: u64) -> Option<VirtAddr> {
        let pages = self.len().as_u64() >> 12;
        (index >= self.pgoff && index - self.pgoff < pages)
            .then(|| self.start + Bytes((index - self.pgoff) << 12))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics_follow_smaps() {
        let f = VmFlags(
            VmFlags::READ
                | VmFlags::WRITE
                | VmFlags::MAYREAD
                | VmFlags::MAYWRITE
                | VmFlags::SOFTDIRTY,
        );
        assert_eq!(f.mnemonics(), "rd wr mr mw sd");
    }

    #[test]
    fn index_arithmetic() {
        let v = Vma {
            mm: MmId(0),
            start: VirtAddr(0x10000),
            end: VirtAddr(0x14000),
            flags: VmFlags(VmFlags::READ | VmFlags::MAYWRITE),
            pgoff: 100,
            file: None,
            vm_ops: VmOps::Anonymous,
            anon_vma: None,
            anon_vma_chain: Vec::new(),
            role: VmaRole::Plain,
            uffd: None,
        };
        assert_eq!(v.page_index(VirtAddr(0x12345)), 102);
        assert_eq!(v.address_of(103), Some(VirtAddr(0x13000)));
        assert_eq!(v.address_of(104), None);
        assert!(v.is_cow_mapping());
    }
}
