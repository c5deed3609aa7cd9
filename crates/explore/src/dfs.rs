//! Bounded exhaustive search: stateless depth-first search of the choice tree with preemption
//! bounding and a visited-state cache.
//!
//! **Search.** Every trial re-executes from scratch, following a prefix of choices and then the
//! non-preemptive default policy, and records the ready set at each choice (VeriSoft: Godefroid,
//! "Model Checking for Programming Languages using VeriSoft", POPL 1997; CHESS). Backtracking
//! takes the deepest choice with an untried alternative. Alternatives are tried in a stable
//! order: the previous task first (no preemption), then the other ready tasks by id.
//!
//! **Preemption bounding.** With a bound `k`, a path may contain at most `k` preemptions
//! (switches away from a task that could continue); switches at blocking points are free. The
//! search is iteratively deepened, `k' = 0, 1, ..., k`, so the first violation found has the
//! fewest preemptions that can produce it (Musuvathi and Qadeer, PLDI 2007: most concurrency
//! bugs need very few preemptions). Without a bound the whole tree is searched once.
//!
//! **Reduction: a visited-state cache, not sleep sets or DPOR.** Sleep sets (Godefroid 1996) and
//! DPOR (Flanagan and Godefroid, POPL 2005) need to know which steps are independent, that is,
//! which shared data each step touches. The mm model's state is plain Rust data behind
//! `RefCell`s, so the engine cannot see accesses; the only sound dependency relation is "every
//! two steps conflict", which prunes nothing. Instead a state reached after a step is named by
//! (engine fingerprint, model fingerprint); a trial that reaches a state already explored stops
//! there. This also captures what POR would: two orders of independent steps reach the same
//! state, and the second is cut at that state (at the cost of executing up to it).
//!
//! Soundness. Every state first reached on some path has all its successors explored before the
//! search backtracks above it (they are the alternatives deeper on that path), so cutting later
//! arrivals loses no reachable state, as in any depth-first search with a visited set. The
//! subtree explored below a state depends on more than the state under bounding: on the previous
//! task (what counts as a preemption) and on the preemptions already spent. The cache therefore
//! keys on (state, previous task) and remembers the fewest preemptions it was reached with; a
//! later arrival is cut only if it has spent at least as many (its bounded subtree is then a
//! subset of the one explored). It holds under three conditions:
//! - the fingerprints capture the whole state: the engine's does for scheduling state (tasks,
//!   CPUs, locks, lockdep), and the model's must for model data and task-local variables (the
//!   [`Trial::model_fingerprint`](crate::Trial::model_fingerprint) contract). A trial without a
//!   model fingerprint is searched without the cache;
//! - time does not decide the schedule. Under the explorer's schedulers time only matters to
//!   time-slice preemption on a CPU with a run queue. Until some CPU has a run queue, two states
//!   that differ only in time have isomorphic futures, and a run queue forms identically in both;
//!   so if no explored trial ever forms one, none of the pruned ones would have either. If one
//!   does, the search restarts without the cache;
//! - 64-bit fingerprints do not collide (hash compaction, as in SPIN: Holzmann, "An Analysis of
//!   Bitstate Hashing", 1998); with two independent 64-bit halves the odds are negligible.
//!
//! `exhausted` is reported only when the stack of alternatives empties at the largest bound. A
//! path that reaches the event bound is cut there (inconclusive, counted) and the search
//! backtracks as from any other end: "exhausted" then covers every path up to that bound.

use crate::error::{ExploreError, Found, task_list};
use crate::search::{Counts, STOP_EVERY};
use crate::trial::{
    Ending, Factory, Log, RunSpec, Seen, Source, TrialRun, default_choice, run_trial,
};
use engine::TaskId;
use std::collections::BTreeMap;

/// A choice point on the current path.
#[derive(Debug)]
struct Node {
    /// Alternatives in trial order: the previous task first when it is ready, then by id.
    children: Vec<TaskId>,
    /// The alternative the current path takes.
    current: usize,
    /// Whether the previous task was ready: then every child but the first is a preemption.
    last_ready: bool,
    preemptions_before: u32,
}

impl Node {
    fn from_log(log: &Log, i: usize) -> Node {
        let ready = log.ready(i);
        let pop = log.pops[i];
        let first = default_choice(ready, pop.last);
        let mut children = vec![first];
        children.extend(ready.iter().copied().filter(|&t| t != first));
        let last_ready = pop.last.is_some_and(|l| ready.contains(&l));
        let current = children.iter().position(|&t| t == pop.chosen).expect("chose a ready task");
        Node { children, current, last_ready, preemptions_before: pop.preemptions_before }
    }

    fn chosen(&self) -> TaskId {
        self.children[self.current]
    }

    /// Moves to the next alternative within `bound`; false if there is none.
    fn advance(&mut self, bound: Option<u32>) -> bool {
        let next = self.current + 1;
        let cost = u32::from(self.last_ready);
        let fits = bound.is_none_or(|b| self.preemptions_before + cost <= b);
        if next < self.children.len() && fits {
            self.current = next;
            true
        } else {
            false
        }
    }
}

/// What the search ended with.
#[derive(Debug)]
pub(crate) struct DfsResult {
    pub found: Option<Found>,
    pub exhausted: bool,
    pub state_cache: bool,
}

/// Searches bound by bound; see the module note.
pub(crate) fn search(
    factory: &mut Factory<'_>,
    seed: u64,
    preemption_bound: Option<u32>,
    mut state_cache: bool,
    counts: &mut Counts,
    stop: &mut dyn FnMut(&Counts) -> bool,
) -> Result<DfsResult, ExploreError> {
    let bounds: Vec<Option<u32>> = match preemption_bound {
        Some(k) => (0..=k).map(Some).collect(),
        None => vec![None],
    };
    for bound in bounds {
        let mut pass =
            Pass { factory: &mut *factory, seed, bound, counts: &mut *counts, state_cache };
        let result = pass.run(stop)?;
        state_cache = result.state_cache;
        if result.found.is_some() || !result.exhausted {
            return Ok(result);
        }
    }
    Ok(DfsResult { found: None, exhausted: true, state_cache })
}

/// One depth-first search under one bound.
struct Pass<'f, 'a, 'c> {
    factory: &'f mut Factory<'a>,
    seed: u64,
    bound: Option<u32>,
    counts: &'c mut Counts,
    state_cache: bool,
}

/// (engine, model, previous task) -> fewest preemptions it was reached with.
type StateCache = BTreeMap<(u64, u64, Option<TaskId>), u32>;

impl Pass<'_, '_, '_> {
    fn run(&mut self, stop: &mut dyn FnMut(&Counts) -> bool) -> Result<DfsResult, ExploreError> {
        let mut stack: Vec<Node> = Vec::new();
        let mut cache = StateCache::new();
        loop {
            if stop(self.counts) {
                return Ok(self.result(None, false));
            }
            let replayed = stack.len();
            let run = self.trial(&stack, &mut cache, stop)?;
            if run.ending == Ending::Abandoned {
                return Ok(self.result(None, false));
            }
            self.counts.schedules += 1;
            if let Some(d) = run.log.divergence {
                let was = d.expected.map_or("(none)".to_string(), |t| format!("task {t}"));
                let now = task_list(&d.ready);
                let detail =
                    format!("{was} was chosen there before, now the ready tasks are {now}");
                return Err(nondeterministic(d.step, detail));
            }
            let choices = || run.log.choices();
            match &run.ending {
                Ending::Violated(finding) => {
                    let (seed, preemptions) = (self.seed, run.log.preemptions);
                    let finding = finding.clone();
                    let found = Found { seed, choices: choices(), preemptions, finding };
                    return Ok(self.result(Some(found), false));
                }
                Ending::Inconclusive(why) => {
                    self.counts.inconclusive(self.seed, choices(), why.clone())
                }
                Ending::Completed | Ending::Pruned | Ending::Abandoned => {}
            }
            if !run.model_fingerprint {
                // Nothing was pruned (the observer needs a model fingerprint): nothing to redo.
                self.state_cache = false;
            } else if self.state_cache && run.runqueue_used {
                // Time may decide the schedule, which the fingerprints leave out: what the cache
                // pruned so far may hide schedules. Start over without it.
                self.state_cache = false;
                stack.clear();
                cache.clear();
                continue;
            }
            merge(&mut stack, &run.log, replayed)?;
            while let Some(node) = stack.last_mut() {
                if node.advance(self.bound) {
                    break;
                }
                stack.pop();
            }
            if stack.is_empty() {
                return Ok(self.result(None, true));
            }
        }
    }

    fn result(&self, found: Option<Found>, exhausted: bool) -> DfsResult {
        DfsResult { found, exhausted, state_cache: self.state_cache }
    }

    /// Runs the path's choices, then the default policy; prunes at states the cache knows
    /// (past the replayed prefix) and abandons the trial when `stop` says so.
    fn trial(
        &mut self,
        stack: &[Node],
        cache: &mut StateCache,
        stop: &mut dyn FnMut(&Counts) -> bool,
    ) -> Result<TrialRun, ExploreError> {
        let prefix: Vec<TaskId> = stack.iter().map(Node::chosen).collect();
        let replayed = prefix.len();
        let source = Source::Guided { choices: prefix, strict_end: false };
        let spec = RunSpec { source, seed: self.seed, trace: false, states: false };
        let use_cache = self.state_cache;
        let counts = &mut *self.counts;
        run_trial(self.factory, spec, &mut |view| {
            counts.see(view);
            if view.choices > 0 && view.choices % STOP_EVERY == 0 && stop(counts) {
                return Seen::Abandon;
            }
            // States along the replayed prefix are known; the cache applies from the state
            // the new alternative leads to.
            let Some(model) = view.model.filter(|_| use_cache && view.choices >= replayed) else {
                return Seen::Go;
            };
            let key = (view.engine, model, view.last);
            match cache.get(&key) {
                Some(&p) if p <= view.preemptions => Seen::Prune,
                _ => {
                    cache.insert(key, view.preemptions);
                    Seen::Go
                }
            }
        })
        .map_err(ExploreError::Setup)
    }
}

fn nondeterministic(step: usize, detail: String) -> ExploreError {
    ExploreError::Nondeterministic { step, detail }
}

/// Extends the path with the choices the trial made past the replayed prefix, after checking
/// that the prefix went as before.
fn merge(stack: &mut Vec<Node>, log: &Log, replayed: usize) -> Result<(), ExploreError> {
    for i in 0..log.pops.len() {
        let node = Node::from_log(log, i);
        match stack.get(i) {
            Some(old) if old.children != node.children || old.chosen() != node.chosen() => {
                let (was, now) = (task_list(&old.children), task_list(&node.children));
                let detail = format!("the ready tasks were {was} there before, now {now}");
                return Err(nondeterministic(i, detail));
            }
            Some(_) => {}
            None => stack.push(node),
        }
    }
    if log.pops.len() < replayed {
        let detail = "the run went on past it before, now it ends there".to_string();
        return Err(nondeterministic(log.pops.len(), detail));
    }
    Ok(())
}
