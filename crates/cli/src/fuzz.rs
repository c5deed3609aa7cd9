//! Fuzz targets: every input parser and whole runs, each a function of untrusted bytes that may
//! return anything but must never panic, abort or run unbounded (issue 22; docs/errors.md).
//!
//! The coverage-guided fuzzer (AFL++ through `cargo afl`, which works on the stable toolchain)
//! drives these from the separate `fuzz/` crate (`cargo xtask fuzz --minutes N`); the test suite
//! replays the seed corpus and every input the fuzzer found that once crashed
//! (`crates/cli/tests/fuzz_regressions.rs`), without the fuzzer. Whole runs are bounded by a
//! small events budget and host budget, so that an input is judged by what it does, not by how
//! long it asks to run.

use lab::budget::HostBudget;
use lab::scenario::run::Overrides;
use std::io::{BufRead, Cursor, Read};
use std::path::Path;
use trace::block::{BlockFormat, BlockReader};
use trace::input::TraceReader;
use trace::pagecache::{AccessMode, PageCacheOptions, Policy, replay_page_cache};
use trace::replay::{ReplayOptions, replay as replay_trace};

/// A fuzz target: any bytes in, nothing out, never a panic.
pub type Target = fn(&[u8]);

/// The targets, by name: the harness's argument and the regression directories are named so.
pub const TARGETS: [(&str, Target); 8] = [
    ("scenario", scenario),
    ("profile", profile),
    ("trace", trace),
    ("maps", maps),
    ("program", program),
    ("replay", replay),
    ("block", block),
    ("cli", cli),
];

/// Scheduling events a fuzzed run may take: a few hundred times the shipped scenarios' runs.
const EVENTS: u64 = 200_000;

/// References or requests a fuzzed trace reader yields at most (a compressed input may expand).
const RECORDS: usize = 100_000;

/// Host memory a fuzzed run may take.
const HOST: simcore::Bytes = simcore::Bytes::mib(128);

fn reader(data: &[u8]) -> Box<dyn BufRead> {
    Box::new(Cursor::new(data.to_vec()))
}

/// A scenario file: parsed, and when it parses, run to the end under its own kernel.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(s) = lab::scenario::parse::parse_scenario("fuzz.toml", text) else { return };
    let o = Overrides {
        host_budget: Some(HostBudget { bytes: HOST }),
        max_events: Some(EVENTS),
        ..Overrides::default()
    };
    let _ = lab::scenario::run::run(&s, &o, &mut |_| {});
}

/// A profile file (`mmsim calibrate`'s output): parsed, and when it parses, a shipped scenario
/// run on its machine.
pub fn profile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(file) = lab::profile_file::parse("fuzz.toml", text) else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Ok(s) = lab::scenario::run::load(&root.join("scenarios/fork-cow.toml").to_string_lossy())
    else {
        return;
    };
    let o = Overrides {
        host_budget: Some(HostBudget { bytes: HOST }),
        max_events: Some(EVENTS),
        profile: Some(file.profile),
        ..Overrides::default()
    };
    let _ = lab::scenario::run::run(&s, &o, &mut |_| {});
}

/// A memory-reference trace (lackey text or mmsim binary, any compression), read to the end.
pub fn trace(data: &[u8]) {
    let Ok(mut r) = TraceReader::from_reader(reader(data), "fuzz", false, 0, Default::default())
    else {
        return;
    };
    for _ in 0..RECORDS {
        if !matches!(r.next_ref(), Ok(Some(_))) {
            return;
        }
    }
}

/// A `/proc/PID/maps` file.
pub fn maps(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = trace::maps::parse(text, "fuzz.maps");
    }
}

/// A recorded program's header (`mmsim record`).
pub fn program(data: &[u8]) {
    let _ = trace::program::Program::read_header(&mut Cursor::new(data), "fuzz.mmprog");
}

/// A maps file, a NUL byte, then a trace: replayed with the TLBs checked after every batch.
pub fn replay(data: &[u8]) {
    let cut = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..cut]) else { return };
    let Ok(maps) = trace::maps::parse(text, "fuzz.maps") else { return };
    let rest = data.get(cut + 1..).unwrap_or_default();
    let Ok(r) = TraceReader::from_reader(reader(rest), "fuzz", true, 0, Default::default()) else {
        return;
    };
    let tiny = mm::Profile::named("tiny").expect("a shipped profile");
    let mut options = ReplayOptions::new(tiny, trace::replay::TextThp::Collapse);
    (options.check_every_batch, options.max_events) = (true, EVENTS);
    let _ = replay_trace(r, "fuzz", &maps, "fuzz.maps", &options, &mut |_, _| {});
}

/// A byte choosing the format, policy, access and cache size, then a block trace, replayed
/// through the page cache.
pub fn block(data: &[u8]) {
    let Some((&knobs, rest)) = data.split_first() else { return };
    let format = if knobs & 1 == 0 { BlockFormat::Arc } else { BlockFormat::OracleGeneral };
    let policy =
        [Policy::Classic, Policy::Mglru, Policy::Pure, Policy::Classic][(knobs >> 1) as usize & 3];
    let access = if knobs & 8 == 0 { AccessMode::Read } else { AccessMode::Mmap };
    let Ok(r) = BlockReader::from_reader(reader(rest), "fuzz", format) else { return };
    let cache = simcore::Bytes(u64::from(knobs >> 4).max(1) * 16 * 4096);
    let tiny = mm::Profile::named("tiny").expect("a shipped profile");
    let mut options = PageCacheOptions::new(tiny, policy, access, cache);
    (options.noreuse, options.max_requests) = (knobs & 0x80 != 0, Some(RECORDS as u64));
    options.max_events = EVENTS;
    let _ = replay_page_cache(r, "fuzz", &options, &mut |_, _| {});
}

/// The command line: a byte choosing the command and its input file, then its flags separated
/// by NUL bytes. Commands that write files (`trace convert`, `explore --schedule-out`,
/// `reproduce`) are left out; every run gets a small events and host budget unless the input
/// sets its own.
pub fn cli(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let file = |p: &str| root.join(p).to_string_lossy().into_owned();
    let mut args: Vec<String> = match which % 5 {
        0 => vec!["run".into(), file("scenarios/fork-cow.toml")],
        1 => vec!["sweep".into(), file("scenarios/zero-page.toml")],
        2 => vec!["explore".into(), file("scenarios/races/gup-fork.toml")],
        3 => vec![
            "replay".into(),
            file("traces/sum.lackey.gz"),
            "--maps".into(),
            file("traces/sum.maps"),
        ],
        _ => vec!["replay".into(), file("traces/arc/P6.lis.zst")],
    };
    for a in rest.split(|&b| b == 0) {
        let a = String::from_utf8_lossy(a);
        if a.contains("schedule-out") || a.contains("schedule_out") {
            return;
        }
        args.push(a.into_owned());
    }
    if which % 5 != 2 && !args.iter().any(|a| a.starts_with("--max-events")) {
        args.extend(["--max-events".into(), EVENTS.to_string()]);
    }
    if which % 5 < 2 && !args.iter().any(|a| a.starts_with("--host-budget")) {
        args.extend(["--host-budget".into(), "128MiB".into()]);
    }
    let _ = crate::main_with_args(std::iter::once("mmsim".to_string()).chain(args));
}

/// The seed corpus of `target`, as `(name, bytes)`, from the repository at `root`: the shipped
/// scenarios, traces, maps and block traces (the first part of each large one).
pub fn seeds(target: &str, root: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let read = |p: &str| std::fs::read(root.join(p));
    let head = |p: &str, n: u64| -> std::io::Result<Vec<u8>> {
        let raw = reader(&read(p)?);
        let mut out = Vec::new();
        trace::input::decompressed(raw, p)
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .take(n)
            .read_to_end(&mut out)?;
        Ok(out)
    };
    let mut seeds = Vec::new();
    match target {
        "scenario" => {
            for p in scenario_files(&root.join("scenarios"))? {
                let name = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned();
                seeds.push((name, std::fs::read(&p)?));
            }
        }
        "trace" => {
            for t in ["traces/sum.lackey.gz", "traces/bigtext.lackey.gz"] {
                seeds.push((format!("{t}.head"), head(t, 2048)?));
                let raw = read(t)?;
                seeds.push((format!("{t}.cut"), raw[..raw.len().min(512)].to_vec()));
            }
        }
        "profile" => seeds.push(("profiles/vm.toml".into(), read("profiles/vm.toml")?)),
        "maps" => {
            for m in ["traces/sum.maps", "traces/bigtext.maps"] {
                seeds.push((m.to_string(), read(m)?));
            }
        }
        "program" => {
            for t in ["traces/rustc-tiny.mmprog", "traces/javac-regex.mmprog"] {
                seeds.push((format!("{t}.head"), head(t, 8192)?));
            }
        }
        "replay" => {
            for t in ["sum", "bigtext"] {
                let mut bytes = read(&format!("traces/{t}.maps"))?;
                bytes.push(0);
                bytes.extend(head(&format!("traces/{t}.lackey.gz"), 1024)?);
                seeds.push((t.to_string(), bytes));
            }
        }
        "block" => {
            for t in ["P6", "P12"] {
                let mut bytes = vec![0x40];
                bytes.extend(head(&format!("traces/arc/{t}.lis.zst"), 1024)?);
                seeds.push((t.to_string(), bytes));
            }
        }
        "cli" => {
            let flags: [&[u8]; 5] = [
                b"\0--kernel\0v5.8\0--set\0cow_reuse=page_count",
                b"\x01--grid\0seed=0..3\0--csv",
                b"\x02--budget\x0020",
                b"\x03--json\0--text-thp\0collapse",
                b"\x04--cache\x001MiB\0--policy\0mglru\0--max-requests\x001000",
            ];
            for (i, f) in flags.iter().enumerate() {
                seeds.push((format!("command-{i}"), f.to_vec()));
            }
        }
        _ => return Err(std::io::Error::other(format!("no fuzz target `{target}`"))),
    }
    Ok(seeds.into_iter().map(|(name, bytes)| (name.replace('/', "_"), bytes)).collect())
}

/// The `.toml` files under `dir`, sorted.
fn scenario_files(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            out.extend(scenario_files(&p)?);
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}
