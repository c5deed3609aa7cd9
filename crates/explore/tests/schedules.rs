//! Schedules: a found schedule goes through its text form and replays to the same violation,
//! steps and digest; minimisation never lengthens a schedule nor loses its violation; schedules
//! that do not fit the scenario are errors naming the choice, not panics.

use engine::TaskId;
use explore::{
    ExploreError, LostUpdate, Options, Schedule, Strategy, Violation, ViolationKind, explore,
    replay,
};

const RACY: LostUpdate = LostUpdate { tasks: 3, iterations: 2, locked: false };

fn violation(toy: LostUpdate, options: &Options) -> Violation {
    let out = explore(&mut |setup| toy.trial(setup), options, &mut |_| false).unwrap();
    out.violation.expect("the lost update was not found")
}

fn replay_toy(
    toy: LostUpdate,
    schedule: &Schedule,
    states: bool,
) -> Result<explore::Replay, ExploreError> {
    replay(&mut |setup| toy.trial(setup), schedule, states)
}

#[test]
fn a_found_schedule_replays_to_the_same_violation_and_digest() {
    for strategy in [
        Strategy::Random { seed: 3 },
        Strategy::Pct { seed: 3, depth: 2, steps: 20 },
        Strategy::Dfs { seed: 3, preemption_bound: Some(2) },
    ] {
        let v = violation(RACY, &Options::new(strategy, 1000));
        let file = v.schedule.to_string();
        let parsed: Schedule = file.parse().unwrap();
        assert_eq!(parsed, v.schedule);
        let r = replay_toy(RACY, &parsed, false).unwrap();
        assert_eq!(r.finding.as_ref(), Some(&v.finding), "{strategy}");
        assert_eq!(r.digest, v.digest, "{strategy}");
        assert_eq!(r.steps, v.steps);
        assert_eq!(r.preemptions, v.preemptions);
        // The schedule as first found replays too (to the same kind of failure).
        let found = replay_toy(RACY, &v.found, false).unwrap();
        assert_eq!(found.finding.map(|f| f.kind), Some(ViolationKind::Expectation));
        assert_eq!(found.preemptions, v.found_preemptions);
    }
}

#[test]
fn steps_name_task_point_and_source_and_replays_show_the_state() {
    let locked = LostUpdate { tasks: 2, iterations: 1, locked: true };
    let schedule = Schedule {
        strategy: Strategy::Dfs { seed: 0, preemption_bound: None },
        seed: 0,
        choices: [0, 0, 1, 1, 0, 1, 1, 1, 0].map(TaskId).to_vec(),
    };
    let r = replay_toy(locked, &schedule, true).unwrap();
    assert_eq!(r.finding, None);
    let lines: Vec<String> = r.steps.iter().map(|s| s.to_string()).collect();
    let text = lines.join("\n");
    assert!(r.steps.iter().all(|s| s.state.is_some()), "{text}");
    let first = &r.steps[0];
    assert_eq!((first.task.as_str(), first.point.as_str()), ("inc0", "spawn"));
    assert!(first.at.contains("toy.rs"), "spawn points name the scenario's line: {text}");
    assert!(r.steps.iter().any(|s| s.point == "preempt" && s.at.contains("toy.rs")), "{text}");
    assert!(text.contains("held by inc0 (exclusive); waited for by inc1"), "{text}");
    assert!(text.contains("counter = 1; inc0: 1 done; inc1: 0 done"), "{text}");
    assert!(r.steps.iter().any(|s| s.preemption) && text.contains("<- preemption"), "{text}");
}

/// The lost update needs exactly one preemption; minimisation gets there from whatever random
/// found, and never makes the schedule longer or loses the violation.
#[test]
fn minimisation_never_lengthens_nor_loses_the_violation() {
    for seed in 0..12 {
        let v = violation(RACY, &Options::new(Strategy::Random { seed }, 100));
        assert!(v.schedule.choices.len() <= v.found.choices.len(), "seed {seed}: {v}");
        assert!(v.preemptions <= v.found_preemptions, "seed {seed}: {v}");
        assert_eq!(v.preemptions, 1, "seed {seed}: {v}");
        let r = replay_toy(RACY, &v.schedule, false).unwrap();
        assert_eq!(r.finding.map(|f| f.kind), Some(ViolationKind::Expectation));
    }
    // With a budget of one trial (the confirmation run) nothing is minimised.
    let mut options = Options::new(Strategy::Random { seed: 0 }, 100);
    options.shrink_trials = 1;
    let v = violation(RACY, &options);
    assert_eq!(v.shrink_trials, 1);
    assert_eq!(v.schedule, v.found);
}

#[test]
fn schedules_that_do_not_fit_are_errors() {
    let v =
        violation(RACY, &Options::new(Strategy::Dfs { seed: 0, preemption_bound: Some(1) }, 1000));
    let mut bad = v.schedule.clone();
    bad.choices[4] = TaskId(9);
    let err = replay_toy(RACY, &bad, false).unwrap_err();
    assert!(
        matches!(err, ExploreError::Diverged { step: 4, expected: Some(TaskId(9)), .. }),
        "{err}"
    );
    assert!(err.to_string().contains("choice 4 names task 9, but the ready tasks are ["), "{err}");

    let mut short = v.schedule.clone();
    short.choices.truncate(5);
    let err = replay_toy(RACY, &short, false).unwrap_err();
    assert!(matches!(err, ExploreError::Diverged { step: 5, expected: None, .. }), "{err}");
    assert!(err.to_string().contains("ends after 5 choices, but the run goes on"), "{err}");

    let mut long = v.schedule.clone();
    long.choices.push(TaskId(0));
    let err = replay_toy(RACY, &long, false).unwrap_err();
    assert!(err.to_string().ends_with("but the run has ended"), "{err}");

    let smaller = LostUpdate { tasks: 2, ..RACY };
    assert!(replay_toy(smaller, &v.schedule, false).is_err());
}
