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
//! The access pattern is pmbench's `normal_ih` ([`Pattern::NormalIh`]). The threads of a process
//! share its map; each has its own generator.
//!
//! Approximations:
//! - the benchmark runs for a number of accesses per thread rather than for a duration, and
//!   without warm-up (LKP's `cold: 1`);
//! - an access that hits costs the profile's `mem_access` (no cache or TLB model yet), so
//!   throughput differences come from the kernel's work.

use crate::access::{AccessLoop, Pattern, Stats};
use mm::{Access, Machine, Pid};
use simcore::{Bytes, Prng, Ratio, VirtAddr};
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
                    let run = AccessLoop {
                        base,
                        pages: region_pages,
                        pattern: Pattern::NormalIh,
                        read_ratio,
                        accesses: n,
                    };
                    if run.run(&t, &mut rng, &stats).await.is_err() {
                        stats.borrow_mut().failed += 1;
                    }
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
