//! The TLB checkers.
//!
//! Checkers ([`KState::check_tlb`]): no entry of an up-to-date ASID maps a free frame, and no
//! walk-cache entry points at a freed page table, at any step (the kernel frees pages and tables
//! only after the flush, `mm/mmu_gather.c`, `tlb_remove_table`); and, where no flush can be in
//! flight (the end of a run, between replayed references), every such entry agrees with the
//! page tables: same frame and page size, no write, execute or dirty right the PTE lacks, and
//! each walk-cache entry points at the table the page tables hold there. Between clearing an
//! entry and the flush a walk cache may still point at a table the mm no longer reaches but
//! that lives on: `huge_pmd_unshare` clears the PUD of a shared PMD table that another mm still
//! uses, and the flush of the PUD's range comes with the unmap's `tlb_finish_mmu`.

use super::array::{Array, tag_asid, tag_span, tag_va};
use super::geometry::PageSize;
use super::walk::{bits, entry_data, frame};
use crate::kernel::KState;
use simcore::Pfn;

impl KState {
    /// Checks the TLBs against the rest of the state. Always: no entry of an up-to-date ASID maps
    /// a free frame. With `coherent` (only where no flush can be in flight): every such entry
    /// maps what the page tables map at its address, at the same page size, with no right the
    /// PTE lacks.
    pub fn check_tlb(&self, coherent: bool) -> Result<(), String> {
        for (n, c) in self.tlb.cpus.iter().enumerate() {
            for (asid, slot) in c.slots.iter().enumerate() {
                let Some(mm) = slot.mm else { continue };
                let Some(m) = self.mms.get(mm).and_then(|m| m.as_deref()) else { continue };
                if slot.tlb_gen != self.tlb.tlb_gen(mm) {
                    continue;
                }
                let entries = c.itlb.iter().chain(&c.dtlb).chain(&c.l2i).chain(&c.l2d);
                for (t, data) in entries.flat_map(Array::valid) {
                    if tag_asid(t) as usize != asid {
                        continue;
                    }
                    let va = tag_va(t);
                    let span = tag_span(t);
                    let pfn = frame(data, span, va.0);
                    let what = || {
                        format!(
                            "cpu {n}: TLB entry {va} -> {pfn} ({}) of mm {mm}",
                            ["4K", "2M", "1G"][span]
                        )
                    };
                    if self.frame_is_free(pfn) {
                        return Err(format!("{} maps a free frame", what()));
                    }
                    if !coherent {
                        continue;
                    }
                    let Some((pte, level)) =
                        self.pt.translate(m.pgd, va).filter(|(p, _)| p.is_present())
                    else {
                        return Err(format!("{}, but nothing is mapped there", what()));
                    };
                    if PageSize::of_level(level) as usize != span
                        || pte.pfn() != Pfn(data >> bits::PFN_SHIFT)
                    {
                        return Err(format!(
                            "{}, but the page tables map {pte:?} ({level:?})",
                            what()
                        ));
                    }
                    let rights = entry_data(pte);
                    if data & !rights & (bits::WRITE | bits::DIRTY | bits::EXEC) != 0 {
                        return Err(format!("{} has rights the PTE {pte:?} lacks", what()));
                    }
                }
                for (level, va, points_at) in c.pwc.entries(asid) {
                    let freed = !self.pt.is_live(points_at);
                    if freed {
                        return Err(format!(
                            "cpu {n}: walk cache for {level:?} entry of {va} (mm {mm}) points at freed table {}",
                            points_at.0
                        ));
                    }
                    let table = self.pt.find_table(m.pgd, va, level.below());
                    if coherent && table != Some(points_at) {
                        return Err(format!(
                            "cpu {n}: walk cache for {level:?} entry of {va} (mm {mm}) points at table {}, the page tables at {table:?}",
                            points_at.0
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{KernelVersion, Machine, MachineConfig, Profile, prot};
    use simcore::Bytes;

    fn machine() -> Machine {
        let p = Profile::named("tiny").unwrap();
        Machine::new(MachineConfig::new(p, KernelVersion::DEFAULT)).unwrap()
    }

    /// Given a written page whose PTE loses its write bit without a flush (a missing
    /// `flush_tlb_page`), then the coherence checker reports the writable entry; after the flush
    /// it holds again.
    #[test]
    fn a_missing_flush_is_caught() {
        let mut m = machine();
        let pid = m.new_process("p").unwrap();
        m.spawn_thread(pid, 0, "t", |t| async move {
            let a = t.mmap_anon(Bytes::kib(8), prot::READ | prot::WRITE).await.unwrap();
            t.write_bytes(a, b"x").await.unwrap();
            let (mm, pgd) = {
                let st = t.cx().kernel().state();
                let mm = st.procs[t.pid()].mm.unwrap();
                (mm, st.mm(mm).pgd)
            };
            {
                let mut st = t.cx().st();
                let (table, idx) = st.pt.pte_slot(pgd, a).unwrap();
                let pte = st.pt.pte(table, idx);
                st.pt.set_pte(table, idx, pte.wrprotect());
                let err = st.check_tlb(true).unwrap_err();
                assert!(err.contains("has rights the PTE"), "{err}");
                st.check_tlb(false).unwrap();
            }
            crate::arch::tlbflush::flush_tlb_page(t.cx(), mm, a).await;
            t.cx().kernel().state().check_tlb(true).unwrap();
        })
        .unwrap();
        m.run().unwrap();
    }
}
