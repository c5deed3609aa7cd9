//! Per-task delay accounting (`kernel/delayacct.c`, `include/linux/delayacct.h`, Linux v6.8;
//! a kernel built with CONFIG_TASK_DELAY_ACCT and booted with `delayacct`, or with
//! `kernel.task_delayacct = 1`): the time a task spends held up by memory management, as
//! `getdelays` reads it through taskstats. A delay is the elapsed time between its start and end
//! hooks, whatever the task did in between (direct reclaim's own CPU time counts as a
//! `freepages` delay). The hooks mmsim models:
//! - `swapin`: around reading a page back from swap (`swap_read_folio`, mm/page_io.c; on a
//!   synchronous device such as the seed's brd RAM disk the read completes inside it);
//! - `thrashing`: the same read when the folio is in the workingset (`PG_workingset`, set by
//!   the refault detection), nested in the swap-in delay;
//! - `freepages`: direct reclaim (`do_try_to_free_pages`, mm/vmscan.c), for global and memory
//!   cgroup reclaim alike.
//!
//! The kernel's other delays are the engine's per-task figures (`engine::TaskStats`): waiting
//! on the CPU's run queue (`cpu_delay_total`, from `sched_info`). Block IO of the page cache,
//! compaction, write-protect copies and IRQs are not accounted. The kernel exposes these
//! totals through the taskstats netlink interface; mmsim gives them to experiments through
//! `KState::delays`, keyed by the engine's task.

use crate::kernel::Cx;
use crate::types::delayacct::TaskDelays;
use simcore::SimTime;

/// A kind of delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DelayKind {
    Swapin,
    Thrashing,
    Freepages,
}

/// A delay in progress: its end is recorded when the scope is dropped
/// (`delayacct_*_start` / `delayacct_*_end`).
pub(crate) struct DelayScope<'a> {
    cx: &'a Cx,
    kind: DelayKind,
    start: SimTime,
}

impl Cx {
    /// Starts a delay of `kind` for this task; it ends when the scope is dropped.
    pub(crate) fn delay_scope(&self, kind: DelayKind) -> DelayScope<'_> {
        DelayScope { cx: self, kind, start: self.now() }
    }
}

impl Drop for DelayScope<'_> {
    fn drop(&mut self) {
        let d = self.cx.now().since(self.start);
        let mut st = self.cx.st();
        let delays: &mut TaskDelays = st.delays.entry(self.cx.task()).or_default();
        match self.kind {
            DelayKind::Swapin => delays.swapin.add(d),
            DelayKind::Thrashing => delays.thrashing.add(d),
            DelayKind::Freepages => delays.freepages.add(d),
        }
    }
}
