//! Per-lock state and the kernel's grant rules, free of task bookkeeping: each operation says who
//! got the lock; the executor core updates tasks, lockdep and statistics. An rwsem keeps its
//! optimistically spinning writers apart from its queue (kernel/locking/rwsem.c, v5.3 rework,
//! 00f3c5a3df2c: spinners sit on the OSQ, not the wait list), and the core tells it when a
//! hand-off is due. A mutex or rwsem head writer woken by a release stays queued, marked
//! `woken`, until its retry (the rules are in the header of `lock.rs`).

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
        /// A mutex's head waiter was woken and has not yet retried (it stays queued).
        woken: bool,
        /// A mutex's `MUTEX_FLAG_HANDOFF`: the head failed a retry; the next unlock hands the
        /// lock to it.
        handoff: bool,
    },
    RwSem {
        readers: Vec<TaskId>,
        writer: Option<TaskId>,
        waiters: VecDeque<(TaskId, Mode)>,
        /// Writers spinning on the owning writer (the OSQ, in arrival order), not queued.
        spinners: VecDeque<TaskId>,
        /// The writer at the head was woken and has not yet retried (it stays queued).
        woken: bool,
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
            woken: false,
        }
    }

    /// A free spinlock (`spin`) or mutex.
    pub(crate) fn exclusive(spin: bool) -> LockState {
        LockState::Exclusive {
            spin,
            owner: None,
            waiters: VecDeque::new(),
            woken: false,
            handoff: false,
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

    #[inline]
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
    /// `spin` is set too and a writer owns the rwsem, lets a writer spin on it. A free mutex
    /// goes to whoever asks, even while its woken head has not yet retried; a free rwsem goes
    /// to a running writer or reader (not a trylock) unless `handoff` (the head is owed it).
    pub(crate) fn attempt(
        &mut self,
        task: TaskId,
        mode: Mode,
        queue: bool,
        spin: bool,
        handoff: bool,
    ) -> Attempt {
        match self {
            LockState::Exclusive { spin: spinlock, owner, waiters, .. } => {
                assert_eq!(mode, Mode::Exclusive, "spinlock/mutex taken in {mode} mode");
                assert_ne!(*owner, Some(task), "task {task} takes a lock it already holds");
                if owner.is_none() {
                    debug_assert!(!*spinlock || waiters.is_empty(), "free spinlock with waiters");
                    *owner = Some(task);
                    Attempt::Granted
                } else if queue {
                    waiters.push_back(task);
                    Attempt::Queued
                } else {
                    Attempt::Busy
                }
            }
            LockState::RwSem { readers, writer, waiters, spinners, .. } => {
                assert_ne!(*writer, Some(task), "task {task} takes an rwsem it holds for write");
                let steal = queue && !handoff && readers.is_empty();
                let free_for = match mode {
                    Mode::Read | Mode::Write if writer.is_some() => false,
                    Mode::Read => waiters.is_empty() || steal,
                    Mode::Write => readers.is_empty() && (waiters.is_empty() || steal),
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

    /// Releases `task`'s hold; pushes onto `granted` the waiters that now hold the lock, and
    /// returns the head waiter woken to retry, if one was woken (it stays queued and holds
    /// nothing). A spinlock goes to its next waiter; a mutex to its head only if the head set
    /// HANDOFF, else the head is woken. A writer's release of an rwsem goes to the first
    /// spinning writer, stealing it from the queue, unless `handoff` (the queue's head has
    /// waited `RWSEM_WAIT_TIMEOUT`); queued readers at the head are granted; a writer at the
    /// head is woken, or granted if `handoff`. Inline: its one caller is every release.
    #[inline]
    pub(crate) fn release(
        &mut self,
        task: TaskId,
        mode: Mode,
        handoff: bool,
        granted: &mut Vec<TaskId>,
    ) -> Option<TaskId> {
        match self {
            LockState::Exclusive { spin, owner, waiters, woken, handoff } => {
                assert_eq!(*owner, Some(task), "task {task} releases a lock it does not hold");
                if *spin || std::mem::take(handoff) {
                    *owner = waiters.pop_front();
                    granted.extend(*owner);
                    *woken = false;
                    return None;
                }
                *owner = None;
                wake_head(waiters.front().copied(), woken)
            }
            LockState::RwSem { readers, writer, waiters, spinners, woken } => {
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
                if !readers.is_empty() || writer.is_some() {
                    return None;
                }
                if !handoff && let Some(s) = spinners.pop_front() {
                    *writer = Some(s);
                    granted.push(s);
                    return None;
                }
                match waiters.front() {
                    Some(&(w, Mode::Write)) if !handoff => wake_head(Some(w), woken),
                    _ => {
                        *woken = false;
                        rwsem_wake(readers, writer, waiters, granted);
                        None
                    }
                }
            }
            LockState::Completion { .. } | LockState::WaitQueue { .. } => {
                panic!("{} released as a lock", self.kind_name())
            }
        }
    }

    /// A woken head waiter retries (`__mutex_trylock` / `rwsem_try_write_lock` after its
    /// `schedule()`): true if it took the lock (and left the queue); else it stays at the head
    /// and a mutex's head sets HANDOFF.
    pub(crate) fn retry(&mut self, task: TaskId) -> bool {
        match self {
            LockState::Exclusive { spin: false, owner, waiters, woken, handoff } => {
                debug_assert_eq!(waiters.front(), Some(&task), "a retrying waiter is not the head");
                *woken = false;
                if owner.is_some() {
                    *handoff = true;
                    return false;
                }
                waiters.pop_front();
                *owner = Some(task);
                true
            }
            LockState::RwSem { readers, writer, waiters, woken, .. } => {
                debug_assert_eq!(waiters.front().map(|w| w.0), Some(task), "retry not by the head");
                *woken = false;
                if writer.is_some() || !readers.is_empty() {
                    return false;
                }
                waiters.pop_front();
                *writer = Some(task);
                true
            }
            _ => panic!("retry on a {}", self.kind_name()),
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
    #[inline]
    pub(crate) fn rwsem_owner_and_head(&self) -> Option<(Option<TaskId>, Option<TaskId>)> {
        match self {
            LockState::RwSem { writer, waiters, .. } => {
                Some((*writer, waiters.front().map(|w| w.0)))
            }
            _ => None,
        }
    }

    /// Whether writers spin on this rwsem (an optimistic spinner on its OSQ).
    #[inline]
    pub(crate) fn has_spinners(&self) -> bool {
        matches!(self, LockState::RwSem { spinners, .. } if !spinners.is_empty())
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

    /// Whether a wait queue has nobody on it: `wake_up` then finds nobody on the list and
    /// returns.
    #[inline]
    pub(crate) fn wait_queue_is_empty(&self) -> bool {
        let LockState::WaitQueue { waiters } = self else {
            panic!("wake_up on a {}", self.kind_name());
        };
        waiters.is_empty()
    }

    /// `wake_up` / `wake_up_all` of a queue with waiters ([`LockState::wait_queue_is_empty`]
    /// says when there are none).
    pub(crate) fn wake_queue(&mut self, all: bool, woken: &mut Vec<TaskId>) {
        let LockState::WaitQueue { waiters } = self else {
            panic!("wake_up on a {}", self.kind_name());
        };
        let n = if all { waiters.len() } else { 1 };
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
            LockState::RwSem { spinners, woken, .. } => {
                spinners.iter().for_each(|t| d.write_u64(t.0.into()));
                d.write_u64((*woken).into());
            }
            LockState::Exclusive { woken, handoff, .. } => {
                d.write_u64(u64::from(*woken) | u64::from(*handoff) << 1);
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

/// Wakes `head` to retry unless it is already awake (the kernel's `wake_q_add` of a running
/// task does nothing).
fn wake_head(head: Option<TaskId>, woken: &mut bool) -> Option<TaskId> {
    let head = head.filter(|_| !*woken);
    *woken |= head.is_some();
    head
}

/// Hands a free rwsem to the head of its queue: a writer alone, or all queued readers.
#[inline]
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
            both.attempt(t(n), m, true, false, false);
        }
        for (n, m) in [(0, Mode::Read), (2, Mode::Write), (1, Mode::Read)] {
            queued.attempt(t(n), m, true, false, false);
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
        assert_eq!(l.attempt(t(0), Mode::Read, true, false, false), Attempt::Granted);
        assert_eq!(l.attempt(t(1), Mode::Read, true, false, false), Attempt::Granted);
        assert_eq!(l.attempt(t(2), Mode::Write, true, false, false), Attempt::Queued);
        assert_eq!(l.attempt(t(3), Mode::Read, false, false, false), Attempt::Busy);
        assert_eq!(l.attempt(t(3), Mode::Read, true, false, false), Attempt::Queued);
        let mut g = Vec::new();
        let _ = l.release(t(0), Mode::Read, false, &mut g);
        assert!(g.is_empty());
        assert_eq!(l.release(t(1), Mode::Read, false, &mut g), Some(t(2)));
        assert!(g.is_empty(), "a writer at the head is woken, not granted");
        assert!(l.retry(t(2)));
        let _ = l.release(t(2), Mode::Write, false, &mut g);
        assert_eq!(g, [t(3)]);
    }

    /// A writer spinning on the owning writer takes the lock on release ahead of the queue,
    /// unless the queue's head is owed a hand-off; spinners that stop queue behind the waiters.
    #[test]
    fn spinning_writer_steals_until_handoff() {
        let mut l = rwsem();
        l.attempt(t(0), Mode::Write, true, true, false);
        assert_eq!(l.attempt(t(1), Mode::Read, true, true, false), Attempt::Queued);
        assert_eq!(l.attempt(t(2), Mode::Write, true, true, false), Attempt::Spinning);
        assert_eq!(l.attempt(t(3), Mode::Write, true, true, false), Attempt::Spinning);
        let mut g = Vec::new();
        let _ = l.release(t(0), Mode::Write, false, &mut g);
        assert_eq!(g, [t(2)]);
        g.clear();
        let _ = l.release(t(2), Mode::Write, true, &mut g);
        assert_eq!(g, [t(1)]);
        let mut stopped = Vec::new();
        l.stop_spinning(&mut stopped);
        assert_eq!(stopped, [t(3)]);
        assert_eq!(l.waiters(), [(t(3), Mode::Write)]);
    }

    /// A mutex's unlock wakes its head without granting; a running task takes the lock first;
    /// the head's failed retry sets HANDOFF and the next unlock grants the lock to it.
    #[test]
    fn mutex_wakes_head_then_hands_off_after_failed_retry() {
        let mut l = LockState::exclusive(false);
        let mut g = Vec::new();
        l.attempt(t(0), Mode::Exclusive, true, false, false);
        assert_eq!(l.attempt(t(1), Mode::Exclusive, true, false, false), Attempt::Queued);
        assert_eq!(l.release(t(0), Mode::Exclusive, false, &mut g), Some(t(1)));
        assert_eq!(l.attempt(t(2), Mode::Exclusive, true, false, false), Attempt::Granted);
        assert_eq!(l.release(t(2), Mode::Exclusive, false, &mut g), None, "head already awake");
        assert_eq!(l.attempt(t(3), Mode::Exclusive, true, false, false), Attempt::Granted);
        assert!(!l.retry(t(1)));
        assert_eq!(l.release(t(3), Mode::Exclusive, false, &mut g), None);
        assert_eq!(g, [t(1)]);
    }

    #[test]
    fn reader_at_head_wakes_all_queued_readers() {
        let mut l = rwsem();
        l.attempt(t(0), Mode::Write, true, false, false);
        for (n, m) in [(1, Mode::Read), (2, Mode::Write), (3, Mode::Read)] {
            assert_eq!(l.attempt(t(n), m, true, false, false), Attempt::Queued);
        }
        let mut g = Vec::new();
        let _ = l.release(t(0), Mode::Write, false, &mut g);
        assert_eq!(g, [t(1), t(3)]);
        assert_eq!(l.waiters(), [(t(2), Mode::Write)]);
    }

    #[test]
    fn downgrade_lets_queued_readers_in() {
        let mut l = rwsem();
        l.attempt(t(0), Mode::Write, true, false, false);
        l.attempt(t(1), Mode::Read, true, false, false);
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
