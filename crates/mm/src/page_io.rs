//! Reading a page back from swap (`mm/page_io.c` `swap_read_folio`, Linux v6.8): the device
//! fills a folio that `KState::swapin_new` (`swap.rs`) put in the swap cache, locked. The swap
//! devices mmsim models are synchronous (a disk request or the seed's brd RAM disk, whose
//! `SWP_SYNCHRONOUS_IO` makes the read complete inside the call), so the reader sleeps for the
//! device's latency here. The read is a delay of the task (`delayacct.rs`): swap-in, and
//! thrashing when the refault put the folio in the workingset (`PG_workingset`).

use crate::delayacct::DelayKind;
use crate::folio::pg;
use crate::kernel::Cx;
use simcore::Pfn;

/// Waits while the device fills `head` (`swap_read_folio` on a synchronous device).
pub(crate) async fn swap_read_folio(cx: &Cx, head: Pfn) {
    let workingset = cx.st().folios.test(head, pg::WORKINGSET);
    let _swapin = cx.delay_scope(DelayKind::Swapin);
    let _thrashing = workingset.then(|| cx.delay_scope(DelayKind::Thrashing));
    cx.sleep(cx.block_io(1)).await;
}
