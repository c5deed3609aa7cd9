//! Faulting user pages in on behalf of the kernel (`mm/gup.c` `populate_vma_page_range`,
//! `__mm_populate`; Linux v6.8): `MAP_POPULATE` and `MADV_WILLNEED`-style prefaulting.
//!
//! Writable private mappings are populated with write faults (breaking COW up front, as
//! `populate_vma_page_range` asks with FOLL_WRITE); everything else with read faults.
//! `get_user_pages`/`pin_user_pages` proper (references held past the call) arrive with the GUP
//! pins mechanism.

use crate::fault::handle_mm_fault;
use crate::kernel::Cx;
use crate::mm_struct::MmId;
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// Faults in every page of `[start, end)` that is mapped by a VMA and not yet present.
/// Errors of individual pages are ignored, as `mm_populate` ignores them.
pub(crate) async fn populate(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let mut addr = start;
    while addr < end {
        let target = {
            let st = cx.st();
            st.find_vma(mm, addr).map(|v| {
                let f = st.vma(v).flags;
                let write = f.0 & (VmFlags::WRITE | VmFlags::SHARED) == VmFlags::WRITE;
                let present = st
                    .pt
                    .translate(st.mm(mm).pgd, addr)
                    .is_some_and(|(p, _)| p.is_present() && (!write || p.write()));
                (v, write, present)
            })
        };
        if let Some((vma, write, false)) = target {
            let _ = handle_mm_fault(cx, mm, vma, addr, write).await;
        }
        addr = addr + Bytes::PAGE;
    }
}
