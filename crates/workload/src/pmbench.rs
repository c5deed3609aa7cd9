//! A pmbench-like paging benchmark (pmbench v0.9, "paging and virtual memory benchmark", Intel
//! 2014-2017, as run by LKP's `pmbench` test).
//!
//! pmbench maps a large anonymous region per process, optionally writes all of it first
//! (`initialize`), then each thread accesses it for a while, choosing the page of each access
//! from a distribution and reading or writing with a given ratio, and times every access
//! (`rdtsc` around the access). It reports access throughput and the latency distribution. When
//! the set is larger than memory, the latency is dominated by page faults: swap-ins, and, under
//! the `page_count` COW rule, the copies made when a page swapped in by a read is then written.
//!
//! Here every access is one `Thread::touch` of one byte, timed in virtual time. The benchmark
//! runs in two phases on the same machine: one thread per process maps and initialises its
//! region, then the measured threads run.
//!
//! The access pattern is pmbench's `normal_ih` (`pattern.c`): the mean of twelve uniform draws
//! over the set (an Irwin-Hall bell centred on the middle of the set, standard deviation about a
//! twelfth of it), redrawn when it falls outside — integer arithmetic, as in pmbench. The
//! threads of a process share its map; each has its own generator.
//!
//! Approximations:
//! - the benchmark runs for a number of accesses per thread rather than for a duration, and
//!   without warm-up (LKP's `cold: 1`);
//! - an access that hits costs the profile's `mem_access` (no cache or TLB model yet), so
//!   throughput differences come from the kernel's work.

use mm::{Access, Machine, Pid};
use simcore::{Bytes, Histogram, Prng, Ratio, SimTime, VirtAddr};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub processes: u32,
    pub threads_per_process: u32,
    /// The whole set, over all processes (LKP's `total_setsize`).
    pub set_size: Bytes,
    /// The share of accesses that are reads (LKP's `ratio`).
    pub read_ratio: Ratio,
    /// Write every page before the measured phase.
    pub initialize: bool,
    pub accesses_per_thread: u64,
    /// The first CPU used; threads are placed on consecutive CPUs.
    pub first_cpu: u32,
}

/// What the measured phase observed.
#[derive(Debug, Default)]
pub struct Stats {
    /// Latency of every access, in ns.
    pub latency_ns: Histogram,
    pub reads: u64,
    pub writes: u64,
    /// Accesses that raised SIGSEGV/SIGBUS/SIGKILL (none expected).
    pub failed: u64,
    pub start: Option<SimTime>,
    pub end: SimTime,
}

impl Stats {
    /// Accesses per virtual second over the measured phase.
    pub fn throughput_aps(&self) -> f64 {
        let Some(start) = self.start else { return 0.0 };
        let ns = self.end.as_ns().saturating_sub(start.as_ns()).max(1);
        self.latency_ns.count() as f64 * 1e9 / ns as f64
    }
}

/// A pmbench run on a machine.
#[derive(Debug)]
pub struct Pmbench {
    config: Config,
    pids: Vec<Pid>,
    regions: Vec<Rc<Cell<Option<VirtAddr>>>>,
    stats: Rc<RefCell<Stats>>,
    prng: Prng,
}

impl Pmbench {
    /// Creates the processes; `seed` is the run seed.
    pub fn new(machine: &mut Machine, config: Config, seed: u64) -> Result<Pmbench, String> {
        config.region_size()?;
        let mut pids = Vec::new();
        for p in 0..config.processes {
            pids.push(machine.new_process(&format!("pmbench-{p}")).map_err(|e| e.to_string())?);
        }
        let regions = pids.iter().map(|_| Rc::new(Cell::new(None))).collect();
        let prng = Prng::from_seed(seed).stream("pmbench");
        Ok(Pmbench { config, pids, regions, stats: Rc::default(), prng })
    }

    /// Phase one: each process maps its region and, with `initialize`, writes every page. Run
    /// the machine afterwards.
    pub fn spawn_setup(&self, machine: &mut Machine) -> Result<(), String> {
        let len = self.config.region_size()?;
        let initialize = self.config.initialize;
        for (i, (&pid, slot)) in self.pids.iter().zip(&self.regions).enumerate() {
            let slot = slot.clone();
            let cpu = self.config.first_cpu + i as u32 * self.config.threads_per_process;
            machine.spawn_thread(pid, cpu, "pmbench-setup", move |t| async move {
                let Ok(addr) = t.mmap_anon(len, mm::prot::READ | mm::prot::WRITE).await else {
                    return;
                };
                if initialize && t.touch(addr, len, Access::Write).await.is_err() {
                    return;
                }
                slot.set(Some(addr));
            })?;
        }
        Ok(())
    }

    /// Phase two: the measured threads. Fails if the setup did not map every region.
    pub fn spawn_measured(&self, machine: &mut Machine) -> Result<(), String> {
        let cfg = &self.config;
        let region_pages = cfg.region_size()?.pages_ceil();
        for (p, (&pid, slot)) in self.pids.iter().zip(&self.regions).enumerate() {
            let base = slot.get().ok_or("pmbench: the setup phase could not map its region")?;
            for th in 0..cfg.threads_per_process {
                let index = p as u64 * u64::from(cfg.threads_per_process) + u64::from(th);
                let mut rng = self.prng.substream(index);
                let stats = self.stats.clone();
                let (n, read_ratio) = (cfg.accesses_per_thread, cfg.read_ratio);
                let cpu = cfg.first_cpu + index as u32;
                machine.spawn_thread(pid, cpu, "pmbench", move |t| async move {
                    {
                        let mut s = stats.borrow_mut();
                        let now = t.now();
                        s.start = Some(s.start.map_or(now, |st| st.min(now)));
                    }
                    for _ in 0..n {
                        let page = normal_ih(&mut rng, region_pages);
                        let read = rng.chance(read_ratio);
                        let addr = base + Bytes::from_pages(page);
                        let before = t.now();
                        let access = if read { Access::Read } else { Access::Write };
                        let ok = t.touch(addr, Bytes(1), access).await.is_ok();
                        let mut s = stats.borrow_mut();
                        if !ok {
                            s.failed += 1;
                            return;
                        }
                        s.latency_ns.record(t.now().as_ns() - before.as_ns());
                        if read {
                            s.reads += 1;
                        } else {
                            s.writes += 1;
                        }
                    }
                    let mut s = stats.borrow_mut();
                    s.end = s.end.max(t.now());
                })?;
            }
        }
        Ok(())
    }

    pub fn stats(&self) -> std::cell::Ref<'_, Stats> {
        self.stats.borrow()
    }
}

impl Config {
    /// One process's region, page aligned.
    fn region_size(&self) -> Result<Bytes, String> {
        if self.processes == 0 || self.threads_per_process == 0 {
            return Err("pmbench needs at least one process and one thread".into());
        }
        let pages = self.set_size.pages_ceil() / u64::from(self.processes);
        if pages == 0 {
            return Err(format!("set of {}: smaller than a page per process", self.set_size));
        }
        Ok(Bytes::from_pages(pages))
    }
}

/// A page of `[0, pages)` by pmbench's `normal_ih`: the support is widened or narrowed to a
/// multiple of twelve pages `n` around the set's middle; the mean of twelve uniform draws of
/// `[0, n)`, shifted back, is redrawn until it falls inside the set.
fn normal_ih(rng: &mut Prng, pages: u64) -> u64 {
    const ORDER: u64 = 12;
    let last = pages - 1;
    let n = (ORDER * last.div_ceil(ORDER).max(1)).max(ORDER);
    let shift = (last as i64 - n as i64) / 2;
    loop {
        let sum: u64 = (0..ORDER).map(|_| rng.below(n)).sum();
        let page = (sum / ORDER) as i64 + shift;
        if (0..=last as i64).contains(&page) {
            return page as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_ih_is_a_centred_bell_with_a_twelfth_deviation() {
        let mut rng = Prng::from_seed(7);
        let pages = 1200;
        let mut counts = vec![0u32; pages as usize];
        let draws = 120_000;
        for _ in 0..draws {
            let p = normal_ih(&mut rng, pages);
            counts[p as usize] += 1;
        }
        // One standard deviation (100 pages) each side of the middle holds about 68%.
        let sigma: u32 = counts[500..700].iter().sum();
        assert!((0.64..0.72).contains(&(f64::from(sigma) / f64::from(draws))), "{sigma}");
        // Four deviations out is nearly never reached.
        let tails: u32 = counts[..200].iter().chain(&counts[1000..]).sum();
        assert!(tails < 20, "{tails}");
    }

    #[test]
    fn tiny_sets_stay_in_range() {
        let mut rng = Prng::from_seed(1);
        for pages in [1, 2, 5, 13] {
            for _ in 0..100 {
                assert!(normal_ih(&mut rng, pages) < pages);
            }
        }
    }
}
