//! Per-lock state and the kernel's grant rules, free of task bookkeeping: each operation says who
//! got the lock; the executor core updates tasks, lockdep and statistics. An rwsem keeps its
//! optimistically spinning writers apart from its queue (kernel/locking/rwsem.c, v5.3 rework,
//! 00f3c5a3df2c: spinners sit on the OSQ, not the wait list), and the core tells it when a
//! hand-off is due.

use super::Mode;
use crate::task::TaskId;
use simcore::Digest;
use std::collections::VecDeque;

/// The kernel's `MAX_READERS_WAKEUP` (kernel/locking/rwsem.c): readers woken in one hand-off.
const MAX_READERS_WAKEUP: usize = 256;
/// The kernel's `RWSEM_WAIT_TIMEOUT` (kernel/locking/rwsem.c, v5.3 and later:
/// `DIV_ROUND_UP(HZ, 250)` jiffies, 4 ms at HZ 250 or 1000): how long the head of an rwsem's
/// queue waits before it asks for a hand-off, after which optimistic spinners may no longer
/// steal the lock from it.
pub(crate) const RWSEM_WAIT_TIMEOUT_NS: u64 = 4_000_000;

#[derive(Debug)]
pub(crate) enum LockState {
    /// Spinlock (`spin == true`) or mutex.
    Exclusive {
        spin: bool,
        owner: Option<TaskId>,
        waiters: VecDeque<TaskId>,
    },
    RwSem {
        readers: Vec<TaskId>,
        writer: Option<TaskId>,
        waiters: VecDeque<(TaskId, Mode)>,
        /// Writers spinning on the owning writer (the OSQ, in arrival order), not queued.
        spinners: VecDeque<TaskId>,
    },
    /// `done` counts completions not yet consumed; `u32::MAX` after `complete_all`.
    Completion {
        done: u32,
        waiters: VecDeque<TaskId>,
    },
    WaitQueue {
        waiters: VecDeque<TaskId>,
    },
}

/// What an acquisition attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    Granted,
    /// The task was queued (only when queueing was asked for).
    Queued,
    /// A writer spins on the owning writer, keeping its CPU (only when spinning was allowed).
    Spinning,
    /// Not available and not queued (trylock).
    Busy,
}

impl LockState {
    /// A free rwsem.
    pub(crate) fn rwsem() -> LockState {
        LockState::RwSem {
            readers: Vec::new(),
            writer: None,
            waiters: VecDeque::new(),
            spinners: VecDeque::new(),
        }
    }

    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            LockState::Exclusive { spin: true, .. } => "spinlock",
            LockState::Exclusive { spin: false, .. } => "mutex",
            LockState::RwSem { .. } => "rwsem",
            LockState::Completion { .. } => "completion",
            LockState::WaitQueue { .. } => "wait queue",
        }
    }

    pub(crate) fn is_spin(&self) -> bool {
        matches!(self, LockState::Exclusive { spin: true, .. })
    }

    pub(crate) fn is_held(&self) -> bool {
        match self {
            LockState::Exclusive { owner, .. } => owner.is_some(),
            LockState::RwSem { readers, writer, .. } => writer.is_some() || !readers.is_empty(),
            LockState::Completion { .. } | LockState::WaitQueue { .. } => false,
        }
    }

    /// Tries to take the lock in `mode`; queues `task` if busy and `queue` is set, or, if
    /// `spin` is set too and a writer owns the rwsem, lets a writer spin on it.
    pub(crate) fn attempt(&mut self, task: TaskId, mode: Mode, queue: bool, spin: bool) -> Attempt {
        match self {
            LockState::Exclusive { owner, waiters, .. } => {
                assert_eq!(mode, Mode::Exclusive, "spinlock/mutex taken in {mode} mode");
                assert_ne!(*owner, Some(task), "task {task} takes a lock it already holds");
                if owner.is_none() {
                    debug_assert!(waiters.is_empty(), "free lock with waiters");
                    *owner = Some(task);
                    Attempt::Granted
                } else if queue {
                    waiters.push_back(task);
                    Attempt::Queued
                } else {
                    Attempt::Busy
                }
            }
            LockState::RwSem { readers, writer, waiters, spinners } => {
                assert_ne!(*writer, Some(task), "task {task} takes an rwsem it holds for write");
                let free_for = match mode {
                    Mode::Read => writer.is_none() && waiters.is_empty(),
                    Mode::Write => writer.is_none() && readers.is_empty() && waiters.is_empty(),
                    Mode::Exclusive => panic!("rwsem taken in exclusive mode"),
                };
                if free_for {
                    match mode {
                        Mode::Read => readers.push(task),
                        _ => *writer = Some(task),
                    }
                    Attempt::Granted
                } else if queue && spin && mode == Mode::Write && writer.is_some() {
                    spinners.push_back(task);
                    Attempt::Spinning
                } else if queue {
                    waiters.push_back((task, mode));
                    Attempt::Queued
                } else {
                    Attempt::Busy
                }
            }
            LockState::Completion { .. } | LockState::WaitQueue { .. } => {
                panic!("{} used as a lock", self.kind_name())
            }
        }
    }

    /// Releases `task`'s hold; pushes onto `granted` the waiters that now hold the lock. A
    /// writer's release goes to the first spinning writer, stealing it from the queue, unless
    /// `handoff` (the queue's head has waited `RWSEM_WAIT_TIMEOUT`).
    pub(crate) fn release(
        &mut self,
        task: TaskId,
        mode: Mode,
        handoff: bool,
        granted: &mut Vec<TaskId>,
    ) {
        match self {
            LockState::Exclusive { owner, waiters, .. } => {
                assert_eq!(*owner, Some(task), "task {task} releases a lock it does not hold");
                *owner = waiters.pop_front();
                granted.extend(*owner);
            }
            LockState::RwSem { readers, writer, waiters, spinners } => {
                match mode {
                    Mode::Read => {
                        let i = readers.iter().position(|&r| r == task);
                        readers.swap_remove(i.expect("up_read by a task that is not a reader"));
                    }
                    Mode::Write => {
                        assert_eq!(
                            *writer,
                            Some(task),
                            "up_write by a task that is not the writer"
                        );
                        *writer = None;
                    }
                    Mode::Exclusive => panic!("rwsem released in exclusive mode"),
                }
                if readers.is_empty() && writer.is_none() {
                    if !handoff && let Some(s) = spinners.pop_front() {
                        *writer = Some(s);
                        granted.push(s);
                    } else {
                        rwsem_wake(readers, writer, waiters, granted);
                    }
                }
            }
            LockState::Completion { .. } | LockState::WaitQueue { .. } => {
                panic!("{} released as a lock", self.kind_name())
            }
        }
    }

    /// `downgrade_write`: the writer becomes a reader; queued readers join it if one heads the
    /// queue.
    pub(crate) fn downgrade(&mut self, task: TaskId, granted: &mut Vec<TaskId>) {
        let LockState::RwSem { readers, writer, waiters, .. } = self else {
            panic!("downgrade of a {}", self.kind_name());
        };
        assert_eq!(*writer, Some(task), "downgrade by a task that is not the writer");
        *writer = None;
        readers.push(task);
        if matches!(waiters.front(), Some((_, Mode::Read))) {
            wake_readers(readers, waiters, granted);
        }
    }

    /// The writer owning an rwsem, and the head of its queue (for the spinning rules).
    pub(crate) fn rwsem_owner_and_head(&self) -> Option<(Option<TaskId>, Option<TaskId>)> {
        match self {
            LockState::RwSem { writer, waiters, .. } => {
                Some((*writer, waiters.front().map(|w| w.0)))
            }
            _ => None,
        }
    }

    /// Spinning writers give up (the owner left its CPU, readers own the lock, or a hand-off
    /// is due) and queue behind the waiters in their order; pushes them onto `stopped`.
    pub(crate) fn stop_spinning(&mut self, stopped: &mut Vec<TaskId>) {
        if let LockState::RwSem { waiters, spinners, .. } = self {
            stopped.extend(spinners.iter().copied());
            waiters.extend(spinners.drain(..).map(|t| (t, Mode::Write)));
        }
    }

    /// `wait_for_completion` / wait-queue wait: true if it may pass at once, else queued.
    pub(crate) fn wait(&mut self, task: TaskId) -> bool {
        match self {
            LockState::Completion { done, waiters } => {
                if *done > 0 {
                    if *done != u32::MAX {
                        *done -= 1;
                    }
                    true
                } else {
                    waiters.push_back(task);
                    false
                }
            }
            LockState::WaitQueue { waiters } => {
                waiters.push_back(task);
                false
            }
            _ => panic!("wait on a {}", self.kind_name()),
        }
    }

    /// `complete` / `complete_all`.
    pub(crate) fn complete(&mut self, all: bool, woken: &mut Vec<TaskId>) {
        let LockState::Completion { done, waiters } = self else {
            panic!("complete on a {}", self.kind_name());
        };
        if all {
            *done = u32::MAX;
            woken.extend(waiters.drain(..));
        } else if let Some(t) = waiters.pop_front() {
            woken.push(t);
        } else {
            *done = done.saturating_add(1);
        }
    }

    /// `wake_up` / `wake_up_all`.
    pub(crate) fn wake_queue(&mut self, all: bool, woken: &mut Vec<TaskId>) {
        let LockState::WaitQueue { waiters } = self else {
            panic!("wake_up on a {}", self.kind_name());
        };
        let n = if all { waiters.len() } else { waiters.len().min(1) };
        woken.extend(waiters.drain(..n));
    }

    /// Mixes everything that decides later grants into `d`: holders, the queue in order, and a
    /// completion's count (kept apart by separators, so a holder never reads as a waiter).
    pub(crate) fn fingerprint(&self, d: &mut Digest) {
        for (t, m) in self.holders() {
            d.write_u64(u64::from(t.0) << 8 | m as u64);
        }
        d.write_u64(u64::MAX);
        for (t, m) in self.waiters() {
            d.write_u64(u64::from(t.0) << 8 | m as u64);
        }
        d.write_u64(u64::MAX);
        match self {
            LockState::Completion { done, .. } => d.write_u64((*done).into()),
            LockState::RwSem { spinners, .. } => {
                spinners.iter().for_each(|t| d.write_u64(t.0.into()));
            }
            _ => {}
        }
    }

    /// Holders, for dumps.
    pub(crate) fn holders(&self) -> Vec<(TaskId, Mode)> {
        match self {
            LockState::Exclusive { owner, .. } => {
                owner.iter().map(|&t| (t, Mode::Exclusive)).collect()
            }
            LockState::RwSem { readers, writer, .. } => writer
                .iter()
                .map(|&t| (t, Mode::Write))
                .chain(readers.iter().map(|&t| (t, Mode::Read)))
                .collect(),
            LockState::Completion { .. } | LockState::WaitQueue { .. } => Vec::new(),
        }
    }

    /// Waiters in queue order, then spinning writers, for dumps.
    pub(crate) fn waiters(&self) -> Vec<(TaskId, Mode)> {
        match self {
            LockState::Exclusive { waiters, .. } => {
                waiters.iter().map(|&t| (t, Mode::Exclusive)).collect()
            }
            LockState::RwSem { waiters, spinners, .. } => {
                waiters.iter().copied().chain(spinners.iter().map(|&t| (t, Mode::Write))).collect()
            }
            LockState::Completion { waiters, .. } | LockState::WaitQueue { waiters } => {
                waiters.iter().map(|&t| (t, Mode::Exclusive)).collect()
            }
        }
    }
}

/// Hands a free rwsem to the head of its queue: a writer alone, or all queued readers.
fn rwsem_wake(
    readers: &mut Vec<TaskId>,
    writer: &mut Option<TaskId>,
    waiters: &mut VecDeque<(TaskId, Mode)>,
    granted: &mut Vec<TaskId>,
) {
    debug_assert!(readers.is_empty() && writer.is_none());
    match waiters.front() {
        None => {}
        Some(&(w, Mode::Write)) => {
            waiters.pop_front();
            *writer = Some(w);
            granted.push(w);
        }
        Some(_) => wake_readers(readers, waiters, granted),
    }
}

/// Grants the lock to up to `MAX_READERS_WAKEUP` queued readers, leaving writers queued in order.
fn wake_readers(
    readers: &mut Vec<TaskId>,
    waiters: &mut VecDeque<(TaskId, Mode)>,
    granted: &mut Vec<TaskId>,
) {
    let mut woken = 0;
    waiters.retain(|&(t, mode)| {
        if mode == Mode::Read && woken < MAX_READERS_WAKEUP {
            woken += 1;
            readers.push(t);
            granted.push(t);
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u32) -> TaskId {
        TaskId(n)
    }

    fn rwsem() -> LockState {
        LockState::rwsem()
    }

    fn fingerprint(l: &LockState) -> u64 {
        let mut d = Digest::new();
        l.fingerprint(&mut d);
        d.value()
    }

    /// Two readers holding differ from a reader holding and a reader waiting (behind a writer);
    /// a completion's
    /// count is part of its state.
    #[test]
    fn fingerprints_tell_holders_from_waiters_and_count_completions() {
        let (mut both, mut queued) = (rwsem(), rwsem());
        for (n, m) in [(0, Mode::Read), (1, Mode::Read), (2, Mode::Write)] {
            both.attempt(t(n), m, true, false);
        }
        for (n, m) in [(0, Mode::Read), (2, Mode::Write), (1, Mode::Read)] {
            queued.attempt(t(n), m, true, false);
        }
        assert_ne!(fingerprint(&both), fingerprint(&queued));
        let mut g = Vec::new();
        let mut c = LockState::Completion { done: 0, waiters: VecDeque::new() };
        let before = fingerprint(&c);
        c.complete(false, &mut g);
        assert_ne!(fingerprint(&c), before);
    }

    #[test]
    fn waiting_writer_blocks_new_readers() {
        let mut l = rwsem();
        assert_eq!(l.attempt(t(0), Mode::Read, true, false), Attempt::Granted);
        assert_eq!(l.attempt(t(1), Mode::Read, true, false), Attempt::Granted);
        assert_eq!(l.attempt(t(2), Mode::Write, true, false), Attempt::Queued);
        assert_eq!(l.attempt(t(3), Mode::Read, false, false), Attempt::Busy);
        assert_eq!(l.attempt(t(3), Mode::Read, true, false), Attempt::Queued);
        let mut g = Vec::new();
        l.release(t(0), Mode::Read, false, &mut g);
        assert!(g.is_empty());
        l.release(t(1), Mode::Read, false, &mut g);
        assert_eq!(g, [t(2)]);
        g.clear();
        l.release(t(2), Mode::Write, false, &mut g);
        assert_eq!(g, [t(3)]);
    }

    /// A writer spinning on the owning writer takes the lock on release ahead of the queue,
    /// unless the queue's head is owed a hand-off; spinners that stop queue behind the waiters.
    #[test]
    fn spinning_writer_steals_until_handoff() {
        let mut l = rwsem();
        l.attempt(t(0), Mode::Write, true, true);
        assert_eq!(l.attempt(t(1), Mode::Read, true, true), Attempt::Queued);
        assert_eq!(l.attempt(t(2), Mode::Write, true, true), Attempt::Spinning);
        assert_eq!(l.attempt(t(3), Mode::Write, true, true), Attempt::Spinning);
        let mut g = Vec::new();
        l.release(t(0), Mode::Write, false, &mut g);
        assert_eq!(g, [t(2)]);
        g.clear();
        l.release(t(2), Mode::Write, true, &mut g);
        assert_eq!(g, [t(1)]);
        let mut stopped = Vec::new();
        l.stop_spinning(&mut stopped);
        assert_eq!(stopped, [t(3)]);
        assert_eq!(l.waiters(), [(t(3), Mode::Write)]);
    }

    #[test]
    fn reader_at_head_wakes_all_queued_readers() {
        let mut l = rwsem();
        l.attempt(t(0), Mode::Write, true, false);
        for (n, m) in [(1, Mode::Read), (2, Mode::Write), (3, Mode::Read)] {
            assert_eq!(l.attempt(t(n), m, true, false), Attempt::Queued);
        }
        let mut g = Vec::new();
        l.release(t(0), Mode::Write, false, &mut g);
        assert_eq!(g, [t(1), t(3)]);
        assert_eq!(l.waiters(), [(t(2), Mode::Write)]);
    }

    #[test]
    fn downgrade_lets_queued_readers_in() {
        let mut l = rwsem();
        l.attempt(t(0), Mode::Write, true, false);
        l.attempt(t(1), Mode::Read, true, false);
        let mut g = Vec::new();
        l.downgrade(t(0), &mut g);
        assert_eq!(g, [t(1)]);
        assert_eq!(l.holders().len(), 2);
    }

    #[test]
    fn completion_counts() {
        let mut c = LockState::Completion { done: 0, waiters: VecDeque::new() };
        let mut w = Vec::new();
        c.complete(false, &mut w);
        assert!(c.wait(t(0)));
        assert!(!c.wait(t(1)));
        c.complete(true, &mut w);
        assert_eq!(w, [t(1)]);
        assert!(c.wait(t(2)) && c.wait(t(3)));
    }
}
