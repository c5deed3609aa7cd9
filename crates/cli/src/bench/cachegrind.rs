//! `bench pagecache`'s instruction counts: host instructions per replayed request of both sides,
//! counted by `valgrind --tool=cachegrind` (its `I refs`), which unlike a timer does not move
//! with the machine's load.
//!
//! Each side runs twice under cachegrind on the same oracleGeneral file: over its first `n`
//! requests and over its first `2n`. The difference divided by `n` is the cost of requests
//! `n+1..2n`: process start, Python's imports, the machine's setup, the cache's first fill and
//! the report cancel out. mmsim's side is this binary (`bench pagecache --child POLICY`, the
//! timed round's replay alone, whose counts repeat exactly); libCacheSim's is the timed round's
//! Python script (with `PYTHONHASHSEED=0`), counted three times for the median: its counts vary
//! by a few million instructions between runs (about ±50 per request at n = 100,000).

use super::{PagecacheBenchArgs, libcachesim_script};
use std::path::Path;
use std::process::Command;

/// The `I refs` total of a cachegrind run of `cmd` (whose own output is discarded).
fn instructions(valgrind: &str, cmd: &[&std::ffi::OsStr]) -> Result<u64, String> {
    let out = Command::new(valgrind)
        .env("PYTHONHASHSEED", "0")
        .args(["--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"])
        .args(cmd)
        .output()
        .map_err(|e| {
            format!("{valgrind}: {e} (install valgrind, or give --cachegrind-requests 0)")
        })?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!("cachegrind of {cmd:?} failed: {}", tail.join(" / ")));
    }
    err.lines()
        .find_map(|l| l.split_once("I   refs:").or_else(|| l.split_once("I refs:")))
        .and_then(|(_, n)| n.trim().replace(',', "").parse().ok())
        .ok_or_else(|| format!("cachegrind of {cmd:?}: no `I refs` line in its output"))
}

/// Instructions per request over requests `n+1..2n` of one side, `run(k)` giving the
/// instructions of a run over the first `k` requests.
fn per_request(n: u64, run: &dyn Fn(u64) -> Result<u64, String>) -> Result<f64, String> {
    let (once, twice) = (run(n)?, run(2 * n)?);
    Ok(twice.saturating_sub(once) as f64 / n as f64)
}

/// Counts of libCacheSim's side whose median is taken: the Python's own start-up varies by a few
/// million instructions from run to run (the difference does not cancel it exactly), while
/// mmsim's runs are deterministic.
const PYTHON_REPEATS: usize = 3;

/// libCacheSim's LRU: instructions per request (the median of [`PYTHON_REPEATS`] counts).
pub(super) fn libcachesim(
    a: &PagecacheBenchArgs,
    og: &Path,
    pages: u64,
    n: u64,
) -> Result<f64, String> {
    let mut counts = (0..PYTHON_REPEATS)
        .map(|_| per_request(n, &|k| python_run(a, og, pages, k)))
        .collect::<Result<Vec<f64>, String>>()?;
    counts.sort_by(f64::total_cmp);
    Ok(counts[PYTHON_REPEATS / 2])
}

/// The instructions of one run of libCacheSim's side over the first `k` requests.
fn python_run(a: &PagecacheBenchArgs, og: &Path, pages: u64, k: u64) -> Result<u64, String> {
    let (pages, k) = (pages.to_string(), k.to_string());
    let script = libcachesim_script();
    let cmd = [
        a.python.as_ref(),
        "-c".as_ref(),
        script.as_ref(),
        og.as_os_str(),
        pages.as_ref(),
        k.as_ref(),
    ];
    instructions(&a.valgrind, &cmd)
}

/// mmsim's replay under `policy`: instructions per request.
pub(super) fn mmsim(
    a: &PagecacheBenchArgs,
    og: &Path,
    policy: &str,
    n: u64,
) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    per_request(n, &|k| {
        let k = k.to_string();
        let cmd = [
            exe.as_os_str(),
            "bench".as_ref(),
            "pagecache".as_ref(),
            "--trace".as_ref(),
            og.as_os_str(),
            "--cache".as_ref(),
            a.cache.as_ref(),
            "--max-requests".as_ref(),
            k.as_ref(),
            "--child".as_ref(),
            policy.as_ref(),
        ];
        instructions(&a.valgrind, &cmd)
    })
}
