//! Reads the observables that expectations and `show` name, from the kernel's own text formats
//! (so a scenario checks exactly what a user would read in `/proc`).

use super::interp::{Env, Failure, Judged, Reading};
use super::model::{
    AddrExpr, Expect, FileRef, GenSeq, InspectOn, LockStatColumn, LruGenField, Observable,
    PagemapBit, Show,
};
use mm::fs::proc::{
    PM_FILE, PM_GUARD_REGION, PM_MMAP_EXCLUSIVE, PM_PFN_MASK, PM_PRESENT, PM_SOFT_DIRTY, PM_SWAP,
};
use mm::kernel::KState;
use simcore::Pfn;

/// The value of a `Name:   123 kB` field in a `/proc` text.
fn field_kb(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// The text of `/proc/PID/smaps_rollup`, or why it cannot be read (ENOENT before v4.14).
fn smaps_rollup(st: &KState, env: &Env, process: &str) -> Result<String, String> {
    st.smaps_rollup(env.process(process)?)
        .map_err(|e| format!("/proc/{process}/smaps_rollup: {e} on {}", env.kernel))
}

/// The current value of an observable.
pub fn read(st: &KState, env: &Env, what: &Observable) -> Result<u64, String> {
    let missing = |field: &str, text: &str| format!("no field `{field}` in:\n{text}");
    match what {
        Observable::Smaps { process, at, field } => smaps_field(st, env, process, at, field),
        Observable::SmapsRollup { process, field } => {
            let text = smaps_rollup(st, env, process)?;
            field_kb(&text, field).ok_or_else(|| missing(field, &text))
        }
        Observable::Status { process, field } => {
            let text = st.status(env.process(process)?);
            field_kb(&text, field).ok_or_else(|| missing(field, &text))
        }
        Observable::Stat { process, field } => st
            .proc_stat_field(env.process(process)?, field)
            .ok_or_else(|| format!("no field `{field}` in /proc/PID/stat")),
        Observable::Signals { process, signal } => {
            let p = &st.procs[env.process(process)?];
            Ok(p.signals.get(signal).copied().unwrap_or(0))
        }
        Observable::Fstat { file, field } => {
            let inode = env.inode(st, file)?;
            st.vfs_getattr(inode).field(field).ok_or_else(|| format!("no `{field}` in struct stat"))
        }
        Observable::Meminfo { name } => {
            let text = st.meminfo();
            field_kb(&text, name).ok_or_else(|| missing(name, &text))
        }
        Observable::Vmstat { name } => {
            let key = mm::vmstat::vmstat_key(name)
                .ok_or_else(|| format!("unknown vmstat counter `{name}`"))?;
            if !mm::vmstat::exists_on(key, env.kernel) {
                return Err(format!("/proc/vmstat has no `{name}` on {}", env.kernel));
            }
            Ok(st.vmstat_snapshot().get(key))
        }
        Observable::Sysfs { path } => {
            let text = st
                .sysfs_show(path)
                .ok_or_else(|| format!("{path}: no such file on {} in the model", env.kernel))?;
            text.trim().parse().map_err(|_| format!("{path} reads `{text}`, not a number"))
        }
        Observable::Inspect { field, on } => inspect(st, env, field, on),
        Observable::Kpageflags { process, at, flag } => {
            Ok(kpf_set(st, frame_at(st, env, process, at)?, flag))
        }
        Observable::Kpagecount { process, at } => {
            Ok(st.kpagecount(frame_at(st, env, process, at)?))
        }
        Observable::FrameFlags { frame: f, flag } => {
            Ok(kpf_set(st, Some(Pfn(env.names.frame(f)?)), flag))
        }
        Observable::Invariant { name } => {
            let held = mm::sim::check::check_invariant(st, env.switches.cow_reuse, name);
            Ok(u64::from(held.is_ok()))
        }
        Observable::MemoryStat { cgroup, name } => memory_stat(st, cgroup, name),
        Observable::Pagemap { process, at, bit } => {
            let e = st.pagemap(env.mm(st, process)?, env.addr(at)?, 1)[0];
            Ok(u64::from(pagemap_bit(st, e, *bit)))
        }
        Observable::LruGen { cgroup, field } => lru_gen(st, cgroup, *field),
        Observable::LockStat { class, column } => lock_stat(env, class, *column),
        Observable::MapsCount { process } => Ok(st.vmas_of(env.process(process)?).len() as u64),
    }
}

/// A `memory.stat` entry of `cgroup`.
fn memory_stat(st: &KState, cgroup: &str, name: &str) -> Result<u64, String> {
    let memcg = st.mem_cgroup_by_path(cgroup).ok_or_else(|| format!("no cgroup `{cgroup}`"))?;
    let text = st.memory_stat(memcg);
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .ok_or_else(|| format!("no field `{name}` in:\n{text}"))
}

/// A `/proc/lock_stat` column of lock class `class`.
fn lock_stat(env: &Env, class: &str, column: LockStatColumn) -> Result<u64, String> {
    let stats = env.handle.lock_stats();
    let found = stats.iter().find(|c| c.name == class);
    found.map(|c| column.of(c)).ok_or_else(|| {
        let names: Vec<&str> = stats.iter().map(|c| c.name).collect();
        format!("no lock class `{class}` in this run: {}", names.join(", "))
    })
}

/// A number of `cgroup`'s multi-gen LRU.
fn lru_gen(st: &KState, cgroup: &str, field: LruGenField) -> Result<u64, String> {
    let memcg = st.mem_cgroup_by_path(cgroup).ok_or_else(|| format!("no cgroup `{cgroup}`"))?;
    let g = &st.memcgs[memcg].lruvec.lrugen;
    Ok(match field {
        LruGenField::MaxSeq => g.max_seq,
        LruGenField::MinSeq { file } => g.min_seq[usize::from(file)],
        LruGenField::Pages { file, seq } => {
            let seq = match seq {
                GenSeq::Seq(s) => s,
                GenSeq::Youngest => g.max_seq,
                GenSeq::Oldest => g.min_seq[usize::from(file)],
            };
            st.lru_gen_pages(memcg, seq, file)
        }
    })
}

/// A field by its kernel name (`mm::inspect`), where `on` says.
fn inspect(st: &KState, env: &Env, field: &str, on: &InspectOn) -> Result<u64, String> {
    match on {
        InspectOn::Addr { process, at } => {
            st.inspect_addr(env.mm(st, process)?, env.addr(at)?, field)
        }
        InspectOn::Index { file, index } => st.inspect_index(env.inode(st, file)?, *index, field),
        InspectOn::Mapping(file) => st.inspect_mapping(env.inode(st, file)?, field),
        InspectOn::File { process, fd } => st.inspect_file(env.file(st, process, fd)?, field),
        InspectOn::Machine => st.inspect_global(&env.handle, field),
    }
}

/// An smaps field (kB) of the VMA of `process` containing `at`.
fn smaps_field(
    st: &KState,
    env: &Env,
    process: &str,
    at: &AddrExpr,
    field: &str,
) -> Result<u64, String> {
    let pid = env.process(process)?;
    let addr = env.addr(at)?;
    let mm = env.mm(st, process)?;
    let vma =
        st.find_vma(mm, addr).ok_or_else(|| format!("`{process}` has no mapping at {addr}"))?;
    let header = format!("{:08x}-", st.vma(vma).start.0);
    let smaps = st.smaps(pid);
    let section: String = smaps
        .split_inclusive('\n')
        .skip_while(|l| !l.starts_with(&header))
        .skip(1)
        .take_while(|l| !l.starts_with("VmFlags"))
        .collect();
    field_kb(&section, field).ok_or_else(|| format!("no field `{field}` in:\n{section}"))
}

/// Bit `bit` of the pagemap entry `e` (the zero-page and THP tests look at the frame it names).
fn pagemap_bit(st: &KState, e: u64, bit: PagemapBit) -> bool {
    let frame = (e & PM_PRESENT != 0).then_some(Pfn(e & PM_PFN_MASK));
    match bit {
        PagemapBit::Present => frame.is_some(),
        PagemapBit::Swapped => e & PM_SWAP != 0,
        PagemapBit::Exclusive => e & PM_MMAP_EXCLUSIVE != 0,
        PagemapBit::SoftDirty => e & PM_SOFT_DIRTY != 0,
        PagemapBit::UffdWp => e & mm::fs::proc::PM_UFFD_WP != 0,
        PagemapBit::File => e & PM_FILE != 0,
        PagemapBit::Guard => e & PM_GUARD_REGION != 0,
        PagemapBit::ZeroPage => frame.is_some_and(|f| st.is_zero_pfn(f)),
        // KPF_THP of a page that is not a zero page (the huge zero page has both bits).
        PagemapBit::Thp => {
            let u = st.kpageflags(frame);
            u & kpf("THP") != 0 && u & kpf("ZERO_PAGE") == 0
        }
    }
}

/// The mask of `KPF_<name>`.
fn kpf(name: &str) -> u64 {
    1 << mm::fs::proc::page::kpf_bit(name).expect("a KPF name")
}

/// The frame pagemap gives for the page of `process` at `at`, if present.
/// Whether `/proc/kpageflags` shows bit `flag` for frame `pfn` (1 or 0).
fn kpf_set(st: &KState, pfn: Option<Pfn>, flag: &str) -> u64 {
    u64::from(st.kpageflags(pfn) & kpf(flag) != 0)
}

fn frame_at(st: &KState, env: &Env, process: &str, at: &AddrExpr) -> Result<Option<Pfn>, String> {
    let e = st.pagemap(env.mm(st, process)?, env.addr(at)?, 1)[0];
    Ok((e & PM_PRESENT != 0).then_some(Pfn(e & PM_PFN_MASK)))
}

/// A human description of an observable, for reports.
pub fn describe(what: &Observable) -> String {
    match what {
        Observable::Smaps { process, at, field } => {
            format!("smaps {field} of {process} at {}", addr_text(at))
        }
        Observable::SmapsRollup { process, field } => format!("smaps_rollup {field} of {process}"),
        Observable::Status { process, field } => format!("status {field} of {process}"),
        Observable::Stat { process, field } => format!("stat {field} of {process}"),
        Observable::Signals { process, signal } => format!("{signal:?}s delivered to {process}"),
        Observable::Fstat { file: FileRef::Path(p), field } => format!("stat {field} of {p}"),
        Observable::Fstat { file: FileRef::Fd { process, fd }, field } => {
            format!("fstat {field} of {process}'s {fd}")
        }
        Observable::Meminfo { name } => format!("meminfo {name}"),
        Observable::Vmstat { name } => format!("vmstat {name}"),
        Observable::Pagemap { process, at, bit } => {
            format!("pagemap {bit:?} of {process} at {}", addr_text(at))
        }
        Observable::MemoryStat { cgroup, name } => format!("memory.stat {name} of {cgroup}"),
        Observable::Sysfs { path } => path.clone(),
        Observable::Inspect { field, on } => match on {
            InspectOn::Addr { process, at } => format!("{field} of {process} at {}", addr_text(at)),
            InspectOn::Index { file, index } => {
                format!("{field} at index {index} of {}", file_text(file))
            }
            InspectOn::Mapping(file) => format!("{field} of {}", file_text(file)),
            InspectOn::File { process, fd } => format!("{field} of {process}'s {fd}"),
            InspectOn::Machine => field.clone(),
        },
        Observable::Invariant { name } => format!("invariant {name} holds (1) or not (0)"),
        Observable::Kpageflags { process, at, flag } => {
            format!("kpageflags KPF_{flag} of {process} at {}", addr_text(at))
        }
        Observable::Kpagecount { process, at } => {
            format!("kpagecount of {process} at {}", addr_text(at))
        }
        Observable::FrameFlags { frame, flag } => format!("kpageflags KPF_{flag} of frame {frame}"),
        Observable::LruGen { cgroup, field } => format!("lru_gen {field:?} of {cgroup}"),
        Observable::LockStat { class, column } => format!("lock_stat {column:?} of {class}"),
        Observable::MapsCount { process } => format!("lines of /proc/{process}/maps"),
    }
}

fn file_text(f: &FileRef) -> String {
    match f {
        FileRef::Path(p) => p.clone(),
        FileRef::Fd { process, fd } => format!("{process}'s {fd}"),
    }
}

fn addr_text(a: &AddrExpr) -> String {
    match (&a.base, a.offset) {
        (Some(b), 0) => b.clone(),
        (Some(b), o) if o > 0 => format!("{b}+{o:#x}"),
        (Some(b), o) => format!("{b}-{:#x}", -o),
        (None, o) => format!("{o:#x}"),
    }
}

/// Judges one expectation against what the model reads (the caller skips those whose `when`
/// does not hold).
pub fn judge(st: &KState, env: &Env, e: &Expect) -> Judged {
    judge_value(e, read(st, env, &e.what))
}

/// Judges one expectation against a value read, or why none could be (the model's and the
/// native executor's readings alike).
pub fn judge_value(e: &Expect, value: Result<u64, String>) -> Judged {
    let what = describe(&e.what);
    let expected = format!("{what} {}", e.cmp);
    let (observed, held) = match &value {
        Ok(v) => (format!("{what} = {v}"), e.cmp.holds(*v)),
        Err(msg) => (msg.clone(), false),
    };
    let reading = Reading {
        line: e.line,
        what,
        expected: e.cmp.to_string(),
        observed: value.as_ref().map_or_else(Clone::clone, u64::to_string),
        value: value.ok(),
        held,
        addr: None,
    };
    let failure = (!held).then_some(Failure { line: e.line, expected, observed });
    Judged { reading, failure }
}

/// Checks one expectation (the caller skips those whose `when` does not hold).
pub fn check(st: &KState, env: &Env, e: &Expect) -> Result<(), Failure> {
    judge(st, env, e).failure.map_or(Ok(()), Err)
}

/// The text of an observable to show.
pub fn render(
    st: &KState,
    handle: &engine::Handle,
    env: &Env,
    show: &Show,
) -> Result<(String, String), String> {
    Ok(match show {
        Show::Smaps(p) => (format!("/proc/{p}/smaps"), st.smaps(env.process(p)?)),
        Show::SmapsRollup(p) => (format!("/proc/{p}/smaps_rollup"), smaps_rollup(st, env, p)?),
        Show::Maps(p) => (format!("/proc/{p}/maps"), st.maps(env.process(p)?)),
        Show::Status(p) => (format!("/proc/{p}/status"), st.status(env.process(p)?)),
        Show::Stat(p) => (format!("/proc/{p}/stat"), st.proc_stat(env.process(p)?)),
        Show::Vmstat => {
            ("/proc/vmstat".into(), mm::vmstat::vmstat_text(&st.vmstat_snapshot(), env.kernel))
        }
        Show::Meminfo => ("/proc/meminfo".into(), st.meminfo()),
        Show::LockStat => ("/proc/lock_stat".into(), handle.lock_stat_text()),
        Show::Lockdep => ("lockdep".into(), mm::inspect::lockdep_report(handle)),
        Show::LruGen => {
            ("/sys/kernel/debug/lru_gen".into(), st.lru_gen_debugfs(handle.now().as_ns()))
        }
        Show::Inspect(p, at) => {
            let addr = env.addr(at)?;
            let text = st.inspect_dump(env.mm(st, p)?, addr, env.kernel, &env.switches);
            (format!("inspect {p} {addr}"), text)
        }
        Show::PageTypes(p, at) => {
            let (mm, addr) = (env.mm(st, p)?, env.addr(at)?);
            let vma =
                st.find_vma(mm, addr).ok_or_else(|| format!("`{p}` has no mapping at {addr}"))?;
            (format!("page-types -L -p {p} ({addr})"), st.page_types(mm, vma))
        }
        Show::MemoryStat(c) => {
            let memcg = st.mem_cgroup_by_path(c).ok_or_else(|| format!("no cgroup `{c}`"))?;
            (format!("/sys/fs/cgroup{c}/memory.stat"), st.memory_stat(memcg))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kb_fields() {
        let text =
            "Rss:                  12 kB\nPss:                   6 kB\nTHPeligible:           0\n";
        assert_eq!(field_kb(text, "Pss"), Some(6));
        assert_eq!(field_kb(text, "THPeligible"), Some(0));
        assert_eq!(field_kb(text, "Rs"), None);
    }
}
