//! `Cx`: what a task's code receives — its identity, its CPU, and the simulation points
//! (`charge`, `sleep`, `join`) it may stop at.

use crate::cacheline::CacheLine;
use crate::core::{Core, Handle};
use crate::cpu::CpuId;
use crate::task::{Point, PointKind, TaskId};
use simcore::SimDuration;
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A task's context. Dereferences to the simulation [`Handle`].
pub struct Cx {
    handle: Handle,
    task: TaskId,
    cpu: CpuId,
}

impl fmt::Debug for Cx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cx(task={}, cpu={})", self.task, self.cpu)
    }
}

impl Deref for Cx {
    type Target = Handle;
    #[inline]
    fn deref(&self) -> &Handle {
        &self.handle
    }
}

impl Cx {
    pub(crate) fn new(handle: Handle, task: TaskId, cpu: CpuId) -> Cx {
        Cx { handle, task, cpu }
    }

    #[inline]
    pub(crate) fn core(&self) -> &Core {
        self.handle.core()
    }

    #[inline]
    pub fn task(&self) -> TaskId {
        self.task
    }

    #[inline]
    pub fn cpu(&self) -> CpuId {
        self.cpu
    }

    /// Spends `d` of CPU time: the task's CPU is busy and virtual time advances for this task.
    /// A zero charge passes at once under the time-ordered scheduler and is a preemption point
    /// under the exploration schedulers.
    #[track_caller]
    #[inline]
    pub fn charge(&self, d: SimDuration) -> PointFuture<'_> {
        PointFuture { cx: self, kind: Kind::Charge(d), at: Location::caller(), started: false }
    }

    /// A preemption point that spends no time: a no-op under the time-ordered scheduler, a place
    /// where the exploration schedulers may switch tasks.
    #[track_caller]
    #[inline]
    pub fn preempt_point(&self) -> PointFuture<'_> {
        PointFuture {
            cx: self,
            kind: Kind::Charge(SimDuration::ZERO),
            at: Location::caller(),
            started: false,
        }
    }

    /// Whether a charge of `d` now would end with no other task having run in between (the
    /// state this task leaves is the state it finds after the charge): the time-ordered
    /// scheduler has nothing due by its end and nobody waits for this CPU.
    #[inline]
    pub fn runs_alone_through(&self, d: SimDuration) -> bool {
        self.core().state.borrow().runs_alone_through(self.task, d)
    }

    /// Sleeps for `d` without using the CPU (`msleep`, a device's latency).
    #[track_caller]
    #[inline]
    pub fn sleep(&self, d: SimDuration) -> PointFuture<'_> {
        PointFuture { cx: self, kind: Kind::Sleep(d), at: Location::caller(), started: false }
    }

    /// This task's CPU writes `line` with an atomic now: how long the write waits for the line
    /// (zero if this CPU wrote it last). The caller charges it with the work around the write.
    pub fn line_write(&self, line: &mut CacheLine) -> SimDuration {
        let st = self.core().state.borrow();
        line.write(&st.config.line_costs, self.cpu, st.now)
    }

    /// This task's CPU streams `bytes` through its socket's memory bus now: how long until the
    /// bus has carried them (zero without a bandwidth limit). The caller charges the longer of
    /// that and its own work.
    pub fn bus_transfer(&self, bytes: u64) -> SimDuration {
        let mut st = self.core().state.borrow_mut();
        let (costs, now) = (st.config.bus_costs, st.now);
        let socket = costs.socket(self.cpu);
        st.buses[socket].transfer(&costs, bytes, now)
    }

    /// Waits until `task` has ended.
    #[track_caller]
    #[inline]
    pub fn join(&self, task: TaskId) -> PointFuture<'_> {
        PointFuture { cx: self, kind: Kind::Join(task), at: Location::caller(), started: false }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Charge(SimDuration),
    Sleep(SimDuration),
    Join(TaskId),
}

/// The future of a simulation point (`charge`, `sleep`, `join`).
#[derive(Debug)]
#[must_use = "a simulation point does nothing unless awaited"]
pub struct PointFuture<'a> {
    cx: &'a Cx,
    kind: Kind,
    at: &'static Location<'static>,
    started: bool,
}

impl Future for PointFuture<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.started {
            return Poll::Ready(());
        }
        let task = this.cx.task;
        let mut st = this.cx.core().state.borrow_mut();
        let passes = match this.kind {
            Kind::Charge(d) if d == SimDuration::ZERO => {
                if st.preempts_at_every_point {
                    st.yield_point(task, Point { kind: PointKind::Yield, at: this.at });
                    false
                } else {
                    true
                }
            }
            Kind::Charge(d) => st.charge(task, d, this.at),
            Kind::Sleep(d) => st.sleep(task, d, this.at),
            Kind::Join(target) => st.join(task, target, this.at),
        };
        if passes {
            return Poll::Ready(());
        }
        this.started = true;
        Poll::Pending
    }
}
