//! Schedulers: who runs next at a blocking point.
//!
//! A scheduler owns the set of runnable tasks (each with the virtual time at which it may run and
//! a sequence number) and picks the next one. The same mechanism code runs under every scheduler;
//! only this choice differs (TigerBeetle's VOPR and FoundationDB's sim2 make the same split).
//!
//! - [`TimeOrdered`]: the earliest time first, ties by sequence number (FoundationDB's
//!   `TaskQueue` ordering). Virtual time never goes backwards.
//! - [`RandomWalk`]: a uniformly random runnable task at every step.
//! - [`Pct`]: probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte,
//!   "A Randomized Scheduler with Probabilistic Guarantees of Finding Bugs", ASPLOS 2010). Each
//!   task gets a random priority above `depth`; `depth - 1` change points are drawn uniformly from
//!   the first `steps` steps; at change point `i` the running task drops to priority `i`. The
//!   highest-priority runnable task always runs. A bug of depth `d` among `n` tasks in `k` steps is
//!   found with probability at least `1 / (n * k^(d-1))` per run.
//!
//! Under the exploration schedulers the executor advances its clock to `max(now, entry.time)`:
//! ordering is free, time is only bookkeeping. One exception keeps every run finite: a kernel
//! daemon back from a timed sleep is handed to the scheduler only once the tasks that were ready
//! when it slept have each run (`fairness.rs`).

use crate::config::SchedulerKind;
use crate::task::TaskId;
use simcore::{Prng, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

/// A runnable task and the time from which it may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReadyEntry {
    pub time: SimTime,
    pub seq: u64,
    pub task: TaskId,
}

/// The policy that picks the next task to run.
pub trait Scheduler: fmt::Debug {
    /// A task became runnable.
    fn push(&mut self, entry: ReadyEntry);
    /// The next task to run, or `None` when nothing is runnable.
    fn pop(&mut self) -> Option<ReadyEntry>;
    fn is_empty(&self) -> bool;
    /// Whether the scheduler may also switch tasks before uncontended lock operations and at
    /// zero-length charges (exploration schedulers do; the time-ordered one switches only where
    /// virtual time passes or a task blocks).
    fn preempts_at_every_point(&self) -> bool;
    /// Pushes `entry`, unless `may_take` and it is what [`pop`](Scheduler::pop) would return
    /// once pushed: then it is not queued and the answer is true, and the engine runs its task
    /// on without a pass of the run loop (a charge or sleep that ends before anything else is
    /// due). A scheduler that must see every blocking point (every exploration scheduler) keeps
    /// the default, which always pushes.
    fn push_or_take(&mut self, entry: ReadyEntry, may_take: bool) -> bool {
        let _ = may_take;
        self.push(entry);
        false
    }
    /// Whether nothing queued would be dispatched before an entry due at `time` pushed now:
    /// every queued entry is due later. A scheduler that may pick any runnable task (every
    /// exploration scheduler) keeps the default, which never promises it.
    fn nothing_due_through(&self, time: SimTime) -> bool {
        let _ = time;
        false
    }
}

/// The scheduler `kind` drawing from the run's root generator `prng` (`Prng::from_seed(seed)`):
/// what [`Sim::new`](crate::Sim::new) plugs in, for callers that wrap it (the explorer records
/// the choices of the random and PCT schedulers this way).
pub fn build(kind: SchedulerKind, prng: &Prng) -> Box<dyn Scheduler> {
    match kind {
        SchedulerKind::TimeOrdered => Box::new(TimeOrdered::default()),
        SchedulerKind::Random => {
            Box::new(RandomWalk { ready: Vec::new(), prng: prng.stream("random-walk") })
        }
        SchedulerKind::Pct { depth, steps } => Box::new(Pct::new(depth, steps, prng.stream("pct"))),
    }
}

/// The run's scheduler as the executor core holds it: the time-ordered one by value, so that
/// the calls every charge makes ([`Scheduler::push_or_take`]) are direct and inlined; any
/// other (an exploration scheduler, or one of the caller's) boxed. Either way each call goes to
/// the same scheduler code: only the call is cheaper.
#[derive(Debug)]
pub(crate) enum Sched {
    TimeOrdered(TimeOrdered),
    Boxed(Box<dyn Scheduler>),
}

impl Sched {
    /// The scheduler `kind` (as [`build`] makes it), or the caller's own.
    pub(crate) fn new(kind: SchedulerKind, prng: &Prng, own: Option<Box<dyn Scheduler>>) -> Sched {
        match (own, kind) {
            (Some(own), _) => Sched::Boxed(own),
            (None, SchedulerKind::TimeOrdered) => Sched::TimeOrdered(TimeOrdered::default()),
            (None, kind) => Sched::Boxed(build(kind, prng)),
        }
    }
}

/// `$s` bound to the scheduler inside a [`Sched`], whichever it is, in `$call`.
macro_rules! on_sched {
    ($sched:expr, $s:ident => $call:expr) => {
        match $sched {
            Sched::TimeOrdered($s) => $call,
            Sched::Boxed($s) => $call,
        }
    };
}

impl Scheduler for Sched {
    #[inline]
    fn push(&mut self, entry: ReadyEntry) {
        on_sched!(self, s => s.push(entry))
    }

    #[inline]
    fn pop(&mut self) -> Option<ReadyEntry> {
        on_sched!(self, s => s.pop())
    }

    #[inline]
    fn is_empty(&self) -> bool {
        on_sched!(self, s => s.is_empty())
    }

    fn preempts_at_every_point(&self) -> bool {
        on_sched!(self, s => s.preempts_at_every_point())
    }

    #[inline]
    fn push_or_take(&mut self, entry: ReadyEntry, may_take: bool) -> bool {
        on_sched!(self, s => s.push_or_take(entry, may_take))
    }

    #[inline]
    fn nothing_due_through(&self, time: SimTime) -> bool {
        on_sched!(self, s => s.nothing_due_through(time))
    }
}

/// Earliest time first, ties by sequence number.
#[derive(Debug, Default)]
pub(crate) struct TimeOrdered {
    heap: BinaryHeap<Reverse<ReadyEntry>>,
}

impl Scheduler for TimeOrdered {
    fn push(&mut self, entry: ReadyEntry) {
        self.heap.push(Reverse(entry));
    }

    fn pop(&mut self) -> Option<ReadyEntry> {
        self.heap.pop().map(|Reverse(e)| e)
    }

    fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    fn preempts_at_every_point(&self) -> bool {
        false
    }

    /// Entries are totally ordered by `(time, seq)`: `entry` is next when it is below the heap's
    /// least (an entry due at the same time but queued earlier goes first, as at a pass), and
    /// then never enters the heap.
    #[inline]
    fn push_or_take(&mut self, entry: ReadyEntry, may_take: bool) -> bool {
        if may_take && self.heap.peek().is_none_or(|Reverse(least)| entry < *least) {
            return true;
        }
        self.push(entry);
        false
    }

    /// An entry pushed now gets the highest sequence number, so a queued one due at `time`
    /// would still go first.
    #[inline]
    fn nothing_due_through(&self, time: SimTime) -> bool {
        self.heap.peek().is_none_or(|Reverse(least)| least.time > time)
    }
}

/// A uniformly random runnable task.
#[derive(Debug)]
pub(crate) struct RandomWalk {
    ready: Vec<ReadyEntry>,
    prng: Prng,
}

impl Scheduler for RandomWalk {
    fn push(&mut self, entry: ReadyEntry) {
        self.ready.push(entry);
    }

    fn pop(&mut self) -> Option<ReadyEntry> {
        if self.ready.is_empty() {
            return None;
        }
        let i = self.prng.below(self.ready.len() as u64) as usize;
        Some(self.ready.swap_remove(i))
    }

    fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    fn preempts_at_every_point(&self) -> bool {
        true
    }
}

/// Probabilistic concurrency testing.
#[derive(Debug)]
pub(crate) struct Pct {
    ready: Vec<ReadyEntry>,
    /// Priority per task id; tasks are given one when first seen.
    priority: Vec<u64>,
    /// Change points (step numbers), sorted; change point `i` lowers the running task to `i + 1`.
    change_points: Vec<u64>,
    step: u64,
    depth: u64,
    prng: Prng,
}

impl Pct {
    fn new(depth: u32, steps: u64, mut prng: Prng) -> Pct {
        let mut change_points: Vec<u64> = (1..depth).map(|_| 1 + prng.below(steps)).collect();
        change_points.sort_unstable();
        Pct {
            ready: Vec::new(),
            priority: Vec::new(),
            change_points,
            step: 0,
            depth: depth.into(),
            prng,
        }
    }

    fn priority_of(&mut self, task: TaskId) -> u64 {
        let i = task.0 as usize;
        while self.priority.len() <= i {
            // Initial priorities lie above every change-point priority (1..depth-1). The low
            // bits carry the task id so that priorities never tie.
            let p = (self.depth + (self.prng.next_u64() >> 40)) << 24 | self.priority.len() as u64;
            self.priority.push(p);
        }
        self.priority[i]
    }
}

impl Scheduler for Pct {
    fn push(&mut self, entry: ReadyEntry) {
        self.priority_of(entry.task);
        self.ready.push(entry);
    }

    fn pop(&mut self) -> Option<ReadyEntry> {
        let (i, _) =
            self.ready.iter().enumerate().max_by_key(|(_, e)| self.priority[e.task.0 as usize])?;
        let entry = self.ready.swap_remove(i);
        self.step += 1;
        if let Some(k) = self.change_points.iter().position(|&c| c == self.step) {
            self.priority[entry.task.0 as usize] = k as u64 + 1;
        }
        Some(entry)
    }

    fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    fn preempts_at_every_point(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: u64, seq: u64, task: u32) -> ReadyEntry {
        ReadyEntry { time: SimTime::from_ns(time), seq, task: TaskId(task) }
    }

    #[test]
    fn time_ordered_breaks_ties_by_seq() {
        let mut s = TimeOrdered::default();
        s.push(entry(5, 2, 0));
        s.push(entry(5, 1, 1));
        s.push(entry(3, 9, 2));
        let order: Vec<u32> = std::iter::from_fn(|| s.pop()).map(|e| e.task.0).collect();
        assert_eq!(order, [2, 1, 0]);
    }

    #[test]
    fn pct_runs_highest_priority_and_changes_at_points() {
        let mut s = Pct::new(2, 1, Prng::from_seed(1));
        assert_eq!(s.change_points, [1]);
        s.push(entry(0, 0, 0));
        s.push(entry(0, 1, 1));
        let first = s.pop().unwrap().task;
        // Step 1 is the change point: the task that ran drops below the other one.
        s.push(entry(0, 2, first.0));
        let second = s.pop().unwrap().task;
        assert_ne!(first, second);
    }
}
