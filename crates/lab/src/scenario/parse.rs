//! From the TOML tree to the typed scenario, validating everything a run would trip over:
//! unknown keys and operations, malformed sizes and flags, impossible machines, names used before
//! they are bound or bound twice, switches and costs that do not exist. Each error names the file,
//! the line, and what was expected.

use super::ScenarioError;
use super::model::*;
use super::node::{Kind, Node, parse_document};
use mm::{Errno, ExecImage, KernelVersion, OpenFlags, Profile, Signal, Switches, madv, map, prot};
use simcore::{Bytes, SimDuration};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Parses the text of a scenario file.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let root = parse_document(file, text)?;
    let p = Parser { file };
    p.scenario(&root)
}

struct Parser<'a> {
    file: &'a str,
}

/// A table being read: marks the keys it used, so that unknown keys are reported.
struct Fields<'a> {
    p: &'a Parser<'a>,
    line: usize,
    what: String,
    entries: &'a [(String, Node)],
    used: RefCell<Vec<bool>>,
}

impl<'a> Parser<'a> {
    fn err(&self, line: usize, message: impl Into<String>) -> ScenarioError {
        ScenarioError { file: self.file.into(), line, message: message.into() }
    }

    fn fields(
        &'a self,
        node: &'a Node,
        what: impl Into<String>,
    ) -> Result<Fields<'a>, ScenarioError> {
        let what = what.into();
        match &node.kind {
            Kind::Table(entries) => Ok(Fields {
                p: self,
                line: node.line,
                what,
                entries,
                used: RefCell::new(vec![false; entries.len()]),
            }),
            k => {
                Err(self
                    .err(node.line, format!("{what}: expected a table, found {}", k.describe())))
            }
        }
    }

    fn array(&'a self, node: &'a Node, what: &str) -> Result<&'a [Node], ScenarioError> {
        match &node.kind {
            Kind::Array(items) => Ok(items),
            k => {
                Err(self
                    .err(node.line, format!("{what}: expected an array, found {}", k.describe())))
            }
        }
    }

    fn scenario(&self, root: &Node) -> Result<Scenario, ScenarioError> {
        let top = self.fields(root, "the scenario")?;
        let machine = match top.get("machine") {
            Some(n) => self.machine(n)?,
            None => self.machine(&Node { line: 1, kind: Kind::Table(Vec::new()) })?,
        };
        let mut files = Vec::new();
        for n in top.list("file")? {
            let file = self.file_decl(n)?;
            if file.spec.fs == mm::fs::FsType::Dax && machine.pmem.is_none() {
                return Err(self.err(
                    file.line,
                    format!(
                        "file `{}` is on a DAX file system: give the machine a persistent-memory device (`pmem = \"64MiB\"` in [machine])",
                        file.path
                    ),
                ));
            }
            files.push(file);
        }
        let mut cgroups: Vec<CgroupDecl> = Vec::new();
        for n in top.list("cgroup")? {
            let f = self.fields(n, "[[cgroup]]")?;
            let path = f.string("path")?;
            let parent = path.rsplit_once('/').map(|(p, _)| p);
            let declared = |p: &str| p.is_empty() || cgroups.iter().any(|c| c.path == p);
            if !path.starts_with('/') || path.len() < 2 || !parent.is_some_and(declared) {
                return Err(self.err(
                    f.line_of("path"),
                    format!("cgroup `{path}`: expected /NAME or /PARENT/NAME with PARENT declared before"),
                ));
            }
            if cgroups.iter().any(|c| c.path == path) {
                return Err(
                    self.err(f.line_of("path"), format!("cgroup `{path}` is declared twice"))
                );
            }
            cgroups.push(CgroupDecl { line: n.line, path, max: f.opt_size("max")? });
            f.finish(&["path", "max"])?;
        }
        let mut processes = Vec::new();
        for n in top.list("process")? {
            let f = self.fields(n, "[[process]]")?;
            let cgroup = f.opt_str("cgroup")?;
            if let Some(c) = &cgroup
                && !cgroups.iter().any(|d| &d.path == c)
            {
                return Err(self.err(f.line_of("cgroup"), format!("cgroup `{c}` is not declared")));
            }
            processes.push(ProcessDecl { line: n.line, name: f.string("name")?, cgroup });
            f.finish(&["name", "cgroup"])?;
        }
        let mut steps = Vec::new();
        for n in top.list("step")? {
            steps.push(self.step(n, machine.cpus.unwrap_or(1))?);
        }
        let mut expects = Vec::new();
        for n in top.list("expect")? {
            expects.push(self.expect(n)?);
        }
        let mut show = Vec::new();
        if let Some(n) = top.get("show") {
            for item in self.array(n, "show")? {
                show.push(self.show(item)?);
            }
        }
        let mut explore = Vec::new();
        for n in top.list("explore")? {
            explore.push(self.explore(n)?);
        }
        top.finish(&["machine", "file", "cgroup", "process", "step", "expect", "show", "explore"])?;
        let scenario = Scenario {
            file: self.file.into(),
            machine,
            files,
            cgroups,
            processes,
            steps,
            expects,
            show,
            explore,
        };
        self.check_names(&scenario)?;
        Ok(scenario)
    }

    fn machine(&self, node: &Node) -> Result<MachineSpec, ScenarioError> {
        let f = self.fields(node, "[machine]")?;
        let profile_name = f.opt_str("profile")?.unwrap_or_else(|| "tiny".into());
        let profile =
            Profile::named(&profile_name).map_err(|e| self.err(f.line_of("profile"), e))?;
        let cpus = f.opt_u64("cpus")?.map(|c| u32::try_from(c).unwrap_or(u32::MAX));
        let memory = f.opt_size("memory")?;
        let resized = profile
            .resized(cpus, memory)
            .map_err(|e| self.err(f.line, format!("impossible machine: {e}")))?;
        let kernel: KernelVersion = match f.opt_str("kernel")? {
            Some(k) => k.parse().map_err(|e: String| self.err(f.line_of("kernel"), e))?,
            None => KernelVersion::DEFAULT,
        };
        let mut switches = Switches::for_kernel(kernel);
        let mut switch_overrides = Vec::new();
        if let Some(n) = f.get("switches") {
            let s = self.fields(n, "[machine.switches]")?;
            for (key, value) in s.entries {
                let Kind::Str(v) = &value.kind else {
                    return Err(self.err(
                        value.line,
                        format!(
                            "switch `{key}`: expected a string value, found {}",
                            value.kind.describe()
                        ),
                    ));
                };
                switches.set(key, v).map_err(|e| self.err(value.line, e))?;
                switch_overrides.push((key.clone(), v.clone()));
            }
            s.mark_all();
        }
        let scheduler = match f.opt_str("scheduler")? {
            Some(s) => s.parse().map_err(|e: engine::ConfigError| {
                self.err(f.line_of("scheduler"), e.to_string())
            })?,
            None => engine::SchedulerKind::TimeOrdered,
        };
        let (mut ra_pages, mut fault_around_pages) = (None, None);
        let (mut swappiness, mut min_ttl_ms) = (None, None);
        if let Some(n) = f.get("tunables") {
            let t = self.fields(n, "[machine.tunables]")?;
            ra_pages = t.opt_u64("read_ahead_kb")?.map(|kb| kb / 4);
            fault_around_pages = t.opt_u64("fault_around_bytes")?.map(|b| (b / 4096).max(1));
            swappiness = t.opt_u64("swappiness")?;
            if swappiness.is_some_and(|v| v > 200) {
                return Err(self.err(t.line_of("swappiness"), "`swappiness`: expected 0 to 200"));
            }
            min_ttl_ms = t.opt_u64("lru_gen_min_ttl_ms")?;
            t.finish(&["read_ahead_kb", "fault_around_bytes", "swappiness", "lru_gen_min_ttl_ms"])?;
        }
        let mut costs = Vec::new();
        if let Some(n) = f.get("costs") {
            let c = self.fields(n, "[machine.costs]")?;
            let mut table = resized.costs.clone();
            for (key, value) in c.entries {
                let Kind::Int(ns) = value.kind else {
                    return Err(self.err(
                        value.line,
                        format!("cost `{key}`: expected nanoseconds as an integer"),
                    ));
                };
                let ns = u64::try_from(ns).map_err(|_| {
                    self.err(value.line, format!("cost `{key}`: must not be negative"))
                })?;
                table.set(key, ns).map_err(|e| self.err(value.line, e))?;
                costs.push((key.clone(), ns));
            }
            c.mark_all();
        }
        let seed = f.opt_u64("seed")?.unwrap_or(0);
        let swap = f.opt_size("swap")?;
        if swap.is_some_and(|s| !s.is_page_aligned()) {
            return Err(self.err(f.line_of("swap"), "`swap`: expected a multiple of 4 KiB"));
        }
        let pmem = f.opt_size("pmem")?;
        if pmem.is_some_and(|s| !s.is_page_aligned()) {
            return Err(self.err(f.line_of("pmem"), "`pmem`: expected a multiple of 4 KiB"));
        }
        f.finish(&[
            "profile",
            "cpus",
            "memory",
            "kernel",
            "switches",
            "scheduler",
            "tunables",
            "costs",
            "seed",
            "swap",
            "pmem",
        ])?;
        Ok(MachineSpec {
            profile: profile_name,
            cpus: Some(resized.cpus),
            memory: Some(resized.memory),
            kernel,
            switch_overrides,
            seed,
            scheduler,
            ra_pages,
            swap,
            pmem,
            fault_around_pages,
            swappiness,
            min_ttl_ms,
            costs,
        })
    }

    fn file_decl(&self, node: &Node) -> Result<FileDecl, ScenarioError> {
        let f = self.fields(node, "[[file]]")?;
        let path = f.string("path")?;
        let size = f.size("size")?;
        let fs = match f.opt_str("fs")? {
            Some(name) => parse_fs(&name).map_err(|e| self.err(f.line_of("fs"), e))?,
            None => mm::fs::FsType::Disk,
        };
        let pattern = match f.opt_str("content")? {
            Some(c) => parse_content(&c).map_err(|e| self.err(f.line_of("content"), e))?,
            None => None,
        };
        let mut holes = Vec::new();
        if let Some(n) = f.get("holes") {
            for h in self.array(n, "holes")? {
                let pair = self.array(h, "a hole")?;
                let [start, len] = pair else {
                    return Err(self.err(h.line, "a hole: expected [offset, length]"));
                };
                let (start, len) =
                    (self.size_node(start, "hole offset")?, self.size_node(len, "hole length")?);
                holes.push(parse_hole(start, len).map_err(|e| self.err(h.line, e))?);
            }
        }
        f.finish(&["path", "size", "fs", "content", "holes"])?;
        Ok(FileDecl { line: node.line, path, spec: mm::FileSpec { size, fs, pattern, holes } })
    }

    fn step(&self, node: &Node, cpus: u32) -> Result<Step, ScenarioError> {
        let f = self.fields(node, "[[step]]")?;
        let mut expects = Vec::new();
        for n in f.list("expect")? {
            expects.push(self.expect(n)?);
        }
        let mut tasks = Vec::new();
        if f.get("task").is_some() {
            for (i, n) in f.list("task")?.iter().enumerate() {
                let t = self.fields(n, "[[step.task]]")?;
                tasks.push(self.task(&t, i, cpus)?);
                t.finish(&["name", "process", "cpu", "ops"])?;
            }
            f.finish(&["task", "expect"])?;
        } else {
            tasks.push(self.task(&f, 0, cpus)?);
            f.finish(&["name", "process", "cpu", "ops", "expect"])?;
        }
        Ok(Step { line: node.line, tasks, expects })
    }

    fn task(&self, f: &Fields<'_>, index: usize, cpus: u32) -> Result<Task, ScenarioError> {
        let process = f.string("process")?;
        let cpu = match f.opt_u64("cpu")? {
            Some(c) if c < u64::from(cpus) => c as u32,
            Some(c) => {
                return Err(self.err(
                    f.line_of("cpu"),
                    format!("cpu {c} does not exist: the machine has CPUs 0..{}", cpus - 1),
                ));
            }
            None => (index as u32) % cpus,
        };
        let name = f.opt_str("name")?.unwrap_or_else(|| format!("{process}/{index}"));
        let mut ops = Vec::new();
        if let Some(n) = f.get("ops") {
            for item in self.array(n, "ops")? {
                ops.push(self.op(item)?);
            }
        }
        Ok(Task { line: f.line, name, process, cpu, ops })
    }

    fn op(&self, node: &Node) -> Result<Op, ScenarioError> {
        let f = self.fields(node, "an operation")?;
        let name = f.string("op")?;
        let line = node.line;
        let kind = match name.as_str() {
            "mmap" => OpKind::Mmap {
                addr: f.opt_addr("addr")?,
                len: f.size("len")?,
                prot: f.prot("prot")?,
                flags: f.map_flags("flags")?,
                fd: f.opt_str("fd")?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            },
            "munmap" => OpKind::Munmap { addr: f.addr("addr")?, len: f.size("len")? },
            "mprotect" => OpKind::Mprotect {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                prot: f.prot("prot")?,
            },
            "madvise" => OpKind::Madvise {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                advice: f.advice("advice")?,
            },
            "open" => OpKind::Open { path: f.string("path")?, flags: f.open_flags("flags")? },
            "close" => OpKind::Close { fd: f.string("fd")? },
            "dup" => OpKind::Dup { fd: f.string("fd")? },
            "read" => OpKind::Read {
                fd: f.string("fd")?,
                buf: f.opt_addr("buf")?,
                len: f.size("len")?.as_u64(),
                offset: f.opt_size("offset")?.map(Bytes::as_u64),
            },
            "write" => OpKind::Write {
                fd: f.string("fd")?,
                data: f.data()?,
                offset: f.opt_size("offset")?.map(Bytes::as_u64),
            },
            "truncate" => {
                OpKind::Truncate { path: f.string("path")?, size: f.size("size")?.as_u64() }
            }
            "ftruncate" => {
                OpKind::Ftruncate { fd: f.string("fd")?, size: f.size("size")?.as_u64() }
            }
            "fsync" => OpKind::Fsync { fd: f.string("fd")? },
            "fork" => OpKind::Fork,
            "exit" => OpKind::Exit,
            "exec" => {
                let d = ExecImage::default();
                OpKind::Exec {
                    path: f.string("path")?,
                    image: ExecImage {
                        text: f.opt_size("text")?.unwrap_or(d.text),
                        data: f.opt_size("data")?.unwrap_or(d.data),
                        bss: f.opt_size("bss")?.unwrap_or(d.bss),
                        stack: f.opt_size("stack")?.unwrap_or(d.stack),
                    },
                }
            }
            "touch" => OpKind::Touch {
                addr: f.addr("addr")?,
                len: f.size("len")?,
                access: f.access("access")?,
            },
            "read_bytes" => {
                OpKind::ReadBytes { addr: f.addr("addr")?, len: f.size("len")?.as_u64() }
            }
            "write_bytes" => OpKind::WriteBytes { addr: f.addr("addr")?, data: f.data()? },
            "increment" => OpKind::Increment { addr: f.addr("addr")? },
            "run" => {
                let name = f.string("workload")?;
                if name != "pmbench" {
                    return Err(self.err(
                        f.line_of("workload"),
                        format!("unknown workload `{name}`: expected \"pmbench\""),
                    ));
                }
                let pattern = f.opt_str("pattern")?.unwrap_or_else(|| "normal_ih".into());
                let pattern = workload::access::Pattern::named(&pattern)
                    .map_err(|e| self.err(f.line_of("pattern"), e))?;
                let reads = f.opt_str("reads")?.unwrap_or_else(|| "100%".into());
                let reads = parse_percent(&reads).map_err(|e| self.err(f.line_of("reads"), e))?;
                let len = f.size("len")?;
                if len.pages_ceil() == 0 {
                    return Err(
                        self.err(f.line_of("len"), "`run`: `len` must cover at least one page")
                    );
                }
                OpKind::Run {
                    addr: f.addr("addr")?,
                    len,
                    pattern,
                    reads,
                    accesses: f.opt_u64("accesses")?.unwrap_or(1),
                }
            }
            "pin" => {
                let kind = f.opt_str("kind")?.unwrap_or_else(|| "pin".into());
                let pin = match kind.as_str() {
                    "pin" => true,
                    "get" => false,
                    other => return Err(self.err(f.line_of("kind"), format!("`kind` in `pin`: expected \"pin\" (FOLL_PIN) or \"get\" (FOLL_GET), found \"{other}\""))),
                };
                let flags = mm::gup::GupFlags {
                    write: f.opt_bool("write")?.unwrap_or(false),
                    pin,
                    longterm: f.opt_bool("longterm")?.unwrap_or(false),
                };
                OpKind::Pin { addr: f.addr("addr")?, len: f.size("len")?.as_u64(), flags }
            }
            "pin_read" => OpKind::PinRead {
                hold: f.string("pin")?,
                offset: f.opt_size("offset")?.map_or(0, |b| b.as_u64()),
                len: f.opt_size("len")?.map(|b| b.as_u64()),
            },
            "unpin" => OpKind::Unpin { hold: f.string("pin")? },
            "pread_direct" => OpKind::PreadDirect {
                fd: f.string("fd")?,
                buf: f.addr("buf")?,
                len: f.size("len")?.as_u64(),
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
            },
            "clear_refs" => OpKind::ClearRefs {
                process: f.string("process")?,
                value: f.opt_u64("value")?.unwrap_or(4),
            },
            "pipe" => OpKind::Pipe,
            "vmsplice" => OpKind::Vmsplice {
                fd: f.string("fd")?,
                addr: f.addr("addr")?,
                len: f.size("len")?.as_u64(),
            },
            "sleep" => OpKind::Sleep { duration: f.duration("duration")? },
            "fadvise" => OpKind::Fadvise {
                fd: f.string("fd")?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
                len: f.opt_size("len")?.map_or(0, Bytes::as_u64),
                advice: f.keyword("advice", parse_fadvice, None)?,
            },
            "memory_reclaim" => {
                OpKind::MemoryReclaim { cgroup: f.string("cgroup")?, amount: f.size("amount")? }
            }
            "fallocate" => OpKind::Fallocate {
                fd: f.string("fd")?,
                mode: f.keyword("mode", parse_fallocate_mode, Some(0))?,
                offset: f.opt_size("offset")?.map_or(0, Bytes::as_u64),
                len: f.size("len")?.as_u64(),
            },
            other => {
                return Err(self.err(f.line_of("op"), format!(
                    "unknown operation `{other}`: expected one of mmap, munmap, mprotect, madvise, open, close, dup, read, write, truncate, ftruncate, fallocate, fsync, fork, exit, exec, touch, read_bytes, write_bytes, increment, run, pin, pin_read, unpin, pread_direct, clear_refs, pipe, vmsplice, sleep, fadvise, memory_reclaim"
                )));
            }
        };
        let bind = f.opt_str("as")?;
        if bind.is_some() && kind.binds().is_none() {
            return Err(
                self.err(f.line_of("as"), format!("`{name}` returns nothing to bind with `as`"))
            );
        }
        let expect = match f.get("expect") {
            None => Vec::new(),
            Some(Node { kind: Kind::Array(items), .. }) => {
                items.iter().map(|n| self.op_alternative(n, &kind)).collect::<Result<_, _>>()?
            }
            Some(n) => vec![self.op_alternative(n, &kind)?],
        };
        let known: &[&str] = match &kind {
            OpKind::Mmap { .. } => &["addr", "len", "prot", "flags", "fd", "offset"],
            OpKind::Munmap { .. } => &["addr", "len"],
            OpKind::Mprotect { .. } => &["addr", "len", "prot"],
            OpKind::Madvise { .. } => &["addr", "len", "advice"],
            OpKind::Open { .. } => &["path", "flags"],
            OpKind::Close { .. } | OpKind::Dup { .. } | OpKind::Fsync { .. } => &["fd"],
            OpKind::Read { .. } => &["fd", "buf", "len", "offset"],
            OpKind::Write { .. } => &["fd", "data", "data_hex", "fill", "len", "offset"],
            OpKind::Truncate { .. } => &["path", "size"],
            OpKind::Ftruncate { .. } => &["fd", "size"],
            OpKind::Fork | OpKind::Exit => &[],
            OpKind::Exec { .. } => &["path", "text", "data", "bss", "stack"],
            OpKind::Touch { .. } => &["addr", "len", "access"],
            OpKind::ReadBytes { .. } => &["addr", "len"],
            OpKind::WriteBytes { .. } => &["addr", "data", "data_hex", "fill", "len"],
            OpKind::Increment { .. } => &["addr"],
            OpKind::Run { .. } => &["workload", "addr", "len", "pattern", "reads", "accesses"],
            OpKind::Pin { .. } => &["addr", "len", "kind", "write", "longterm"],
            OpKind::PinRead { .. } => &["pin", "offset", "len"],
            OpKind::Unpin { .. } => &["pin"],
            OpKind::PreadDirect { .. } => &["fd", "buf", "len", "offset"],
            OpKind::ClearRefs { .. } => &["process", "value"],
            OpKind::Pipe => &[],
            OpKind::Fadvise { .. } => &["fd", "offset", "len", "advice"],
            OpKind::MemoryReclaim { .. } => &["cgroup", "amount"],
            OpKind::Vmsplice { .. } => &["fd", "addr", "len"],
            OpKind::Sleep { .. } => &["duration"],
            OpKind::Fallocate { .. } => &["fd", "mode", "offset", "len"],
        };
        let mut all = vec!["op", "as", "expect"];
        all.extend_from_slice(known);
        f.finish(&all)?;
        Ok(Op { line, kind, bind, expect })
    }

    /// One alternative of an operation's `expect`: a result, optionally under `when`.
    fn op_alternative(&self, node: &Node, kind: &OpKind) -> Result<Alternative, ScenarioError> {
        let when = match &node.kind {
            Kind::Table(entries) => match entries.iter().find(|(k, _)| k == "when") {
                Some((_, w)) => self.when(w)?,
                None => When::default(),
            },
            _ => When::default(),
        };
        Ok(Alternative { when, expect: self.op_expect(node, kind)? })
    }

    /// `when = { switch = "value" }` or `{ switch = ["a", "b"] }`, checked against the switches.
    fn when(&self, node: &Node) -> Result<When, ScenarioError> {
        let f = self.fields(node, "when")?;
        let mut conds = Vec::new();
        let mut kernel = None;
        for (key, value) in f.entries {
            if key == "kernel" {
                let Kind::Str(text) = &value.kind else {
                    return Err(self.err(
                        value.line,
                        "`kernel` in `when`: expected a string like \">=v5.11\"",
                    ));
                };
                kernel = Some(parse_kernel_cond(text).map_err(|e| self.err(value.line, e))?);
                continue;
            }
            let values: Vec<String> =
                match &value.kind {
                    Kind::Str(v) => vec![v.clone()],
                    Kind::Array(items) => items
                        .iter()
                        .map(|i| match &i.kind {
                            Kind::Str(v) => Ok(v.clone()),
                            k => Err(self.err(
                                i.line,
                                format!(
                                    "`when`: expected switch values as strings, found {}",
                                    k.describe()
                                ),
                            )),
                        })
                        .collect::<Result<_, _>>()?,
                    k => return Err(self.err(
                        value.line,
                        format!(
                            "`when`: expected a value or a list of values for `{key}`, found {}",
                            k.describe()
                        ),
                    )),
                };
            let mut scratch = Switches::default();
            for v in &values {
                scratch.set(key, v).map_err(|e| self.err(value.line, e))?;
            }
            conds.push((key.clone(), values));
        }
        f.mark_all();
        Ok(When { switches: conds, kernel })
    }

    fn op_expect(&self, node: &Node, kind: &OpKind) -> Result<OpExpect, ScenarioError> {
        if let Kind::Str(s) = &node.kind {
            return match s.as_str() {
                "ok" => Ok(OpExpect::Success),
                _ => Err(self.err(
                    node.line,
                    format!(
                        "expect `{s}`: expected \"ok\" or a table like {{ errno = \"EINVAL\" }}"
                    ),
                )),
            };
        }
        let f = self.fields(node, "expect")?;
        // `when` belongs to the enclosing alternative, parsed by `op_alternative`.
        f.get("when");
        let e = if let Some(e) = f.opt_str("errno")? {
            OpExpect::Errno(
                Errno::from_name(&e)
                    .ok_or_else(|| self.err(f.line_of("errno"), format!("unknown errno `{e}`")))?,
            )
        } else if let Some(s) = f.opt_str("signal")? {
            OpExpect::Signal(Signal::from_name(&s).ok_or_else(|| {
                self.err(
                    f.line_of("signal"),
                    format!("unknown signal `{s}`: expected SIGSEGV, SIGBUS or SIGKILL"),
                )
            })?)
        } else if f.get("data").is_some() || f.get("data_hex").is_some() || f.get("fill").is_some()
        {
            if !matches!(
                kind,
                OpKind::ReadBytes { .. }
                    | OpKind::Read { buf: Some(_), .. }
                    | OpKind::PinRead { .. }
                    | OpKind::PreadDirect { .. }
            ) {
                return Err(
                    self.err(node.line, format!("`{}` returns no data to compare", kind.name()))
                );
            }
            OpExpect::Data(f.data()?)
        } else if let Some(n) = f.opt_u64("bytes")? {
            OpExpect::Count(n)
        } else {
            return Err(self.err(
                node.line,
                "expect: expected one of errno, signal, data, data_hex, fill, bytes",
            ));
        };
        f.finish(&["errno", "signal", "data", "data_hex", "fill", "len", "bytes", "when"])?;
        Ok(e)
    }

    fn expect(&self, node: &Node) -> Result<Expect, ScenarioError> {
        let f = self.fields(node, "[[expect]]")?;
        let kinds =
            ["smaps", "smaps_rollup", "status", "vmstat", "meminfo", "pagemap", "memory_stat"];
        let present: Vec<&str> = kinds.iter().copied().filter(|k| f.get(k).is_some()).collect();
        let [kind] = present[..] else {
            return Err(self.err(
                node.line,
                format!("an expectation needs exactly one of {}", kinds.join(", ")),
            ));
        };
        let what = match kind {
            "smaps" => Observable::Smaps {
                process: f.string("process")?,
                at: f.addr("at")?,
                field: f.string("smaps")?,
            },
            "smaps_rollup" => Observable::SmapsRollup {
                process: f.string("process")?,
                field: f.string("smaps_rollup")?,
            },
            "status" => {
                Observable::Status { process: f.string("process")?, field: f.string("status")? }
            }
            "vmstat" => {
                let name = f.string("vmstat")?;
                if mm::vmstat::vmstat_key(&name).is_none() {
                    return Err(
                        self.err(f.line_of("vmstat"), format!("unknown vmstat counter `{name}`"))
                    );
                }
                Observable::Vmstat { name }
            }
            "meminfo" => Observable::Meminfo { name: f.string("meminfo")? },
            "memory_stat" => Observable::MemoryStat {
                cgroup: f.string("cgroup")?,
                name: f.string("memory_stat")?,
            },
            _ => {
                let bit = match f.string("pagemap")?.as_str() {
                    "present" => PagemapBit::Present,
                    "swapped" => PagemapBit::Swapped,
                    "exclusive" => PagemapBit::Exclusive,
                    "soft_dirty" => PagemapBit::SoftDirty,
                    "file" => PagemapBit::File,
                    "zero_page" => PagemapBit::ZeroPage,
                    other => {
                        return Err(self.err(
                            f.line_of("pagemap"),
                            format!(
                                "unknown pagemap bit `{other}`: expected one of {}",
                                PagemapBit::NAMES
                            ),
                        ));
                    }
                };
                Observable::Pagemap { process: f.string("process")?, at: f.addr("at")?, bit }
            }
        };
        let cmps: Vec<Comparison> = [
            f.opt_u64("equals")?.map(Comparison::Equals),
            f.opt_u64("kb")?.map(Comparison::Equals),
            f.opt_bool("is")?.map(|b| Comparison::Equals(u64::from(b))),
            f.opt_u64("at_least")?.map(Comparison::AtLeast),
            f.opt_u64("at_most")?.map(Comparison::AtMost),
        ]
        .into_iter()
        .flatten()
        .collect();
        let [cmp] = cmps[..] else {
            return Err(self.err(
                node.line,
                "an expectation needs exactly one of equals, kb, is, at_least, at_most",
            ));
        };
        let when = match f.get("when") {
            Some(w) => self.when(w)?,
            None => When::default(),
        };
        let known = [kind, "process", "at", "cgroup", "equals", "kb", "is", "at_least", "at_most"];
        f.finish(&[&known[..], &["when"]].concat())?;
        Ok(Expect { line: node.line, what, cmp, when })
    }

    fn explore(&self, node: &Node) -> Result<ExploreExpect, ScenarioError> {
        let f = self.fields(node, "[[explore]]")?;
        let kernel = match f.opt_str("kernel")? {
            Some(k) => Some(k.parse().map_err(|e: String| self.err(f.line_of("kernel"), e))?),
            None => None,
        };
        let mut sets = Vec::new();
        if let Some(n) = f.get("set") {
            let t = self.fields(n, "`set` in [[explore]]")?;
            let mut scratch = Switches::default();
            for (k, v) in t.entries {
                let Kind::Str(v) = &v.kind else {
                    return Err(self.err(v.line, format!("switch `{k}`: expected a string value")));
                };
                scratch.set(k, v).map_err(|e| self.err(n.line, e))?;
                sets.push((k.clone(), v.clone()));
            }
            t.mark_all();
        }
        let strategy = f.string("strategy")?;
        let seed = f.opt_u64("seed")?.unwrap_or(0);
        let swap = f.opt_size("swap")?;
        if swap.is_some_and(|s| !s.is_page_aligned()) {
            return Err(self.err(f.line_of("swap"), "`swap`: expected a multiple of 4 KiB"));
        }
        explore::Strategy::from_spec(&strategy, seed)
            .map_err(|e| self.err(f.line_of("strategy"), e.to_string()))?;
        let budget = f.opt_u64("budget")?.unwrap_or(2000);
        let violation = match f.string("expect")?.as_str() {
            "violation" => true,
            "none" => false,
            other => return Err(self.err(
                f.line_of("expect"),
                format!(
                    "`expect` in [[explore]]: expected \"violation\" or \"none\", found \"{other}\""
                ),
            )),
        };
        f.finish(&["kernel", "set", "strategy", "budget", "seed", "expect"])?;
        Ok(ExploreExpect { line: node.line, kernel, sets, strategy, budget, seed, violation })
    }

    fn show(&self, node: &Node) -> Result<Show, ScenarioError> {
        let Kind::Str(s) = &node.kind else {
            return Err(self.err(
                node.line,
                format!(
                    "show: expected a string like \"smaps:NAME\", found {}",
                    node.kind.describe()
                ),
            ));
        };
        parse_show(s).map_err(|e| self.err(node.line, e))
    }

    fn size_node(&self, node: &Node, what: &str) -> Result<Bytes, ScenarioError> {
        match &node.kind {
            Kind::Int(i) if *i >= 0 => Ok(Bytes(*i as u64)),
            Kind::Str(s) => parse_size(s).ok_or_else(|| {
                self.err(
                    node.line,
                    format!(
                        "{what}: expected a size like 4096, \"64KiB\" or \"2MiB\", found \"{s}\""
                    ),
                )
            }),
            k => Err(self.err(
                node.line,
                format!("{what}: expected a size like 4096 or \"64KiB\", found {}", k.describe()),
            )),
        }
    }

    /// Checks that names are bound before use and once, process by process, step by step.
    fn check_names(&self, s: &Scenario) -> Result<(), ScenarioError> {
        let mut env: BTreeMap<String, (ValueKind, usize)> = BTreeMap::new();
        for p in &s.processes {
            if let Some((_, l)) = env.insert(p.name.clone(), (ValueKind::Process, p.line)) {
                return Err(self
                    .err(p.line, format!("process `{}` is already declared at line {l}", p.name)));
            }
        }
        for f in &s.files {
            if !f.path.starts_with('/') {
                return Err(self.err(f.line, format!("file path `{}` must be absolute", f.path)));
            }
        }
        for step in &s.steps {
            let mut new: BTreeMap<String, (ValueKind, usize)> = BTreeMap::new();
            for task in &step.tasks {
                let lookup = |local: &BTreeMap<String, (ValueKind, usize)>, name: &str| {
                    local.get(name).or_else(|| env.get(name)).map(|&(k, _)| k)
                };
                let mut local = BTreeMap::new();
                if lookup(&local, &task.process) != Some(ValueKind::Process) {
                    return Err(self.err(
                        task.line,
                        format!(
                            "task `{}`: `{}` is not a process declared or forked before this step",
                            task.name, task.process
                        ),
                    ));
                }
                for op in &task.ops {
                    for (name, want) in op_refs(&op.kind) {
                        let base = name.split('.').next().unwrap_or(&name);
                        let found = lookup(&local, base);
                        let ok = match (found, want) {
                            (Some(ValueKind::Layout), ValueKind::Addr) => {
                                name.contains('.')
                                    && ["text", "data", "bss", "stack"]
                                        .contains(&name.rsplit('.').next().unwrap_or(""))
                            }
                            (Some(ValueKind::Pipe), ValueKind::Fd) => {
                                name.contains('.')
                                    && ["read", "write"]
                                        .contains(&name.rsplit('.').next().unwrap_or(""))
                            }
                            (Some(k), w) => k == w && !name.contains('.'),
                            (None, _) => false,
                        };
                        if !ok {
                            let desc = match want {
                                ValueKind::Addr => "an address",
                                ValueKind::Fd => "a file descriptor",
                                ValueKind::Hold => "pages held by `pin`",
                                ValueKind::Pipe => "a pipe",
                                ValueKind::Process => "a process",
                                ValueKind::Layout => "an exec layout",
                            };
                            let why = if found.is_none() {
                                "is not bound before this operation"
                            } else {
                                "is bound to something else"
                            };
                            return Err(self.err(
                                op.line,
                                format!("`{}`: `{name}` {why} (expected {desc})", op.kind.name()),
                            ));
                        }
                    }
                    if let (Some(b), Some(kind)) = (&op.bind, op.kind.binds()) {
                        if let Some((_, l)) =
                            env.get(b).or_else(|| local.get(b)).or_else(|| new.get(b))
                        {
                            return Err(self
                                .err(op.line, format!("name `{b}` is already bound at line {l}")));
                        }
                        local.insert(b.clone(), (kind, op.line));
                    }
                }
                new.extend(local);
            }
            env.extend(new);
            for e in &step.expects {
                check_observable_names(self, e, &env)?;
            }
        }
        for e in &s.expects {
            check_observable_names(self, e, &env)?;
        }
        let cgroup_refs = s.steps.iter().flat_map(|st| {
            let ops = st.tasks.iter().flat_map(|t| &t.ops).filter_map(|op| match &op.kind {
                OpKind::MemoryReclaim { cgroup, .. } => Some((op.line, cgroup)),
                _ => None,
            });
            let exps = st.expects.iter().filter_map(|e| match &e.what {
                Observable::MemoryStat { cgroup, .. } => Some((e.line, cgroup)),
                _ => None,
            });
            ops.chain(exps).collect::<Vec<_>>()
        });
        let top_refs = s.expects.iter().filter_map(|e| match &e.what {
            Observable::MemoryStat { cgroup, .. } => Some((e.line, cgroup)),
            _ => None,
        });
        for (line, c) in cgroup_refs.chain(top_refs) {
            if !s.cgroups.iter().any(|d| &d.path == c) {
                return Err(self.err(line, format!("cgroup `{c}` is not declared")));
            }
        }
        for show in &s.show {
            let name = match show {
                Show::Smaps(n) | Show::SmapsRollup(n) | Show::Maps(n) | Show::Status(n) => n,
                Show::MemoryStat(c) => {
                    if !s.cgroups.iter().any(|d| &d.path == c) {
                        return Err(self.err(1, format!("show: cgroup `{c}` is not declared")));
                    }
                    continue;
                }
                Show::Vmstat | Show::Meminfo | Show::LockStat | Show::LruGen => continue,
            };
            if env.get(name).map(|&(k, _)| k) != Some(ValueKind::Process) {
                return Err(self.err(1, format!("show: `{name}` is not a process")));
            }
        }
        Ok(())
    }
}

fn check_observable_names(
    p: &Parser<'_>,
    e: &Expect,
    env: &BTreeMap<String, (ValueKind, usize)>,
) -> Result<(), ScenarioError> {
    let (process, at) = match &e.what {
        Observable::Smaps { process, at, .. } | Observable::Pagemap { process, at, .. } => {
            (Some(process), Some(at))
        }
        Observable::SmapsRollup { process, .. } | Observable::Status { process, .. } => {
            (Some(process), None)
        }
        Observable::Vmstat { .. } | Observable::Meminfo { .. } | Observable::MemoryStat { .. } => {
            (None, None)
        }
    };
    if let Some(process) = process
        && env.get(process).map(|&(k, _)| k) != Some(ValueKind::Process)
    {
        return Err(p.err(
            e.line,
            format!("`{process}` is not a process declared or forked before this expectation"),
        ));
    }
    if let Some(AddrExpr { base: Some(b), .. }) = at {
        let root = b.split('.').next().unwrap_or(b);
        if !matches!(env.get(root).map(|&(k, _)| k), Some(ValueKind::Addr | ValueKind::Layout)) {
            return Err(
                p.err(e.line, format!("`{b}` is not an address bound before this expectation"))
            );
        }
    }
    Ok(())
}

/// The names an operation reads, with the kind each must be.
fn op_refs(k: &OpKind) -> Vec<(String, ValueKind)> {
    let addr =
        |a: &AddrExpr| a.base.iter().map(|b| (b.clone(), ValueKind::Addr)).collect::<Vec<_>>();
    let fd = |f: &String| vec![(f.clone(), ValueKind::Fd)];
    match k {
        OpKind::Mmap { addr: a, fd: f, .. } => {
            a.iter().flat_map(addr).chain(f.iter().flat_map(fd)).collect()
        }
        OpKind::Munmap { addr: a, .. }
        | OpKind::Mprotect { addr: a, .. }
        | OpKind::Madvise { addr: a, .. }
        | OpKind::Touch { addr: a, .. }
        | OpKind::ReadBytes { addr: a, .. }
        | OpKind::WriteBytes { addr: a, .. }
        | OpKind::Increment { addr: a }
        | OpKind::Run { addr: a, .. } => addr(a),
        OpKind::Close { fd: f }
        | OpKind::Dup { fd: f }
        | OpKind::Fsync { fd: f }
        | OpKind::Ftruncate { fd: f, .. }
        | OpKind::Fadvise { fd: f, .. }
        | OpKind::Write { fd: f, .. }
        | OpKind::Fallocate { fd: f, .. } => fd(f),
        OpKind::Read { fd: f, buf, .. } => {
            fd(f).into_iter().chain(buf.iter().flat_map(addr)).collect()
        }
        OpKind::PreadDirect { fd: f, buf, .. } => fd(f).into_iter().chain(addr(buf)).collect(),
        OpKind::Vmsplice { fd: f, addr: a, .. } => fd(f).into_iter().chain(addr(a)).collect(),
        OpKind::Pin { addr: a, .. } => addr(a),
        OpKind::PinRead { hold, .. } | OpKind::Unpin { hold } => {
            vec![(hold.clone(), ValueKind::Hold)]
        }
        OpKind::ClearRefs { process, .. } => vec![(process.clone(), ValueKind::Process)],
        OpKind::Open { .. }
        | OpKind::Truncate { .. }
        | OpKind::Fork
        | OpKind::Exit
        | OpKind::Exec { .. }
        | OpKind::Sleep { .. }
        | OpKind::MemoryReclaim { .. }
        | OpKind::Pipe => Vec::new(),
    }
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Node> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        self.used.borrow_mut()[i] = true;
        Some(&self.entries[i].1)
    }

    fn mark_all(&self) {
        self.used.borrow_mut().fill(true);
    }

    fn line_of(&self, key: &str) -> usize {
        self.entries.iter().find(|(k, _)| k == key).map_or(self.line, |(_, n)| n.line)
    }

    fn list(&self, key: &str) -> Result<&'a [Node], ScenarioError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(n) => self.p.array(n, key),
        }
    }

    fn finish(&self, known: &[&str]) -> Result<(), ScenarioError> {
        let used = self.used.borrow();
        for (i, (k, n)) in self.entries.iter().enumerate() {
            if !used[i] {
                let hint = if known.is_empty() {
                    "it takes no keys".to_string()
                } else {
                    format!("expected one of {}", known.join(", "))
                };
                return Err(self
                    .p
                    .err(n.line, format!("unknown key `{k}` in {}: {hint}", self.what)));
            }
        }
        Ok(())
    }

    fn missing(&self, key: &str) -> ScenarioError {
        self.p.err(self.line, format!("{} needs `{key}`", self.what))
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, ScenarioError> {
        match self.get(key) {
            None => Ok(None),
            Some(Node { kind: Kind::Str(s), .. }) => Ok(Some(s.clone())),
            Some(n) => Err(self.p.err(
                n.line,
                format!("`{key}` in {}: expected a string, found {}", self.what, n.kind.describe()),
            )),
        }
    }

    fn string(&self, key: &str) -> Result<String, ScenarioError> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, ScenarioError> {
        match self.get(key) {
            None => Ok(None),
            Some(Node { kind: Kind::Int(i), .. }) if *i >= 0 => Ok(Some(*i as u64)),
            Some(n) => Err(self.p.err(
                n.line,
                format!(
                    "`{key}` in {}: expected a non-negative integer, found {}",
                    self.what,
                    n.kind.describe()
                ),
            )),
        }
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, ScenarioError> {
        match self.get(key) {
            None => Ok(None),
            Some(Node { kind: Kind::Bool(b), .. }) => Ok(Some(*b)),
            Some(n) => Err(self.p.err(
                n.line,
                format!(
                    "`{key}` in {}: expected true or false, found {}",
                    self.what,
                    n.kind.describe()
                ),
            )),
        }
    }

    fn opt_size(&self, key: &str) -> Result<Option<Bytes>, ScenarioError> {
        self.get(key).map(|n| self.p.size_node(n, &format!("`{key}` in {}", self.what))).transpose()
    }

    fn size(&self, key: &str) -> Result<Bytes, ScenarioError> {
        self.opt_size(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_addr(&self, key: &str) -> Result<Option<AddrExpr>, ScenarioError> {
        let Some(n) = self.get(key) else { return Ok(None) };
        let parsed = match &n.kind {
            Kind::Int(i) => Some(AddrExpr { base: None, offset: *i }),
            Kind::Str(s) => parse_addr(s),
            _ => None,
        };
        parsed.map(Some).ok_or_else(|| self.p.err(n.line, format!("`{key}` in {}: expected an address like \"buf\", \"buf+4KiB\" or \"0x10000000\"", self.what)))
    }

    fn addr(&self, key: &str) -> Result<AddrExpr, ScenarioError> {
        self.opt_addr(key)?.ok_or_else(|| self.missing(key))
    }

    /// A keyword value parsed by `parse`, with the error placed at the key's line.
    fn keyword<T>(
        &self,
        key: &str,
        parse: fn(&str) -> Result<T, String>,
        default: Option<T>,
    ) -> Result<T, ScenarioError> {
        match self.opt_str(key)? {
            None => default.ok_or_else(|| self.missing(key)),
            Some(s) => parse(&s).map_err(|e| {
                self.p.err(self.line_of(key), format!("`{key}` in {}: {e}", self.what))
            }),
        }
    }

    fn prot(&self, key: &str) -> Result<u32, ScenarioError> {
        self.keyword(key, parse_prot, None)
    }

    fn map_flags(&self, key: &str) -> Result<u32, ScenarioError> {
        self.keyword(key, parse_map_flags, None)
    }

    fn advice(&self, key: &str) -> Result<u32, ScenarioError> {
        self.keyword(key, parse_advice, None)
    }

    fn access(&self, key: &str) -> Result<mm::Access, ScenarioError> {
        self.keyword(key, parse_access, Some(mm::Access::Read))
    }

    fn open_flags(&self, key: &str) -> Result<OpenFlags, ScenarioError> {
        self.keyword(key, parse_open_flags, Some(OpenFlags::RDONLY))
    }

    fn duration(&self, key: &str) -> Result<SimDuration, ScenarioError> {
        let Some(n) = self.get(key) else { return Err(self.missing(key)) };
        let Kind::Str(s) = &n.kind else {
            return Err(self
                .p
                .err(n.line, format!("`{key}`: expected a duration like \"10us\" or \"2ms\"")));
        };
        parse_duration(s).ok_or_else(|| {
            self.p.err(
                n.line,
                format!("`{key}`: expected a duration like \"10us\" or \"2ms\", found \"{s}\""),
            )
        })
    }

    /// Bytes from `data` (text), `data_hex`, or `fill` (a byte) with `len`.
    fn data(&self) -> Result<Vec<u8>, ScenarioError> {
        if let Some(text) = self.opt_str("data")? {
            return Ok(text.into_bytes());
        }
        if let Some(hex) = self.opt_str("data_hex")? {
            return parse_hex(&hex).ok_or_else(|| {
                self.p.err(
                    self.line_of("data_hex"),
                    "data_hex: expected an even number of hex digits",
                )
            });
        }
        if let Some(byte) = self.opt_u64("fill")? {
            let byte = u8::try_from(byte).map_err(|_| {
                self.p.err(self.line_of("fill"), "fill: expected a byte value 0..255")
            })?;
            let len = self.size("len")?.as_u64();
            return Ok(vec![byte; len as usize]);
        }
        Err(self
            .p
            .err(self.line, format!("{} needs `data`, `data_hex` or `fill` with `len`", self.what)))
    }
}

/// `4096`, `"64KiB"`, `"2M"`, `"1GiB"`, `"4 kB"` (procfs kilobytes are KiB).
pub fn parse_size(s: &str) -> Option<Bytes> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" | "kB" | "KB" | "k" => 10,
        "M" | "MiB" | "MB" => 20,
        "G" | "GiB" | "GB" => 30,
        "T" | "TiB" | "TB" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift).map(Bytes)
}

fn parse_number(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    parse_size(s).and_then(|b| i64::try_from(b.as_u64()).ok())
}

/// A file system by name: `"ext4"` (or `"disk"`), `"tmpfs"` (or `"shmem"`), `"dax"` (or
/// `"ext4-dax"`: ext4 with `-o dax` on the machine's persistent memory).
pub fn parse_fs(s: &str) -> Result<mm::fs::FsType, String> {
    fs_type(s).ok_or_else(|| format!("unknown file system `{s}`: expected ext4, tmpfs or dax"))
}

/// A `fallocate` mode: `"allocate"` (0), `"keep_size"`, or `"punch_hole"` (with `KEEP_SIZE`,
/// as the kernel requires).
pub fn parse_fallocate_mode(s: &str) -> Result<u32, String> {
    use mm::fs::falloc;
    match s {
        "allocate" => Ok(0),
        "keep_size" => Ok(falloc::KEEP_SIZE),
        "punch_hole" => Ok(falloc::PUNCH_HOLE | falloc::KEEP_SIZE),
        _ => Err(format!("unknown mode `{s}`: expected allocate, keep_size or punch_hole")),
    }
}

/// A file's contents: `"zeros"`, or `"pattern:SEED"` (a pattern generated from the seed).
pub fn parse_content(s: &str) -> Result<Option<u64>, String> {
    if s == "zeros" {
        return Ok(None);
    }
    match s.strip_prefix("pattern:").map(str::parse::<u64>) {
        Some(Ok(seed)) => Ok(Some(seed)),
        _ => Err(format!("content `{s}`: expected `zeros` or `pattern:SEED`")),
    }
}

/// A file hole `[offset, offset + len)` as `(first page, pages)`, as `mm::FileSpec` keeps it.
pub fn parse_hole(offset: Bytes, len: Bytes) -> Result<(u64, u64), String> {
    if !offset.is_page_aligned() || !len.is_page_aligned() {
        return Err("a hole: offset and length must be multiples of 4 KiB".into());
    }
    Ok((offset.as_u64() >> 12, len.as_u64() >> 12))
}

/// `"buf"`, `"buf+4KiB"`, `"exe.text-0x1000"`, `"0x10000000"`.
pub fn parse_addr(s: &str) -> Option<AddrExpr> {
    let s = s.trim();
    if let Some(n) = parse_number(s) {
        return Some(AddrExpr { base: None, offset: n });
    }
    let (base, offset) = match s.find(['+', '-']) {
        Some(i) => {
            let n = parse_number(&s[i + 1..])?;
            (&s[..i], if &s[i..=i] == "-" { -n } else { n })
        }
        None => (s, 0),
    };
    let valid = !base.is_empty()
        && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !base.starts_with(|c: char| c.is_ascii_digit());
    valid.then(|| AddrExpr { base: Some(base.trim().to_string()), offset })
}

/// `"a|b|c"` where each part is a name in `table`; the values are combined with `combine`.
fn flag_words<T: Copy>(
    s: &str,
    table: &[(&str, T)],
    combine: impl Fn(T, T) -> T,
) -> Result<T, String> {
    let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
    let mut acc: Option<T> = None;
    for part in s.split('|').map(str::trim) {
        let v = table
            .iter()
            .find(|(n, _)| *n == part)
            .map(|&(_, v)| v)
            .ok_or_else(|| format!("unknown `{part}`, expected {}", names.join(", ")))?;
        acc = Some(acc.map_or(v, |a| combine(a, v)));
    }
    acc.ok_or_else(|| format!("expected one of {}", names.join(", ")))
}

/// `"rw"`, `"r-x"`, `"rwx"`, `"none"`, `"---"`.
pub fn parse_prot(s: &str) -> Result<u32, String> {
    let bad = || format!("expected permissions like \"rw\", \"r-x\" or \"none\", found \"{s}\"");
    if s == "none" {
        return Ok(prot::NONE);
    }
    let mut p = 0;
    for c in s.chars() {
        p |= match c {
            'r' => prot::READ,
            'w' => prot::WRITE,
            'x' => prot::EXEC,
            '-' => 0,
            _ => return Err(bad()),
        };
    }
    if s.is_empty() { Err(bad()) } else { Ok(p) }
}

/// `"private|anonymous"`, `"shared|populate"`, ...
pub fn parse_map_flags(s: &str) -> Result<u32, String> {
    let table = [
        ("private", map::PRIVATE),
        ("shared", map::SHARED),
        ("anonymous", map::ANONYMOUS),
        ("fixed", map::FIXED),
        ("fixed_noreplace", map::FIXED_NOREPLACE),
        ("populate", map::POPULATE),
        ("growsdown", map::GROWSDOWN),
        ("noreserve", map::NORESERVE),
        ("denywrite", map::DENYWRITE),
    ];
    flag_words(s, &table, |a, b| a | b)
}

/// `posix_fadvise` advice: `"noreuse"`, `"dontneed"`, ...
pub fn parse_fadvice(s: &str) -> Result<u32, String> {
    use mm::fadvise::advice;
    let table = [
        ("normal", advice::NORMAL),
        ("random", advice::RANDOM),
        ("sequential", advice::SEQUENTIAL),
        ("willneed", advice::WILLNEED),
        ("dontneed", advice::DONTNEED),
        ("noreuse", advice::NOREUSE),
    ];
    flag_words(s, &table, |_, b| b)
}

/// `"dontneed"`, `"random"`, ...
pub fn parse_advice(s: &str) -> Result<u32, String> {
    let table = [
        ("normal", madv::NORMAL),
        ("random", madv::RANDOM),
        ("sequential", madv::SEQUENTIAL),
        ("dontneed", madv::DONTNEED),
        ("cold", madv::COLD),
        ("pageout", madv::PAGEOUT),
    ];
    flag_words(s, &table, |_, b| b)
}

/// `"read"`, `"write"`, `"exec"`.
pub fn parse_access(s: &str) -> Result<mm::Access, String> {
    let table =
        [("read", mm::Access::Read), ("write", mm::Access::Write), ("exec", mm::Access::Exec)];
    flag_words(s, &table, |_, b| b)
}

/// `"rdonly"`, `"rdwr|direct"`, `"wronly|trunc"`, ...
pub fn parse_open_flags(s: &str) -> Result<OpenFlags, String> {
    let none = OpenFlags::default();
    let table = [
        ("rdonly", OpenFlags::RDONLY),
        ("wronly", OpenFlags::WRONLY),
        ("rdwr", OpenFlags::RDWR),
        ("direct", OpenFlags { direct: true, ..none }),
        ("append", OpenFlags { append: true, ..none }),
        ("trunc", OpenFlags { truncate: true, ..none }),
    ];
    let merge = |a: OpenFlags, b: OpenFlags| OpenFlags {
        read: a.read || b.read,
        write: a.write || b.write,
        direct: a.direct || b.direct,
        append: a.append || b.append,
        truncate: a.truncate || b.truncate,
    };
    let flags = flag_words(s, &table, merge)?;
    if !flags.read && !flags.write {
        return Err("needs one of rdonly, wronly, rdwr".into());
    }
    Ok(flags)
}

fn parse_duration(s: &str) -> Option<SimDuration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let n: u64 = s[..split].parse().ok()?;
    Some(match &s[split..] {
        "ns" => SimDuration::from_ns(n),
        "us" => SimDuration::from_us(n),
        "ms" => SimDuration::from_ms(n),
        "s" => SimDuration::from_secs(n),
        _ => return None,
    })
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

/// `">=v5.11"`, `"<v6.5"`, `"<=5.18"`, `">v6.1"` or an exact `"v5.12"`.
fn parse_kernel_cond(s: &str) -> Result<(std::cmp::Ordering, bool, KernelVersion), String> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let (ord, eq, rest) = if let Some(r) = s.strip_prefix(">=") {
        (Greater, true, r)
    } else if let Some(r) = s.strip_prefix("<=") {
        (Less, true, r)
    } else if let Some(r) = s.strip_prefix('>') {
        (Greater, false, r)
    } else if let Some(r) = s.strip_prefix('<') {
        (Less, false, r)
    } else {
        (Equal, true, s)
    };
    Ok((ord, eq, rest.trim().parse()?))
}

/// `smaps:NAME`, `vmstat`, ... (also used for the CLI's `--show`).
pub fn parse_show(s: &str) -> Result<Show, String> {
    let (kind, arg) = s.split_once(':').map_or((s, None), |(k, a)| (k, Some(a.to_string())));
    let need = |a: Option<String>| {
        a.filter(|x| !x.is_empty()).ok_or_else(|| format!("`{s}`: expected {kind}:PROCESS"))
    };
    Ok(match kind {
        "smaps" => Show::Smaps(need(arg)?),
        "smaps_rollup" => Show::SmapsRollup(need(arg)?),
        "maps" => Show::Maps(need(arg)?),
        "status" => Show::Status(need(arg)?),
        "vmstat" if arg.is_none() => Show::Vmstat,
        "meminfo" if arg.is_none() => Show::Meminfo,
        "lock_stat" if arg.is_none() => Show::LockStat,
        "lru_gen" if arg.is_none() => Show::LruGen,
        "memory.stat" => Show::MemoryStat(
            arg.filter(|a| a.starts_with('/'))
                .ok_or_else(|| format!("`{s}`: expected memory.stat:/CGROUP"))?,
        ),
        _ => return Err(format!("unknown observable `{s}`: expected one of {}", Show::NAMES)),
    })
}

/// `"90%"`: a percentage from 0 to 100.
fn parse_percent(text: &str) -> Result<simcore::Ratio, String> {
    let bad = || format!("`{text}`: expected a percentage like \"90%\"");
    let n: u64 = text.strip_suffix('%').ok_or_else(bad)?.trim().parse().map_err(|_| bad())?;
    simcore::Ratio::percent(n).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("90%").unwrap(), simcore::Ratio::percent(90).unwrap());
        for bad in ["90", "150%", "x%", ""] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_addresses_and_flags() {
        assert_eq!(parse_size("64KiB"), Some(Bytes::kib(64)));
        assert_eq!(parse_size("2M"), Some(Bytes::mib(2)));
        assert_eq!(parse_size("4096"), Some(Bytes(4096)));
        assert_eq!(parse_size("4 kB"), Some(Bytes(4096)));
        assert_eq!(parse_size("3 parsecs"), None);
        assert_eq!(
            parse_addr("buf+4KiB"),
            Some(AddrExpr { base: Some("buf".into()), offset: 4096 })
        );
        assert_eq!(
            parse_addr("exe.text-0x1000"),
            Some(AddrExpr { base: Some("exe.text".into()), offset: -4096 })
        );
        assert_eq!(parse_addr("0x10000000"), Some(AddrExpr { base: None, offset: 0x1000_0000 }));
        assert_eq!(parse_addr("1buf"), None);
        assert_eq!(parse_prot("r-x"), Ok(prot::READ | prot::EXEC));
        assert!(parse_prot("rq").is_err());
        assert_eq!(parse_map_flags("private|anonymous"), Ok(map::PRIVATE | map::ANONYMOUS));
        assert_eq!(
            parse_map_flags("private|anon").unwrap_err(),
            "unknown `anon`, expected private, shared, anonymous, fixed, fixed_noreplace, populate, growsdown, noreserve, denywrite"
        );
        assert_eq!(parse_open_flags("append").unwrap_err(), "needs one of rdonly, wronly, rdwr");
        assert_eq!(parse_hex("68 69"), Some(b"hi".to_vec()));
        assert_eq!(parse_content("pattern:7"), Ok(Some(7)));
        assert_eq!(parse_content("zeros"), Ok(None));
        assert!(parse_content("pattern:x").is_err());
        assert_eq!(parse_hole(Bytes::kib(8), Bytes::kib(4)), Ok((2, 1)));
        assert!(parse_hole(Bytes(100), Bytes::kib(4)).is_err());
        assert_eq!(parse_duration("15us"), Some(SimDuration::from_us(15)));
    }

    fn err(text: &str) -> String {
        parse_scenario("s.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn bad_input_names_file_line_and_expectation() {
        assert_eq!(
            err("[machine]\ncpus = 0\n"),
            "s.toml:1: impossible machine: cpus = 0: a machine has 1 to 4096 CPUs"
        );
        assert_eq!(
            err("[machine]\nkernel = \"v9.9\"\n"),
            "s.toml:2: kernel v9.9 is outside the modelled range v4.0 to v6.19"
        );
        assert_eq!(
            err("[machine.switches]\ncow_reuse = \"sometimes\"\n"),
            "s.toml:2: switch `cow_reuse` has no value `sometimes`: expected one of mapcount_swapcount, page_count, mapcount, anon_exclusive"
        );
        assert!(
            err("[machine.switches]\ntlb = \"x\"\n").starts_with("s.toml:2: unknown switch `tlb`")
        );
        let unknown_op = "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [\n  { op = \"mmap\", len = \"4KiB\", prot = \"rw\", flags = \"private|anonymous\" },\n  { op = \"teleport\" },\n]\n";
        assert!(
            err(unknown_op)
                .starts_with("s.toml:7: unknown operation `teleport`: expected one of mmap"),
            "{}",
            err(unknown_op)
        );
        let before = "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [\n  { op = \"touch\", addr = \"buf\", len = \"4KiB\" },\n]\n";
        assert_eq!(
            err(before),
            "s.toml:6: `touch`: `buf` is not bound before this operation (expected an address)"
        );
        let bad_key = "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ { op = \"fork\", lenght = 3 } ]\n";
        assert_eq!(
            err(bad_key),
            "s.toml:5: unknown key `lenght` in an operation: expected one of op, as, expect"
        );
        let no_proc = "[[step]]\nprocess = \"ghost\"\nops = []\n";
        assert_eq!(
            err(no_proc),
            "s.toml:1: task `ghost/0`: `ghost` is not a process declared or forked before this step"
        );
        assert!(err("x = [1,\n").starts_with("s.toml:"));
        let bad_size = "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ { op = \"mmap\", len = \"lots\", prot = \"rw\", flags = \"private\" } ]\n";
        assert_eq!(
            err(bad_size),
            "s.toml:5: `len` in an operation: expected a size like 4096, \"64KiB\" or \"2MiB\", found \"lots\""
        );
        let dup = "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ { op = \"fork\", as = \"c\" }, { op = \"fork\", as = \"c\" } ]\n";
        assert!(err(dup).contains("name `c` is already bound at line 5"));
    }

    #[test]
    fn a_full_scenario_parses() {
        let text = r#"
[machine]
profile = "tiny"
cpus = 2
seed = 9
[[file]]
path = "/f"
size = "1MiB"
holes = [[0, "64KiB"]]
[[process]]
name = "p"
[[step]]
process = "p"
ops = [
  { op = "mmap", len = "64KiB", prot = "rw", flags = "private|anonymous", as = "buf" },
  { op = "fork", as = "child" },
]
[[step]]
[[step.task]]
process = "child"
cpu = 1
ops = [ { op = "write_bytes", addr = "buf+4KiB", data = "hi" } ]
[[step.task]]
process = "p"
ops = [ { op = "read_bytes", addr = "buf", len = 2, expect = { data_hex = "0000" } } ]
[[expect]]
vmstat = "nr_anon_pages"
equals = 1
"#;
        let s = parse_scenario("ok.toml", text).unwrap();
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[1].tasks.len(), 2);
        assert_eq!(s.steps[1].tasks[1].cpu, 1, "round-robin placement");
        assert_eq!(s.files[0].spec.holes, [(0, 16)]);
        assert_eq!(s.machine.seed, 9);
    }
}
