//! Page-cache replay: a block trace ([`crate::block`]) replayed as page-sized `pread`s or as
//! loads through a shared mapping of one file, by one process confined to a memory cgroup whose
//! `memory.max` is the cache size (`mmsim replay TRACE --cache SIZE`).
//!
//! The machine has the cgroup's size plus room for the kernel (a quarter more, at least
//! 64 MiB), so reclaim is the cgroup's limit reclaim and never global. The file is 8 TiB of
//! pattern data on the simulated disk; each request reads or touches one page of it.
//!
//! Hits and misses: with `read`, a request served by `Thread::read_run` (the page was cached and
//! unlocked) is a hit, anything else goes through `pread` and is a miss. With `mmap`, a request
//! is a miss when it takes a major fault (the page had to be read); a TLB hit or a minor fault
//! (a page cached by readahead or fault-around but not yet mapped) is a hit.
//!
//! Policies: `classic` and `mglru` are the kernel's LRUs with their defaults (readahead 128 KiB,
//! fault-around 64 KiB unless overridden); `pure` is the classic LRU reduced to exact LRU order
//! (switch `lru = pure`, no readahead, no fault-around, no second chance, reclaim of exactly the
//! pages a charge needs), which must give libCacheSim's LRU miss count on the same trace.
//!
//! Advice: `--fadvise random` is `posix_fadvise(POSIX_FADV_RANDOM)` on the file before the
//! replay, as a database gives it: the open file gets FMODE_RANDOM (`mm/fadvise.c`
//! `generic_fadvise`, v6.8) and reads bring in only the page asked for (no readahead);
//! `sequential` doubles the readahead window and `normal` restores it. `--noreuse` is
//! `POSIX_FADV_NOREUSE` (seed `003`).
//!
//! The report's `lru` gives per LRU type (anon, file) the evictions (`pgsteal_*`), refaults
//! (`workingset_refault_*`) and refault activations (`workingset_activate_*`); `activations` is
//! `pgactivate`, which the kernel counts for both types together.

use crate::InputError;
use crate::block::BlockReader;
use mm::{
    FileSpec, KernelVersion, Machine, MachineConfig, MmapArgs, OpenFlags, Profile, map, prot,
};
use serde::Serialize;
use simcore::{Bytes, VirtAddr};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Requests read per batch.
const BATCH: usize = 4096;
/// Pages of the replayed file (8 TiB).
pub const FILE_PAGES: u64 = 1 << 31;

/// How the requests reach the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessMode {
    Read,
    Mmap,
}

impl AccessMode {
    pub fn parse(s: &str) -> Result<AccessMode, String> {
        match s {
            "read" => Ok(AccessMode::Read),
            "mmap" => Ok(AccessMode::Mmap),
            _ => Err(format!("unknown access `{s}`: expected read or mmap")),
        }
    }
}

/// The `posix_fadvise` advice given on the replayed file before the first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileAdvice {
    Normal,
    /// `POSIX_FADV_RANDOM`: FMODE_RANDOM, no readahead.
    Random,
    Sequential,
}

impl FileAdvice {
    pub fn parse(s: &str) -> Result<FileAdvice, String> {
        match s {
            "normal" => Ok(FileAdvice::Normal),
            "random" => Ok(FileAdvice::Random),
            "sequential" => Ok(FileAdvice::Sequential),
            "noreuse" => Err("--fadvise noreuse: use --noreuse".into()),
            _ => Err(format!(
                "unknown advice `{s}`: expected normal, random or sequential \
                 (willneed and dontneed name a range, not a replay)"
            )),
        }
    }

    /// The `POSIX_FADV_*` value.
    fn advice(self) -> i32 {
        use mm::fadvise::advice;
        match self {
            FileAdvice::Normal => advice::NORMAL,
            FileAdvice::Random => advice::RANDOM,
            FileAdvice::Sequential => advice::SEQUENTIAL,
        }
    }
}

/// The reclaim policy replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Classic,
    Mglru,
    /// Exact LRU (see the module note).
    Pure,
}

impl Policy {
    pub fn parse(s: &str) -> Result<Policy, String> {
        match s {
            "classic" => Ok(Policy::Classic),
            "mglru" => Ok(Policy::Mglru),
            "pure" | "pure-lru" => Ok(Policy::Pure),
            _ => Err(format!("unknown policy `{s}`: expected classic, mglru or pure")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Classic => "classic",
            Policy::Mglru => "mglru",
            Policy::Pure => "pure",
        }
    }
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct PageCacheOptions {
    pub profile: Profile,
    pub kernel: KernelVersion,
    pub policy: Policy,
    pub access: AccessMode,
    /// The cgroup's `memory.max`.
    pub cache: Bytes,
    /// `read_ahead_kb` (the kernel default when `None`; `pure` uses 0).
    pub readahead_kb: Option<u64>,
    /// `posix_fadvise(POSIX_FADV_NOREUSE)` on the file before the replay.
    pub noreuse: bool,
    /// `posix_fadvise` with this advice on the file before the replay (after `noreuse`).
    pub fadvise: Option<FileAdvice>,
    /// Stop after this many requests.
    pub max_requests: Option<u64>,
    /// The events budget: a replay that takes more scheduling events is refused.
    pub max_events: u64,
}

/// What a page-cache replay reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PageCacheReport {
    pub trace: String,
    pub format: String,
    pub policy: String,
    pub access: String,
    /// The `posix_fadvise` advice given on the file, if any (`--fadvise`).
    pub fadvise: Option<FileAdvice>,
    pub kernel: String,
    pub cache_pages: u64,
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: f64,
    /// `workingset_refault_file` of the cgroup.
    pub refaults: u64,
    /// `pgactivate` over the replay (both LRU types: the kernel does not split it).
    pub activations: u64,
    /// Per LRU type (`anon`, `file`): evictions, refaults and refault activations.
    pub lru: BTreeMap<String, LruCounts>,
    /// The `/proc/vmstat` counters reclaim moves, as deltas over the replay.
    pub vmstat: BTreeMap<String, u64>,
    /// The cgroup's `memory.stat` at the end.
    pub memory_stat: String,
    pub virtual_time_ns: u64,
    /// Scheduling events of the replay.
    pub events: u64,
    /// The digest of the replay's event history (every scheduling event, lock grant and charge
    /// in order): a change that keeps it keeps the replay's behaviour.
    pub digest: String,
}

/// What reclaim did to one LRU type over a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LruCounts {
    /// Pages reclaimed (`pgsteal_anon` or `pgsteal_file`).
    pub evictions: u64,
    /// `workingset_refault_*`.
    pub refaults: u64,
    /// `workingset_activate_*`: refaults found to be in the workingset.
    pub refault_activations: u64,
}

/// Counters the report lists.
const COUNTERS: [&str; 21] = [
    "pgpgin",
    "pswpin",
    "pswpout",
    "pgactivate",
    "pgdeactivate",
    "pgmajfault",
    "pgrefill",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgscan_file",
    "pgsteal_anon",
    "pgsteal_file",
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    "allocstall_normal",
];

/// Why a replay stopped.
#[derive(Debug)]
pub enum PageCacheError {
    Input(InputError),
    /// Options that make an impossible machine (bad input, as a bad trace is).
    Config(String),
    Sim(String),
}

impl std::fmt::Display for PageCacheError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageCacheError::Input(e) => e.fmt(f),
            PageCacheError::Config(e) | PageCacheError::Sim(e) => f.write_str(e),
        }
    }
}

impl PageCacheOptions {
    /// A replay through a cgroup of `cache` on `profile` under the default kernel: the kernel's
    /// readahead, no advice, every request, the default events budget.
    pub fn new(profile: Profile, policy: Policy, access: AccessMode, cache: Bytes) -> Self {
        PageCacheOptions {
            profile,
            kernel: KernelVersion::DEFAULT,
            policy,
            access,
            cache,
            readahead_kb: None,
            noreuse: false,
            fadvise: None,
            max_requests: None,
            max_events: engine::DEFAULT_EVENT_BUDGET,
        }
    }
}

/// The machine, cgroup and process of a replay.
fn setup(options: &PageCacheOptions) -> Result<(Machine, mm::Pid), String> {
    let cache = options.cache.as_u64().div_ceil(4096) * 4096;
    if cache == 0 {
        return Err("--cache: expected at least one page".into());
    }
    let memory = Bytes(cache.saturating_add((cache / 4).max(64 << 20)));
    let profile = options.profile.clone().resized(None, Some(memory)).map_err(|e| {
        format!("--cache {}: the machine around the cgroup is impossible: {e}", options.cache)
    })?;
    let mut config = MachineConfig::new(profile, options.kernel);
    config.max_events = options.max_events;
    config.switches.set("lru", options.policy.name())?;
    config.switches.check_implemented(options.kernel).map_err(|e| format!("--policy: {e}"))?;
    if let Some(kb) = options.readahead_kb {
        if kb > mm::kernel::MAX_READ_AHEAD_KB {
            let max = mm::kernel::MAX_READ_AHEAD_KB;
            return Err(format!("--readahead-kb {kb}: expected at most {max} (1 GiB)"));
        }
        config.tunables.ra_pages = kb / 4;
    }
    if options.policy == Policy::Pure {
        config.tunables.ra_pages = 0;
        config.tunables.fault_around_pages = 1;
    }
    let mut m = Machine::new(config)?;
    let spec = FileSpec { pattern: Some(1), ..FileSpec::zeros(Bytes(FILE_PAGES * 4096)) };
    m.create_file("/trace", &spec).map_err(|e| format!("creating the file: {e:?}"))?;
    let cg = m.create_cgroup("/replay")?;
    m.set_memory_max(cg, Some(Bytes(cache)))?;
    let pid = m.new_process("replay").map_err(|e| format!("{e:?}"))?;
    m.attach_cgroup(pid, cg);
    Ok((m, pid))
}

/// Replays `reader` (named `name`); `progress` is called after every simulation step with the
/// requests replayed so far.
pub fn replay_page_cache(
    reader: BlockReader,
    name: &str,
    options: &PageCacheOptions,
    progress: &mut dyn FnMut(u64, &BlockReader),
) -> Result<PageCacheReport, PageCacheError> {
    let sim = PageCacheError::Sim;
    let (mut machine, pid) = setup(options).map_err(PageCacheError::Config)?;
    let format = reader.format().name().to_string();
    let reader = Rc::new(RefCell::new(reader));
    let failure: Rc<RefCell<Option<PageCacheError>>> = Rc::new(RefCell::new(None));
    let counts = Rc::new(Cell::new((0u64, 0u64)));
    let (rd, f, c) = (reader.clone(), failure.clone(), counts.clone());
    let (access, noreuse, fadvise, max) = (
        options.access,
        options.noreuse,
        options.fadvise,
        options.max_requests.unwrap_or(u64::MAX),
    );
    machine
        .spawn_thread(pid, 0, "replay", move |t| async move {
            let fd = t.open("/trace", OpenFlags::RDONLY).await.expect("the file exists");
            if noreuse {
                t.fadvise(fd, 0, 0, mm::fadvise::advice::NOREUSE).await.expect("valid advice");
            }
            if let Some(a) = fadvise {
                t.fadvise(fd, 0, 0, a.advice()).await.expect("valid advice");
            }
            let base = if access == AccessMode::Mmap {
                let args = MmapArgs {
                    addr: None,
                    len: Bytes(FILE_PAGES * 4096),
                    prot: prot::READ,
                    flags: map::SHARED,
                    fd: Some(fd),
                    offset: 0,
                };
                t.mmap(args).await.expect("the mapping fits")
            } else {
                VirtAddr(0)
            };
            let mut pages = Vec::with_capacity(BATCH);
            let mut refs = Vec::with_capacity(BATCH);
            let (mut requests, mut misses) = (0u64, 0u64);
            loop {
                pages.clear();
                {
                    let mut r = rd.borrow_mut();
                    while pages.len() < BATCH && requests + (pages.len() as u64) < max {
                        match r.next_page() {
                            Ok(Some(p)) if p < FILE_PAGES => pages.push(p),
                            Ok(Some(p)) => {
                                let e = r.error(format!(
                                    "page {p} is beyond the replayed file ({FILE_PAGES} pages)"
                                ));
                                *f.borrow_mut() = Some(PageCacheError::Input(e));
                                return;
                            }
                            Ok(None) => break,
                            Err(e) => {
                                *f.borrow_mut() = Some(PageCacheError::Input(e));
                                return;
                            }
                        }
                    }
                }
                if pages.is_empty() {
                    return;
                }
                requests += pages.len() as u64;
                match access {
                    AccessMode::Read => {
                        let mut i = 0;
                        while i < pages.len() {
                            let n = t.read_run(fd, &pages[i..]);
                            t.read_settle(n as u64).await;
                            i += n;
                            if let Some(&p) = pages.get(i) {
                                t.pread(fd, None, 4096, p * 4096).await.expect("a page read");
                                misses += 1;
                                i += 1;
                            }
                        }
                    }
                    AccessMode::Mmap => {
                        refs.clear();
                        refs.extend(
                            pages.iter().map(|&p| (base + Bytes(p * 4096), mm::Access::Read)),
                        );
                        let before = majflt(&t);
                        t.access_all(&refs).await.expect("the mapping covers every page");
                        misses += majflt(&t) - before;
                    }
                }
                c.set((requests, misses));
            }
        })
        .map_err(sim)?;
    let before = machine.vmstat();
    let run = machine.run_observed(&mut |_| {
        progress(counts.get().0, &reader.borrow());
        Ok(())
    });
    run.map_err(|e| crate::stopped(&e, PageCacheError::Config, PageCacheError::Sim))?;
    if let Some(e) = failure.borrow_mut().take() {
        return Err(e);
    }
    machine.check().map_err(|e| sim(format!("checker: {e}")))?;
    let fields = ReportFields { name, format, requests_misses: counts.get(), before };
    report(&machine, options, fields).map_err(sim)
}

/// What [`report`] needs from the replay besides the machine.
struct ReportFields<'a> {
    name: &'a str,
    format: String,
    requests_misses: (u64, u64),
    /// `/proc/vmstat` before the replay.
    before: mm::vmstat::VmStats,
}

/// The report of a finished replay.
fn report(
    machine: &Machine,
    options: &PageCacheOptions,
    f: ReportFields<'_>,
) -> Result<PageCacheReport, String> {
    let after = machine.vmstat();
    let (requests, misses) = f.requests_misses;
    let vmstat: BTreeMap<String, u64> = COUNTERS
        .iter()
        .map(|&n| {
            let k = mm::vmstat::vmstat_key(n).expect("a vmstat key");
            (n.to_string(), after.get(k) - f.before.get(k))
        })
        .collect();
    let cg = machine.cgroup("/replay")?;
    let lru = ["anon", "file"]
        .into_iter()
        .map(|t| {
            let counts = LruCounts {
                evictions: vmstat[&format!("pgsteal_{t}")],
                refaults: vmstat[&format!("workingset_refault_{t}")],
                refault_activations: vmstat[&format!("workingset_activate_{t}")],
            };
            (t.to_string(), counts)
        })
        .collect();
    Ok(PageCacheReport {
        trace: f.name.to_string(),
        format: f.format,
        policy: options.policy.name().into(),
        access: format!("{:?}", options.access).to_lowercase(),
        fadvise: options.fadvise,
        kernel: options.kernel.to_string(),
        cache_pages: options.cache.as_u64().div_ceil(4096),
        requests,
        hits: requests - misses,
        misses,
        hit_ratio: if requests == 0 { 0.0 } else { (requests - misses) as f64 / requests as f64 },
        refaults: machine.kernel().state().memcgs[cg]
            .stat
            .get(mm::vmstat::VmStat::WorkingsetRefaultFile),
        activations: vmstat["pgactivate"],
        lru,
        vmstat,
        memory_stat: machine.memory_stat(cg),
        virtual_time_ns: machine.handle().now().since(simcore::SimTime::ZERO).as_ns(),
        events: machine.handle().events(),
        digest: machine.handle().digest().to_string(),
    })
}

fn majflt(t: &mm::Thread) -> u64 {
    t.cx().kernel().state().vmstat.get(mm::vmstat::VmStat::Pgmajfault)
}
