//! `mmsim replay TRACE --maps MAPS` and `mmsim trace convert IN OUT`: replay a memory-reference
//! trace through the simulated TLBs and page walk, printing `perf stat`-style counters (or JSON);
//! convert a trace to mmsim's compact binary format. Exit 2 on bad input (a malformed line names
//! its file and line), 1 when a checker finds the TLBs out of step with the page tables.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mm::tlb::TlbEvent;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use trace::binary::BinaryWriter;
use trace::input::TraceReader;
use trace::replay::{ReplayError, ReplayOptions, ReplayReport, replay};

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The trace: valgrind lackey `--trace-mem=yes` text or mmsim binary, optionally gzip or
    /// zstd compressed.
    trace: String,
    /// The process's address space, in `/proc/PID/maps` format.
    #[arg(long)]
    maps: String,
    /// Machine profile (its TLB geometry and costs): epyc-vm, tiny, xeon-spr, arm-a76.
    #[arg(long, default_value = "epyc-vm")]
    profile: String,
    /// Count and skip malformed trace lines instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Check the TLBs against the page tables after every batch of references (slow).
    #[arg(long)]
    check_every_batch: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
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
}

fn bad(e: impl std::fmt::Display) -> u8 {
    eprintln!("mmsim: {e}");
    2
}

pub(crate) fn run(a: &ReplayArgs) -> u8 {
    let profile = match mm::Profile::named(&a.profile) {
        Ok(p) => p,
        Err(e) => return bad(format!("--profile: {e}")),
    };
    let maps_text = match std::fs::read_to_string(&a.maps) {
        Ok(t) => t,
        Err(e) => return bad(format!("{}: {e}", a.maps)),
    };
    let maps = match trace::maps::parse(&maps_text, &a.maps) {
        Ok(m) => m,
        Err(e) => return bad(e),
    };
    let reader = match TraceReader::open(&a.trace, a.skip_bad) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let options = ReplayOptions { profile, check_every_batch: a.check_every_batch };
    let start = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let tty = std::io::stderr().is_terminal();
    let mut progress = |refs: u64, r: &TraceReader| {
        if !tty || start.elapsed() < Duration::from_secs(1) {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let b = ProgressBar::new(r.file_bytes.max(1));
            b.set_style(
                ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} [{elapsed}]")
                    .expect("valid template"),
            );
            b
        });
        b.set_position(r.bytes_read.get());
        b.set_message(format!("{refs} references"));
    };
    let result = replay(reader, &a.trace, &maps, &a.maps, &options, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let report = match result {
        Ok(r) => r,
        Err(ReplayError::Input(e)) => return bad(e),
        Err(ReplayError::Sim(e)) => {
            eprintln!("mmsim: {e}");
            return 1;
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
    } else {
        print_perf_stat(&report);
    }
    0
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
        " Performance counter stats for '{}' (mmsim replay, {} trace, profile {}, {} TLBs):",
        r.trace, r.format, r.profile, r.tlb
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

pub(crate) fn trace_command(c: &TraceCommand) -> u8 {
    let TraceCommand::Convert(a) = c;
    let mut reader = match TraceReader::open(&a.input, a.skip_bad) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let file = match std::fs::File::create(&a.output) {
        Ok(f) => std::io::BufWriter::new(f),
        Err(e) => return bad(format!("{}: {e}", a.output)),
    };
    let out: Box<dyn Write> = if a.output.ends_with(".zst") {
        match zstd::stream::write::Encoder::new(file, 3) {
            Ok(e) => Box::new(e.auto_finish()),
            Err(e) => return bad(format!("{}: {e}", a.output)),
        }
    } else if a.output.ends_with(".gz") {
        Box::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()))
    } else {
        Box::new(file)
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
