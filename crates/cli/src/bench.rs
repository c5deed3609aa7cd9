//! `mmsim bench ...`: benchmarks that print figures (never asserted: they are read, recorded and
//! compared as ratios).
//!
//! - `engine`: executor throughput in task switches per host second, for tasks that only charge
//!   virtual time and for tasks contending on one rwsem. A switch is one scheduling event (a task
//!   resumed at a blocking point). Target: at least 10 million per second on one core.
//! - `mm`: host memory per simulated 4 KiB page after touching an anonymous mapping (target: at
//!   most 16 bytes; Linux spends 64 on `struct page`), and anonymous first-touch faults per host
//!   second.
//! - `explore`: schedules explored per second on the engine-level toy, and on each race scenario
//!   the time to the first violation (or the rate when it declares none).

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
    /// Explorer throughput and time to first violation of the race scenarios.
    Explore(ExploreBenchArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ExploreBenchArgs {
    /// Seconds to spend on the toy.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// The race scenarios.
    #[arg(long, default_value = "scenarios/races")]
    dir: String,
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
        Bench::Explore(a) => explore_bench(a),
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

fn explore_bench(a: &ExploreBenchArgs) -> Result<(), String> {
    let limit = std::time::Duration::from_secs(a.seconds);
    let start = Instant::now();
    let toy = explore::bench(&mut |_| start.elapsed() >= limit).map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    println!("explorer benchmark");
    println!(
        "toy (3 locked tasks x 2 increments, random)  {:>9.0} schedules/s  ({} schedules, {} states, {secs:.2} s)",
        toy.schedules as f64 / secs,
        toy.schedules,
        toy.states
    );
    let mut files: Vec<_> = std::fs::read_dir(&a.dir)
        .map_err(|e| format!("{}: {e}", a.dir))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    files.retain(|p| p.extension().is_some_and(|x| x == "toml"));
    files.sort();
    for f in files {
        let s = lab::scenario::run::load(&f.to_string_lossy()).map_err(|e| e.to_string())?;
        for d in &s.explore {
            let o = lab::scenario::run::Overrides {
                kernel: d.kernel,
                sets: d.sets.clone(),
                ..Default::default()
            };
            let config = lab::scenario::run::machine_config(&s.machine, &o, &s.file)
                .map_err(|e| e.to_string())?;
            let kernel = config.kernel;
            let strategy =
                explore::Strategy::from_spec(&d.strategy, d.seed).map_err(|e| e.to_string())?;
            let options = explore::Options {
                state_cache: false,
                ..explore::Options::new(strategy, d.budget)
            };
            let mut trials = lab::scenario::explore::factory(&s, config);
            let start = Instant::now();
            let out = explore::explore(&mut trials, &options, &mut |_| false)
                .map_err(|e| e.to_string())?;
            let secs = start.elapsed().as_secs_f64();
            let what = match &out.violation {
                Some(v) => format!(
                    "first violation after {} schedules in {secs:.3} s (minimised to {} preemption(s))",
                    out.schedules, v.preemptions
                ),
                None => format!(
                    "no violation in {} schedules ({:.0}/s{})",
                    out.schedules,
                    out.schedules as f64 / secs,
                    if out.exhausted { ", exhausted" } else { "" }
                ),
            };
            println!("{} [{kernel} {}]: {what}", f.display(), d.strategy);
        }
    }
    Ok(())
}
