//! `UFFDIO_COPY`, `UFFDIO_ZEROPAGE` and `UFFDIO_CONTINUE`: the handler fills missing pages, or
//! maps cached ones after a minor fault (mm/userfaultfd.c `mfill_atomic`,
//! `mfill_atomic_pte_copy`, `mfill_atomic_pte_zeropage`, `mfill_atomic_pte_continue`,
//! `mfill_atomic_install_pte`, `mfill_atomic_hugetlb`, mm/shmem.c `shmem_mfill_atomic_pte`;
//! fs/userfaultfd.c `userfaultfd_copy`, `userfaultfd_zeropage`, `userfaultfd_continue`; Linux
//! v4.3 to v6.19, `UFFDIO_CONTINUE` from v5.13).
//!
//! Both ioctls check the destination range (`validate_range`, EINVAL; for a copy, a source
//! range that wraps is EINVAL too), then, under the context's `mmap_lock` for read, ask for one
//! VMA that covers it whole and that a userfaultfd registered (ENOENT otherwise, EINVAL before
//! v4.11, `era::uffd_mfill_enoent`; a hugetlb or shmem VMA's registration is checked from v4.20
//! only, `era::uffd_register_needs_maywrite`'s commit). Page by page:
//! - a private VMA (anonymous memory, or a private shmem mapping): a copy allocates a page,
//!   fills it with the source's bytes (read from the caller's memory) and maps it exclusive,
//!   dirty and writable if the VMA is, with its rmap, LRU and RSS (`mfill_atomic_pte_copy`);
//!   a zero page maps the shared zero page (`mfill_atomic_pte_zeropage`);
//! - a shared shmem VMA: a new page in the file's page cache, filled, mapped
//!   (`shmem_mfill_atomic_pte`); EEXIST when the page cache holds one already;
//! - a hugetlb VMA (v4.11): huge pages (the range huge-page aligned, EINVAL otherwise), a new
//!   one per huge page, in the page cache of a shared mapping; a zero page is EINVAL.
//!
//! - `UFFDIO_CONTINUE` (v5.13; EINVAL before, an unknown ioctl): a shmem or hugetlb VMA (EINVAL
//!   for anonymous memory), page by page (huge page by huge page, aligned), the page its file
//!   caches mapped (EFAULT when it caches none), writable in a shared writable VMA, read-only
//!   in a private one.
//!
//! A PTE already there (or a PMD leaf) is EEXIST. The result is the bytes filled: when some
//! were, the faults waiting in them are woken (`wake_userfault`), and the call is EAGAIN unless
//! all were; when none were, the first page's error.
//!
//! Approximations: the source is read whole before the destination is touched (the kernel
//! copies page by page, retrying a copy that faults outside the locks), so a source fault is
//! EFAULT with nothing filled. Shared shmem and hugetlb pages are filled by the fault path
//! itself (a write fault that `UffdFlag::Fill` keeps from going to the userfaultfd, accounted
//! nowhere), then written: the same page cache, PTE and counters as the kernel's own
//! installation, a shmem page from a `huge=` mount possibly a THP where the kernel's is one
//! page. A private VMA's new page maps clean when the VMA is read-only (the kernel's is dirty).
//! `UFFDIO_CONTINUE` maps the cached page by the fault path too (a write fault in a shared
//! writable VMA, a read fault otherwise, the fill's own), so its PTE is the fault's: clean after
//! a read fault where the kernel's `mfill_atomic_install_pte` marks it dirty.
//! `UFFDIO_COPY_MODE_DONTWAKE` (and `UFFDIO_ZEROPAGE_MODE_DONTWAKE`) fill without waking the
//! faults there (the handler wakes them with `UFFDIO_WAKE`). `UFFDIO_COPY_MODE_WP` (v5.7,
//! `era::uffd_wp_anon`) maps the copied page write-protected (the uffd-wp bit, read-only;
//! `userfaultfd/wp.rs`), EINVAL unless the VMA is registered in write-protect mode (only
//! anonymous VMAs are, in the model); any other mode bit is EINVAL.
//! While an event is being delivered both are EAGAIN from v4.18 (`userfaultfd/events.rs`).

use crate::arch::uaccess::read_user;
use crate::errno::Errno;
use crate::fault::{FaultAcct, handle_mm_fault};
use crate::kernel::{Cx, KState, UffdFlag};
use crate::memory::{
    FaultKind, Vmf, anon_vma_prepare, fault_alloc, install_new_anon, pte_alloc_below,
};
use crate::pgtable::{Level, Pte, Upper};
use crate::sim::cost::Cost;
use crate::types::ids::{InodeId, MmId, Pid, VmaId};
use crate::types::mm_types::WalkOps;
use crate::types::userfaultfd::copy_mode;
use crate::userfaultfd::{RangeIoctl, range_ioctl, wake_userfault};
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// `UFFDIO_COPY` of `len` bytes from the caller's `src` to `dst` of the context's address space,
/// with `mode`: the bytes copied.
pub(crate) async fn userfaultfd_copy(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    (dst, src): (VirtAddr, VirtAddr),
    (len, mode): (u64, u64),
) -> Result<u64, Errno> {
    let (ctx, _) = range_ioctl(cx, (pid, fd), (dst, len), RangeIoctl::Fill { known: true }).await?;
    if src.0.checked_add(len).is_none() {
        return Err(Errno::EINVAL);
    }
    // `UFFDIO_COPY_MODE_WP` (v5.7; EINVAL before as an unknown bit).
    let mut known = copy_mode::DONTWAKE;
    if crate::era::uffd_wp_anon(cx.kernel().version) {
        known |= copy_mode::WP;
    }
    if mode & !known != 0 {
        return Err(Errno::EINVAL);
    }
    let caller = cx.st().procs[pid].mm.ok_or(Errno::EFAULT)?;
    let data = read_user(cx, caller, src, len).await.map_err(|_| Errno::EFAULT)?;
    let src = Source::Copy { data: &data, wp: mode & copy_mode::WP != 0 };
    fill_and_wake(cx, ctx, (dst, len), src, mode).await
}

/// `UFFDIO_ZEROPAGE` of `[dst, dst + len)` with `mode`: the bytes zero-filled.
pub(crate) async fn userfaultfd_zeropage(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    dst: VirtAddr,
    (len, mode): (u64, u64),
) -> Result<u64, Errno> {
    let (ctx, _) = range_ioctl(cx, (pid, fd), (dst, len), RangeIoctl::Fill { known: true }).await?;
    if mode & !copy_mode::DONTWAKE != 0 {
        return Err(Errno::EINVAL);
    }
    fill_and_wake(cx, ctx, (dst, len), Source::Zero, mode).await
}

/// `UFFDIO_CONTINUE` of `[dst, dst + len)` with `mode` (v5.13): the pages the file caches
/// mapped; the bytes mapped. EINVAL before v5.13 (an unknown ioctl).
pub(crate) async fn userfaultfd_continue(
    cx: &Cx,
    (pid, fd): (Pid, i32),
    dst: VirtAddr,
    (len, mode): (u64, u64),
) -> Result<u64, Errno> {
    let known = crate::era::uffd_minor_hugetlbfs(cx.kernel().version);
    let (ctx, _) = range_ioctl(cx, (pid, fd), (dst, len), RangeIoctl::Fill { known }).await?;
    // `UFFDIO_CONTINUE_MODE_WP` (v6.5) wants a write-protect registration: EINVAL here.
    if mode & !copy_mode::DONTWAKE != 0 {
        return Err(Errno::EINVAL);
    }
    fill_and_wake(cx, ctx, (dst, len), Source::Continue, mode).await
}

/// What a fill puts in the pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source<'a> {
    /// `UFFDIO_COPY`: these bytes, write-protected with `UFFDIO_COPY_MODE_WP`.
    Copy { data: &'a [u8], wp: bool },
    /// `UFFDIO_ZEROPAGE`: zeros.
    Zero,
    /// `UFFDIO_CONTINUE`: the page the file caches.
    Continue,
}

impl<'a> Source<'a> {
    /// The bytes of the page at `done` of `step` bytes, for a copy.
    fn bytes(self, done: u64, step: u64) -> Option<&'a [u8]> {
        match self {
            Source::Copy { data, .. } => Some(&data[done as usize..(done + step) as usize]),
            Source::Zero | Source::Continue => None,
        }
    }
}

/// `mfill_atomic`, then the ioctl's tail: the faults in the filled range woken (unless `mode`
/// says `DONTWAKE`), EAGAIN for a short fill.
async fn fill_and_wake(
    cx: &Cx,
    ctx: InodeId,
    (dst, len): (VirtAddr, u64),
    src: Source<'_>,
    mode: u64,
) -> Result<u64, Errno> {
    let filled = mfill_atomic(cx, ctx, (dst, len), src).await?;
    if mode & copy_mode::DONTWAKE == 0 {
        wake_userfault(cx, ctx, dst, dst + Bytes(filled));
    }
    if filled == len { Ok(filled) } else { Err(Errno::EAGAIN) }
}

/// How the pages of the destination VMA are filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    /// A private VMA: anonymous pages or the zero page.
    Private,
    /// A shared shmem or a hugetlb VMA, by the fault path; `step` is the page size.
    ByFault { step: u64, hugetlb: bool },
}

/// `mfill_atomic`: the bytes filled, or the first page's error when none were.
async fn mfill_atomic(
    cx: &Cx,
    ctx: InodeId,
    (dst, len): (VirtAddr, u64),
    src: Source<'_>,
) -> Result<u64, Errno> {
    let mm = cx.st().uffd_ctx(ctx).mm;
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.read(cx).await;
    let (vma, fill) = dst_vma(&cx.st(), mm, dst, len)?;
    let wp = matches!(src, Source::Copy { wp: true, .. });
    if wp && !cx.st().userfaultfd_wp(vma) {
        return Err(Errno::EINVAL);
    }
    let step = match fill {
        // `UFFDIO_CONTINUE` maps page-cache pages: not into anonymous memory.
        Fill::Private if src == Source::Continue && cx.st().vma(vma).is_anonymous() => {
            return Err(Errno::EINVAL);
        }
        Fill::Private => Bytes::PAGE.as_u64(),
        Fill::ByFault { step, hugetlb } => {
            let unaligned = !dst.0.is_multiple_of(step) || !len.is_multiple_of(step);
            if hugetlb && (src == Source::Zero || unaligned) {
                return Err(Errno::EINVAL);
            }
            step
        }
    };
    let mut done = 0;
    while done < len {
        let addr = dst + Bytes(done);
        let bytes = src.bytes(done, step);
        let result = match (fill, src) {
            (_, Source::Continue) => continue_page(cx, (mm, vma), addr).await,
            (Fill::Private, _) => fill_private(cx, (mm, vma), addr, (bytes, wp)).await,
            (Fill::ByFault { .. }, _) => fill_by_fault(cx, (mm, vma), addr, bytes).await,
        };
        match result {
            Ok(()) => done += step,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// `find_dst_vma` and the kind checks: the VMA holding `[dst, dst + len)` whole and how its
/// pages are filled. ENOENT (EINVAL before v4.11) for no such VMA, or one no userfaultfd
/// registered (a hugetlb or shmem one only from v4.20); EINVAL for a kind userfaultfd does not
/// fill.
fn dst_vma(st: &KState, mm: MmId, dst: VirtAddr, len: u64) -> Result<(VmaId, Fill), Errno> {
    let k = st.thp.kernel;
    let none = if crate::era::uffd_mfill_enoent(k) { Errno::ENOENT } else { Errno::EINVAL };
    let vma = st.find_vma(mm, dst).ok_or(none)?;
    let v = st.vma(vma);
    if dst < v.start || dst + Bytes(len) > v.end {
        return Err(none);
    }
    let checked = v.is_anonymous() || crate::era::uffd_register_needs_maywrite(k);
    if checked && v.uffd.is_none() {
        return Err(none);
    }
    if let Some(h) = st.hstate_vma(vma) {
        return Ok((vma, Fill::ByFault { step: h.bytes(), hugetlb: true }));
    }
    let shmem = v.file.is_some_and(|f| st.inodes[st.file(f).inode].fs.swap_backed());
    match (v.is_anonymous(), shmem, v.is_shared()) {
        (true, _, _) | (_, true, false) => Ok((vma, Fill::Private)),
        (_, true, true) => Ok((vma, Fill::ByFault { step: Bytes::PAGE.as_u64(), hugetlb: false })),
        _ => Err(Errno::EINVAL),
    }
}

/// One page of a private VMA: a new anonymous page holding `data`, or the zero page.
async fn fill_private(
    cx: &Cx,
    (mm, vma): (MmId, VmaId),
    addr: VirtAddr,
    (data, wp): (Option<&[u8]>, bool),
) -> Result<(), Errno> {
    let mut vmf = Vmf::walk(cx, (mm, vma), WalkOps::Anonymous, addr, FaultKind::Write)
        .await
        .map_err(|_| Errno::ENOMEM)?;
    if matches!(vmf.orig_pmd, Upper::Leaf(_)) {
        return Err(Errno::EEXIST);
    }
    let table = pte_alloc_below(cx, mm, vmf.pmd, addr).await.map_err(|_| Errno::ENOMEM)?;
    let table = table.ok_or(Errno::EEXIST)?;
    vmf.pte_table = Some(table);
    let Some(data) = data else { return install_zero_page(cx, table, vma, addr).await };
    if !cx.st().pt.pte(table, Level::Pte.index(addr)).is_none() {
        return Err(Errno::EEXIST);
    }
    anon_vma_prepare(cx, mm, vma).await;
    let folio = fault_alloc(cx).await.map_err(|_| Errno::ENOMEM)?;
    cx.charge(Cost::CopyPage4k).await;
    cx.st().mem.write(folio.0, 0, data);
    let writable = cx.st().vma(vma).flags.has(VmFlags::WRITE);
    if !install_new_anon(&vmf, folio, writable && !wp).await {
        return Err(Errno::EEXIST);
    }
    if wp {
        // `pte_mkuffd_wp` of the new PTE (`mfill_atomic_install_pte`), dirty as the kernel's.
        let mut st = cx.st();
        let idx = Level::Pte.index(addr);
        let pte = st.pt.pte(table, idx);
        st.pt.set_pte(table, idx, pte.with(Pte::DIRTY).with_uffd_wp(true));
    }
    Ok(())
}

/// `mfill_atomic_pte_zeropage`: the zero page, read-only, where the PTE is still empty.
async fn install_zero_page(
    cx: &Cx,
    table: crate::types::ids::PtId,
    vma: VmaId,
    addr: VirtAddr,
) -> Result<(), Errno> {
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    let mut st = cx.st();
    let idx = Level::Pte.index(addr);
    if !st.pt.pte(table, idx).is_none() {
        return Err(Errno::EEXIST);
    }
    let flags = st.vma(vma).flags;
    let zero = Pte::new(st.zero_pfn, crate::memory::pte_bits(flags, false, false) | Pte::SPECIAL);
    st.pt.set_pte(table, idx, zero);
    Ok(())
}

/// One page (a huge page of a hugetlb VMA) of a shared shmem or a hugetlb VMA: EEXIST when
/// something is mapped there or the shared file's page cache holds the page, else a write
/// fault that is the fill's own, then `data` written into the page it mapped.
async fn fill_by_fault(
    cx: &Cx,
    (mm, vma): (MmId, VmaId),
    addr: VirtAddr,
    data: Option<&[u8]>,
) -> Result<(), Errno> {
    if page_there(&cx.st(), mm, vma, addr) {
        return Err(Errno::EEXIST);
    }
    {
        let _fill = cx.uffd_scope(UffdFlag::Fill, true);
        let acct = FaultAcct::Uncounted;
        handle_mm_fault(cx, mm, vma, addr, FaultKind::Write, acct)
            .await
            .map_err(|_| Errno::ENOMEM)?;
    }
    let Some(data) = data else { return Ok(()) };
    cx.charge_n(Cost::CopyPage4k, (data.len() as u64).div_ceil(4096)).await;
    let mut st = cx.st();
    let pgd = st.mm(mm).pgd;
    let (pte, _) = st.pt.translate(pgd, addr).expect("the fill's fault mapped the page");
    for (i, chunk) in data.chunks(4096).enumerate() {
        st.mem.write((pte.pfn() + i as u64).0, 0, chunk);
    }
    Ok(())
}

/// `mfill_atomic_pte_continue` (and hugetlb's continue) of the page at `addr`: EEXIST when
/// something is mapped there, EFAULT when the file does not cache the page; else the fault path
/// maps the cached page as the kernel installs it, writable in a shared writable VMA (a write
/// fault that is the fill's own), read-only in a private one (a read fault).
async fn continue_page(cx: &Cx, (mm, vma): (MmId, VmaId), addr: VirtAddr) -> Result<(), Errno> {
    let (mapped, cached, kind) = {
        let st = cx.st();
        let mapped = st.pt.translate(st.mm(mm).pgd, addr).is_some_and(|(p, _)| !p.is_none());
        let v = st.vma(vma);
        let inode = st.file(v.file.expect("a shmem or hugetlb VMA has a file")).inode;
        let index = v.page_index(addr);
        let cached = match st.hstate_vma(vma) {
            Some(h) => st.hinode(inode).cache.contains_key(&(index / (h.bytes() >> 12))),
            None => st.page_cache_get(inode, index).is_some(),
        };
        let shared_writable = v.is_shared() && v.flags.has(VmFlags::WRITE);
        (mapped, cached, if shared_writable { FaultKind::Write } else { FaultKind::Read })
    };
    if mapped {
        return Err(Errno::EEXIST);
    }
    if !cached {
        return Err(Errno::EFAULT);
    }
    let _fill = cx.uffd_scope(UffdFlag::Fill, true);
    handle_mm_fault(cx, mm, vma, addr, kind, FaultAcct::Uncounted)
        .await
        .map_err(|_| Errno::ENOMEM)?;
    Ok(())
}

/// Whether a fill at `addr` meets a mapped entry, or a page the shared VMA's file caches.
fn page_there(st: &KState, mm: MmId, vma: VmaId, addr: VirtAddr) -> bool {
    let mapped = st.pt.translate(st.mm(mm).pgd, addr).is_some_and(|(p, _)| !p.is_none());
    let v = st.vma(vma);
    let cached = match (v.file, v.is_shared()) {
        (Some(f), true) => {
            let inode = st.file(f).inode;
            let index = v.page_index(addr);
            match st.hstate_vma(vma) {
                Some(h) => st.hinode(inode).cache.contains_key(&(index / (h.bytes() >> 12))),
                None => st.page_cache_get(inode, index).is_some(),
            }
        }
        _ => false,
    };
    mapped || cached
}
