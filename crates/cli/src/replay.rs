//! `mmsim replay TRACE --maps MAPS`, `mmsim replay TRACE --cache SIZE` and `mmsim trace convert
//! IN OUT`: replay a memory-reference trace through the simulated TLBs and page walk, printing
//! `perf stat`-style counters (or JSON); replay a block trace through the page cache of a memory
//! cgroup of SIZE, printing the hit ratio, refaults and reclaim counters (or JSON); convert a
//! trace to mmsim's compact binary format, or a block trace to libCacheSim's oracleGeneral.
//! Exit 2 on bad input (a malformed line names its file and line), 1 when a checker finds the
//! state inconsistent.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mm::arch::tlb::TlbEvent;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use trace::binary::BinaryWriter;
use trace::block::{BlockFormat, BlockReader};
use trace::input::TraceReader;
use trace::pagecache::{
    AccessMode, FileAdvice, PageCacheError, PageCacheOptions, Policy, replay_page_cache,
};
use trace::replay::{ReplayError, ReplayOptions, ReplayReport, replay};

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The trace: valgrind lackey `--trace-mem=yes` text or mmsim binary, optionally gzip or
    /// zstd compressed; or a recorded program (`mmsim record`), which holds its address space.
    trace: String,
    /// The process's address space, in `/proc/PID/maps` format (memory-reference replay of a
    /// trace that is not a recorded program).
    #[arg(long, conflicts_with = "cache")]
    maps: Option<String>,
    /// Kernel version of a recorded program's replay (its era switches).
    #[arg(long = "program-kernel", default_value = "v6.8", conflicts_with_all = ["cache", "maps"])]
    program_kernel: String,
    /// `/sys/kernel/mm/transparent_hugepage/` knobs of a recorded program's replay, as
    /// `PATH=VALUE` (e.g. `enabled=always`, `khugepaged/scan_sleep_millisecs=100`).
    #[arg(long = "sysfs", value_name = "KNOB=VALUE", conflicts_with_all = ["cache", "maps"])]
    sysfs: Vec<String>,
    /// The dynamic-linker model advises MADV_HUGEPAGE on 2 MiB-aligned library segments.
    #[arg(long, conflicts_with_all = ["cache", "maps"])]
    advise_hugepage: bool,
    /// Place this shared library of a recorded program (its file name, e.g. libjvm.so) at a 2 MiB
    /// base, as if linked with -z max-page-size=0x200000; its references move with it. Repeatable.
    #[arg(long = "rebase-2m", value_name = "LIB", conflicts_with_all = ["cache", "maps"])]
    rebase_2m: Vec<String>,
    /// Replay every thread of a recorded program on one CPU (time-sliced, sharing its TLBs).
    #[arg(long, conflicts_with_all = ["cache", "maps"])]
    one_cpu: bool,
    /// How long a recorded program stays resident (khugepaged running) between its warm-up pass
    /// and its measured pass, in virtual seconds.
    #[arg(long, default_value_t = 60, conflicts_with_all = ["cache", "maps"])]
    warmup_s: u64,
    /// Replay TRACE as a block trace through the page cache of a memory cgroup of this size
    /// (`memory.max`, e.g. 256MiB).
    #[arg(long)]
    cache: Option<String>,
    /// Block trace format: arc (the ARC paper's .lis text) or oracleGeneral (libCacheSim's
    /// binary); guessed from the name by default.
    #[arg(long, requires = "cache")]
    format: Option<String>,
    /// How requests reach the page cache: read (page-sized pread) or mmap (loads through a
    /// shared mapping).
    #[arg(long, default_value = "read", requires = "cache")]
    access: String,
    /// Reclaim policy: classic, mglru, or pure (exact LRU: no readahead, no second chance).
    #[arg(long, default_value = "classic", requires = "cache")]
    policy: String,
    /// Kernel version of the page-cache replay.
    #[arg(long, default_value = "v6.8", requires = "cache")]
    kernel: String,
    /// `read_ahead_kb` of the page-cache replay (the kernel's 128 by default; pure uses 0).
    #[arg(long, requires = "cache")]
    readahead_kb: Option<u64>,
    /// Advise POSIX_FADV_NOREUSE on the replayed file first.
    #[arg(long, requires = "cache")]
    noreuse: bool,
    /// posix_fadvise on the replayed file first: random (POSIX_FADV_RANDOM, read-ahead off, as
    /// a database advises), sequential or normal.
    #[arg(long, value_name = "ADVICE", requires = "cache")]
    fadvise: Option<String>,
    /// Stop after this many requests.
    #[arg(long, requires = "cache")]
    max_requests: Option<u64>,
    /// Machine profile (its TLB geometry and costs): epyc-vm, tiny, xeon-spr, arm-a76.
    #[arg(long, default_value = "epyc-vm")]
    profile: String,
    /// Replay on the machine of a profile file instead (`mmsim calibrate` writes one;
    /// docs/profiles.md).
    #[arg(long, value_name = "PATH", conflicts_with = "profile")]
    profile_file: Option<String>,
    /// Back executable file mappings with 2 MiB pages where alignment allows: off, or collapse
    /// (`MADV_COLLAPSE` over them before the first reference).
    #[arg(long, default_value = "off", conflicts_with = "cache")]
    text_thp: String,
    /// Count and skip malformed trace lines instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Check the TLBs against the page tables after every batch of references (slow).
    #[arg(long)]
    check_every_batch: bool,
    /// Scheduling events the replay may take (default 2^32). A replay that reaches it is refused
    /// with exit 2 (docs/errors.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_events: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar (it is shown only on a terminal, after a second).
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TraceCommand {
    /// Convert a trace (lackey or binary, any compression) to mmsim's binary format; an OUT
    /// ending in `.zst` or `.gz` is compressed.
    Convert(ConvertArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ConvertArgs {
    input: String,
    output: String,
    /// Count and skip malformed lines instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Convert a block trace (ARC or oracleGeneral, see `--format`) to libCacheSim's
    /// oracleGeneral binary instead (4 KiB objects), so libCacheSim replays the same requests.
    #[arg(long)]
    oracle_general: bool,
    /// The block trace's format (with `--oracle-general`): arc or oracleGeneral.
    #[arg(long, requires = "oracle_general")]
    format: Option<String>,
    /// Convert only the first requests (with `--oracle-general`).
    #[arg(long, requires = "oracle_general")]
    max_requests: Option<u64>,
}

fn bad(e: impl std::fmt::Display) -> u8 {
    eprintln!("mmsim: {e}");
    2
}

pub(crate) fn run(a: &ReplayArgs) -> u8 {
    let profile = match &a.profile_file {
        Some(path) => crate::calibrate::load_profile(path),
        None => mm::Profile::named(&a.profile).map_err(|e| format!("--profile: {e}")),
    };
    let profile = match profile {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    if a.cache.is_some() {
        return run_page_cache(a, profile);
    }
    let Some(maps_file) = &a.maps else {
        return run_program(a, profile);
    };
    let maps_text = match read_maps(maps_file) {
        Ok(t) => t,
        Err(e) => return bad(e),
    };
    let maps = match trace::maps::parse(&maps_text, maps_file) {
        Ok(m) => m,
        Err(e) => return bad(e),
    };
    let reader = match TraceReader::open(&a.trace, a.skip_bad) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let text_thp = match trace::replay::TextThp::parse(&a.text_thp) {
        Ok(v) => v,
        Err(e) => return bad(format!("--text-thp: {e}")),
    };
    let options = ReplayOptions {
        profile,
        text_thp,
        check_every_batch: a.check_every_batch,
        max_events: a.max_events.unwrap_or(engine::DEFAULT_EVENT_BUDGET),
        mark: None,
        at_mark: None,
    };
    let mut bar = FileProgress::new(a.quiet);
    let mut progress = |refs: u64, r: &TraceReader| {
        bar.update(|| format!("{refs} references"), r.bytes_read.get(), r.file_bytes);
    };
    let result = replay(reader, &a.trace, &maps, maps_file, &options, &mut progress);
    bar.finish();
    let report = match result {
        Ok(r) => r,
        Err(ReplayError::Input(e)) => return bad(e),
        Err(ReplayError::Refused(e)) => return bad(format!("{}: refused: {e}", a.trace)),
        Err(ReplayError::Sim(e)) => return sim_failed(&e),
    };
    let json = a.json.then(|| serde_json::to_string_pretty(&report));
    print_report(json, || print_perf_stat(&report))
}

/// `mmsim replay FILE` of a recorded program: its measured pass's counters, the collapses and
/// `FilePmdMapped` per file.
fn run_program(a: &ReplayArgs, profile: mm::Profile) -> u8 {
    let head = std::fs::File::open(&a.trace).and_then(|f| {
        let mut magic = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, 8), &mut magic)?;
        Ok(magic)
    });
    match head {
        Ok(m) if m == trace::program::MAGIC.as_bytes() => {}
        Ok(_) => {
            return bad(format!(
                "{}: --maps is required unless TRACE is a recorded program (mmsim record)",
                a.trace
            ));
        }
        Err(e) => return bad(format!("{}: {e}", a.trace)),
    }
    let kernel = match a.program_kernel.parse::<mm::KernelVersion>() {
        Ok(k) => k,
        Err(e) => return bad(format!("--program-kernel: {e}")),
    };
    let mut config = mm::MachineConfig::new(profile, kernel);
    for set in &a.sysfs {
        let Some((knob, value)) = set.split_once('=') else {
            return bad(format!("--sysfs {set}: expected KNOB=VALUE"));
        };
        let path = format!("transparent_hugepage/{knob}");
        let Some(k) = mm::huge_memory::policy::sysfs_knob(&path) else {
            return bad(format!("--sysfs {set}: unknown transparent_hugepage knob `{knob}`"));
        };
        if let Err(e) = config.tunables.thp.set(k, value, kernel) {
            return bad(format!("--sysfs {set}: {e}"));
        }
    }
    let options = trace::program_replay::ProgramOptions {
        config,
        advise_hugepage: a.advise_hugepage,
        warmup: simcore::SimDuration::from_ms(a.warmup_s * 1000),
        max_refs_per_thread: None,
        rebase_2m: a.rebase_2m.clone(),
        one_cpu: a.one_cpu,
    };
    let report = match trace::program_replay::replay_program(&a.trace, &options, &mut |_| {}) {
        Ok(r) => r,
        Err(ReplayError::Input(e)) => return bad(e),
        Err(ReplayError::Refused(e)) => return bad(format!("{}: refused: {e}", a.trace)),
        Err(ReplayError::Sim(e)) => return sim_failed(&e),
    };
    let json = a.json.then(|| serde_json::to_string_pretty(&report));
    print_report(json, || print_program(&report))
}

/// A program replay's report as text: `perf stat`-style counters of the measured pass.
fn print_program(report: &trace::program_replay::ProgramReport) {
    let w = &report.measured;
    println!(
        "{}: {} threads, measured pass of {} references",
        report.program, report.threads, w.references
    );
    for (k, v) in &w.counters {
        println!("{v:>16}  {k}");
    }
    println!("{:>16}  page-faults\n{:>16}  virtual ns", w.page_faults, w.virtual_time_ns);
    println!(
        "{:>16}  context-switches\n{:>16}  context-switch ns",
        w.context_switches, w.switching_ns
    );
    println!(
        "{:>16}  thp_collapse_alloc\n{:>16}  nr_file_hugepages",
        report.collapse_allocs, report.file_hugepages
    );
    for (f, kb) in &report.file_pmd_mapped_kb {
        println!("FilePmdMapped {kb:>8} kB  {f}");
    }
}

/// The text of a maps file: a regular file of at most `MAX_SCENARIO_BYTES` (a real
/// `/proc/PID/maps` takes a few hundred KiB), in UTF-8.
fn read_maps(path: &str) -> Result<String, String> {
    lab::scenario::run::read_text_or_say(path, lab::scenario::limits::MAX_SCENARIO_BYTES)
}

/// A progress bar over a trace file's bytes, shown on terminals once a run takes a second.
struct FileProgress {
    start: Instant,
    tty: bool,
    bar: Option<ProgressBar>,
}

impl FileProgress {
    /// Shown on a terminal unless `quiet`.
    fn new(quiet: bool) -> FileProgress {
        let tty = !quiet && std::io::stderr().is_terminal();
        FileProgress { start: Instant::now(), tty, bar: None }
    }

    /// `message` is only formatted when the bar is shown: this runs after every simulation step.
    fn update(&mut self, message: impl FnOnce() -> String, bytes_read: u64, file_bytes: u64) {
        if !self.tty || self.start.elapsed() < Duration::from_secs(1) {
            return;
        }
        let b = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::new(file_bytes.max(1));
            b.set_style(
                ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} [{elapsed}]")
                    .expect("valid template"),
            );
            b
        });
        b.set_position(bytes_read);
        b.set_message(message());
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The page-cache bar's message: requests so far and their rate over `secs` host seconds.
fn requests_message(requests: u64, secs: f64) -> String {
    let rate = if secs > 0.0 { requests as f64 / secs } else { 0.0 };
    format!("{} requests, {} requests/s", grouped(requests), grouped(rate as u64))
}

/// A simulation failure (a checker): exit 1.
fn sim_failed(e: &str) -> u8 {
    eprintln!("mmsim: {e}");
    1
}

/// Prints a report's JSON if there is one, else its text; exit 0.
fn print_report(json: Option<serde_json::Result<String>>, text: impl FnOnce()) -> u8 {
    match json {
        Some(j) => println!("{}", j.expect("a report serialises")),
        None => text(),
    }
    0
}

/// The page-cache options of `mmsim replay --cache`.
fn page_cache_options(a: &ReplayArgs, profile: mm::Profile) -> Result<PageCacheOptions, String> {
    let size = a.cache.as_deref().unwrap_or_default();
    let cache = lab::scenario::parse::parse_size(size)
        .ok_or_else(|| format!("--cache {size}: expected a size like 256MiB"))?;
    Ok(PageCacheOptions {
        profile,
        kernel: a.kernel.parse().map_err(|e| format!("--kernel: {e}"))?,
        policy: Policy::parse(&a.policy).map_err(|e| format!("--policy: {e}"))?,
        access: AccessMode::parse(&a.access).map_err(|e| format!("--access: {e}"))?,
        cache,
        readahead_kb: a.readahead_kb,
        noreuse: a.noreuse,
        fadvise: a
            .fadvise
            .as_deref()
            .map(FileAdvice::parse)
            .transpose()
            .map_err(|e| format!("--fadvise: {e}"))?,
        max_requests: a.max_requests,
        max_events: a.max_events.unwrap_or(engine::DEFAULT_EVENT_BUDGET),
    })
}

/// The block trace format named by `--format`, or guessed from the file name.
fn block_format(format: Option<&str>, path: &str) -> Result<BlockFormat, String> {
    match format {
        Some(f) => BlockFormat::parse(f).map_err(|e| format!("--format: {e}")),
        None => Ok(BlockFormat::guess(path)),
    }
}

/// `mmsim replay TRACE --cache SIZE`.
fn run_page_cache(a: &ReplayArgs, profile: mm::Profile) -> u8 {
    let options = match page_cache_options(a, profile) {
        Ok(o) => o,
        Err(e) => return bad(e),
    };
    let reader = match block_format(a.format.as_deref(), &a.trace)
        .and_then(|f| BlockReader::open(&a.trace, f).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let mut bar = FileProgress::new(a.quiet);
    let mut progress = |requests: u64, r: &BlockReader| {
        let secs = bar.start.elapsed().as_secs_f64();
        bar.update(|| requests_message(requests, secs), r.bytes_read.get(), r.file_bytes);
    };
    let result = replay_page_cache(reader, &a.trace, &options, &mut progress);
    bar.finish();
    match result {
        Ok(r) => {
            let json = a.json.then(|| serde_json::to_string_pretty(&r));
            print_report(json, || print_page_cache(&r))
        }
        Err(PageCacheError::Input(e)) => bad(e),
        Err(PageCacheError::Config(e)) => bad(e),
        Err(PageCacheError::Sim(e)) => sim_failed(&e),
    }
}

fn print_page_cache(r: &trace::pagecache::PageCacheReport) {
    println!();
    println!(
        " Page-cache replay of '{}' ({} trace, {} via {}, kernel {}, cgroup of {} pages):",
        r.trace, r.format, r.policy, r.access, r.kernel, r.cache_pages
    );
    println!();
    println!("{:>18}      requests", grouped(r.requests));
    let ratio = 100.0 * r.hit_ratio;
    println!("{:>18}      hits                      #  {ratio:6.2}% hit ratio", grouped(r.hits));
    println!("{:>18}      misses", grouped(r.misses));
    println!("{:>18}      refaults (workingset_refault_file)", grouped(r.refaults));
    if let Some(a) = r.fadvise {
        println!("{:>18}      posix_fadvise on the file", format!("{a:?}").to_lowercase());
    }
    for (k, v) in &r.vmstat {
        if *v > 0 {
            println!("{:>18}      {k}", grouped(*v));
        }
    }
    println!();
    println!("{:>18.9} seconds time elapsed (simulated)", r.virtual_time_ns as f64 / 1e9);
    println!();
}

/// `12345678` as `12,345,678`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 }
}

fn print_perf_stat(r: &ReplayReport) {
    let c = |e| r.counter(e);
    println!();
    println!(
        " Performance counter stats for '{}' (mmsim replay, {} trace, profile {}, {} TLBs, text THP {}):",
        r.trace, r.format, r.profile, r.tlb, r.text_thp
    );
    println!();
    let line = |v: u64, name: &str, comment: String| {
        if comment.is_empty() {
            println!("{:>18}      {name}", grouped(v));
        } else {
            println!("{:>18}      {name:<26}#  {comment}", grouped(v));
        }
    };
    let (il, im) = (c(TlbEvent::ItlbLoads), c(TlbEvent::ItlbLoadMisses));
    let (dl, dm) = (c(TlbEvent::DtlbLoads), c(TlbEvent::DtlbLoadMisses));
    let (ds, dsm) = (c(TlbEvent::DtlbStores), c(TlbEvent::DtlbStoreMisses));
    let walks = c(TlbEvent::ItlbWalks) + c(TlbEvent::DtlbWalks);
    line(il, "iTLB-loads", String::new());
    line(im, "iTLB-load-misses", format!("{:5.2}% of all iTLB cache accesses", percent(im, il)));
    line(dl, "dTLB-loads", String::new());
    line(dm, "dTLB-load-misses", format!("{:5.2}% of all dTLB cache accesses", percent(dm, dl)));
    line(ds, "dTLB-stores", String::new());
    line(dsm, "dTLB-store-misses", format!("{:5.2}% of all dTLB stores", percent(dsm, ds)));
    line(
        walks,
        "page-walks",
        format!(
            "{} instruction, {} data",
            grouped(c(TlbEvent::ItlbWalks)),
            grouped(c(TlbEvent::DtlbWalks))
        ),
    );
    let cycles = c(TlbEvent::WalkCycles);
    let per_walk = if walks == 0 { 0.0 } else { cycles as f64 / walks as f64 };
    line(cycles, "walk-cycles", format!("{per_walk:.1} cycles per walk"));
    line(
        c(TlbEvent::WalkCacheHits),
        "walk-cache-hits",
        format!("{:5.2}% of walks", percent(c(TlbEvent::WalkCacheHits), walks)),
    );
    line(r.page_faults, "page-faults", format!("{} major", grouped(r.major_faults)));
    line(r.text_thps_mapped, "text-thps-mapped", "2 MiB text mapped by one PMD".to_string());
    line(r.outside_mappings, "references-outside-mappings", String::new());
    line(r.protection_faults, "protection-faults", String::new());
    if r.skipped_lines > 0 {
        line(r.skipped_lines, "skipped-bad-lines", String::new());
    }
    println!();
    println!(
        "{:>18}      references ({} instructions, {} loads, {} stores, {} modifies)",
        grouped(r.references),
        grouped(r.instructions),
        grouped(r.loads),
        grouped(r.stores),
        grouped(r.modifies)
    );
    println!();
    println!("{:>18.9} seconds time elapsed (simulated)", r.virtual_time_ns as f64 / 1e9);
    println!();
}

/// The output file of a conversion, compressed by its extension (`.zst`, `.gz`).
fn output_file(path: &str) -> Result<Box<dyn Write>, String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
    let file = std::io::BufWriter::new(file);
    Ok(if path.ends_with(".zst") {
        let e = zstd::stream::write::Encoder::new(file, 3).map_err(|e| format!("{path}: {e}"))?;
        Box::new(e.auto_finish())
    } else if path.ends_with(".gz") {
        Box::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()))
    } else {
        Box::new(file)
    })
}

/// `mmsim trace convert --oracle-general`.
fn convert_block(a: &ConvertArgs) -> u8 {
    let opened = block_format(a.format.as_deref(), &a.input)
        .and_then(|f| BlockReader::open(&a.input, f).map_err(|e| e.to_string()))
        .and_then(|r| Ok((r, output_file(&a.output)?)));
    let (mut reader, mut out) = match opened {
        Ok(x) => x,
        Err(e) => return bad(e),
    };
    let mut error = None;
    let pages = std::iter::from_fn(|| match reader.next_page() {
        Ok(p) => p,
        Err(e) => {
            error = Some(e);
            None
        }
    })
    .take(a.max_requests.map_or(usize::MAX, |n| n as usize));
    let written = trace::block::write_oracle_general(&mut out, pages);
    if let Some(e) = error {
        return bad(e);
    }
    match written.and_then(|n| out.flush().map(|()| n)) {
        Ok(n) => {
            println!("{}: {} requests (oracleGeneral, 24 bytes each)", a.output, grouped(n));
            0
        }
        Err(e) => bad(format!("{}: {e}", a.output)),
    }
}

pub(crate) fn trace_command(c: &TraceCommand) -> u8 {
    let TraceCommand::Convert(a) = c;
    if a.oracle_general {
        return convert_block(a);
    }
    let mut reader = match TraceReader::open(&a.input, a.skip_bad) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let out = match output_file(&a.output) {
        Ok(o) => o,
        Err(e) => return bad(e),
    };
    let written = (|| -> Result<u64, String> {
        let io = |e: std::io::Error| format!("{}: {e}", a.output);
        let mut w = BinaryWriter::new(out).map_err(io)?;
        while let Some(r) = reader.next_ref().map_err(|e| e.to_string())? {
            w.write(r).map_err(io)?;
        }
        let (out, n) = w.finish().map_err(io)?;
        drop(out);
        Ok(n)
    })();
    match written {
        Ok(n) => {
            let bytes = std::fs::metadata(&a.output).map(|m| m.len()).unwrap_or(0);
            let skipped = reader.skipped();
            println!(
                "{}: {} references ({} bytes, {:.2} bytes per reference){}",
                a.output,
                grouped(n),
                grouped(bytes),
                bytes as f64 / n.max(1) as f64,
                if skipped > 0 {
                    format!(", {skipped} malformed lines skipped")
                } else {
                    String::new()
                }
            );
            0
        }
        Err(e) => bad(e),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_progress_message_gives_the_request_rate() {
        assert_eq!(
            super::requests_message(2_500_000, 2.0),
            "2,500,000 requests, 1,250,000 requests/s"
        );
        assert_eq!(super::requests_message(0, 0.0), "0 requests, 0 requests/s");
    }
}
