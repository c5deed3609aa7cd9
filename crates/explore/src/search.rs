//! The exploration loop: run trials under a strategy until a violation, the budget, or (for the
//! exhaustive search) the end of the space; then minimise the violating schedule and describe it.
//!
//! The budget is a number of schedules and a `should_stop` callback asked before every trial:
//! the edge (CLI, Python) supplies a wall-clock deadline or a progress display through it, since a
//! simulation crate reads no clock. Minimisation has its own trial bound and ignores
//! `should_stop`, so the same violation always minimises to the same schedule.
//!
//! "States" counts distinct (engine fingerprint, model fingerprint) pairs seen after any step,
//! or distinct engine fingerprints when the trial gives no model fingerprint.

use crate::dfs;
use crate::error::{ExploreError, Found};
use crate::quiet::QuietPanics;
use crate::replay::{Replay, describe};
use crate::schedule::Schedule;
use crate::shrink;
use crate::strategy::Strategy;
use crate::trial::{Ending, Factory, Finding, RunSpec, Seen, Source, StateView, Step, run_trial};
use engine::TaskId;
use simcore::{Digest, Prng};
use std::collections::BTreeSet;
use std::fmt;

/// What to explore and how much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub strategy: Strategy,
    /// Stop after this many schedules (trials).
    pub max_schedules: u64,
    /// Trials the minimisation of a violating schedule may spend (at least one is always run,
    /// to confirm the violation).
    pub shrink_trials: u64,
    /// Let the exhaustive search prune at known states when the trial allows it (see `dfs.rs`);
    /// turning it off searches every bounded path, for cross-checking the reduction.
    pub state_cache: bool,
}

impl Options {
    /// The default minimisation budget.
    pub const SHRINK_TRIALS: u64 = 1000;

    pub fn new(strategy: Strategy, max_schedules: u64) -> Options {
        Options {
            strategy,
            max_schedules,
            shrink_trials: Options::SHRINK_TRIALS,
            state_cache: true,
        }
    }
}

/// Progress so far, for `should_stop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub schedules: u64,
    pub states: u64,
}

/// A violation found, minimised and described.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// What failed on the minimised schedule (the message may differ in detail from the one
    /// first found: a shorter run can lose fewer updates).
    pub finding: Finding,
    /// The minimised schedule.
    pub schedule: Schedule,
    pub preemptions: u32,
    /// The minimised run, step by step.
    pub steps: Vec<Step>,
    /// The digest of the minimised run: a replay gives the same.
    pub digest: Digest,
    /// The schedule as found, before minimisation, and its preemptions.
    pub found: Schedule,
    pub found_preemptions: u32,
    /// Trials spent minimising.
    pub shrink_trials: u64,
}

impl Violation {
    /// The schedule's summary: its length and preemptions, before and after minimisation, how it
    /// was found, and the run's digest.
    pub fn summary(&self) -> String {
        format!(
            "schedule: {} choices, {} preemption(s) (found with {} choices, {} preemption(s); \
             {}, run seed {}); digest {}",
            self.schedule.choices.len(),
            self.preemptions,
            self.found.choices.len(),
            self.found_preemptions,
            self.schedule.strategy,
            self.schedule.seed,
            self.digest
        )
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.finding)?;
        writeln!(f, "{}", self.summary())?;
        for step in &self.steps {
            writeln!(f, "  {step}")?;
        }
        Ok(())
    }
}

/// Schedules that reached the event bound: neither violations nor passes. The first one is
/// kept so that it can be replayed step by step (a replay follows it strictly, to the bound).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconclusive {
    pub schedules: u64,
    /// The first such schedule, as run (not minimised: a shorter one cannot reach the bound).
    pub first: Schedule,
    /// The engine's words for it, with the numbers.
    pub message: String,
}

impl fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} schedule(s) inconclusive: they reached the event bound ({}; the first after {} \
             choices)",
            self.schedules,
            self.message,
            self.first.choices.len()
        )
    }
}

/// The result of an exploration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub violation: Option<Violation>,
    /// The schedules that reached the event bound, if any did.
    pub inconclusive: Option<Inconclusive>,
    /// Trials run (a trial pruned at a known state counts as one; one abandoned at the
    /// caller's deadline does not).
    pub schedules: u64,
    /// Distinct states seen.
    pub states: u64,
    /// True only when the exhaustive search covered its whole (bounded) space.
    pub exhausted: bool,
    /// Whether the exhaustive search pruned at known states (it does when the trial gives a
    /// model fingerprint and no CPU ever had a run queue).
    pub state_cache: bool,
}

/// Counts of an exploration in progress.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub schedules: u64,
    states: BTreeSet<(u64, u64)>,
    inconclusive: u64,
    /// The first inconclusive run: its seed, choices and message.
    first_inconclusive: Option<(u64, Vec<TaskId>, String)>,
}

/// Steps between two questions to the caller's `should_stop` inside one trial: a schedule can
/// run for minutes, and a deadline must not wait for it to end.
pub(crate) const STOP_EVERY: usize = 4096;

impl Counts {
    /// Records a run that reached the event bound.
    pub(crate) fn inconclusive(&mut self, seed: u64, choices: Vec<TaskId>, message: String) {
        self.inconclusive += 1;
        self.first_inconclusive.get_or_insert((seed, choices, message));
    }

    fn take_inconclusive(&mut self, strategy: Strategy) -> Option<Inconclusive> {
        let (seed, choices, message) = self.first_inconclusive.take()?;
        let first = Schedule { strategy, seed, choices };
        Some(Inconclusive { schedules: self.inconclusive, first, message })
    }

    /// Records a state; true if it is new.
    pub(crate) fn see(&mut self, view: &StateView) -> bool {
        self.states.insert((view.engine, view.model.unwrap_or(0)))
    }

    pub(crate) fn progress(&self) -> Progress {
        Progress { schedules: self.schedules, states: self.states.len() as u64 }
    }
}

/// Explores the interleavings of the trials `factory` builds.
///
/// `should_stop` is asked before every trial; returning true ends the exploration (not
/// exhausted). Task panics inside trials are caught and reported as violations; the panic hook
/// does not print them meanwhile.
pub fn explore(
    factory: &mut Factory<'_>,
    options: &Options,
    should_stop: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Outcome, ExploreError> {
    let _quiet = QuietPanics::install();
    let mut counts = Counts::default();
    let mut stop = |counts: &Counts| {
        counts.schedules >= options.max_schedules || should_stop(&counts.progress())
    };
    let (found, exhausted, state_cache) = match options.strategy {
        Strategy::Dfs { seed, preemption_bound } => {
            let cache = options.state_cache;
            let r = dfs::search(factory, seed, preemption_bound, cache, &mut counts, &mut stop)?;
            (r.found, r.exhausted, r.state_cache)
        }
        strategy => (sample(factory, strategy, &mut counts, &mut stop)?, false, false),
    };
    let violation = found.map(|f| minimise(factory, options, f)).transpose()?;
    let progress = counts.progress();
    Ok(Outcome {
        violation,
        inconclusive: counts.take_inconclusive(options.strategy),
        schedules: progress.schedules,
        states: progress.states,
        exhausted,
        state_cache,
    })
}

/// Random and PCT: trial `i` runs the engine's scheduler with seed `seed + i`.
fn sample(
    factory: &mut Factory<'_>,
    strategy: Strategy,
    counts: &mut Counts,
    stop: &mut dyn FnMut(&Counts) -> bool,
) -> Result<Option<Found>, ExploreError> {
    let kind = strategy.scheduler_kind().expect("a randomised strategy");
    while !stop(counts) {
        let seed = strategy.seed().wrapping_add(counts.schedules);
        let source = Source::Engine(engine::build_scheduler(kind, &Prng::from_seed(seed)));
        let spec = RunSpec { source, seed, trace: false, states: false };
        let run = run_trial(factory, spec, &mut |view| {
            counts.see(view);
            match view.choices > 0 && view.choices % STOP_EVERY == 0 && stop(counts) {
                true => Seen::Abandon,
                false => Seen::Go,
            }
        })
        .map_err(ExploreError::Setup)?;
        if run.ending != Ending::Abandoned {
            counts.schedules += 1;
        }
        match run.ending {
            Ending::Abandoned => break,
            Ending::Completed | Ending::Pruned => {}
            Ending::Violated(finding) => {
                let choices = run.log.choices();
                let preemptions = run.log.preemptions;
                return Ok(Some(Found { seed, choices, preemptions, finding }));
            }
            Ending::Inconclusive(message) => counts.inconclusive(seed, run.log.choices(), message),
        }
    }
    Ok(None)
}

/// Minimises a found schedule and describes the result.
fn minimise(
    factory: &mut Factory<'_>,
    options: &Options,
    found: Found,
) -> Result<Violation, ExploreError> {
    let strategy = options.strategy;
    let seed = found.seed;
    let schedule = |choices: Vec<TaskId>| Schedule { strategy, seed, choices };
    let found_schedule = schedule(found.choices.clone());
    let found_preemptions = found.preemptions;
    let (best, shrink_trials) = shrink::shrink(factory, found, options.shrink_trials)?;
    let minimised = schedule(best);
    let Replay { finding, steps, digest, preemptions, .. } = describe(factory, &minimised, false)?;
    let finding = finding.ok_or_else(|| ExploreError::Nondeterministic {
        step: minimised.choices.len(),
        detail: "the minimised schedule no longer violates when replayed".into(),
    })?;
    Ok(Violation {
        finding,
        schedule: minimised,
        preemptions,
        steps,
        digest,
        found: found_schedule,
        found_preemptions,
        shrink_trials,
    })
}
