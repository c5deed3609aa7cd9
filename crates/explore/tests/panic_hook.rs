//! While exploring, panics inside trials are caught without reaching the panic hook; other
//! panics still reach it, and the previous hook is back afterwards. The hook is process-wide, so
//! this is the only test in its binary.

use engine::SimConfig;
use explore::{Options, Strategy, Trial, TrialSetup, ViolationKind, explore, replay};
use simcore::SimDuration;
use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering};

static REPORTED: AtomicUsize = AtomicUsize::new(0);

fn panicking(setup: TrialSetup) -> Result<Trial, String> {
    let sim =
        setup.sim(SimConfig { cpus: 2, ..SimConfig::default() }).map_err(|e| e.to_string())?;
    let h = sim.handle().clone();
    for i in 0..2 {
        h.spawn(h.cpu(i).unwrap(), format!("t{i}"), move |cx| async move {
            cx.charge(SimDuration::from_ns(1)).await;
            assert!(i == 0, "task {i} broke an invariant");
        });
    }
    Ok(Trial::new(sim))
}

#[test]
fn trial_panics_are_quiet_and_the_hook_is_restored() {
    panic::set_hook(Box::new(|_| {
        REPORTED.fetch_add(1, Ordering::SeqCst);
    }));
    let options = Options::new(Strategy::Dfs { seed: 0, preemption_bound: None }, 100);
    let out = explore(&mut panicking, &options, &mut |_| false).unwrap();
    let v = out.violation.unwrap();
    assert_eq!(v.finding.kind, ViolationKind::Panic);
    assert!(v.finding.message.starts_with("task 1 broke an invariant"), "{v}");
    let r = replay(&mut panicking, &v.schedule, true).unwrap();
    assert_eq!((r.finding, r.digest), (Some(v.finding), v.digest));
    // The panicking step has no state after it.
    assert_eq!(r.steps.last().and_then(|s| s.state.clone()), None);
    assert_eq!(REPORTED.load(Ordering::SeqCst), 0, "trial panics reached the hook");
    assert!(panic::catch_unwind(|| panic!("between")).is_err());
    assert_eq!(REPORTED.load(Ordering::SeqCst), 1, "the hook was not restored");

    // A panic of the factory (outside a trial) is reported and propagates.
    let mut broken = |_: TrialSetup| -> Result<Trial, String> { panic!("factory bug") };
    let caught = panic::catch_unwind(panic::AssertUnwindSafe(|| {
        explore(&mut broken, &options, &mut |_| false)
    }));
    assert!(caught.is_err());
    assert_eq!(REPORTED.load(Ordering::SeqCst), 2);

    // After the explorations, the hook installed before them sees panics again.
    assert!(panic::catch_unwind(|| panic!("after")).is_err());
    assert_eq!(REPORTED.load(Ordering::SeqCst), 3);
    drop(panic::take_hook());
}
