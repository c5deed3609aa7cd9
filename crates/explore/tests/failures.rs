//! Violations other than a failed expectation (a panicking task, a deadlock, a per-step
//! invariant, the event bound), and what is an error rather than a violation (a failing or
//! misbehaving trial factory, a nondeterministic trial). Also: random and PCT trials are exactly
//! the engine's own schedulers, and tasks sharing a CPU turn the state cache off.

use engine::{SchedulerKind, Sim, SimConfig};
use explore::{
    ExploreError, Options, Outcome, Strategy, Trial, TrialSetup, ViolationKind, explore,
};
use simcore::{Digest, SimDuration};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

fn us(n: u64) -> SimDuration {
    SimDuration::from_us(n)
}

fn sim(setup: TrialSetup, config: SimConfig) -> Result<Sim, String> {
    setup.sim(config).map_err(|e| e.to_string())
}

fn cpus(n: u32) -> SimConfig {
    SimConfig { cpus: n, ..SimConfig::default() }
}

fn dfs(bound: Option<u32>) -> Options {
    Options::new(Strategy::Dfs { seed: 0, preemption_bound: bound }, 10_000)
}

fn explore_with(
    factory: &mut dyn FnMut(TrialSetup) -> Result<Trial, String>,
    options: &Options,
) -> Result<Outcome, ExploreError> {
    explore(factory, options, &mut |_| false)
}

/// The consumer asserts that the producer published first: running the consumer first (no
/// preemption needed) breaks it.
fn order_bug(setup: TrialSetup) -> Result<Trial, String> {
    let sim = sim(setup, cpus(2))?;
    let h = sim.handle().clone();
    let published = Rc::new(Cell::new(false));
    let p = published.clone();
    h.spawn(h.cpu(0).unwrap(), "producer", move |cx| async move {
        cx.charge(us(1)).await;
        p.set(true);
    });
    h.spawn(h.cpu(1).unwrap(), "consumer", move |cx| async move {
        cx.charge(us(1)).await;
        assert!(published.get(), "consumer ran before the producer published");
    });
    Ok(Trial::new(sim))
}

#[test]
fn a_panicking_task_is_a_violation() {
    let out = explore_with(&mut order_bug, &dfs(Some(0))).unwrap();
    let v = out.violation.expect("the order bug was not found");
    assert_eq!(v.finding.kind, ViolationKind::Panic);
    let message = &v.finding.message;
    assert!(message.starts_with("consumer ran before the producer published"), "{message}");
    assert!(message.contains("after 2 events") && !message.contains("reproduce with"), "{message}");
    assert_eq!(v.preemptions, 0);
    let tasks: Vec<&str> = v.steps.iter().map(|s| s.task.as_str()).collect();
    assert_eq!(tasks, ["consumer", "consumer"], "{v}");
    let random = explore_with(&mut order_bug, &Options::new(Strategy::Random { seed: 0 }, 100));
    assert_eq!(random.unwrap().violation.map(|v| v.finding.kind), Some(ViolationKind::Panic));
}

#[test]
fn dfs_finds_an_ab_ba_deadlock() {
    let mut factory = |setup: TrialSetup| -> Result<Trial, String> {
        let sim = sim(setup, cpus(2))?;
        let h = sim.handle().clone();
        let (a, b) = (h.mutex("lock_a"), h.mutex("lock_b"));
        h.spawn(h.cpu(0).unwrap(), "one", move |cx| async move {
            let _a = a.lock(&cx).await;
            cx.charge(us(1)).await;
            let _b = b.lock(&cx).await;
        });
        h.spawn(h.cpu(1).unwrap(), "two", move |cx| async move {
            let _b = b.lock(&cx).await;
            cx.charge(us(1)).await;
            let _a = a.lock(&cx).await;
        });
        Ok(Trial::new(sim))
    };
    assert!(explore_with(&mut factory, &dfs(Some(0))).unwrap().violation.is_none());
    let v = explore_with(&mut factory, &dfs(Some(3))).unwrap().violation.unwrap();
    assert_eq!(v.finding.kind, ViolationKind::Deadlock);
    assert_eq!(v.preemptions, 1);
    assert!(
        v.finding.message.contains("lock_a#0: held by one (exclusive); waited for by two"),
        "{v}"
    );
    assert!(v.steps.iter().any(|s| s.point == "exclusive lock_b#1" || s.point == "preempt"), "{v}");
}

/// An invariant checked after every step stops the run at the first bad state, before the end.
#[test]
fn a_per_step_invariant_stops_at_the_first_bad_state() {
    let mut factory = |setup: TrialSetup| -> Result<Trial, String> {
        let sim = sim(setup, cpus(2))?;
        let h = sim.handle().clone();
        let counter = Rc::new(Cell::new(0u32));
        let increments = Rc::new(Cell::new(0u32));
        for i in 0..2 {
            let (c, n) = (counter.clone(), increments.clone());
            h.spawn(h.cpu(i).unwrap(), format!("inc{i}"), move |cx| async move {
                let v = c.get();
                cx.charge(us(1)).await;
                c.set(v + 1);
                n.set(n.get() + 1);
                cx.charge(us(1)).await;
            });
        }
        Ok(Trial::new(sim).step_check(move || {
            let (v, n) = (counter.get(), increments.get());
            if v == n { Ok(()) } else { Err(format!("counter {v} != increments {n}")) }
        }))
    };
    let v = explore_with(&mut factory, &dfs(Some(1))).unwrap().violation.unwrap();
    assert_eq!(v.finding.kind, ViolationKind::Invariant);
    assert!(v.finding.message.starts_with("counter 1 != increments 2 (at "), "{v}");
    // A complete run makes 6 choices (3 steps per task); this one stops at the bad write.
    assert_eq!(v.schedule.choices.len(), 5, "{v}");
}

/// A trial of `n` tasks, one per CPU, that never stop computing, bounded at `max_events`.
fn spinners(setup: TrialSetup, n: u32, max_events: u64) -> Result<Trial, String> {
    let sim = sim(setup, SimConfig { max_events, ..cpus(n) })?;
    let h = sim.handle().clone();
    for cpu in 0..n {
        h.spawn(h.cpu(cpu).unwrap(), format!("spinner{cpu}"), |cx| async move {
            loop {
                cx.charge(us(1)).await;
            }
        });
    }
    Ok(Trial::new(sim))
}

/// A schedule that reaches the event bound is neither a violation nor a pass: it is counted as
/// inconclusive, the first kept as run, and the search goes on to spend its budget.
#[test]
fn the_event_bound_is_inconclusive_not_a_violation() {
    let mut factory = |setup: TrialSetup| spinners(setup, 1, 20);
    let o = explore_with(&mut factory, &Options::new(Strategy::Random { seed: 0 }, 10)).unwrap();
    assert!(o.violation.is_none(), "{:?}", o.violation);
    assert_eq!(o.schedules, 10);
    let i = o.inconclusive.expect("every schedule reached the bound");
    assert_eq!(i.schedules, 10);
    assert!(i.message.starts_with("event bound exceeded: more than 20"), "{i}");
    let r = explore::replay(&mut factory, &i.first, false).unwrap();
    assert_eq!((r.finding, r.inconclusive), (None, Some(i.message)));
}

/// The exhaustive search backtracks past an inconclusive path and still finds the violation
/// another path leads to.
#[test]
fn dfs_goes_on_past_an_inconclusive_path() {
    let mut factory = |setup: TrialSetup| spinners(setup, 2, 40);
    let o = explore_with(&mut factory, &dfs(Some(1))).unwrap();
    assert!(o.violation.is_none());
    assert!(o.exhausted, "the bounded tree is finite");
    assert_eq!(o.inconclusive.unwrap().schedules, o.schedules);
}

/// A deadline asked inside a trial abandons a schedule that would run on: the exploration ends
/// with that schedule uncounted.
#[test]
fn should_stop_is_asked_inside_a_long_schedule() {
    let mut factory = |setup: TrialSetup| spinners(setup, 1, 1 << 20);
    let mut asked = 0;
    let mut stop = |_: &explore::Progress| {
        asked += 1;
        asked > 3
    };
    let options = Options::new(Strategy::Random { seed: 0 }, 10);
    let o = explore(&mut factory, &options, &mut stop).unwrap();
    assert_eq!((o.schedules, o.inconclusive), (0, None));
    assert!(o.violation.is_none() && !o.exhausted);
}

#[test]
fn factory_failures_are_errors() {
    let err = explore_with(&mut |_| Err("no such scenario".into()), &dfs(None)).unwrap_err();
    assert_eq!(err, ExploreError::Setup("no such scenario".into()));
    assert_eq!(err.to_string(), "cannot build the trial: no such scenario");
    let err = explore_with(&mut |setup| sim(setup, cpus(0)).map(Trial::new), &dfs(None));
    assert!(err.unwrap_err().to_string().contains("at least one CPU"));
    // A simulation built without the setup is not driven by the explorer.
    let mut bypass = |_: TrialSetup| Sim::new(cpus(1)).map(Trial::new).map_err(|e| e.to_string());
    let err = explore_with(&mut bypass, &dfs(None)).unwrap_err();
    assert!(err.to_string().contains("TrialSetup::sim"), "{err}");
}

/// A trial that differs from one execution to the next cannot be searched; the search says so.
#[test]
fn a_nondeterministic_trial_is_detected() {
    let builds = Cell::new(0u32);
    let mut factory = |setup: TrialSetup| -> Result<Trial, String> {
        builds.set(builds.get() + 1);
        let tasks = if builds.get() == 1 { 2 } else { 3 };
        let sim = sim(setup, cpus(3))?;
        let h = sim.handle().clone();
        for i in 0..tasks {
            h.spawn(h.cpu(i).unwrap(), format!("t{i}"), |cx| async move {
                cx.charge(us(1)).await;
            });
        }
        Ok(Trial::new(sim))
    };
    let err = explore_with(&mut factory, &dfs(None)).unwrap_err();
    assert!(matches!(err, ExploreError::Nondeterministic { step: 0, .. }), "{err}");
    assert!(
        err.to_string().contains("ready tasks were [0, 1] there before, now [0, 1, 2]"),
        "{err}"
    );
}

/// A small racy workload on a handle, for comparing the explorer's trials with plain runs.
fn racy_workload(h: &engine::Handle) {
    let counter = Rc::new(Cell::new(0u32));
    for i in 0..3 {
        let c = counter.clone();
        h.spawn(h.cpu(i).unwrap(), format!("t{i}"), move |cx| async move {
            for _ in 0..3 {
                let v = c.get();
                cx.charge(us(1)).await;
                c.set(v + 1);
                cx.charge(us(2)).await;
            }
        });
    }
}

#[test]
fn random_and_pct_trials_are_the_engine_schedulers() {
    for (strategy, kind) in [
        (Strategy::Random { seed: 40 }, SchedulerKind::Random),
        (
            Strategy::Pct { seed: 40, depth: 3, steps: 20 },
            SchedulerKind::Pct { depth: 3, steps: 20 },
        ),
    ] {
        let digests = Rc::new(RefCell::new(Vec::<Digest>::new()));
        let mut factory = |setup: TrialSetup| -> Result<Trial, String> {
            let sim = sim(setup, cpus(3))?;
            let h = sim.handle().clone();
            racy_workload(&h);
            let d = digests.clone();
            Ok(Trial::new(sim).end_check(move || {
                d.borrow_mut().push(h.digest());
                Ok(())
            }))
        };
        let out = explore_with(&mut factory, &Options::new(strategy, 4)).unwrap();
        assert_eq!(out.schedules, 4);
        let direct: Vec<Digest> = (40..44)
            .map(|seed| {
                let mut sim = Sim::new(SimConfig { seed, scheduler: kind, ..cpus(3) }).unwrap();
                racy_workload(sim.handle());
                sim.run().unwrap().digest
            })
            .collect();
        assert_eq!(*digests.borrow(), direct, "{strategy}");
    }
}

/// With two tasks on one CPU a run queue forms, time slices could decide the schedule, and the
/// state cache (which ignores time) is turned off; the search still completes.
#[test]
fn tasks_sharing_a_cpu_turn_the_state_cache_off() {
    let mut factory = |setup: TrialSetup| -> Result<Trial, String> {
        let sim = sim(setup, cpus(1))?;
        let h = sim.handle().clone();
        let m = h.mutex("m");
        let state = Rc::new(RefCell::new((0u32, [0u32; 2])));
        for i in 0..2 {
            let s = state.clone();
            h.spawn(h.cpu(0).unwrap(), format!("t{i}"), move |cx| async move {
                let _g = m.lock(&cx).await;
                cx.charge(us(1)).await;
                let mut s = s.borrow_mut();
                s.0 += 1;
                s.1[i] += 1;
            });
        }
        Ok(Trial::new(sim).model_fingerprint(move || {
            let s = state.borrow();
            u64::from(s.0) << 32 | u64::from(s.1[0]) << 16 | u64::from(s.1[1])
        }))
    };
    let out = explore_with(&mut factory, &dfs(None)).unwrap();
    assert!(out.violation.is_none() && out.exhausted, "{out:?}");
    assert!(!out.state_cache);
}

/// A daemon that loops on work and a timed sleep (khugepaged's shape) leaves every schedule
/// finite: the exhaustive search ends, with and without a preemption bound, and so does PCT
/// whatever priority it draws for the daemon (the engine's daemon fairness).
#[test]
fn a_looping_daemon_leaves_the_search_finite() {
    let mut factory = |setup: TrialSetup| -> Result<Trial, String> {
        let sim = sim(setup, cpus(2))?;
        let h = sim.handle().clone();
        h.spawn_daemon(h.cpu(1).unwrap(), "scanner", |cx| async move {
            loop {
                cx.charge(us(1)).await;
                cx.sleep(SimDuration::from_ms(10)).await;
            }
        });
        h.spawn(h.cpu(0).unwrap(), "worker", |cx| async move {
            for _ in 0..3 {
                cx.charge(us(1)).await;
            }
        });
        Ok(Trial::new(sim))
    };
    for bound in [Some(1), None] {
        let out = explore_with(&mut factory, &dfs(bound)).unwrap();
        assert!(out.violation.is_none() && out.exhausted, "bound {bound:?}: {out:?}");
    }
    let pct = Options::new(Strategy::Pct { seed: 0, depth: 3, steps: 20 }, 200);
    let out = explore_with(&mut factory, &pct).unwrap();
    assert!(out.violation.is_none(), "{out:?}");
}
