//! `mmsim demo rwsem`: tasks contending on one rwsem, with throughput and wait-time percentiles.
//!
//! Each task loops: take the semaphore (for write with the configured share), hold it for
//! `hold`, release, think for `think`. The output is what a kernel developer reads from
//! `lock_stat`: acquisitions per second of virtual time and wait-time percentiles per mode.

use clap::{Args, Subcommand};
use engine::{SchedulerKind, Sim, SimConfig};
use simcore::{Histogram, Ratio, SimDuration};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Debug, Subcommand)]
pub(crate) enum Demo {
    /// N tasks contending on one rwsem.
    Rwsem(RwsemArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RwsemArgs {
    /// Simulated CPUs (one task per CPU, round robin).
    #[arg(long, default_value_t = 8)]
    cpus: u32,
    /// Contending tasks.
    #[arg(long, default_value_t = 8)]
    tasks: u32,
    /// Share of acquisitions that are writes, as `num/den` or `p%`.
    #[arg(long, default_value = "1/4")]
    write_share: Ratio,
    /// Acquisitions per task.
    #[arg(long, default_value_t = 20_000)]
    iterations: u64,
    /// Hold time in ns.
    #[arg(long, default_value_t = 500)]
    hold_ns: u64,
    /// Think time between acquisitions in ns.
    #[arg(long, default_value_t = 2_000)]
    think_ns: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// time-ordered, random, pct, pct:DEPTH or pct:DEPTH:STEPS.
    #[arg(long, default_value = "time-ordered")]
    scheduler: SchedulerKind,
}

pub(crate) fn run(demo: &Demo) -> Result<(), String> {
    match demo {
        Demo::Rwsem(args) => rwsem(args),
    }
}

fn rwsem(a: &RwsemArgs) -> Result<(), String> {
    let config =
        SimConfig { cpus: a.cpus, seed: a.seed, scheduler: a.scheduler, ..SimConfig::default() };
    let mut sim = Sim::new(config).map_err(|e| e.to_string())?;
    let h = sim.handle().clone();
    let sem = h.rwsem("demo_rwsem");
    let waits = Rc::new(RefCell::new([Histogram::new(), Histogram::new()]));
    for t in 0..a.tasks {
        let cpu = h.cpu(t % a.cpus).map_err(|e| e.to_string())?;
        let (waits, share, n) = (waits.clone(), a.write_share, a.iterations);
        let (hold, think) = (SimDuration::from_ns(a.hold_ns), SimDuration::from_ns(a.think_ns));
        let mut prng = h.prng("demo").substream(u64::from(t));
        h.spawn(cpu, format!("task{t}"), move |cx| async move {
            for _ in 0..n {
                let write = prng.chance(share);
                let start = cx.now();
                let guard = if write { sem.write(&cx).await } else { sem.read(&cx).await };
                let waited = cx.now().since(start).as_ns();
                waits.borrow_mut()[usize::from(write)].record(waited);
                cx.charge(hold).await;
                drop(guard);
                cx.charge(think).await;
            }
        });
    }
    let report = sim.run().map_err(|e| e.to_string())?;
    let waits = waits.borrow();
    let total = waits[0].count() + waits[1].count();
    let secs = report.now.since(simcore::SimTime::ZERO).as_secs_f64();
    println!(
        "rwsem demo: {} tasks on {} CPUs, write share {}/{}, hold {} ns, think {} ns, seed {}, scheduler {}",
        a.tasks,
        a.cpus,
        a.write_share.num,
        a.write_share.den,
        a.hold_ns,
        a.think_ns,
        a.seed,
        a.scheduler
    );
    println!("virtual time        {}", report.now.since(simcore::SimTime::ZERO));
    println!("acquisitions        {total}");
    println!("throughput          {:.0} acquisitions/s (virtual)", total as f64 / secs);
    println!(
        "{:<8} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "wait ns", "count", "mean", "p50", "p99", "max"
    );
    for (name, h) in ["read", "write"].iter().zip(waits.iter()) {
        println!(
            "{name:<8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            h.count(),
            h.mean(),
            h.p50(),
            h.p99(),
            h.max()
        );
    }
    print!("{}", h.lock_stat_text());
    println!("events {}  digest {}", report.events, report.digest);
    Ok(())
}
