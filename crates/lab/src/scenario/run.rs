//! Runs a scenario: builds the machine, then runs the whole scenario as *one* simulation — a
//! driver task starts each step's tasks, waits for them (`join`), runs the whole-system checkers
//! and the step's expectations, and goes on — so that the same run can be explored under other
//! schedulers (`explore.rs`). Reports failures, a stop (watchdog, event bound), and what to show.

use super::ScenarioError;
use super::expect;
use super::interp::{Env, Failure, Log, Reading, Value, run_task};
use super::limits::{MAX_SCENARIO_BYTES, check_tunable};
use super::model::{Comparison, MachineSpec, Observable, Scenario, Show};
use super::parse::parse_scenario;
use crate::budget::{CHECK_EVERY, DEFAULT_EVENTS, HostBudget};
use engine::{SchedulerKind, Sim};
use mm::era::CowReuse;
use mm::kernel::Kernel;
use mm::{KernelVersion, Machine, MachineConfig, Profile, spawn_user_thread};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Reads and parses a scenario file: a regular file of at most [`MAX_SCENARIO_BYTES`] in UTF-8.
pub fn load(path: &str) -> Result<Scenario, ScenarioError> {
    let text = read_text(path, MAX_SCENARIO_BYTES).map_err(|(line, message)| ScenarioError {
        file: path.into(),
        line,
        message,
    })?;
    parse_scenario(path, &text)
}

/// The text of the regular file at `path` (at most `max` bytes, in UTF-8); an error names the
/// line it is on (0 when the file cannot be read at all).
pub fn read_text(path: &str, max: u64) -> Result<String, (usize, String)> {
    let bytes = read_bounded(path, max).map_err(|e| (0, e))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at - before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
        (line, format!("not UTF-8 text (byte {column} of the line, offset {at})"))
    })
}

/// [`read_text`] with its error as `PATH:LINE: message` (or `PATH: message`).
pub fn read_text_or_say(path: &str, max: u64) -> Result<String, String> {
    read_text(path, max).map_err(|(line, m)| match line {
        0 => format!("{path}: {m}"),
        l => format!("{path}:{l}: {m}"),
    })
}

/// The bytes of the regular file at `path`, refused when it holds more than `max` (a device or
/// pipe that never ends is not a regular file).
pub fn read_bounded(path: &str, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("cannot read: not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("more than {max} bytes: an input file holds at most {max} bytes"));
    }
    Ok(bytes)
}

/// What a step's failure of the whole-system checkers says it expected (the swarm tells these
/// from an operation's failure by it).
pub const INVARIANTS_HOLD: &str = "the kernel's invariants hold after the step";

/// Command-line overrides of a scenario's machine.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub seed: Option<u64>,
    pub kernel: Option<KernelVersion>,
    pub scheduler: Option<SchedulerKind>,
    /// `switch=value`, `cost.NAME=ns`, `read_ahead_kb=N`, `fault_around_bytes=N`.
    pub sets: Vec<(String, String)>,
    /// Run the whole-system checkers after every simulation event (slow; they always run after
    /// every step of the scenario).
    pub check_every_step: bool,
    pub show: Vec<Show>,
    /// Host memory the run may use (half the host's memory when `None`).
    pub host_budget: Option<HostBudget>,
    /// Scheduling events the run may take ([`DEFAULT_EVENTS`] when `None`).
    pub max_events: Option<u64>,
    /// A task goes on after an operation fails (swarm testing; see `Log::keep_going`).
    pub keep_going: bool,
    /// A machine profile that replaces the scenario's `profile` (`--profile-file`, a profile
    /// file's machine); the scenario's `cpus`, `memory` and `costs` still apply on top of it.
    pub profile: Option<Profile>,
}

impl Overrides {
    /// The profile a machine asking for `name` gets: the override's, else the built-in `name`.
    fn profile(&self, name: &str) -> Result<Profile, String> {
        self.profile.clone().map_or_else(|| Profile::named(name), Ok)
    }
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
    /// Why the run was refused halfway (over the host budget): bad input, not a finding.
    pub refused: Option<String>,
    /// Why nothing ran: the scenario's `[requires]` excludes this kernel or these switches
    /// (`skipped: REASON`); a skip passes, as a kernel selftest's skip is no failure.
    pub skipped: Option<String>,
    pub virtual_time_ns: u64,
    pub events: u64,
    pub digest: String,
    /// `(title, text)` of each observable shown.
    pub shown: Vec<(String, String)>,
    /// `/proc/vmstat` at the end of the run, by counter name.
    pub vmstat: BTreeMap<String, u64>,
    /// What each operation returned and each expectation read, by line (`mmsim diff`).
    pub readings: Vec<Reading>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.stopped.is_none() && self.refused.is_none()
    }
}

impl Report {
    /// The report of a run that `[requires]` skips: nothing ran.
    fn skipped(s: &Scenario, config: &MachineConfig, why: String) -> Report {
        Report {
            scenario: s.file.clone(),
            kernel: config.kernel.to_string(),
            profile: config.profile.name.to_string(),
            seed: config.seed,
            switches: switch_list(config),
            steps: s.steps.len(),
            operations: 0,
            expectations: 0,
            failures: Vec::new(),
            stopped: None,
            refused: None,
            skipped: Some(why),
            virtual_time_ns: 0,
            events: 0,
            digest: String::new(),
            shown: Vec::new(),
            vmstat: BTreeMap::new(),
            readings: Vec::new(),
        }
    }
}

/// The switches of `config`, by name.
fn switch_list(config: &MachineConfig) -> Vec<(String, String)> {
    config.switches.iter().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Why a run of `s` under `config` is skipped (`[requires]` excludes it), if it is.
pub fn skip_reason(s: &Scenario, config: &MachineConfig) -> Option<String> {
    s.requires.as_ref().and_then(|r| r.skip(&config.switches, config.kernel))
}

/// The skip of a run whose machine cannot be built on its kernel (a `[machine.sysfs]` knob that
/// kernel lacks) when `[requires]` excludes that kernel anyway: the skip, not the error.
fn skipped_unbuildable(s: &Scenario, o: &Overrides) -> Option<Report> {
    let kernel = o.kernel.unwrap_or(s.machine.kernel);
    let mut config = MachineConfig::new(o.profile(&s.machine.profile).ok()?, kernel);
    config.switches = s.machine.switches(kernel).ok()?;
    skip_reason(s, &config).map(|why| Report::skipped(s, &config, why))
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
    let profile = o.profile(&m.profile).and_then(|p| p.resized(m.cpus, m.memory)).map_err(bad)?;
    let mut config = MachineConfig::new(profile, kernel);
    config.switches = m.switches(kernel).map_err(bad)?;
    config.seed = o.seed.unwrap_or(m.seed);
    config.scheduler = o.scheduler.unwrap_or(m.scheduler);
    config.max_events = o.max_events.unwrap_or(DEFAULT_EVENTS);
    if let Some(p) = m.ra_pages {
        config.tunables.ra_pages = p;
    }
    if let Some(p) = m.fault_around_pages {
        config.tunables.fault_around_pages = p;
    }
    if let Some(v) = m.swappiness {
        config.tunables.swappiness = v;
    }
    if let Some(v) = m.min_ttl_ms {
        config.tunables.lru_gen_min_ttl_ms = v;
    }
    for (i, v) in m.hugepages[..4].iter().enumerate() {
        if let Some(v) = *v {
            let pools =
                [&mut config.tunables.nr_hugepages, &mut config.tunables.nr_overcommit_hugepages];
            pools[i % 2][i / 2] = v;
        }
    }
    [config.tunables.hugetlbfs_size, config.tunables.hugetlbfs_min_size] =
        [m.hugepages[4], m.hugepages[5]];
    if let Some(swap) = m.swap {
        config.swap = swap;
    }
    if let Some(pmem) = m.pmem {
        config.pmem = pmem;
    }
    for (k, v) in &m.costs {
        config.profile.costs.set(k, *v).map_err(bad)?;
    }
    for (knob, v) in &m.sysfs {
        config.tunables.thp.set(knob, v, kernel).map_err(bad)?;
    }
    apply_sets(&mut config, &o.sets).map_err(bad)?;
    config.switches.check_implemented(config.kernel).map_err(bad)?;
    Ok(config)
}

/// Applies `mmsim run --set KEY=VALUE` settings to `config`: `cost.NAME=ns`, the tunables
/// `read_ahead_kb`, `fault_around_bytes`, `swappiness` and `lru_gen_min_ttl_ms` (each within its
/// kernel range), a THP knob by its sysfs path (`transparent_hugepage/enabled=always`), or a
/// switch. Errors name the setting.
pub fn apply_sets(config: &mut MachineConfig, sets: &[(String, String)]) -> Result<(), String> {
    for (key, value) in sets {
        let flag = |e: String| format!("--set {key}={value}: {e}");
        let number = || {
            let n = value.parse::<u64>().map_err(|_| flag("expected a number".into()))?;
            check_tunable(key, n).map_err(flag)?;
            Ok::<u64, String>(n)
        };
        if let Some(knob) = mm::huge_memory::policy::sysfs_knob(key) {
            config.tunables.thp.set(knob, value, config.kernel).map_err(flag)?;
        } else if let Some(cost) = key.strip_prefix("cost.") {
            let n = number()?;
            config.profile.costs.set(cost, n).map_err(|e| flag(with_suggestion(e, key)))?;
        } else if let Some(figure) = key.strip_prefix("cache.") {
            let n = number()?;
            config.profile.caches.set(figure, n).map_err(|e| flag(with_suggestion(e, key)))?;
        } else if key == "read_ahead_kb" {
            config.tunables.ra_pages = number()? / 4;
        } else if key == "fault_around_bytes" {
            config.tunables.fault_around_pages = (number()? / 4096).max(1);
        } else if key == "swappiness" {
            config.tunables.swappiness = number()?.min(200);
        } else if key == "lru_gen_min_ttl_ms" {
            config.tunables.lru_gen_min_ttl_ms = number()?;
        } else if mm::Switches::NAMES.contains(&key.as_str()) {
            config.switches.set(key, value).map_err(flag)?;
        } else {
            let e = format!(
                "unknown setting `{key}`: expected a switch ({}), a tunable ({}), `cost.NAME`, \
                 `cache.NAME` or a THP knob (`transparent_hugepage/enabled`, ...)",
                mm::Switches::NAMES.join(", "),
                SET_TUNABLES.join(", ")
            );
            return Err(flag(with_suggestion(e, key)));
        }
    }
    Ok(())
}

/// The `--set` tunables, beside the switches, `cost.NAME` and the THP knobs.
pub const SET_TUNABLES: [&str; 4] =
    ["read_ahead_kb", "fault_around_bytes", "swappiness", "lru_gen_min_ttl_ms"];

/// `error` about an unknown `--set` key, with the closest key `--set` takes when one is near
/// (at most two edits, or a Jaro-Winkler similarity of 0.9).
fn with_suggestion(error: String, key: &str) -> String {
    use simcore::CounterKey;
    let costs = mm::sim::cost::Cost::ALL.iter().map(|c| format!("cost.{}", c.name()));
    let caches = mm::arch::caches::SET_KEYS.iter().map(|k| format!("cache.{k}"));
    let knobs = mm::huge_memory::policy::all_knobs().map(|k| format!("transparent_hugepage/{k}"));
    let names = mm::Switches::NAMES.iter().chain(&SET_TUNABLES).map(|n| n.to_string());
    let best = names
        .chain(costs)
        .chain(caches)
        .chain(knobs)
        .map(|n| (strsim::jaro_winkler(key, &n), strsim::levenshtein(key, &n), n))
        .filter(|(jw, lev, _)| *lev <= 2 || *jw >= 0.9)
        .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    match best {
        Some((_, _, name)) => format!("{error}; did you mean `{name}`?"),
        None => error,
    }
}

/// A scenario's machine, set up and with its driver spawned, ready to run.
#[derive(Debug)]
pub struct Prepared {
    pub machine: Machine,
    pub env: Rc<RefCell<Env>>,
    pub log: Rc<RefCell<Log>>,
}

/// Builds the machine (on `sim` if given, the explorer's), its files and processes, and spawns
/// the driver that will run the steps.
pub fn prepare(
    s: &Scenario,
    config: MachineConfig,
    sim: Option<Sim>,
) -> Result<Prepared, ScenarioError> {
    let bad = |line: usize, message: String| ScenarioError { file: s.file.clone(), line, message };
    if let Some((line, why)) = unavailable_fields(s, &config) {
        return Err(bad(line, why));
    }
    let skip = expected_violations(s, &config);
    let kernel = config.kernel;
    let mut machine = match sim {
        Some(sim) => Machine::on_sim(config, sim),
        None => Machine::new(config),
    }
    .map_err(|e| bad(0, e))?;
    for f in &s.files {
        if let Some(why) = f.spec.fs.tmpfs_mount().and_then(|m| m.unmodelled(kernel)) {
            return Err(bad(f.line, format!("file `{}`: {why}", f.path)));
        }
        machine
            .create_file(&f.path, &f.spec)
            .map_err(|e| bad(f.line, format!("file `{}`: {e}", f.path)))?;
    }
    let env = Rc::new(RefCell::new(Env::new(
        machine.config().switches,
        machine.config().kernel,
        machine.config().seed,
        machine.handle().clone(),
    )));
    for c in &s.cgroups {
        let memcg = machine.create_cgroup(&c.path).map_err(|e| bad(c.line, e))?;
        machine.set_memory_max(memcg, c.max).map_err(|e| bad(c.line, e))?;
    }
    for p in &s.processes {
        let pid = machine
            .new_process(&p.name)
            .map_err(|e| bad(p.line, format!("process `{}`: {e}", p.name)))?;
        if let Some(c) = &p.cgroup {
            let memcg = machine.cgroup(c).map_err(|e| bad(p.line, e))?;
            machine.attach_cgroup(pid, memcg);
        }
        env.borrow_mut().bind(&p.name, Value::Process(pid));
    }
    let log = Rc::new(RefCell::new(Log::default()));
    let driver = Driver {
        scenario: Rc::new(s.clone()),
        kernel: machine.kernel_rc(),
        env: env.clone(),
        log: log.clone(),
        skip,
    };
    let cpu = machine.handle().cpu(0).map_err(|e| bad(0, e.to_string()))?;
    machine.handle().spawn(cpu, "scenario", move |cx| driver.run(cx));
    Ok(Prepared { machine, env, log })
}

/// The `[[schedules]]` tables that do not hold, as failures at their lines.
fn schedule_failures(s: &Scenario, config: &MachineConfig) -> Result<Vec<Failure>, ScenarioError> {
    let results = super::explore::check_schedules(s, config)?;
    let failed = results.into_iter().filter(|r| !r.holds);
    Ok(failed
        .map(|r| Failure {
            line: r.line,
            expected: format!("[[schedules]]: {}", r.declared),
            observed: r.summary,
        })
        .collect())
}

/// The expectations that apply under `config`: every step's, the scenario's, and the
/// explorations' `reach` and `never`.
fn applying<'a>(
    s: &'a Scenario,
    config: &'a MachineConfig,
) -> impl Iterator<Item = &'a super::model::Expect> + 'a {
    let explored = s.explore.iter().chain(&s.schedules);
    let reach = explored.flat_map(|x| x.reach.iter().chain(&x.never));
    let all = s.steps.iter().flat_map(|st| &st.expects).chain(&s.expects).chain(reach);
    all.filter(|e| e.when.holds(&config.switches, config.kernel))
}

/// The first inspected field or multi-gen LRU file that the chosen kernel or switches lack,
/// with its line.
fn unavailable_fields(s: &Scenario, config: &MachineConfig) -> Option<(usize, String)> {
    let mglru = mm::types::mmzone::Reclaim::of(config.switches.lru).lru_gen_enabled();
    let no_lru_gen = || "/sys/kernel/debug/lru_gen is modelled only under lru = mglru".to_string();
    let expects = applying(s, config).find_map(|e| match &e.what {
        Observable::Inspect { field, .. } => {
            mm::inspect::unavailable(field, config.kernel, &config.switches).map(|w| (e.line, w))
        }
        Observable::LruGen { .. } if !mglru => Some((e.line, no_lru_gen())),
        _ => None,
    });
    let lru_gen_write = |op: &super::model::Op| matches!(&op.kind, super::model::OpKind::SysfsWrite { path, .. } if path == mm::mglru::debugfs::LRU_GEN);
    let ops = || s.all_ops().find(|op| lru_gen_write(op)).map(|op| (op.line, no_lru_gen()));
    let has_file = config.kernel >= KernelVersion::new(6, 1);
    expects.or_else(|| if mglru || !has_file { None } else { ops() })
}

/// The invariants the scenario expects violated (`holds = false`): the step checks leave them
/// to the expectations.
fn expected_violations(s: &Scenario, config: &MachineConfig) -> Vec<String> {
    applying(s, config)
        .filter_map(|e| match (&e.what, e.cmp) {
            (Observable::Invariant { name }, Comparison::Equals(0)) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The task that runs a scenario's steps in order.
struct Driver {
    scenario: Rc<Scenario>,
    kernel: Rc<Kernel>,
    env: Rc<RefCell<Env>>,
    log: Rc<RefCell<Log>>,
    /// Invariants expected violated, which the step checks skip.
    skip: Vec<String>,
}

impl Driver {
    async fn run(self, cx: engine::Cx) {
        let rule = self.kernel.switches.cow_reuse;
        for step in &self.scenario.steps {
            let mut tasks = Vec::new();
            for task in &step.tasks {
                let pid = self.env.borrow().process(&task.process);
                let pid = match pid {
                    Ok(pid) => pid,
                    Err(e) => return self.fail(task.line, "the task's process exists", e),
                };
                let (ops, env, log) = (task.ops.clone(), self.env.clone(), self.log.clone());
                match spawn_user_thread(&cx, &self.kernel, pid, task.cpu, &task.name, move |t| {
                    run_task(t, ops, env, log)
                }) {
                    Ok(t) => tasks.push(t),
                    Err(e) => return self.fail(task.line, "the task starts", e),
                }
            }
            for t in tasks {
                cx.join(t).await;
            }
            if !self.checks_hold(step.line, rule) || !self.expectations_hold(&step.expects) {
                return;
            }
        }
        self.expectations_hold(&self.scenario.expects);
    }

    fn fail(&self, line: usize, expected: &str, observed: String) {
        self.log.borrow_mut().failures.push(Failure { line, expected: expected.into(), observed });
    }

    /// The whole-system checkers after a step; a broken invariant ends the scenario.
    fn checks_hold(&self, line: usize, rule: CowReuse) -> bool {
        let result = mm::sim::check::check_all_but(&self.kernel.state(), rule, &self.skip);
        result.map_err(|e| self.fail(line, INVARIANTS_HOLD, e)).is_ok()
    }

    fn expectations_hold(&self, expects: &[super::model::Expect]) -> bool {
        let mut ok = true;
        let (switches, kernel) = {
            let env = self.env.borrow();
            (env.switches, env.kernel)
        };
        for e in expects.iter().filter(|e| e.when.holds(&switches, kernel)) {
            self.log.borrow_mut().expectations += 1;
            let judged = expect::judge(&self.kernel.state(), &self.env.borrow(), e);
            let mut log = self.log.borrow_mut();
            log.record(judged.reading);
            if let Some(f) = judged.failure {
                log.failures.push(f);
                ok = false;
            }
        }
        ok
    }
}

/// How a scenario's run ended: why it stopped (a deadlock, a checker), why it was refused (a
/// host budget), and its report when it finished.
type Ending = (Option<String>, Option<String>, Option<engine::RunReport>);

/// Runs `machine` to the end, checking the host budget every [`CHECK_EVERY`] scheduling events
/// (with a `progress` call) and, when asked, the whole-system checkers after every step.
fn run_machine(
    machine: &mut Machine,
    o: &Overrides,
    progress: &mut dyn FnMut(simcore::SimTime),
) -> Ending {
    let handle = machine.handle().clone();
    let rule = machine.config().switches.cow_reuse;
    let budget = o.host_budget.unwrap_or_else(HostBudget::from_host);
    let (mut checked, mut refused) = (0u64, None);
    let mut steps = mm::sim::check::StepChecker::new(rule);
    let mut observe = |k: &Kernel| {
        let due = handle.events() / CHECK_EVERY;
        if due > checked {
            checked = due;
            progress(handle.now());
            budget.check(&k.state()).map_err(|e| refused.insert(e).clone())?;
        }
        if o.check_every_step { steps.check(k) } else { Ok(()) }
    };
    let result = if o.check_every_step {
        machine.run_each_step(&mut observe)
    } else {
        machine.run_observed(&mut observe)
    };
    match result {
        Ok(r) => (None, None, Some(r)),
        Err(_) if refused.is_some() => (None, refused, None),
        Err(e) => match e.over_event_budget() {
            Some(why) => (None, Some(why), None),
            None => (Some(e.to_string()), None, None),
        },
    }
}

/// Runs a scenario to the end. `progress` is called often during long runs with the virtual
/// time, for progress bars.
pub fn run(
    s: &Scenario,
    o: &Overrides,
    progress: &mut dyn FnMut(simcore::SimTime),
) -> Result<Report, ScenarioError> {
    let config = match machine_config(&s.machine, o, &s.file) {
        Ok(config) => config,
        Err(e) => return skipped_unbuildable(s, o).ok_or(e),
    };
    if let Some(why) = skip_reason(s, &config) {
        return Ok(Report::skipped(s, &config, why));
    }
    let Prepared { mut machine, env, log } = prepare(s, config, None)?;
    log.borrow_mut().keep_going = o.keep_going;
    let (stopped, refused, last) = run_machine(&mut machine, o, progress);
    let handle = machine.handle().clone();
    let mut shown = Vec::new();
    let asked = s
        .show
        .iter()
        .map(|x| (x, "the file's `show`"))
        .chain(o.show.iter().map(|x| (x, "--show/--inspect")));
    for (show, by) in asked {
        let item =
            expect::render(&machine.kernel().state(), &handle, &env.borrow(), show).map_err(
                |m| ScenarioError { file: s.file.clone(), line: 0, message: format!("{by}: {m}") },
            )?;
        shown.push(item);
    }
    let config = machine.config();
    let log = log.borrow();
    let mut failures = log.failures.clone();
    if stopped.is_none() && refused.is_none() {
        failures.extend(schedule_failures(s, config)?);
    }
    Ok(Report {
        scenario: s.file.clone(),
        kernel: config.kernel.to_string(),
        profile: config.profile.name.to_string(),
        seed: config.seed,
        switches: switch_list(config),
        steps: s.steps.len(),
        operations: log.ops,
        expectations: log.expectations,
        failures,
        stopped,
        refused,
        skipped: None,
        virtual_time_ns: handle.now().as_ns(),
        events: last.map_or(0, |r| r.events),
        digest: handle.digest().to_string(),
        shown,
        vmstat: machine
            .kernel()
            .state()
            .vmstat_snapshot()
            .iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect(),
        readings: log.readings.values().cloned().collect(),
    })
}
