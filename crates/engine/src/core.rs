//! The executor core: simulation state, the run loop, and the state transitions that futures ask
//! for (charge, sleep, block, wake, acquire, release).
//!
//! All state sits in one `RefCell<State>` behind the executor's single thread. Futures borrow it
//! only inside `poll`, never across an `.await`, so an accidental borrow across a blocking point
//! fails loudly. Task futures live in a separate cell and are taken out while polled, so a task
//! may spawn others.
//!
//! The core decides what the rwsem rules need of tasks (kernel/locking/rwsem.c, v5.3 rework,
//! 00f3c5a3df2c): whether an owner is on its CPU (`owner_on_cpu`: it owns its CPU, running,
//! charging or spinning), whether the queue's head has waited `RWSEM_WAIT_TIMEOUT` (a hand-off
//! is due), and it stops spinning writers when their owner sleeps or is preempted.
//!
//! Host cost. A page-cache replay makes a handful of scheduling points per request, nearly all
//! of them a task running alone (issue 47): a charge that carries on (`carry_on`), an rwsem read
//! lock nobody else wants, a wake-up of a folio wait queue nobody waits on. Those paths are
//! kept short without changing what they do, each shortcut taking only a case in which the
//! general code does nothing more:
//! - a charge is inlined into its future, the switch's accounting (`resume`) into the charge,
//!   and the time-ordered scheduler is held by value (`sched::Sched`), so a carried-on charge
//!   makes no indirect call;
//! - an acquisition looks at spinning and hand-off only when a writer owns the rwsem or a task
//!   waits on it: without either `spinnable` and `handoff_due` are false anyway;
//! - a release pops the hold it drops when it is the latest (the usual nesting), and grants and
//!   wakes waiters out of line, only when there are any;
//! - `might_sleep` and `check_spinners` test their common case (no spinlock held, no spinning
//!   writer) inline and call their work out of line;
//! - a wake-up of an empty wait queue returns before touching anything, as `__wake_up_common`
//!   walks an empty list.
//!
//! The digest words, statistics, lockdep records and trace are those of the general path, in the
//! same order; the pinned replay histories (`trace` tests) and digests prove it.

use crate::cacheline::CacheLine;
use crate::config::{ConfigError, SimConfig};
use crate::cpu::{Cpu, CpuId, CpuStats, TaskContext};
use crate::cx::Cx;
use crate::fairness::DaemonFairness;
use crate::lock::lockdep::{ClassKey, Lockdep, LockdepReport, Names};
use crate::lock::state::{Attempt, LockState, RWSEM_WAIT_TIMEOUT_NS};
use crate::lock::stats::{ClassId, LockClassStats, LockClasses, lock_stat_text};
use crate::lock::{Completion, LockId, Mode, Mutex, RwSem, SpinLock, WaitQueue, op::Op};
use crate::membus::MemBus;
use crate::sched::{ReadyEntry, Sched, Scheduler};
use crate::task::{HeldLock, Point, PointKind, Status, Task, TaskId, TaskStats};
use crate::watchdog::DeadlockReport;
use simcore::id::Id as _;
use simcore::{Digest, IdVec, Prng, SimDuration, SimTime};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, Location};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

type TaskFuture = Pin<Box<dyn Future<Output = ()>>>;

#[derive(Debug)]
pub(crate) struct Lock {
    pub class: ClassId,
    pub state: LockState,
    /// The cache line of the lock word.
    pub line: CacheLine,
}

/// The simulation state.
pub(crate) struct State {
    pub config: SimConfig,
    pub now: SimTime,
    seq: u64,
    pub events: u64,
    pub digest: Digest,
    sched: Sched,
    pub preempts_at_every_point: bool,
    /// Daemons' wake-ups held back under the exploration schedulers (see `fairness`).
    fairness: DaemonFairness,
    pub tasks: IdVec<TaskId, Task>,
    pub cpus: IdVec<CpuId, Cpu>,
    pub locks: IdVec<LockId, Lock>,
    /// Each socket's memory bus.
    pub buses: Vec<MemBus>,
    pub classes: LockClasses,
    lockdep: Lockdep,
    /// Non-daemon tasks not yet done: the run ends when this reaches zero.
    live: usize,
    prng: Prng,
    /// `(time, task, point)` per scheduling event when tracing.
    pub trace: Option<Vec<(SimTime, TaskId, Point)>>,
    pub tearing_down: bool,
    /// Scratch list of tasks granted a lock by a release.
    granted: Vec<TaskId>,
    /// Scratch list of the locks an acquiring task holds, for lockdep.
    held_keys: Vec<(ClassKey, &'static Location<'static>)>,
    /// Whether a task may carry on past a charge or sleep without a pass of the run loop (see
    /// [`State::carry_on`]); off while a checker must see every step.
    carry_on: bool,
    /// Tasks carried on since the run loop's last pass: every [`CARRY_ON_LIMIT`] the next
    /// one goes back to the loop, so its observer (progress, the host budget) still runs.
    carried: u32,
}

/// At most this many tasks carry on ([`State::carry_on`]) between two passes of the run loop,
/// so a run that never blocks on another task still reaches its observer.
const CARRY_ON_LIMIT: u32 = 1024;

pub(crate) struct Core {
    pub state: RefCell<State>,
    futures: RefCell<IdVec<TaskId, Option<TaskFuture>>>,
}

/// A cheap shared reference to a simulation, for creating locks and tasks and reading the clock.
#[derive(Clone)]
pub struct Handle(Rc<Core>);

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.0.state.borrow();
        write!(f, "Handle(now={}, tasks={})", st.now, st.tasks.len())
    }
}

/// A run that could not finish.
#[derive(Clone, Debug)]
pub enum SimError {
    /// Every remaining task is blocked (the watchdog's dump says on what).
    Deadlock(Box<DeadlockReport>),
    /// The run exceeded `max_events`.
    EventLimit { limit: u64, now: SimTime },
    /// A checker given to [`Sim::run_checked`] failed.
    Check { message: String, now: SimTime, events: u64 },
}

impl SimError {
    /// Where `max_events` is a host's events budget (`--max-events`, docs/errors.md): for an
    /// [`SimError::EventLimit`], why the run is refused, with the numbers.
    pub fn over_event_budget(&self) -> Option<String> {
        let SimError::EventLimit { limit, now } = self else { return None };
        Some(format!(
            "the run took more than {limit} scheduling events (by virtual time {now}), over the \
             events budget of {limit} (--max-events; default {})",
            crate::DEFAULT_EVENT_BUDGET
        ))
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Deadlock(r) => write!(f, "{r}"),
            SimError::EventLimit { limit, now } => {
                write!(f, "event bound exceeded: more than {limit} scheduling events by {now}")
            }
            SimError::Check { message, now, events } => {
                write!(f, "check failed at {now} after {events} events: {message}")
            }
        }
    }
}

impl std::error::Error for SimError {}

/// The outcome of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// Fingerprint of the whole event history: equal seeds give equal digests.
    pub digest: Digest,
    /// Scheduling events so far.
    pub events: u64,
    /// Virtual time at the end.
    pub now: SimTime,
}

impl State {
    fn new(config: SimConfig, sched: Option<Box<dyn Scheduler>>) -> State {
        let prng = Prng::from_seed(config.seed);
        let sched = Sched::new(config.scheduler, &prng, sched);
        let mut cpus = IdVec::new();
        for _ in 0..config.cpus {
            cpus.push(Cpu::default());
        }
        let sockets = config.bus_costs.socket(CpuId(config.cpus.saturating_sub(1))) + 1;
        State {
            buses: vec![MemBus::default(); sockets],
            preempts_at_every_point: sched.preempts_at_every_point(),
            trace: config.trace.then(Vec::new),
            config,
            now: SimTime::ZERO,
            seq: 0,
            events: 0,
            digest: Digest::new(),
            sched,
            fairness: DaemonFairness::default(),
            tasks: IdVec::new(),
            cpus,
            locks: IdVec::new(),
            classes: LockClasses::default(),
            lockdep: Lockdep::default(),
            live: 0,
            prng,
            tearing_down: false,
            granted: Vec::new(),
            held_keys: Vec::new(),
            carry_on: false,
            carried: 0,
        }
    }

    fn schedule(&mut self, task: TaskId, time: SimTime) {
        let entry = self.queue_entry(task, time);
        self.sched.push(entry);
    }

    /// Marks `task` queued from `time` and gives it the next sequence number.
    #[inline]
    fn queue_entry(&mut self, task: TaskId, time: SimTime) -> ReadyEntry {
        self.seq += 1;
        self.tasks[task].status = Status::Queued;
        ReadyEntry { time, seq: self.seq, task }
    }

    /// A daemon's wake-up from a timed sleep under the exploration schedulers: held back until
    /// the tasks ready now have each run (`fairness`).
    fn schedule_daemon_wakeup(&mut self, task: TaskId, time: SimTime) {
        let ready: Vec<TaskId> = (self.tasks.iter())
            .filter(|&(id, t)| t.status == Status::Queued && !self.fairness.holds(id))
            .map(|(id, _)| id)
            .collect();
        let entry = self.queue_entry(task, time);
        if let Some(entry) = self.fairness.defer(entry, ready) {
            self.sched.push(entry);
        }
    }

    /// The next entry to dispatch: the scheduler's choice, after which the daemons' wake-ups
    /// that waited for the chosen task are released; when nothing is ready, the held-back
    /// wake-ups are released first.
    fn next_entry(&mut self) -> Option<ReadyEntry> {
        if self.sched.is_empty() {
            for e in self.fairness.release_all() {
                self.sched.push(e);
            }
        }
        let entry = self.sched.pop()?;
        for e in self.fairness.scheduled(entry.task) {
            self.sched.push(e);
        }
        Some(entry)
    }

    /// Gives the CPU to the next task on its run queue, or leaves it idle.
    fn release_cpu(&mut self, cpu: CpuId) {
        let now = self.now;
        let c = &mut self.cpus[cpu];
        c.owner = c.runqueue.pop_front();
        if let Some(next) = c.owner {
            let t = &mut self.tasks[next];
            debug_assert_eq!(t.status, Status::OnRunqueue);
            t.stats.runqueue_wait += now.since(t.wait_since);
            t.slice_start = now;
            self.switch_in(cpu, next);
            self.schedule(next, now);
        }
    }

    /// `task` starts on `cpu`: the context switch, if any, is counted and owed
    /// (`cpu::Cpu::switch_in`).
    #[inline]
    fn switch_in(&mut self, cpu: CpuId, task: TaskId) {
        let t = &mut self.tasks[task];
        if let Some(cost) = self.cpus[cpu].switch_in(task, t.context, &self.config.switch_costs) {
            t.stats.context_switches += 1;
            t.stats.switching += cost;
            t.debt += cost;
        }
    }

    /// Decides whether a popped task runs now; false if it must wait for its CPU.
    fn dispatch(&mut self, e: ReadyEntry) -> bool {
        self.now = self.now.max(e.time);
        let now = self.now;
        let task = &mut self.tasks[e.task];
        assert_eq!(task.status, Status::Queued, "task {} popped while {:?}", e.task, task.status);
        let cpu_id = task.cpu;
        let cpu = &mut self.cpus[cpu_id];
        match cpu.owner {
            None => {
                cpu.owner = Some(e.task);
                task.slice_start = now;
                self.switch_in(cpu_id, e.task);
            }
            Some(o) if o == e.task => {
                let slice_used = now.since(task.slice_start) >= self.config.timeslice;
                if task.point.kind == PointKind::Charge
                    && task.preempt_count == 0
                    && slice_used
                    && !cpu.runqueue.is_empty()
                {
                    task.status = Status::OnRunqueue;
                    task.wait_since = now;
                    cpu.runqueue.push_back(e.task);
                    cpu.stats.runqueue_waits += 1;
                    self.release_cpu(cpu_id);
                    self.left_cpu(e.task);
                    return false;
                }
            }
            Some(_) => {
                task.status = Status::OnRunqueue;
                task.wait_since = now;
                cpu.runqueue.push_back(e.task);
                cpu.stats.runqueue_waits += 1;
                return false;
            }
        }
        self.resume(e.task);
        true
    }

    /// [`State::dispatch`] of a charge whose CPU others wait for: kept out of line, so that the
    /// common charge (nobody waiting) stays small.
    #[cold]
    #[inline(never)]
    fn dispatch_contended(&mut self, e: ReadyEntry) -> bool {
        self.dispatch(e)
    }

    /// The end of a dispatch that runs its task: it runs, and the switch is accounted, digested
    /// and traced at the current time. Always inlined: it is the tail of every carried-on charge.
    #[inline(always)]
    fn resume(&mut self, id: TaskId) {
        let now = self.now;
        let task = &mut self.tasks[id];
        task.status = Status::Running;
        task.stats.switches += 1;
        self.digest.write_u64(now.as_ns());
        self.digest.write_u64(u64::from(id.0) << 8 | point_tag(task.point.kind));
        if let Some(trace) = &mut self.trace {
            trace.push((now, id, task.point));
        }
    }

    fn running(&self, task: TaskId) -> &Task {
        let t = &self.tasks[task];
        debug_assert_eq!(t.status, Status::Running, "task {task} acts while not running");
        t
    }

    /// [`State::running`], to change it.
    #[inline]
    fn running_mut(&mut self, task: TaskId) -> &mut Task {
        let t = &mut self.tasks[task];
        debug_assert_eq!(t.status, Status::Running, "task {task} acts while not running");
        t
    }

    /// Charges `d` (and the task's debt); true if the task carries on at once
    /// ([`State::carry_on`]), false if it waits for the run loop.
    #[must_use = "true: the task carries on; false: it waits for the run loop"]
    #[inline]
    pub(crate) fn charge(
        &mut self,
        task: TaskId,
        d: SimDuration,
        at: &'static Location<'static>,
    ) -> bool {
        let t = self.running_mut(task);
        let d = d + std::mem::take(&mut t.debt);
        t.point = Point { kind: PointKind::Charge, at };
        t.stats.cpu += d;
        let cpu = t.cpu;
        let cpu = &mut self.cpus[cpu];
        debug_assert_eq!(cpu.owner, Some(task), "a running task owns its CPU");
        cpu.stats.busy += d;
        // Read before the entry is taken, which touches no CPU.
        let contended = !cpu.runqueue.is_empty();
        let entry = self.queue_entry(task, self.now + d);
        if !self.take(entry) {
            return false;
        }
        // The pass's dispatch of a charge whose task owns its CPU: with nobody waiting for the
        // CPU there is no time-slice preemption to decide, and the task simply runs on.
        if contended {
            return self.dispatch_contended(entry);
        }
        self.now = self.now.max(entry.time);
        self.resume(task);
        true
    }

    /// Whether `task`, charging `d` now, would run on to the end of the charge (with its debt)
    /// without any other task running meanwhile: nobody waits for its CPU and nothing queued is
    /// due by then. Never under the exploration schedulers, which may switch at any point.
    #[inline]
    pub(crate) fn runs_alone_through(&self, task: TaskId, d: SimDuration) -> bool {
        let t = self.running(task);
        let end = self.now + d + t.debt;
        self.cpus[t.cpu].runqueue.is_empty() && self.sched.nothing_due_through(end)
    }

    /// Sleeps `d`; true if the task carries on at once ([`State::carry_on`]).
    #[must_use = "true: the task carries on; false: it waits for the run loop"]
    pub(crate) fn sleep(
        &mut self,
        task: TaskId,
        d: SimDuration,
        at: &'static Location<'static>,
    ) -> bool {
        self.might_sleep(task, "a timer", at);
        let t = self.running_mut(task);
        t.point = Point { kind: PointKind::Sleep, at };
        t.stats.timed_sleep += d;
        let (cpu, daemon) = (t.cpu, t.daemon);
        if self.preempts_at_every_point && daemon {
            self.schedule_daemon_wakeup(task, self.now + d);
            self.release_cpu(cpu);
            self.left_cpu(task);
            return false;
        }
        let entry = self.queue_entry(task, self.now + d);
        self.release_cpu(cpu);
        self.left_cpu(task);
        self.carry_on(entry)
    }

    /// Queues `entry`, a task's charge or sleep, or lets its task carry on without going back
    /// to the run loop (true, nothing queued). It does when the scheduler would dispatch `entry`
    /// next anyway ([`Scheduler::push_or_take`]: under the time-ordered scheduler, when nothing else is due
    /// before it, ties going to the earlier entry as always) and the pass would not reach the
    /// events budget; the pass is then done here, in the same order as the run loop does it:
    /// the event is counted and [`State::dispatch`] advances the clock, checks the CPU (a
    /// time-slice preemption still happens), accounts the switch and writes the digest and
    /// trace. The event history, and so the digest, is the same as with a pass; only the
    /// loop's step (its checker call) is skipped, which is why a checked run turns this off.
    /// The exploration schedulers never hand an entry back: they see every blocking point.
    fn carry_on(&mut self, entry: ReadyEntry) -> bool {
        self.take(entry) && self.dispatch(entry)
    }

    /// The first half of [`State::carry_on`]: queues `entry` (false), or takes it for its task
    /// to carry on (true), the pass's event counted; the caller then dispatches it.
    #[inline]
    fn take(&mut self, entry: ReadyEntry) -> bool {
        let may_take =
            self.carry_on && self.events < self.config.max_events && self.carried < CARRY_ON_LIMIT;
        if !self.sched.push_or_take(entry, may_take) {
            self.carried = 0;
            return false;
        }
        self.carried += 1;
        debug_assert!(!self.preempts_at_every_point, "no wake-ups are held back");
        debug_assert!(self.live > 0, "a task runs only while the run goes on");
        self.events += 1;
        true
    }

    /// A preemption point: the task stays runnable (and keeps its CPU).
    pub(crate) fn yield_point(&mut self, task: TaskId, point: Point) {
        self.running(task);
        self.tasks[task].point = point;
        self.schedule(task, self.now);
    }

    /// Blocks a running task on `point`; spinning keeps the CPU, sleeping gives it away.
    fn block(&mut self, task: TaskId, point: Point, spinning: bool) {
        let cpu = self.running(task).cpu;
        let t = &mut self.tasks[task];
        t.status = Status::Blocked;
        t.point = point;
        t.wait_since = self.now;
        if !spinning {
            self.release_cpu(cpu);
            self.left_cpu(task);
        }
    }

    /// Whether `task` is on its CPU (running, charging or spinning), as `owner_on_cpu` asks.
    #[inline]
    fn on_cpu(&self, task: TaskId) -> bool {
        self.cpus[self.tasks[task].cpu].owner == Some(task)
    }

    /// Whether the head of `lock`'s queue has waited `RWSEM_WAIT_TIMEOUT` since it first
    /// blocked: nobody may steal the lock from it any more.
    #[inline]
    fn handoff_due(&self, lock: LockId) -> bool {
        let head = self.locks[lock].state.rwsem_owner_and_head().and_then(|(_, head)| head);
        head.is_some_and(|h| {
            let since = self.tasks[h].held_pending.expect("a queued task without an acquisition");
            self.now.since(since.2).as_ns() >= RWSEM_WAIT_TIMEOUT_NS
        })
    }

    /// Whether a writer may spin on `lock` (`rwsem_can_spin_on_owner`): a writer owns it and
    /// is on its CPU, and no hand-off is due.
    #[inline]
    fn spinnable(&self, lock: LockId) -> bool {
        let owner = self.locks[lock].state.rwsem_owner_and_head().and_then(|(w, _)| w);
        owner.is_some_and(|o| self.on_cpu(o)) && !self.handoff_due(lock)
    }

    /// Spinners on `lock` stop when it is no longer spinnable, and sleep in its queue. Inline:
    /// most locks have no spinners, which this sees without a call.
    #[inline(always)]
    fn check_spinners(&mut self, lock: LockId) {
        if self.locks[lock].state.has_spinners() && !self.spinnable(lock) {
            self.stop_spinners(lock);
        }
    }

    /// [`State::check_spinners`] of a lock whose spinners must stop.
    fn stop_spinners(&mut self, lock: LockId) {
        let mut stopped = Vec::new();
        self.locks[lock].state.stop_spinning(&mut stopped);
        for t in stopped {
            let task = &mut self.tasks[t];
            let spun = self.now.since(task.wait_since);
            task.spun = spun;
            task.stats.spin += spun;
            let cpu = task.cpu;
            self.cpus[cpu].stats.spin += spun;
            self.release_cpu(cpu);
        }
    }

    /// `task` left its CPU (slept or was preempted): writers spinning on an rwsem it owns stop.
    fn left_cpu(&mut self, task: TaskId) {
        // By index: stopping spinners touches only the spinners and their CPUs, never the
        // locks `task` holds.
        for i in 0..self.tasks[task].held.len() {
            let h = self.tasks[task].held[i];
            if h.mode == Mode::Write {
                self.check_spinners(h.lock);
            }
        }
    }

    /// Makes a blocked task runnable again, `extra` after the usual delay (a lock word's
    /// transfer to its CPU). A sleeper whose CPU went idle runs `wakeup_latency` later (the
    /// wake-up IPI and the CPU's exit from idle); one whose CPU is running another task joins
    /// its run queue at once (`try_to_wake_up` queues it; no idle state to leave).
    fn wake(&mut self, task: TaskId, spinning: bool, extra: SimDuration) {
        let now = self.now;
        let cpu = self.tasks[task].cpu;
        let idle = self.cpus[cpu].owner.is_none() && self.cpus[cpu].runqueue.is_empty();
        let t = &mut self.tasks[task];
        assert_eq!(t.status, Status::Blocked, "waking task {task} that is {:?}", t.status);
        let waited = now.since(t.wait_since);
        let at = if spinning {
            t.stats.spin += waited;
            self.cpus[cpu].stats.spin += waited;
            now
        } else {
            t.stats.sleep_wait += waited - std::mem::take(&mut t.spun);
            if idle {
                t.stats.wakeup_delay += self.config.wakeup_latency;
                now + self.config.wakeup_latency
            } else {
                now
            }
        };
        self.schedule(task, at + extra);
    }

    /// The kernel's `might_sleep()`: sleeping with a spinlock held is a bug lockdep reports.
    /// Inline: a task holding no spinlock (nearly always) passes without a call.
    #[inline(always)]
    fn might_sleep(&mut self, task: TaskId, what: &str, at: &'static Location<'static>) {
        if self.tasks[task].preempt_count > 0 {
            self.sleep_in_atomic(task, what, at);
        }
    }

    /// [`State::might_sleep`] of a task holding a spinlock: lockdep's report.
    fn sleep_in_atomic(&mut self, task: TaskId, what: &str, at: &'static Location<'static>) {
        let held = self.tasks[task].held.iter().rev().find(|h| self.locks[h.lock].state.is_spin());
        let spin = held.map(|h| ClassKey { class: self.locks[h.lock].class, subclass: h.subclass });
        let spin = spin.expect("preempt_count without a spinlock");
        let tasks = &self.tasks;
        let names = Names { classes: &self.classes, task_name: &|t| tasks[TaskId(t)].name.clone() };
        self.lockdep.sleep_in_atomic(&names, task.0, spin, what.to_string(), at);
    }

    fn lockdep_acquire(
        &mut self,
        task: TaskId,
        lock: LockId,
        subclass: u8,
        at: &'static Location<'static>,
    ) {
        if self.tasks[task].held.is_empty() {
            return;
        }
        let new = ClassKey { class: self.locks[lock].class, subclass };
        let mut held = std::mem::take(&mut self.held_keys);
        held.extend(
            (self.tasks[task].held.iter()).map(|h| {
                (ClassKey { class: self.locks[h.lock].class, subclass: h.subclass }, h.at)
            }),
        );
        let tasks = &self.tasks;
        let names = Names { classes: &self.classes, task_name: &|t| tasks[TaskId(t)].name.clone() };
        self.lockdep.acquire(&names, task.0, &held, new, at);
        held.clear();
        self.held_keys = held;
    }

    /// Records that `task` now holds `lock`.
    #[inline]
    fn hold(
        &mut self,
        task: TaskId,
        lock: LockId,
        mode: Mode,
        subclass: u8,
        at: &'static Location<'static>,
    ) {
        let spin = self.locks[lock].state.is_spin();
        let class = self.locks[lock].class;
        self.classes.stats[class].acquisitions += 1;
        let t = &mut self.tasks[task];
        t.held.push(HeldLock { lock, mode, subclass, since: self.now, at });
        if spin {
            t.preempt_count += 1;
        }
    }

    /// `task` writes `lock`'s word: how long it waits for the word's cache line.
    fn write_lock_word(&mut self, task: TaskId, lock: LockId) -> SimDuration {
        let (cpu, costs, now) = (self.tasks[task].cpu, self.config.line_costs, self.now);
        self.locks[lock].line.write(&costs, cpu, now)
    }

    /// `lock`/`down_read`/`down_write`: if granted at once, the time the lock word's transfer
    /// takes; `None` if the task is queued (its failed attempt still took the line).
    pub(crate) fn acquire(
        &mut self,
        task: TaskId,
        lock: LockId,
        mode: Mode,
        subclass: u8,
        at: &'static Location<'static>,
    ) -> Option<SimDuration> {
        self.running(task);
        let spinning = self.locks[lock].state.is_spin();
        // The lock's name is formatted only where `might_sleep` reports (a spinlock held).
        if !spinning && self.tasks[task].preempt_count > 0 {
            let what = format!("{} {}", self.classes.name(self.locks[lock].class), mode);
            self.might_sleep(task, &what, at);
        }
        self.lockdep_acquire(task, lock, subclass, at);
        let transfer = self.write_lock_word(task, lock);
        // Both rules need a writer owning the rwsem or a queue: without either (any lock taken
        // uncontended) both are false, as `spinnable` and `handoff_due` would find.
        let (may_spin, handoff) = match self.locks[lock].state.rwsem_owner_and_head() {
            None | Some((None, None)) => (false, false),
            Some(_) => (self.spinnable(lock), self.handoff_due(lock)),
        };
        match self.locks[lock].state.attempt(task, mode, true, may_spin, handoff) {
            Attempt::Granted => {
                self.hold(task, lock, mode, subclass, at);
                Some(transfer)
            }
            waited @ (Attempt::Queued | Attempt::Spinning) => {
                self.classes.stats[self.locks[lock].class].contentions += 1;
                let point = Point { kind: PointKind::Lock(lock, mode), at };
                self.tasks[task].held_pending = Some((subclass, at, self.now));
                self.block(task, point, spinning || waited == Attempt::Spinning);
                None
            }
            Attempt::Busy => unreachable!("a queued attempt is never busy"),
        }
    }

    /// Trylock: never waits and adds no lockdep dependency for the lock it takes. Returns
    /// whether it succeeded and the lock word's transfer (paid either way).
    pub(crate) fn try_acquire(
        &mut self,
        task: TaskId,
        lock: LockId,
        mode: Mode,
        at: &'static Location<'static>,
    ) -> (bool, SimDuration) {
        self.running(task);
        let transfer = self.write_lock_word(task, lock);
        let attempt = self.locks[lock].state.attempt(task, mode, false, false, false);
        let granted = attempt == Attempt::Granted;
        if granted {
            self.hold(task, lock, mode, 0, at);
        }
        (granted, transfer)
    }

    /// Hands `lock` to tasks that waited for it (spinning ones kept their CPUs; a woken head
    /// not yet retried is already runnable and pays the transfer with its next charge); wakes
    /// the head `woken` to retry; writers that spin on it stop if it is no longer spinnable.
    /// Inline: a release with nobody waiting (the common case) grants and wakes nobody.
    #[inline(always)]
    fn grant_waiters(&mut self, lock: LockId, granted: &[TaskId], woken: Option<TaskId>) {
        for &w in granted {
            self.grant_waiter(lock, w);
        }
        if let Some(w) = woken {
            self.wake(w, false, SimDuration::ZERO);
        }
        self.check_spinners(lock);
    }

    /// [`State::grant_waiters`] of one waiter `w`, now holding `lock`.
    fn grant_waiter(&mut self, lock: LockId, w: TaskId) {
        let PointKind::Lock(_, mode) = self.tasks[w].point.kind else {
            panic!("task {w} granted {lock} without waiting for it");
        };
        let transfer = self.take_pending(w, lock, mode);
        if self.tasks[w].status == Status::Blocked {
            let spinning = self.on_cpu(w);
            self.wake(w, spinning, transfer);
        } else {
            self.tasks[w].debt += transfer;
        }
    }

    /// `task`, queued for `lock`, now holds it: records its wait since it first blocked (retries
    /// included) and returns the lock word's transfer.
    fn take_pending(&mut self, task: TaskId, lock: LockId, mode: Mode) -> SimDuration {
        let (subclass, at, since) =
            self.tasks[task].held_pending.take().expect("granted without a pending acquisition");
        let class = self.locks[lock].class;
        self.classes.stats[class].wait_ns.record(self.now.since(since).as_ns());
        self.hold(task, lock, mode, subclass, at);
        self.write_lock_word(task, lock)
    }

    /// A head waiter woken without the lock retries when it runs (a new attempt): the lock
    /// word's transfer if it took the lock, else `None` and it sleeps again at the head.
    pub(crate) fn retry(&mut self, task: TaskId, lock: LockId, mode: Mode) -> Option<SimDuration> {
        self.running(task);
        if self.locks[lock].state.retry(task) {
            return Some(self.take_pending(task, lock, mode));
        }
        let transfer = self.write_lock_word(task, lock);
        let t = &mut self.tasks[task];
        t.debt += transfer;
        let at = t.held_pending.expect("a retry without a pending acquisition").1;
        self.block(task, Point { kind: PointKind::Lock(lock, mode), at }, false);
        None
    }

    pub(crate) fn release(&mut self, task: TaskId, lock: LockId, mode: Mode) {
        let t = &mut self.tasks[task];
        let h = t.unhold(lock, mode);
        let h = h.unwrap_or_else(|| panic!("task {task} releases {lock} it does not hold"));
        let spin = self.locks[lock].state.is_spin();
        if spin {
            t.preempt_count -= 1;
        }
        let hold = self.now.since(h.since);
        let stats = &mut self.classes.stats[self.locks[lock].class];
        stats.hold_total += hold;
        stats.hold_max = stats.hold_max.max(hold);
        let transfer = self.write_lock_word(task, lock);
        self.tasks[task].debt += transfer;
        let mut granted = std::mem::take(&mut self.granted);
        let handoff = self.handoff_due(lock);
        let woken = self.locks[lock].state.release(task, mode, handoff, &mut granted);
        self.grant_waiters(lock, &granted, woken);
        granted.clear();
        self.granted = granted;
    }

    pub(crate) fn downgrade(&mut self, task: TaskId, lock: LockId) {
        let t = &mut self.tasks[task];
        let h = t.held.iter_mut().rev().find(|h| h.lock == lock && h.mode == Mode::Write);
        h.expect("downgrade of a lock not held for write").mode = Mode::Read;
        let transfer = self.write_lock_word(task, lock);
        self.tasks[task].debt += transfer;
        let mut granted = std::mem::take(&mut self.granted);
        self.locks[lock].state.downgrade(task, &mut granted);
        self.grant_waiters(lock, &granted, None);
        granted.clear();
        self.granted = granted;
    }

    /// Completion or wait-queue wait: true if it passes at once.
    pub(crate) fn wait(
        &mut self,
        task: TaskId,
        lock: LockId,
        at: &'static Location<'static>,
    ) -> bool {
        self.running(task);
        let what = self.classes.name(self.locks[lock].class);
        self.might_sleep(task, what, at);
        if self.locks[lock].state.wait(task) {
            return true;
        }
        self.block(task, Point { kind: PointKind::Wait(lock), at }, false);
        false
    }

    pub(crate) fn complete(&mut self, lock: LockId, all: bool) {
        let mut woken = std::mem::take(&mut self.granted);
        self.locks[lock].state.complete(all, &mut woken);
        for &t in &woken {
            self.wake(t, false, SimDuration::ZERO);
        }
        woken.clear();
        self.granted = woken;
    }

    /// `wake_up` / `wake_up_all`. On an empty queue (a folio unlocked with nobody waiting,
    /// the common case) it returns before touching anything, as `__wake_up_common` finds
    /// nobody on the list.
    #[inline]
    pub(crate) fn wake_queue(&mut self, lock: LockId, all: bool) {
        if self.locks[lock].state.wait_queue_is_empty() {
            return;
        }
        self.wake_queued(lock, all);
    }

    /// [`State::wake_queue`] of a queue with waiters.
    fn wake_queued(&mut self, lock: LockId, all: bool) {
        let mut woken = std::mem::take(&mut self.granted);
        self.locks[lock].state.wake_queue(all, &mut woken);
        for &t in &woken {
            self.wake(t, false, SimDuration::ZERO);
        }
        woken.clear();
        self.granted = woken;
    }

    /// Whether a resumed lock waiter holds what it waited for (else it was woken to retry).
    pub(crate) fn granted(&self, task: TaskId, lock: LockId, op: Op) -> bool {
        match op {
            Op::Acquire(mode, _) => {
                self.tasks[task].held.iter().any(|h| h.lock == lock && h.mode == mode)
            }
            Op::Wait => true,
            Op::TryAcquire(_) => unreachable!("trylocks never wait"),
        }
    }

    pub(crate) fn join(
        &mut self,
        task: TaskId,
        target: TaskId,
        at: &'static Location<'static>,
    ) -> bool {
        self.running(task);
        assert_ne!(task, target, "task {task} joins itself");
        self.might_sleep(task, "join", at);
        if self.tasks[target].status == Status::Done {
            return true;
        }
        self.tasks[target].joiners.push(task);
        self.block(task, Point { kind: PointKind::Join(target), at }, false);
        false
    }

    fn finish(&mut self, task: TaskId) {
        let t = &mut self.tasks[task];
        assert!(
            t.held.is_empty(),
            "task {} ended holding {} lock(s) (lock held when returning to user space)",
            t.name,
            t.held.len()
        );
        t.status = Status::Done;
        if !t.daemon {
            self.live -= 1;
        }
        let cpu = t.cpu;
        for j in std::mem::take(&mut t.joiners) {
            self.wake(j, false, SimDuration::ZERO);
        }
        self.release_cpu(cpu);
    }

    fn new_lock(&mut self, name: &'static str, state: LockState) -> LockId {
        let class = self.classes.intern(name);
        self.locks.push(Lock { class, state, line: CacheLine::default() })
    }

    pub(crate) fn lock_label(&self, lock: LockId) -> String {
        format!("{}#{}", self.classes.name(self.locks[lock].class), lock)
    }

    /// `class#id: held by t (mode), ...; waited for by ...`.
    pub(crate) fn describe_lock(&self, lock: LockId) -> String {
        let names = |v: Vec<(TaskId, Mode)>| -> String {
            let v: Vec<String> =
                v.into_iter().map(|(t, m)| format!("{} ({m})", self.tasks[t].name)).collect();
            if v.is_empty() { "nobody".into() } else { v.join(", ") }
        };
        let s = &self.locks[lock].state;
        format!(
            "{}: held by {}; waited for by {}",
            self.lock_label(lock),
            names(s.holders()),
            names(s.waiters())
        )
    }
}

fn point_tag(kind: PointKind) -> u64 {
    match kind {
        PointKind::Spawn => 1,
        PointKind::Charge => 2,
        PointKind::Sleep => 3,
        PointKind::Yield => 4,
        PointKind::Lock(l, m) => 5 | u64::from(l.0) << 8 | (m as u64) << 4,
        PointKind::Wait(l) => 6 | u64::from(l.0) << 8,
        PointKind::Join(t) => 7 | u64::from(t.0) << 8,
    }
}

impl Handle {
    #[inline]
    pub(crate) fn core(&self) -> &Core {
        &self.0
    }

    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.0.state.borrow().now
    }

    /// CPU `n`, if the machine has it.
    pub fn cpu(&self, n: u32) -> Result<CpuId, ConfigError> {
        let cpus = self.0.state.borrow().config.cpus;
        if n < cpus { Ok(CpuId(n)) } else { Err(ConfigError::NoSuchCpu { cpu: n, cpus }) }
    }

    pub fn cpus(&self) -> u32 {
        self.0.state.borrow().config.cpus
    }

    /// Whether `cpu` is idle: no task runs on it and none waits for it.
    pub fn cpu_idle(&self, cpu: CpuId) -> bool {
        let st = self.0.state.borrow();
        let c = &st.cpus[cpu];
        c.owner.is_none() && c.runqueue.is_empty()
    }

    pub fn seed(&self) -> u64 {
        self.0.state.borrow().config.seed
    }

    /// The named random stream `name` of this run.
    pub fn prng(&self, name: &str) -> Prng {
        self.0.state.borrow().prng.stream(name)
    }

    /// Starts a task on `cpu`; it runs from the current time. Its first blocking point (`spawn`)
    /// is named by the caller's source line.
    #[track_caller]
    pub fn spawn<F, Fut>(&self, cpu: CpuId, name: impl Into<String>, f: F) -> TaskId
    where
        F: FnOnce(Cx) -> Fut,
        Fut: Future<Output = ()> + 'static,
    {
        self.spawn_task(cpu, name.into(), false, f)
    }

    /// Starts a daemon (kswapd, khugepaged, a device): the run may end while it still waits.
    #[track_caller]
    pub fn spawn_daemon<F, Fut>(&self, cpu: CpuId, name: impl Into<String>, f: F) -> TaskId
    where
        F: FnOnce(Cx) -> Fut,
        Fut: Future<Output = ()> + 'static,
    {
        self.spawn_task(cpu, name.into(), true, f)
    }

    #[track_caller]
    fn spawn_task<F, Fut>(&self, cpu: CpuId, name: String, daemon: bool, f: F) -> TaskId
    where
        F: FnOnce(Cx) -> Fut,
        Fut: Future<Output = ()> + 'static,
    {
        let at = Location::caller();
        let id = {
            let mut st = self.0.state.borrow_mut();
            assert!(
                cpu.0 < st.config.cpus,
                "spawn on CPU {cpu} of a {}-CPU machine",
                st.config.cpus
            );
            let now = st.now;
            let id = st.tasks.push(Task {
                name,
                cpu,
                context: TaskContext::Free,
                daemon,
                status: Status::Blocked,
                point: Point { kind: PointKind::Spawn, at },
                held: Vec::new(),
                held_pending: None,
                preempt_count: 0,
                joiners: Vec::new(),
                debt: SimDuration::ZERO,
                wait_since: now,
                spun: SimDuration::ZERO,
                slice_start: now,
                stats: TaskStats::default(),
            });
            if !daemon {
                st.live += 1;
            }
            id
        };
        let fut: TaskFuture = Box::pin(f(Cx::new(self.clone(), id, cpu)));
        let slot = self.0.futures.borrow_mut().push(Some(fut));
        assert_eq!(slot, id);
        let mut st = self.0.state.borrow_mut();
        let now = st.now;
        st.schedule(id, now);
        id
    }

    /// Declares a lock order, outermost first, by class name; lockdep reports any acquisition
    /// that inverts it.
    #[track_caller]
    pub fn declare_lock_order(&self, order: &[&'static str]) {
        let mut st = self.0.state.borrow_mut();
        let keys: Vec<ClassKey> =
            order.iter().map(|n| ClassKey { class: st.classes.intern(n), subclass: 0 }).collect();
        st.lockdep.declare(&keys, Location::caller());
    }

    pub fn spin_lock(&self, name: &'static str) -> SpinLock {
        SpinLock(self.0.state.borrow_mut().new_lock(name, LockState::exclusive(true)))
    }

    pub fn mutex(&self, name: &'static str) -> Mutex {
        Mutex(self.0.state.borrow_mut().new_lock(name, LockState::exclusive(false)))
    }

    pub fn rwsem(&self, name: &'static str) -> RwSem {
        RwSem(self.0.state.borrow_mut().new_lock(name, LockState::rwsem()))
    }

    pub fn completion(&self, name: &'static str) -> Completion {
        let state = LockState::Completion { done: 0, waiters: VecDeque::new() };
        Completion(self.0.state.borrow_mut().new_lock(name, state))
    }

    pub fn wait_queue(&self, name: &'static str) -> WaitQueue {
        let state = LockState::WaitQueue { waiters: VecDeque::new() };
        WaitQueue(self.0.state.borrow_mut().new_lock(name, state))
    }

    /// Lockdep reports so far.
    pub fn lockdep_reports(&self) -> Vec<LockdepReport> {
        self.0.state.borrow().lockdep.reports.clone()
    }

    /// Contention statistics per lock class, in creation order.
    pub fn lock_stats(&self) -> Vec<LockClassStats> {
        self.0.state.borrow().classes.stats.values().cloned().collect()
    }

    /// Clears the lock statistics, as a write of `0` to `/proc/lock_stat` does.
    pub fn lock_stat_clear(&self) {
        self.0.state.borrow_mut().classes.clear_stats();
    }

    /// `/proc/lock_stat`-style text.
    pub fn lock_stat_text(&self) -> String {
        lock_stat_text(&self.lock_stats())
    }

    /// A fingerprint of the scheduling state, without time: each task's status, point (kind and
    /// source location) and held locks; each CPU's owner and run queue; each lock's holders,
    /// waiters in order and completion count; lockdep's dependency graph and reported set. Two
    /// interleavings that reach the same fingerprint (and the same model state, task-local
    /// variables included) have the same futures, except through virtual time, which under the
    /// exploration schedulers only decides time-slice preemption on a CPU with a run queue
    /// (see [`CpuStats::runqueue_waits`]). The explorer combines it with the model's own.
    pub fn fingerprint(&self) -> u64 {
        let st = self.0.state.borrow();
        let mut d = Digest::new();
        for (id, t) in st.tasks.iter() {
            d.write_u64(u64::from(id.0) << 32 | t.status as u64);
            d.write_u64(point_tag(t.point.kind));
            d.write_u64(u64::from(t.point.at.line()) << 32 | u64::from(t.point.at.column()));
            d.write_str(t.point.at.file());
            for h in &t.held {
                d.write_u64(
                    u64::from(h.lock.0) << 16 | (h.mode as u64) << 8 | u64::from(h.subclass),
                );
            }
            d.write_u64(u64::MAX);
        }
        for (_, c) in st.cpus.iter() {
            d.write_u64(c.owner.map_or(u64::MAX, |t| t.0.into()));
            for t in &c.runqueue {
                d.write_u64(t.0.into());
            }
            d.write_u64(u64::MAX);
        }
        for (_, l) in st.locks.iter() {
            l.state.fingerprint(&mut d);
        }
        st.lockdep.fingerprint(&mut d);
        st.fairness.fingerprint(&mut d);
        d.value()
    }

    /// The digest of the event history so far (what [`RunReport::digest`] reports at the end),
    /// also available after a run that stopped with an error.
    pub fn digest(&self) -> Digest {
        self.0.state.borrow().digest
    }

    /// Scheduling events so far (what [`RunReport::events`] reports at the end).
    pub fn events(&self) -> u64 {
        self.0.state.borrow().events
    }

    /// Every lock that is held or waited for: `class#id: held by ...; waited for by ...`.
    pub fn describe_locks(&self) -> Vec<String> {
        let st = self.0.state.borrow();
        let busy =
            st.locks.iter().filter(|(_, l)| l.state.is_held() || !l.state.waiters().is_empty());
        busy.map(|(id, _)| st.describe_lock(id)).collect()
    }

    /// Says which address space `task` runs in, for what a context switch to it costs
    /// ([`TaskContext`]); a task is [`TaskContext::Free`] until told otherwise. Call it before
    /// the task first runs (right after spawning it).
    pub fn set_context(&self, task: TaskId, context: TaskContext) {
        self.0.state.borrow_mut().tasks[task].context = context;
    }

    pub fn task_stats(&self, task: TaskId) -> TaskStats {
        self.0.state.borrow().tasks[task].stats
    }

    /// Every task spawned so far, in spawn order.
    pub fn tasks(&self) -> Vec<TaskId> {
        (0..self.0.state.borrow().tasks.len()).map(TaskId::from_index).collect()
    }

    pub fn task_name(&self, task: TaskId) -> String {
        self.0.state.borrow().tasks[task].name.clone()
    }

    pub fn cpu_stats(&self, cpu: CpuId) -> CpuStats {
        self.0.state.borrow().cpus[cpu].stats
    }

    /// The scheduling events of the run, as `(time, task name, point, source line)`, when the
    /// configuration asked for a trace.
    pub fn trace(&self) -> Option<Vec<(SimTime, String, String, String)>> {
        let st = self.0.state.borrow();
        let trace = st.trace.as_ref()?;
        let describe = |p: &Point| match p.kind {
            PointKind::Lock(l, m) => format!("{m} {}", st.lock_label(l)),
            PointKind::Wait(l) => format!("wait {}", st.lock_label(l)),
            PointKind::Join(t) => format!("join {}", st.tasks[t].name),
            k => k.to_string(),
        };
        Some(
            trace
                .iter()
                .map(|(t, task, p)| {
                    (*t, st.tasks[*task].name.clone(), describe(p), p.at.to_string())
                })
                .collect(),
        )
    }
}

/// A simulation: create it, create locks and tasks through [`handle`](Sim::handle), then
/// [`run`](Sim::run). Runs may be repeated after spawning more tasks; time carries on.
pub struct Sim {
    handle: Handle,
    poisoned: bool,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sim({:?})", self.handle)
    }
}

impl Sim {
    pub fn new(config: SimConfig) -> Result<Sim, ConfigError> {
        Sim::build(config, None)
    }

    /// A simulation driven by a scheduler of the caller's (the explorer's exhaustive search);
    /// `config.scheduler` is then only a label in messages.
    pub fn with_scheduler(
        config: SimConfig,
        sched: Box<dyn Scheduler>,
    ) -> Result<Sim, ConfigError> {
        Sim::build(config, Some(sched))
    }

    fn build(config: SimConfig, sched: Option<Box<dyn Scheduler>>) -> Result<Sim, ConfigError> {
        config.validate()?;
        let state = RefCell::new(State::new(config, sched));
        let core = Core { state, futures: RefCell::new(IdVec::new()) };
        Ok(Sim { handle: Handle(Rc::new(core)), poisoned: false })
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs until every non-daemon task has ended.
    ///
    /// A panic inside a task (a broken invariant) is re-raised with the seed and scheduler that
    /// reproduce it.
    pub fn run(&mut self) -> Result<RunReport, SimError> {
        self.run_with(&mut || Ok(()), true)
    }

    /// Like [`run`](Sim::run), calling `check` after every step (every resumption of a task up to
    /// its next blocking point); the first error stops the run with [`SimError::Check`]. This is
    /// how whole-system checkers run after every event.
    pub fn run_checked(
        &mut self,
        check: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<RunReport, SimError> {
        self.run_with(check, false)
    }

    /// Like [`run`](Sim::run), calling `observe` after every pass of the run loop (progress
    /// reporting): under the time-ordered scheduler a task whose charge or sleep ends before
    /// anything else is due carries on without a pass, so one call may follow several blocking
    /// points. Same events, digest and outcome as [`run_checked`](Sim::run_checked) with a
    /// checker that always passes; the first error stops the run with [`SimError::Check`].
    pub fn run_observed(
        &mut self,
        observe: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<RunReport, SimError> {
        self.run_with(observe, true)
    }

    /// The run loop with `step` after every pass; `carry_on` lets tasks run on past charges
    /// and sleeps where nothing else is due (`State::carry_on`).
    fn run_with(
        &mut self,
        step: &mut dyn FnMut() -> Result<(), String>,
        carry_on: bool,
    ) -> Result<RunReport, SimError> {
        assert!(!self.poisoned, "run() after a panic: the simulation state is inconsistent");
        let core = &self.handle.0;
        core.state.borrow_mut().carry_on = carry_on;
        match std::panic::catch_unwind(AssertUnwindSafe(|| run_loop(core, step))) {
            Ok(result) => result,
            Err(payload) => {
                self.poisoned = true;
                let msg = payload
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| payload.downcast_ref::<&str>().copied())
                    .unwrap_or("(non-text panic)");
                let st = core.state.borrow();
                panic!(
                    "{msg}\n  at {} after {} events; reproduce with seed={} scheduler={}",
                    st.now, st.events, st.config.seed, st.config.scheduler
                );
            }
        }
    }
}

fn run_loop(
    core: &Core,
    check: &mut dyn FnMut() -> Result<(), String>,
) -> Result<RunReport, SimError> {
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        let (task, mut fut) = {
            let mut st = core.state.borrow_mut();
            if st.live == 0 {
                return Ok(RunReport { digest: st.digest, events: st.events, now: st.now });
            }
            let Some(entry) = st.next_entry() else {
                return Err(SimError::Deadlock(Box::new(DeadlockReport::new(&st))));
            };
            st.events += 1;
            if st.events > st.config.max_events {
                return Err(SimError::EventLimit { limit: st.config.max_events, now: st.now });
            }
            if !st.dispatch(entry) {
                continue;
            }
            let fut = core.futures.borrow_mut()[entry.task].take();
            (entry.task, fut.expect("a runnable task has no future"))
        };
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(()) => {
                drop(fut);
                core.state.borrow_mut().finish(task);
            }
            Poll::Pending => {
                core.futures.borrow_mut()[task] = Some(fut);
                let st = core.state.borrow();
                let t = &st.tasks[task];
                assert_ne!(
                    t.status,
                    Status::Running,
                    "task {} returned Pending without blocking at a simulation point (an await on \
                     a foreign future?)",
                    t.name
                );
            }
        }
        if let Err(message) = check() {
            let st = core.state.borrow();
            return Err(SimError::Check { message, now: st.now, events: st.events });
        }
    }
}

impl Drop for Sim {
    /// Drops unfinished task futures (daemons, deadlocked tasks) without running lock releases,
    /// which also breaks the reference cycle between the core and the tasks' contexts.
    fn drop(&mut self) {
        self.handle.0.state.borrow_mut().tearing_down = true;
        let futures: Vec<TaskFuture> =
            self.handle.0.futures.borrow_mut().values_mut().filter_map(Option::take).collect();
        drop(futures);
    }
}
