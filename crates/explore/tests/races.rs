//! The races the explorer must find and the false positives it must not report: the lost-update
//! toy under random, PCT and exhaustive search; the locked variant under all three; the state
//! cache cross-checked against the plain search; determinism and budgets.

use explore::{LostUpdate, Options, Outcome, Progress, Strategy, ViolationKind, bench, explore};

const RACY: LostUpdate = LostUpdate { tasks: 3, iterations: 2, locked: false };
const LOCKED: LostUpdate = LostUpdate { tasks: 3, iterations: 2, locked: true };
const SMALL_RACY: LostUpdate = LostUpdate { tasks: 2, iterations: 2, locked: false };
const SMALL_LOCKED: LostUpdate = LostUpdate { tasks: 2, iterations: 2, locked: true };

fn run_with(toy: LostUpdate, options: &Options) -> Outcome {
    explore(&mut |setup| toy.trial(setup), options, &mut |_| false).unwrap()
}

fn run(toy: LostUpdate, strategy: Strategy, max_schedules: u64) -> Outcome {
    run_with(toy, &Options::new(strategy, max_schedules))
}

fn dfs(bound: Option<u32>) -> Strategy {
    Strategy::Dfs { seed: 0, preemption_bound: bound }
}

fn assert_lost_update(out: &Outcome) {
    let v = out.violation.as_ref().expect("the lost update was not found");
    assert_eq!(v.finding.kind, ViolationKind::Expectation, "{v}");
    assert!(v.finding.message.contains("lost update"), "{v}");
    assert!(!out.exhausted);
}

#[test]
fn random_finds_the_lost_update() {
    for seed in 0..5 {
        let out = run(RACY, Strategy::Random { seed }, 100);
        assert_lost_update(&out);
        assert!(out.schedules <= 100 && out.states > 0);
    }
}

#[test]
fn pct_finds_the_lost_update() {
    for seed in 0..5 {
        let out = run(RACY, Strategy::Pct { seed, depth: 2, steps: 20 }, 100);
        assert_lost_update(&out);
    }
}

/// No schedule without a preemption loses an update; one preemption suffices, and the
/// iteratively deepened search reports it with exactly one whatever its bound.
#[test]
fn dfs_finds_it_with_the_fewest_preemptions_that_can() {
    let none = run(SMALL_RACY, dfs(Some(0)), 10_000);
    assert!(none.violation.is_none(), "{:?}", none.violation);
    assert!(none.exhausted);
    let one = run(SMALL_RACY, dfs(Some(1)), 10_000);
    assert_lost_update(&one);
    let v = one.violation.as_ref().unwrap();
    assert_eq!((v.preemptions, v.found_preemptions), (1, 1));
    let deeper = run(SMALL_RACY, dfs(Some(4)), 10_000);
    assert_eq!(deeper.violation.as_ref().unwrap().schedule.choices, v.schedule.choices);
    assert_lost_update(&run(RACY, dfs(None), 10_000));
}

#[test]
fn the_locked_variant_has_no_violation_and_dfs_exhausts_it() {
    let out = run(LOCKED, dfs(None), 100_000);
    assert!(out.violation.is_none(), "{}", out.violation.unwrap());
    assert!(out.exhausted && out.state_cache);
    assert!(out.schedules > 100 && out.states > 100, "{out:?}");
    let bounded = run(LOCKED, dfs(Some(2)), 100_000);
    assert!(bounded.violation.is_none() && bounded.exhausted);
    assert!(bounded.schedules < out.schedules);
    for strategy in [Strategy::Random { seed: 1 }, Strategy::Pct { seed: 1, depth: 3, steps: 30 }] {
        let out = run(LOCKED, strategy, 300);
        assert!(out.violation.is_none(), "{strategy}: {}", out.violation.unwrap());
        assert_eq!(out.schedules, 300);
        assert!(!out.exhausted);
    }
}

/// The cache must lose no state: with and without it the search sees the same distinct states,
/// with far fewer schedules.
#[test]
fn the_state_cache_prunes_schedules_but_no_states() {
    for (toy, bound) in [(SMALL_LOCKED, None), (SMALL_LOCKED, Some(1)), (SMALL_RACY, Some(0))] {
        let mut options = Options::new(dfs(bound), 100_000);
        let cached = run_with(toy, &options);
        options.state_cache = false;
        let plain = run_with(toy, &options);
        assert!(cached.exhausted && plain.exhausted);
        assert!(cached.state_cache && !plain.state_cache);
        assert_eq!(cached.states, plain.states, "{toy:?} {bound:?}");
        assert!(cached.schedules <= plain.schedules, "{toy:?} {bound:?}");
    }
    // A random walk never reaches a state the pruned search missed.
    let exhaustive = run(LOCKED, dfs(None), 100_000);
    let random = run(LOCKED, Strategy::Random { seed: 5 }, 3000);
    assert!(random.states <= exhaustive.states, "{random:?} vs {exhaustive:?}");
    assert!(random.states * 2 > exhaustive.states, "{random:?} vs {exhaustive:?}");
    let mut options = Options::new(dfs(None), 100_000);
    let cached = run_with(SMALL_LOCKED, &options);
    options.state_cache = false;
    let plain = run_with(SMALL_LOCKED, &options);
    assert!(cached.schedules * 10 < plain.schedules, "{cached:?} vs {plain:?}");
}

#[test]
fn the_same_seed_gives_the_same_outcome() {
    for strategy in [
        Strategy::Random { seed: 11 },
        Strategy::Pct { seed: 11, depth: 2, steps: 20 },
        dfs(Some(2)),
    ] {
        assert_eq!(run(RACY, strategy, 500), run(RACY, strategy, 500), "{strategy}");
        assert_eq!(run(LOCKED, strategy, 50), run(LOCKED, strategy, 50), "{strategy}");
    }
    let found: std::collections::BTreeSet<_> = (0..6)
        .map(|seed| run(RACY, Strategy::Random { seed }, 100).violation.unwrap().found.choices)
        .collect();
    assert!(found.len() > 1, "different seeds should find different schedules");
}

#[test]
fn the_budget_bounds_the_search() {
    let mut asked = 0;
    let out = explore(
        &mut |setup| LOCKED.trial(setup),
        &Options::new(Strategy::Random { seed: 0 }, u64::MAX),
        &mut |p: &Progress| {
            asked += 1;
            p.schedules >= 7
        },
    )
    .unwrap();
    assert_eq!((out.schedules, asked), (7, 8));
    assert!(!out.exhausted && out.violation.is_none());
    let out = run(LOCKED, dfs(None), 5);
    assert_eq!(out.schedules, 5);
    assert!(!out.exhausted);
}

/// The benchmark body runs the locked toy until told to stop.
#[test]
fn the_benchmark_counts_schedules() {
    let out = bench(&mut |p| p.schedules >= 20).unwrap();
    assert_eq!(out.schedules, 20);
    assert!(out.violation.is_none() && out.states > 0);
}
