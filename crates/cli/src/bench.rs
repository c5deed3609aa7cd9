//! `mmsim bench ...`: benchmarks that print figures (never asserted: they are read, recorded and
//! compared as ratios).
//!
//! - `engine`: executor throughput in task switches per host second, for tasks that only charge
//!   virtual time and for tasks contending on one rwsem. A switch is one scheduling event (a task
//!   resumed at a blocking point). Target: at least 10 million per second on one core.
//! - `mm`: host memory per simulated 4 KiB page after touching an anonymous mapping (target: at
//!   most 16 bytes; Linux spends 64 on `struct page`), and anonymous first-touch faults per host
//!   second.

use clap::{Args, Subcommand};
use engine::{Sim, SimConfig};
use simcore::SimDuration;
use std::time::Instant;

#[derive(Debug, Subcommand)]
pub(crate) enum Bench {
    /// Executor throughput (switches per host second).
    Engine(EngineArgs),
    /// Host memory per simulated page and anonymous fault throughput.
    Mm(MmArgs),
}

#[derive(Debug, Args)]
pub(crate) struct MmArgs {
    /// Size of the anonymous mapping touched, in GiB.
    #[arg(long, default_value_t = 64)]
    gib: u64,
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
        Bench::Mm(a) => mm_bench(a),
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

/// Resident host memory of this process in bytes (`/proc/self/statm`).
fn host_rss() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm")
        .map_err(|e| format!("/proc/self/statm: {e}"))?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or("malformed /proc/self/statm")?;
    Ok(pages * 4096)
}

fn mm_bench(a: &MmArgs) -> Result<(), String> {
    use mm::{Access, KernelVersion, Machine, MachineConfig, Profile, prot};
    use simcore::Bytes;
    let size = Bytes::gib(a.gib);
    let pages = size.pages_ceil();
    // Room for the mapping, its page tables and the zero page.
    let memory = Bytes::gib(a.gib + a.gib.div_ceil(256) + 1);
    let profile = Profile::named("epyc-vm")?.resized(Some(1), Some(memory))?;
    let mut machine = Machine::new(MachineConfig::new(profile, KernelVersion::DEFAULT))?;
    let pid = machine.new_process("touch").map_err(|e| e.to_string())?;
    machine.spawn_thread(pid, 0, "touch", move |t| async move {
        let addr = t.mmap_anon(size, prot::READ | prot::WRITE).await.expect("mmap");
        t.touch(addr, size, Access::Write).await.expect("touch");
    })?;
    let before = host_rss()?;
    let start = Instant::now();
    let report = machine.run().map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    let after = host_rss()?;
    let st = machine.kernel().state();
    let folio_bytes = st.folios.host_bytes() as f64 / pages as f64;
    let table_bytes = st.pt.host_bytes() as f64 / pages as f64;
    let faults = st.vmstat.get(mm::vmstat::VmStat::Pgfault);
    println!("mm benchmark: {} GiB anonymous, written once ({pages} pages, THP never)", a.gib);
    println!(
        "host memory       {:>8.1} bytes per simulated 4 KiB page (target <= 16; Linux struct page: 64)",
        (after - before) as f64 / pages as f64
    );
    println!("  folio state     {folio_bytes:>8.1} bytes per page");
    println!(
        "  page tables     {table_bytes:>8.1} bytes per page (the simulated hardware's 8-byte PTEs)"
    );
    println!(
        "fault throughput  {:>8.0} first-touch faults per host second ({faults} faults in {secs:.2} s)",
        faults as f64 / secs
    );
    println!("virtual time      {}", report.now.since(simcore::SimTime::ZERO));
    Ok(())
}
