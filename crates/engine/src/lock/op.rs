//! The future behind every lock operation: an optional preemption point, then the attempt, then
//! (if it had to wait) the resumption: holding the lock if it was granted, or, for a mutex or
//! rwsem head woken without it, a new attempt (the retry), which may block again.
//!
//! A wait on a wait queue or completion has no preemption point before it: its caller checked
//! its condition in the same step, and the wait must be queued before anyone can change that
//! condition and wake the queue (the kernel's `prepare_to_wait` queues before the last check).
//! Blocking is the scheduling point.

use super::{LockId, Mode};
use crate::cx::Cx;
use crate::task::{Point, PointKind};
use simcore::SimDuration;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Acquire(Mode, u8),
    TryAcquire(Mode),
    /// Completion or wait-queue wait.
    Wait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Yielded,
    Waiting,
    /// Charged for pulling the lock word's cache line; resolves to the attempt's outcome.
    Transferring(bool),
}

/// Resolves to whether the operation succeeded (always true except for a failed trylock).
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub(crate) struct LockOp<'a> {
    cx: &'a Cx,
    lock: LockId,
    op: Op,
    at: &'static Location<'static>,
    stage: Stage,
}

impl<'a> LockOp<'a> {
    #[inline]
    pub(crate) fn new(cx: &'a Cx, lock: LockId, op: Op, at: &'static Location<'static>) -> Self {
        LockOp { cx, lock, op, at, stage: Stage::Start }
    }
}

impl Future for LockOp<'_> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        let task = this.cx.task();
        let mut st = this.cx.core().state.borrow_mut();
        if this.stage == Stage::Start && st.preempts_at_every_point && !matches!(this.op, Op::Wait)
        {
            st.yield_point(task, Point { kind: PointKind::Yield, at: this.at });
            this.stage = Stage::Yielded;
            return Poll::Pending;
        }
        match this.stage {
            Stage::Waiting if st.granted(task, this.lock, this.op) => return Poll::Ready(true),
            Stage::Transferring(outcome) => return Poll::Ready(outcome),
            Stage::Start | Stage::Yielded | Stage::Waiting => {}
        }
        let (outcome, transfer) = match this.op {
            Op::Acquire(mode, _) if this.stage == Stage::Waiting => {
                match st.retry(task, this.lock, mode) {
                    Some(transfer) => (true, transfer),
                    None => return Poll::Pending,
                }
            }
            Op::Acquire(mode, subclass) => {
                match st.acquire(task, this.lock, mode, subclass, this.at) {
                    Some(transfer) => (true, transfer),
                    None => {
                        this.stage = Stage::Waiting;
                        return Poll::Pending;
                    }
                }
            }
            Op::TryAcquire(mode) => st.try_acquire(task, this.lock, mode, this.at),
            Op::Wait => {
                if st.wait(task, this.lock, this.at) {
                    return Poll::Ready(true);
                }
                this.stage = Stage::Waiting;
                return Poll::Pending;
            }
        };
        if transfer == SimDuration::ZERO {
            return Poll::Ready(outcome);
        }
        if st.charge(task, transfer, this.at) {
            return Poll::Ready(outcome);
        }
        this.stage = Stage::Transferring(outcome);
        Poll::Pending
    }
}
