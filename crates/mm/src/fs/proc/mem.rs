//! Writes through `/proc/PID/mem` (`fs/proc/base.c` `mem_rw`, `mm/memory.c`
//! `__access_remote_vm`, Linux v4.8 to v6.12): the write takes each page with a forced GUP
//! (`get_user_pages_remote` with FOLL_FORCE | FOLL_WRITE | FOLL_REMOTE, FOLL_GET; its faults
//! count in the writer's fault counts from v5.9 only, `fault.rs`), copies into the physical
//! page through a kernel mapping, marks it dirty (`set_page_dirty_lock`) and drops the
//! reference. So it writes into mappings the process itself cannot write: a private read-only
//! file mapping gets a COW copy, which the era's `foll_force_cow` rule must keep the write on
//! (`gup.rs`). A write that copies nothing fails with EIO; one stopped part-way returns what it
//! wrote.
//!
//! Approximations: the whole write takes `mmap_lock` once per page rather than once for the
//! call, and the `proc_mem.force_override=` boot parameter (v6.12) is its default (forcing
//! allowed), as no other value is modelled.

use crate::errno::Errno;
use crate::gup::{get_user_pages, release_pages};
use crate::kernel::Cx;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::mm_types::{GupFlags, GupPages};
use simcore::{Bytes, VirtAddr};

/// `mem_write` of `data` at `addr` of `mm`: the bytes written.
pub(crate) async fn mem_write(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    data: &[u8],
) -> Result<u64, Errno> {
    cx.charge(Cost::Syscall).await;
    let flags = GupFlags { write: true, force: true, remote: true, ..GupFlags::default() };
    let mut done = 0u64;
    while done < data.len() as u64 {
        let at = addr.checked_add(Bytes(done)).ok_or(Errno::EIO)?;
        let page_start = at.align_down(Bytes::PAGE);
        let Ok(held) = get_user_pages(cx, mm, page_start, 1, flags).await else {
            break;
        };
        let n = (4096 - at.page_offset()).min(data.len() as u64 - done);
        copy_to_page(cx, &held, at.page_offset(), &data[done as usize..(done + n) as usize]);
        cx.charge(Cost::UserCopy4k).await;
        release_pages(cx, &held, true);
        done += n;
    }
    if done == 0 && !data.is_empty() { Err(Errno::EIO) } else { Ok(done) }
}

/// The copy through the kernel's mapping of the page (`copy_to_user_page`).
fn copy_to_page(cx: &Cx, held: &GupPages, offset: u64, bytes: &[u8]) {
    let page = held.pages[0];
    cx.st().mem.write(page.0, offset as usize, bytes);
}
