//! Name resolution: the names a scenario binds (`as = "buf"` on an operation, processes,
//! forked children, cgroups) checked before any run, so that a name is bound once, before it is
//! used, and to a value of the kind its use needs (an address, a file descriptor, pages held by
//! `pin`, a pipe, a process, an exec layout); cgroups and `show` targets must be declared.

use super::Parser;
use crate::scenario::ScenarioError;
use crate::scenario::model::*;
use std::collections::BTreeMap;

impl Parser<'_> {
    /// Checks that names are bound before use and once, process by process, step by step.
    pub(super) fn check_names(&self, s: &Scenario) -> Result<(), ScenarioError> {
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
                for op in task.ops.iter().flat_map(Op::flatten) {
                    for (name, want) in op_refs(&op.kind) {
                        let base = name.split('.').next().unwrap_or(&name);
                        let found = lookup(&local, base);
                        let ok = match (found, want) {
                            (Some(ValueKind::Layout), ValueKind::Addr) => {
                                name.contains('.')
                                    && ["text", "rodata", "data", "bss", "stack"]
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
                            let why = if found.is_none() {
                                "is not bound before this operation"
                            } else {
                                "is bound to something else"
                            };
                            return Err(self.err(
                                op.line,
                                format!(
                                    "`{}`: `{name}` {why} (expected {})",
                                    op.kind.name(),
                                    want.describe()
                                ),
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
        check_model_paths(self, s)?;
        check_flags(self, s)?;
        check_cgroup_refs(self, s)?;
        check_show_names(self, s, &env)
    }
}

/// Every process and cgroup a `show` names is declared.
fn check_show_names(
    p: &Parser<'_>,
    s: &Scenario,
    env: &BTreeMap<String, (ValueKind, usize)>,
) -> Result<(), ScenarioError> {
    for show in &s.show {
        let name = match show {
            Show::Smaps(n) | Show::SmapsRollup(n) | Show::Maps(n) | Show::Status(n) => n,
            Show::Stat(n) | Show::Inspect(n, _) | Show::PageTypes(n, _) => n,
            Show::MemoryStat(c) => {
                if !s.cgroups.iter().any(|d| &d.path == c) {
                    return Err(p.err(1, format!("show: cgroup `{c}` is not declared")));
                }
                continue;
            }
            Show::Vmstat | Show::Meminfo | Show::LockStat | Show::Lockdep | Show::LruGen => {
                continue;
            }
        };
        if env.get(name).map(|&(k, _)| k) != Some(ValueKind::Process) {
            return Err(p.err(1, format!("show: `{name}` is not a process")));
        }
    }
    Ok(())
}

/// Every cgroup an operation or an expectation names is declared.
fn check_cgroup_refs(p: &Parser<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let cgroup_refs = s.steps.iter().flat_map(|st| {
        let ops = st.tasks.iter().flat_map(|t| &t.ops).flat_map(Op::flatten);
        let ops = ops.filter_map(|op| match &op.kind {
            OpKind::MemoryReclaim { cgroup, .. } => Some((op.line, cgroup)),
            _ => None,
        });
        let exps = st.expects.iter().filter_map(|e| match &e.what {
            Observable::MemoryStat { cgroup, .. } => Some((e.line, cgroup)),
            Observable::LruGen { cgroup, .. } if cgroup != "/" => Some((e.line, cgroup)),
            _ => None,
        });
        ops.chain(exps).collect::<Vec<_>>()
    });
    let top_refs = s.expects.iter().filter_map(|e| match &e.what {
        Observable::MemoryStat { cgroup, .. } => Some((e.line, cgroup)),
        Observable::LruGen { cgroup, .. } if cgroup != "/" => Some((e.line, cgroup)),
        _ => None,
    });
    for (line, c) in cgroup_refs.chain(top_refs) {
        if !s.cgroups.iter().any(|d| &d.path == c) {
            return Err(p.err(line, format!("cgroup `{c}` is not declared")));
        }
    }
    Ok(())
}

/// Every flag a task waits for, or a loop repeats until, is raised by some `notify`: a wait
/// nothing ends is a mistake in the file, not a deadlock to find.
fn check_flags(p: &Parser<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let raised: Vec<&String> = s
        .all_ops()
        .filter_map(|op| match &op.kind {
            OpKind::Notify { flag } => Some(flag),
            _ => None,
        })
        .collect();
    for op in s.all_ops() {
        let awaited = match &op.kind {
            OpKind::Wait { flag } | OpKind::Repeat { until: Until::Flag(flag), .. } => flag,
            _ => continue,
        };
        if !raised.contains(&awaited) {
            return Err(p.err(
                op.line,
                format!("`{}`: no `notify` raises flag `{awaited}`", op.kind.name()),
            ));
        }
    }
    Ok(())
}

/// A file an inspected field names by path is declared.
fn check_model_paths(p: &Parser<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let all_expects = s.steps.iter().flat_map(|st| &st.expects).chain(&s.expects);
    for e in all_expects {
        let path = match &e.what {
            Observable::Inspect { on: InspectOn::Mapping(FileRef::Path(path)), .. }
            | Observable::Inspect {
                on: InspectOn::Index { file: FileRef::Path(path), .. }, ..
            } => Some(path),
            _ => None,
        };
        if let Some(path) = path
            && !s.files.iter().any(|f| &f.path == path)
        {
            return Err(p.err(e.line, format!("file `{path}` is not declared")));
        }
    }
    Ok(())
}

/// The process an observable reads, and the address it reads at.
fn observable_process(what: &Observable) -> (Option<&String>, Option<&AddrExpr>) {
    match what {
        Observable::Smaps { process, at, .. }
        | Observable::Pagemap { process, at, .. }
        | Observable::Kpageflags { process, at, .. }
        | Observable::Kpagecount { process, at }
        | Observable::Inspect { on: InspectOn::Addr { process, at }, .. } => {
            (Some(process), Some(at))
        }
        Observable::SmapsRollup { process, .. }
        | Observable::Status { process, .. }
        | Observable::Stat { process, .. }
        | Observable::Signals { process, .. }
        | Observable::MapsCount { process }
        | Observable::Inspect { on: InspectOn::File { process, .. }, .. }
        | Observable::Inspect { on: InspectOn::Mapping(FileRef::Fd { process, .. }), .. }
        | Observable::Inspect {
            on: InspectOn::Index { file: FileRef::Fd { process, .. }, .. },
            ..
        }
        | Observable::Fstat { file: FileRef::Fd { process, .. }, .. } => (Some(process), None),
        Observable::Vmstat { .. }
        | Observable::Meminfo { .. }
        | Observable::MemoryStat { .. }
        | Observable::LruGen { .. }
        | Observable::LockStat { .. }
        | Observable::FrameFlags { .. }
        | Observable::Sysfs { .. }
        | Observable::Fstat { file: FileRef::Path(_), .. }
        | Observable::Inspect { .. }
        | Observable::Invariant { .. } => (None, None),
    }
}

fn check_observable_names(
    p: &Parser<'_>,
    e: &Expect,
    env: &BTreeMap<String, (ValueKind, usize)>,
) -> Result<(), ScenarioError> {
    let (process, at) = observable_process(&e.what);
    if let Some(process) = process
        && env.get(process).map(|&(k, _)| k) != Some(ValueKind::Process)
    {
        return Err(p.err(
            e.line,
            format!("`{process}` is not a process declared or forked before this expectation"),
        ));
    }
    let fd = match &e.what {
        Observable::Fstat { file: FileRef::Fd { fd, .. }, .. }
        | Observable::Inspect { on: InspectOn::File { fd, .. }, .. }
        | Observable::Inspect { on: InspectOn::Mapping(FileRef::Fd { fd, .. }), .. }
        | Observable::Inspect {
            on: InspectOn::Index { file: FileRef::Fd { fd, .. }, .. }, ..
        } => Some(fd),
        _ => None,
    };
    if let Some(fd) = fd {
        let root = fd.split('.').next().unwrap_or(fd);
        if !matches!(env.get(root).map(|&(k, _)| k), Some(ValueKind::Fd | ValueKind::Pipe)) {
            return Err(p.err(
                e.line,
                format!("`{fd}` is not a file descriptor bound before this expectation"),
            ));
        }
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

/// The name an address expression refers to.
fn addr(a: &AddrExpr) -> Vec<(String, ValueKind)> {
    a.base.iter().map(|b| (b.clone(), ValueKind::Addr)).collect()
}

/// The descriptor name `f`.
fn fd(f: &str) -> Vec<(String, ValueKind)> {
    vec![(f.to_string(), ValueKind::Fd)]
}

/// Descriptor `f` and the names of the addresses `a`.
fn fd_and<'a>(f: &str, a: impl IntoIterator<Item = &'a AddrExpr>) -> Vec<(String, ValueKind)> {
    fd(f).into_iter().chain(a.into_iter().flat_map(addr)).collect()
}

/// Segment `id` and the names of the addresses `a`.
fn shm_and<'a>(id: &str, a: impl IntoIterator<Item = &'a AddrExpr>) -> Vec<(String, ValueKind)> {
    std::iter::once((id.to_string(), ValueKind::Shm)).chain(a.into_iter().flat_map(addr)).collect()
}

/// The names a userfaultfd operation reads.
fn uffd_refs(u: &UffdOp) -> Vec<(String, ValueKind)> {
    match u {
        UffdOp::Create { .. } => Vec::new(),
        UffdOp::Api { fd: f, .. } | UffdOp::Read { fd: f, .. } => fd(f),
        UffdOp::Register { fd: f, addr: a, .. }
        | UffdOp::Unregister { fd: f, addr: a, .. }
        | UffdOp::Wake { fd: f, addr: a, .. }
        | UffdOp::Writeprotect { fd: f, addr: a, .. }
        | UffdOp::Zeropage { fd: f, dst: a, .. }
        | UffdOp::Continue { fd: f, dst: a, .. } => fd(f).into_iter().chain(addr(a)).collect(),
        UffdOp::Copy { fd: f, dst, src, .. } => {
            fd(f).into_iter().chain(addr(dst)).chain(addr(src)).collect()
        }
    }
}

/// The names `mmap` and `mremap` read: their addresses and `mmap`'s descriptor.
fn map_refs(k: &OpKind) -> Vec<(String, ValueKind)> {
    match k {
        OpKind::Mmap { addr: a, fd: f, .. } => {
            a.iter().flat_map(addr).chain(f.iter().flat_map(|f| fd(f))).collect()
        }
        OpKind::Mremap { addr: a, new_addr: n, .. } => {
            addr(a).into_iter().chain(n.iter().flat_map(addr)).collect()
        }
        _ => unreachable!("`op_refs` routes only `mmap` and `mremap` here"),
    }
}

/// The names an operation reads, with the kind each must be.
fn op_refs(k: &OpKind) -> Vec<(String, ValueKind)> {
    match k {
        OpKind::Mmap { .. } | OpKind::Mremap { .. } => map_refs(k),
        OpKind::Shmat { shmid, addr: a, .. } => shm_and(shmid, a),
        OpKind::Shmctl { shmid, .. } => shm_and(shmid, None),
        OpKind::Munmap { addr: a, .. }
        | OpKind::Shmdt { addr: a }
        | OpKind::Brk { addr: a }
        | OpKind::Mprotect { addr: a, .. }
        | OpKind::RemapFilePages { addr: a, .. }
        | OpKind::Madvise { addr: a, .. }
        | OpKind::Mlock { addr: a, .. }
        | OpKind::Munlock { addr: a, .. }
        | OpKind::Mseal { addr: a, .. }
        | OpKind::Msync { addr: a, .. }
        | OpKind::Touch { addr: a, .. }
        | OpKind::ReadBytes { addr: a, .. }
        | OpKind::Mincore { addr: a, .. }
        | OpKind::WriteBytes { addr: a, .. }
        | OpKind::ProcMemWrite { addr: a, .. }
        | OpKind::Increment { addr: a }
        | OpKind::Pin { addr: a, .. }
        | OpKind::IoUringRegister { addr: a, .. }
        | OpKind::Pagemap { addr: a }
        | OpKind::Run { addr: a, .. } => addr(a),
        OpKind::Close { fd: f }
        | OpKind::Dup { fd: f }
        | OpKind::Fsync { fd: f }
        | OpKind::Ftruncate { fd: f, .. }
        | OpKind::Fadvise { fd: f, .. }
        | OpKind::Readahead { fd: f, .. }
        | OpKind::Cachestat { fd: f, .. }
        | OpKind::Write { fd: f, .. }
        | OpKind::Fallocate { fd: f, .. } => fd(f),
        OpKind::Read { fd: f, buf, .. } => fd_and(f, buf),
        OpKind::PreadDirect { fd: f, buf: a, .. }
        | OpKind::PwriteFrom { fd: f, buf: a, .. }
        | OpKind::Vmsplice { fd: f, addr: a, .. } => fd_and(f, [a]),
        OpKind::PinRead { hold, .. }
        | OpKind::Unpin { hold }
        | OpKind::IoUringUnregister { hold } => vec![(hold.clone(), ValueKind::Hold)],
        OpKind::ClearRefs { process, .. } => vec![(process.clone(), ValueKind::Process)],
        OpKind::Complete { io } => vec![(io.clone(), ValueKind::Io)],
        OpKind::Uffd(u) => uffd_refs(u),
        OpKind::Fixed { hold, addr: a, fd: f, .. } => {
            [(hold.clone(), ValueKind::Hold)].into_iter().chain(addr(a)).chain(fd(f)).collect()
        }
        OpKind::Open { .. }
        | OpKind::MemfdCreate { .. }
        | OpKind::Mlockall { .. }
        | OpKind::Munlockall
        | OpKind::Shmget { .. }
        | OpKind::Truncate { .. }
        | OpKind::Fork
        | OpKind::Exit
        | OpKind::Exec { .. }
        | OpKind::Sleep { .. }
        | OpKind::MemoryReclaim { .. }
        | OpKind::Prctl { .. }
        | OpKind::SysfsWrite { .. }
        | OpKind::SysfsRead { .. }
        | OpKind::Pipe
        | OpKind::Repeat { .. }
        | OpKind::Notify { .. }
        | OpKind::Wait { .. } => Vec::new(),
    }
}
