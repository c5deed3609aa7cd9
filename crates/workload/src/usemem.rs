//! vm-scalability's `usemem` in its copy-on-write cases (vm-scalability, Intel/Fengguang Wu,
//! `case-anon-cow-seq`, `case-anon-cow-seq-hugetlb`; run by LKP's `vm-scalability` test).
//!
//! The parent maps an anonymous region, writes every page (`--prealloc --prefault`), then forks
//! tasks that each write the whole region sequentially, so every first write of a child is a
//! copy-on-write fault. Each task reports its throughput (bytes written per second); the test
//! reports the median over tasks (`vm-scalability.median`).
//!
//! [`CowSeq`] is the COW case on 4 KiB pages or, with `hugetlb`, on anonymous hugetlb pages
//! (`case-anon-cow-seq-hugetlb`, whose COW path in `mm/hugetlb.c`, `hugetlb_wp`, decides reuse by
//! mapcount in every era); the tasks are forked one after the other by the parent before any of
//! them writes. [`HugetlbFill`] is `usemem -U` on real hugetlb pages.

use mm::{Access, Machine, Pid};
use simcore::{Bytes, SimTime, VirtAddr};
use std::cell::RefCell;
use std::rc::Rc;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub region: Bytes,
    pub tasks: u32,
    /// The first CPU used; the children run on the following ones.
    pub first_cpu: u32,
    /// The region is anonymous hugetlb memory (`MAP_HUGETLB`, 2 MiB pages; `-U`).
    pub hugetlb: bool,
}

impl Config {
    /// Checks that there is a task and that the region is whole pages of `unit`; `what` names
    /// the program in the error.
    fn check(&self, what: &str, unit: Bytes) -> Result<(), String> {
        if self.tasks == 0
            || self.region < unit
            || !self.region.as_u64().is_multiple_of(unit.as_u64())
        {
            return Err(format!(
                "{what}: {} tasks over {}: expected at least one task and a region of whole {unit} pages",
                self.tasks, self.region
            ));
        }
        Ok(())
    }

    /// The region's `mmap` flags.
    fn map_flags(&self) -> u32 {
        let anon = mm::map::PRIVATE | mm::map::ANONYMOUS;
        if self.hugetlb { anon | mm::map::HUGETLB } else { anon }
    }
}

/// One child's measured throughput.
#[derive(Clone, Copy, Debug)]
pub struct TaskResult {
    pub bytes: u64,
    pub start: SimTime,
    pub end: SimTime,
}

impl TaskResult {
    pub fn throughput_bps(&self) -> f64 {
        self.bytes as f64 * 1e9 / self.end.since(self.start).as_ns().max(1) as f64
    }
}

/// The region and the forked children, once the parent has set them up.
type Setup = Rc<RefCell<Option<(VirtAddr, Vec<Pid>)>>>;

/// A usemem COW run on a machine.
#[derive(Debug)]
pub struct CowSeq {
    config: Config,
    parent: Pid,
    region: Setup,
    results: Rc<RefCell<Vec<TaskResult>>>,
}

impl CowSeq {
    pub fn new(machine: &mut Machine, config: Config) -> Result<CowSeq, String> {
        let unit = if config.hugetlb { Bytes(2 << 20) } else { Bytes::PAGE };
        config.check("usemem", unit)?;
        let parent = machine.new_process("usemem").map_err(|e| e.to_string())?;
        Ok(CowSeq { config, parent, region: Rc::default(), results: Rc::default() })
    }

    /// Phase one: the parent maps and prefaults the region, then forks the tasks.
    pub fn spawn_setup(&self, machine: &mut Machine) -> Result<(), String> {
        let (len, tasks) = (self.config.region, self.config.tasks);
        let args = mm::MmapArgs {
            addr: None,
            len,
            prot: mm::prot::READ | mm::prot::WRITE,
            flags: self.config.map_flags(),
            fd: None,
            offset: 0,
        };
        let slot = self.region.clone();
        machine.spawn_thread(
            self.parent,
            self.config.first_cpu,
            "usemem",
            move |t| async move {
                let Ok(addr) = t.mmap(args).await else {
                    return;
                };
                if t.touch(addr, len, Access::Write).await.is_err() {
                    return;
                }
                let mut children = Vec::new();
                for _ in 0..tasks {
                    match t.fork().await {
                        Ok(child) => children.push(child),
                        Err(_) => return,
                    }
                }
                *slot.borrow_mut() = Some((addr, children));
            },
        )?;
        Ok(())
    }

    /// Phase two: every child writes the whole region.
    pub fn spawn_measured(&self, machine: &mut Machine) -> Result<(), String> {
        let (addr, children) =
            self.region.borrow().clone().ok_or("usemem: the parent could not set up")?;
        for (i, child) in children.into_iter().enumerate() {
            let results = self.results.clone();
            let len = self.config.region;
            let cpu = self.config.first_cpu + 1 + i as u32;
            machine.spawn_thread(child, cpu, "usemem-child", move |t| async move {
                let start = t.now();
                if t.touch(addr, len, Access::Write).await.is_ok() {
                    results.borrow_mut().push(TaskResult {
                        bytes: len.as_u64(),
                        start,
                        end: t.now(),
                    });
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
}

/// `usemem -U --prealloc --prefault` (vm-scalability's hugetlb case, the control of seed
/// `001`'s cover letter): each task maps its own anonymous private region with `MAP_HUGETLB |
/// MAP_POPULATE` (its pages faulted in and zeroed by the mapping call), then stores one word in
/// every 4 KiB of it; its throughput is the region's size over the time from the `mmap` call to
/// the last store. Tasks are processes of their own, each on its own CPU.
#[derive(Debug)]
pub struct HugetlbFill {
    results: Rc<RefCell<Vec<TaskResult>>>,
}

impl HugetlbFill {
    /// Starts the tasks; the region must be whole 2 MiB pages.
    pub fn spawn(machine: &mut Machine, config: &Config) -> Result<HugetlbFill, String> {
        config.check("usemem -U", Bytes(2 << 20))?;
        let results: Rc<RefCell<Vec<TaskResult>>> = Rc::default();
        for i in 0..config.tasks {
            let pid = machine.new_process(&format!("usemem-{i}")).map_err(|e| e.to_string())?;
            let (results, len) = (results.clone(), config.region);
            machine.spawn_thread(pid, config.first_cpu + i, "usemem", move |t| async move {
                let start = t.now();
                if fill_hugetlb(&t, len).await.is_ok() {
                    results.borrow_mut().push(TaskResult {
                        bytes: len.as_u64(),
                        start,
                        end: t.now(),
                    });
                }
            })?;
        }
        Ok(HugetlbFill { results })
    }

    /// The median task throughput in bytes per second (`vm-scalability.median`).
    pub fn median_bps(&self) -> f64 {
        median(self.results.borrow().iter().map(TaskResult::throughput_bps).collect())
    }

    /// How many tasks finished.
    pub fn finished(&self) -> usize {
        self.results.borrow().len()
    }
}

/// One task's `mmap` and stores.
async fn fill_hugetlb(t: &mm::Thread, len: Bytes) -> Result<(), String> {
    use mm::{MmapArgs, map, prot};
    let args = MmapArgs {
        addr: None,
        len,
        prot: prot::READ | prot::WRITE,
        flags: map::PRIVATE | map::ANONYMOUS | map::HUGETLB | map::POPULATE,
        fd: None,
        offset: 0,
    };
    let addr = t.mmap(args).await.map_err(|e| format!("{e:?}"))?;
    let pages = len.as_u64() >> 12;
    let mut first = 0;
    while first < pages {
        let last = pages.min(first + 512);
        let refs: Vec<(VirtAddr, Access)> =
            (first..last).map(|p| (addr + Bytes::from_pages(p), Access::Write)).collect();
        t.access_all(&refs).await.map_err(|s| format!("{s:?}"))?;
        first = last;
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
