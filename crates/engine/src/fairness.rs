//! Fairness for daemons under the exploration schedulers: a kernel daemon back from a timed
//! sleep waits until every task that was ready when it went to sleep has run once.
//!
//! Under the exploration schedulers ordering is free and time is only bookkeeping, so a daemon
//! whose body is an endless loop of work and `msleep` (khugepaged's scan and
//! `scan_sleep_millisecs`) would be ready again at once after each sleep. The non-preemptive
//! default policy (continue the previous task) and a high PCT priority then run it forever while
//! the tasks the scenario is about never move: every schedule of the exhaustive search that
//! once picks the daemon is infinite, and a PCT trial that ranks it first never ends.
//!
//! The rule is fair stateless model checking's (Musuvathi and Qadeer, "Fair Stateless Model
//! Checking", PLDI 2008): a thread that yields (here, a daemon that sleeps on a timer) gets a
//! lower priority than the threads that were enabled when it yielded, until each of them has
//! been scheduled. A daemon's wake-up is held back until then, and released anyway when nothing
//! else is ready. Every interleaving of the tasks that make progress stays reachable, as does a
//! daemon round between any two of their steps; what is cut is only a daemon running round
//! after round while the others stand still, which a sleep of milliseconds against steps of
//! microseconds never allows on a real machine either.
//!
//! User tasks' sleeps (a device's latency) are not held back: they are finite, and holding
//! them back would hide the order in which an I/O completes before another task's next step.
//! The time-ordered scheduler needs none of this (time already orders the wake-up).

use crate::sched::ReadyEntry;
use crate::task::TaskId;
use simcore::Digest;

/// A held-back wake-up and the tasks that must run first.
#[derive(Debug)]
struct Deferred {
    entry: ReadyEntry,
    waits_for: Vec<TaskId>,
}

/// The daemons' wake-ups held back.
#[derive(Debug, Default)]
pub(crate) struct DaemonFairness {
    deferred: Vec<Deferred>,
}

impl DaemonFairness {
    /// Holds `entry` back until every task of `ready` has been scheduled; with none, it is
    /// returned at once.
    pub(crate) fn defer(&mut self, entry: ReadyEntry, ready: Vec<TaskId>) -> Option<ReadyEntry> {
        if ready.is_empty() {
            return Some(entry);
        }
        self.deferred.push(Deferred { entry, waits_for: ready });
        None
    }

    /// Whether `task`'s wake-up is held back.
    pub(crate) fn holds(&self, task: TaskId) -> bool {
        self.deferred.iter().any(|d| d.entry.task == task)
    }

    /// `task` was scheduled: the wake-ups that no longer wait for anyone, in the order they were
    /// held back.
    pub(crate) fn scheduled(&mut self, task: TaskId) -> Vec<ReadyEntry> {
        if self.deferred.is_empty() {
            // Every pass of the run loop asks; under the time-ordered scheduler nothing is ever
            // held back, and this keeps the question free.
            return Vec::new();
        }
        for d in &mut self.deferred {
            d.waits_for.retain(|&t| t != task);
        }
        self.take_where(|d| d.waits_for.is_empty())
    }

    /// Nothing else is ready: every held-back wake-up, in the order they were held back.
    pub(crate) fn release_all(&mut self) -> Vec<ReadyEntry> {
        self.take_where(|_| true)
    }

    fn take_where(&mut self, due: impl Fn(&Deferred) -> bool) -> Vec<ReadyEntry> {
        let (released, kept): (Vec<Deferred>, Vec<Deferred>) =
            std::mem::take(&mut self.deferred).into_iter().partition(due);
        self.deferred = kept;
        released.into_iter().map(|d| d.entry).collect()
    }

    /// Adds the held-back wake-ups to a state fingerprint (they decide what may run next).
    pub(crate) fn fingerprint(&self, d: &mut Digest) {
        for x in &self.deferred {
            d.write_u64(u64::from(x.entry.task.0));
            for t in &x.waits_for {
                d.write_u64(t.0.into());
            }
            d.write_u64(u64::MAX - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use simcore::SimTime;

    fn entry(task: u32) -> ReadyEntry {
        ReadyEntry { time: SimTime::from_ns(10), seq: u64::from(task), task: TaskId(task) }
    }

    #[test]
    fn released_once_each_waited_task_ran() {
        let mut f = DaemonFairness::default();
        assert!(f.defer(entry(9), vec![TaskId(1), TaskId(2)]).is_none());
        assert!(f.scheduled(TaskId(1)).is_empty());
        assert!(f.scheduled(TaskId(9)).is_empty(), "another task's turn does not count");
        let out: Vec<u32> = f.scheduled(TaskId(2)).iter().map(|e| e.task.0).collect();
        assert_eq!(out, [9]);
        assert!(f.release_all().is_empty());
    }

    #[test]
    fn nothing_ready_means_no_wait() {
        let mut f = DaemonFairness::default();
        assert_eq!(f.defer(entry(3), vec![]).map(|e| e.task), Some(TaskId(3)));
        assert!(f.defer(entry(4), vec![TaskId(1)]).is_none());
        let out: Vec<u32> = f.release_all().iter().map(|e| e.task.0).collect();
        assert_eq!(out, [4]);
    }
}
