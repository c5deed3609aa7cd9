//! TLB invalidation (`arch/x86/mm/tlb.c`, `include/asm-generic/tlb.h`, Linux v6.8).
//!
//! Every PTE change that can leave a stale translation calls one of these: a flush of a range of
//! one mm on the current CPU and, when other CPUs have run the mm (`mm_cpumask`), a shootdown
//! IPI to them. x86 flushes single pages (`invlpg`) up to `tlb_single_page_flush_ceiling` (33)
//! pages and the whole TLB beyond. Counts go to the `CONFIG_DEBUG_TLBFLUSH` vmstat events.
//!
//! The flush acts on the TLB model (`tlb.rs`): it bumps the mm's TLB generation and invalidates
//! the range (page by page, or the whole ASID above the ceiling) on every CPU that has the mm
//! loaded; each remote one that runs a task is charged the handler's flush time, taken at its
//! next access. An idle CPU that still has the mm loaded is in lazy TLB mode: from v4.19 a
//! flush that frees no page tables skips it (v6.8 `native_flush_tlb_multi` sends only to CPUs
//! for which `tlb_is_not_lazy` holds; Rik van Riel's lazy-TLB series of 2018, commit not
//! verified), and before it, or when tables are freed, the IPI interrupts the idle loop: either
//! way no task pays, so its entries are dropped and nothing is charged. (Before, the handler's time waited for the next
//! task on that CPU, which paid for every flush the CPU saw while idle.) CPUs that keep an
//! ASID for the mm without running it catch up when they switch back, as with the kernel's
//! `tlb_gen` check. The initiator pays its local flush and, when `mm_cpumask` names
//! other CPUs, one shootdown round trip (`flush_tlb_multi` waits for the handlers).

use crate::arch::tlb::FlushKind;
use crate::kernel::Cx;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::vmstat::VmStat;
use simcore::VirtAddr;

/// `tlb_single_page_flush_ceiling`.
const SINGLE_PAGE_FLUSH_CEILING: u64 = 33;

/// `flush_tlb_mm_range`: invalidates `[start, end)` of `mm` everywhere it may be cached.
pub(crate) async fn flush_tlb_range(cx: &Cx, mm: MmId, start: VirtAddr, end: VirtAddr) {
    let pages = end.offset_from(start).pages_ceil();
    if pages == 0 {
        return;
    }
    let single = pages <= SINGLE_PAGE_FLUSH_CEILING;
    let (kind, handler) = if single {
        (FlushKind::Pages, cx.cost(Cost::TlbFlushOne) * pages)
    } else {
        (FlushKind::Full, cx.cost(Cost::TlbFlushAll))
    };
    let (local, remote_cpus) = {
        let mut st = cx.st();
        let me = cx.cpu().0 as usize;
        let handle: &engine::Handle = cx;
        for cpu in st.tlb.begin_flush(mm, me) {
            st.tlb.flush_on(cpu, mm, start, end, kind);
            if cpu != me && !handle.cpu_idle(engine::CpuId(cpu as u32)) {
                st.tlb.steal(cpu, handler);
            }
        }
        let mask = &st.mm(mm).cpumask;
        let local = mask.contains(&cx.cpu());
        let remote = mask.iter().filter(|&&c| c != cx.cpu()).count() as u64;
        if local {
            let (stat, n) = if single {
                (VmStat::NrTlbLocalFlushOne, pages)
            } else {
                (VmStat::NrTlbLocalFlushAll, 1)
            };
            st.vmstat.add(stat, n);
        }
        if remote > 0 {
            st.vmstat.inc(VmStat::NrTlbRemoteFlush);
            st.vmstat.add(VmStat::NrTlbRemoteFlushReceived, remote);
        }
        (local, remote)
    };
    if local {
        engine::Cx::charge(cx, handler).await;
    }
    if remote_cpus > 0 {
        cx.charge(Cost::TlbShootdownIpi).await;
    }
}

/// `flush_tlb_page`.
pub(crate) async fn flush_tlb_page(cx: &Cx, mm: MmId, addr: VirtAddr) {
    flush_tlb_range(cx, mm, addr, addr + simcore::Bytes::PAGE).await;
}
