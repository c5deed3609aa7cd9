//! vm-scalability's `usemem` in its copy-on-write cases (vm-scalability, Intel/Fengguang Wu,
//! `case-anon-cow-seq`, `case-anon-cow-seq-hugetlb`; run by LKP's `vm-scalability` test), which
//! is also the control of seed `001`'s cover letter: `usemem -n 48 --prealloc --prefault -O -U
//! 3448054972` is `case-anon-cow-seq-hugetlb`'s command line (Mike Kravetz's 2020 reply to LKP's
//! report on c0d0381ade79 names that test case).
//!
//! What the program does (`usemem.c`, as vm-scalability ships it, read in a public copy): `main`
//! reads the clock (`start_time`) first; `--prealloc` maps the region before forking, with
//! `MAP_POPULATE` for `--prefault`, `MAP_ANONYMOUS` for `-O`, `MAP_HUGETLB` for `-U`, private,
//! so the kernel faults every page in (zeroed) inside `mmap`; then `-n N` forks N tasks, which
//! wait on a pipe until all are ready and then each write every 8-byte word of the region in
//! order (`do_rw_once`, the default `--step` of one `long`), so the first store to each page
//! of a task is a copy-on-write fault. A task reports `unit_bytes` over the time since
//! `start_time`, which it inherited from the parent: `unit_bytes` is the region's size plus
//! one eighth of it (`--prealloc` counts its mapping as `bytes / 8` in `done_bytes`), so a
//! report reads `917319627 bytes` for `815395225` asked, as LKP's logs show. The test reports
//! the median over tasks (`vm-scalability.median`); the cover letter an average of 48 samples.
//!
//! [`CowSeq`] runs it on 4 KiB pages or, with `hugetlb`, on anonymous hugetlb pages (whose COW
//! path in `mm/hugetlb.c`, `hugetlb_wp`, decides reuse by mapcount in every era). Each task's
//! words are one access through the MMU per page (faulting as needed) and the page's other
//! words as accesses through the same TLB entry ([`mm::Thread::stores_after_copy`]): the first
//! store's fault copied the page, and the stores that follow hit the caches where the copy left
//! its lines there and otherwise read each line for ownership and write it back through the
//! memory bus (`mm::arch::caches`: none of a 4 KiB page, most of a 2 MiB one). The children are forked one after the other by
//! the parent before any of them writes, and all start writing together (the pipe's "go").

use mm::{Access, Machine, MmapArgs, Pid, map, prot};
use simcore::{Bytes, SimTime, VirtAddr};
use std::cell::RefCell;
use std::rc::Rc;

/// The size of one word the program writes (`sizeof(long)`, the default `--step`).
const WORD: u64 = 8;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The size argument: the region every task writes, in bytes (the mapping is rounded up to
    /// whole pages, as `mmap` rounds a hugetlb mapping's length).
    pub region: Bytes,
    pub tasks: u32,
    /// The parent's CPU; the children run on the following ones, wrapping around to the first
    /// CPU (where the parent by then only waits).
    pub first_cpu: u32,
    /// The region is anonymous hugetlb memory (`MAP_HUGETLB`, 2 MiB pages; `-U`).
    pub hugetlb: bool,
}

impl Config {
    /// The page size of the region.
    fn unit(&self) -> Bytes {
        if self.hugetlb { Bytes(2 << 20) } else { Bytes::PAGE }
    }

    /// Checks that there is a task and at least one word to write.
    fn check(&self) -> Result<(), String> {
        if self.tasks == 0 || self.region.as_u64() < WORD {
            return Err(format!(
                "usemem: {} tasks over {}: expected at least one task and one word",
                self.tasks, self.region
            ));
        }
        Ok(())
    }

    /// The mapping's length: the region rounded up to whole pages.
    fn mapping(&self) -> Bytes {
        Bytes(self.region.as_u64().next_multiple_of(self.unit().as_u64()))
    }

    /// The region's `mmap`: private, anonymous, prefaulted (`--prealloc --prefault -O`).
    fn mmap_args(&self) -> MmapArgs {
        let anon = map::PRIVATE | map::ANONYMOUS | map::POPULATE;
        MmapArgs {
            addr: None,
            len: self.mapping(),
            prot: prot::READ | prot::WRITE,
            flags: if self.hugetlb { anon | map::HUGETLB } else { anon },
            fd: None,
            offset: 0,
        }
    }

    /// What a task reports having done: the region and one eighth of it for `--prealloc`.
    fn unit_bytes(&self) -> u64 {
        self.region.as_u64() + self.region.as_u64() / 8
    }
}

/// One child's measured throughput.
#[derive(Clone, Copy, Debug)]
pub struct TaskResult {
    /// `unit_bytes` as the task reports it.
    pub bytes: u64,
    /// The program's `start_time` (the parent's, before it maps the region).
    pub start: SimTime,
    pub end: SimTime,
}

impl TaskResult {
    pub fn throughput_bps(&self) -> f64 {
        self.bytes as f64 * 1e9 / self.end.since(self.start).as_ns().max(1) as f64
    }
}

/// What the parent set up: its start time, the region and the forked children.
#[derive(Clone, Debug)]
struct Prepared {
    start: SimTime,
    addr: VirtAddr,
    children: Vec<Pid>,
}

/// A usemem COW run on a machine.
#[derive(Debug)]
pub struct CowSeq {
    config: Config,
    parent: Pid,
    prepared: Rc<RefCell<Option<Prepared>>>,
    results: Rc<RefCell<Vec<TaskResult>>>,
}

impl CowSeq {
    pub fn new(machine: &mut Machine, config: Config) -> Result<CowSeq, String> {
        config.check()?;
        let parent = machine.new_process("usemem").map_err(|e| e.to_string())?;
        Ok(CowSeq { config, parent, prepared: Rc::default(), results: Rc::default() })
    }

    /// Phase one: the parent reads the clock, maps and prefaults the region, then forks the
    /// tasks.
    pub fn spawn_setup(&self, machine: &mut Machine) -> Result<(), String> {
        let (args, tasks) = (self.config.mmap_args(), self.config.tasks);
        let slot = self.prepared.clone();
        machine.spawn_thread(
            self.parent,
            self.config.first_cpu,
            "usemem",
            move |t| async move {
                let start = t.now();
                let Ok(addr) = t.mmap(args).await else {
                    return;
                };
                let mut children = Vec::new();
                for _ in 0..tasks {
                    match t.fork().await {
                        Ok(child) => children.push(child),
                        Err(_) => return,
                    }
                }
                *slot.borrow_mut() = Some(Prepared { start, addr, children });
            },
        )?;
        Ok(())
    }

    /// Phase two: every child writes the whole region, word by word.
    pub fn spawn_measured(&self, machine: &mut Machine) -> Result<(), String> {
        let p = self.prepared.borrow().clone().ok_or("usemem: the parent could not set up")?;
        let cpus = machine.config().profile.cpus;
        for (i, child) in p.children.into_iter().enumerate() {
            let (results, config) = (self.results.clone(), self.config.clone());
            let cpu = (config.first_cpu + 1 + i as u32) % cpus;
            let (start, addr) = (p.start, p.addr);
            machine.spawn_thread(child, cpu, "usemem-child", move |t| async move {
                if write_words(&t, addr, &config).await.is_ok() {
                    let bytes = config.unit_bytes();
                    results.borrow_mut().push(TaskResult { bytes, start, end: t.now() });
                }
            })?;
        }
        Ok(())
    }

    /// The tasks that completed, in completion order.
    pub fn results(&self) -> Vec<TaskResult> {
        self.results.borrow().clone()
    }

    /// The median task throughput in bytes per second (`vm-scalability.median`).
    pub fn median_bps(&self) -> f64 {
        median(self.results().iter().map(TaskResult::throughput_bps).collect())
    }

    /// The mean task throughput in bytes per second (the cover letter's "48 sample Avg").
    pub fn mean_bps(&self) -> f64 {
        let r = self.results();
        r.iter().map(TaskResult::throughput_bps).sum::<f64>() / r.len().max(1) as f64
    }
}

/// One task's stores: every word of the region in order, a page at a time.
async fn write_words(t: &mm::Thread, addr: VirtAddr, config: &Config) -> Result<(), String> {
    let unit = config.unit().as_u64();
    let mut left = config.region.as_u64() / WORD;
    let mut page = addr;
    while left > 0 {
        let here = left.min(unit / WORD);
        t.access_all(&[(page, Access::Write)]).await.map_err(|s| format!("{s:?}"))?;
        t.stores_after_copy(here - 1, Bytes(here * WORD)).await;
        left -= here;
        page = page + Bytes(unit);
    }
    Ok(())
}

/// The median of `v` (0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if !n.is_multiple_of(2) => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
