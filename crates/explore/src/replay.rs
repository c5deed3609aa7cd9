//! Replaying a schedule: the run seed and the choices, followed strictly.
//!
//! Every choice must name a ready task and the run must end (or fail) exactly when the choices
//! do; otherwise the schedule does not belong to this scenario (or the scenario changed) and the
//! replay says where it diverged. A faithful replay reproduces the run's digest: the digest
//! covers the resumed task, its blocking point and the time of every step.

use crate::error::ExploreError;
use crate::quiet::QuietPanics;
use crate::schedule::Schedule;
use crate::trial::{Ending, Factory, Finding, RunSpec, Seen, Source, Step, run_trial};
use simcore::Digest;

/// A replayed run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// What failed, if anything.
    pub finding: Option<Finding>,
    /// Why the run is inconclusive, when it reached its event bound.
    pub inconclusive: Option<String>,
    pub steps: Vec<Step>,
    pub digest: Digest,
    pub preemptions: u32,
}

/// Replays `schedule` on a fresh trial; with `states`, each step carries the lock and model
/// state after it.
pub fn replay(
    factory: &mut Factory<'_>,
    schedule: &Schedule,
    states: bool,
) -> Result<Replay, ExploreError> {
    let _quiet = QuietPanics::install();
    describe(factory, schedule, states)
}

/// [`replay`] without installing the quiet panic hook (the caller has).
pub(crate) fn describe(
    factory: &mut Factory<'_>,
    schedule: &Schedule,
    states: bool,
) -> Result<Replay, ExploreError> {
    let source = Source::Guided { choices: schedule.choices.clone(), strict_end: true };
    let spec = RunSpec { source, seed: schedule.seed, trace: true, states };
    let run = run_trial(factory, spec, &mut |_| Seen::Go).map_err(ExploreError::Setup)?;
    if let Some(d) = run.log.divergence {
        return Err(ExploreError::Diverged { step: d.step, expected: d.expected, ready: d.ready });
    }
    if run.log.pops.len() < schedule.choices.len() {
        let step = run.log.pops.len();
        return Err(ExploreError::Diverged {
            step,
            expected: Some(schedule.choices[step]),
            ready: Vec::new(),
        });
    }
    let (finding, inconclusive) = match run.ending {
        Ending::Violated(f) => (Some(f), None),
        Ending::Inconclusive(why) => (None, Some(why)),
        Ending::Completed | Ending::Pruned | Ending::Abandoned => (None, None),
    };
    let (steps, digest, preemptions) = (run.steps, run.digest, run.log.preemptions);
    Ok(Replay { finding, inconclusive, steps, digest, preemptions })
}
