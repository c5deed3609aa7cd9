//! One trial: a fresh simulation built by the caller's factory, run to its end under a scheduler
//! of ours that records every choice, with the checks evaluated after each step and at the end.
//!
//! Simulations cannot be cloned (task futures are opaque), so every trial re-executes from
//! scratch and a schedule is reproduced by replaying its choices: stateless model checking as in
//! CHESS (Musuvathi, Qadeer, Ball, Basler, Nainar, Neamtiu, "Finding and Reproducing Heisenbugs
//! in Concurrent Programs", OSDI 2008).
//!
//! A *choice* is one `Scheduler::pop`: which ready task the engine resumes next. Under the
//! exploration schedulers the engine yields before every lock operation and at every charge, so
//! the choices are the interleavings at named blocking points. A pop whose task finds its CPU
//! owned by another task sends it to that CPU's run queue instead of running it; it is still a
//! choice (it changes the state) but no step, so `Step::choice` maps steps to choices.
//!
//! A *preemption* is a choice of another task while the previously chosen task is still ready
//! (it could have continued): the context-switch count of CHESS's preemption bounding
//! (Musuvathi and Qadeer, "Iterative Context Bounding for Systematic Testing of Multithreaded
//! Programs", PLDI 2007). Switching away from a task that blocked or ended is free.
//!
//! The default policy, used past the end of a guided schedule, is the non-preemptive one:
//! continue the previous task if it is ready, else the ready task with the lowest id.

use crate::quiet;
use engine::{ConfigError, CpuId, Handle, ReadyEntry, Scheduler, Sim, SimConfig, SimError, TaskId};
use simcore::{Digest, SimTime};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

/// What the explorer hands the trial factory: the scheduler to plug in, the run seed, and
/// whether the engine should keep a trace.
pub struct TrialSetup {
    scheduler: Box<dyn Scheduler>,
    seed: u64,
    trace: bool,
}

impl fmt::Debug for TrialSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrialSetup(seed={}, trace={})", self.seed, self.trace)
    }
}

impl TrialSetup {
    /// The run seed: the model's random streams must derive from it (through the simulation).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Builds the simulation for this trial: `config` with the explorer's seed and trace switch,
    /// driven by the explorer's scheduler (`config.scheduler` is then only a label).
    pub fn sim(self, mut config: SimConfig) -> Result<Sim, ConfigError> {
        config.seed = self.seed;
        config.trace = self.trace;
        Sim::with_scheduler(config, self.scheduler)
    }
}

/// A checker: `Err(message)` when the invariant or expectation does not hold.
pub(crate) type Check = Box<dyn FnMut() -> Result<(), String>>;

/// A simulation ready to run (tasks spawned), with its checks.
pub struct Trial {
    sim: Sim,
    step_check: Option<Check>,
    end_check: Option<Check>,
    fingerprint: Option<Box<dyn Fn() -> u64>>,
    describe: Option<Box<dyn Fn() -> String>>,
}

impl fmt::Debug for Trial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Trial({:?}, fingerprint={})", self.sim, self.fingerprint.is_some())
    }
}

impl Trial {
    /// A trial with no checks: only panics, deadlocks and the event bound are violations.
    pub fn new(sim: Sim) -> Trial {
        Trial { sim, step_check: None, end_check: None, fingerprint: None, describe: None }
    }

    /// The whole-system checkers, run after every step.
    pub fn step_check(mut self, check: impl FnMut() -> Result<(), String> + 'static) -> Trial {
        self.step_check = Some(Box::new(check));
        self
    }

    /// The expectations, checked once when every task has ended.
    pub fn end_check(mut self, check: impl FnMut() -> Result<(), String> + 'static) -> Trial {
        self.end_check = Some(Box::new(check));
        self
    }

    /// A fingerprint of the model state, combined with the engine's scheduling fingerprint to
    /// name a state. It must capture everything that decides the future apart from the engine's
    /// own state: the shared model data *and* task-local variables that live across blocking
    /// points (mirror them into the model), and the clock if the model decides anything by it.
    /// Giving one lets the exhaustive search prune states it has seen; without one it never
    /// prunes (and counts engine states only).
    pub fn model_fingerprint(mut self, fingerprint: impl Fn() -> u64 + 'static) -> Trial {
        self.fingerprint = Some(Box::new(fingerprint));
        self
    }

    /// A text dump of the model state, for replays that print the state at each step.
    pub fn describe(mut self, describe: impl Fn() -> String + 'static) -> Trial {
        self.describe = Some(Box::new(describe));
        self
    }
}

/// The caller's trial factory: builds a fresh simulation for each trial, or says why it cannot.
pub type Factory<'a> = dyn FnMut(TrialSetup) -> Result<Trial, String> + 'a;

/// What kind of check a run failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ViolationKind {
    /// A per-step whole-system checker failed.
    Invariant,
    /// An end-of-run expectation failed.
    Expectation,
    /// A task (or a checker) panicked: a broken `assert!`.
    Panic,
    /// Every remaining task blocked.
    Deadlock,
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ViolationKind::Invariant => "invariant violated",
            ViolationKind::Expectation => "expectation failed",
            ViolationKind::Panic => "panic",
            ViolationKind::Deadlock => "deadlock",
        })
    }
}

/// A failed run: which check failed and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: ViolationKind,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// One step of a run in readable form: which task resumed, at which blocking point, where in
/// the mechanism code (the "kernel function" location).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The index of the choice (in [`Schedule::choices`](crate::Schedule)) that resumed it.
    pub choice: usize,
    pub time: SimTime,
    pub task: String,
    /// The blocking point it resumed from (`charge`, `preempt`, `exclusive counter_lock#0`, ...).
    pub point: String,
    /// The source location of that point.
    pub at: String,
    /// Whether the choice preempted a task that could have continued.
    pub preemption: bool,
    /// Lock and model state after the step, when a replay asked for it (none for a step that
    /// panicked).
    pub state: Option<String>,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.preemption { "  <- preemption" } else { "" };
        write!(f, "#{:<4} {:<12} {:<28} {}{mark}", self.choice, self.task, self.point, self.at)?;
        if let Some(state) = &self.state {
            for line in state.lines() {
                write!(f, "\n        | {line}")?;
            }
        }
        Ok(())
    }
}

/// One recorded choice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pop {
    pub chosen: TaskId,
    /// The previously chosen task.
    pub last: Option<TaskId>,
    /// Preemptions before this choice.
    pub preemptions_before: u32,
    pub preemption: bool,
    /// The ready set, as a range of [`Log::ready`].
    ready: (u32, u32),
}

/// Where a guided run could not follow its schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Divergence {
    pub step: usize,
    /// The task the schedule named, or `None` when the schedule had ended.
    pub expected: Option<TaskId>,
    pub ready: Vec<TaskId>,
}

/// Everything a trial's scheduler recorded.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub pops: Vec<Pop>,
    ready: Vec<TaskId>,
    pub preemptions: u32,
    pub divergence: Option<Divergence>,
}

impl Log {
    /// The ready set (sorted by task id) at choice `i`.
    pub(crate) fn ready(&self, i: usize) -> &[TaskId] {
        let (a, b) = self.pops[i].ready;
        &self.ready[a as usize..b as usize]
    }

    pub(crate) fn choices(&self) -> Vec<TaskId> {
        self.pops.iter().map(|p| p.chosen).collect()
    }

    pub(crate) fn last(&self) -> Option<TaskId> {
        self.pops.last().map(|p| p.chosen)
    }
}

/// The non-preemptive default: the previous task if it is ready, else the lowest id.
pub(crate) fn default_choice(ready: &[TaskId], last: Option<TaskId>) -> TaskId {
    last.filter(|l| ready.contains(l)).unwrap_or(ready[0])
}

/// Who decides each choice.
#[derive(Debug)]
pub(crate) enum Source {
    /// One of the engine's schedulers (random walk, PCT), recorded as it goes.
    Engine(Box<dyn Scheduler>),
    /// A list of choices, then the default policy. A named task that is not ready is a
    /// divergence (recorded, and the default policy chooses instead); so is running past the end
    /// when `strict_end`.
    Guided { choices: Vec<TaskId>, strict_end: bool },
}

/// The scheduler plugged into every trial.
#[derive(Debug)]
struct TrialScheduler {
    source: Source,
    entries: Vec<ReadyEntry>,
    log: Rc<RefCell<Log>>,
}

impl Scheduler for TrialScheduler {
    fn push(&mut self, entry: ReadyEntry) {
        if let Source::Engine(inner) = &mut self.source {
            inner.push(entry);
        }
        self.entries.push(entry);
    }

    fn pop(&mut self) -> Option<ReadyEntry> {
        if self.entries.is_empty() {
            return None;
        }
        let mut log = self.log.borrow_mut();
        let log = &mut *log;
        let step = log.pops.len();
        let start = log.ready.len();
        log.ready.extend(self.entries.iter().map(|e| e.task));
        log.ready[start..].sort_unstable();
        let ready = &log.ready[start..];
        let last = log.pops.last().map(|p| p.chosen);
        let chosen = match &mut self.source {
            Source::Engine(inner) => inner.pop().expect("the inner scheduler lost an entry").task,
            Source::Guided { choices, strict_end } => {
                let default = default_choice(ready, last);
                match choices.get(step) {
                    Some(t) if ready.contains(t) => *t,
                    named => {
                        if (named.is_some() || *strict_end) && log.divergence.is_none() {
                            let expected = named.copied();
                            let ready = ready.to_vec();
                            log.divergence = Some(Divergence { step, expected, ready });
                        }
                        default
                    }
                }
            }
        };
        let ready = &log.ready[start..];
        let preemption = last.is_some_and(|l| l != chosen && ready.contains(&l));
        let i = self.entries.iter().position(|e| e.task == chosen).expect("chosen task not ready");
        let entry = self.entries.swap_remove(i);
        log.pops.push(Pop {
            chosen,
            last,
            preemptions_before: log.preemptions,
            preemption,
            ready: (start as u32, log.ready.len() as u32),
        });
        log.preemptions += u32::from(preemption);
        Some(entry)
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn preempts_at_every_point(&self) -> bool {
        true
    }
}

/// What the explorer sees after each step (and once before the first).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StateView {
    pub engine: u64,
    pub model: Option<u64>,
    /// Choices made so far.
    pub choices: usize,
    pub last: Option<TaskId>,
    pub preemptions: u32,
}

/// How a trial ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    Completed,
    Violated(Finding),
    /// The observer stopped it at a state already explored.
    Pruned,
    /// The run reached its event bound: neither a violation nor a pass (a livelock that only
    /// an unfair interleaving sustains, or a scenario longer than the bound). The message has
    /// the numbers.
    Inconclusive(String),
    /// The observer abandoned it (the caller's deadline came): it counts for nothing.
    Abandoned,
}

/// What the observer wants after seeing a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    Go,
    /// Stop here: the state was explored before.
    Prune,
    /// Stop here and drop the trial.
    Abandon,
}

/// A finished trial.
#[derive(Debug)]
pub(crate) struct TrialRun {
    pub ending: Ending,
    pub log: Log,
    pub digest: Digest,
    /// Readable steps, when traced.
    pub steps: Vec<Step>,
    /// Whether some CPU had a run queue: then virtual time (the time slice) can decide the
    /// schedule, which the state fingerprint leaves out.
    pub runqueue_used: bool,
    /// Whether the trial gave a model fingerprint.
    pub model_fingerprint: bool,
}

/// How to run one trial.
#[derive(Debug)]
pub(crate) struct RunSpec {
    pub source: Source,
    pub seed: u64,
    /// Keep readable steps.
    pub trace: bool,
    /// Describe the state after each step (with `trace`).
    pub states: bool,
}

/// Runs one trial. `observe` sees the initial state and the state after each step, and says
/// whether the trial goes on.
pub(crate) fn run_trial(
    factory: &mut Factory<'_>,
    spec: RunSpec,
    observe: &mut dyn FnMut(&StateView) -> Seen,
) -> Result<TrialRun, String> {
    let log = Rc::new(RefCell::new(Log::default()));
    let scheduler = TrialScheduler { source: spec.source, entries: Vec::new(), log: log.clone() };
    let setup = TrialSetup { scheduler: Box::new(scheduler), seed: spec.seed, trace: spec.trace };
    let Trial { mut sim, mut step_check, end_check, fingerprint, describe } = factory(setup)?;
    if Rc::strong_count(&log) < 2 {
        return Err(
            "the trial factory did not build its simulation with `TrialSetup::sim`, so the \
                    explorer's scheduler does not drive it"
                .into(),
        );
    }
    let handle = sim.handle().clone();
    let view = |log: &Log| StateView {
        engine: handle.fingerprint(),
        model: fingerprint.as_ref().map(|f| f()),
        choices: log.pops.len(),
        last: log.last(),
        preemptions: log.preemptions,
    };
    // The initial state is shared by every trial: it is seen, never pruned at.
    observe(&view(&log.borrow()));
    let stopped = Cell::new(Seen::Go);
    let mut step_choices = Vec::new();
    let mut states = Vec::new();
    let mut check = || -> Result<(), String> {
        let choices = log.borrow().pops.len();
        if spec.trace {
            step_choices.push(choices - 1);
            if spec.states {
                states.push(describe_state(&handle, describe.as_deref()));
            }
        }
        if let Some(c) = &mut step_check {
            c()?;
        }
        match observe(&view(&log.borrow())) {
            Seen::Go => {}
            seen => {
                stopped.set(seen);
                return Err(String::new());
            }
        }
        Ok(())
    };
    let outcome = quiet::catch(|| {
        sim.run_checked(&mut check)?;
        match end_check {
            Some(mut c) => Ok(c().map_or_else(
                |message| Ending::Violated(Finding { kind: ViolationKind::Expectation, message }),
                |()| Ending::Completed,
            )),
            None => Ok(Ending::Completed),
        }
    });
    let ending = ending_of(outcome, stopped.get());
    let runqueue_used = (0..handle.cpus()).any(|n| handle.cpu_stats(CpuId(n)).runqueue_waits > 0);
    let log = std::mem::take(&mut *log.borrow_mut());
    let steps =
        if spec.trace { readable_steps(&handle, &log, &step_choices, states) } else { vec![] };
    let model_fingerprint = fingerprint.is_some();
    Ok(TrialRun { ending, digest: handle.digest(), log, steps, runqueue_used, model_fingerprint })
}

/// How a trial ended, from the run's outcome (a task's panic as `Err`) and what the observer
/// stopped it for.
fn ending_of(outcome: Result<Result<Ending, SimError>, String>, stopped: Seen) -> Ending {
    let e = match outcome {
        Ok(Ok(ending)) => return ending,
        Ok(Err(e)) => e,
        Err(message) => {
            let message = panic_text(&message).to_string();
            return Ending::Violated(Finding { kind: ViolationKind::Panic, message });
        }
    };
    match e {
        SimError::Check { .. } if stopped == Seen::Prune => Ending::Pruned,
        SimError::Check { .. } if stopped == Seen::Abandon => Ending::Abandoned,
        SimError::Check { message, now, events } => Ending::Violated(Finding {
            kind: ViolationKind::Invariant,
            message: format!("{message} (at {now}, after {events} events)"),
        }),
        SimError::Deadlock(report) => {
            Ending::Violated(Finding { kind: ViolationKind::Deadlock, message: report.to_string() })
        }
        e @ SimError::EventLimit { .. } => Ending::Inconclusive(e.to_string()),
    }
}

/// The engine re-raises a task's panic with a hint for reproducing it under its own schedulers
/// (`; reproduce with seed=... scheduler=...`); under the explorer the schedule reproduces it
/// instead, so that hint is cut.
fn panic_text(message: &str) -> &str {
    message.split_once("; reproduce with").map_or(message, |(head, _)| head)
}

fn describe_state(handle: &Handle, describe: Option<&dyn Fn() -> String>) -> String {
    let mut lines = handle.describe_locks();
    if lines.is_empty() {
        lines.push("no lock held or waited for".into());
    }
    if let Some(d) = describe {
        lines.push(d());
    }
    lines.join("\n")
}

/// Pairs the engine's trace (one entry per step) with the choices that resumed each step. A step
/// that panicked has a trace entry but no check call: it belongs to the last choice.
fn readable_steps(
    handle: &Handle,
    log: &Log,
    step_choices: &[usize],
    states: Vec<String>,
) -> Vec<Step> {
    let trace = handle.trace().unwrap_or_default();
    let mut states = states.into_iter();
    trace
        .into_iter()
        .enumerate()
        .map(|(k, (time, task, point, at))| {
            let choice = step_choices.get(k).copied().unwrap_or(log.pops.len() - 1);
            let preemption = log.pops[choice].preemption;
            Step { choice, time, task, point, at, preemption, state: states.next() }
        })
        .collect()
}
