//! The engine-level toy race the explorer must find, and the benchmark built on it.
//!
//! Each of `tasks` tasks (one per CPU) increments a shared counter `iterations` times by reading
//! it, charging a little CPU time (the window: a blocking point where another task may run), and
//! writing the value read plus one: the classic lost update (a non-atomic read-modify-write, as
//! in an unlocked `page->_refcount++`). The expectation at the end: the counter equals the number
//! of increments. With `locked`, a mutex covers each read-modify-write and no schedule loses an
//! update: the guard against false positives.
//!
//! The model mirrors each task's local state (iterations done, the value read and not yet
//! written) into the shared model, so the model fingerprint captures everything that decides the
//! future, as the exhaustive search's state cache requires.

use crate::error::ExploreError;
use crate::search::{Options, Outcome, Progress, explore};
use crate::strategy::Strategy;
use crate::trial::{Trial, TrialSetup};
use engine::SimConfig;
use simcore::{Digest, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

/// The lost-update toy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostUpdate {
    pub tasks: u32,
    pub iterations: u32,
    /// Take a mutex around each read-modify-write.
    pub locked: bool,
}

/// The shared counter and each task's local state.
#[derive(Debug)]
struct Counter {
    value: u32,
    /// Per task: increments done, and the value read but not yet written back.
    locals: Vec<(u32, Option<u32>)>,
}

impl Counter {
    fn read(&mut self, task: usize) -> u32 {
        self.locals[task].1 = Some(self.value);
        self.value
    }

    fn write(&mut self, task: usize, value: u32) {
        self.value = value;
        let local = &mut self.locals[task];
        local.0 += 1;
        local.1 = None;
    }

    fn fingerprint(&self) -> u64 {
        let mut d = Digest::new();
        d.write_u64(self.value.into());
        for &(done, read) in &self.locals {
            d.write_u64(u64::from(done) << 33 | read.map_or(0, |v| 1 << 32 | u64::from(v)));
        }
        d.value()
    }
}

impl LostUpdate {
    /// The trial factory: a fresh simulation with the tasks spawned and the checks attached.
    pub fn trial(self, setup: TrialSetup) -> Result<Trial, String> {
        let sim = setup.sim(SimConfig { cpus: self.tasks, ..SimConfig::default() });
        let sim = sim.map_err(|e| format!("lost-update toy with {} tasks: {e}", self.tasks))?;
        let h = sim.handle().clone();
        let counter = Rc::new(RefCell::new(Counter {
            value: 0,
            locals: vec![(0, None); self.tasks as usize],
        }));
        let lock = self.locked.then(|| h.mutex("counter_lock"));
        for i in 0..self.tasks {
            let c = counter.clone();
            let cpu = h.cpu(i).map_err(|e| e.to_string())?;
            let iterations = self.iterations;
            h.spawn(cpu, format!("inc{i}"), move |cx| async move {
                let task = i as usize;
                for _ in 0..iterations {
                    let guard = match lock {
                        Some(m) => Some(m.lock(&cx).await),
                        None => None,
                    };
                    let v = c.borrow_mut().read(task);
                    cx.charge(SimDuration::from_ns(100)).await;
                    c.borrow_mut().write(task, v + 1);
                    drop(guard);
                    cx.charge(SimDuration::from_ns(100)).await;
                }
            });
        }
        let expected = self.tasks * self.iterations;
        let (end, fp, describe) = (counter.clone(), counter.clone(), counter);
        Ok(Trial::new(sim)
            .end_check(move || {
                let value = end.borrow().value;
                if value == expected {
                    Ok(())
                } else {
                    Err(format!("counter is {value} after {expected} increments (lost update)"))
                }
            })
            .model_fingerprint(move || fp.borrow().fingerprint())
            .describe(move || {
                let c = describe.borrow();
                let locals: Vec<String> = c
                    .locals
                    .iter()
                    .enumerate()
                    .map(|(i, (done, read))| match read {
                        Some(v) => format!("inc{i}: {done} done, read {v}"),
                        None => format!("inc{i}: {done} done"),
                    })
                    .collect();
                format!("counter = {}; {}", c.value, locals.join("; "))
            }))
    }
}

/// The benchmark body (`mmsim bench explore`): random exploration of the locked toy with three
/// tasks of two increments (it never finds a violation), until `should_stop`. The caller times
/// it and divides [`Outcome::schedules`] by the elapsed time.
pub fn bench(should_stop: &mut dyn FnMut(&Progress) -> bool) -> Result<Outcome, ExploreError> {
    let toy = LostUpdate { tasks: 3, iterations: 2, locked: true };
    let options = Options::new(Strategy::Random { seed: 0 }, u64::MAX);
    explore(&mut |setup| toy.trial(setup), &options, should_stop)
}
