//! The operations of a mapping (`struct vm_operations_struct`, `include/linux/mm.h`), and the
//! fault path's calls through them (`mm/memory.c` `__handle_mm_fault` (`create_huge_pmd`,
//! `wp_huge_pmd`), `do_pte_missing`, `do_fault`, `do_read_fault` (`should_fault_around`),
//! `do_wp_page` (`wp_pfn_shared`, `wp_page_shared`), `vma_wants_writenotify`; Linux v6.8).
//!
//! A VMA's operations are chosen once, when the VMA is created, as `->mmap` sets
//! `vma->vm_ops` (`vma_set_anonymous` for anonymous memory; `ext4_file_mmap` choosing
//! `ext4_dax_vm_ops` or `ext4_file_vm_ops`; `shmem_zero_setup` for shared anonymous memory),
//! and travel with the VMA when fork copies it or a split divides it. The fault path
//! (`fault.rs`, `memory.rs`) never asks what backs a VMA: every question a kind of mapping must
//! answer is an exhaustive `match` here, so a new kind (shmem's own, hugetlb) is one variant
//! and one file, and the compiler lists every place that must answer for it.
//!
//! - `fault`: the no-page fault at the PTE level. Where the kernel's `do_fault` is generic and
//!   `->fault` returns a page, mmsim's seam is one level up, at `do_pte_missing`, because
//!   DAX's `->fault` (`ext4_dax_fault`) does the whole fault itself (a private write's copy
//!   included) and mmsim keeps its locks and charges in that order: anonymous memory has
//!   `do_anonymous_page`, the page cache `do_fault` (`filemap_fault` as its `->fault`), DAX
//!   `dax_pte_fault`.
//! - `huge_fault`: the PMD level, tried before the PTE table is walked: DAX's PMD faults, the
//!   page cache's read-only text THPs, anonymous THPs and the huge zero page
//!   (`huge_memory/anon.rs`), the whole of a hugetlb fault.
//! - `map_pages`: fault-around, the page cache's `filemap_map_pages`.
//! - `page_mkwrite`: the write-protect fault of a shared mapping: the page cache's
//!   `wp_page_shared`, DAX's `dax_wp_shared` (`pfn_mkwrite` and `page_mkwrite` are
//!   `ext4_dax_fault`).
//!
//! tmpfs files and shared anonymous memory use `PageCache`: their faults take the same
//! page-cache path (`filemap_fault` allocates their pages), and they have no `page_mkwrite`
//! (`shmem_vm_ops`), so their shared writable mappings are not write-notified.

use crate::errno::VmFault;
use crate::fault::{do_anonymous_page, do_fault, handle_walked_fault, wp_page_shared};
use crate::filemap::filemap_map_pages;
use crate::fs::dax::{dax_huge_fault, dax_pte_fault, dax_wp_shared};
use crate::huge_memory::anon::anon_huge_fault;
use crate::huge_memory::file_huge_fault;
use crate::huge_memory::policy::{ThpCaller, anon_fault_orders, thp_vma_allowable};
use crate::hugetlb::hugetlb_fault;
use crate::kernel::{Cx, KState};
use crate::memory::{FaultKind, FaultOutcome, Vmf};
use crate::pgtable::Upper;
use crate::types::ids::FileId;
use crate::types::ids::{MmId, VmaId};
use crate::types::mm_types::{VmOps, WalkOps};
use simcore::VirtAddr;

impl VmOps {
    /// The operations `mmap` gives a new mapping of `file` (`None`: private anonymous memory):
    /// its file system's choice (`FsType::vm_ops`).
    pub(crate) fn of(st: &KState, file: Option<FileId>) -> VmOps {
        let Some(f) = file else { return VmOps::Anonymous };
        st.inodes[st.file(f).inode].fs.vm_ops()
    }

    /// `handle_mm_fault`'s branch: a hugetlb VMA's fault is all `hugetlb_fault`, taken before
    /// the page tables are walked; every other kind walks them (`__handle_mm_fault`).
    pub(crate) async fn handle_fault(
        self,
        cx: &Cx,
        (mm, vma): (MmId, VmaId),
        addr: VirtAddr,
        kind: FaultKind,
    ) -> Result<FaultOutcome, VmFault> {
        let ops = match self {
            VmOps::Hugetlb => return hugetlb_fault(cx, (mm, vma), addr, kind).await,
            VmOps::Anonymous => WalkOps::Anonymous,
            VmOps::PageCache => WalkOps::PageCache,
            VmOps::Dax => WalkOps::Dax,
        };
        handle_walked_fault(cx, (mm, vma), ops, addr, kind).await
    }

    /// Whether the operations have a `page_mkwrite` (what `vma_wants_writenotify` asks). The page
    /// cache's is its file system's: those that write back have one (`ext4_page_mkwrite`),
    /// tmpfs none (`FsType::can_writeback`).
    pub(crate) fn has_page_mkwrite(self, st: &KState, vma: VmaId) -> bool {
        match self {
            VmOps::Anonymous | VmOps::Hugetlb => false,
            VmOps::PageCache => {
                let file = st.vma(vma).file.expect("page-cache VMAs map files");
                st.inodes[st.file(file).inode].fs.can_writeback()
            }
            VmOps::Dax => true,
        }
    }
}

impl WalkOps {
    /// Whether `__handle_mm_fault` asks the PMD level, given the PMD entry the walk found: a
    /// huge PMD is there (`wp_huge_pmd`, `huge_pmd_set_accessed`), or the entry is empty and
    /// the kind may map one there (`create_huge_pmd`: anonymous memory where
    /// `thp_vma_allowable_order` allows a THP; DAX, which the predicate allows in every fault;
    /// the page cache's text and tmpfs THPs, which mmsim maps at this level). A PTE table goes
    /// to the PTE level at once.
    pub(crate) fn asks_pmd_level(self, st: &KState, vma: VmaId, orig_pmd: Upper) -> bool {
        match orig_pmd {
            Upper::Table(_) => false,
            Upper::Leaf(_) => true,
            Upper::None => match self {
                WalkOps::Anonymous => thp_vma_allowable(st, vma, ThpCaller::Fault),
                WalkOps::PageCache | WalkOps::Dax => true,
            },
        }
    }

    /// The multi-size THP orders a write fault at `addr` of `vma` may allocate below the PMD
    /// (`alloc_anon_folio`'s `thp_vma_allowable_orders` and `thp_vma_suitable_orders`), a bit
    /// per order: anonymous memory's, by the per-size knobs (v6.8+); none for the other kinds,
    /// whose no-page faults never allocate an anonymous folio for the PTE.
    pub(crate) fn anon_fault_orders(self, st: &KState, vma: VmaId, addr: VirtAddr) -> u16 {
        match self {
            WalkOps::Anonymous if crate::era::has_mthp(st.thp.kernel) => {
                anon_fault_orders(st, vma, addr)
            }
            WalkOps::Anonymous | WalkOps::PageCache | WalkOps::Dax => 0,
        }
    }

    /// The no-page fault: the PTE at `vmf.address` is empty.
    pub(crate) async fn fault(self, vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
        match self {
            WalkOps::Anonymous => do_anonymous_page(vmf).await,
            WalkOps::PageCache => do_fault(vmf).await,
            WalkOps::Dax => dax_pte_fault(vmf).await,
        }
    }

    /// The PMD level of a fault (`create_huge_pmd`, `wp_huge_pmd`, `huge_pmd_set_accessed`):
    /// `None` when the fault goes on at the PTE level.
    pub(crate) async fn huge_fault(self, vmf: &Vmf<'_>) -> Result<Option<FaultOutcome>, VmFault> {
        match self {
            WalkOps::Anonymous => anon_huge_fault(vmf).await,
            WalkOps::PageCache => file_huge_fault(vmf).await,
            WalkOps::Dax => dax_huge_fault(vmf).await,
        }
    }

    /// `->map_pages` over `[start, end)` of the fault's PTE table: whether the faulting address
    /// got mapped. Kinds without one map nothing.
    pub(crate) async fn map_pages(self, vmf: &Vmf<'_>, start: VirtAddr, end: VirtAddr) -> bool {
        match self {
            WalkOps::PageCache => filemap_map_pages(vmf, start, end).await,
            WalkOps::Anonymous | WalkOps::Dax => false,
        }
    }

    /// The write-protect fault of a shared mapping (`vmf.orig_pte` read-only), entered
    /// without the PTE lock. Anonymous memory is never shared (shared anonymous memory is a
    /// tmpfs file), so its answer is what a shared mapping without `->page_mkwrite` gets: the
    /// page made writable where it is (`wp_page_shared`).
    pub(crate) async fn page_mkwrite(self, vmf: &Vmf<'_>) -> Result<FaultOutcome, VmFault> {
        match self {
            WalkOps::Anonymous | WalkOps::PageCache => wp_page_shared(vmf).await,
            WalkOps::Dax => dax_wp_shared(vmf).await,
        }
    }
}
