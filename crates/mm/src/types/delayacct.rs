//! Per-task delay accounting's state (`struct task_delay_info`, `include/linux/delayacct.h`,
//! Linux v6.8): for each kind of delay, how many delays a task had and their total time. The
//! mechanism is `delayacct.rs`.

use simcore::SimDuration;

/// One kind of delay of one task: its count and total (`*_count`, `*_delay` in
/// `task_delay_info`, `*_delay_total` in `struct taskstats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delay {
    pub count: u64,
    pub total: SimDuration,
}

impl Delay {
    /// Adds one delay of `d`.
    pub fn add(&mut self, d: SimDuration) {
        self.count += 1;
        self.total += d;
    }
}

/// The delays of one task that memory management causes (the CPU's run queue and block IO are
/// the engine's `TaskStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskDelays {
    /// Reading a page back from swap (`swapin_delay_total`).
    pub swapin: Delay,
    /// Direct reclaim (`freepages_delay_total`).
    pub freepages: Delay,
    /// Waiting for a page of the workingset to be read back (`thrashing_delay_total`).
    pub thrashing: Delay,
}
