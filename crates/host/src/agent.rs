//! An agent: one real process per scenario process, forked from the controller (and, for the
//! scenario's `fork`, from another agent), which runs the tasks it is sent as real system calls
//! and accesses in its own address space and answers with what each operation returned.
//!
//! An agent is single-threaded and keeps its own footprint out of the way of what it measures:
//! glibc's allocator stays on the heap (`sys::allocator_on_heap`), a one-page `PROT_NONE` fence
//! below the agent's own mappings keeps the scenario's first mapping from merging with one of
//! them, and its fault counts (`stat`'s `minflt`/`majflt`) are the faults taken inside the
//! operations' own system calls and accesses (`Agent::counted`), not the agent's bookkeeping.
//! A forked agent re-dirties a few pages of its stack before it serves, so the copy-on-write
//! faults its own stack takes fall outside every operation.
//!
//! The agent has the whole scenario (it is a fork of the controller); a task is sent as its step
//! and task index with the names bound so far, and comes back as readings, the names it bound,
//! the failure that ended it, its fault and signal counts.

use crate::access;
use crate::sys::{self, SysErr, SysResult};
use lab::scenario::interp::{Failure, Names, Outcome, Reading, Value, judge};
use lab::scenario::model::{Op, OpKind, Scenario, Until};
use mm::{KernelVersion, Pid, Signal, Switches, SysError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};

/// A value a name holds in a native run: host addresses, descriptors and pids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Bound {
    Addr(u64),
    Fd(i32),
    Process(i32),
    Pipe(i32, i32),
    Shm(i32),
    Frame(u64),
    /// A registered io_uring buffer: its ring's descriptor (`uring.rs`).
    Hold(i32),
}

impl Bound {
    pub(crate) fn value(self) -> Value {
        match self {
            Bound::Addr(a) => Value::Addr(simcore::VirtAddr(a)),
            Bound::Fd(fd) => Value::Fd(fd),
            Bound::Process(pid) => Value::Process(Pid(pid as u32)),
            Bound::Pipe(r, w) => Value::Pipe(r, w),
            Bound::Shm(id) => Value::Shm(id),
            Bound::Frame(pfn) => Value::Frame(pfn),
            Bound::Hold(fd) => Value::Hold(mm::types::ids::HoldId(fd as u32)),
        }
    }

    fn of(v: Value) -> Option<Bound> {
        Some(match v {
            Value::Addr(a) => Bound::Addr(a.0),
            Value::Fd(fd) => Bound::Fd(fd),
            Value::Process(p) => Bound::Process(p.0 as i32),
            Value::Pipe(r, w) => Bound::Pipe(r, w),
            Value::Shm(id) => Bound::Shm(id),
            Value::Frame(pfn) => Bound::Frame(pfn),
            Value::Hold(h) => Bound::Hold(h.0 as i32),
            Value::Layout(_) | Value::Io(_) => return None,
        })
    }
}

/// What the controller sends an agent.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ToAgent {
    /// Run task `task` of step `step`, with the names bound so far.
    Run {
        step: usize,
        task: usize,
        names: Vec<(String, Bound)>,
    },
    Quit,
}

/// What an agent sends the controller.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum FromAgent {
    /// A new agent is ready: its pid, and its parent agent's (0 for one the controller forked).
    Hello {
        pid: i32,
    },
    Done(TaskReport),
}

/// A task's outcome.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct TaskReport {
    pub readings: Vec<Reading>,
    pub failure: Option<Failure>,
    pub bound: Vec<(String, Bound)>,
    /// Minor and major faults taken inside the process's operations so far.
    pub faults: (u64, u64),
    /// SIGSEGV and SIGBUS raised by the process's accesses so far.
    pub signals: (u64, u64),
    /// The task ran `exit`: the process is gone once this is read.
    pub exited: bool,
}

/// What every agent shares, set up by the controller before the first fork.
pub(crate) struct Plan<'a> {
    pub scenario: &'a Scenario,
    pub kernel: KernelVersion,
    pub switches: Switches,
    /// A scenario path on the host.
    pub host_path: &'a dyn Fn(&str) -> String,
    /// The scenario's flags: one futex word each in a shared page, by name.
    pub flags: &'a [(String, &'a AtomicU32)],
    pub socket: &'a str,
    /// The memory cgroup each scenario process joins (its `cgroup.procs` or `tasks` file).
    pub cgroup_procs: &'a dyn Fn(&str) -> Option<String>,
    /// A scenario cgroup's directory on the host (`memory_reclaim`).
    pub cgroup_dir: &'a dyn Fn(&str) -> Option<String>,
    /// Where the model placed each `mmap` without an address, by line (`mmsim diff`): the
    /// agent maps at the same address shifted by a multiple of 1 GiB, so every alignment the
    /// kernel's decisions look at (fault-around windows, PMD and PUD ranges) is the model's.
    pub placement: &'a BTreeMap<usize, u64>,
    /// The sysfs files `sysfs_read` reads, when the run began (`observe::since`).
    pub sysfs_start: &'a BTreeMap<String, u64>,
}

impl std::fmt::Debug for Plan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan").field("scenario", &self.scenario.file).finish_non_exhaustive()
    }
}

/// How an operation ended, natively.
enum Native {
    Done(Result<Outcome, SysError>),
    /// An errno the model has no name for.
    Raw(i32),
    /// A name the operation uses holds no value (the operation binding it failed).
    Unbound(String),
    /// This process is the child of the `fork` just made.
    Child,
}

impl From<SysResult<Outcome>> for Native {
    fn from(r: SysResult<Outcome>) -> Native {
        match r {
            Ok(o) => Native::Done(Ok(o)),
            Err(SysErr::Errno(e)) => Native::Done(Err(SysError::Errno(e))),
            Err(SysErr::Raw(n)) => Native::Raw(n),
        }
    }
}

/// A running agent.
pub(crate) struct Agent<'a> {
    plan: &'a Plan<'a>,
    conn: BufReader<UnixStream>,
    names: Names,
    faults: (u64, u64),
    signals: (u64, u64),
    bound: Vec<(String, Bound)>,
    /// The shift from the model's addresses to this process's (a multiple of 1 GiB), once the
    /// first placed mapping chose it; a forked child inherits it with the address space.
    shift: Option<u64>,
    /// The agent's own mappings (`own_mappings`).
    own: Vec<(u64, u64, u32)>,
    /// The io_uring rings holding registered buffers, by descriptor (a forked child inherits
    /// them with its descriptors).
    rings: BTreeMap<i32, crate::uring::Ring>,
}

impl std::fmt::Debug for Agent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("faults", &self.faults).finish_non_exhaustive()
    }
}

/// The body of a freshly forked agent for scenario process `process`: set up, serve, exit.
pub(crate) fn main(plan: &Plan<'_>, process: &str) -> ! {
    sys::allocator_on_heap();
    access::install();
    sys::reap_children_automatically();
    sys::die_with_parent();
    let own = own_mappings();
    populate_own(&own, true);
    if let Some(procs) = (plan.cgroup_procs)(process) {
        let _ = std::fs::write(procs, std::process::id().to_string());
    }
    // The fence: the scenario's mappings go below it and never merge with the agent's own.
    let _ = sys::mmap(0, 4096, 0, mm::map::PRIVATE | mm::map::ANONYMOUS, -1, 0);
    let code = match connect(plan) {
        Ok(conn) => {
            sys::limit_descriptors_as_fresh();
            sys::run_on_first_cpu();
            let mut agent = Agent {
                plan,
                conn,
                names: Names::default(),
                faults: (0, 0),
                signals: (0, 0),
                bound: Vec::new(),
                shift: None,
                own,
                rings: BTreeMap::new(),
            };
            agent.serve()
        }
        Err(_) => 3,
    };
    sys::exit_now(code)
}

/// Connects to the controller and says hello.
fn connect(plan: &Plan<'_>) -> std::io::Result<BufReader<UnixStream>> {
    let mut s = UnixStream::connect(plan.socket)?;
    send(&mut s, &FromAgent::Hello { pid: std::process::id() as i32 })?;
    Ok(BufReader::new(s))
}

fn send(s: &mut UnixStream, msg: &FromAgent) -> std::io::Result<()> {
    let mut line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    line.push('\n');
    s.write_all(line.as_bytes())
}

/// The agent's own mappings when it starts, and how each is mapped in: a private writable one
/// written in, a read-only file one read in (none is the scenario's yet).
fn own_mappings() -> Vec<(u64, u64, u32)> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    let mut out = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(range), Some(perms)) = (f.first(), f.get(1)) else { continue };
        let path = f.get(5).copied().unwrap_or("");
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let p = perms.as_bytes();
        let advice = match (p[0] == b'r', p[1] == b'w' && p[3] == b'p', path) {
            (false, _, _) => continue,
            (_, _, p) if p.starts_with("[v") => continue,
            (true, true, _) => mm::madv::POPULATE_WRITE,
            (true, false, p) if p.starts_with('/') => mm::madv::POPULATE_READ,
            _ => continue,
        };
        out.push((a, b, advice));
    }
    out
}

/// Maps in the agent's own mappings, so that no operation faults on the executor's text or
/// data (a fork leaves a file mapping without anonymous pages unmapped in the child). After a
/// scenario's `fork` (`!writable`) only the read-only ones are read in: writing would copy.
/// Its private writable ones are also kept out of khugepaged's reach (`MADV_NOHUGEPAGE`): once
/// a scenario registers the process's mm, khugepaged would collapse the executor's own heap under
/// `enabled = always` and move `pages_collapsed`, which the model's process does not have.
fn populate_own(own: &[(u64, u64, u32)], writable: bool) {
    for &(a, b, advice) in own {
        if writable || advice == mm::madv::POPULATE_READ {
            let _ = sys::raw(libc::SYS_madvise, [a, b - a, u64::from(advice), 0, 0, 0]);
        }
        if writable && advice == mm::madv::POPULATE_WRITE {
            let nohuge = u64::from(mm::madv::NOHUGEPAGE);
            let _ = sys::raw(libc::SYS_madvise, [a, b - a, nohuge, 0, 0, 0]);
        }
    }
}

/// Dirties `STACK_PAGES` pages of the stack below this frame.
#[inline(never)]
fn dirty_stack() {
    let mut buf = [0u8; 4096 * STACK_PAGES];
    for i in (0..buf.len()).step_by(4096) {
        buf[i] = 1;
    }
    std::hint::black_box(&buf);
}

const STACK_PAGES: usize = 4;

/// How long a loop until success waits before its next iteration, natively (the model's
/// iterations take virtual time; a daemon here takes real time).
const RETRY: std::time::Duration = std::time::Duration::from_millis(10);

impl Agent<'_> {
    /// Serves tasks until told to quit or the controller goes away; the exit code.
    fn serve(&mut self) -> i32 {
        loop {
            let mut line = String::new();
            match self.conn.read_line(&mut line) {
                Ok(0) | Err(_) => return 0,
                Ok(_) => {}
            }
            let Ok(msg) = serde_json::from_str::<ToAgent>(&line) else { return 4 };
            let (step, task, names) = match msg {
                ToAgent::Quit => return 0,
                ToAgent::Run { step, task, names } => (step, task, names),
            };
            for (n, b) in names {
                self.names.bind(&n, b.value());
            }
            let report = match self.run_task(step, task) {
                Some(report) => report,
                None => continue, // a forked child: it now serves as its own agent
            };
            let exited = report.exited;
            if send(self.conn.get_mut(), &FromAgent::Done(report)).is_err() || exited {
                return 0;
            }
        }
    }

    /// Runs one task; `None` in the child of a `fork` it made, which has become an agent.
    fn run_task(&mut self, step: usize, task: usize) -> Option<TaskReport> {
        let plan = self.plan;
        let ops = &plan.scenario.steps[step].tasks[task].ops;
        let mut readings = Vec::new();
        let mut failure = None;
        let mut exited = false;
        self.bound.clear();
        for op in ops {
            let verdict = match &op.kind {
                OpKind::Repeat { body, until, max } => {
                    self.repeat(op, body, until, *max, &mut readings)?
                }
                _ => self.attempt(op, &mut readings)?,
            };
            exited |= matches!(op.kind, OpKind::Exit) && verdict.is_ok();
            if let Err(f) = verdict {
                failure = Some(f);
                break;
            }
        }
        Some(TaskReport {
            readings,
            failure,
            bound: std::mem::take(&mut self.bound),
            faults: self.faults,
            signals: self.signals,
            exited,
        })
    }

    /// Runs one operation (not a loop) and judges it; `None` in a fork's child.
    fn attempt(&mut self, op: &Op, readings: &mut Vec<Reading>) -> Option<Result<(), Failure>> {
        let result = match self.execute(op) {
            Native::Child => return None,
            Native::Raw(n) => return Some(Err(self.raw_errno(op, n, readings))),
            Native::Unbound(observed) => {
                let expected = format!("`{}` runs on the values it names", op.kind.name());
                return Some(Err(Failure { line: op.line, expected, observed }));
            }
            Native::Done(r) => r,
        };
        if let Err(SysError::Signal(s)) = &result {
            self.count_signal(*s);
        }
        let mut judged = judge(op, &self.names, &self.plan.switches, self.plan.kernel, &result);
        if matches!(crate::observe::op_class(op), crate::observe::Class::ModelOnly(_)) {
            judged.failure = None; // a number the host chooses: not the scenario's to expect
        }
        readings.push(judged.reading);
        if let (Some(name), Some(v)) = (&op.bind, lab::scenario::interp::bound_value(&result)) {
            self.names.bind(name, v);
            if let Some(b) = Bound::of(v) {
                self.bound.push((name.clone(), b));
            }
        }
        Some(judged.failure.map_or(Ok(()), Err))
    }

    /// An errno the model cannot name: a failure unless anything is accepted.
    fn raw_errno(&self, op: &Op, n: i32, readings: &mut Vec<Reading>) -> Failure {
        let observed = format!("errno {n}");
        readings.push(Reading {
            line: op.line,
            what: format!("`{}`", op.kind.name()),
            expected: "an errno the model names".into(),
            observed: observed.clone(),
            value: None,
            held: false,
            addr: None,
        });
        Failure {
            line: op.line,
            expected: format!("`{}` returns what the scenario expects", op.kind.name()),
            observed: format!("`{}` returned {observed}", op.kind.name()),
        }
    }

    fn count_signal(&mut self, s: Signal) {
        match s {
            Signal::SIGBUS => self.signals.1 += 1,
            _ => self.signals.0 += 1,
        }
    }

    /// A `repeat`, natively: the same rules as the model's (`interp.rs`), with a flag read
    /// from its futex word.
    fn repeat(
        &mut self,
        op: &Op,
        body: &[Op],
        until: &Until,
        max: u64,
        readings: &mut Vec<Reading>,
    ) -> Option<Result<(), Failure>> {
        let (mut n, mut ended) = (0, false);
        loop {
            if let Until::Flag(flag) = until {
                ended = self.flag(flag).is_some_and(|w| w.load(Ordering::Acquire) != 0);
            }
            if ended || n == max {
                break;
            }
            n += 1;
            let mut iteration = Ok(());
            for inner in body {
                iteration = self.attempt(inner, readings)?;
                if iteration.is_err() {
                    break;
                }
            }
            match (until, iteration) {
                (Until::Success, Ok(())) => ended = true,
                // In the model a daemon's progress is virtual time; here it is real time.
                (Until::Success, Err(_)) => std::thread::sleep(RETRY),
                (Until::Flag(_), Ok(())) => {}
                (_, Err(f)) => return Some(Err(f)),
                (Until::Count, Ok(())) => ended = n == max,
            }
        }
        let result = Ok(Outcome::Iterations { n, ended });
        let judged = judge(op, &self.names, &self.plan.switches, self.plan.kernel, &result);
        readings.push(judged.reading);
        Some(judged.failure.map_or(Ok(()), Err))
    }

    fn flag(&self, name: &str) -> Option<&AtomicU32> {
        self.plan.flags.iter().find(|(n, _)| n == name).map(|(_, w)| *w)
    }

    /// Runs `f`, counting the faults it takes as the process's.
    fn counted<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let before = sys::faults();
        let r = f();
        let after = sys::faults();
        self.faults.0 += after.0 - before.0;
        self.faults.1 += after.1 - before.1;
        r
    }

    /// The `fork` operation: the parent binds the child; the child becomes an agent.
    fn fork(&mut self) -> Native {
        match sys::fork() {
            Err(e) => Native::from(Err(e)),
            Ok(0) => {
                sys::die_with_parent();
                self.faults = (0, 0);
                self.signals = (0, 0);
                dirty_stack();
                access::own_page_written();
                populate_own(&self.own, false);
                match connect(self.plan) {
                    Ok(conn) => {
                        self.conn = conn;
                        Native::Child
                    }
                    Err(_) => sys::exit_now(3),
                }
            }
            Ok(pid) => {
                dirty_stack();
                access::own_page_written();
                Native::Done(Ok(Outcome::Bound(Value::Process(Pid(pid as u32)))))
            }
        }
    }

    /// Runs one operation natively.
    fn execute(&mut self, op: &Op) -> Native {
        match &op.kind {
            OpKind::Fork => self.fork(),
            OpKind::Notify { flag } => {
                if let Some(w) = self.flag(flag) {
                    w.store(1, Ordering::Release);
                    sys::futex_wake_all(w);
                }
                Native::Done(Ok(Outcome::Done))
            }
            OpKind::Wait { flag } => {
                if let Some(w) = self.flag(flag) {
                    while w.load(Ordering::Acquire) == 0 {
                        sys::futex_wait(w, 0);
                    }
                }
                Native::Done(Ok(Outcome::Done))
            }
            _ => match crate::ops::run(self, op) {
                Ok(r) => r.into(),
                Err(Stop::Signal(s)) => Native::Done(Err(SysError::Signal(s))),
                Err(Stop::Unbound(why)) => Native::Unbound(why),
            },
        }
    }

    /// Where to map `len` bytes for the `mmap` at `line`: the model's address shifted into free
    /// space below this process's mappings (`Plan::placement`), if the model placed it.
    pub(crate) fn placed(&mut self, line: usize, len: u64) -> Option<u64> {
        const SPAN: u64 = 1 << 30;
        let model = *self.plan.placement.get(&line)?;
        let shift = match self.shift {
            Some(s) => s,
            None => {
                let flags = mm::map::PRIVATE | mm::map::ANONYMOUS | mm::map::NORESERVE;
                let probe = sys::mmap(0, 2 * SPAN + len, 0, flags, -1, 0).ok()?;
                let _ = sys::munmap(probe, 2 * SPAN + len);
                let target = probe + (model.wrapping_sub(probe) & (SPAN - 1));
                *self.shift.insert(target.wrapping_sub(model))
            }
        };
        Some(model.wrapping_add(shift))
    }

    /// Writes the agent's own writable memory again (its mappings at start, its heap as it is
    /// now, its stack), outside any operation: after a soft-dirty `clear_refs` of its own
    /// process every page is write-protected, and the executor's writes would fault inside the
    /// operations that follow.
    pub(crate) fn rewrite_own(&self) {
        populate_own(&self.own, true);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let heap = maps.lines().find(|l| l.ends_with("[heap]"));
        let range = heap.and_then(|l| l.split_whitespace().next()?.split_once('-'));
        if let Some((a, b)) = range
            && let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
        {
            let _ = sys::raw(
                libc::SYS_madvise,
                [a, b - a, u64::from(mm::madv::POPULATE_WRITE), 0, 0, 0],
            );
        }
        dirty_stack();
    }

    /// The registered buffers' rings.
    pub(crate) fn rings(&mut self) -> &mut BTreeMap<i32, crate::uring::Ring> {
        &mut self.rings
    }

    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) fn plan(&self) -> &Plan<'_> {
        self.plan
    }

    /// Runs a system call or access, counting its faults. The stack below is written first, so
    /// that a page of it a soft-dirty `clear_refs` write-protected faults outside the count.
    pub(crate) fn sys<T>(&mut self, f: impl FnOnce() -> T) -> T {
        dirty_stack();
        self.counted(f)
    }
}

/// Why an operation did not return normally.
#[derive(Debug)]
pub(crate) enum Stop {
    Signal(Signal),
    Unbound(String),
}

impl From<String> for Stop {
    fn from(s: String) -> Stop {
        Stop::Unbound(s)
    }
}

impl From<Signal> for Stop {
    fn from(s: Signal) -> Stop {
        Stop::Signal(s)
    }
}
