//! Swarm testing of the model (`lab::swarm`), bounded: a few hundred random valid scenarios under
//! random eras, switches, profiles, CPU counts and schedulers, with the whole-system checkers
//! after every step (and, for some, after every event); none may break an invariant, deadlock
//! or panic. `mmsim swarm --seeds N` runs the long version.

use lab::swarm::{Case, Verdict, check, generate, minimise};

/// Runs seeds `seeds`; returns `(held, skipped)` and fails on the first bug with its seed and
/// scenario.
fn swarm(seeds: std::ops::Range<u64>, every_event: bool) -> (u64, u64) {
    let (mut held, mut skipped) = (0, 0);
    for seed in seeds {
        let Some(case) = generate(seed) else {
            skipped += 1;
            continue;
        };
        match check(&case, every_event) {
            Verdict::Held => held += 1,
            Verdict::Skipped(_) => skipped += 1,
            Verdict::Bug(why) => panic!("seed {seed}: {why}\n{}", case.render()),
        }
    }
    (held, skipped)
}

#[test]
fn random_scenarios_keep_every_invariant() {
    let (held, skipped) = swarm(0..200, false);
    assert!(held >= 150, "{held} cases held, {skipped} skipped: the generator makes too few runs");
}

#[test]
fn random_scenarios_keep_every_invariant_after_every_event() {
    let (held, _) = swarm(1000..1020, true);
    assert!(held >= 10, "{held} cases held");
}

#[test]
fn a_seed_makes_the_same_scenario() {
    let render = |seed| generate(seed).map(|c| c.render());
    assert_eq!(render(7), render(7));
    assert_ne!(render(7), render(8));
}

#[test]
fn the_minimiser_keeps_only_what_the_failure_needs() {
    let case = (0..50).filter_map(generate).find(|c| c.render().contains("\"fork\"")).unwrap();
    let has_fork = |c: &Case| {
        c.steps.iter().flatten().flat_map(|(_, ops)| ops).any(|o| o.contains("\"fork\""))
    };
    let small = minimise(&case, 10_000, &mut |c| has_fork(c));
    assert!(has_fork(&small));
    assert_eq!(small.steps.len(), 1, "{}", small.render());
    assert_eq!(small.steps[0].len(), 1, "{}", small.render());
    assert_eq!(small.steps[0][0].1.len(), 1, "{}", small.render());
}
