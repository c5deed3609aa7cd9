//! Types of `include/linux/mm.h`, `mm_types.h` and `rmap.h` not kept in their own modules: a
//! VMA's operations (`vm_operations_struct`, dispatched in `vm_ops.rs`), the `anon_vma`, and
//! GUP's flags and the pages a user-visible holder keeps (`gup_test`, `gup.rs`).

use crate::types::ids::AnonVmaId;
use crate::types::ids::VmaId;
use engine::RwSem;
use simcore::Pfn;
use simcore::VirtAddr;

/// A VMA's operations (`vma->vm_ops`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmOps {
    /// Private anonymous memory (no `vm_ops`: `vma_is_anonymous`).
    Anonymous,
    /// A file's page cache: disk files (`ext4_file_vm_ops`, with text THPs at the PMD level)
    /// and tmpfs.
    PageCache,
    /// A file on the DAX file system (`ext4_dax_vm_ops`): the device's blocks, no page cache.
    Dax,
    /// A hugetlbfs file (`hugetlb_vm_ops`): the whole fault is `hugetlb_fault` (`hugetlb.rs`),
    /// which `handle_mm_fault` reaches before the page tables are walked, as the kernel's
    /// `is_vm_hugetlb_page` branch does.
    Hugetlb,
}

/// The operations of a VMA whose faults walk the page tables: every kind but hugetlb, whose
/// faults `handle_mm_fault` gives to `hugetlb_fault` before any walk (`VmOps::handle_fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkOps {
    /// `VmOps::Anonymous`.
    Anonymous,
    /// `VmOps::PageCache`.
    PageCache,
    /// `VmOps::Dax`.
    Dax,
}

/// The questions asked of a VMA's kind, each answered for every kind (a new kind is a compile
/// error here until it answers), as the kernel's inline predicates (`vma_is_anonymous`,
/// `is_vm_hugetlb_page`, `vma_is_dax`) are asked instead of comparing `vm_ops`.
impl VmOps {
    /// `vma_is_anonymous`: private anonymous memory, with no `vm_ops`.
    pub fn is_anonymous(self) -> bool {
        match self {
            VmOps::Anonymous => true,
            VmOps::PageCache | VmOps::Dax | VmOps::Hugetlb => false,
        }
    }

    /// `is_vm_hugetlb_page`: a hugetlbfs mapping (`VM_HUGETLB`).
    pub fn is_hugetlb(self) -> bool {
        match self {
            VmOps::Hugetlb => true,
            VmOps::Anonymous | VmOps::PageCache | VmOps::Dax => false,
        }
    }

    /// `vma_is_dax`: a mapping of a file on the DAX file system.
    pub fn is_dax(self) -> bool {
        match self {
            VmOps::Dax => true,
            VmOps::Anonymous | VmOps::PageCache | VmOps::Hugetlb => false,
        }
    }

    /// Whether the mapping's pages are a file's page cache (disk files and tmpfs), where
    /// khugepaged's file collapse (`hpage_collapse_scan_file`) works.
    pub fn maps_page_cache(self) -> bool {
        match self {
            VmOps::PageCache => true,
            VmOps::Anonymous | VmOps::Dax | VmOps::Hugetlb => false,
        }
    }

    /// Whether two neighbouring VMAs of this kind may merge into one (`vma_merge`). mmsim merges
    /// anonymous and page-cache VMAs only: DAX and hugetlb VMAs are left apart, an
    /// approximation (the kernel merges them when `is_mergeable_vma` holds).
    pub fn merges(self) -> bool {
        match self {
            VmOps::Anonymous | VmOps::PageCache => true,
            VmOps::Dax | VmOps::Hugetlb => false,
        }
    }

    /// Whether `mlock_fixup` leaves the VMA's pages alone (with `VM_SPECIAL`): hugetlb pages are
    /// never on the LRU, nor are DAX pages.
    pub fn mlock_skips(self) -> bool {
        match self {
            VmOps::Hugetlb | VmOps::Dax => true,
            VmOps::Anonymous | VmOps::PageCache => false,
        }
    }
}

/// `struct anon_vma`.
#[derive(Debug)]
pub struct AnonVma {
    /// The anon_vma whose lock protects this tree (`anon_vma->root`).
    pub root: AnonVmaId,
    /// The root's rwsem (`anon_vma->root->rwsem`), copied for direct access.
    pub lock: RwSem,
    /// VMAs that may map pages of this anon_vma (its `anon_vma_chain` entries).
    pub vmas: Vec<VmaId>,
    /// Page indexes of this anon_vma are stored relative to this base.
    pub base: u64,
}

/// Pages pinned or gotten on behalf of a holder, like the kernel's `gup_test` device
/// (`PIN_LONGTERM_TEST_START`/`READ`/`STOP`): the holder reads what the pinned *physical* pages
/// contain, which is what a device doing DMA would see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub start: VirtAddr,
    pub len: u64,
    pub pages: GupPages,
}

/// Pages held by a GUP caller: drop them with [`release_pages`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GupPages {
    pub flags: GupFlags,
    /// The pages (the zero page holds no reference).
    pub pages: Vec<Pfn>,
}

/// What a GUP call asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GupFlags {
    /// FOLL_WRITE: the holder will write to the pages.
    pub write: bool,
    /// FOLL_PIN (else FOLL_GET).
    pub pin: bool,
    /// FOLL_LONGTERM.
    pub longterm: bool,
    /// FOLL_FORCE: write even where the VMA is not writable, if it is a COW mapping.
    pub force: bool,
    /// FOLL_REMOTE: `get_user_pages_remote` for another task's memory (`access_remote_vm`),
    /// whose faults count per `FaultAcct::Remote`.
    pub remote: bool,
}
