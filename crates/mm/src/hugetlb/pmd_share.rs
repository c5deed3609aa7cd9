//! PMD sharing (`mm/hugetlb.c` `huge_pte_alloc`, `want_pmd_share`, `page_table_shareable`,
//! `huge_pmd_share`, `huge_pmd_unshare`; `CONFIG_ARCH_WANT_HUGE_PMD_SHARE` on x86-64; Linux
//! v4.0-v6.19; up to v5.4 the search for a table to share held `i_mmap_rwsem` for write,
//! `era::huge_pmd_share_i_mmap_write`; the eras in [`crate::hugetlb`]).
//!
//! Mappings of the same hugetlbfs file range by different processes can share the PMD table
//! that maps a 1 GiB-aligned range of 2 MiB pages: a fault whose PUD entry is empty looks, under
//! `i_mmap_rwsem` for read, for another VMA of the file that maps the same offsets at the same
//! PMD position with the same flags over the whole PUD range, and if that VMA's mm has a PMD
//! table there, points its own PUD at it (the table's share count goes up by one; the PUD is
//! set under the table's lock, and a lost race gives the count back). So a second process that
//! touches one page of a shared range sees every page already faulted there, with one fault.
//!
//! `huge_pmd_unshare`, called for each entry an unmap visits, clears the caller's PUD if its
//! table is shared (count above zero) and lowers the count; the caller then skips the rest of
//! the PUD range. It needs `i_mmap_rwsem` for write, and from v6.1 the VMA's hugetlb lock for
//! write, which is what keeps it away from a fault that is using the table (B.5; under `revert`
//! nothing does, the race the explorer finds).
//!
//! A VMA being unmapped for good (munmap, exit) stops being a sharing candidate before its
//! tables are freed: the kernel removes it from `i_mmap` first (v5.7-v6.0) or frees its vma
//! lock (`__hugetlb_vma_unlock_write_free`, v6.1); the model marks it (`HVma::dying`).
//!
//! Share count: the kernel's was the PMD table page's refcount until v6.13 ("mm: hugetlb:
//! independent PMD page table shared count", 59d9094df3d7, moved it to `ptdesc`); the model
//! keeps it beside the table ([`crate::types::hugetlb::Hugetlb::pmd_share`]) in every era, which the
//! checker recounts. A split inside a shared range unshares it from v6.2
//! (`unmap::hugetlb_split_prepare`).

use crate::era::HugetlbSync;
use crate::errno::VmFault;
use crate::hugetlb::hugetlb_fault::{HugeVmf, Ptep};
use crate::kernel::{Cx, KState};
use crate::memory::{pmd_alloc_below, pud_alloc};
use crate::pgtable::{Level, Upper};
use crate::types::hugetlb::HugeSize;
use crate::types::ids::MmId;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::vma::VmFlags;
use simcore::{Bytes, VirtAddr};

/// `PUD_SIZE`.
const PUD: Bytes = Bytes(1 << 30);

/// `huge_pte_alloc`: the slot for the fault's page, its tables made (and shared) as needed.
pub(crate) async fn huge_pte_alloc(hv: &HugeVmf<'_>) -> Result<Ptep, VmFault> {
    huge_pte_alloc_at(hv.cx, hv.mm, hv.vma, hv.haddr, hv.size).await
}

/// `huge_pte_alloc` for `addr` of `vma` in `mm`.
pub(crate) async fn huge_pte_alloc_at(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    size: HugeSize,
) -> Result<Ptep, VmFault> {
    let pud = pud_alloc(cx, mm, addr).await?;
    if size == HugeSize::Size1G {
        return Ok(Ptep { table: pud, idx: Level::Pud.index(addr) });
    }
    let empty = cx.st().pt.upper(pud, Level::Pud.index(addr)) == Upper::None;
    let pmd = if empty && want_pmd_share(&cx.st(), vma, addr) {
        huge_pmd_share(cx, mm, vma, addr, pud).await?
    } else {
        pmd_alloc_below(cx, mm, pud, addr).await?
    };
    Ok(Ptep { table: pmd, idx: Level::Pmd.index(addr) })
}

/// The PUD range of `addr`.
fn pud_range(addr: VirtAddr) -> (VirtAddr, VirtAddr) {
    let base = addr.align_down(PUD);
    (base, base + PUD)
}

/// `want_pmd_share` / `vma_shareable`: a shared mapping covering the whole PUD range of
/// `addr`; from v6.1 it must also have its vma lock.
fn want_pmd_share(st: &KState, vma: VmaId, addr: VirtAddr) -> bool {
    let v = st.vma(vma);
    let (base, end) = pud_range(addr);
    let hv = st.hugetlb.vmas.get(&vma);
    let lock_ok = !st.hugetlb_sync().has_vma_lock() || hv.is_some_and(|h| h.lock.is_some());
    v.flags.has(VmFlags::MAYSHARE)
        && v.start <= base
        && end <= v.end
        && lock_ok
        && !hv.is_some_and(|h| h.dying)
}

/// `page_table_shareable`: where `svma` maps the page `vma` maps at `addr` (page index `idx`),
/// if its PMD table there could serve `vma` too.
fn page_table_shareable(
    st: &KState,
    svma: VmaId,
    vma: VmaId,
    addr: VirtAddr,
    idx: u64,
) -> Option<VirtAddr> {
    let s = st.vma(svma);
    let saddr = s.address_of(idx)?;
    let (sbase, send) = pud_range(saddr);
    let locked = VmFlags::LOCKED;
    let same_flags = s.flags.0 & !locked == st.vma(vma).flags.0 & !locked;
    let shs = st.hugetlb.vmas.get(&svma);
    let has_lock = !st.hugetlb_sync().has_vma_lock() || shs.is_some_and(|h| h.lock.is_some());
    (Level::Pmd.index(addr) == Level::Pmd.index(saddr)
        && same_flags
        && s.start <= sbase
        && send <= s.end
        && has_lock
        && !shs.is_some_and(|h| h.dying))
    .then_some(saddr)
}

/// `huge_pmd_share`: points `mm`'s PUD entry (in table `pud`) at another mm's PMD table for the
/// same file range if there is one, else makes a table; returns the PMD table.
async fn huge_pmd_share(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    pud: PtId,
) -> Result<PtId, VmFault> {
    let (i_mmap, held) = {
        let st = cx.st();
        let file = st.vma(vma).file.expect("a hugetlb VMA");
        let inode = st.file(file).inode;
        (st.inodes[inode].mapping.i_mmap_rwsem, st.hugetlb_sync() == HugetlbSync::IMmapRwsem)
    };
    // Under `i_mmap_rwsem` the fault already holds it for read; up to v5.4 the search took it
    // for write (`era::huge_pmd_share_i_mmap_write`).
    let _g = match (held, crate::era::huge_pmd_share_i_mmap_write(cx.kernel().version)) {
        (true, _) => None,
        (false, true) => Some(i_mmap.write(cx).await),
        (false, false) => Some(i_mmap.read(cx).await),
    };
    let found = {
        let mut st = cx.st();
        let found = find_shared_table(&st, vma, addr);
        if let Some(t) = found {
            *st.hugetlb.pmd_share.entry(t).or_default() += 1;
        }
        found
    };
    if let Some(t) = found {
        let ptl = cx.st().pt.ptl(t);
        let _l = ptl.lock(cx).await;
        let mut st = cx.st();
        let idx = Level::Pud.index(addr);
        if st.pt.upper(pud, idx) == Upper::None {
            st.pt.set_upper(pud, idx, Upper::Table(t));
            st.mm_mut(mm).pgtable_inc(Level::Pmd);
        } else {
            st.pmd_share_put(t);
        }
    }
    pmd_alloc_below(cx, mm, pud, addr).await
}

/// Another VMA's PMD table that `vma` at `addr` could share.
fn find_shared_table(st: &KState, vma: VmaId, addr: VirtAddr) -> Option<PtId> {
    let idx = st.vma(vma).page_index(addr);
    let inode = st.file(st.vma(vma).file?).inode;
    st.inodes[inode].mapping.i_mmap.iter().filter(|&&s| s != vma).find_map(|&svma| {
        let saddr = page_table_shareable(st, svma, vma, addr, idx)?;
        st.pt.find_table(st.mm(st.vma(svma).mm).pgd, saddr, Level::Pmd)
    })
}

impl KState {
    pub(crate) fn hugetlb_sync(&self) -> HugetlbSync {
        self.hugetlb.sync
    }

    /// Drops one share of table `t`.
    fn pmd_share_put(&mut self, t: PtId) {
        let c = self.hugetlb.pmd_share.get_mut(&t).expect("a shared PMD table");
        *c -= 1;
        if *c == 0 {
            self.hugetlb.pmd_share.remove(&t);
        }
    }

    /// `huge_pmd_unshare`: if `mm`'s PMD table for `addr` is shared, clears its PUD entry and
    /// drops the share (the caller skips the PUD range and flushes it). The caller holds
    /// `i_mmap_rwsem` for write (and, v6.1, the vma lock for write).
    pub(crate) fn huge_pmd_unshare(&mut self, mm: MmId, addr: VirtAddr) -> bool {
        let Some(pud) = self.pt.find_table(self.mm(mm).pgd, addr, Level::Pud) else { return false };
        let idx = Level::Pud.index(addr);
        let Upper::Table(t) = self.pt.upper(pud, idx) else { return false };
        if !self.hugetlb.pmd_share.contains_key(&t) {
            return false;
        }
        self.pmd_share_put(t);
        self.pt.set_upper(pud, idx, Upper::None);
        self.mm_mut(mm).pgtable_dec(Level::Pmd);
        true
    }
}
