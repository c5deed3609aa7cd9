//! `mincore(2)`: which pages of a range are resident (`mm/mincore.c`, Linux v6.8).
//!
//! The range must start on a page boundary (`EINVAL`) and be mapped throughout (`ENOMEM` at the
//! first page no VMA covers; an address range past the user address space is `ENOMEM` too). One
//! byte per page comes back, bit 0 set when the page is resident:
//! - a present PTE, or a huge PMD, counts as resident whatever it maps (`mincore_pte_range`);
//! - an empty PTE (or no page table) in a file mapping looks the page up in the file's page cache
//!   (`__mincore_unmapped_range`, `mincore_page`): a cached, uptodate folio is resident, a shadow
//!   entry or a DAX entry is not; in an anonymous mapping it is not resident;
//! - a swap PTE is resident while its slot's folio is still in the swap cache (the kernel also
//!   asks that folio to be uptodate; the model's swap-cache folios are uptodate from the moment
//!   they are added, so one being read in counts as resident already: an approximation).
//!
//! Eras: since v5.0 ("mm/mincore.c: make mincore() more conservative", 134fca9063ad) a file
//! mapping whose file the caller could not write (`can_do_mincore`) reports every page resident
//! rather than leak the page cache's state; the model's tasks run as root, who may always write
//! (`inode_owner_or_capable`), so no era differs here. Before that, v5.0-rc1's
//! "Change mincore() to count 'mapped' pages rather than 'cached' pages" (574823bfab82) was
//! reverted before release and never shipped.
//!
//! Cost: the syscall, then a PTE read per page and a page-cache lookup per page it asks the
//! page cache about.

use crate::errno::Errno;
use crate::folio::pg;
use crate::kernel::{Cx, KState};
use crate::pgtable::Level;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::ids::VmaId;
use simcore::{Bytes, VirtAddr};

/// The highest user address plus one (x86-64, four-level paging: `TASK_SIZE_MAX`).
const TASK_SIZE: u64 = (1 << 47) - 4096;

/// `sys_mincore`: the residency byte of every page of `[start, start + len)`.
pub(crate) async fn do_mincore(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    len: u64,
) -> Result<Vec<u8>, Errno> {
    cx.charge(Cost::Syscall).await;
    if start.page_offset() != 0 {
        return Err(Errno::EINVAL);
    }
    let end = start.0.checked_add(len).filter(|&e| e <= TASK_SIZE).ok_or(Errno::ENOMEM)?;
    let pages = Bytes(end - start.0).pages_ceil();
    let lock = cx.st().mm(mm).mmap_lock;
    let _mmap = lock.read(cx).await;
    let (vec, lookups) = cx.st().mincore_range(mm, start, start + Bytes::from_pages(pages))?;
    cx.charge_n(Cost::PteUpdate, pages).await;
    cx.charge_n(Cost::PageCacheLookup, lookups).await;
    Ok(vec)
}

impl KState {
    /// The residency bytes of `[start, end)` of `mm`, a VMA at a time as `do_mincore` walks them,
    /// and how many page-cache lookups they took; `ENOMEM` at the first page no VMA maps.
    fn mincore_range(
        &self,
        mm: MmId,
        start: VirtAddr,
        end: VirtAddr,
    ) -> Result<(Vec<u8>, u64), Errno> {
        let (mut vec, mut lookups) = (Vec::new(), 0);
        let mut addr = start;
        while addr < end {
            let vma = self.find_vma(mm, addr).filter(|&v| self.vma(v).contains(addr));
            let vma = vma.ok_or(Errno::ENOMEM)?;
            let stop = self.vma(vma).end.min(end);
            while addr < stop {
                let (resident, looked_up) = self.mincore_page(mm, vma, addr);
                vec.push(u8::from(resident));
                lookups += u64::from(looked_up);
                addr = addr + Bytes::PAGE;
            }
        }
        Ok((vec, lookups))
    }

    /// Whether the page at `addr` of `vma` is resident, and whether the page cache was asked.
    fn mincore_page(&self, mm: MmId, vma: VmaId, addr: VirtAddr) -> (bool, bool) {
        match self.pt.translate(self.mm(mm).pgd, addr) {
            Some((pte, _)) if pte.is_present() => return (true, false),
            Some((pte, Level::Pte)) if pte.is_swap() => {
                let (_, slot) = pte.swap_entry();
                return (self.swap.cached(slot).is_some(), false);
            }
            _ => {}
        }
        let vma = self.vma(vma);
        let Some(file) = vma.file else { return (false, false) };
        let inode = self.file(file).inode;
        let cached = self
            .page_cache_get(inode, vma.page_index(addr))
            .is_some_and(|head| self.folios.test(head, pg::UPTODATE));
        (cached, true)
    }
}
