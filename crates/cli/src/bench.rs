//! `mmsim bench ...`: benchmarks that print figures (never asserted: they are read, recorded and
//! compared as ratios).
//!
//! - `engine`: executor throughput in task switches per host second, for tasks that only charge
//!   virtual time and for tasks contending on one rwsem. A switch is one scheduling event (a task
//!   resumed at a blocking point). Target: at least 10 million per second on one core.
//! - `mm`: host memory per simulated 4 KiB page after touching an anonymous mapping (target: at
//!   most 16 bytes; Linux spends 64 on `struct page`), and anonymous first-touch faults per host
//!   second.
//! - `tlb`: trace-replay throughput in references per host second through the TLB model and page
//!   walk, on four footprints (all first-level hits; 100 MiB random; 16 GiB random with 4 KiB
//!   pages, and with 2 MiB pages), each against `tools/tlbloop.c` (compiled with `cc -O2` in the
//!   same run: a hashed fully associative L1 with an LRU list and set-indexed L2 ways with a
//!   packed LRU, what a performance-minded C programmer writes for this geometry) doing the same
//!   lookups on the same reference stream, and the rate of reading the trace alone. Rounds
//!   alternate (the C loop, then mmsim; at least three) and the median ratio and its spread are
//!   printed, with the timed part's first-level misses and walks of both sides compared (they
//!   must be the same). Target: mmsim at least 0.5x the C loop on every footprint. Each stream first touches every page once (untimed: faults are `bench mm`'s
//!   business), then makes the timed random references. The 4 KiB footprints are anonymous
//!   memory; the 2 MiB one is an executable file mapping whose text is collapsed into THPs
//!   (`MADV_COLLAPSE`, replay's `TextThp::Collapse`) before the first reference, so the loads
//!   reach it through 2 MiB TLB entries, over the same random addresses as the 16 GiB 4 KiB
//!   footprint.
//! - `explore`: schedules explored per second on the engine-level toy, and on each race scenario
//!   the time to the first violation (or the rate when it declares none).
//! - `hugetlb`: the whole `reproduce hugetlb-locking` experiment (15 runs and the controls) at
//!   full scale: median host seconds over repeats, scheduling events per host second, peak RSS
//!   (`VmHWM`). Targets: under 60 s and 500 MB on the 2-core development machine.
//! - `pagecache`: page-cache replay throughput in requests per host second on a block trace, for
//!   the pure, classic and multi-gen LRU replays, each against libCacheSim's LRU (the `libcachesim`
//!   Python package, timed in the same run around `process_trace` on the same requests in
//!   oracleGeneral form and the same cache size). Runs alternate: each round runs, per policy,
//!   libCacheSim then mmsim, and the pair gives that round's ratio; at least three rounds, the
//!   median ratio and its spread (lowest..highest) are printed. Both timers cover the same scope:
//!   decoding the oracleGeneral file and replaying every request (the reader is opened, and
//!   Python started, before the timer). Targets: pure at least 2x libCacheSim, the kernel LRUs at
//!   least 1x. Beside the timed ratio, each side's host instructions per request counted by
//!   cachegrind (`bench/cachegrind.rs`: requests `n+1..2n` of the same file, n =
//!   `--cachegrind-requests`, 100,000 by default; 0 skips the counts), which the machine's load
//!   does not move. As root, each round also replays the same requests on this machine's kernel
//!   (`bench/kernel.rs`: real `pread`s in a memory cgroup of the cache's size) and prints the
//!   kernel's system CPU per request beside mmsim's host time per request: whether the model's
//!   machinery costs less than the kernel work it models (`--no-kernel` skips it).
//! - `record`: `mmsim record`'s references per host second end to end, per CPU second and on
//!   qemu-user's side, against a baseline mmsim binary's in alternated rounds, and whether the
//!   two recordings' reference streams are identical (`bench/record.rs`). Target: 20 M per
//!   second end to end.

mod cachegrind;
mod kernel;
mod record;

use clap::{Args, Subcommand};
use engine::{Sim, SimConfig};
use simcore::SimDuration;
use std::cell::Cell;
use std::time::Instant;

#[derive(Debug, Subcommand)]
pub(crate) enum Bench {
    /// Executor throughput (switches per host second).
    Engine(EngineArgs),
    /// Host memory per simulated page and anonymous fault throughput.
    Mm(MmArgs),
    /// Explorer throughput and time to first violation of the race scenarios.
    Explore(ExploreBenchArgs),
    /// Trace replay throughput through the TLBs against a C loop doing the same lookups.
    Tlb(TlbBenchArgs),
    /// Page-cache replay throughput against libCacheSim's LRU on the same trace and cache size.
    Pagecache(PagecacheBenchArgs),
    /// The whole `reproduce hugetlb-locking` experiment: host seconds, events/s, peak RSS.
    Hugetlb(HugetlbBenchArgs),
    /// `mmsim record`'s references per second against a baseline mmsim binary's.
    Record(record::RecordBenchArgs),
}

#[derive(Debug, Args)]
pub(crate) struct HugetlbBenchArgs {
    /// Times to run the experiment (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Host threads (independent runs of the experiment spread over them).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
}

#[derive(Debug, Args)]
pub(crate) struct PagecacheBenchArgs {
    /// The block trace (ARC or oracleGeneral).
    #[arg(long, default_value = "traces/arc/P6.lis.zst")]
    trace: String,
    /// The cache (the cgroup's memory.max).
    #[arg(long, default_value = "256MiB")]
    cache: String,
    /// Requests replayed (all by default).
    #[arg(long)]
    max_requests: Option<u64>,
    /// The Python with the `libcachesim` package.
    #[arg(long, default_value = ".venv/bin/python")]
    python: String,
    /// Alternated rounds (libCacheSim, then mmsim, per policy); at least three.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..))]
    rounds: u32,
    /// The mmsim policies to compare (pure, classic, mglru), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "pure,classic,mglru")]
    policy: Vec<String>,
    /// Requests per cachegrind count: each side runs under cachegrind over the trace's first N
    /// and first 2N requests, and the difference over N is its instructions per request (0: no
    /// counts).
    #[arg(long, default_value_t = 100_000)]
    cachegrind_requests: u64,
    /// The valgrind that counts instructions.
    #[arg(long, default_value = "valgrind")]
    valgrind: String,
    /// Internal: replay the oracleGeneral `--trace` once under this policy and exit (what
    /// cachegrind counts for mmsim's side).
    #[arg(long, hide = true)]
    child: Option<String>,
    /// Skip the kernel's side (the same requests as real `pread`s in a memory cgroup; needs
    /// root, and runs only where the host can).
    #[arg(long)]
    no_kernel: bool,
}

#[derive(Debug, Args)]
pub(crate) struct TlbBenchArgs {
    /// Timed random references per footprint.
    #[arg(long, default_value_t = 5_000_000)]
    refs: u64,
    /// Also run the 16 GiB footprints (4 million 4 KiB and 8192 2 MiB first-touch faults before
    /// the timed parts).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    big: bool,
    /// Alternated rounds (the C loop, then mmsim, per footprint); at least three.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
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
        Bench::Tlb(a) => tlb_bench(a),
        Bench::Pagecache(a) => pagecache_bench(a),
        Bench::Hugetlb(a) => hugetlb_bench(a),
        Bench::Record(a) => record::record_bench(a),
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

/// `mmsim reproduce hugetlb-locking` at full scale, one seed, `repeat` times: the median host
/// seconds, the scheduling events per host second and the peak resident memory.
fn hugetlb_bench(a: &HugetlbBenchArgs) -> Result<(), String> {
    use lab::reproduce::{NoProgress, Progress, Scale, find, run_seeds};
    let e = find("hugetlb-locking")?;
    let mut secs = Vec::new();
    let mut events = 0.0;
    for _ in 0..a.repeat.max(1) {
        let start = Instant::now();
        let progress =
            |_: &lab::reproduce::Experiment, _: &str| -> Box<dyn Progress> { Box::new(NoProgress) };
        let reports = run_seeds(&[e], &[1], Scale::Full, &[], false, a.jobs, &progress)?;
        secs.push(start.elapsed().as_secs_f64());
        events =
            reports[0].rows.iter().find(|r| r.name == "engine events").map_or(0.0, |r| r.mean());
    }
    secs.sort_by(f64::total_cmp);
    let median = secs[secs.len() / 2];
    println!(
        "hugetlb-locking benchmark: the experiment at full scale, seed 1, {} host threads",
        a.jobs
    );
    println!("host seconds (median of {})  {median:>10.2}   (each: {secs:.2?})", secs.len());
    println!("events                      {events:>10.0}");
    println!("events per host second      {:>10.0}", events / median);
    println!("peak RSS                    {:>10.1} MB", peak_rss()? as f64 / 1e6);
    Ok(())
}

/// The peak resident memory of this process in bytes (`VmHWM` of `/proc/self/status`).
fn peak_rss() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("/proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| "no VmHWM in /proc/self/status".into())
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
        "  page tables     {table_bytes:>8.1} bytes per page (8-byte hardware PTEs: a bitmap per table while they map consecutive frames alike, else 2, 4 or 8 host bytes)"
    );
    println!(
        "fault throughput  {:>8.0} first-touch faults per host second ({faults} faults in {secs:.2} s)",
        faults as f64 / secs
    );
    println!("virtual time      {}", report.now.since(simcore::SimTime::ZERO));
    println!(
        "hugetlb           {:>8} host bytes per huge page, 2 MiB or 1 GiB (one `HPage`, no per-frame state; crates/mm/tests/hugetlb.rs checks a 250 GiB pool)",
        mm::types::hugetlb::Hugetlb::host_bytes_per_page()
    );
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
                max_events: Some(lab::scenario::explore::SCHEDULE_EVENTS),
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
            let mut trials = lab::scenario::explore::factory(&s, config, Vec::new());
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

/// splitmix64, as `tools/tlbloop.c` has it.
fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The text of the 2 MiB footprint is collapsed before the references; the others stay 4 KiB.
fn text_thp(huge: bool) -> trace::replay::TextThp {
    if huge { trace::replay::TextThp::Collapse } else { trace::replay::TextThp::Off }
}

/// Compiles the C reference loop; `None` (with the reason printed) when there is no compiler.
fn compile_tlbloop() -> Option<std::path::PathBuf> {
    let out = std::env::temp_dir().join(format!("mmsim-tlbloop-{}", std::process::id()));
    let status = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg("tools/tlbloop.c")
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        other => {
            println!(
                "C reference loop: not compiled ({other:?}); run from the repository root with cc"
            );
            None
        }
    }
}

/// One footprint of `bench tlb`: its reference stream as a binary trace.
struct TlbCase {
    name: &'static str,
    /// Footprint in 4 KiB pages.
    pages: u64,
    /// log2 of the page size.
    shift: u32,
    /// Pages touched by the untimed pass.
    touched: u64,
    bytes: Vec<u8>,
    /// References in the trace.
    total: u64,
}

/// References replayed before the timer starts: the first batch boundary after the pass.
const TLB_BATCH: u64 = 4096;
const TLB_BASE: u64 = 0x1000_0000_0000;
const TLB_SEED: u64 = 1;

impl TlbCase {
    fn new(name: &'static str, pages: u64, shift: u32, refs: u64) -> Result<TlbCase, String> {
        use trace::binary::BinaryWriter;
        use trace::record::{MemRef, RefKind};
        let mut w = BinaryWriter::new(Vec::new()).map_err(|e| e.to_string())?;
        let load = |addr| MemRef { kind: RefKind::Load, addr: simcore::VirtAddr(addr), size: 8 };
        let touched = pages >> (shift - 12);
        for p in 0..touched {
            w.write(load(TLB_BASE + (p << shift))).map_err(|e| e.to_string())?;
        }
        let mut s = TLB_SEED;
        for _ in 0..refs {
            let x = splitmix(&mut s);
            w.write(load(TLB_BASE + ((x % pages) << 12) + (x >> 52 & 0xff8)))
                .map_err(|e| e.to_string())?;
        }
        let (bytes, total) = w.finish().map_err(|e| e.to_string())?;
        Ok(TlbCase { name, pages, shift, touched, bytes, total })
    }

    /// The first timed reference.
    fn start(&self) -> u64 {
        self.touched.div_ceil(TLB_BATCH) * TLB_BATCH
    }

    fn reader(&self) -> Result<trace::input::TraceReader, String> {
        let cursor: Box<dyn std::io::BufRead> = Box::new(std::io::Cursor::new(self.bytes.clone()));
        trace::input::TraceReader::from_reader(cursor, self.name, false, 0, Default::default())
            .map_err(|e| e.to_string())
    }

    /// References decoded per second, the trace alone.
    fn read_rate(&self) -> Result<f64, String> {
        let mut r = self.reader()?;
        let start = Instant::now();
        let mut sum = 0u64;
        while let Some(x) = r.next_ref().map_err(|e| e.to_string())? {
            sum = sum.wrapping_add(x.addr.0);
        }
        std::hint::black_box(sum);
        Ok(self.total as f64 / start.elapsed().as_secs_f64())
    }
}

/// A side's figures of one round: timed references per second, first-level misses and walks of
/// the timed references.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TlbRound {
    rate: f64,
    misses: u64,
    walks: u64,
}

thread_local! {
    /// When the replay reached its mark (`start_tlb_timer`).
    static TLB_TIMER: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// `ReplayOptions::at_mark` of `bench tlb`: the timed part starts now.
fn start_tlb_timer() {
    TLB_TIMER.with(|t| t.set(Some(Instant::now())));
}

/// mmsim's side: the replay of the whole stream, timed from the mark (the first batch after the
/// warm-up pass).
fn tlb_mmsim_round(c: &TlbCase) -> Result<TlbRound, String> {
    use mm::arch::tlb::TlbEvent;
    use simcore::CounterKey;
    let huge = c.shift == 21;
    let maps = vec![trace::maps::Mapping {
        start: TLB_BASE,
        end: TLB_BASE + (c.pages << 12),
        read: true,
        write: !huge,
        exec: huge,
        shared: false,
        offset: 0,
        file: huge.then(|| "/bench/text".to_string()),
        name: None,
        line: 1,
    }];
    let mut options =
        trace::replay::ReplayOptions::new(mm::Profile::named("epyc-vm")?, text_thp(huge));
    options.mark = Some(c.start());
    // The timer starts at the mark itself, between two batches (`at_mark`): the run loop's
    // progress calls come after a task's carry-on, up to 1024 charges later, which for all-hits
    // batches can be most of the stream.
    options.at_mark = Some(start_tlb_timer);
    TLB_TIMER.with(|t| t.set(None));
    let report =
        trace::replay::replay(c.reader()?, c.name, &maps, "bench", &options, &mut |_, _| ())
            .map_err(|e| e.to_string())?;
    if huge && report.text_thps_mapped != c.touched {
        return Err(format!(
            "{}: {} of {} 2 MiB pages were PMD-mapped",
            c.name, report.text_thps_mapped, c.touched
        ));
    }
    let secs = TLB_TIMER.with(Cell::get).map_or(f64::NAN, |w| w.elapsed().as_secs_f64());
    let from = c.start();
    let timed = |e: TlbEvent| {
        report.counter(e) - report.counters_at_mark.get(e.name()).copied().unwrap_or(0)
    };
    Ok(TlbRound {
        rate: c.total.saturating_sub(from) as f64 / secs,
        misses: timed(TlbEvent::DtlbLoadMisses),
        walks: timed(TlbEvent::DtlbWalks),
    })
}

/// The C loop's side: `tools/tlbloop.c` over the same stream, timed from the same reference.
fn tlb_c_round(exe: &std::path::Path, c: &TlbCase, refs: u64) -> Result<TlbRound, String> {
    let args = [c.pages, refs, TLB_SEED, u64::from(c.shift), c.start()].map(|x| x.to_string());
    let out = std::process::Command::new(exe).args(args).output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<f64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    match f[..] {
        [rate, misses, walks] => Ok(TlbRound { rate, misses: misses as u64, walks: walks as u64 }),
        _ => Err(format!("C loop: unexpected output `{}` ({})", text.trim(), out.status)),
    }
}

fn tlb_bench(a: &TlbBenchArgs) -> Result<(), String> {
    if a.rounds < 3 {
        return Err(format!("--rounds {}: expected at least 3", a.rounds));
    }
    let cloop = compile_tlbloop();
    println!(
        "tlb benchmark: epyc-vm (AMD Zen 5 TLBs), {} timed random loads per footprint; {} \
         alternated rounds (the C loop, then mmsim); rates are medians",
        a.refs, a.rounds
    );
    println!(
        "{:<24} {:>12} {:>12} {:>6} {:>11} {:>12} {:>9} {:>9} {:>6}",
        "footprint",
        "mmsim refs/s",
        "C refs/s",
        "ratio",
        "spread",
        "read refs/s",
        "misses",
        "walks",
        "counts"
    );
    let mut cases = vec![("all L1 hits (32 pages)", 32u64, 12u32), ("100 MiB random", 25_600, 12)];
    if a.big {
        cases.push(("16 GiB random, 4 KiB", 4 << 20, 12));
        cases.push(("16 GiB random, 2 MiB", 4 << 20, 21));
    }
    for (name, pages, shift) in cases {
        let case = TlbCase::new(name, pages, shift, a.refs)?;
        tlb_case(a, &case, cloop.as_deref())?;
    }
    if let Some(exe) = cloop {
        let _ = std::fs::remove_file(exe);
    }
    Ok(())
}

/// Alternated rounds of one footprint, printed as one line: the counts column says whether the
/// C loop made the same misses and walks as mmsim.
fn tlb_case(a: &TlbBenchArgs, c: &TlbCase, cloop: Option<&std::path::Path>) -> Result<(), String> {
    let (mut rates, mut c_rates, mut ratios) = (vec![], vec![], vec![]);
    let (mut mine, mut theirs) = (None, None);
    for _ in 0..a.rounds {
        let cr = cloop.map(|exe| tlb_c_round(exe, c, a.refs)).transpose()?;
        let m = tlb_mmsim_round(c)?;
        rates.push(m.rate);
        if let Some(cr) = cr {
            c_rates.push(cr.rate);
            ratios.push(m.rate / cr.rate);
        }
        (mine, theirs) = (Some(m), cr);
    }
    let m = mine.expect("at least three rounds");
    let (rate, _, _) = median_spread(&mut rates);
    let (c_rate, ratio, spread) = if ratios.is_empty() {
        ("-".to_string(), "-".to_string(), "-".to_string())
    } else {
        let (cr, _, _) = median_spread(&mut c_rates);
        let (r, lo, hi) = median_spread(&mut ratios);
        (format!("{cr:.0}"), format!("{r:.2}"), format!("{lo:.2}..{hi:.2}"))
    };
    let counts = match theirs {
        Some(t) if (t.misses, t.walks) == (m.misses, m.walks) => "same",
        Some(_) => "DIFFER",
        None => "-",
    };
    println!(
        "{:<24} {rate:>12.0} {c_rate:>12} {ratio:>6} {spread:>11} {:>12.0} {:>9} {:>9} {counts:>6}",
        c.name,
        c.read_rate()?,
        m.misses,
        m.walks
    );
    if let Some(t) = theirs.filter(|t| (t.misses, t.walks) != (m.misses, m.walks)) {
        println!("  C loop: {} misses, {} walks", t.misses, t.walks);
    }
    Ok(())
}

/// The Python run by libCacheSim's side of `bench pagecache` (arguments: the oracleGeneral file,
/// the cache in pages, the requests): it prints the requests, the misses and the seconds of
/// `process_trace`.
fn libcachesim_script() -> &'static str {
    "import sys, time, libcachesim as l\n\
     r = l.TraceReader(sys.argv[1], l.TraceType.ORACLE_GENERAL_TRACE)\n\
     c = l.LRU(int(sys.argv[2]) * 4096)\n\
     t = time.perf_counter()\n\
     mr, _ = c.process_trace(r, 0, int(sys.argv[3]))\n\
     dt = time.perf_counter() - t\n\
     print(int(sys.argv[3]), round(mr * int(sys.argv[3])), dt)\n"
}

/// The libCacheSim side of `bench pagecache`: `(requests, misses, seconds)` of its LRU over the
/// first `n` requests of an oracleGeneral file, timed around `process_trace` by the Python.
fn libcachesim_lru(
    python: &str,
    trace: &std::path::Path,
    pages: u64,
    n: u64,
) -> Result<(u64, u64, f64), String> {
    let script = libcachesim_script();
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(trace)
        .arg(pages.to_string())
        .arg(n.to_string())
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "libcachesim ({python}): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    let parse = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok());
    match (parse(0), parse(1), parse(2)) {
        (Some(r), Some(m), Some(s)) => Ok((r as u64, m as u64, s)),
        _ => Err(format!("libcachesim printed `{}`", text.trim())),
    }
}

/// The block trace's first `--max-requests` page requests written as an oracleGeneral file, the
/// requests both sides replay (not timed): its path and request count.
fn export_oracle(a: &PagecacheBenchArgs) -> Result<(std::path::PathBuf, u64), String> {
    use trace::block::{BlockFormat, BlockReader, write_oracle_general};
    let og = std::env::temp_dir().join(format!("mmsim-bench-{}.oracleGeneral", std::process::id()));
    let mut reader =
        BlockReader::open(&a.trace, BlockFormat::guess(&a.trace)).map_err(|e| e.to_string())?;
    let file = std::fs::File::create(&og).map_err(|e| format!("{}: {e}", og.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut error = None;
    let limit = a.max_requests.unwrap_or(u64::MAX);
    let it = std::iter::from_fn(|| match reader.next_page() {
        Ok(p) => p,
        Err(e) => {
            error = Some(e);
            None
        }
    })
    .take(usize::try_from(limit).unwrap_or(usize::MAX));
    let n = write_oracle_general(&mut out, it).map_err(|e| e.to_string())?;
    if let Some(e) = error {
        return Err(e.to_string());
    }
    std::io::Write::flush(&mut out).map_err(|e| e.to_string())?;
    Ok((og, n))
}

/// One timed mmsim replay of the oracleGeneral file (its first `max` requests, all when `None`):
/// `(misses, requests per host second)`.
fn mmsim_round(
    og_path: &str,
    policy: trace::pagecache::Policy,
    cache: simcore::Bytes,
    max: Option<u64>,
) -> Result<(u64, f64), String> {
    use trace::block::{BlockFormat, BlockReader};
    use trace::pagecache::{AccessMode, PageCacheOptions, replay_page_cache};
    let reader =
        BlockReader::open(og_path, BlockFormat::OracleGeneral).map_err(|e| e.to_string())?;
    let tiny = mm::Profile::named("tiny")?;
    let mut options = PageCacheOptions::new(tiny, policy, AccessMode::Read, cache);
    options.max_requests = max;
    let start = Instant::now();
    let r =
        replay_page_cache(reader, og_path, &options, &mut |_, _| ()).map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    Ok((r.misses, r.requests as f64 / secs.max(1e-9)))
}

/// The median and the lowest and highest of `xs` (not empty).
fn median_spread(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

/// What `bench pagecache` compares: the oracleGeneral file both sides replay, its requests and
/// the cache, and libCacheSim's instructions per request (when counted).
struct PagecacheCase {
    og: std::path::PathBuf,
    requests: u64,
    cache: simcore::Bytes,
    lcs_instructions: Option<f64>,
    /// The requests' pages, for the kernel's side (`None`: it is not run).
    kernel_pages: Option<Vec<u64>>,
}

fn pagecache_bench(a: &PagecacheBenchArgs) -> Result<(), String> {
    use trace::pagecache::Policy;
    let cache = lab::scenario::parse::parse_size(&a.cache)
        .ok_or_else(|| format!("--cache {}: expected a size like 256MiB", a.cache))?;
    if let Some(p) = &a.child {
        let max = a.max_requests;
        return mmsim_round(&a.trace, Policy::parse(p)?, cache, max).map(drop);
    }
    let policies = a.policy.iter().map(|p| Policy::parse(p)).collect::<Result<Vec<_>, _>>()?;
    let pages = cache.pages_ceil();
    let (og, n) = export_oracle(a)?;
    println!("pagecache benchmark: {} ({n} requests), cache {} ({pages} pages)", a.trace, cache);
    println!(
        "{} alternated rounds per policy (libCacheSim, then mmsim); rates are medians",
        a.rounds
    );
    let counted = (a.cachegrind_requests > 0).then_some(a.cachegrind_requests.min(n / 2).max(1));
    let lcs_instructions = counted.and_then(|k| {
        println!(
            "instructions per request: cachegrind's `I refs` of requests {}..{} (runs over the first {k} and {})",
            k + 1,
            2 * k,
            2 * k
        );
        cachegrind::libcachesim(a, &og, pages, k)
            .map_err(|e| println!("libCacheSim instructions: not counted ({e})"))
            .ok()
    });
    println!(
        "{:<16} {:>10} {:>10} {:>12} {:>12} {:>7} {:>13} {:>7} {:>10} {:>10} {:>7}",
        "replay",
        "misses",
        "lcs misses",
        "mmsim req/s",
        "lcs req/s",
        "ratio",
        "spread",
        "target",
        "instr/req",
        "lcs i/req",
        "i ratio"
    );
    let kernel_pages = if a.no_kernel { None } else { kernel::pages(&og)? };
    let case = PagecacheCase { og, requests: n, cache, lcs_instructions, kernel_pages };
    let mut kernel_lines = Vec::new();
    for policy in policies {
        let k = pagecache_policy(a, &case, policy, counted)?;
        kernel_lines.extend(k.map(|k| (policy, k)));
    }
    kernel::print(&kernel_lines);
    let _ = std::fs::remove_file(&case.og);
    Ok(())
}

/// One policy's line of `bench pagecache`: alternated timed rounds, then (when `counted`) its
/// instructions per request; and the kernel side's rounds when it ran.
fn pagecache_policy(
    a: &PagecacheBenchArgs,
    c: &PagecacheCase,
    policy: trace::pagecache::Policy,
    counted: Option<u64>,
) -> Result<Option<kernel::Rounds>, String> {
    use trace::pagecache::Policy;
    let og_path = c.og.to_string_lossy().into_owned();
    let pages = c.cache.pages_ceil();
    let (mut rates, mut lcs_rates, mut ratios) = (vec![], vec![], vec![]);
    let (mut misses, mut lcs_misses) = (0, None);
    let mut kernel = c.kernel_pages.as_ref().map(|_| kernel::Rounds::default());
    for _ in 0..a.rounds {
        let lcs = libcachesim_lru(&a.python, &c.og, pages, c.requests);
        if let (Some(k), Some(p)) = (&mut kernel, &c.kernel_pages) {
            k.run(p, c.cache, policy);
        }
        let (m, rate) = mmsim_round(&og_path, policy, c.cache, None)?;
        if let Some(k) = &mut kernel {
            k.mmsim(rate);
        }
        misses = m;
        rates.push(rate);
        match lcs {
            Ok((r, m, s)) => {
                let lcs_rate = r as f64 / s.max(1e-9);
                lcs_misses = Some(m);
                lcs_rates.push(lcs_rate);
                ratios.push(rate / lcs_rate);
            }
            Err(e) => println!("libCacheSim LRU: not run ({e})"),
        }
    }
    let target = if policy == Policy::Pure { 2.0 } else { 1.0 };
    let (rate, _, _) = median_spread(&mut rates);
    let lcs = lcs_misses.map_or("-".to_string(), |m| m.to_string());
    let name = format!("mmsim {}", policy.name());
    let (lcs_rate, ratio, spread) = if ratios.is_empty() {
        ("-".to_string(), "-".to_string(), "-".to_string())
    } else {
        let (lcs_rate, _, _) = median_spread(&mut lcs_rates);
        let (ratio, lo, hi) = median_spread(&mut ratios);
        (format!("{lcs_rate:.0}"), format!("{ratio:.2}"), format!("{lo:.2}..{hi:.2}"))
    };
    let mine = counted.and_then(|k| {
        cachegrind::mmsim(a, &c.og, policy.name(), k)
            .map_err(|e| println!("mmsim {} instructions: not counted ({e})", policy.name()))
            .ok()
    });
    let show = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.0}"));
    let i_ratio = match (mine, c.lcs_instructions) {
        (Some(m), Some(l)) => format!("{:.2}", m / l),
        _ => "-".to_string(),
    };
    println!(
        "{name:<16} {misses:>10} {lcs:>10} {rate:>12.0} {lcs_rate:>12} {ratio:>7} {spread:>13} {target:>6.0}x {:>10} {:>10} {i_ratio:>7}",
        show(mine),
        show(c.lcs_instructions)
    );
    Ok(kernel)
}
