//! Exploring a scenario's interleavings: each trial builds the scenario's machine on the
//! explorer's simulation, runs the same driver as `mmsim run`, and is checked after every step
//! (the whole-system checkers) and at the end (the scenario's expectations and operation
//! results, but those `[[time_order]]` declares: results that a race decided by virtual time
//! gives, which another interleaving legitimately changes).
//!
//! The model fingerprint combines the kernel state, the names bound and the operations done. It
//! does not capture the local variables of mechanisms suspended mid-fault (the page a fault
//! allocated, the PTE it read), so the exhaustive search's visited-state cache is off by default
//! for scenarios (`--state-cache` turns it on, as a heuristic that may prune a distinct state);
//! distinct states are counted either way.

use super::ScenarioError;
use super::model::{Expect, ExploreExpect, Scenario, TimeOrder};
use super::run::{Prepared, prepare};
use explore::{Trial, TrialSetup};
use mm::{Machine, MachineConfig};
use std::cell::Cell;
use std::rc::Rc;

/// The scheduling events one explored schedule may take (`mmsim explore --max-events`). A
/// scenario's schedules take thousands; under an adversarial schedule two tasks can undo each
/// other's work forever (a GUP write fault and ksmd merging the copy back, each woken in turn:
/// the daemon fairness rule lets ksmd in after every step of the other task), which a
/// time-ordered run never does because ksmd sleeps between passes. Such a schedule ends at this
/// bound, inconclusive (neither a violation nor a pass), instead of running for hours (the runs' own bound,
/// `DEFAULT_EVENTS`, is 2^30). The bound also caps host memory: the explorer's memory for one
/// schedule grows faster than its length (about 0.9 GB at 20,000 events and 9.7 GB at 65,536 in
/// that livelock; not yet explained).
pub const SCHEDULE_EVENTS: u64 = 1 << 16;

/// A `reach` or `never` expectation and the number of explored schedules that ended meeting it.
#[derive(Clone, Debug)]
pub struct ReachProbe {
    pub expect: Expect,
    pub reached: Rc<Cell<u64>>,
}

/// The explorer's trial factory for `scenario` on a machine configured as `config`; each trial
/// that ends meeting a probe's expectation counts in it.
pub fn factory(
    scenario: &Scenario,
    config: MachineConfig,
    probes: Vec<ReachProbe>,
) -> impl FnMut(TrialSetup) -> Result<Trial, String> + '_ {
    move |setup: TrialSetup| {
        let mut config = config.clone();
        config.seed = setup.seed();
        let sim = setup.sim(Machine::sim_config(&config)).map_err(|e| e.to_string())?;
        let rule = config.switches.cow_reuse;
        let Prepared { machine, env, log } =
            prepare(scenario, config, Some(sim)).map_err(|e: ScenarioError| e.to_string())?;
        let (sim, kernel) = machine.into_parts();
        let (k_check, k_fp, k_dump, k_end) =
            (kernel.clone(), kernel.clone(), kernel.clone(), kernel);
        let (log_end, log_fp) = (log.clone(), log);
        let (env_end, env_fp) = (env.clone(), env);
        let file = scenario.file.clone();
        let time_order = scenario.time_order.clone();
        let probes = probes.clone();
        Ok(Trial::new(sim)
            .step_check({
                let mut steps = mm::sim::check::StepChecker::new(rule);
                move || steps.check(&k_check)
            })
            .end_check(move || {
                for p in &probes {
                    let st = k_end.state();
                    if super::expect::check(&st, &env_end.borrow(), &p.expect).is_ok() {
                        p.reached.set(p.reached.get() + 1);
                    }
                }
                let log = log_end.borrow();
                match log.failures.iter().find(|f| !TimeOrder::covers(&time_order, f.line)) {
                    None => Ok(()),
                    Some(f) => Err(format!(
                        "{file}:{}: expected {}; observed {}",
                        f.line, f.expected, f.observed
                    )),
                }
            })
            .model_fingerprint(move || {
                let mut d = simcore::Digest::new();
                d.write_u64(k_fp.fingerprint());
                d.write_str(&format!("{:?}", env_fp.borrow()));
                let l = log_fp.borrow();
                d.write_u64(l.ops as u64);
                d.write_u64(l.failures.len() as u64);
                d.value()
            })
            .describe(move || k_dump.state().dump(k_dump.version)))
    }
}

/// The result of one declared exploration (`[[explore]]`).
#[derive(Clone, Debug)]
pub struct DeclaredResult {
    pub line: usize,
    pub holds: bool,
    /// What the declaration asks, in words.
    pub declared: String,
    pub summary: String,
}

/// Runs every `[[explore]]` declaration of a scenario and says whether each holds.
pub fn check_declared(scenario: &Scenario) -> Result<Vec<DeclaredResult>, ScenarioError> {
    let mut results = Vec::new();
    for d in &scenario.explore {
        let o = super::run::Overrides {
            kernel: d.kernel,
            sets: d.sets.clone(),
            max_events: Some(SCHEDULE_EVENTS),
            ..Default::default()
        };
        let config = super::run::machine_config(&scenario.machine, &o, &scenario.file)?;
        if let Some(why) = super::run::skip_reason(scenario, &config) {
            return Err(ScenarioError {
                file: scenario.file.clone(),
                line: d.line,
                message: format!(
                    "[[explore]] on {}, which `[requires]` excludes: {why}",
                    config.kernel
                ),
            });
        }
        results.push(check_one(scenario, d, config)?);
    }
    Ok(results)
}

/// Runs the `[[schedules]]` tables that apply to a run under `config` (its kernel and
/// switches, each schedule bounded as `mmsim explore`'s are).
pub fn check_schedules(
    scenario: &Scenario,
    config: &MachineConfig,
) -> Result<Vec<DeclaredResult>, ScenarioError> {
    let mut config = config.clone();
    config.max_events = config.max_events.min(SCHEDULE_EVENTS);
    let applying =
        scenario.schedules.iter().filter(|d| d.when.holds(&config.switches, config.kernel));
    applying.map(|d| check_one(scenario, d, config.clone())).collect()
}

/// One exploration: whether it found a violation as declared, met `reach` in some schedule and
/// `never` in none.
fn check_one(
    scenario: &Scenario,
    d: &ExploreExpect,
    config: MachineConfig,
) -> Result<DeclaredResult, ScenarioError> {
    let bad =
        |message: String| ScenarioError { file: scenario.file.clone(), line: d.line, message };
    let kernel = config.kernel;
    let strategy =
        explore::Strategy::from_spec(&d.strategy, d.seed).map_err(|e| bad(e.to_string()))?;
    // A declaration asks only whether a violation exists: the schedule found is replayed
    // once, not minimised (`mmsim explore` minimises).
    let options = explore::Options {
        state_cache: false,
        shrink_trials: 1,
        ..explore::Options::new(strategy, d.budget)
    };
    let probe = |e: &Option<Expect>| {
        e.clone().map(|expect| ReachProbe { expect, reached: Rc::new(Cell::new(0)) })
    };
    let (reach, never) = (probe(&d.reach), probe(&d.never));
    let mut trials = factory(scenario, config, reach.iter().chain(&never).cloned().collect());
    let outcome =
        explore::explore(&mut trials, &options, &mut |_| false).map_err(|e| bad(e.to_string()))?;
    let found = outcome.violation.as_ref().map(|v| v.finding.to_string());
    let reached = reach.as_ref().map(|p| p.reached.get());
    let seen = never.as_ref().map(|p| p.reached.get());
    let holds = found.is_some() == d.violation && reached != Some(0) && seen.unwrap_or(0) == 0;
    let summary = format!(
        "kernel {kernel}, {} with budget {}: {} after {} schedules ({} states{}){}{}{}",
        d.strategy,
        d.budget,
        found.unwrap_or_else(|| "no violation".into()),
        outcome.schedules,
        outcome.states,
        if outcome.exhausted { ", exhausted" } else { "" },
        reached.map_or(String::new(), |n| format!("; `reach` met in {n} schedules")),
        seen.map_or(String::new(), |n| format!("; `never` met in {n} schedules")),
        outcome.inconclusive.map_or(String::new(), |i| format!("; {i}")),
    );
    let mut declared = vec![if d.violation { "a violation" } else { "no violation" }];
    declared.extend(d.reach.as_ref().map(|_| "`reach` met in some schedule"));
    declared.extend(d.never.as_ref().map(|_| "`never` met in no schedule"));
    Ok(DeclaredResult { line: d.line, holds, declared: declared.join(", "), summary })
}
