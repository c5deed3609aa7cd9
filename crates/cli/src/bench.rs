//! `mmsim bench engine`: executor throughput in task switches per host second.
//!
//! Two workloads, each timed on the host clock: tasks that only charge virtual time, and tasks
//! contending on one rwsem. A switch is one scheduling event (a task resumed at a blocking point).
//! The target is at least 10 million switches per second on one core.

use clap::{Args, Subcommand};
use engine::{Sim, SimConfig};
use simcore::SimDuration;
use std::time::Instant;

#[derive(Debug, Subcommand)]
pub(crate) enum Bench {
    /// Executor throughput (switches per host second).
    Engine(EngineArgs),
}

#[derive(Debug, Args)]
pub(crate) struct EngineArgs {
    /// Tasks per workload.
    #[arg(long, default_value_t = 16)]
    tasks: u32,
    /// Simulated CPUs.
    #[arg(long, default_value_t = 8)]
    cpus: u32,
    /// Scheduling events per workload (approximately).
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
}

pub(crate) fn run(bench: &Bench) -> Result<(), String> {
    match bench {
        Bench::Engine(a) => engine_bench(a),
    }
}

fn engine_bench(a: &EngineArgs) -> Result<(), String> {
    let per_task = (a.events / u64::from(a.tasks)).max(1);
    println!(
        "engine benchmark: {} tasks on {} CPUs, ~{} events per workload",
        a.tasks, a.cpus, a.events
    );
    let charge = measure(a, |sim| {
        let h = sim.handle().clone();
        for t in 0..a.tasks {
            h.spawn(h.cpu(t % a.cpus).unwrap(), format!("charger{t}"), move |cx| async move {
                for i in 0..per_task {
                    cx.charge(SimDuration::from_ns(50 + i % 7)).await;
                }
            });
        }
    })?;
    println!(
        "charge-only         {:>12.0} switches/s  ({} events in {:.3} s)",
        charge.0, charge.1, charge.2
    );
    let rwsem = measure(a, |sim| {
        let h = sim.handle().clone();
        let sem = h.rwsem("bench_rwsem");
        for t in 0..a.tasks {
            // Each iteration is ~2-3 events: the hold charge, the think charge, sometimes a wait.
            let n = per_task / 2;
            h.spawn(h.cpu(t % a.cpus).unwrap(), format!("contender{t}"), move |cx| async move {
                for i in 0..n {
                    let g = if (i + u64::from(t)) % 4 == 0 {
                        sem.write(&cx).await
                    } else {
                        sem.read(&cx).await
                    };
                    cx.charge(SimDuration::from_ns(100)).await;
                    drop(g);
                    cx.charge(SimDuration::from_ns(300)).await;
                }
            });
        }
    })?;
    println!(
        "rwsem contention    {:>12.0} switches/s  ({} events in {:.3} s)",
        rwsem.0, rwsem.1, rwsem.2
    );
    Ok(())
}

/// Builds a fresh simulation with `setup`, runs it, and returns (switches/s, events, seconds).
fn measure(a: &EngineArgs, setup: impl FnOnce(&Sim)) -> Result<(f64, u64, f64), String> {
    let mut sim =
        Sim::new(SimConfig { cpus: a.cpus, ..SimConfig::default() }).map_err(|e| e.to_string())?;
    setup(&sim);
    let start = Instant::now();
    let report = sim.run().map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    Ok((report.events as f64 / secs, report.events, secs))
}
