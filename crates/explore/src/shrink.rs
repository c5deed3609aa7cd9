//! Minimising a violating schedule: fewer preemptions, then fewer choices, keeping the violation.
//!
//! Candidates are edits of the choice list replayed leniently (a choice naming a task that is not
//! ready falls back to the default non-preemptive policy, as does everything past the end), so
//! every candidate is a valid run; its recorded choices become the new schedule when it still
//! fails the same kind of check and is no worse in either measure and better in one
//! (preemptions, choices). Both measures only decrease, so the search ends; it is also bounded by
//! a trial budget. The edits, tried in order after each success (a greedy delta debugging:
//! Zeller and Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", TSE 2002, applied
//! to schedules as in Jalbert and Sen, "A Trace Simplification Technique for Effective Debugging
//! of Concurrent Programs", FSE 2010):
//! 1. keep only the first `j` preemptions, the rest of the run non-preemptive (smallest `j` first);
//! 2. delay a block (a maximal run of choices of one task) to join that task's next block, or
//!    the end: the same steps with two switches fewer;
//! 3. drop a block, last block first: the task runs later by the default policy instead;
//! 4. drop the first choice of a block (the switch happens one step later, or not at all).
//!
//! The message may change (a shorter run can lose fewer updates); the kind of check may not.

use crate::search::{ExploreError, Found};
use crate::trial::{Ending, Factory, Log, RunSpec, Source, ViolationKind, run_trial};
use engine::TaskId;

/// The best schedule so far.
#[derive(Debug)]
struct Best {
    choices: Vec<TaskId>,
    /// Indices of the preempting choices.
    preemptions: Vec<usize>,
}

impl Best {
    fn from_log(log: &Log) -> Best {
        let preemptions = log.pops.iter().enumerate().filter(|(_, p)| p.preemption);
        Best { choices: log.choices(), preemptions: preemptions.map(|(i, _)| i).collect() }
    }

    /// No worse in preemptions and length, better in one.
    fn improves_on(&self, other: &Best) -> bool {
        let (p, n) = (self.preemptions.len(), self.choices.len());
        let (q, m) = (other.preemptions.len(), other.choices.len());
        p <= q && n <= m && (p, n) != (q, m)
    }

    fn candidates(&self) -> Vec<Vec<TaskId>> {
        let c = &self.choices;
        let mut out: Vec<Vec<TaskId>> = self.preemptions.iter().map(|&p| c[..p].to_vec()).collect();
        let mut blocks = Vec::new();
        let mut start = 0;
        while start < c.len() {
            let len = c[start..].iter().take_while(|&&t| t == c[start]).count();
            blocks.push((start, len));
            start += len;
        }
        for (i, &(start, len)) in blocks.iter().enumerate().rev() {
            let next = blocks[i + 1..].iter().find(|&&(s, _)| c[s] == c[start]);
            let to = next.map_or(c.len(), |&(s, _)| s);
            out.push([&c[..start], &c[start + len..to], &c[start..start + len], &c[to..]].concat());
        }
        for &(start, len) in blocks.iter().rev() {
            out.push([&c[..start], &c[start + len..]].concat());
            if len > 1 {
                out.push([&c[..start], &c[start + 1..]].concat());
            }
        }
        out
    }
}

/// Minimises `found` within `budget` trials; returns the choices and the trials spent.
pub(crate) fn shrink(
    factory: &mut Factory<'_>,
    found: Found,
    budget: u64,
) -> Result<(Vec<TaskId>, u64), ExploreError> {
    let seed = found.seed;
    let kind = found.finding.kind;
    let mut run = |choices: Vec<TaskId>| -> Result<Option<Best>, ExploreError> {
        let source = Source::Guided { choices, strict_end: false };
        let spec = RunSpec { source, seed, trace: false, states: false };
        let run = run_trial(factory, spec, &mut |_| false).map_err(ExploreError::Setup)?;
        Ok(match run.ending {
            Ending::Violated(f) if f.kind == kind => Some(Best::from_log(&run.log)),
            _ => None,
        })
    };
    let length = found.choices.len();
    let mut best = run(found.choices)?.ok_or_else(|| not_reproduced(length, kind))?;
    let mut spent = 1;
    'improve: loop {
        for candidate in best.candidates() {
            if spent >= budget {
                break 'improve;
            }
            spent += 1;
            if let Some(new) = run(candidate)?.filter(|new| new.improves_on(&best)) {
                best = new;
                continue 'improve;
            }
        }
        break;
    }
    Ok((best.choices, spent))
}

fn not_reproduced(length: usize, kind: ViolationKind) -> ExploreError {
    ExploreError::Nondeterministic {
        step: length,
        detail: format!("the violating schedule no longer ends in a {kind} when re-executed"),
    }
}
