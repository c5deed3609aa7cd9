//! The controller of a native run: it makes the host into the scenario's machine
//! (`setup.rs`), forks an agent per declared process (`agent.rs`), sends each step's tasks to
//! their agents at once and waits for all of them before the step's expectations are read from
//! the host (`observe.rs`), as mmsim's driver joins a step's tasks; then it stops the agents and
//! restores the host.
//!
//! The order is the scenario's: steps one after another, a step's tasks concurrently (real
//! processes; flags are futex words in a page the agents share), each task's operations in
//! order. A run is bounded by a wall-clock limit (a daemon that never comes, a `wait` never
//! raised) and stops on SIGINT or SIGTERM; either way the host is restored.

use crate::agent::{self, Bound, FromAgent, Plan, TaskReport, ToAgent};
use crate::observe::{self, Baseline, Class, Observer, ProcInfo};
use crate::setup::{HostSetup, restore_leftovers};
use crate::support::{self, Refusal, refuse};
use crate::sys;
use lab::scenario::interp::{Failure, Names, Reading};
use lab::scenario::model::{Expect, Observable, OpKind, Scenario, Until};
use lab::scenario::run::{Overrides, machine_config};
use mm::{KernelVersion, MachineConfig, Switches};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How a native run is bounded.
#[derive(Clone, Debug)]
pub struct NativeOptions {
    /// Host memory the run may use (the run's memory cgroup limit); half the host's by default.
    pub host_budget: Option<u64>,
    /// Wall-clock time the run may take.
    pub timeout: Duration,
    /// Where the model placed each `mmap` without an address, by line (`agent::Plan::placement`);
    /// empty: the kernel places them.
    pub placement: BTreeMap<usize, u64>,
    /// Swap to a RAM disk (`brd`, the model's swap device) of the machine's swap size, loaded
    /// for the run from this module file and unloaded after it (the guest's), so the device
    /// and `SwapTotal` are the model's.
    pub swap_module: Option<String>,
    /// A directory on an ext4 file system mounted with `dax` on persistent memory (the
    /// guest's), for the scenario's DAX files.
    pub dax_dir: Option<String>,
}

impl Default for NativeOptions {
    fn default() -> Self {
        NativeOptions {
            host_budget: None,
            timeout: Duration::from_secs(120),
            placement: BTreeMap::new(),
            swap_module: None,
            dax_dir: None,
        }
    }
}

/// A reading of the host, with how it compares with the model's.
#[derive(Clone, Debug, Serialize)]
pub struct HostReading {
    #[serde(flatten)]
    pub reading: Reading,
    pub class: Class,
}

/// What a native run found.
#[derive(Clone, Debug, Serialize)]
pub struct NativeReport {
    pub scenario: String,
    /// `uname -r`.
    pub release: String,
    /// The mmsim kernel version it stands for.
    pub kernel: String,
    pub readings: Vec<HostReading>,
    pub failures: Vec<Failure>,
    pub wall_ms: u64,
}

impl NativeReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The machine's boot values of every THP knob and tunable, as the model boots them; the
/// fault-around window only when it is not the kernel's default (debugfs may refuse the file).
fn boot_values(config: &MachineConfig, ra_path: Option<String>) -> Vec<(String, String)> {
    let t = &config.tunables;
    let mut v: Vec<(String, String)> = mm::huge_memory::policy::all_knobs()
        .filter_map(|k| {
            let text = t.thp.show(k, config.kernel)?;
            let chosen = text
                .split_whitespace()
                .find_map(|w| w.strip_prefix('[')?.strip_suffix(']').map(str::to_string))
                .unwrap_or(text);
            Some((format!("{}{k}", mm::huge_memory::policy::SYSFS_DIR), chosen))
        })
        .collect();
    v.push(("/proc/sys/vm/swappiness".into(), t.swappiness.to_string()));
    if std::path::Path::new(support::LRU_GEN_ENABLED).exists() {
        // Every capability on, or off: Debian's 6.12 turns it on at boot, 6.1 leaves it off.
        let mglru = config.switches.lru == mm::era::Lru::Mglru;
        v.push((support::LRU_GEN_ENABLED.into(), if mglru { "0x0007" } else { "0x0000" }.into()));
    }
    if t.fault_around_pages != 16 {
        v.push((FAULT_AROUND.into(), (t.fault_around_pages * 4096).to_string()));
    }
    if let Some(p) = ra_path {
        v.push((p, (t.ra_pages * 4).to_string()));
    }
    for (i, dir) in ["hugepages-2048kB", "hugepages-1048576kB"].iter().enumerate() {
        let base = format!("/sys/kernel/mm/hugepages/{dir}");
        v.push((
            format!("{base}/nr_overcommit_hugepages"),
            t.nr_overcommit_hugepages[i].to_string(),
        ));
        v.push((format!("{base}/nr_hugepages"), t.nr_hugepages[i].to_string()));
    }
    v
}

const FAULT_AROUND: &str = "/sys/kernel/debug/fault_around_bytes";

/// `read_ahead_kb` of the block device holding `dir`.
fn read_ahead_path(dir: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    [format!("{base}/queue/read_ahead_kb"), format!("{base}/../queue/read_ahead_kb")]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

/// The hugetlbfs mount's `size=` and `min_size=` options.
fn hugetlbfs_options(config: &MachineConfig) -> String {
    let t = &config.tunables;
    let mut o = String::new();
    if let Some(s) = t.hugetlbfs_size {
        o.push_str(&format!(",size={s}"));
    }
    if let Some(s) = t.hugetlbfs_min_size {
        o.push_str(&format!(",min_size={s}"));
    }
    o
}

/// The scenario's flags, in a page the agents share.
struct Flags {
    names: Vec<String>,
    page: u64,
}

impl Flags {
    fn new(s: &Scenario) -> Result<Flags, Refusal> {
        let mut names: Vec<String> = s
            .all_ops()
            .filter_map(|op| match &op.kind {
                OpKind::Notify { flag } | OpKind::Wait { flag } => Some(flag.clone()),
                OpKind::Repeat { until: Until::Flag(f), .. } => Some(f.clone()),
                _ => None,
            })
            .collect();
        names.sort();
        names.dedup();
        let flags = mm::map::SHARED | mm::map::ANONYMOUS;
        let page = sys::mmap(0, 4096, mm::prot::READ | mm::prot::WRITE, flags, -1, 0)
            .or_else(|e| refuse(format!("the flags page: {e}")))?;
        names.truncate(1024);
        Ok(Flags { names, page })
    }

    /// Each flag's futex word.
    fn words(&self) -> Vec<(String, &AtomicU32)> {
        let base = self.page as *const AtomicU32;
        self.names
            .iter()
            .enumerate()
            // SAFETY-free: the page is ours, mapped shared for the whole run and 1024 words long.
            .map(|(i, n)| (n.clone(), word(base, i)))
            .collect()
    }
}

#[allow(unsafe_code)]
fn word<'a>(base: *const AtomicU32, i: usize) -> &'a AtomicU32 {
    // SAFETY: `base` is a page-aligned shared mapping of 4096 bytes that lives as long as the
    // run, and `i` < 1024, so the word is in bounds and aligned; atomics may alias.
    unsafe { &*base.add(i) }
}

/// A connected agent.
struct Conn {
    reader: BufReader<UnixStream>,
}

impl Conn {
    fn send(&mut self, msg: &ToAgent) -> Result<(), String> {
        let mut line = serde_json::to_string(msg).map_err(|e| e.to_string())?;
        line.push('\n');
        self.reader.get_mut().write_all(line.as_bytes()).map_err(|e| e.to_string())
    }

    /// The agent's next message; `None` when it went away.
    fn recv(&mut self, stop: &Stopper) -> Result<Option<FromAgent>, String> {
        let mut line = String::new();
        loop {
            stop.check()?;
            match self.reader.read_line(&mut line) {
                Ok(0) => return Ok(None),
                Ok(_) => return serde_json::from_str(&line).map(Some).map_err(|e| e.to_string()),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// The deadline and the stop signals.
struct Stopper {
    deadline: Instant,
    signalled: Arc<AtomicBool>,
}

impl Stopper {
    fn check(&self) -> Result<(), String> {
        if self.signalled.load(Ordering::Relaxed) {
            return Err("interrupted (SIGINT or SIGTERM): the host is restored".into());
        }
        if Instant::now() > self.deadline {
            return Err("the run's wall-clock limit passed (a daemon or flag never came)".into());
        }
        Ok(())
    }
}

/// Runs `s` natively on the host.
pub fn run_native(s: &Scenario, o: &NativeOptions) -> Result<NativeReport, Refusal> {
    let start = Instant::now();
    let kernel = support::host_kernel()?;
    let provided = support::Provided { swap: o.swap_module.is_some(), dax: o.dax_dir.is_some() };
    support::check(s, kernel, provided)?;
    let overrides = Overrides { kernel: Some(kernel), ..Overrides::default() };
    let config = machine_config(&s.machine, &overrides, &s.file)
        .or_else(|e| refuse(format!("the machine: {e}")))?;
    restore_leftovers();
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, signalled.clone())
            .or_else(|e| refuse(format!("signal handler: {e}")))?;
    }
    let mut setup = HostSetup::new();
    setup.dax = o.dax_dir.clone();
    prepare(&mut setup, s, &config, o)?;
    let stop = Stopper { deadline: start + o.timeout, signalled };
    let (outcome, failures, readings) = {
        let mut run = Run::start(&setup, s, (kernel, config.switches), &o.placement, &stop)?;
        let outcome = run.steps(&stop);
        run.finish();
        (outcome, run.failures, run.readings)
    };
    drop(setup);
    outcome.or_else(refuse)?;
    Ok(NativeReport {
        scenario: s.file.clone(),
        release: sys::kernel_release(),
        kernel: kernel.to_string(),
        readings: readings.into_values().collect(),
        failures,
        wall_ms: start.elapsed().as_millis() as u64,
    })
}

/// Makes the host into the scenario's machine.
fn prepare(
    setup: &mut HostSetup,
    s: &Scenario,
    c: &MachineConfig,
    o: &NativeOptions,
) -> Result<(), Refusal> {
    setup.scratch()?;
    if c.tunables.fault_around_pages != 16 && !std::path::Path::new(FAULT_AROUND).exists() {
        setup.mount("debugfs", "/sys/kernel/debug", "")?;
    }
    let half = read_host_memory() / 2;
    let budget = o.host_budget.unwrap_or(half).min(c.profile.memory.as_u64().max(64 << 20));
    let files: u64 = s.files.iter().map(|f| f.spec.size.as_u64()).sum();
    if files > o.host_budget.unwrap_or(half) {
        return refuse(format!("the scenario's files take {files} bytes, over the host budget"));
    }
    setup.knobs(&boot_values(c, read_ahead_path(&setup.scratch)))?;
    for op in s.all_ops() {
        if let OpKind::SysfsWrite { path, .. } = &op.kind
            && !expects_enoent(op, c)
        {
            setup.keep(path)?;
        }
    }
    check_pool(c)?;
    if let (Some(module), Some(size)) = (&o.swap_module, s.machine.swap) {
        setup.ram_disk_swap(module, size.as_u64())?;
    }
    setup.cgroups(s, budget)?;
    setup.files(s, &hugetlbfs_options(c))
}

/// Whether the scenario expects `op` to fail with ENOENT on this kernel: a sysfs file this
/// kernel lacks (KSM's `smart_scan` before v6.7), which there is nothing to keep and restore of.
fn expects_enoent(op: &lab::scenario::model::Op, c: &MachineConfig) -> bool {
    use lab::scenario::model::OpExpect;
    let alternative = op.expect.iter().find(|a| a.when.holds(&c.switches, c.kernel));
    alternative.is_some_and(|a| a.expect == OpExpect::Errno(mm::Errno::ENOENT))
}

fn read_host_memory() -> u64 {
    observe::read_table("/proc/meminfo").ok().and_then(|m| m.get("MemTotal").copied()).unwrap_or(0)
        * 1024
}

/// The hugetlb pool the machine boots with was granted whole.
fn check_pool(c: &MachineConfig) -> Result<(), Refusal> {
    for (i, dir) in ["hugepages-2048kB", "hugepages-1048576kB"].iter().enumerate() {
        let want = c.tunables.nr_hugepages[i];
        let path = format!("/sys/kernel/mm/hugepages/{dir}/nr_hugepages");
        let got =
            std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        if got < want {
            return refuse(format!("{path}: the host gave {got} of the {want} huge pages asked"));
        }
    }
    Ok(())
}

/// A native run in progress.
struct Run<'a> {
    s: &'a Scenario,
    kernel: KernelVersion,
    switches: Switches,
    setup: &'a HostSetup,
    listener: UnixListener,
    conns: BTreeMap<i32, Conn>,
    /// Agents that said hello before anyone asked for them.
    early: Vec<(i32, Conn)>,
    procs: BTreeMap<i32, ProcInfo>,
    names: Names,
    bound: Vec<(String, Bound)>,
    baseline: Baseline,
    /// By line and what it reads, as the model's log keeps them.
    readings: BTreeMap<(usize, String), HostReading>,
    failures: Vec<Failure>,
    host: observe::HostTraits,
    /// Each operation's class, by line.
    op_classes: BTreeMap<usize, Class>,
    flags: Flags,
    socket: String,
    placement: &'a BTreeMap<usize, u64>,
    /// The sysfs files the operations read, when the run began.
    sysfs_start: BTreeMap<String, u64>,
}

impl<'a> Run<'a> {
    fn start(
        setup: &'a HostSetup,
        s: &'a Scenario,
        (kernel, switches): (KernelVersion, Switches),
        placement: &'a BTreeMap<usize, u64>,
        stop: &Stopper,
    ) -> Result<Run<'a>, Refusal> {
        let socket = format!("{}/ctl.sock", setup.scratch);
        let read_paths: Vec<String> = s
            .all_ops()
            .filter_map(|op| match &op.kind {
                // A process's own files are not the machine's counters.
                OpKind::SysfsRead { path, field: None } if !path.starts_with("/proc/self/") => {
                    Some(path.clone())
                }
                _ => None,
            })
            .collect();
        let sysfs_start = observe::sysfs_numbers(read_paths.iter());
        let listener = UnixListener::bind(&socket).or_else(|e| refuse(format!("{socket}: {e}")))?;
        let mut run = Run {
            s,
            kernel,
            switches,
            setup,
            listener,
            conns: BTreeMap::new(),
            early: Vec::new(),
            procs: BTreeMap::new(),
            names: Names::default(),
            bound: Vec::new(),
            baseline: Baseline::default(),
            readings: BTreeMap::new(),
            failures: Vec::new(),
            host: observe::HostTraits {
                soft_dirty: support::has_soft_dirty(),
                cgroup_v1: support::cgroup_kind() == Some(support::CgroupKind::V1),
            },
            op_classes: s.all_ops().map(|op| (op.line, observe::op_class(op))).collect(),
            flags: Flags::new(s)?,
            socket,
            placement,
            sysfs_start,
        };
        for p in &s.processes {
            let pid = run.spawn(&p.name, p.cgroup.as_deref()).or_else(refuse)?;
            run.accept(pid, None, stop).or_else(refuse)?;
            run.names.bind(&p.name, Bound::Process(pid).value());
            run.bound.push((p.name.clone(), Bound::Process(pid)));
        }
        run.baseline = run.take_baseline();
        Ok(run)
    }

    /// Forks the agent of scenario process `name`.
    fn spawn(&self, name: &str, cgroup: Option<&str>) -> Result<i32, String> {
        let words = self.flags.words();
        let setup = self.setup;
        let host_path = |p: &str| setup.host_path(p);
        let procs = |_: &str| setup.procs_file(cgroup);
        let cgroup_dir = |c: &str| setup.cgroup_dir(c);
        let plan = Plan {
            scenario: self.s,
            kernel: self.kernel,
            switches: self.switches,
            host_path: &host_path,
            flags: &words,
            socket: &self.socket,
            cgroup_procs: &procs,
            cgroup_dir: &cgroup_dir,
            placement: self.placement,
            sysfs_start: &self.sysfs_start,
        };
        match sys::fork().map_err(|e| format!("fork: {e}"))? {
            0 => agent::main(&plan, name),
            pid => Ok(pid),
        }
    }

    /// Waits for agent `pid`'s hello; its baseline is its parent's when forked by the scenario.
    fn accept(&mut self, pid: i32, parent: Option<i32>, stop: &Stopper) -> Result<(), String> {
        let conn = match self.early.iter().position(|(p, _)| *p == pid) {
            Some(i) => self.early.remove(i).1,
            None => loop {
                stop.check()?;
                let (stream, _) = self.listener.accept().map_err(|e| format!("accept: {e}"))?;
                stream
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .map_err(|e| e.to_string())?;
                let mut c = Conn { reader: BufReader::new(stream) };
                match c.recv(stop)? {
                    Some(FromAgent::Hello { pid: p }) if p == pid => break c,
                    Some(FromAgent::Hello { pid: p }) => self.early.push((p, c)),
                    _ => return Err("an agent did not say hello".into()),
                }
            },
        };
        self.conns.insert(pid, conn);
        let info = match parent.and_then(|p| self.procs.get(&p)) {
            Some(p) => ProcInfo { faults: (0, 0), signals: (0, 0), ..p.clone() },
            None => own_info(pid)?,
        };
        self.procs.insert(pid, info);
        Ok(())
    }

    /// The system-wide values the scenario's noisy and change readings start from.
    fn take_baseline(&self) -> Baseline {
        let mut b = Baseline {
            vmstat: observe::read_table("/proc/vmstat").unwrap_or_default(),
            meminfo: observe::read_table("/proc/meminfo").unwrap_or_default(),
            executor_anon_kb: observe::executor_anon_kb(&self.procs),
            executor_faults: observe::executor_faults(&self.procs),
            files: BTreeMap::new(),
        };
        if self.setup.own_swap {
            // The run's own swap file is the machine's whole swap: read as it is, as the model's.
            for name in ["SwapTotal", "SwapFree"] {
                b.meminfo.remove(name);
            }
        }
        let all = self.s.steps.iter().flat_map(|st| &st.expects).chain(&self.s.expects);
        for e in all {
            match &e.what {
                Observable::Sysfs { path } => {
                    b.files.extend(observe::sysfs_numbers(std::iter::once(path)));
                }
                Observable::MemoryStat { cgroup, name } => {
                    if let Some(dir) = self.setup.cgroup_dir(cgroup)
                        && let Ok(stat) = observe::read_table(&format!("{dir}/memory.stat"))
                    {
                        let key = observe::v1_name(&stat, name).to_string();
                        let v = stat.get(&key).copied().unwrap_or(0);
                        b.files.insert(format!("{dir}/memory.stat:{key}"), v);
                    }
                }
                _ => {}
            }
        }
        b
    }

    /// Runs every step; an error is a refusal (a stop, a lost agent), not a finding.
    fn steps(&mut self, stop: &Stopper) -> Result<(), String> {
        for (si, step) in self.s.steps.iter().enumerate() {
            let mut waiting = Vec::new();
            for (ti, task) in step.tasks.iter().enumerate() {
                let pid = match self.names.process(&task.process) {
                    Ok(p) => p.0 as i32,
                    Err(e) => {
                        self.fail(task.line, "the task's process exists", e);
                        return Ok(());
                    }
                };
                let msg = ToAgent::Run { step: si, task: ti, names: self.bound.clone() };
                self.conn(pid)?.send(&msg)?;
                waiting.push(pid);
            }
            for pid in waiting {
                self.collect(pid, stop)?;
            }
            // An expectation that fails does not end a native run: every reading is taken.
            self.expectations(&step.expects);
            if self
                .failures
                .iter()
                .any(|f| step.tasks.iter().any(|t| t.ops.iter().any(|o| o.line == f.line)))
            {
                return Ok(());
            }
        }
        self.expectations(&self.s.expects);
        Ok(())
    }

    fn conn(&mut self, pid: i32) -> Result<&mut Conn, String> {
        self.conns.get_mut(&pid).ok_or_else(|| format!("agent {pid} is gone"))
    }

    /// Reads task `pid`'s report and takes in what it bound.
    fn collect(&mut self, pid: i32, stop: &Stopper) -> Result<(), String> {
        let report: TaskReport = match self.conn(pid)?.recv(stop)? {
            Some(FromAgent::Done(r)) => r,
            Some(FromAgent::Hello { .. }) => return Err("an unexpected hello".into()),
            None => return Err(format!("agent {pid} died during its task")),
        };
        if let Some(info) = self.procs.get_mut(&pid) {
            info.faults = report.faults;
            info.signals = report.signals;
        }
        for r in report.readings {
            let class = self.op_classes.get(&r.line).cloned().unwrap_or(Class::Exact);
            let key = (r.line, r.what.clone());
            self.readings.insert(key, HostReading { reading: r, class });
        }
        for (name, b) in report.bound {
            self.names.bind(&name, b.value());
            if let Bound::Process(child) = b {
                self.accept(child, Some(pid), stop)?;
            }
            self.bound.retain(|(n, _)| *n != name);
            self.bound.push((name, b));
        }
        if let Some(f) = report.failure {
            self.failures.push(f);
        }
        if report.exited {
            self.conns.remove(&pid);
            gone(pid, stop)?;
        }
        Ok(())
    }

    fn fail(&mut self, line: usize, expected: &str, observed: String) {
        self.failures.push(Failure { line, expected: expected.into(), observed });
    }

    /// Reads and judges `expects` (those whose `when` holds on the host's kernel).
    fn expectations(&mut self, expects: &[Expect]) -> bool {
        let mut ok = true;
        let (switches, kernel) = (self.switches, self.kernel);
        for e in expects.iter().filter(|e| e.when.holds(&switches, kernel)) {
            let (reading, held) = self.judge(e);
            ok &= held;
            self.readings.insert((e.line, reading.reading.what.clone()), reading);
        }
        ok
    }

    fn judge(&mut self, e: &Expect) -> (HostReading, bool) {
        let class = observe::class(&e.what, self.host);
        let setup = self.setup;
        let host_path = |p: &str| setup.host_path(p);
        let cgroup_dir = |c: &str| setup.cgroup_dir(c);
        let observer = Observer {
            names: &self.names,
            procs: &self.procs,
            baseline: &self.baseline,
            host_path: &host_path,
            cgroup_dir: &cgroup_dir,
        };
        let value = match &class {
            Class::ModelOnly(why) => Err(format!("not read on the host: {why}")),
            _ => observer.read(&e.what),
        };
        let mut judged = lab::scenario::expect::judge_value(e, value);
        if let (Class::Noisy(allowance), Some(v)) = (&class, judged.reading.value) {
            let reference = match e.cmp {
                lab::scenario::model::Comparison::Equals(x)
                | lab::scenario::model::Comparison::AtLeast(x)
                | lab::scenario::model::Comparison::AtMost(x) => x,
            };
            judged.reading.held =
                observe::holds_within(e.cmp, v, observe::slack(*allowance, reference));
            judged.failure = judged.failure.filter(|_| !judged.reading.held);
        }
        let model_only = matches!(class, Class::ModelOnly(_));
        if let Some(f) = judged.failure.filter(|_| !model_only) {
            self.failures.push(f);
        }
        let held = judged.reading.held || model_only;
        (HostReading { reading: judged.reading, class }, held)
    }

    /// Stops every agent and removes the System V segments the scenario made.
    fn finish(&mut self) {
        for c in self.conns.values_mut() {
            let _ = c.send(&ToAgent::Quit);
        }
        for (&pid, _) in self.conns.iter().chain(self.early.iter().map(|(p, c)| (p, c))) {
            sys::kill(pid, libc::SIGKILL);
            sys::wait_for(pid);
        }
        self.conns.clear();
        self.early.clear();
        for (_, b) in &self.bound {
            if let Bound::Shm(id) = b {
                let _ = sys::shm_rmid(*id);
            }
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Waits until process `pid` has exited (reaped, or a zombie whose memory is gone).
fn gone(pid: i32, stop: &Stopper) -> Result<(), String> {
    sys::wait_for(pid);
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return Ok(()),
            Ok(t) if t.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')) => {
                return Ok(());
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
        }
        stop.check()?;
    }
}

/// A freshly started agent's own state: its mappings, status and size.
fn own_info(pid: i32) -> Result<ProcInfo, String> {
    let own = observe::smaps(pid)?.iter().map(|s| s.start).collect();
    Ok(ProcInfo {
        own,
        status: observe::read_table(&format!("/proc/{pid}/status"))?,
        rollup: observe::read_table(&format!("/proc/{pid}/smaps_rollup"))?,
        vsize_rss: observe::vsize_rss(pid)?,
        faults: (0, 0),
        signals: (0, 0),
    })
}
