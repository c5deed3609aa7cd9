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

use crate::error::{ExploreError, Found};
use crate::trial::{Ending, Factory, Log, RunSpec, Seen, Source, ViolationKind, run_trial};
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

    /// The edits to try, in order, as descriptions: each costs O(1) until it is built, so a long
    /// schedule (an event-bound finding has 65,536 choices) does not hold a copy per edit.
    fn edits(&self) -> Vec<Edit> {
        let c = &self.choices;
        let mut out: Vec<Edit> = self.preemptions.iter().map(|&p| Edit::Prefix(p)).collect();
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
            out.push(Edit::Delay { start, len, to });
        }
        for &(start, len) in blocks.iter().rev() {
            out.push(Edit::Drop { start, len });
            if len > 1 {
                out.push(Edit::Drop { start, len: 1 });
            }
        }
        out
    }

    fn build(&self, edit: Edit) -> Vec<TaskId> {
        let c = &self.choices;
        match edit {
            Edit::Prefix(p) => c[..p].to_vec(),
            Edit::Delay { start, len, to } => {
                [&c[..start], &c[start + len..to], &c[start..start + len], &c[to..]].concat()
            }
            Edit::Drop { start, len } => [&c[..start], &c[start + len..]].concat(),
        }
    }
}

/// One edit of the choice list (the module header lists them).
#[derive(Clone, Copy, Debug)]
enum Edit {
    /// Keep the choices before this preemption.
    Prefix(usize),
    /// Move the block `start..start + len` to just before `to`.
    Delay { start: usize, len: usize, to: usize },
    /// Remove `start..start + len`.
    Drop { start: usize, len: usize },
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
        let run = run_trial(factory, spec, &mut |_| Seen::Go).map_err(ExploreError::Setup)?;
        Ok(match run.ending {
            Ending::Violated(f) if f.kind == kind => Some(Best::from_log(&run.log)),
            _ => None,
        })
    };
    let length = found.choices.len();
    let mut best = run(found.choices)?.ok_or_else(|| not_reproduced(length, kind))?;
    let mut spent = 1;
    'improve: loop {
        for edit in best.edits() {
            if spent >= budget {
                break 'improve;
            }
            spent += 1;
            if let Some(new) = run(best.build(edit))?.filter(|new| new.improves_on(&best)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks(s: &str) -> Vec<TaskId> {
        s.bytes().map(|b| TaskId(u32::from(b - b'a'))).collect()
    }

    #[test]
    fn edits_build_the_candidates_in_the_documented_order() {
        // Blocks aa | b | a | cc, one preemption (a -> b at index 2).
        let best = Best { choices: tasks("aabacc"), preemptions: vec![2] };
        let built: Vec<Vec<TaskId>> = best.edits().into_iter().map(|e| best.build(e)).collect();
        let expected = [
            "aa", // the first preemption only
            // Each block delayed to its task's next block or the end, last block first.
            "aabacc", "aabcca", "aaaccb", "baaacc",
            // Each block dropped, last first, and a longer block's first choice alone.
            "aaba", "aabac", "aabcc", "aaacc", "bacc", "abacc",
        ];
        assert_eq!(built, expected.map(tasks));
    }
}
