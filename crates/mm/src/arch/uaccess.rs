//! User memory accesses as the MMU sees them (the hardware page walk) and `copy_to_user` /
//! `copy_from_user` (`arch/x86/lib/usercopy_64.c`).
//!
//! An access translates through the CPU's TLBs and, on a miss, the hardware page walk over the
//! simulated page tables (`tlb/`): a present PTE with the user bit, the write bit for a store
//! and no NX bit for a fetch succeeds; the walk sets the accessed bit (and the dirty and
//! soft-dirty bits for a store), as x86 hardware does without any lock. Anything else raises a
//! page fault, handled by `fault.rs`, after which the access is retried, so a racing unmap
//! between the fault and the retry simply faults again, as on real hardware.
//!
//! Time: each access costs `MemAccess` plus what the TLB levels and walks it needed cost, plus
//! any shootdown handler time the CPU owes (`tlb/`); an access is a cache hit, except the stores
//! that follow a huge page's copy-on-write copy (`settle_stores_after_copy`, `caches.rs`).

use crate::errno::Signal;
use crate::fault::do_user_addr_fault;
use crate::kernel::{Cx, KState};
use crate::pgtable::Access;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use simcore::{Bytes, Pfn, VirtAddr};

/// Resolves one access to `addr`, faulting as needed, and performs it: `op` runs on the
/// physical page in the same step as the translation, as the load or store does on hardware —
/// a blocking point between the two would let another CPU unmap and free the page in between.
/// The access's time is charged afterwards.
pub(crate) async fn access_page<R>(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    access: Access,
    op: impl FnOnce(&mut KState, Pfn) -> R,
) -> Result<R, Signal> {
    let cpu = cx.cpu().0 as usize;
    let mut op = Some(op);
    loop {
        let (done, owed) = {
            let mut st = cx.st();
            let done = st.mmu_translate(cpu, mm, addr, access).map(|page| {
                let op = op.take().expect("an access is performed once");
                op(&mut st, page)
            });
            (done, st.tlb.take_pending(cpu))
        };
        if let Some(r) = done {
            engine::Cx::charge(cx, cx.cost(Cost::MemAccess) + owed).await;
            return Ok(r);
        }
        if !owed.is_zero() {
            engine::Cx::charge(cx, owed).await;
        }
        do_user_addr_fault(cx, mm, addr, access).await.map_err(|f| f.signal())?;
    }
}

/// The MMU over a run of accesses, without blocking: returns how many were translated (TLB
/// hits and walks); `refs[n]`, if any, must fault (`fault_and_retry` takes the fault and retries it). The time they took
/// is charged by `settle`. This is the trace-replay hot path.
pub(crate) fn translate_run(cx: &Cx, mm: MmId, refs: &[(VirtAddr, Access)]) -> usize {
    let cpu = cx.cpu().0 as usize;
    let mut st = cx.st();
    for (i, &(addr, access)) in refs.iter().enumerate() {
        if st.mmu_translate(cpu, mm, addr, access).is_none() {
            return i;
        }
    }
    refs.len()
}

/// Takes the page fault of the access [`translate_run`] stopped at, whose walk already found
/// the page missing or forbidding, then retries the access as the CPU re-executes it (faulting
/// again if it must). So a first touch walks twice, as on hardware: the walk that faults and
/// the walk of the retry.
pub(crate) async fn fault_and_retry(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    access: Access,
) -> Result<(), Signal> {
    do_user_addr_fault(cx, mm, addr, access).await.map_err(|f| f.signal())?;
    access_page(cx, mm, addr, access, |_, _| ()).await
}

/// Charges `n` translated accesses and what their TLB misses and walks cost.
pub(crate) async fn settle(cx: &Cx, n: u64) {
    let owed = cx.st().tlb.take_pending(cx.cpu().0 as usize);
    engine::Cx::charge(cx, cx.cost(Cost::MemAccess) * n + owed).await;
}

/// Charges `n` translated stores to every word of `len` bytes the kernel has just copied for
/// this task (a copy-on-write fault's huge page), with what they move through the memory bus
/// where the copy left the lines outside the CPU's caches (`caches.rs`); the same as
/// [`settle`] when the bytes fit.
pub(crate) async fn settle_stores_after_copy(cx: &Cx, n: u64, len: Bytes) {
    let owed = cx.st().tlb.take_pending(cx.cpu().0 as usize);
    let work = cx.cost(Cost::MemAccess) * n + owed;
    cx.charge_streaming(work, cx.caches().stores_after_copy(len)).await;
}

/// Reads `len` bytes of user memory at `addr` (`copy_from_user`).
pub(crate) async fn read_user(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: u64,
) -> Result<Vec<u8>, Signal> {
    // The buffer grows page by page as the copy succeeds: a read that faults stops having
    // allocated only what it copied, whatever `len` the caller asked for.
    let mut out = Vec::new();
    let mut done = 0u64;
    while done < len {
        let a = addr.0.checked_add(done).map(VirtAddr).ok_or(Signal::SIGSEGV)?;
        let n = (4096 - a.page_offset()).min(len - done);
        out.resize((done + n) as usize, 0);
        let chunk = &mut out[done as usize..];
        access_page(cx, mm, a, Access::Read, |st, page| {
            st.mem.read(page.0, a.page_offset() as usize, chunk);
        })
        .await?;
        done += n;
    }
    Ok(out)
}

/// Writes `data` to user memory at `addr` (`copy_to_user`).
pub(crate) async fn write_user(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    data: &[u8],
) -> Result<(), Signal> {
    let len = data.len() as u64;
    let mut done = 0u64;
    while done < len {
        let a = addr + Bytes(done);
        let n = (4096 - a.page_offset()).min(len - done);
        let chunk = &data[done as usize..(done + n) as usize];
        access_page(cx, mm, a, Access::Write, |st, page| {
            st.mem.write(page.0, a.page_offset() as usize, chunk);
        })
        .await?;
        done += n;
    }
    Ok(())
}

/// Touches one byte of every page of `[addr, addr + len)`.
pub(crate) async fn touch(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    len: Bytes,
    access: Access,
) -> Result<(), Signal> {
    let end = addr.checked_add(len).ok_or(Signal::SIGSEGV)?;
    let mut a = addr;
    while a < end {
        access_page(cx, mm, a, access, |_, _| ()).await?;
        a = (a + Bytes::PAGE).align_down(Bytes::PAGE);
    }
    Ok(())
}
