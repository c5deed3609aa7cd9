//! Swarm testing of the model (TigerBeetle's VOPR; Groce et al., "Swarm testing", ISSTA 2012):
//! a seed makes a random *valid* scenario file, run with every whole-system checker after every
//! scheduling event. A checker failure, a deadlock or a panic is a bug in the model, reported
//! with the seed and a minimised scenario file that reproduces it; an operation failing with an
//! errno or a signal is not (a random scenario does not know what each operation will meet).
//!
//! Each seed first draws a *swarm configuration*: the kernel era, switches borrowed from another
//! era (a combination the era table refuses is skipped), profile, CPU count, memory (small, for
//! reclaim pressure), swap, a memory cgroup with a low `memory.max`, the scheduler, and which
//! operations are enabled at all, so that leaving some out lets the others go deeper. Then it
//! draws files, processes and steps of concurrent tasks whose operations are drawn from
//! [`OPS`], each entry one operation: a new operation (THP madvise, a hugetlb mapping) is one
//! more entry there. The scenario is built as TOML text and read by the scenario parser, so a
//! case is exactly the file that is written out.

use crate::budget::HostBudget;
use crate::scenario::parse::parse_scenario;
use crate::scenario::run::{INVARIANTS_HOLD, Overrides, run};
use mm::{KernelVersion, Profile, Switches};
use simcore::prng::{Prng, Ratio};
use std::fmt::Write as _;

/// Scheduling events a swarm case may take: it is refused (skipped) past that.
const EVENTS: u64 = 2_000_000;

/// The eras a case may run, one per boundary of the era table and the default.
const KERNELS: [KernelVersion; 9] = [
    KernelVersion::new(4, 13),
    KernelVersion::new(4, 14),
    KernelVersion::new(5, 7),
    KernelVersion::new(5, 8),
    KernelVersion::new(5, 16),
    KernelVersion::new(5, 19),
    KernelVersion::new(6, 1),
    KernelVersion::new(6, 5),
    KernelVersion::DEFAULT,
];

/// A generated scenario: its header (machine, files, cgroups, processes) and its steps, each a
/// list of tasks `(process, operations)`; every operation is one line of TOML.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub header: String,
    pub steps: Vec<Vec<(String, Vec<String>)>>,
}

impl Case {
    /// The scenario file.
    pub fn render(&self) -> String {
        let mut out = self.header.clone();
        for step in &self.steps {
            out.push_str("\n[[step]]\n");
            for (process, ops) in step {
                let _ = write!(out, "[[step.task]]\nprocess = \"{process}\"\nops = [\n");
                for op in ops {
                    let _ = writeln!(out, "  {op},");
                }
                out.push_str("]\n");
            }
        }
        out
    }
}

/// What one case showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every checker held (operations may have failed).
    Held,
    /// The configuration drawn is refused (an unmodelled switch combination, over a budget).
    Skipped(String),
    /// A model bug: a checker failure, deadlock or panic.
    Bug(String),
}

/// The names a task may use: those bound by earlier steps and by its own earlier operations
/// (the parser's rule: a concurrent task's bindings are not visible).
#[derive(Clone, Debug, Default)]
struct Bound {
    /// Mappings: owning process, name and length in pages.
    maps: Vec<(String, String, u64)>,
    /// File descriptors: owning process and name.
    fds: Vec<(String, String)>,
    pins: Vec<String>,
    processes: Vec<String>,
}

impl Bound {
    /// Adds what `other` bound that `self` has not.
    fn merge(&mut self, other: Bound) {
        fn add<T: PartialEq>(to: &mut Vec<T>, from: Vec<T>) {
            for x in from {
                if !to.contains(&x) {
                    to.push(x);
                }
            }
        }
        add(&mut self.maps, other.maps);
        add(&mut self.fds, other.fds);
        add(&mut self.pins, other.pins);
        add(&mut self.processes, other.processes);
    }
}

/// The generator's state.
struct Gen {
    rng: Prng,
    enabled: Vec<usize>,
    bound: Bound,
    /// The process of the task being drawn.
    current: String,
    /// Files: path and size in pages.
    files: Vec<(String, u64)>,
    cgroup: bool,
    swap: bool,
    next: u32,
}

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n.max(1))
    }

    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.rng.chance(Ratio { num, den })
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() { None } else { items.get(self.below(items.len() as u64) as usize) }
    }

    fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// A mapping of the current process: name and length in pages.
    fn map(&mut self) -> Option<(String, u64)> {
        let mine: Vec<(String, u64)> = (self.bound.maps.iter())
            .filter(|(owner, _, _)| *owner == self.current)
            .map(|(_, name, pages)| (name.clone(), *pages))
            .collect();
        self.pick(&mine).cloned()
    }

    /// A file descriptor of the current process.
    fn fd(&mut self) -> Option<String> {
        let mine: Vec<String> = (self.bound.fds.iter())
            .filter(|(owner, _)| *owner == self.current)
            .map(|(_, name)| name.clone())
            .collect();
        self.pick(&mine).cloned()
    }

    /// A range inside a mapping: `(address expression, length in bytes)`.
    fn range(&mut self, max_pages: u64) -> Option<(String, u64)> {
        let (name, pages) = self.map()?;
        let first = self.below(pages);
        let len = 1 + self.below((pages - first).min(max_pages));
        Some((format!("{name}+{}KiB", first * 4), len * 4096))
    }
}

type OpGen = fn(&mut Gen) -> Option<String>;

/// The operations a task may draw, by name; each returns one operation's TOML or `None` when
/// nothing it needs is bound yet.
const OPS: &[(&str, OpGen)] = &[
    ("mmap_anon", |g| {
        let pages = *g.pick(&[1, 4, 16, 64, 512])?;
        let flags =
            *g.pick(&["private|anonymous", "shared|anonymous", "private|anonymous|populate"])?;
        let name = g.name("m");
        g.bound.maps.push((g.current.clone(), name.clone(), pages));
        Some(format!(
            r#"{{ op = "mmap", len = "{}KiB", prot = "rw", flags = "{flags}", as = "{name}" }}"#,
            pages * 4
        ))
    }),
    ("mmap_hugetlb", |g| {
        let pages = 512 * (1 + g.below(2));
        let flags = *g.pick(&["private|anonymous|hugetlb", "shared|anonymous|hugetlb"])?;
        let name = g.name("m");
        g.bound.maps.push((g.current.clone(), name.clone(), pages));
        Some(format!(
            r#"{{ op = "mmap", len = "{}KiB", prot = "rw", flags = "{flags}", as = "{name}" }}"#,
            pages * 4
        ))
    }),
    ("mmap_file", |g| {
        let fd = g.fd()?;
        let pages = 1 + g.below(32);
        let (flags, prot) = *g.pick(&[("shared", "rw"), ("private", "rw"), ("shared", "r")])?;
        let name = g.name("m");
        g.bound.maps.push((g.current.clone(), name.clone(), pages));
        Some(format!(
            r#"{{ op = "mmap", len = "{}KiB", prot = "{prot}", flags = "{flags}", fd = "{fd}", offset = 0, as = "{name}" }}"#,
            pages * 4
        ))
    }),
    ("open", |g| {
        let (path, _) = g.pick(&g.files.clone())?.clone();
        let flags = *g.pick(&["rdwr", "rdonly", "rdwr|direct"])?;
        let name = g.name("f");
        g.bound.fds.push((g.current.clone(), name.clone()));
        Some(format!(r#"{{ op = "open", path = "{path}", flags = "{flags}", as = "{name}" }}"#))
    }),
    ("touch", |g| {
        let (addr, len) = g.range(512)?;
        let access = *g.pick(&["read", "write"])?;
        Some(format!(r#"{{ op = "touch", addr = "{addr}", len = {len}, access = "{access}" }}"#))
    }),
    ("write_bytes", |g| {
        let (addr, len) = g.range(4)?;
        let fill = g.below(256);
        Some(format!(r#"{{ op = "write_bytes", addr = "{addr}", fill = {fill}, len = {len} }}"#))
    }),
    ("proc_mem_write", |g| {
        let (addr, len) = g.range(2)?;
        let fill = g.below(256);
        Some(format!(r#"{{ op = "proc_mem_write", addr = "{addr}", fill = {fill}, len = {len} }}"#))
    }),
    ("read_bytes", |g| {
        let (addr, len) = g.range(2)?;
        Some(format!(r#"{{ op = "read_bytes", addr = "{addr}", len = {len} }}"#))
    }),
    ("increment", |g| {
        let (addr, _) = g.range(1)?;
        Some(format!(r#"{{ op = "increment", addr = "{addr}" }}"#))
    }),
    ("munmap", |g| {
        let (addr, len) = g.range(64)?;
        Some(format!(r#"{{ op = "munmap", addr = "{addr}", len = {len} }}"#))
    }),
    ("mprotect", |g| {
        let (addr, len) = g.range(64)?;
        let prot = *g.pick(&["r", "rw", "none"])?;
        Some(format!(r#"{{ op = "mprotect", addr = "{addr}", len = {len}, prot = "{prot}" }}"#))
    }),
    ("madvise", |g| {
        let (addr, len) = g.range(64)?;
        let advice = *g.pick(&[
            "dontneed",
            "cold",
            "pageout",
            "sequential",
            "random",
            "normal",
            "dontfork",
            "wipeonfork",
            "populate_read",
            "populate_write",
            "free",
            "mergeable",
            "unmergeable",
        ])?;
        Some(format!(r#"{{ op = "madvise", addr = "{addr}", len = {len}, advice = "{advice}" }}"#))
    }),
    ("mlock", |g| {
        let (addr, len) = g.range(64)?;
        let op = *g.pick(&["mlock", "munlock", "mlock2"])?;
        let flags = if op == "mlock2" { r#", flags = "onfault""# } else { "" };
        Some(format!(r#"{{ op = "{op}", addr = "{addr}", len = {len}{flags} }}"#))
    }),
    ("mlockall", |g| {
        let flags = *g.pick(&["current", "current|future", "current|onfault", ""])?;
        if flags.is_empty() {
            return Some(r#"{ op = "munlockall" }"#.to_string());
        }
        Some(format!(r#"{{ op = "mlockall", flags = "{flags}" }}"#))
    }),
    ("mremap", |g| {
        let (addr, len) = g.range(64)?;
        let new_len = 4096 * (1 + g.below(32));
        let flags = *g.pick(&["none", "maymove", "maymove|dontunmap"])?;
        let new_len = if flags.contains("dontunmap") { len } else { new_len };
        let name = g.name("m");
        g.bound.maps.push((g.current.clone(), name.clone(), new_len / 4096));
        Some(format!(
            r#"{{ op = "mremap", addr = "{addr}", old_len = {len}, new_len = {new_len}, flags = "{flags}", as = "{name}" }}"#
        ))
    }),
    ("fork", |g| {
        let name = g.name("c");
        g.bound.processes.push(name.clone());
        // The child has the parent's mappings and descriptors, by the same names.
        let b = &mut g.bound;
        let maps = b.maps.iter().filter(|(o, _, _)| *o == g.current);
        let maps: Vec<_> = maps.map(|(_, m, p)| (name.clone(), m.clone(), *p)).collect();
        let fds = b.fds.iter().filter(|(o, _)| *o == g.current);
        let fds: Vec<_> = fds.map(|(_, f)| (name.clone(), f.clone())).collect();
        b.maps.extend(maps);
        b.fds.extend(fds);
        Some(format!(r#"{{ op = "fork", as = "{name}" }}"#))
    }),
    ("pin", |g| {
        let (addr, len) = g.range(8)?;
        let kind = *g.pick(&["pin", "get"])?;
        let (longterm, write) = (g.chance(1, 2), g.chance(1, 2));
        let name = g.name("p");
        g.bound.pins.push(name.clone());
        Some(format!(
            r#"{{ op = "pin", addr = "{addr}", len = {len}, kind = "{kind}", longterm = {longterm}, write = {write}, as = "{name}" }}"#
        ))
    }),
    ("unpin", |g| {
        let pin = g.pick(&g.bound.pins.clone())?.clone();
        Some(format!(r#"{{ op = "unpin", pin = "{pin}" }}"#))
    }),
    ("truncate", |g| {
        let (path, pages) = g.pick(&g.files.clone())?.clone();
        let size = g.below(pages * 4096 + 1);
        Some(format!(r#"{{ op = "truncate", path = "{path}", size = {size} }}"#))
    }),
    ("write", |g| {
        let fd = g.fd()?;
        let (offset, len) = (g.below(64) * 4096, 1 + g.below(16384));
        Some(format!(
            r#"{{ op = "write", fd = "{fd}", fill = 7, len = {len}, offset = {offset} }}"#
        ))
    }),
    ("read", |g| {
        let fd = g.fd()?;
        let (offset, len) = (g.below(64) * 4096, 1 + g.below(65536));
        Some(format!(r#"{{ op = "read", fd = "{fd}", len = {len}, offset = {offset} }}"#))
    }),
    ("punch_hole", |g| {
        let fd = g.fd()?;
        let (offset, len) = (g.below(32) * 4096, 1 + g.below(65536));
        Some(format!(
            r#"{{ op = "fallocate", fd = "{fd}", mode = "punch_hole", offset = {offset}, len = {len} }}"#
        ))
    }),
    ("fadvise", |g| {
        let fd = g.fd()?;
        let advice = *g.pick(&["dontneed", "noreuse", "willneed", "normal"])?;
        Some(format!(r#"{{ op = "fadvise", fd = "{fd}", advice = "{advice}" }}"#))
    }),
    ("clear_refs", |g| {
        let process = g.pick(&g.bound.processes.clone())?.clone();
        let value = 1 + g.below(5);
        Some(format!(r#"{{ op = "clear_refs", process = "{process}", value = {value} }}"#))
    }),
    ("memory_reclaim", |g| {
        if !g.cgroup {
            return None;
        }
        let kib = 64 << g.below(5);
        Some(format!(r#"{{ op = "memory_reclaim", cgroup = "/box", amount = "{kib}KiB" }}"#))
    }),
    ("pageout", |g| {
        if !g.swap {
            return None;
        }
        let (addr, len) = g.range(512)?;
        Some(format!(r#"{{ op = "madvise", addr = "{addr}", len = {len}, advice = "pageout" }}"#))
    }),
    ("sleep", |g| Some(format!(r#"{{ op = "sleep", duration = "{}us" }}"#, 1 + g.below(100)))),
    ("ksm", |g| {
        let (knob, value) =
            *g.pick(&[("run", "1"), ("run", "2"), ("run", "0"), ("pages_to_scan", "1000")])?;
        Some(format!(
            r#"{{ op = "sysfs_write", path = "/sys/kernel/mm/ksm/{knob}", value = "{value}" }}"#
        ))
    }),
];

/// The `[machine]` section of a case; `None` when the era table refuses the switches drawn.
fn machine(g: &mut Gen) -> Option<String> {
    let kernel = *g.pick(&KERNELS)?;
    let profile = *g.pick(Profile::NAMES)?;
    let (cpus, memory) = (1 + g.below(4), 16u64 << g.below(3));
    let scheduler = *g.pick(&["time-ordered", "random", "pct", "pct:3"])?;
    g.swap = g.chance(1, 2);
    let mut out = format!(
        "[machine]\nprofile = \"{profile}\"\ncpus = {cpus}\nmemory = \"{memory}MiB\"\nkernel = \"{kernel}\"\n\
         seed = {}\nscheduler = \"{scheduler}\"\n",
        g.below(1000)
    );
    if g.swap {
        let _ = writeln!(out, "swap = \"{}MiB\"", 8 << g.below(3));
    }
    if g.chance(1, 2) {
        let _ = write!(out, "\n[machine.tunables]\nnr_hugepages = {}\n", g.below(4));
    }
    let mut switches = Switches::for_kernel(kernel);
    let mut borrowed = std::collections::BTreeMap::new();
    for _ in 0..g.below(3) {
        let other = Switches::for_kernel(*g.pick(&KERNELS)?).iter();
        let (key, value) = *g.pick(&other)?;
        switches.set(key, value).ok()?;
        borrowed.insert(key, value);
    }
    switches.check_implemented(kernel).ok()?;
    if !borrowed.is_empty() {
        out.push_str("\n[machine.switches]\n");
        for (key, value) in borrowed {
            let _ = writeln!(out, "{key} = \"{value}\"");
        }
    }
    Some(out)
}

/// The files, cgroup and processes of a case.
fn world(g: &mut Gen, out: &mut String) {
    for i in 0..1 + g.below(3) {
        let pages = 1 + g.below(256);
        let fs = *g.pick(&["ext4", "tmpfs"]).expect("not empty");
        let path = format!("/data/f{i}");
        let _ = write!(
            out,
            "\n[[file]]\npath = \"{path}\"\nsize = \"{}KiB\"\nfs = \"{fs}\"\ncontent = \"pattern:{i}\"\n",
            pages * 4
        );
        g.files.push((path, pages));
    }
    g.cgroup = g.chance(1, 2);
    if g.cgroup {
        let _ = write!(out, "\n[[cgroup]]\npath = \"/box\"\nmax = \"{}KiB\"\n", 256 << g.below(4));
    }
    for i in 0..1 + g.below(2) {
        let name = format!("p{i}");
        let cgroup = if g.cgroup && g.chance(1, 2) { "cgroup = \"/box\"\n" } else { "" };
        let _ = write!(out, "\n[[process]]\nname = \"{name}\"\n{cgroup}");
        g.bound.processes.push(name);
    }
}

/// The case of `seed`; `None` when the configuration it draws is one the era table refuses.
pub fn generate(seed: u64) -> Option<Case> {
    let mut g = Gen {
        rng: Prng::from_seed(seed).stream("swarm"),
        enabled: Vec::new(),
        bound: Bound::default(),
        current: String::new(),
        files: Vec::new(),
        cgroup: false,
        swap: false,
        next: 0,
    };
    let mut header = format!(
        "# swarm case of seed {seed} (`mmsim swarm --seeds 1 --start {seed}`; a minimised case \
         runs with `mmsim run FILE --keep-going`)\n"
    );
    header.push_str(&machine(&mut g)?);
    world(&mut g, &mut header);
    // Always able to map something; each other operation is enabled with probability 3/4.
    g.enabled = (0..OPS.len()).filter(|&i| i == 0 || g.chance(3, 4)).collect();
    let mut steps = Vec::new();
    for _ in 0..2 + g.below(9) {
        // A task runs in a process that exists when its step starts (a fork of this step binds
        // a child for the next).
        let before = g.bound.clone();
        let mut after = before.clone();
        let mut tasks: Vec<(String, Vec<String>)> = Vec::new();
        for _ in 0..1 + g.below(3) {
            g.bound = before.clone();
            let process = g.pick(&before.processes).expect("one process at least").clone();
            g.current = process.clone();
            let ops: Vec<String> = (0..1 + g.below(24)).filter_map(|_| draw(&mut g)).collect();
            if !ops.is_empty() && tasks.iter().all(|(p, _)| *p != process) {
                tasks.push((process, ops));
                after.merge(std::mem::take(&mut g.bound));
            }
        }
        g.bound = after;
        if !tasks.is_empty() {
            steps.push(tasks);
        }
    }
    Some(Case { seed, header, steps })
}

/// One enabled operation (tries a few when the first needs something not bound yet).
fn draw(g: &mut Gen) -> Option<String> {
    for _ in 0..4 {
        let i = *g.pick(&g.enabled.clone())?;
        if let Some(op) = (OPS[i].1)(g) {
            return Some(op);
        }
    }
    None
}

/// Runs `case`; the whole-system checkers run after every step, and with `every_event` after
/// every scheduling event too (slower, and finds a broken invariant where it happens).
pub fn check(case: &Case, every_event: bool) -> Verdict {
    check_text(&format!("swarm-{}.toml", case.seed), &case.render(), every_event)
}

/// Runs the scenario `text` (named `file`) as [`check`] runs a case: a minimised case written
/// out, read back.
pub fn check_text(file: &str, text: &str, every_event: bool) -> Verdict {
    let scenario = match parse_scenario(file, text) {
        Ok(s) => s,
        Err(e) => return Verdict::Bug(format!("the generated scenario does not parse: {e}")),
    };
    let o = Overrides {
        check_every_step: every_event,
        host_budget: Some(HostBudget { bytes: simcore::Bytes::mib(512) }),
        max_events: Some(EVENTS),
        keep_going: true,
        ..Overrides::default()
    };
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&scenario, &o, &mut |_| {})));
    match outcome {
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Verdict::Bug(format!("panic: {msg}"))
        }
        Ok(Err(e)) => Verdict::Skipped(e.to_string()),
        Ok(Ok(r)) => {
            let broken = r.failures.iter().find(|f| f.expected == INVARIANTS_HOLD);
            match (broken, r.stopped, r.refused) {
                (Some(f), _, _) => {
                    Verdict::Bug(format!("after the step of line {}: {}", f.line, f.observed))
                }
                (None, Some(why), _) => Verdict::Bug(why),
                (None, None, Some(why)) => Verdict::Skipped(why),
                (None, None, None) => Verdict::Held,
            }
        }
    }
}

/// A bug's message without its time, counts and addresses (its first line, after the engine's
/// `check failed at T after N events:`), which a smaller case must still show to count as the
/// same bug.
fn kind(bug: &str) -> String {
    let line = bug.lines().next().unwrap_or_default();
    let line = match line.strip_prefix("check failed at ").or(line.strip_prefix("after the step")) {
        Some(rest) => rest.split_once(": ").map_or(rest, |(_, m)| m),
        None => line,
    };
    line.chars().filter(|c| !c.is_ascii_digit()).take(60).collect()
}

/// Whether `case` still shows `bug` (the same message but for numbers).
pub fn shows(case: &Case, bug: &str, every_event: bool) -> bool {
    matches!(check(case, every_event), Verdict::Bug(b) if kind(&b) == kind(bug))
}

/// A smaller case for which `still_fails` holds: drops steps, then tasks, then operations, one
/// at a time, keeping each removal after which it holds (at most `tries` runs).
pub fn minimise(case: &Case, tries: usize, still_fails: &mut dyn FnMut(&Case) -> bool) -> Case {
    let mut best = case.clone();
    let mut runs = 0;
    let mut shrunk = true;
    while shrunk && runs < tries {
        shrunk = false;
        for cand in smaller(&best) {
            runs += 1;
            if runs > tries {
                break;
            }
            if still_fails(&cand) {
                best = cand;
                shrunk = true;
                break;
            }
        }
    }
    best
}

/// Every case with one step, one task, or a run of operations of a task fewer than `c`,
/// largest removals first (delta debugging's halves, quarters, ... down to one operation).
fn smaller(c: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    for s in 0..c.steps.len() {
        let mut d = c.clone();
        d.steps.remove(s);
        out.push(d);
    }
    for s in 0..c.steps.len() {
        for t in 0..c.steps[s].len() {
            let mut d = c.clone();
            d.steps[s].remove(t);
            out.push(d);
        }
    }
    let longest = c.steps.iter().flatten().map(|(_, ops)| ops.len()).max().unwrap_or(0);
    let mut size = longest.div_ceil(2);
    while size > 0 {
        for s in 0..c.steps.len() {
            for t in 0..c.steps[s].len() {
                let n = c.steps[s][t].1.len();
                for start in (0..n).step_by(size).filter(|_| size < n) {
                    let mut d = c.clone();
                    d.steps[s][t].1.drain(start..(start + size).min(n));
                    out.push(d);
                }
            }
        }
        size /= 2;
    }
    out.retain(|d| d.steps.iter().all(|s| !s.is_empty()));
    out
}
