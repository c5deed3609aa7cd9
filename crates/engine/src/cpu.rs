//! Simulated CPUs: ownership, run queues, busy-time accounting.

use crate::task::TaskId;
use simcore::{SimDuration, define_id};
use std::collections::VecDeque;

define_id!(
    /// A simulated CPU.
    pub struct CpuId;
);

/// Time accounting of one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Time charged by tasks on this CPU.
    pub busy: SimDuration,
    /// Time spent spinning on spinlocks.
    pub spin: SimDuration,
    /// Tasks that had to wait on this CPU's run queue.
    pub runqueue_waits: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Cpu {
    /// The task that runs on this CPU now (charging, spinning, or between two points).
    pub owner: Option<TaskId>,
    /// Runnable tasks waiting for this CPU, FIFO.
    pub runqueue: VecDeque<TaskId>,
    pub stats: CpuStats,
}
