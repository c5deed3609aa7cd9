//! Runs a scenario: builds the machine, runs the steps (the tasks of a step concurrently), checks
//! the expectations, and reports.

use super::ScenarioError;
use super::expect;
use super::interp::{Env, Failure, Log, Value, run_task};
use super::model::{MachineSpec, Scenario, Show};
use super::parse::parse_scenario;
use engine::SchedulerKind;
use mm::{KernelVersion, Machine, MachineConfig, Profile};
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;

/// Reads and parses a scenario file.
pub fn load(path: &str) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.into(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse_scenario(path, &text)
}

/// Command-line overrides of a scenario's machine.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub seed: Option<u64>,
    pub kernel: Option<KernelVersion>,
    pub scheduler: Option<SchedulerKind>,
    /// `switch=value`, `cost.NAME=ns`, `read_ahead_kb=N`, `fault_around_bytes=N`.
    pub sets: Vec<(String, String)>,
    /// Run the whole-system checkers after every step (slow; always at the end of each step).
    pub check_every_step: bool,
    pub show: Vec<Show>,
}

/// The outcome of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub kernel: String,
    pub profile: String,
    pub seed: u64,
    pub switches: Vec<(String, String)>,
    pub steps: usize,
    /// Operations run (each checked against its expectation).
    pub operations: usize,
    /// Expectations on observables checked.
    pub expectations: usize,
    pub failures: Vec<Failure>,
    /// A watchdog or event-bound stop, if the run could not finish.
    pub stopped: Option<String>,
    pub virtual_time_ns: u64,
    pub events: u64,
    pub digest: String,
    /// `(title, text)` of each observable shown.
    pub shown: Vec<(String, String)>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.stopped.is_none()
    }
}

/// The machine a `[machine]` section asks for, with the overrides applied; `file` names the
/// source in errors.
pub fn machine_config(
    m: &MachineSpec,
    o: &Overrides,
    file: &str,
) -> Result<MachineConfig, ScenarioError> {
    let bad = |message: String| ScenarioError { file: file.into(), line: 0, message };
    let kernel = o.kernel.unwrap_or(m.kernel);
    let profile =
        Profile::named(&m.profile).and_then(|p| p.resized(m.cpus, m.memory)).map_err(bad)?;
    let mut config = MachineConfig::new(profile, kernel);
    config.switches = m.switches(kernel).map_err(bad)?;
    config.seed = o.seed.unwrap_or(m.seed);
    config.scheduler = o.scheduler.unwrap_or(m.scheduler);
    if let Some(p) = m.ra_pages {
        config.tunables.ra_pages = p;
    }
    if let Some(p) = m.fault_around_pages {
        config.tunables.fault_around_pages = p;
    }
    for (k, v) in &m.costs {
        config.profile.costs.set(k, *v).map_err(bad)?;
    }
    for (key, value) in &o.sets {
        let number = || {
            value.parse::<u64>().map_err(|_| bad(format!("--set {key}={value}: expected a number")))
        };
        if let Some(cost) = key.strip_prefix("cost.") {
            config.profile.costs.set(cost, number()?).map_err(bad)?;
        } else if key == "read_ahead_kb" {
            config.tunables.ra_pages = number()? / 4;
        } else if key == "fault_around_bytes" {
            config.tunables.fault_around_pages = (number()? / 4096).max(1);
        } else {
            config
                .switches
                .set(key, value)
                .map_err(|e| bad(format!("--set {key}={value}: {e}")))?;
        }
    }
    config.switches.check_implemented().map_err(bad)?;
    Ok(config)
}

/// Builds the machine and its files and processes; returns it with the names bound so far.
pub fn prepare(s: &Scenario, o: &Overrides) -> Result<(Machine, Rc<RefCell<Env>>), ScenarioError> {
    let config = machine_config(&s.machine, o, &s.file)?;
    let mut m = Machine::new(config).map_err(|message| ScenarioError {
        file: s.file.clone(),
        line: 0,
        message,
    })?;
    for f in &s.files {
        m.create_file(&f.path, &f.spec).map_err(|e| ScenarioError {
            file: s.file.clone(),
            line: f.line,
            message: format!("file `{}`: {e}", f.path),
        })?;
    }
    let env = Rc::new(RefCell::new(Env::default()));
    for p in &s.processes {
        let pid = m.new_process(&p.name).map_err(|e| ScenarioError {
            file: s.file.clone(),
            line: p.line,
            message: format!("process `{}`: {e}", p.name),
        })?;
        env.borrow_mut().bind(&p.name, Value::Process(pid));
    }
    Ok((m, env))
}

/// Spawns the tasks of step `i` on `m`.
pub fn spawn_step(
    s: &Scenario,
    i: usize,
    m: &mut Machine,
    env: &Rc<RefCell<Env>>,
    log: &Rc<RefCell<Log>>,
) -> Result<(), ScenarioError> {
    for task in &s.steps[i].tasks {
        let bad =
            |message: String| ScenarioError { file: s.file.clone(), line: task.line, message };
        let pid = env.borrow().process(&task.process).map_err(bad)?;
        let (ops, env, log) = (task.ops.clone(), env.clone(), log.clone());
        m.spawn_thread(pid, task.cpu, &task.name, move |t| run_task(t, ops, env, log))
            .map_err(bad)?;
    }
    Ok(())
}

/// Runs a scenario to the end. `progress` is called often during long runs with the step and
/// virtual time, for progress bars.
pub fn run(
    s: &Scenario,
    o: &Overrides,
    progress: &mut dyn FnMut(usize, simcore::SimTime),
) -> Result<Report, ScenarioError> {
    let (mut m, env) = prepare(s, o)?;
    let log = Rc::new(RefCell::new(Log::default()));
    let mut stopped = None;
    let mut last = None;
    let mut expectations = 0;
    for (i, step) in s.steps.iter().enumerate() {
        spawn_step(s, i, &mut m, &env, &log)?;
        let handle = m.handle().clone();
        let mut tick = 0u64;
        let result = if o.check_every_step {
            m.run_checked()
        } else {
            m.run_observed(&mut |_| {
                tick += 1;
                if tick.is_multiple_of(1 << 16) {
                    progress(i, handle.now());
                }
                Ok(())
            })
        };
        match result {
            Ok(r) => last = Some(r),
            Err(e) => {
                stopped = Some(format!("step at line {}: {e}", step.line));
                break;
            }
        }
        if let Err(e) = m.check() {
            panic!(
                "invariant broken after the step at {}:{}: {e}\n  reproduce with seed={}",
                s.file,
                step.line,
                m.config().seed
            );
        }
        for e in &step.expects {
            expectations += 1;
            if let Err(f) = expect::check(&m, &env.borrow(), e) {
                log.borrow_mut().failures.push(f);
            }
        }
    }
    if stopped.is_none() {
        for e in &s.expects {
            expectations += 1;
            if let Err(f) = expect::check(&m, &env.borrow(), e) {
                log.borrow_mut().failures.push(f);
            }
        }
    }
    let mut shown = Vec::new();
    for show in s.show.iter().chain(&o.show) {
        let item = expect::render(&m, &env.borrow(), show).map_err(|message| ScenarioError {
            file: s.file.clone(),
            line: 0,
            message,
        })?;
        shown.push(item);
    }
    let config = m.config();
    let (failures, operations) = {
        let l = log.borrow();
        (l.failures.clone(), l.ops)
    };
    Ok(Report {
        scenario: s.file.clone(),
        kernel: config.kernel.to_string(),
        profile: config.profile.name.to_string(),
        seed: config.seed,
        switches: config
            .switches
            .iter()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        steps: s.steps.len(),
        operations,
        expectations,
        failures,
        stopped,
        virtual_time_ns: last.map_or(0, |r| r.now.as_ns()),
        events: last.map_or(0, |r| r.events),
        digest: last.map_or_else(String::new, |r| r.digest.to_string()),
        shown,
    })
}
