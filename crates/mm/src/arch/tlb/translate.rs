//! The translation of one access through a CPU's hardware (`cpu.rs`): the first-level
//! instruction or data TLB, the second level, then the page walk (`walk.rs`). A hit whose
//! rights forbid the access drops that address's entries and faults (hardware does so on every
//! page fault); a store that hits an entry whose dirty bit is clear re-walks to set the PTE's
//! dirty bit (a dirty assist). The hot path (a hit) is synchronous.

use super::Access;
use super::TlbEvent;
use super::array::tag_span;
use super::cpu::CpuTlb;
use super::walk::{bits, frame, permits, walk};
use crate::kernel::KState;
use crate::types::ids::MmId;
use simcore::{Pfn, VirtAddr};

impl KState {
    /// The MMU translating one user access of `mm` on `cpu`: the first-level TLB, the second
    /// level, then a walk. Returns the frame, or `None` when the access must fault (the caller
    /// runs the fault handler and retries). Synchronous: this is the replay hot path.
    ///
    /// The lookup is counted (`iTLB-loads`, `dTLB-loads`, `dTLB-stores`) only when the access
    /// translates, that is once per retired reference, as `mem_inst_retired.*` counts: an
    /// attempt that faults does not retire, its retry does. Misses and walks are counted as the
    /// hardware makes them, the faulting attempt's included.
    #[inline]
    pub(crate) fn mmu_translate(
        &mut self,
        cpu: usize,
        mm: MmId,
        addr: VirtAddr,
        access: Access,
    ) -> Option<Pfn> {
        let pfn = self.mmu_lookup(cpu, mm, addr, access)?;
        let retired = match access {
            Access::Exec => TlbEvent::ItlbLoads,
            Access::Read => TlbEvent::DtlbLoads,
            Access::Write => TlbEvent::DtlbStores,
        };
        self.tlb.cpus[cpu].stats.inc(retired);
        Some(pfn)
    }

    /// [`KState::mmu_translate`] without counting the retired reference.
    #[inline]
    fn mmu_lookup(&mut self, cpu: usize, mm: MmId, addr: VirtAddr, access: Access) -> Option<Pfn> {
        let asid = match self.tlb.cpus[cpu].loaded {
            Some((m, asid)) if m == mm => asid,
            _ => self.tlb.switch_mm(cpu, mm),
        };
        let va = addr.0;
        let g = &self.tlb.geometry;
        let (l2_hit, ref_cycles) = (u64::from(g.l2_hit_cycles), u64::from(g.walk_ref_cycles));
        let c = &mut self.tlb.cpus[cpu];
        let (misses, walks) = match access {
            Access::Exec => (TlbEvent::ItlbLoadMisses, TlbEvent::ItlbWalks),
            Access::Read => (TlbEvent::DtlbLoadMisses, TlbEvent::DtlbWalks),
            Access::Write => (TlbEvent::DtlbStoreMisses, TlbEvent::DtlbWalks),
        };
        let l1 = if access == Access::Exec { &mut c.itlb } else { &mut c.dtlb };
        let mut hit = None;
        for a in l1.iter_mut() {
            if let Some(slot) = a.lookup(va, asid) {
                hit = Some((a.data[slot], tag_span(a.tags[slot])));
                break;
            }
        }
        if hit.is_none() {
            c.stats.inc(misses);
            c.pending_cycles += l2_hit;
            let l2 =
                if access == Access::Exec && !c.l2i.is_empty() { &mut c.l2i } else { &mut c.l2d };
            let mut found = None;
            for a in l2.iter_mut() {
                if let Some(slot) = a.lookup(va, asid) {
                    found = Some((a.data[slot], tag_span(a.tags[slot])));
                    break;
                }
            }
            let (data, span) = match found {
                Some(f) => f,
                None => {
                    c.stats.inc(walks);
                    let pgd = self.mms[mm].as_deref().expect("translating for a freed mm").pgd;
                    let w = walk(&mut self.pt, pgd, c, asid, va, access, ref_cycles)?;
                    let l2 = if access == Access::Exec && !c.l2i.is_empty() {
                        &mut c.l2i
                    } else {
                        &mut c.l2d
                    };
                    CpuTlb::fill_level(l2, va, w.span, asid, w.data);
                    (w.data, w.span)
                }
            };
            let l1 = if access == Access::Exec { &mut c.itlb } else { &mut c.dtlb };
            CpuTlb::fill_level(l1, va, span, asid, data);
            hit = Some((data, span));
        }
        let (data, span) = hit.expect("translated");
        if !permits(data, access) {
            // A page fault drops the faulting address's entries; the retry walks again.
            c.flush_va(addr, asid);
            return None;
        }
        if access == Access::Write && data & bits::DIRTY == 0 {
            return self.dirty_assist(cpu, mm, addr, asid);
        }
        Some(frame(data, span, va))
    }

    /// A store hit an entry with a clear dirty bit: the CPU sets the PTE's dirty bit (re-reading
    /// it, so a PTE changed under the entry faults instead).
    fn dirty_assist(&mut self, cpu: usize, mm: MmId, addr: VirtAddr, asid: u32) -> Option<Pfn> {
        let c = &mut self.tlb.cpus[cpu];
        c.stats.inc(TlbEvent::DirtyAssists);
        c.flush_va(addr, asid);
        let pgd = self.mms[mm].as_deref().expect("translating for a freed mm").pgd;
        let ref_cycles = u64::from(self.tlb.geometry.walk_ref_cycles);
        let w = walk(&mut self.pt, pgd, c, asid, addr.0, Access::Write, ref_cycles)?;
        CpuTlb::fill_level(&mut c.l2d, addr.0, w.span, asid, w.data);
        CpuTlb::fill_level(&mut c.dtlb, addr.0, w.span, asid, w.data);
        Some(frame(w.data, w.span, addr.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;
    use crate::arch::tlb::array::tag_span;

    /// Given Golden Cove's size-separated DTLB, when 2 MiB and 4 KiB translations are filled,
    /// then each lands in its own array, and filling many 4 KiB pages never evicts the 2 MiB one.
    #[test]
    fn page_sizes_have_separate_arrays() {
        let g = Profile::named("xeon-spr").unwrap().tlb;
        let mut c = CpuTlb::new(&g);
        CpuTlb::fill_level(&mut c.dtlb, 0x4000_0000, 1, 0, 512 << bits::PFN_SHIFT);
        for i in 0..1000u64 {
            CpuTlb::fill_level(&mut c.dtlb, 0x1000_0000 + (i << 12), 0, 0, i << bits::PFN_SHIFT);
        }
        let slot = c.dtlb[1].lookup(0x4000_0000 + 0x5000, 0).expect("the 2M array holds it");
        assert_eq!(frame(c.dtlb[1].data[slot], 1, 0x4000_5000), Pfn(517));
        assert!(c.dtlb[0].lookup(0x4000_0000, 0).is_none());
        assert_eq!(c.dtlb[0].valid().count(), 96, "the 4K array is full");
        // A level without a 1G array keeps the 4K piece (AMD's smashing).
        let mut zen = CpuTlb::new(&Profile::named("epyc-vm").unwrap().tlb);
        CpuTlb::fill_level(&mut zen.l2d, 0x8000_3000, 2, 0, 1 << 20 << bits::PFN_SHIFT);
        let slot = zen.l2d[0].lookup(0x8000_3000, 0).unwrap();
        assert_eq!(tag_span(zen.l2d[0].tags[slot]), 1, "smashed to 2M");
        assert_eq!(frame(zen.l2d[0].data[slot], 1, 0x8000_3000), Pfn((1 << 20) + 3));
    }
}
