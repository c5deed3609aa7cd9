//! `bench record`: `mmsim record`'s throughput in references per host second, this binary's
//! recorder against a baseline's (an mmsim binary built from an earlier commit, `--baseline`),
//! on the same program.
//!
//! Each round runs the baseline's `record`, then this binary's, as child processes with the same
//! arguments (the guest's output discarded), and times each end to end (process start to exit:
//! qemu-user, the conversion, the file written); the references are the recorded program's.
//! Beside the wall-clock rate, each side's rate per CPU second (the child's and its children's
//! user and system time, from `/proc/self/stat`), which the machine's load moves less, and the
//! rate it printed for qemu-user's run. At least three rounds; medians, with the lowest and
//! highest of the end-to-end rate and of the per-round ratio. Then the two last recordings are
//! compared reference by reference: a deterministic single-threaded program (run under
//! `setarch -R` so that the guest's addresses repeat) must give identical streams; a threaded
//! one differs where its threads interleave differently. Target: 20 M references per second end
//! to end.

use super::median_spread;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use trace::program::Program;

#[derive(Debug, Args)]
pub(crate) struct RecordBenchArgs {
    /// An mmsim binary to compare with (built from the commit before a change); without it,
    /// only this binary is timed.
    #[arg(long)]
    baseline: Option<String>,
    /// Alternated rounds (the baseline, then this binary); at least three.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..))]
    rounds: u32,
    /// zstd's level, for both sides.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    zstd_level: i32,
    /// The program to record and its arguments (by default rustc compiling
    /// `traces/src/tiny.rs` to an object file, as `traces/record-programs.sh` records it).
    #[arg(last = true)]
    command: Vec<String>,
}

/// One side's run: references, wall and CPU seconds, and the qemu-side rate it printed.
struct Run {
    refs: u64,
    wall: f64,
    cpu: f64,
    qemu_rate: Option<f64>,
}

/// User and system seconds of this process's waited-for children (`/proc/self/stat` fields 16
/// and 17, in clock ticks of 1/100 s).
fn children_cpu() -> Result<f64, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc: {e}"))?;
    let fields: Vec<&str> =
        stat.rsplit_once(')').map_or("", |(_, f)| f).split_whitespace().collect();
    let tick = |k: usize| fields.get(k).and_then(|v| v.parse::<f64>().ok());
    match (tick(13), tick(14)) {
        (Some(u), Some(s)) => Ok((u + s) / 100.0),
        _ => Err("malformed /proc/self/stat".into()),
    }
}

/// The rate in `mmsim record`'s line `qemu-user recorded N references in S s (R M references/s`.
fn qemu_rate(stderr: &str) -> Option<f64> {
    let line = stderr.lines().find(|l| l.contains("qemu-user recorded"))?;
    let (_, rest) = line.split_once(" s (")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Runs `mmsim record` of `exe` into `out`.
fn run_side(
    exe: &Path,
    a: &RecordBenchArgs,
    command: &[String],
    out: &Path,
) -> Result<Run, String> {
    let cpu0 = children_cpu()?;
    let start = Instant::now();
    let child = Command::new(exe)
        .arg("record")
        .arg("-o")
        .arg(out)
        .args(["--zstd-level", &a.zstd_level.to_string(), "--"])
        .args(command)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = children_cpu()? - cpu0;
    let stderr = String::from_utf8_lossy(&child.stderr);
    if !child.status.success() {
        return Err(format!("{} record: {}\n{stderr}", exe.display(), child.status));
    }
    let path = out.display().to_string();
    let (p, _) = Program::open(&path).map_err(|e| e.to_string())?;
    let refs = p.threads.iter().map(|t| t.refs).sum();
    Ok(Run { refs, wall, cpu, qemu_rate: qemu_rate(&stderr) })
}

/// The default program: rustc compiling `traces/src/tiny.rs` into `tmp`.
fn default_command(tmp: &Path) -> Result<Vec<String>, String> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("rustc --print sysroot: {e} (or give a program after --)"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let source = "traces/src/tiny.rs";
    if !Path::new(source).is_file() {
        return Err(format!(
            "{source}: not found (run from the repository, or give a program after --)"
        ));
    }
    let object = tmp.join("tiny.o").display().to_string();
    let args = ["--edition", "2021", "--crate-type", "bin", "--emit=obj", "-o", &object, source];
    Ok(std::iter::once(format!("{sysroot}/bin/rustc")).chain(args.map(String::from)).collect())
}

/// Where the two recordings' streams first differ, or that they do not.
fn compare(old: &Path, new: &Path) -> Result<String, String> {
    let (old, new) = (old.display().to_string(), new.display().to_string());
    let (p, p_data) = Program::open(&old).map_err(|e| e.to_string())?;
    let (q, q_data) = Program::open(&new).map_err(|e| e.to_string())?;
    if p.threads.len() != q.threads.len() {
        return Ok(format!("differ: {} threads against {}", p.threads.len(), q.threads.len()));
    }
    let mut total = 0u64;
    for k in 0..p.threads.len() {
        let mut a = p.thread_trace(&old, p_data, k).map_err(|e| e.to_string())?;
        let mut b = q.thread_trace(&new, q_data, k).map_err(|e| e.to_string())?;
        for i in 0.. {
            let x = a.next_ref().map_err(|e| e.to_string())?;
            let y = b.next_ref().map_err(|e| e.to_string())?;
            if x != y {
                return Ok(format!("differ: thread {k}, reference {i}: {x:?} against {y:?}"));
            }
            if x.is_none() {
                break;
            }
            total += 1;
        }
    }
    let space = if p.header() == q.header() { "identical" } else { "different" };
    Ok(format!("identical ({total} references in {} threads; headers {space})", p.threads.len()))
}

/// A side's line: medians of its rounds.
fn report(name: &str, runs: &[Run]) {
    let mut wall: Vec<f64> = runs.iter().map(|r| r.refs as f64 / r.wall / 1e6).collect();
    let mut cpu: Vec<f64> = runs.iter().map(|r| r.refs as f64 / r.cpu.max(1e-9) / 1e6).collect();
    let mut qemu: Vec<f64> = runs.iter().filter_map(|r| r.qemu_rate).collect();
    let (rate, lo, hi) = median_spread(&mut wall);
    let (cpu, _, _) = median_spread(&mut cpu);
    let qemu =
        if qemu.is_empty() { "-".into() } else { format!("{:.1}", median_spread(&mut qemu).0) };
    let refs = runs.last().map_or(0, |r| r.refs);
    println!(
        "{name:<10} {refs:>12} {rate:>10.1} {:>13} {cpu:>10.1} {qemu:>10} {:>7}",
        format!("{lo:.1}..{hi:.1}"),
        "20"
    );
}

pub(super) fn record_bench(a: &RecordBenchArgs) -> Result<(), String> {
    let tmp = std::env::temp_dir().join(format!("mmsim-bench-record-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let result = rounds(a, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

/// The alternated rounds and the report, with the recordings (and rustc's object) in `tmp`.
fn rounds(a: &RecordBenchArgs, tmp: &Path) -> Result<(), String> {
    let command = if a.command.is_empty() { default_command(tmp)? } else { a.command.clone() };
    let this = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut sides: Vec<(&str, PathBuf)> = Vec::new();
    if let Some(b) = &a.baseline {
        sides.push(("baseline", PathBuf::from(b)));
    }
    sides.push(("this", this));
    println!("record benchmark: {}", command.join(" "));
    println!(
        "{} alternated rounds (the baseline, then this binary), zstd level {}; rates in M references/s, medians",
        a.rounds, a.zstd_level
    );
    let mut runs: Vec<Vec<Run>> = sides.iter().map(|_| Vec::new()).collect();
    for _ in 0..a.rounds {
        for (k, (name, exe)) in sides.iter().enumerate() {
            runs[k].push(run_side(exe, a, &command, &tmp.join(format!("{name}.mmprog")))?);
        }
    }
    println!(
        "{:<10} {:>12} {:>10} {:>13} {:>10} {:>10} {:>7}",
        "recorder", "references", "end to end", "spread", "per CPU s", "qemu side", "target"
    );
    for ((name, _), r) in sides.iter().zip(&runs) {
        report(name, r);
    }
    if let [old, new] = &runs[..] {
        let rate = |r: &Run| r.refs as f64 / r.wall;
        let mut ratios: Vec<f64> = old.iter().zip(new).map(|(o, n)| rate(n) / rate(o)).collect();
        let (r, lo, hi) = median_spread(&mut ratios);
        println!("end-to-end ratio this/baseline: {r:.2} (rounds {lo:.2}..{hi:.2})");
        let streams = compare(&tmp.join("baseline.mmprog"), &tmp.join("this.mmprog"))?;
        println!("reference streams of the last round: {streams}");
    }
    Ok(())
}
