//! `_core.Machine`: a simulated machine driven one call at a time ([`Session`]), its files and
//! processes, and its observables as the kernel's text (`python/mmsim/procfs.py` turns them into
//! pandas objects) or, for pagemap, as decoded columns.
//!
//! Every entry into the kernel runs under [`Machine::guard`]: a panic (a broken invariant) becomes
//! `SimulatorBug` and marks the machine broken, since the engine refuses to run after a panic;
//! a stopped simulation becomes `SimulationStopped` and refuses further calls, though its
//! observables stay readable for a post-mortem.

use crate::args::Size;
use crate::errors::{
    Origin, config_error, panic_message, simulation_stopped, simulator_bug, sys_error,
};
use crate::process::Process;
use lab::scenario::model::MachineSpec;
use lab::scenario::parse::{parse_content, parse_fs, parse_hole};
use lab::scenario::run::{Overrides, machine_config};
use lab::session::{CallError, Session};
use mm::fs::proc::{PM_FILE, PM_MMAP_EXCLUSIVE, PM_PFN_MASK, PM_PRESENT, PM_SOFT_DIRTY, PM_SWAP};
use mm::{FileSpec, Pid, Thread};
use pyo3::exceptions::{PyProcessLookupError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use simcore::VirtAddr;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Why a machine accepts no more calls.
#[derive(Debug)]
enum Broken {
    /// A panic inside the simulator: its state is inconsistent.
    Bug(String),
    /// The simulation stopped (watchdog or event bound); the state is intact but stuck.
    Stopped(String),
}

/// A simulated machine (see `mmsim.Machine`, which wraps this class).
#[pyclass(unsendable, module = "mmsim._core")]
#[derive(Debug)]
pub(crate) struct Machine {
    session: Session,
    broken: Option<Broken>,
}

impl Machine {
    fn seed(&self) -> u64 {
        self.session.machine().config().seed
    }

    /// Runs `f` on the session, turning a panic into `SimulatorBug` and refusing a machine that
    /// already panicked.
    fn guard<T>(&mut self, py: Python<'_>, f: impl FnOnce(&mut Session) -> T) -> PyResult<T> {
        if let Some(Broken::Bug(message)) = &self.broken {
            let message = format!("the machine is unusable after a simulator bug: {message}");
            return Err(simulator_bug(py, &message, self.seed()));
        }
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.session))) {
            Ok(v) => Ok(v),
            Err(payload) => {
                let message = panic_message(&*payload);
                let err = simulator_bug(py, &message, self.seed());
                self.broken = Some(Broken::Bug(message));
                Err(err)
            }
        }
    }

    /// Runs `f` as a thread of `pid` on `cpu` until it returns (one syscall or access).
    pub(crate) fn call<T, F, Fut>(
        &mut self,
        py: Python<'_>,
        pid: Pid,
        cpu: u32,
        f: F,
    ) -> PyResult<T>
    where
        T: 'static,
        F: FnOnce(Thread) -> Fut + 'static,
        Fut: Future<Output = T> + 'static,
    {
        if let Some(Broken::Stopped(message)) = &self.broken {
            let message = format!("the machine stopped earlier: {message}");
            return Err(simulation_stopped(py, &message, self.seed()));
        }
        let cpus = self.session.machine().config().profile.cpus;
        if cpu >= cpus {
            return Err(PyValueError::new_err(format!(
                "cpu {cpu}: the machine has CPUs 0 to {}",
                cpus - 1
            )));
        }
        match self.guard(py, move |s| s.call(pid, cpu, f))? {
            Ok(v) => Ok(v),
            // The CPU was checked above: what is left is about the process (gone, or exited).
            Err(CallError::Config(message)) => Err(PyProcessLookupError::new_err(message)),
            Err(CallError::Stopped(e)) => {
                let message = e.to_string();
                let err = simulation_stopped(py, &message, self.seed());
                self.broken = Some(Broken::Stopped(message));
                Err(err)
            }
        }
    }

    /// The process `pid`, which must exist on this machine.
    fn pid(&self, pid: u32) -> PyResult<Pid> {
        let st = self.session.machine().kernel().state();
        match st.procs.get(Pid(pid)) {
            Some(_) => Ok(Pid(pid)),
            None => Err(PyProcessLookupError::new_err(format!("no process {pid} on this machine"))),
        }
    }

    pub(crate) fn process_name(&self, pid: Pid) -> String {
        self.session.machine().kernel().state().procs[pid].name.clone()
    }
}

#[pymethods]
impl Machine {
    /// A machine of profile `profile` running kernel `kernel` (default: the newest modelled),
    /// with `switches` overriding that kernel's behaviour switches by name and `sysfs` setting
    /// THP knobs by their sysfs paths at boot. `max_events` bounds the scheduling events over the
    /// machine's life (exceeding it stops the simulation).
    #[new]
    #[pyo3(signature = (profile="tiny", kernel=None, seed=0, cpus=None, memory=None, scheduler=None, switches=None, max_events=None, sysfs=None))]
    #[allow(clippy::too_many_arguments, reason = "the keyword arguments of a Python constructor")]
    fn new(
        py: Python<'_>,
        profile: &str,
        kernel: Option<&str>,
        seed: u64,
        cpus: Option<u32>,
        memory: Option<Size>,
        scheduler: Option<&str>,
        switches: Option<BTreeMap<String, String>>,
        max_events: Option<u64>,
        sysfs: Option<BTreeMap<String, String>>,
    ) -> PyResult<Machine> {
        let mut knobs = Vec::new();
        for (path, value) in sysfs.unwrap_or_default() {
            let knob = mm::huge_memory::policy::sysfs_knob(&path).ok_or_else(|| {
                config_error(py, &format!("`{path}`: not a transparent_hugepage sysfs path"))
            })?;
            knobs.push((knob.to_string(), value));
        }
        let mut spec = MachineSpec {
            profile: profile.to_string(),
            cpus,
            memory: memory.map(Size::bytes),
            seed,
            switch_overrides: switches.unwrap_or_default().into_iter().collect(),
            sysfs: knobs,
            ..MachineSpec::default()
        };
        if let Some(k) = kernel {
            spec.kernel = k.parse().map_err(|e: String| config_error(py, &e))?;
        }
        if let Some(s) = scheduler {
            spec.scheduler =
                s.parse().map_err(|e: engine::ConfigError| config_error(py, &e.to_string()))?;
        }
        let mut config = machine_config(&spec, &Overrides::default(), "<machine>")
            .map_err(|e| config_error(py, &e.message))?;
        if let Some(n) = max_events {
            config.max_events = n;
        }
        let machine = catch_unwind(|| mm::Machine::new(config))
            .map_err(|payload| simulator_bug(py, &panic_message(&*payload), seed))?
            .map_err(|e| config_error(py, &e))?;
        Ok(Machine { session: Session::from_machine(machine), broken: None })
    }

    /// The run's seed.
    #[getter(seed)]
    fn get_seed(&self) -> u64 {
        self.seed()
    }

    /// The kernel version, like `"v6.8"`.
    #[getter]
    fn kernel(&self) -> String {
        self.session.machine().config().kernel.to_string()
    }

    /// The machine profile's name.
    #[getter]
    fn profile(&self) -> String {
        self.session.machine().config().profile.name.clone()
    }

    #[getter]
    fn cpus(&self) -> u32 {
        self.session.machine().config().profile.cpus
    }

    /// Physical memory in bytes.
    #[getter]
    fn memory(&self) -> u64 {
        self.session.machine().config().profile.memory.as_u64()
    }

    /// Every behaviour switch and its value, in a stable order.
    #[getter]
    fn switches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.session.machine().config().switches.iter() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Virtual time since boot, in nanoseconds.
    #[getter]
    fn now_ns(&self) -> u64 {
        self.session.machine().handle().now().as_ns()
    }

    /// The fingerprint of the event history so far: the same seed and calls give the same digest.
    #[getter]
    fn digest(&self) -> String {
        self.session.machine().handle().digest().to_string()
    }

    /// Creates a file of `size` bytes on `fs` ("ext4" or "tmpfs") holding `content` ("zeros" or
    /// "pattern:SEED"), with unallocated `holes` given as `(offset, length)` byte ranges.
    #[pyo3(signature = (path, size, fs="ext4", content="zeros", holes=Vec::new()))]
    fn create_file(
        &mut self,
        py: Python<'_>,
        path: &str,
        size: Size,
        fs: &str,
        content: &str,
        holes: Vec<(Size, Size)>,
    ) -> PyResult<()> {
        let value = |e: String| PyValueError::new_err(e);
        let spec = FileSpec {
            size: size.bytes(),
            fs: parse_fs(fs).map_err(value)?,
            pattern: parse_content(content).map_err(value)?,
            holes: holes
                .into_iter()
                .map(|(offset, len)| parse_hole(offset.bytes(), len.bytes()))
                .collect::<Result<_, _>>()
                .map_err(value)?,
        };
        self.guard(py, |s| s.machine_mut().create_file(path, &spec))?.map_err(|e| {
            sys_error(py, e.into(), Origin { call: "create_file", pid: Pid(0), path: Some(path) })
        })?;
        Ok(())
    }

    /// A new process called `name` with an empty address space.
    fn new_process(slf: &Bound<'_, Self>, name: &str) -> PyResult<Process> {
        let py = slf.py();
        let pid = {
            let mut m = slf.try_borrow_mut()?;
            m.guard(py, |s| s.machine_mut().new_process(name))?.map_err(|e| {
                sys_error(py, e.into(), Origin { call: "new_process", pid: Pid(0), path: None })
            })?
        };
        Ok(Process::new(slf.clone().unbind(), pid))
    }

    /// `/proc/PID/smaps`.
    fn smaps_text(&mut self, py: Python<'_>, pid: u32) -> PyResult<String> {
        let pid = self.pid(pid)?;
        self.guard(py, |s| s.machine().smaps(pid))
    }

    /// `/proc/PID/smaps_rollup` (`OSError` ENOENT before v4.14).
    fn smaps_rollup_text(&mut self, py: Python<'_>, pid: u32) -> PyResult<String> {
        let pid = self.pid(pid)?;
        self.guard(py, |s| s.machine().smaps_rollup(pid))?.map_err(|e| {
            let path = format!("/proc/{}/smaps_rollup", pid.0);
            sys_error(py, e.into(), Origin { call: "open", pid, path: Some(&path) })
        })
    }

    /// `/proc/PID/maps`.
    fn maps_text(&mut self, py: Python<'_>, pid: u32) -> PyResult<String> {
        let pid = self.pid(pid)?;
        self.guard(py, |s| s.machine().maps(pid))
    }

    /// The memory lines of `/proc/PID/status`.
    fn status_text(&mut self, py: Python<'_>, pid: u32) -> PyResult<String> {
        let pid = self.pid(pid)?;
        self.guard(py, |s| s.machine().status(pid))
    }

    /// `/proc/vmstat`.
    fn vmstat_text(&mut self, py: Python<'_>) -> PyResult<String> {
        self.guard(py, |s| s.machine().vmstat_text())
    }

    /// `/proc/meminfo`.
    fn meminfo_text(&mut self, py: Python<'_>) -> PyResult<String> {
        self.guard(py, |s| s.machine().meminfo())
    }

    /// Lockdep's report: its first splat, or `clean`.
    fn lockdep_text(&mut self, py: Python<'_>) -> PyResult<String> {
        self.guard(py, |s| mm::inspect::lockdep_report(s.machine().handle()))
    }

    /// `/proc/PID/pagemap` for `pages` pages from `addr`, decoded into columns: `addr`, and per
    /// page `present`, `swapped`, `exclusive`, `soft_dirty`, `file`, `zero_page` (bools) and
    /// `pfn` (0 when not present).
    fn pagemap<'py>(
        &mut self,
        py: Python<'py>,
        pid: u32,
        addr: u64,
        pages: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let pid = self.pid(pid)?;
        let (entries, zero_pfn) = self.guard(py, |s| {
            let m = s.machine();
            (m.pagemap(pid, VirtAddr(addr), pages), m.kernel().state().zero_pfn.0)
        })?;
        let entries = entries
            .map_err(|e| sys_error(py, e.into(), Origin { call: "pagemap", pid, path: None }))?;
        let bit = |mask: u64| entries.iter().map(|e| e & mask != 0).collect::<Vec<bool>>();
        let pfn: Vec<u64> =
            entries.iter().map(|e| if e & PM_PRESENT != 0 { e & PM_PFN_MASK } else { 0 }).collect();
        let d = PyDict::new(py);
        d.set_item("addr", (0..pages).map(|i| addr + (i << 12)).collect::<Vec<u64>>())?;
        d.set_item("present", bit(PM_PRESENT))?;
        d.set_item("swapped", bit(PM_SWAP))?;
        d.set_item("exclusive", bit(PM_MMAP_EXCLUSIVE))?;
        d.set_item("soft_dirty", bit(PM_SOFT_DIRTY))?;
        d.set_item("file", bit(PM_FILE))?;
        let zero: Vec<bool> =
            entries.iter().map(|e| e & PM_PRESENT != 0 && e & PM_PFN_MASK == zero_pfn).collect();
        d.set_item("zero_page", zero)?;
        d.set_item("pfn", pfn)?;
        Ok(d)
    }

    /// The model's state at `addr` of `pid` by kernel names (`folio.refcount`, `pte.write`,
    /// ...; docs/scenarios.md lists them): a dict of every field this kernel has and that has a
    /// value there (no `folio.*` where no folio is mapped).
    fn inspect<'py>(
        &mut self,
        py: Python<'py>,
        pid: u32,
        addr: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let pid = self.pid(pid)?;
        let fields = self
            .guard(py, |s| s.machine().inspect(pid, VirtAddr(addr)))?
            .map_err(|e| sys_error(py, e.into(), Origin { call: "inspect", pid, path: None }))?;
        let d = PyDict::new(py);
        for (name, v) in fields {
            d.set_item(name, v)?;
        }
        Ok(d)
    }

    /// Runs the whole-system checkers; a broken invariant raises `SimulatorBug`.
    fn check(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.guard(py, |s| s.machine().check())? {
            Ok(()) => Ok(()),
            Err(e) => Err(simulator_bug(py, &format!("invariant broken: {e}"), self.seed())),
        }
    }

    /// Fault injection for testing the error path: runs a thread of `pid` that panics with
    /// `message`, as a broken invariant inside a mechanism would.
    fn _inject_panic(&mut self, py: Python<'_>, pid: u32, message: String) -> PyResult<()> {
        let pid = self.pid(pid)?;
        self.call(py, pid, 0, move |_t| async move { panic!("{message}") })
    }

    fn __repr__(&self) -> String {
        let c = self.session.machine().config();
        format!(
            "Machine(profile={:?}, kernel={:?}, seed={})",
            c.profile.name,
            c.kernel.to_string(),
            c.seed
        )
    }
}
