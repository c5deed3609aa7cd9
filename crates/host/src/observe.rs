//! The scenario's observables read from the real kernel's files, each in one comparison class
//! (`docs/host.md`):
//!
//! - **exact**: per-process values of the scenario's own mappings (`smaps` at an address,
//!   `pagemap` bits, `kpageflags`/`kpagecount` at the mapped frame, `fstat`), the signals and
//!   faults of the operations, the hugetlb pool's counts (the run sets the pool);
//! - **change**: a value the run's start moves from: process totals as the change since the
//!   agent was ready (`status`, `stat`'s `vsize` and `rss`), `smaps_rollup` as the sum over the
//!   scenario's own mappings (the agent's own are left out), THP and KSM sysfs counters;
//! - **noisy**: system-wide counters as the change around the scenario (`vmstat`, `meminfo`,
//!   `memory.stat`), which other processes and the agents' own pages also move: within
//!   [`noise`] of the model's value;
//! - **model only**: what the kernel does not show (the model's invariants, most `inspect`
//!   fields, host-chosen numbers such as PIDs and PFNs).

use lab::scenario::interp::Names;
use lab::scenario::model::{AddrExpr, Comparison, FileRef, InspectOn, Observable, PagemapBit};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

/// How a native reading compares with the model's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Class {
    Exact,
    Change,
    /// Within this many units (pages, kB or bytes) of the model's value, or 5 % of it.
    Noisy(u64),
    /// A daemon's progress counter (`full_scans`): how far the daemon got depends on real time
    /// against virtual time, so kernel and model agree when both meet the scenario's bound.
    Progress,
    /// Not read on the host, and why.
    ModelOnly(String),
}

/// The allowance of a noisy counter: 64 pages, in its unit (what an idle host's other processes
/// and the executor's own kernel work move in a scenario's time); 256 pages for the page
/// allocator's event counters, which every allocation on the host moves.
pub fn noise(what: &Observable) -> u64 {
    match what {
        Observable::Meminfo { .. } => 256,
        Observable::MemoryStat { .. } => 256 << 10,
        Observable::Vmstat { name } if name.starts_with("pgalloc") || name == "pgfree" => 256,
        _ => 64,
    }
}

/// Whether a meminfo line describes the hugetlb pools, which the run sets to the model's values
/// (`setup.rs`) and nothing else on the host uses: read as they are, not as a change.
fn is_hugetlb_pool(name: &str) -> bool {
    name.starts_with("HugePages_") || name == "Hugetlb"
}

/// Whether a sysfs or sysctl file is a hugetlb pool's (`/sys/kernel/mm/hugepages/...`,
/// `/proc/sys/vm/nr_hugepages`, ...), which the run sets: read as it is. Multi-size THP's
/// `transparent_hugepage/hugepages-<N>kB/` files are counters and knobs, not pools.
fn is_hugetlb_pool_file(path: &str) -> bool {
    path.contains("hugepages") && !path.contains("transparent_hugepage/")
}

/// Whether a sysfs file is a daemon's progress counter.
fn is_progress(path: &str) -> bool {
    path.ends_with("/full_scans")
}

/// What the host kernel can show, found once per run.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostTraits {
    /// `CONFIG_MEM_SOFT_DIRTY`.
    pub soft_dirty: bool,
    /// The memory controller is cgroup v1's, whose `memory.stat` has fewer names.
    pub cgroup_v1: bool,
}

/// The `memory.stat` names a cgroup v1 file has (and the v2 names `v1_name` maps to them).
const V1_STAT: [&str; 23] = [
    "cache",
    "rss",
    "rss_huge",
    "shmem",
    "mapped_file",
    "dirty",
    "writeback",
    "swap",
    "workingset_refault_anon",
    "workingset_refault_file",
    "swapcached",
    "pgpgin",
    "pgpgout",
    "pgfault",
    "pgmajfault",
    "inactive_anon",
    "active_anon",
    "inactive_file",
    "active_file",
    "unevictable",
    "anon",
    "file",
    "file_mapped",
];

/// The class of an operation's result: exact, but for numbers the host chooses.
pub fn op_class(op: &lab::scenario::model::Op) -> Class {
    use lab::scenario::model::{OpKind, ShmField};
    match &op.kind {
        OpKind::Shmctl { stat: Some(ShmField::Cpid | ShmField::Lpid), .. } => {
            Class::ModelOnly("a PID the host chooses".into())
        }
        OpKind::SysfsRead { path, .. } if is_progress(path) => Class::Progress,
        _ => Class::Exact,
    }
}

/// The class of an observable.
pub fn class(what: &Observable, host: HostTraits) -> Class {
    let soft_dirty = host.soft_dirty;
    match what {
        Observable::Smaps { .. }
        | Observable::MapsCount { .. }
        | Observable::Signals { .. }
        | Observable::Fstat { .. }
        | Observable::Kpageflags { .. }
        | Observable::FrameFlags { .. }
        | Observable::Kpagecount { .. } => Class::Exact,
        Observable::Pagemap { bit: PagemapBit::SoftDirty, .. } if !soft_dirty => {
            Class::ModelOnly("the host has no CONFIG_MEM_SOFT_DIRTY".into())
        }
        Observable::Pagemap { .. } => Class::Exact,
        Observable::Stat { field, .. } => match field.as_str() {
            "minflt" | "majflt" => Class::Exact,
            "vsize" | "rss" => Class::Change,
            _ => Class::ModelOnly(format!("`{field}` is the host's own number")),
        },
        // Page tables depend on where the host places the mappings: within two tables.
        Observable::Status { field, .. } if field == "VmPTE" || field == "VmPMD" => Class::Noisy(8),
        Observable::Status { .. } | Observable::SmapsRollup { .. } => Class::Change,
        Observable::MemoryStat { name, .. }
            if host.cgroup_v1 && !V1_STAT.contains(&name.as_str()) =>
        {
            Class::ModelOnly(format!("cgroup v1's memory.stat has no `{name}`"))
        }
        Observable::Sysfs { path } if is_hugetlb_pool_file(path) => Class::Exact,
        // Multi-size THP's per-size counters count every process's folios, as vmstat does.
        Observable::Sysfs { path } if path.contains("transparent_hugepage/hugepages-") => {
            Class::Noisy(noise(what))
        }
        Observable::Meminfo { name } if is_hugetlb_pool(name) => Class::Exact,
        Observable::Sysfs { path } if is_progress(path) => Class::Progress,
        Observable::Sysfs { .. } => Class::Change,
        Observable::Vmstat { .. } | Observable::Meminfo { .. } | Observable::MemoryStat { .. } => {
            Class::Noisy(noise(what))
        }
        Observable::Inspect { field, on } => inspect_class(field, on),
        Observable::Invariant { .. } => Class::ModelOnly("the model's own checker".into()),
        Observable::LruGen { .. } => {
            Class::ModelOnly("the host's lru_gen counts every process's pages".into())
        }
        Observable::LockStat { .. } => Class::ModelOnly("the model's lock classes".into()),
    }
}

/// The `inspect` fields the host shows: a page's flags through `/proc/kpageflags` (a folio's
/// since v6.10), its mapcount through `/proc/kpagecount`, a VMA's flags that smaps' `VmFlags`
/// shows.
fn inspect_class(field: &str, on: &InspectOn) -> Class {
    let at_addr = matches!(on, InspectOn::Addr { .. });
    let shown =
        field == "page.mapcount" || kpf_of(field).is_some() || smaps_flag_of(field).is_some();
    if at_addr && shown {
        Class::Exact
    } else {
        Class::ModelOnly(format!("`{field}` is the model's state (no /proc file shows it)"))
    }
}

/// The smaps `VmFlags` mnemonic an `inspect` field `vma.VM_*` reads, if smaps shows the flag.
fn smaps_flag_of(field: &str) -> Option<&'static str> {
    mm::inspect::vm_flag_field(field).and_then(mm::vma::VmFlags::mnemonic)
}

/// The `/proc/kpageflags` bit an `inspect` folio flag reads.
fn kpf_of(field: &str) -> Option<u32> {
    let flag = field.strip_prefix("folio.")?;
    let name = match flag {
        "locked" | "referenced" | "uptodate" | "dirty" | "lru" | "active" | "writeback"
        | "swapbacked" | "swapcache" | "unevictable" | "anon" => flag.to_ascii_uppercase(),
        _ => return None,
    };
    mm::fs::proc::page::kpf_bit(&name)
}

/// Whether a native value `v` meets `cmp` within `slack`.
pub fn holds_within(cmp: Comparison, v: u64, slack: u64) -> bool {
    match cmp {
        Comparison::Equals(x) => v.abs_diff(x) <= slack,
        Comparison::AtLeast(x) => v.saturating_add(slack) >= x,
        Comparison::AtMost(x) => v <= x.saturating_add(slack),
    }
}

/// The slack of a noisy value against `reference`: the allowance, or 5 % of the value.
pub fn slack(allowance: u64, reference: u64) -> u64 {
    allowance.max(reference / 20)
}

/// 8 bytes of `path` at `offset`.
fn read_u64_at(path: &str, offset: u64) -> std::io::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut b = [0u8; 8];
    f.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// The pagemap entry of `pid`'s page at `addr`.
pub(crate) fn pagemap_entry(pid: i32, addr: u64) -> std::io::Result<u64> {
    read_u64_at(&format!("/proc/{pid}/pagemap"), addr / 4096 * 8)
}

/// The frame mapped at `addr` of `pid`, if present.
pub(crate) fn frame(pid: i32, addr: u64) -> Result<Option<u64>, String> {
    let e = pagemap_entry(pid, addr).map_err(|e| format!("/proc/{pid}/pagemap: {e}"))?;
    Ok((e >> 63 == 1).then_some(e & ((1 << 55) - 1)))
}

/// Whether the host's `/proc/kpageflags` shows bit `flag` for frame `pfn` (1 or 0).
fn kpf_set(pfn: Option<u64>, flag: &str) -> Result<u64, String> {
    Ok(u64::from(kpageflags(pfn)? & kpf(flag) != 0))
}

fn kpageflags(pfn: Option<u64>) -> Result<u64, String> {
    match pfn {
        None => Ok(1 << mm::fs::proc::page::kpf_bit("NOPAGE").unwrap_or(20)),
        Some(p) => read_u64_at("/proc/kpageflags", p * 8).map_err(|e| format!("kpageflags: {e}")),
    }
}

fn kpagecount(pfn: Option<u64>) -> Result<u64, String> {
    pfn.map_or(Ok(0), |p| {
        read_u64_at("/proc/kpagecount", p * 8).map_err(|e| format!("kpagecount: {e}"))
    })
}

fn kpf(name: &str) -> u64 {
    mm::fs::proc::page::kpf_bit(name).map_or(0, |b| 1 << b)
}

/// One VMA of `/proc/PID/smaps`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Section {
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub fields: Vec<(String, u64)>,
    /// The `VmFlags` line's two-letter flags.
    pub flags: String,
}

/// `/proc/PID/smaps`, parsed.
pub(crate) fn smaps(pid: i32) -> Result<Vec<Section>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))
        .map_err(|e| format!("/proc/{pid}/smaps: {e}"))?;
    let mut out: Vec<Section> = Vec::new();
    for line in text.lines() {
        if let Some((range, rest)) = line.split_once(' ')
            && let Some((a, b)) = range.split_once('-')
            && let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
        {
            let name = rest.split_whitespace().nth(4).unwrap_or("").to_string();
            out.push(Section { start, end, name, fields: Vec::new(), flags: String::new() });
        } else if let (Some(s), Some(flags)) = (out.last_mut(), line.strip_prefix("VmFlags:")) {
            s.flags = flags.trim().to_string();
        } else if let (Some(s), Some((k, v))) = (out.last_mut(), line.split_once(':'))
            && let Ok(n) = v.trim().trim_end_matches("kB").trim().parse()
        {
            s.fields.push((k.to_string(), n));
        }
    }
    Ok(out)
}

/// `Name: value` lines of a `/proc` text (meminfo, status) or `name value` lines (vmstat,
/// memory.stat), by name.
pub(crate) fn table(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':').or_else(|| l.split_once(' '))?;
            Some((k.trim().to_string(), v.trim().trim_end_matches("kB").trim().parse().ok()?))
        })
        .collect()
}

pub(crate) fn read_table(path: &str) -> Result<BTreeMap<String, u64>, String> {
    std::fs::read_to_string(path).map(|t| table(&t)).map_err(|e| format!("{path}: {e}"))
}

/// What the controller knows of one agent's process.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProcInfo {
    /// The starts of the agent's own mappings when it was ready (its executor's, not the
    /// scenario's), and the names of those that grow (`[heap]`, `[stack]`).
    pub own: Vec<u64>,
    /// `/proc/PID/status` when the agent was ready (its parent's, for a forked one).
    pub status: BTreeMap<String, u64>,
    /// `/proc/PID/smaps_rollup` then.
    pub rollup: BTreeMap<String, u64>,
    /// `/proc/PID/stat`'s vsize (bytes) and rss (pages) then.
    pub vsize_rss: (u64, u64),
    pub faults: (u64, u64),
    pub signals: (u64, u64),
}

impl ProcInfo {
    /// Whether a VMA is one of the agent's own.
    pub(crate) fn is_own(&self, s: &Section) -> bool {
        self.own.contains(&s.start) || s.name.starts_with('[')
    }
}

/// A mapping's share of `Pss_Anon`, `Pss_File` or `Pss_Shmem` (`kind`), which smaps shows for
/// the whole process only: its anonymous pages' share of its Pss (weighted by Anonymous over
/// Rss), the rest shmem's for a shmem mapping (memfd, SysV, shared anonymous, a tmpfs file) and
/// the file's otherwise. Exact where a mapping holds one kind; an estimate where it mixes.
fn pss_part(s: &Section, kind: &str) -> u64 {
    let f = |k: &str| field_of(&s.fields, k).unwrap_or(0);
    let (pss, rss) = (f("Pss"), f("Rss"));
    let anon = (f("Anonymous") * pss).checked_div(rss).unwrap_or(0);
    let shmem = s.name.starts_with("/memfd:")
        || s.name.starts_with("/SYSV")
        || s.name.starts_with("/dev/zero")
        || s.name.contains("/tmpfs-");
    match kind {
        "Anon" => anon,
        "Shmem" if shmem => pss - anon,
        "File" if !shmem => pss - anon,
        _ => 0,
    }
}

/// `/proc/PID/stat`'s vsize (field 23, bytes) and rss (field 24, pages).
pub(crate) fn vsize_rss(pid: i32) -> Result<(u64, u64), String> {
    let f = stat_fields(pid)?;
    let num = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    // Field n is at index n - 3.
    Ok((num(20), num(21)))
}

/// The anonymous memory (kB) the executor itself holds: the controller's, and each agent's in
/// its own mappings (heap, stack, the copies its own writes make after a `fork`), shared pages
/// counted once (each mapping's anonymous kB weighted by its Pss over its Rss).
pub(crate) fn executor_anon_kb(procs: &BTreeMap<i32, ProcInfo>) -> u64 {
    let me = std::process::id() as i32;
    let mut kb = 0.0;
    for (&pid, info) in procs.iter().chain(std::iter::once((&me, &ProcInfo::default()))) {
        let Ok(sections) = smaps(pid) else { continue };
        for s in sections.iter().filter(|s| pid == me || info.is_own(s)) {
            let f = |k: &str| field_of(&s.fields, k).unwrap_or(0) as f64;
            if f("Rss") > 0.0 {
                kb += f("Anonymous") * f("Pss") / f("Rss");
            }
        }
    }
    kb as u64
}

/// The faults the executor itself took: the agents' beyond their operations' own, and the
/// controller's.
pub(crate) fn executor_faults(procs: &BTreeMap<i32, ProcInfo>) -> u64 {
    let (mine_min, mine_maj) = crate::sys::faults();
    let agents: u64 = procs
        .iter()
        .filter_map(|(&pid, info)| {
            let (min, maj) = stat_faults(pid).ok()?;
            Some((min + maj).saturating_sub(info.faults.0 + info.faults.1))
        })
        .sum();
    agents + mine_min + mine_maj
}

/// `/proc/PID/stat`'s minflt (field 10) and majflt (field 12).
fn stat_faults(pid: i32) -> Result<(u64, u64), String> {
    let f = stat_fields(pid)?;
    let num = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    Ok((num(7), num(9)))
}

/// The fields of `/proc/PID/stat` after the command, from the state (field 3) on.
fn stat_fields(pid: i32) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    let after = text.rsplit_once(')').map_or("", |(_, r)| r);
    Ok(after.split_whitespace().map(str::to_string).collect())
}

/// The system-wide counters the executor's own anonymous memory moves, and its unit in kB.
fn anon_counter(what: &Observable) -> Option<u64> {
    match what {
        Observable::Vmstat { name } if name == "nr_anon_pages" => Some(4),
        Observable::Meminfo { name } if name == "AnonPages" => Some(1),
        _ => None,
    }
}

/// The system-wide values a run's noisy and change readings are taken against.
#[derive(Clone, Debug, Default)]
pub(crate) struct Baseline {
    pub vmstat: BTreeMap<String, u64>,
    pub meminfo: BTreeMap<String, u64>,
    /// [`executor_anon_kb`] then.
    pub executor_anon_kb: u64,
    /// [`executor_faults`] then.
    pub executor_faults: u64,
    /// sysfs files and memory.stat entries by path and name.
    pub files: BTreeMap<String, u64>,
}

/// Reads observables on the host.
pub(crate) struct Observer<'a> {
    pub names: &'a Names,
    pub procs: &'a BTreeMap<i32, ProcInfo>,
    pub baseline: &'a Baseline,
    pub host_path: &'a dyn Fn(&str) -> String,
    pub cgroup_dir: &'a dyn Fn(&str) -> Option<String>,
}

impl std::fmt::Debug for Observer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").field("procs", &self.procs).finish_non_exhaustive()
    }
}

impl Observer<'_> {
    fn pid(&self, process: &str) -> Result<i32, String> {
        Ok(self.names.process(process)?.0 as i32)
    }

    fn info(&self, pid: i32) -> Result<&ProcInfo, String> {
        self.procs.get(&pid).ok_or_else(|| format!("no agent for pid {pid}"))
    }

    fn addr(&self, a: &AddrExpr) -> Result<u64, String> {
        Ok(self.names.addr(a)?.0)
    }

    /// The value of `what` on the host, in its class's terms; the anonymous-memory totals
    /// without the change in the executor's own.
    pub(crate) fn read(&self, what: &Observable) -> Result<u64, String> {
        let v = self.raw(what)?;
        if matches!(what, Observable::Vmstat { name } if name == "pgfault") {
            let own = executor_faults(self.procs).saturating_sub(self.baseline.executor_faults);
            return Ok(v.saturating_sub(own));
        }
        Ok(match anon_counter(what) {
            Some(kb_per_unit) => {
                let own =
                    executor_anon_kb(self.procs).saturating_sub(self.baseline.executor_anon_kb);
                v.saturating_sub(own / kb_per_unit)
            }
            None => v,
        })
    }

    fn raw(&self, what: &Observable) -> Result<u64, String> {
        match what {
            Observable::Smaps { process, at, field } => {
                field_of(&self.section(process, at)?.fields, field)
            }
            Observable::SmapsRollup { process, field } => self.rollup(process, field),
            Observable::MapsCount { process } => self.maps_count(process),
            Observable::Status { process, field } if field == "VmLck" => {
                // mlockall locks the agent's own mappings too: the scenario's locked ones only.
                let pid = self.pid(process)?;
                let info = self.info(pid)?;
                let locked = smaps(pid)?.into_iter().filter(|s| !info.is_own(s));
                let locked = locked.filter(|s| s.flags.split_whitespace().any(|f| f == "lo"));
                Ok(locked.map(|s| (s.end - s.start) / 1024).sum())
            }
            Observable::Status { process, field } => {
                let pid = self.pid(process)?;
                let now = read_table(&format!("/proc/{pid}/status"))?;
                let was = self.info(pid)?.status.get(field).copied().unwrap_or(0);
                now.get(field)
                    .map(|v| v.saturating_sub(was))
                    .ok_or_else(|| format!("no `{field}` in status"))
            }
            Observable::Stat { process, field } => self.stat(process, field),
            Observable::Signals { process, signal } => {
                let info = self.info(self.pid(process)?)?;
                Ok(match signal {
                    mm::Signal::SIGSEGV => info.signals.0,
                    mm::Signal::SIGBUS => info.signals.1,
                    mm::Signal::SIGKILL => 0,
                })
            }
            Observable::Fstat { file, field } => self.fstat(file, field),
            Observable::Vmstat { name } => {
                delta(&read_table("/proc/vmstat")?, &self.baseline.vmstat, name)
            }
            Observable::Meminfo { name } if is_hugetlb_pool(name) => {
                let table = read_table("/proc/meminfo")?;
                table.get(name.as_str()).copied().ok_or_else(|| format!("no `{name}` in meminfo"))
            }
            Observable::Meminfo { name } => {
                delta(&read_table("/proc/meminfo")?, &self.baseline.meminfo, name)
            }
            Observable::Pagemap { process, at, bit } => self.pagemap(process, at, *bit),
            Observable::Kpageflags { process, at, flag } => {
                kpf_set(frame(self.pid(process)?, self.addr(at)?)?, flag)
            }
            Observable::Kpagecount { process, at } => {
                kpagecount(frame(self.pid(process)?, self.addr(at)?)?)
            }
            Observable::FrameFlags { frame, flag } => kpf_set(Some(self.names.frame(frame)?), flag),
            Observable::Sysfs { path } => self.sysfs(path),
            Observable::MemoryStat { cgroup, name } => self.memory_stat(cgroup, name),
            Observable::Inspect { field, on: InspectOn::Addr { process, at } } => {
                self.inspect(field, process, at)
            }
            Observable::Inspect { .. }
            | Observable::Invariant { .. }
            | Observable::LruGen { .. }
            | Observable::LockStat { .. } => Err("not observable on the host".into()),
        }
    }

    /// An `inspect` field the host shows (`inspect_class`) at `at` of `process`.
    fn inspect(&self, field: &str, process: &str, at: &AddrExpr) -> Result<u64, String> {
        if let Some(flag) = smaps_flag_of(field) {
            let s = self.section(process, at)?;
            return Ok(u64::from(s.flags.split_whitespace().any(|f| f == flag)));
        }
        let pfn = frame(self.pid(process)?, self.addr(at)?)?;
        match kpf_of(field) {
            Some(bit) => Ok(u64::from(kpageflags(pfn)? >> bit & 1 == 1)),
            None => kpagecount(pfn),
        }
    }

    /// The smaps section of `process` holding the address `at`.
    fn section(&self, process: &str, at: &AddrExpr) -> Result<Section, String> {
        let (pid, a) = (self.pid(process)?, self.addr(at)?);
        let s = smaps(pid)?.into_iter().find(|s| s.start <= a && a < s.end);
        s.ok_or_else(|| format!("`{process}` has no mapping at {a:#x}"))
    }

    /// The scenario's VMAs of `process`: the agent's own mappings and the kernel's `[vdso]`,
    /// `[stack]` and the like left out.
    fn maps_count(&self, process: &str) -> Result<u64, String> {
        let pid = self.pid(process)?;
        let info = self.info(pid)?;
        Ok(smaps(pid)?.iter().filter(|s| !info.is_own(s)).count() as u64)
    }

    /// smaps_rollup's field over the scenario's own mappings.
    fn rollup(&self, process: &str, field: &str) -> Result<u64, String> {
        let pid = self.pid(process)?;
        let info = self.info(pid)?;
        let sections = smaps(pid)?;
        let mine: Vec<&Section> = sections.iter().filter(|s| !info.is_own(s)).collect();
        if let Some(kind) = field.strip_prefix("Pss_") {
            return Ok(mine.iter().map(|s| pss_part(s, kind)).sum());
        }
        if sections.iter().all(|s| s.fields.iter().all(|(k, _)| k != field)) {
            // A field of smaps_rollup only (`Pss_Anon`, ...): its change since the agent was ready.
            let now = read_table(&format!("/proc/{pid}/smaps_rollup"))?;
            let v = now.get(field).ok_or_else(|| format!("no `{field}` in smaps_rollup"))?;
            return Ok(v.saturating_sub(info.rollup.get(field).copied().unwrap_or(0)));
        }
        Ok(mine.iter().filter_map(|s| field_of(&s.fields, field).ok()).sum())
    }

    fn stat(&self, process: &str, field: &str) -> Result<u64, String> {
        let pid = self.pid(process)?;
        let info = self.info(pid)?;
        match field {
            "minflt" => Ok(info.faults.0),
            "majflt" => Ok(info.faults.1),
            "vsize" => Ok(vsize_rss(pid)?.0.saturating_sub(info.vsize_rss.0)),
            "rss" => Ok(vsize_rss(pid)?.1.saturating_sub(info.vsize_rss.1)),
            _ => Err(format!("`{field}` is the host's own number")),
        }
    }

    fn fstat(&self, file: &FileRef, field: &str) -> Result<u64, String> {
        use std::os::unix::fs::MetadataExt;
        let path = match file {
            FileRef::Path(p) => (self.host_path)(p),
            FileRef::Fd { process, fd } => {
                format!("/proc/{}/fd/{}", self.pid(process)?, self.names.fd(fd)?)
            }
        };
        let m = std::fs::metadata(&path).map_err(|e| format!("stat {path}: {e}"))?;
        match field {
            "st_size" => Ok(m.size()),
            "st_blocks" => Ok(m.blocks()),
            "st_blksize" => Ok(m.blksize()),
            _ => Err(format!("no `{field}` in struct stat")),
        }
    }

    fn pagemap(&self, process: &str, at: &AddrExpr, bit: PagemapBit) -> Result<u64, String> {
        let pid = self.pid(process)?;
        let e = pagemap_entry(pid, self.addr(at)?).map_err(|e| format!("pagemap: {e}"))?;
        let pfn = (e >> 63 == 1).then_some(e & ((1 << 55) - 1));
        let on = match bit {
            PagemapBit::Present => e >> 63 & 1 == 1,
            PagemapBit::Swapped => e >> 62 & 1 == 1,
            PagemapBit::File => e >> 61 & 1 == 1,
            PagemapBit::Exclusive => e >> 56 & 1 == 1,
            PagemapBit::SoftDirty => e >> 55 & 1 == 1,
            PagemapBit::Guard => e >> 58 & 1 == 1,
            PagemapBit::UffdWp => e >> 57 & 1 == 1,
            PagemapBit::ZeroPage => pfn.is_some() && kpageflags(pfn)? & kpf("ZERO_PAGE") != 0,
            PagemapBit::Thp => {
                let f = kpageflags(pfn)?;
                pfn.is_some() && f & kpf("THP") != 0 && f & kpf("ZERO_PAGE") == 0
            }
        };
        Ok(u64::from(on))
    }

    fn sysfs(&self, path: &str) -> Result<u64, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let v: u64 = text.trim().parse().map_err(|_| format!("{path} reads `{}`", text.trim()))?;
        Ok(since(path, v, &self.baseline.files))
    }

    fn memory_stat(&self, cgroup: &str, name: &str) -> Result<u64, String> {
        let dir = (self.cgroup_dir)(cgroup).ok_or_else(|| format!("no cgroup `{cgroup}`"))?;
        let stat = read_table(&format!("{dir}/memory.stat"))?;
        let key = v1_name(&stat, name);
        let v =
            stat.get(key).copied().ok_or_else(|| format!("no `{name}` in {dir}/memory.stat"))?;
        let was =
            self.baseline.files.get(&format!("{dir}/memory.stat:{key}")).copied().unwrap_or(0);
        Ok(v.saturating_sub(was))
    }
}

/// A sysfs number as the scenario means it: a counter's change since the run began (a counter
/// below its start was reset, KSM's `full_scans` by `run = 2`, and counts since), a hugetlb
/// pool's count and a setting (a file with a write bit: `max_page_sharing`, a THP knob) as
/// they are (the run set them).
pub(crate) fn since(path: &str, v: u64, baseline: &BTreeMap<String, u64>) -> u64 {
    match baseline.get(path) {
        Some(&was) if !is_hugetlb_pool_file(path) && !is_setting(path) && v >= was => v - was,
        _ => v,
    }
}

/// Whether a sysfs or sysctl file is a setting: its mode lets someone write it.
fn is_setting(path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o222 != 0)
}

/// The numbers in the sysfs files at `paths` now.
pub(crate) fn sysfs_numbers<'a>(paths: impl Iterator<Item = &'a String>) -> BTreeMap<String, u64> {
    paths
        .filter_map(|p| {
            let v = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
            Some((p.clone(), v))
        })
        .collect()
}

/// A cgroup v2 `memory.stat` name in a v1 file (v1 calls anonymous memory `rss` and the page
/// cache `cache`); the name itself where the file has it.
pub(crate) fn v1_name<'a>(stat: &BTreeMap<String, u64>, name: &'a str) -> &'a str {
    match name {
        _ if stat.contains_key(name) => name,
        "anon" => "rss",
        "file" => "cache",
        "file_mapped" => "mapped_file",
        _ => name,
    }
}

fn field_of(fields: &[(String, u64)], field: &str) -> Result<u64, String> {
    fields
        .iter()
        .find(|(k, _)| k == field)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("no field `{field}`"))
}

fn delta(
    now: &BTreeMap<String, u64>,
    was: &BTreeMap<String, u64>,
    name: &str,
) -> Result<u64, String> {
    let v = now.get(name).ok_or_else(|| format!("the host has no `{name}`"))?;
    Ok(v.saturating_sub(was.get(name).copied().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_and_slack() {
        let t = table("MemFree:     100 kB\nnr_anon_pages 7\n");
        assert_eq!(t.get("MemFree"), Some(&100));
        assert_eq!(t.get("nr_anon_pages"), Some(&7));
        assert!(holds_within(Comparison::Equals(16), 40, 32));
        assert!(!holds_within(Comparison::Equals(16), 60, 32));
        assert!(holds_within(Comparison::AtMost(0), 10, 32));
        assert_eq!(slack(32, 10_000), 500);
    }

    #[test]
    fn smaps_sections_parse() {
        let me = std::process::id() as i32;
        let s = smaps(me).unwrap();
        assert!(s.iter().any(|s| s.name == "[stack]"));
        assert!(s.iter().all(|s| s.start < s.end && s.fields.iter().any(|(k, _)| k == "Rss")));
    }
}
