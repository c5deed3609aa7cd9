//! Simulated tasks: their state, where they last stopped, and their time accounting (an rwsem
//! writer's optimistic spin that ends in sleep counts as spin time up to the moment it sleeps,
//! as `rwsem_optimistic_spin` burns its CPU until it gives up, kernel/locking/rwsem.c).

use crate::cpu::{CpuId, TaskContext};
use crate::lock::{LockId, Mode};
use simcore::{SimDuration, SimTime, define_id};
use std::fmt;
use std::panic::Location;

define_id!(
    /// A simulated task (a kernel thread, a user thread, a device).
    pub struct TaskId;
);

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Has an entry in the scheduler.
    Queued,
    /// Being polled.
    Running,
    /// Waiting for its CPU, which another task owns.
    OnRunqueue,
    /// Waiting on a lock, completion, wait queue or join; no scheduler entry.
    Blocked,
    Done,
}

/// The kind of blocking point a task stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PointKind {
    Spawn,
    Charge,
    Sleep,
    /// A preemption point before a lock operation (exploration schedulers only).
    Yield,
    /// Waiting to acquire a lock, or woken holding it.
    Lock(LockId, Mode),
    /// Waiting on a completion or wait queue.
    Wait(LockId),
    Join(TaskId),
}

/// A named blocking point: what the task waits for and the source line that asked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Point {
    pub kind: PointKind,
    pub at: &'static Location<'static>,
}

impl fmt::Display for PointKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PointKind::Spawn => f.write_str("spawn"),
            PointKind::Charge => f.write_str("charge"),
            PointKind::Sleep => f.write_str("sleep"),
            PointKind::Yield => f.write_str("preempt"),
            PointKind::Lock(l, m) => write!(f, "{m} lock#{l}"),
            PointKind::Wait(l) => write!(f, "wait on #{l}"),
            PointKind::Join(t) => write!(f, "join task {t}"),
        }
    }
}

/// Time accounting of one task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// CPU time charged by the task.
    pub cpu: SimDuration,
    /// CPU time spent spinning on spinlocks (the CPU was busy, no work done).
    pub spin: SimDuration,
    /// Time asleep waiting for mutexes, rwsems, completions, wait queues and joins.
    pub sleep_wait: SimDuration,
    /// Time runnable but waiting for its CPU.
    pub runqueue_wait: SimDuration,
    /// Time in timed sleeps ([`Cx::sleep`](crate::Cx::sleep): device latencies, timers).
    pub timed_sleep: SimDuration,
    /// Wake-up latencies paid after sleeping while the CPU went idle (`wakeup_latency`).
    pub wakeup_delay: SimDuration,
    /// Times the task was resumed.
    pub switches: u64,
    /// Context switches onto the task's CPU (`cpu` module note), and what they cost: part of
    /// `cpu`, paid with the task's next charge.
    pub context_switches: u64,
    pub switching: SimDuration,
}

/// A lock the task holds, for lockdep and dumps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeldLock {
    pub lock: LockId,
    pub mode: Mode,
    pub subclass: u8,
    pub since: SimTime,
    pub at: &'static Location<'static>,
}

#[derive(Debug)]
pub(crate) struct Task {
    pub name: String,
    pub cpu: CpuId,
    /// The address space a context switch to the task loads (`cpu` module note).
    pub context: TaskContext,
    pub daemon: bool,
    pub status: Status,
    pub point: Point,
    pub held: Vec<HeldLock>,
    /// Subclass, source line and first blocking time of the acquisition the task is queued for
    /// (a woken waiter that fails its retry keeps its first blocking time).
    pub held_pending: Option<(u8, &'static Location<'static>, SimTime)>,
    /// Spinlocks held: a task with a non-zero count is never preempted.
    pub preempt_count: u32,
    pub joiners: Vec<TaskId>,
    /// Time the task owes its CPU, paid with its next charge: cache-line transfers of lock
    /// releases (a release cannot block) and the context switch that brought it onto its CPU.
    pub debt: SimDuration,
    /// When the current wait (blocked, spinning, on run queue) began.
    pub wait_since: SimTime,
    /// The part of the current wait spent spinning before the task went to sleep (an rwsem
    /// writer whose optimistic spinning stopped), already counted as spin time.
    pub spun: SimDuration,
    /// When the task last got its CPU.
    pub slice_start: SimTime,
    pub stats: TaskStats,
}

impl Task {
    /// Forgets the latest hold of `lock` in `mode`, keeping the others in order; `None` if the
    /// task holds no such lock. Locks are nearly always released latest first, which pops.
    #[inline]
    pub(crate) fn unhold(&mut self, lock: LockId, mode: Mode) -> Option<HeldLock> {
        let i = self.held.iter().rposition(|h| h.lock == lock && h.mode == mode)?;
        if i + 1 == self.held.len() { self.held.pop() } else { Some(self.held.remove(i)) }
    }
}
