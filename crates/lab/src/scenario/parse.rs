//! From the TOML tree to the typed scenario, validating everything a run would trip over:
//! unknown keys and operations, malformed sizes and flags, impossible machines, names used before
//! they are bound or bound twice, switches and costs that do not exist. Each error names the file,
//! the line, and what was expected.
//!
//! This file reads the scenario's top-level structure (machine, files, cgroups, processes, steps
//! and tasks, expectations, `show`, `explore`); `parse/fields.rs` reads one table's typed values,
//! `parse/words.rs` the words inside them (sizes, flags, addresses, durations), `parse/ops.rs`
//! builds one operation, and `parse/names.rs` resolves the names operations bind and use.

mod fields;
mod names;
mod ops;
mod words;

pub use words::{
    parse_access, parse_addr, parse_advice, parse_content, parse_duration, parse_fadvice,
    parse_fallocate_mode, parse_fs, parse_hole, parse_map_flags, parse_mcl_flags,
    parse_mlock2_flags, parse_msync_flags, parse_open_flags, parse_prctl_option, parse_prot,
    parse_show, parse_size,
};

use super::ScenarioError;
use super::model::*;
use super::node::{Kind, Node, parse_document};
use fields::Fields;

use mm::{KernelVersion, Profile, Switches};

/// Parses the text of a scenario file.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let root = parse_document(file, text)?;
    let p = Parser { file };
    p.scenario(&root)
}

/// Switch overrides by name (`set` in `[[explore]]`).
type SwitchSets = Vec<(String, String)>;

/// The keys of a scenario file's top level.
const TOP_KEYS: [&str; 12] = [
    "machine",
    "file",
    "cgroup",
    "process",
    "step",
    "expect",
    "show",
    "explore",
    "schedules",
    "requires",
    "host_differs",
    "time_order",
];

struct Parser<'a> {
    file: &'a str,
}

impl<'a> Parser<'a> {
    fn err(&self, line: usize, message: impl Into<String>) -> ScenarioError {
        ScenarioError { file: self.file.into(), line, message: message.into() }
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
            if file.spec.fs == mm::types::fs::FsType::Dax && machine.pmem.is_none() {
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
        let cgroups = self.cgroups(&top)?;
        let processes = self.processes(&top, &cgroups)?;
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
        let explored = |key: &str, in_run: bool| -> Result<Vec<_>, ScenarioError> {
            top.list(key)?.iter().map(|n| self.explore(n, in_run)).collect()
        };
        let (explore, schedules) = (explored("explore", false)?, explored("schedules", true)?);
        let requires = top.get("requires").map(|n| self.requires(n)).transpose()?;
        let host_differs = top.list("host_differs")?;
        let host_differs = host_differs.iter().map(|n| self.host_differs(n));
        let host_differs = host_differs.collect::<Result<Vec<_>, _>>()?;
        let time_order = top.list("time_order")?;
        let time_order = time_order.iter().map(|n| self.time_order(n));
        let time_order = time_order.collect::<Result<Vec<_>, _>>()?;
        top.finish(&TOP_KEYS)?;
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
            schedules,
            requires,
            host_differs,
            time_order,
        };
        self.check_names(&scenario)?;
        self.check_lines(&scenario)?;
        Ok(scenario)
    }

    /// `[[process]]` tables, each in a declared cgroup if any.
    fn processes(
        &self,
        top: &Fields,
        cgroups: &[CgroupDecl],
    ) -> Result<Vec<ProcessDecl>, ScenarioError> {
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
        Ok(processes)
    }

    /// `[[cgroup]]` tables: paths under declared parents, each declared once.
    fn cgroups(&self, top: &Fields) -> Result<Vec<CgroupDecl>, ScenarioError> {
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
        Ok(cgroups)
    }

    /// `[requires]`: `kernel` bounds and switch values as `when` takes them, and `reason`, what
    /// the kernels outside lack.
    fn requires(&self, node: &Node) -> Result<Requires, ScenarioError> {
        let f = self.fields(node, "[requires]")?;
        let reason = f.string("reason")?;
        let conditions = f.entries.iter().filter(|(k, _)| k != "reason").cloned().collect();
        let when = self.when(&Node { line: node.line, kind: Kind::Table(conditions) })?;
        if when == When::default() {
            return Err(self.err(node.line, "[requires]: expected `kernel` or a switch to require"));
        }
        Ok(Requires { line: node.line, when, reason })
    }

    /// `[[host_differs]]`: a row of `mmsim diff` where the host kernel is known to answer
    /// otherwise than the model, on the kernels `kernel` names, and why.
    fn host_differs(&self, node: &Node) -> Result<HostDiffers, ScenarioError> {
        let f = self.fields(node, "[[host_differs]]")?;
        let at = f.opt_u64("line")?.ok_or_else(|| {
            self.err(
                node.line,
                "[[host_differs]]: expected `line`, the line of the operation or expectation",
            )
        })? as usize;
        let reason = f.string("reason")?;
        let varies = f.opt_bool("varies")?.unwrap_or(false);
        let conditions = f.get("kernel").map(|n| vec![("kernel".to_string(), n.clone())]);
        let table = Kind::Table(conditions.unwrap_or_default());
        let when = self.when(&Node { line: node.line, kind: table })?;
        f.finish(&["line", "reason", "kernel", "varies"])?;
        Ok(HostDiffers { line: node.line, at, when, reason, varies })
    }

    /// `[[time_order]]`: an operation's or expectation's result that holds only in time order
    /// (without `line`, every one), and why.
    fn time_order(&self, node: &Node) -> Result<TimeOrder, ScenarioError> {
        let f = self.fields(node, "[[time_order]]")?;
        let at = f.opt_u64("line")?.map(|at| at as usize);
        let reason = f.string("reason")?;
        f.finish(&["line", "reason"])?;
        Ok(TimeOrder { line: node.line, at, reason })
    }

    /// Each `[[host_differs]]` and `[[time_order]]` names the line of an operation or an
    /// expectation.
    fn check_lines(&self, s: &Scenario) -> Result<(), ScenarioError> {
        let expects = s.steps.iter().flat_map(|st| &st.expects).chain(&s.expects);
        let mut lines: Vec<usize> = s.all_ops().map(|op| op.line).collect();
        lines.extend(expects.map(|e| e.line));
        let declared = s.host_differs.iter().map(|d| ("[[host_differs]]", d.line, d.at));
        let timed = s.time_order.iter().filter_map(|d| Some(("[[time_order]]", d.line, d.at?)));
        let declared = declared.chain(timed);
        for (table, line, at) in declared {
            if !lines.contains(&at) {
                let what = format!("{table}: line {at} holds no operation or expectation");
                return Err(self.err(line, what));
            }
        }
        Ok(())
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
        let [ra_kb, around, swappiness, min_ttl_ms, h0, h1, h2, h3, m0, m1] = self.tunables(&f)?;
        let costs = match f.get("costs") {
            Some(n) => self.machine_costs(n, resized.costs.clone())?,
            None => Vec::new(),
        };
        let sysfs = f.get("sysfs").map_or(Ok(Vec::new()), |n| self.machine_sysfs(n, kernel))?;
        let seed = f.opt_u64("seed")?.unwrap_or(0);
        let swap = f.opt_device("swap")?;
        let pmem = f.opt_device("pmem")?;
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
            "sysfs",
        ])?;
        Ok(MachineSpec {
            profile: profile_name,
            cpus: Some(resized.cpus),
            memory: Some(resized.memory),
            kernel,
            switch_overrides,
            seed,
            scheduler,
            ra_pages: ra_kb.map(|kb| kb / 4),
            swap,
            pmem,
            fault_around_pages: around.map(|b| (b / 4096).max(1)),
            swappiness,
            min_ttl_ms,
            hugepages: [h0, h1, h2, h3, m0, m1],
            costs,
            sysfs,
        })
    }

    /// `[machine.costs]`: cost overrides in ns, each checked against `table`.
    fn machine_costs(
        &self,
        node: &Node,
        mut table: mm::sim::cost::CostTable,
    ) -> Result<Vec<(String, u64)>, ScenarioError> {
        let c = self.fields(node, "[machine.costs]")?;
        let mut costs = Vec::new();
        for (key, value) in c.entries {
            let Kind::Int(ns) = value.kind else {
                return Err(self
                    .err(value.line, format!("cost `{key}`: expected nanoseconds as an integer")));
            };
            let ns = u64::try_from(ns)
                .map_err(|_| self.err(value.line, format!("cost `{key}`: must not be negative")))?;
            table.set(key, ns).map_err(|e| self.err(value.line, e))?;
            costs.push((key.clone(), ns));
        }
        c.mark_all();
        Ok(costs)
    }

    /// `[machine.sysfs]`: THP knobs by sysfs path, each checked by writing it to a default
    /// policy of `kernel` (a `--kernel` override checks again when the machine is built).
    fn machine_sysfs(
        &self,
        node: &Node,
        kernel: KernelVersion,
    ) -> Result<Vec<(String, String)>, ScenarioError> {
        let t = self.fields(node, "[machine.sysfs]")?;
        let mut scratch = mm::types::huge_mm::ThpSettings::default();
        let mut out = Vec::new();
        for (path, value) in t.entries {
            let knob = mm::huge_memory::policy::sysfs_knob(path).ok_or_else(|| {
                self.err(
                    value.line,
                    format!(
                        "`{path}`: expected a path under {}",
                        mm::huge_memory::policy::SYSFS_DIR
                    ),
                )
            })?;
            let text = fields::scalar_node_text(self, path, "[machine.sysfs]", value)?;
            scratch.set(knob, &text, kernel).map_err(|e| self.err(value.line, e))?;
            out.push((knob.to_string(), text));
        }
        t.mark_all();
        Ok(out)
    }

    /// `[machine.tunables]`, each within its range, in [`TUNABLES`] order.
    fn tunables(&self, machine: &Fields) -> Result<[Option<u64>; 10], ScenarioError> {
        let mut out = [None; 10];
        if let Some(n) = machine.get("tunables") {
            let t = self.fields(n, "[machine.tunables]")?;
            for (slot, key) in out.iter_mut().zip(TUNABLES) {
                *slot = t.opt_tunable(key)?;
            }
            t.finish(&TUNABLES)?;
        }
        Ok(out)
    }

    fn file_decl(&self, node: &Node) -> Result<FileDecl, ScenarioError> {
        let f = self.fields(node, "[[file]]")?;
        let path = f.string("path")?;
        let size = f.size("size")?;
        let fs = match f.opt_str("fs")? {
            Some(name) => parse_fs(&name).map_err(|e| self.err(f.line_of("fs"), e))?,
            None => mm::types::fs::FsType::Disk,
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

    fn expect(&self, node: &Node) -> Result<Expect, ScenarioError> {
        let f = self.fields(node, "[[expect]]")?;
        let kinds = EXPECT_KINDS;
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
            "stat" => self.stat_observable(&f)?,
            "signals" => self.signals_observable(&f)?,
            "fstat" => self.fstat_observable(&f)?,
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
            "sysfs" => Observable::Sysfs { path: f.string("sysfs")? },
            "model" => self.model_observable(&f)?,
            "inspect" => self.inspect_observable(&f)?,
            "kpageflags" | "kpagecount" => self.kpage_observable(&f, kind)?,
            "invariant" => self.invariant_observable(&f)?,
            "lru_gen" => self.lru_gen_observable(&f)?,
            "lock_stat" => self.lock_stat_observable(&f)?,
            "maps" => self.maps_observable(&f)?,
            "memory_stat" => Observable::MemoryStat {
                cgroup: f.string("cgroup")?,
                name: f.string("memory_stat")?,
            },
            _ => self.pagemap_observable(&f)?,
        };
        let cmp = self.comparison(&f, node.line)?;
        let when = f.get("when").map(|w| self.when(w)).transpose()?.unwrap_or_default();
        let known = [
            kind, "process", "at", "cgroup", "path", "fd", "index", "seq", "column", "frame",
            "equals", "kb", "is", "holds", "at_least", "at_most",
        ];
        f.finish(&[&known[..], &["when"]].concat())?;
        Ok(Expect { line: node.line, what, cmp, when })
    }

    /// An expectation's one comparison: `equals`, `kb`, `is`, `holds`, `at_least` or `at_most`.
    pub(super) fn comparison(
        &self,
        f: &Fields<'_>,
        line: usize,
    ) -> Result<Comparison, ScenarioError> {
        let cmps: Vec<Comparison> = [
            f.opt_u64("equals")?.map(Comparison::Equals),
            f.opt_u64("kb")?.map(Comparison::Equals),
            f.opt_bool("is")?.map(|b| Comparison::Equals(u64::from(b))),
            f.opt_bool("holds")?.map(|b| Comparison::Equals(u64::from(b))),
            f.opt_u64("at_least")?.map(Comparison::AtLeast),
            f.opt_u64("at_most")?.map(Comparison::AtMost),
        ]
        .into_iter()
        .flatten()
        .collect();
        let [cmp] = cmps[..] else {
            return Err(self.err(
                line,
                "an expectation needs exactly one of equals, kb, is, holds, at_least, at_most",
            ));
        };
        Ok(cmp)
    }

    /// A `pagemap = BIT` observable of `process` at `at`.
    fn pagemap_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        let name = f.string("pagemap")?;
        let bit = PagemapBit::named(&name).ok_or_else(|| {
            self.err(
                f.line_of("pagemap"),
                format!("unknown pagemap bit `{name}`: expected one of {}", PagemapBit::NAMES),
            )
        })?;
        Ok(Observable::Pagemap { process: f.string("process")?, at: f.addr("at")?, bit })
    }

    /// `maps = "count"`: the lines of a process's `/proc/PID/maps`.
    fn maps_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        match f.string("maps")?.as_str() {
            "count" => Ok(Observable::MapsCount { process: f.string("process")? }),
            other => Err(self.err(
                f.line_of("maps"),
                format!("`maps = \"{other}\"`: expected \"count\" (the VMAs)"),
            )),
        }
    }

    /// A `lock_stat = CLASS` observable: a `/proc/lock_stat` column (`acquisitions` unless
    /// `column` names another).
    fn lock_stat_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        use super::model::LockStatColumn;
        let name = f.opt_str("column")?.unwrap_or_else(|| "acquisitions".into());
        let Some(&(_, column)) = LockStatColumn::NAMES.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = LockStatColumn::NAMES.iter().map(|(n, _)| *n).collect();
            return Err(self.err(
                f.line_of("column"),
                format!("unknown lock_stat column `{name}`: expected {}", names.join(", ")),
            ));
        };
        Ok(Observable::LockStat { class: f.string("lock_stat")?, column })
    }

    /// An `lru_gen = FIELD` observable of `cgroup` (the root by default): `max_seq`,
    /// `min_seq_anon`, `min_seq_file`, or `anon_pages`/`file_pages` of generation `seq` (a
    /// number, `"youngest"` or `"oldest"`).
    fn lru_gen_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        use super::model::{GenSeq, LruGenField};
        let name = f.string("lru_gen")?;
        let seq = || -> Result<GenSeq, ScenarioError> {
            let text = f.scalar_text("seq")?;
            match text.as_str() {
                "youngest" => Ok(GenSeq::Youngest),
                "oldest" => Ok(GenSeq::Oldest),
                t => t.parse().map(GenSeq::Seq).map_err(|_| {
                    self.err(
                        f.line_of("seq"),
                        format!(
                            "`seq = {t}`: expected a sequence number, \"youngest\" or \"oldest\""
                        ),
                    )
                }),
            }
        };
        let field = match name.as_str() {
            "max_seq" => LruGenField::MaxSeq,
            "min_seq_anon" => LruGenField::MinSeq { file: false },
            "min_seq_file" => LruGenField::MinSeq { file: true },
            "anon_pages" => LruGenField::Pages { file: false, seq: seq()? },
            "file_pages" => LruGenField::Pages { file: true, seq: seq()? },
            _ => {
                return Err(self.err(
                    f.line_of("lru_gen"),
                    format!("unknown lru_gen field `{name}`: expected max_seq, min_seq_anon, min_seq_file, anon_pages, file_pages"),
                ));
            }
        };
        let cgroup = f.opt_str("cgroup")?.unwrap_or_else(|| "/".into());
        Ok(Observable::LruGen { cgroup, field })
    }

    /// A `signals = "SIGBUS"` observable: the signals of that kind `process` received.
    fn signals_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        let name = f.string("signals")?;
        let signal = mm::Signal::from_name(&name).ok_or_else(|| {
            self.err(f.line_of("signals"), format!("`{name}`: expected SIGSEGV, SIGBUS or SIGKILL"))
        })?;
        Ok(Observable::Signals { process: f.string("process")?, signal })
    }

    /// A `stat = FIELD` observable: a `/proc/PID/stat` field the model keeps.
    fn stat_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        let field = f.string("stat")?;
        let known = mm::fs::proc::array::STAT_FIELDS;
        if !known.iter().any(|(n, _)| *n == field) {
            let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
            return Err(self.err(
                f.line_of("stat"),
                format!(
                    "`{field}` of /proc/PID/stat is not one the model keeps: expected one of {}",
                    names.join(", ")
                ),
            ));
        }
        Ok(Observable::Stat { process: f.string("process")?, field })
    }

    /// An `fstat = FIELD` observable: a `struct stat` field of the file at `path`, or of the
    /// descriptor `fd` of `process`.
    fn fstat_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        let field = f.string("fstat")?;
        if !mm::fs::stat::STAT_FIELDS.contains(&field.as_str()) {
            return Err(self.err(
                f.line_of("fstat"),
                format!("`{field}`: expected one of {}", mm::fs::stat::STAT_FIELDS.join(", ")),
            ));
        }
        let file = match (f.opt_str("path")?, f.opt_str("fd")?) {
            (Some(path), None) => FileRef::Path(path),
            (None, Some(fd)) => FileRef::Fd { process: f.string("process")?, fd },
            _ => {
                return Err(self.err(
                    f.line_of("fstat"),
                    "`fstat` needs exactly one of `path` or `fd` (with `process`)",
                ));
            }
        };
        Ok(Observable::Fstat { file, field })
    }

    /// A `/proc/kpageflags` bit (`kpageflags = "THP"`) or `/proc/kpagecount` (`kpagecount =
    /// true`) at `process`'s address `at`.
    fn kpage_observable(&self, f: &Fields<'_>, kind: &str) -> Result<Observable, ScenarioError> {
        if kind == "kpageflags" && f.get("frame").is_some() {
            let flag = self.kpf_name(f)?;
            return Ok(Observable::FrameFlags { frame: f.string("frame")?, flag });
        }
        let (process, at) = (f.string("process")?, f.addr("at")?);
        if kind == "kpagecount" {
            if f.opt_bool("kpagecount")? != Some(true) {
                let why = "`kpagecount = true` reads /proc/kpagecount";
                return Err(self.err(f.line_of("kpagecount"), why));
            }
            return Ok(Observable::Kpagecount { process, at });
        }
        Ok(Observable::Kpageflags { process, at, flag: self.kpf_name(f)? })
    }

    /// A `kpageflags = "NAME"` bit (`KPF_` optional), checked against the kernel's names.
    fn kpf_name(&self, f: &Fields<'_>) -> Result<String, ScenarioError> {
        let flag = f.string("kpageflags")?;
        let flag = flag.strip_prefix("KPF_").unwrap_or(&flag).to_string();
        if mm::fs::proc::page::kpf_bit(&flag).is_none() {
            let names: Vec<&str> = mm::fs::proc::page::KPF.iter().map(|(n, _)| *n).collect();
            return Err(self.err(
                f.line_of("kpageflags"),
                format!("unknown kpageflags bit `{flag}`: expected one of {}", names.join(", ")),
            ));
        }
        Ok(flag)
    }

    /// A `model = NAME` observable, the older spelling of two inspected fields:
    /// `collapse_truncated_rollbacks`, and `nr_thps` of the file at `path`
    /// (`mapping.nr_thps`).
    fn model_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        let name = f.string("model")?;
        let path = f.opt_str("path")?;
        let on = match (name.as_str(), path) {
            ("collapse_truncated_rollbacks", None) => InspectOn::Machine,
            ("nr_thps", Some(p)) => InspectOn::Mapping(FileRef::Path(p)),
            _ => {
                return Err(self.err(
                    f.line_of("model"),
                    format!(
                        "`model = \"{name}\"`: expected collapse_truncated_rollbacks, or nr_thps with a `path` (both are `inspect` fields now)"
                    ),
                ));
            }
        };
        let field = if name == "nr_thps" { "mapping.nr_thps".into() } else { name };
        Ok(Observable::Inspect { field, on })
    }

    /// An `inspect = FIELD` observable (`mm::inspect`): a known name, read where its keys say
    /// (`process` + `at`; `path` or `process` + `fd`, with `index` for a page-cache entry;
    /// nothing for a machine-wide field).
    fn inspect_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        use mm::inspect::{Target, reads_on};
        let field = f.string("inspect")?;
        let line = f.line_of("inspect");
        let Some(known) = mm::inspect::field(&field) else {
            let why =
                mm::inspect::unavailable(&field, KernelVersion::DEFAULT, &Switches::default());
            return Err(self.err(line, why.unwrap_or_default()));
        };
        let file = match (f.opt_str("path")?, f.opt_str("fd")?) {
            (Some(p), None) => Some(FileRef::Path(p)),
            (None, Some(fd)) => Some(FileRef::Fd { process: f.string("process")?, fd }),
            (None, None) => None,
            _ => return Err(self.err(line, "`inspect` takes `path` or `fd`, not both")),
        };
        let index = f.opt_u64("index")?;
        let on = match (file, index) {
            (Some(file), Some(index)) if reads_on(&field, Target::Index) => {
                InspectOn::Index { file, index }
            }
            (Some(file), None) if known.target == Target::Mapping => InspectOn::Mapping(file),
            (Some(FileRef::Fd { process, fd }), None) if known.target == Target::File => {
                InspectOn::File { process, fd }
            }
            (None, None) if known.target == Target::Addr => {
                InspectOn::Addr { process: f.string("process")?, at: f.addr("at")? }
            }
            (None, None) if known.target == Target::Global => InspectOn::Machine,
            _ => {
                let wanted = match known.target {
                    Target::Addr if reads_on(&field, Target::Index) => {
                        "`process` and `at`, or `path` (or `process` and `fd`) and `index`"
                    }
                    Target::Addr => "`process` and `at`",
                    Target::Index => "`path` (or `process` and `fd`) and `index`",
                    Target::Mapping => "`path` (or `process` and `fd`)",
                    Target::File => "`process` and `fd`",
                    Target::Global => "no place (it is the machine's)",
                };
                return Err(self.err(line, format!("`inspect = \"{field}\"` reads on {wanted}")));
            }
        };
        Ok(Observable::Inspect { field, on })
    }

    /// An `invariant = NAME` observable: a whole-system checker by its name.
    fn invariant_observable(&self, f: &Fields<'_>) -> Result<Observable, ScenarioError> {
        let name = f.string("invariant")?;
        if !mm::sim::check::INVARIANTS.iter().any(|i| i.name == name) {
            let names: Vec<&str> = mm::sim::check::INVARIANTS.iter().map(|i| i.name).collect();
            return Err(self.err(
                f.line_of("invariant"),
                format!("unknown invariant `{name}`: expected one of {}", names.join(", ")),
            ));
        }
        Ok(Observable::Invariant { name })
    }

    /// An `[[explore]]` table (`in_run` false: `mmsim explore` and the races test check it
    /// under its own kernel) or a `[[schedules]]` one (`in_run`: `mmsim run` explores under
    /// the run's kernel and switches, `when` choosing the eras; `dfs:1` and 100 schedules
    /// unless given, and no violation expected unless `expect` says so).
    fn explore(&self, node: &Node, in_run: bool) -> Result<ExploreExpect, ScenarioError> {
        let what = if in_run { "[[schedules]]" } else { "[[explore]]" };
        let f = self.fields(node, what)?;
        let (kernel, sets) = if in_run { (None, Vec::new()) } else { self.explore_machine(&f)? };
        let strategy = match (in_run, f.opt_str("strategy")?) {
            (_, Some(s)) => s,
            (true, None) => "dfs:1".into(),
            (false, None) => f.string("strategy")?,
        };
        let seed = f.opt_u64("seed")?.unwrap_or(0);
        f.opt_device("swap")?;
        explore::Strategy::from_spec(&strategy, seed)
            .map_err(|e| self.err(f.line_of("strategy"), e.to_string()))?;
        let budget = f.opt_u64("budget")?.unwrap_or(if in_run { 100 } else { 2000 });
        let expect = match (in_run, f.opt_str("expect")?) {
            (_, Some(e)) => e,
            (true, None) => "none".into(),
            (false, None) => f.string("expect")?,
        };
        let violation =
            match expect.as_str() {
                "violation" => true,
                "none" => false,
                other => return Err(self.err(
                    f.line_of("expect"),
                    format!(
                        "`expect` in {what}: expected \"violation\" or \"none\", found \"{other}\""
                    ),
                )),
            };
        let reach = f.get("reach").map(|n| self.expect(n)).transpose()?;
        let never = f.get("never").map(|n| self.expect(n)).transpose()?;
        let when = f.get("when").map(|w| self.when(w)).transpose()?.unwrap_or_default();
        let keys: &[&str] = if in_run { &["when"] } else { &["kernel", "set"] };
        f.finish(&[keys, &["strategy", "budget", "seed", "expect", "reach", "never"]].concat())?;
        let line = node.line;
        Ok(ExploreExpect {
            line,
            kernel,
            sets,
            strategy,
            budget,
            seed,
            violation,
            reach,
            never,
            when,
        })
    }

    /// An `[[explore]]` table's `kernel` and `set`.
    fn explore_machine(
        &self,
        f: &Fields<'_>,
    ) -> Result<(Option<KernelVersion>, SwitchSets), ScenarioError> {
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
        Ok((kernel, sets))
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn time_order_names_a_result_or_the_whole_scenario() {
        let base =
            "[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ { op = \"fork\" } ]\n";
        let decl = |extra: &str| format!("{base}[[time_order]]\n{extra}reason = \"a sleep\"\n");
        assert_eq!(
            err(&decl("line = 4\n")),
            "s.toml:6: [[time_order]]: line 4 holds no operation or expectation"
        );
        let s = parse_scenario("s.toml", &decl("line = 5\n")).unwrap();
        assert!(TimeOrder::covers(&s.time_order, 5) && !TimeOrder::covers(&s.time_order, 4));
        let s = parse_scenario("s.toml", &decl("")).unwrap();
        assert!(TimeOrder::covers(&s.time_order, 4));
        assert!(err(&format!("{base}[[time_order]]\nline = 5\n")).starts_with("s.toml:6:"));
    }

    #[test]
    fn loops_are_bounded_and_their_flags_raised() {
        let task = |ops: &str| {
            format!("[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ {ops} ]\n")
        };
        let body = "ops = [ { op = \"sleep\", duration = \"1us\" } ]";
        assert_eq!(
            err(&task(&format!("{{ op = \"repeat\", until = \"success\", {body} }}"))),
            "s.toml:5: `repeat` with `until` needs `max`, the most iterations it may take: an unbounded loop is not a scenario"
        );
        assert_eq!(
            err(&task(&format!("{{ op = \"repeat\", times = 2000000, {body} }}"))),
            "s.toml:5: `times` in `repeat`: expected 1 to 1000000"
        );
        assert_eq!(
            err(&task(&format!(
                "{{ op = \"repeat\", until = \"flag\", flag = \"f\", max = 3, {body} }}"
            ))),
            "s.toml:5: `repeat`: no `notify` raises flag `f`"
        );
        assert_eq!(
            err(&task("{ op = \"repeat\", times = 3, max = 4, ops = [] }")),
            "s.toml:5: `max` does not belong to this `repeat`"
        );
        let nested = format!(
            "{{ op = \"repeat\", times = 2, ops = [ {{ op = \"repeat\", times = 2, {body} }} ] }}"
        );
        assert_eq!(err(&task(&nested)), "s.toml:5: a `repeat` inside a `repeat` is not supported");
        let long = "{ op = \"repeat\", times = 1000000, ops = [ { op = \"sleep\", duration = \"3600s\" } ] }";
        assert_eq!(
            err(&task(long)),
            "s.toml:5: `repeat`: its sleeps add up to more than 100 years of virtual time"
        );
        let ok = format!(
            "{{ op = \"repeat\", times = 2, expect = {{ iterations = 2 }}, {body} }}, {{ op = \"notify\", flag = \"f\" }}, {{ op = \"wait\", flag = \"f\" }}"
        );
        let s = parse_scenario("s.toml", &task(&ok)).unwrap();
        assert_eq!(s.all_ops().count(), 4, "the body's operation counts");
    }

    #[test]
    fn uffd_messages_are_read_by_event() {
        let task = |ops: &str| {
            let u = "{ op = \"userfaultfd\", as = \"u\" }";
            format!("[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ {u}, {ops} ]\n")
        };
        let read = |expect: &str| {
            format!("{{ op = \"uffd_read\", fd = \"u\", as = \"c\", expect = {expect} }}")
        };
        let unknown = err(&task(&read("{ event = \"exit\" }")));
        assert!(unknown.contains("`event`: unknown `exit`: expected pagefault, fork"), "{unknown}");
        let mixed =
            read("{ event = \"remove\", start = \"0x1000\", end = \"0x2000\", write = true }");
        assert!(err(&task(&mixed)).contains("`write`: a remove message has no `write`"));
        let missing = err(&task(&read("{ event = \"remap\", from = \"0x1000\" }")));
        assert!(missing.contains("`to`"), "{missing}");
        // A fork event's read binds the child's descriptor, which later operations take.
        let fork =
            format!("{}, {{ op = \"uffdio_api\", fd = \"c\" }}", read("{ event = \"fork\" }"));
        assert!(parse_scenario("s.toml", &task(&fork)).is_ok());
        let fault =
            format!("{}, {{ op = \"uffdio_api\", fd = \"c\" }}", read("{ addr = \"0x1000\" }"));
        assert!(err(&task(&fault)).contains("`c`"), "{}", err(&task(&fault)));
    }

    #[test]
    fn unmodelled_kernel_features_are_refused_by_name() {
        let task = |ops: &str| {
            format!("[[process]]\nname = \"p\"\n[[step]]\nprocess = \"p\"\nops = [ {ops} ]\n")
        };
        assert_eq!(
            err(&task("{ op = \"uffdio_move\" }")),
            "s.toml:5: `uffdio_move`: UFFDIO_MOVE (v6.8) is not modelled by mmsim"
        );
        let wp = "{ op = \"uffdio_api\", fd = \"u\", features = \"event_fork|wp_unpopulated\" }";
        assert!(err(&task(wp)).contains("`wp_unpopulated`: UFFD_FEATURE_WP_UNPOPULATED"));
        let wpa = "{ op = \"uffdio_api\", fd = \"u\", features = \"minor_shmem|wp_async\" }";
        assert!(err(&task(wpa)).contains("UFFD_FEATURE_WP_ASYNC"));
        assert!(err(&task("{ op = \"mbind\" }")).contains("NUMA memory policy"));
        let hwpoison = "{ op = \"madvise\", addr = \"0x1000\", len = 4096, advice = \"hwpoison\" }";
        assert!(
            err(&task(hwpoison)).contains("`hwpoison`: MADV_HWPOISON"),
            "{}",
            err(&task(hwpoison))
        );
        let low = "{ op = \"mmap\", len = 4096, prot = \"rw\", flags = \"private|32bit\" }";
        assert!(err(&task(low)).contains("`32bit`: MAP_32BIT"), "{}", err(&task(low)));
        let offline = "{ op = \"madvise\", addr = \"0x1000\", len = 4096, advice = 101 }";
        assert!(err(&task(offline)).contains("MADV_SOFT_OFFLINE"), "{}", err(&task(offline)));
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
